"""``clawd adapters``: list, show, activate, roll back, go back to the base, delete, export.

They read the store directly (so they work without a daemon); activation, rollback and going
back to the base model ask the running daemon to hot-load, and only change the database when no
daemon answers.

Run alone::

    python -m clawd adapters --help
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import typer
from rich.table import Table

from clawd.cli.util import daemon_call, fail, open_store, out

adapters_app = typer.Typer(
    help="Inspect, activate, roll back and export the adapters clawd has learned.",
    no_args_is_help=True,
)


@adapters_app.command("list")
def adapters_list() -> None:
    """List adapter versions with their status and gate verdict (* = active)."""
    from clawd.adapters import registry

    with open_store() as store:
        rows = registry.list_adapters(store)
    table = Table("", "version", "status", "parent", "gate", "KL", "steps", box=None)
    for r in rows:
        gate = r["metrics"].get("gate") or {}
        verdict = {True: "passed", False: "failed"}.get(gate.get("passed"), "-")
        kl = f"{gate['kl_to_base']:.3f}" if "kl_to_base" in gate else "-"
        table.add_row(
            "*" if r["status"] == "active" else "",
            r["version"],
            r["status"],
            r["parent"] or "base",
            verdict,
            kl,
            str(r["metrics"].get("steps", "-")),
        )
    out.print(table if rows else "no adapters yet: `clawd train --now` makes one")


@adapters_app.command("show")
def adapters_show(version: str = typer.Argument(..., help="The adapter version.")) -> None:
    """Show an adapter: its manifest, the gate's figures, and the samples and hints behind it."""
    from clawd.adapters import registry

    with open_store() as store:
        try:
            a = registry.show(store, version)
        except registry.AdapterError as exc:
            raise fail(str(exc)) from None
    m = a["manifest"]
    out.print(
        f"[bold]{version}[/] {a['status']}  parent {a['parent'] or 'base'}  "
        f"run {a['run_id']}  base {m.get('base_model')}",
        highlight=False,
    )
    gate = a["gate"] or {}
    if gate:
        out.print(
            f"[bold]gate:[/] {'passed' if gate['passed'] else 'FAILED'} {gate['checks']}",
            highlight=False,
        )
        out.print(
            f"  before {gate['before']}  after {gate['after']}  "
            f"KL to base {gate['kl_to_base']:.4f} (budget {gate['max_kl']})",
            highlight=False,
        )
        if "kl_to_parent" in gate:
            out.print(
                f"  KL to parent {gate['kl_to_parent']:.4f} (step limit {gate['step_kl']})  "
                f"general ability {gate.get('ability')}",
                highlight=False,
            )
        if own := gate.get("own_ability"):
            out.print(f"  ability on your prompts {own}", highlight=False)
        for why in gate.get("skipped") or []:
            out.print(f"  skipped {why}", highlight=False)
        if walked := gate.get("walked_back"):
            out.print(f"  walked back: {walked['summary']}", highlight=False)
    if (metrics := m.get("metrics") or {}).get("steps") is not None:
        out.print(f"[bold]training:[/] {steps_line(metrics)}", highlight=False)
    if took := m.get("seconds"):
        from clawd.training.report import phase_times

        out.print(f"[bold]time:[/] {phase_times(took)}", highlight=False)
    for s in a["samples"]:
        out.print(
            f"  sample {s['id']} {s['kind']:7} reward {s['reward']:+.0f} {s['status']:8}"
            f" hint: {s['hint'] or '-'}",
            highlight=False,
        )
    out.print(f"files: {a['path']}", highlight=False)


def steps_line(metrics: dict) -> str:
    """A manifest's step counts in words: kept, and taken back by the trust region."""
    line = f"{metrics['steps']} steps kept"
    if undone := metrics.get("undone"):
        line += f", {undone} taken back"
    return line


def _switch(path: str, body: dict | None, offline: Callable[[], str]) -> None:
    answer = daemon_call("POST", path, body)
    if answer is not None:
        pause = answer.get("pause_ms")
        extra = f" (serving paused {pause:.1f} ms)" if pause is not None else ""
        out.print(f"now serving: {answer.get('active') or 'the base model'}{extra}")
    else:
        out.print(f"{offline()} (the daemon is not running: it loads this at its next start)")


@adapters_app.command("activate")
def adapters_activate(
    version: str = typer.Argument(..., help="The adapter version."),
    force: bool = typer.Option(False, "--force", help="Activate even if the gate rejected it."),
) -> None:
    """Serve this adapter now (hot-loaded into the running daemon, no restart)."""
    from clawd.adapters import registry

    def offline() -> str:
        with open_store() as store:
            try:
                row = registry.get(store, version)
            except registry.AdapterError as exc:
                raise fail(str(exc)) from None
            if row["status"] == "rejected" and not force:
                raise fail(f"{version} failed the promotion gate; add --force to use it")
            registry.set_active(store, version)
        return f"active: {version}"

    _switch(f"/v1/adapters/{quote(version, safe='')}/activate", {"force": force}, offline)


@adapters_app.command("rollback")
def adapters_rollback() -> None:
    """Go back to the active adapter's parent (or the base model)."""
    from clawd.adapters import registry

    def offline() -> str:
        with open_store() as store:
            try:
                target = registry.rollback_target(store)
            except registry.AdapterError as exc:
                raise fail(str(exc)) from None
            registry.set_active(store, target)
        return f"active: {target or 'the base model'}"

    _switch("/v1/adapters/rollback", None, offline)


@adapters_app.command("base")
def adapters_base() -> None:
    """Serve the base model without any adapter (adapters are kept)."""
    from clawd.adapters import registry

    def offline() -> str:
        with open_store() as store:
            registry.set_active(store, None)
        return "active: the base model"

    _switch("/v1/adapters/base", None, offline)


@adapters_app.command("delete")
def adapters_delete(version: str = typer.Argument(..., help="The adapter version.")) -> None:
    """Delete an adapter version (not the active one, nor its parent)."""
    from clawd.adapters import registry

    with open_store() as store:
        try:
            registry.delete(store, version)
        except registry.AdapterError as exc:
            raise fail(str(exc)) from None
    out.print(f"deleted {version}")


@adapters_app.command("export")
def adapters_export(
    version: str = typer.Argument(..., help="The adapter version."),
    fmt: str = typer.Option("gguf", "--format", help="gguf (llama.cpp) or peft (peft, vLLM)."),
    dest: Path = typer.Option(Path("."), "--out", help="Target file or folder."),
) -> None:
    """Copy an adapter out of CLAWD_HOME for use elsewhere."""
    from clawd.adapters import registry

    with open_store() as store:
        try:
            path = registry.export(store, version, fmt, dest)
        except registry.AdapterError as exc:
            raise fail(str(exc)) from None
    out.print(str(path), highlight=False)
