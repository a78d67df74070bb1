"""The ``clawd`` command line: one sub-command group per part of the product.

Every command and option carries help text (a test checks it). Errors reach the user as one
line on stderr and a non-zero exit status, never a traceback.

Run alone::

    python -m clawd --help
"""

from __future__ import annotations

import os
from urllib.parse import quote

import typer
from rich.table import Table

from clawd import __version__
from clawd.cli.adapters import adapters_app
from clawd.cli.memory import memory_app
from clawd.cli.signals import signals_app
from clawd.cli.train import train_cmd
from clawd.cli.util import err, fail, out
from clawd.config import (
    ConfigError,
    Settings,
    clawd_home,
    config_path,
    load_settings,
    private_state,
)
from clawd.configfile import describe, set_value, unset_value
from clawd.models import CATALOG, ModelError, ensure_embedded, installed, pull, use

app = typer.Typer(
    help="clawd: a personal assistant daemon that learns from the way you reply.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
config_app = typer.Typer(help="Show and change the configuration.", no_args_is_help=True)
models_app = typer.Typer(help="List, download and choose models.", no_args_is_help=True)
app.add_typer(config_app, name="config")
app.add_typer(models_app, name="models")

app.add_typer(signals_app, name="signals")
app.add_typer(adapters_app, name="adapters")
app.add_typer(memory_app, name="memory")
app.command("train")(train_cmd)


def _version(value: bool) -> None:
    if value:
        out.print(f"clawd {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """clawd keeps every reply you give, learns a LoRA adapter from them, and hot-loads it.

    All state lives under CLAWD_HOME (default ~/.local/share/clawd).
    """


@config_app.command("show")
def config_show() -> None:
    """Print every setting's effective value, where it came from, and what it does."""
    home = clawd_home()
    try:
        rows = describe(home)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    out.print(f"# CLAWD_HOME = {home}", highlight=False, soft_wrap=True)
    out.print(f"# config file: {config_path(home)}", highlight=False, soft_wrap=True)
    for row in rows:
        out.print(f"\n# {row.description}\n# from: {row.source}", highlight=False, soft_wrap=True)
        out.print(f"{row.name} = {row.value!r}", highlight=False, soft_wrap=True)


@config_app.command("set")
def config_set(
    name: str = typer.Argument(..., help="The setting, as `clawd config show` names it."),
    value: str = typer.Argument(..., help="Its new value (true/false, a number, text)."),
) -> None:
    """Write one setting to config.toml, checked like the file (a running daemon applies it
    when restarted)."""
    home = clawd_home()
    try:
        written = set_value(home, name, value)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    out.print(f"{name} = {written!r} (in {config_path(home)})", highlight=False, soft_wrap=True)
    _env_note(name)


@config_app.command("unset")
def config_unset(name: str = typer.Argument(..., help="The setting to remove.")) -> None:
    """Remove one setting from config.toml: its default applies again."""
    home = clawd_home()
    try:
        removed = unset_value(home, name)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    default = Settings.model_fields[name].default
    if removed:
        out.print(f"{name} removed: the default {default!r} applies", highlight=False)
    else:
        out.print(f"{name} was not set in {config_path(home)}", highlight=False, soft_wrap=True)
    _env_note(name)


def _env_note(name: str) -> None:
    env = "CLAWD_" + name.upper()
    if env in os.environ:
        out.print(f"note: the environment variable {env} overrides the file", highlight=False)


@models_app.command("list")
def models_list() -> None:
    """Show the catalog, what is installed, and which model is the default."""
    home = clawd_home()
    try:
        default = load_settings(home).model
    except ConfigError as exc:
        raise fail(str(exc)) from None
    have = {m.name: m for m in installed(home)}
    table = Table("", "name", "status", "size", "description", box=None, pad_edge=False)
    for entry in CATALOG.values():
        model = have.pop(entry.name, None)
        status = "installed" if model else "available"
        size = f"{(model.size / 1e6 if model else entry.size_mb):.0f} MB"
        mark = "*" if default == entry.name else ""
        table.add_row(mark, entry.name, status, size, entry.description)
    for model in have.values():  # local files pulled under their own names
        mark = "*" if default == model.name else ""
        table.add_row(mark, model.name, "installed", f"{model.size / 1e6:.0f} MB", model.path)
    out.print(table)
    if default not in CATALOG and not any(m.name == default for m in installed(home)):
        out.print(f"* default: {default}", highlight=False)
    else:
        out.print("* = default (change with `clawd models use NAME`)")


@models_app.command("pull")
def models_pull(
    source: str = typer.Argument(..., help="A catalog name (see `models list`) or a .gguf path."),
    name: str = typer.Option(
        None, "--name", help="Install under this name (default: catalog name or file stem)."
    ),
    make_default: bool = typer.Option(False, "--use", help="Also make it the default model."),
) -> None:
    """Download a catalog model or copy a local GGUF file into CLAWD_HOME/models."""
    home = clawd_home()
    try:
        model = pull(source, home, name=name, report=lambda m: err.print(m, highlight=False))
        if make_default:
            use(model.name, home)
            out.print(f"default model: {model.name}", highlight=False)
    except (ModelError, ConfigError, OSError) as exc:
        raise fail(str(exc)) from None
    out.print(model.path, highlight=False)


@models_app.command("use")
def models_use(
    model: str = typer.Argument(..., help="An installed model name or a path to a .gguf file."),
) -> None:
    """Make a model the default that `clawd serve` loads (written to config.toml)."""
    home = clawd_home()
    try:
        path = use(model, home)
    except (ModelError, ConfigError) as exc:
        raise fail(str(exc)) from None
    out.print(f"default model: {model} ({path})", highlight=False)


def _progress(message: str) -> None:
    err.print(f"clawd: {message}", highlight=False)


@app.command("serve")
def serve(
    host: str = typer.Option(None, "--host", help="Address to listen on (default: setting host)."),
    port: int = typer.Option(None, "--port", help="TCP port (default: setting port, 8765)."),
    model: str = typer.Option(
        None, "--model", help="Installed model name or .gguf path (default: setting model)."
    ),
    allow_remote: bool = typer.Option(
        False, "--allow-remote", help="Allow a non-loopback --host (other machines can connect)."
    ),
) -> None:
    """Run the daemon: an OpenAI-compatible REST API on 127.0.0.1 that learns from replies."""
    from clawd.serving.app import run

    try:
        home = clawd_home()
        ensure_embedded(model or load_settings(home).model, home, report=_progress)
        run(host, port, model, allow_remote)
    except (ModelError, ConfigError, OSError) as exc:
        raise fail(str(exc)) from None


@app.command("chat")
def chat(
    url: str = typer.Option(
        None, "--url", help="Connect to this daemon (default: the local one, started if needed)."
    ),
) -> None:
    """Open the TUI: chat, review what clawd learns, and manage its adapters."""
    from clawd.ui.app import run
    from clawd.ui.launch import LaunchError

    try:
        if url is None:  # the local daemon is started if needed: it needs its model first
            home = clawd_home()
            ensure_embedded(load_settings(home).model, home, report=_progress)
        run(url)
    except (LaunchError, ConfigError, ModelError, OSError) as exc:
        raise fail(str(exc)) from None


@app.command("token")
def token() -> None:
    """Print the API token that clients send as 'Authorization: Bearer <token>'."""
    from clawd.config import ensure_token

    out.print(ensure_token(clawd_home()), highlight=False, soft_wrap=True)


@app.command("forget")
def forget(
    conversation: str = typer.Argument(..., help="The conversation id to delete."),
    url: str = typer.Option(None, "--url", help="The daemon's address (default: from settings)."),
) -> None:
    """Delete a conversation, every signal learned from it and the memories its replies made
    (through the running daemon)."""
    import httpx

    from clawd.config import ensure_token

    home = clawd_home()
    try:
        settings = load_settings(home)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    base = url or f"http://{settings.host}:{settings.port}"
    headers = {"Authorization": f"Bearer {ensure_token(home)}"}
    try:
        resp = httpx.delete(
            f"{base}/v1/conversations/{quote(conversation, safe='')}", headers=headers, timeout=30
        )
    except httpx.HTTPError as exc:
        msg = f"cannot reach the daemon at {base} ({exc}); start it with `clawd serve`"
        raise fail(msg) from None
    if resp.status_code != 200:
        raise fail(resp.json().get("error", {}).get("message", resp.text))
    removed = resp.json().get("removed") or {}
    what = ", ".join(f"{n} {k}" for k, n in removed.items() if n)
    out.print(f"forgot {conversation}" + (f": removed {what}" if what else ""), highlight=False)


def main() -> None:
    private_state()
    app()


if __name__ == "__main__":
    main()
