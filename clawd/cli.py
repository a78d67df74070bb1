"""The ``clawd`` command line: one sub-command group per part of the product.

Every command and option carries help text (a test checks it). Errors reach the user as one
line on stderr and a non-zero exit status, never a traceback.

Run alone::

    python -m clawd --help
"""

from __future__ import annotations

import contextlib
import os

import typer
from rich.console import Console
from rich.table import Table

from clawd import __version__
from clawd.config import ConfigError, clawd_home, config_path, describe, load_settings
from clawd.models import CATALOG, ModelError, installed, pull, use

app = typer.Typer(
    help="clawd: a personal assistant daemon that learns from the way you reply.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
config_app = typer.Typer(help="Show the configuration.", no_args_is_help=True)
models_app = typer.Typer(help="List, download and choose models.", no_args_is_help=True)
app.add_typer(config_app, name="config")
app.add_typer(models_app, name="models")
signals_app = typer.Typer(
    help="Review what clawd learned from your replies before it trains.", no_args_is_help=True
)
app.add_typer(signals_app, name="signals")

out = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


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
    from clawd.serve import run

    try:
        run(host, port, model, allow_remote)
    except (ModelError, ConfigError, OSError) as exc:
        raise fail(str(exc)) from None


@app.command("token")
def token() -> None:
    """Print the API token that clients send as 'Authorization: Bearer <token>'."""
    from clawd.serve import ensure_token

    out.print(ensure_token(clawd_home()), highlight=False, soft_wrap=True)


@app.command("forget")
def forget(
    conversation: str = typer.Argument(..., help="The conversation id to delete."),
    url: str = typer.Option(None, "--url", help="The daemon's address (default: from settings)."),
) -> None:
    """Delete a conversation and every signal learned from it (through the running daemon)."""
    import httpx

    from clawd.serve import ensure_token

    home = clawd_home()
    try:
        settings = load_settings(home)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    base = url or f"http://{settings.host}:{settings.port}"
    headers = {"Authorization": f"Bearer {ensure_token(home)}"}
    try:
        resp = httpx.delete(f"{base}/v1/conversations/{conversation}", headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        msg = f"cannot reach the daemon at {base} ({exc}); start it with `clawd serve`"
        raise fail(msg) from None
    if resp.status_code != 200:
        raise fail(resp.json().get("error", {}).get("message", resp.text))
    out.print(f"forgot {conversation}", highlight=False)


def _store():
    from clawd.store import Store, StoreError

    try:
        return Store.open(clawd_home())
    except StoreError as exc:
        raise fail(str(exc)) from None


@signals_app.command("list")
def signals_list(
    status: str = typer.Option(
        None, "--status", help="Only samples in this state: pending, approved, vetoed, used."
    ),
    limit: int = typer.Option(30, "--limit", help="How many, newest first."),
) -> None:
    """List learning signals: the judge's score, the hint, and the training sample's state."""
    from clawd.review import list_signals

    if status not in (None, "pending", "approved", "vetoed", "used"):
        raise fail("--status must be pending, approved, vetoed or used")
    with _store() as store:
        rows = list_signals(store, status, limit)
    table = Table("id", "score", "sample", "state", "hint / next message", box=None)
    for r in rows:
        text = r["hint"] or f"({r['next_role'] or 'feedback'}) {r['next_state'] or ''}"
        table.add_row(
            str(r["id"]),
            f"{r['score']:+d}",
            r["sample_kind"] or "-",
            r["sample_status"] or "-",
            text.replace("\n", " ")[:70],
        )
    out.print(table)
    if not rows:
        out.print("no signals yet: they appear after you reply to an answer")


@signals_app.command("show")
def signals_show(signal_id: int = typer.Argument(..., help="The signal id (see `list`).")) -> None:
    """Show one signal: the answer, what came next, every vote's raw text, and the sample."""
    from clawd.record import NotFound
    from clawd.review import show_signal

    with _store() as store:
        try:
            s = show_signal(store, signal_id)
        except NotFound as exc:
            raise fail(str(exc)) from None
    out.print(f"[bold]signal {s['id']}[/] turn {s['turn_id']}  score {s['score']:+d}")
    out.print(f"[bold]answer:[/] {s['response']}", highlight=False)
    out.print(f"[bold]next ({s['next_role']}):[/] {s['next_state']}", highlight=False)
    out.print(f"[bold]hint[/] ({s['hint_source'] or 'none'}): {s['hint'] or '-'}", highlight=False)
    for i, v in enumerate(s["votes"]):
        out.print(
            f"[bold]vote {i} ({v['kind']}) -> {v['score']}[/]\n{v['raw_text']}", highlight=False
        )
    sample = s["sample"]
    if sample:
        out.print(
            f"[bold]sample:[/] {sample['kind']}, reward {sample['reward']:+.0f}, "
            f"{len(sample['response_token_ids'])} response tokens, {sample['status']}"
        )
    else:
        out.print("[bold]sample:[/] none (no hint and a neutral score)")


def _set_status(signal_id: int, status: str) -> None:
    from clawd.record import NotFound
    from clawd.review import ReviewError, set_status

    with _store() as store:
        try:
            set_status(store, signal_id, status)
        except (NotFound, ReviewError) as exc:
            raise fail(str(exc)) from None
    out.print(f"signal {signal_id}: sample {status}")


@signals_app.command("approve")
def signals_approve(signal_id: int = typer.Argument(..., help="The signal id.")) -> None:
    """Let this signal's sample be used by the next training run."""
    _set_status(signal_id, "approved")


@signals_app.command("veto")
def signals_veto(signal_id: int = typer.Argument(..., help="The signal id.")) -> None:
    """Never train on this signal's sample."""
    _set_status(signal_id, "vetoed")


@app.command("train")
def train_cmd(
    now: bool = typer.Option(False, "--now", help="Train on the approved samples right now."),
) -> None:
    """Show recent training runs, or with --now run one here with a progress bar."""
    import json

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from clawd import train

    home = clawd_home()
    if not now:
        with _store() as store:
            runs = list(store.db["training_runs"].rows_where(order_by="id desc", limit=10))
            waiting = store.db["samples"].count_where("status = 'approved'")
        table = Table("run", "status", "samples", "adapter", "reason", box=None)
        for r in runs:
            table.add_row(
                str(r["id"]),
                r["status"],
                str(r["n_samples"]),
                r["adapter_version"] or "-",
                (r["reason"] or "")[:60],
            )
        out.print(table if runs else "no training runs yet")
        settings = load_settings(home)
        out.print(
            f"{waiting} approved samples wait; nightly run at {settings.train_at} "
            "while `clawd serve` runs; `clawd train --now` trains immediately"
        )
        return
    with contextlib.suppress(OSError):
        os.nice(10)
    columns = (
        TextColumn("[bold]training"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
    )
    with Progress(*columns, console=err, transient=False) as bar:
        task = bar.add_task("train", total=None, info="loading the model")

        def progress(step: int, total: int, m: dict) -> None:
            info = f"loss {m['loss']:+.4f}  adv {m['adv_mean']:+.3f}  clip {m['clip_fraction']:.2f}"
            bar.update(task, completed=step, total=total, info=info)

        try:
            summary = train.run(home, progress=progress, trigger="cli")
        except train.NothingToTrain as exc:
            out.print(f"{exc}: reply to a few answers first (see `clawd signals list`)")
            return
        except (train.TrainingError, ModelError, ConfigError) as exc:
            raise fail(f"training failed: {exc}") from None
    out.print(json.dumps(summary, indent=2), highlight=False)
    out.print(f"candidate adapter {summary['version']} written to {summary['path']}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
