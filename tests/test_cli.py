import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

from clawd.cli.main import app
from clawd.models import pull

runner = CliRunner()


def all_commands() -> list[tuple[str, click.Command]]:
    root = typer.main.get_command(app)
    found = [("clawd", root)]

    def walk(prefix: str, group: click.Group) -> None:
        for name, cmd in group.commands.items():
            found.append((f"{prefix} {name}", cmd))
            if isinstance(cmd, click.Group):
                walk(f"{prefix} {name}", cmd)

    walk("clawd", root)
    return found


@pytest.mark.parametrize("path,cmd", all_commands(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_command_and_option_has_help(path: str, cmd: click.Command) -> None:
    assert (cmd.help or "").strip(), f"{path} has no help text"
    for param in cmd.params:
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"{path} {param.opts} has no help text"
        elif isinstance(param, click.Argument):
            assert (getattr(param, "help", "") or "").strip(), f"{path} {param.name} has no help"
    result = runner.invoke(app, [*path.split()[1:], "--help"])
    assert result.exit_code == 0 and "Usage" in result.output


def test_models_list_shows_the_default_installed(home: Path, smollm2_gguf: Path) -> None:
    result = runner.invoke(app, ["models", "list"])
    assert result.exit_code == 0
    assert "smollm2-135m" in result.output and "available" in result.output
    pull(str(smollm2_gguf), home, name="smollm2-135m", report=lambda m: None)
    result = runner.invoke(app, ["models", "list"])
    line = next(line for line in result.output.splitlines() if "smollm2-135m" in line)
    assert line.lstrip().startswith("*") and "installed" in line


def test_models_use_and_config_show(home: Path, tiny_qwen3_gguf: Path) -> None:
    result = runner.invoke(app, ["models", "pull", str(tiny_qwen3_gguf), "--name", "tiny", "--use"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["config", "show"], env={"CLAWD_PORT": "9999"})
    assert result.exit_code == 0
    assert "'tiny'" in result.output and "config.toml" in result.output
    assert "env CLAWD_PORT" in result.output


def test_errors_are_one_line_not_a_traceback(home: Path) -> None:
    result = runner.invoke(app, ["models", "use", "nonexistent"])
    assert result.exit_code == 1
    assert "error: unknown model 'nonexistent'" in result.output
    assert "Traceback" not in result.output
    home.mkdir(parents=True)
    (home / "config.toml").write_text("port = 'x'\n")
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 1 and "port" in result.output


def test_a_long_error_stays_on_one_line(home: Path) -> None:
    """An error wider than the terminal is not wrapped (a path or id in it is copied whole)."""
    name = "a-model-name-much-longer-than-any-terminal-is-wide-" * 3
    result = runner.invoke(app, ["models", "use", name])
    assert result.exit_code == 1
    (line,) = [x for x in result.output.splitlines() if x.strip()]
    assert line.startswith("error: ") and f"'{name}'" in line


def test_the_console_script_runs(home: Path) -> None:
    exe = Path(sys.executable).parent / "clawd"
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("clawd ")


def test_serve_refuses_a_public_address_without_the_flag(home: Path) -> None:
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code != 0
    assert "--allow-remote" in result.output


def test_train_shows_how_many_waiting_samples_the_method_can_use(
    home: Path, tiny_qwen3_gguf: Path
) -> None:
    from clawd.store.db import Store
    from tests.test_train import add_sample

    with Store.open(home) as store:
        add_sample(store, tiny_qwen3_gguf, hint=None, reward=-1, kind="rl")
    result = runner.invoke(app, ["train"], env={"CLAWD_TRAIN_METHOD": "opd"})
    assert result.exit_code == 0, result.output
    assert "1 approved samples wait (0 usable by train_method opd)" in result.output
    result = runner.invoke(app, ["train"])
    assert "1 approved samples wait;" in result.output


def test_clawd_keeps_its_state_private(tmp_path: Path) -> None:
    """CLAWD_HOME is 0700 and what clawd writes there is 0600, whatever the user's umask."""
    import os
    import stat
    import subprocess
    import sys

    home = tmp_path / "private-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWD_")}
    env["CLAWD_HOME"] = str(home)
    run = lambda *args: subprocess.run(  # noqa: E731
        [
            sys.executable,
            "-c",
            "import os; os.umask(0o022); from clawd.cli.main import main; main()",
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run("token").returncode == 0
    assert run("signals", "list").returncode == 0  # opens (creates) the database
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(home) == 0o700
    files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.name == "clawd.db" for p in files) and any(p.name == "token" for p in files)
    assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
    home.chmod(0o755)  # a home made before this release is closed again
    assert run("token").returncode == 0 and mode(home) == 0o700


def test_adapters_show_says_what_the_trust_region_took_back() -> None:
    from clawd.cli.adapters import steps_line

    assert steps_line({"steps": 3, "undone": 2}) == "3 steps kept, 2 taken back"
    assert steps_line({"steps": 4, "undone": 0}) == "4 steps kept"
