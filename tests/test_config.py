import logging
from pathlib import Path

import pytest

from clawd.config import REMOVED_SETTINGS, ConfigError, Settings, clawd_home, load_settings
from clawd.configfile import describe, set_value


def test_home_defaults_to_xdg_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CLAWD_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert clawd_home() == tmp_path / "xdg" / "clawd"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert clawd_home() == tmp_path / ".local" / "share" / "clawd"


def test_defaults_file_and_env_in_order(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings(home).port == 8765
    home.mkdir(parents=True)
    (home / "config.toml").write_text("port = 9000\nn_ctx = 2048\n")
    assert load_settings(home).port == 9000
    monkeypatch.setenv("CLAWD_PORT", "9100")
    settings = load_settings(home)
    assert (settings.port, settings.n_ctx) == (9100, 2048)
    sources = {row.name: row.source for row in describe(home)}
    assert sources["port"] == "env CLAWD_PORT"
    assert sources["n_ctx"].endswith("config.toml")
    assert sources["host"] == "default"
    assert all(row.description for row in describe(home))


def test_bad_values_name_the_setting_and_its_origin(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text("port = 70000\n")
    with pytest.raises(ConfigError, match=r"port \(.*config.toml\)"):
        load_settings(home)
    (home / "config.toml").write_text("")
    monkeypatch.setenv("CLAWD_N_CTX", "lots")
    with pytest.raises(ConfigError, match="n_ctx .environment variable CLAWD_N_CTX"):
        load_settings(home)


def test_unknown_keys_and_broken_toml_are_reported(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text("prot = 1\n")
    with pytest.raises(ConfigError, match="unknown setting.*prot"):
        load_settings(home)
    (home / "config.toml").write_text("port = = 1\n")
    with pytest.raises(ConfigError, match="cannot read it as TOML"):
        load_settings(home)


def test_a_removed_setting_is_ignored_with_a_warning(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A config.toml written before a setting was removed still loads; the log names it."""
    home.mkdir(parents=True)
    (home / "config.toml").write_text("port = 9000\ntrain_loop_guard = true\n")
    with caplog.at_level(logging.WARNING, logger="clawd.config"):
        assert load_settings(home).port == 9000
    assert "train_loop_guard" in caplog.text and "removed" in caplog.text
    assert REMOVED_SETTINGS.isdisjoint(Settings.model_fields)
    (home / "config.toml").write_text("prot = 1\ngate_new_degenerate = 0\n")
    with pytest.raises(ConfigError, match="unknown setting.*prot") as err:
        load_settings(home)
    assert "gate_new_degenerate" not in str(err.value).split(";")[0]
    # a removed value (train_method = "hindsight") too: the default applies
    (home / "config.toml").write_text('train_method = "hindsight"\ntrain_teacher_check = false\n')
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="clawd.config"):
        assert load_settings(home).train_method == "combined"
    assert "train_method = 'hindsight'" in caplog.text and "train_teacher_check" in caplog.text


def test_set_value_keeps_comments_and_validates(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text("# my settings\nport = 9000 # mine\n")
    set_value(home, "model", "qwen3-1.7b")
    text = (home / "config.toml").read_text()
    assert "# my settings" in text and "# mine" in text
    assert load_settings(home).model == "qwen3-1.7b"
    with pytest.raises(ConfigError, match="port"):
        set_value(home, "port", 0)
    with pytest.raises(ConfigError, match="unknown setting"):
        set_value(home, "nope", 1)
    assert load_settings(home).port == 9000


def test_the_judge_api_key_is_masked_in_what_config_show_prints(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from clawd.cli.main import app

    monkeypatch.setenv("CLAWD_JUDGE_API_KEY", "sk-very-secret")
    monkeypatch.setenv("CLAWD_JUDGE_URL", "http://127.0.0.1:11434/v1")
    assert load_settings(home).judge_api_key == "sk-very-secret"  # used as it is
    rows = {r.name: r for r in describe(home)}
    assert rows["judge_api_key"].value == "********" and rows["judge_url"].value.endswith("/v1")
    shown = CliRunner().invoke(app, ["config", "show"])
    assert shown.exit_code == 0 and "sk-very-secret" not in shown.output
    assert "judge_mode = 'probe'" in shown.output


def test_config_set_and_unset_from_the_command_line(home: Path) -> None:
    """Once the only way to change a setting was to edit TOML by hand."""
    from typer.testing import CliRunner

    from clawd.cli.main import app

    runner = CliRunner()
    home.mkdir(parents=True)
    (home / "config.toml").write_text("# mine\nport = 9000\n")
    done = runner.invoke(app, ["config", "set", "memory", "false"])
    assert done.exit_code == 0 and "memory = False" in done.output
    assert runner.invoke(app, ["config", "set", "memory_tokens", "128"]).exit_code == 0
    settings = load_settings(home)
    assert settings.memory is False and settings.memory_tokens == 128 and settings.port == 9000
    assert "# mine" in (home / "config.toml").read_text()
    bad = runner.invoke(app, ["config", "set", "memory_tokens", "lots"])
    assert bad.exit_code != 0 and "memory_tokens" in bad.output
    unknown = runner.invoke(app, ["config", "set", "nope", "1"])
    assert unknown.exit_code != 0 and "unknown setting" in unknown.output
    assert load_settings(home).memory_tokens == 128  # a refused value changes nothing
    gone = runner.invoke(app, ["config", "unset", "memory"])
    assert gone.exit_code == 0 and "default True applies" in gone.output
    assert load_settings(home).memory is True
    assert "was not set" in runner.invoke(app, ["config", "unset", "memory"]).output
