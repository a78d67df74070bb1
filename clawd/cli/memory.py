"""``clawd memory``: list, add, edit, switch off and delete what clawd remembers of you.

They work on the store directly, so they work without a daemon; a running daemon reads the
memories for every answer, so a change applies from the next answer on.

Run alone::

    python -m clawd memory --help
"""

from __future__ import annotations

import typer
from rich.table import Table

from clawd.cli.util import fail, open_store, out

memory_app = typer.Typer(
    help="What clawd remembers of you: the preferences and facts it puts in every answer's "
    "context until an adapter has learned them.",
    no_args_is_help=True,
)


def _gap(m: dict) -> str:
    if m["gap"] is None or not m["base_gap"]:
        return "-"
    return f"{m['gap']:.3f}/{m['base_gap']:.3f}"


@memory_app.command("list")
def memory_list(
    all_: bool = typer.Option(False, "--all", help="Also the memories a newer one replaced."),
) -> None:
    """List memories: id, status (active: in every prompt; learned: in the adapter; off),
    kind, gap (adapter's / base model's) and text."""
    from clawd.store import memories

    with open_store() as store:
        rows = memories.list_memories(store)
    rows = [m for m in rows if all_ or m["status"] != "replaced"]
    if not rows:
        out.print("no memories yet: state a preference in a reply, or `clawd memory add TEXT`")
        return
    table = Table("id", "status", "kind", "gap", "text", "from", box=None)
    for m in rows:
        table.add_row(str(m["id"]), m["status"], m["kind"], _gap(m), m["text"], m["source"])
    out.print(table)


@memory_app.command("add")
def memory_add(
    text: str = typer.Argument(..., help="The memory, e.g. 'Address the user as Ana.'"),
    kind: str = typer.Option(
        "other",
        "--kind",
        help="name, length, language, format, tone, fact or other; a newer "
        "name, length or language replaces the older one.",
    ),
) -> None:
    """Add a memory; it applies from the next answer on."""
    from clawd.store import memories

    with open_store() as store:
        try:
            mem, replaced = memories.add(store, text, kind, source="user")
        except ValueError as exc:
            raise fail(str(exc)) from None
    out.print(f"remembered {mem['id']}: {mem['text']}", highlight=False)
    if replaced:
        out.print(f"  (replaces {replaced['id']}: {replaced['text']})", highlight=False)


@memory_app.command("edit")
def memory_edit(
    memory_id: int = typer.Argument(..., help="The memory's id (`clawd memory list`)."),
    text: str = typer.Option(None, "--text", help="A new text."),
    off: bool = typer.Option(False, "--off", help="Keep it out of every prompt."),
    on: bool = typer.Option(False, "--on", help="Put it back in the prompt."),
) -> None:
    """Change a memory's text, or switch it off or on."""
    from clawd.store import memories
    from clawd.store.record import NotFound

    if off and on:
        raise fail("--off and --on: give one")
    if text is None and not (off or on):
        raise fail("nothing to change: give --text, --off or --on")
    with open_store() as store:
        try:
            mem = memories.edit(store, memory_id, text, "off" if off else "active" if on else None)
        except (ValueError, NotFound) as exc:
            raise fail(str(exc)) from None
    out.print(f"{mem['id']} {mem['status']}: {mem['text']}", highlight=False)


@memory_app.command("rm")
def memory_rm(
    memory_ids: list[int] = typer.Argument(..., help="The ids of the memories to delete."),
) -> None:
    """Delete memories (a memory one of them had replaced comes back)."""
    from clawd.store import memories
    from clawd.store.record import NotFound

    with open_store() as store:
        try:
            restored = memories.delete(store, memory_ids)
        except NotFound as exc:
            raise fail(str(exc)) from None
    out.print(f"deleted {', '.join(map(str, memory_ids))}", highlight=False)
    for r in restored:
        out.print(f"  restored {r}, which it had replaced", highlight=False)
