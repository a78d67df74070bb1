"""The memories view: what clawd remembers of you, and where each memory came from.

A memory is a standing preference or fact ("Address the user as Ana.") that goes into the
system message of every answer until an adapter has learned it. The table shows each one's
status, kind, text, origin (your reply, a feedback comment, or added here) and the gap an
adapter's gate measured ("gap 0.012 / base 0.200": how far the model still is from following it
without the memory, with the adapter and with the base model). Add (a), edit (e or Enter),
switch off or on (o), delete (x, asks first), refresh (r); replaced memories, which come back
when the memory that replaced them is deleted, are hidden until h shows them, dimmed.
Everything goes through the daemon's ``/v1/memories`` routes.

Not run alone; ``python -m clawd.ui`` starts the whole TUI (F5 opens this view).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from clawd.ui.client import Client, DaemonError
from clawd.ui.dialogs import ConfirmScreen, MemoryScreen, PromptScreen

STATUS_STYLE = {
    "active": "bold green",
    "learned": "cyan",  # an adapter follows it without the prompt
    "off": "yellow",
    "replaced": "dim",
}
SOURCE = {"reply": "your reply", "feedback": "your comment", "user": "added by you"}


def gap_text(memory: dict[str, Any]) -> str:
    """'gap 0.012 / base 0.200' once a gate measured it, else '-'."""
    gap, base = memory.get("gap"), memory.get("base_gap")
    if gap is None:
        return "-"
    return f"gap {gap:.3f} / base " + ("-" if base is None else f"{base:.3f}")


def origin_text(memory: dict[str, Any], width: int = 36) -> str:
    """Where it came from: 'added by you', or 'your reply: “Please call me Ana…”'."""
    source = SOURCE.get(memory.get("source") or "", memory.get("source") or "-")
    reply = " ".join((memory.get("reply") or "").split())
    if not reply:
        return source
    if len(reply) > width:
        reply = reply[: width - 1].rstrip() + "…"
    return f"{source}: “{reply}”"


def detail_text(memory: dict[str, Any]) -> Text:
    """The selected memory in full: text, status, origin, learning and dates."""
    text = Text()
    text.append(f"memory {memory['id']}", style="bold")
    text.append(f"  {memory['status']}", style=STATUS_STYLE.get(memory["status"], ""))
    text.append(f"  {memory['kind']}\n", style="dim")
    text.append(f"{memory['text']}\n")
    text.append("from: ", style="bold")
    text.append(SOURCE.get(memory.get("source") or "", memory.get("source") or "-"))
    if memory.get("reply"):
        text.append(f" “{memory['reply']}”", style="italic cyan")
    if memory.get("conversation_id"):
        text.append(f"  (chat {memory['conversation_id']})", style="dim")
    text.append("\n")
    if memory.get("learned_by"):
        text.append(f"learned by adapter {memory['learned_by']}  ", style="cyan")
    text.append(f"{gap_text(memory)}  ", style="dim")
    if memory.get("replaces"):
        text.append(f"replaces memory {memory['replaces']}  ", style="dim")
    made = dt.datetime.fromtimestamp(memory["created_at"]).strftime("%d %b %H:%M")
    text.append(f"made {made}", style="dim")
    return text


class MemoriesPane(Vertical):
    """The memories table on top, the selected memory in full below."""

    BINDINGS = [
        Binding("a", "add", "Add"),
        Binding("e", "edit", "Edit"),
        Binding("o", "toggle", "Off/on"),
        Binding("x,delete", "delete", "Delete"),
        Binding("r", "refresh", "Refresh"),
        Binding("h", "show_replaced", "Replaced"),
    ]

    def __init__(self, client: Client, **kw: Any) -> None:
        super().__init__(**kw)
        self.client = client
        self.rows: dict[int, dict[str, Any]] = {}  # the memories shown, by id
        self.show_replaced = False

    def compose(self) -> ComposeResult:
        table: DataTable = DataTable(id="memories", cursor_type="row", zebra_stripes=True)
        table.add_columns("#", "status", "kind", "memory", "from", "gap")
        yield table
        with VerticalScroll(id="memory-detail"):
            yield Static("No memory selected.", id="memory-text")

    async def reload(self, quiet: bool = False) -> None:
        try:
            memories = await self.client.memories()
        except DaemonError as exc:
            if not quiet:
                self.app.notify(str(exc), severity="error")
            return
        self.show(memories)

    def show(self, memories: list[dict[str, Any]]) -> None:
        table = self.query_one("#memories", DataTable)
        keep, keep_id = table.cursor_row, self.selected()
        table.clear()
        shown = [m for m in memories if self.show_replaced or m["status"] != "replaced"]
        self.rows = {m["id"]: m for m in shown}
        for m in shown:
            dim = "dim" if m["status"] == "replaced" else ""
            table.add_row(
                Text(str(m["id"]), dim),
                Text(m["status"], STATUS_STYLE.get(m["status"], "")),
                Text(m["kind"], dim),
                Text(m["text"][:60] + ("…" if len(m["text"]) > 60 else ""), dim),
                Text(origin_text(m), dim or "italic"),
                Text(gap_text(m), dim),
                key=str(m["id"]),
            )
        detail = self.query_one("#memory-text", Static)
        if not shown:
            hidden = len(memories) - len(shown)
            detail.update(
                "No memories yet. Tell clawd something that should always hold (\u201ccall me "
                "Ana from now on\u201d), or press a to add one."
                + (f" {hidden} replaced ones are hidden (h shows them)." if hidden else "")
            )
            return
        ids = [m["id"] for m in shown]
        row = ids.index(keep_id) if keep_id in ids else keep
        table.move_cursor(row=min(max(row, 0), len(shown) - 1))
        self.show_detail()

    def selected(self) -> int | None:
        table = self.query_one("#memories", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        return int(key) if key else None

    def current(self) -> dict[str, Any] | None:
        mid = self.selected()
        return self.rows.get(mid) if mid is not None else None

    def show_detail(self) -> None:
        if memory := self.current():
            self.query_one("#memory-text", Static).update(detail_text(memory))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "memories":
            self.show_detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "memories":
            self.action_edit()

    async def _call(self, call: Any, done: str) -> dict[str, Any] | None:
        """Run one REST call; a refusal becomes a notification, success a reload."""
        try:
            answer = await call
        except DaemonError as exc:
            self.app.notify(str(exc), title="Refused", severity="error", timeout=10)
            return None
        self.app.notify(done)
        await self.reload()
        return answer

    async def add(self) -> None:
        """Run as a worker: asks for the text first."""
        result = await self.app.push_screen_wait(MemoryScreen())
        if result is None:
            return
        text, kind = result
        answer = await self._call(self.client.add_memory(text, kind), "Remembered.")
        if answer and answer.get("replaced"):
            self.app.notify(f"It replaces “{answer['replaced']['text']}”.")

    async def edit(self) -> None:
        memory = self.current()
        if memory is None:
            self.app.notify("No memory selected.", severity="warning")
            return
        text = await self.app.push_screen_wait(PromptScreen("Edit memory", memory["text"]))
        if text and text != memory["text"]:
            await self._call(self.client.edit_memory(memory["id"], text=text), "Memory edited.")

    async def toggle(self) -> None:
        memory = self.current()
        if memory is None:
            self.app.notify("No memory selected.", severity="warning")
            return
        if memory["status"] == "replaced":
            self.app.notify(
                "A replaced memory comes back when the one that replaced it is deleted.",
                severity="warning",
            )
            return
        on = memory["status"] == "off"
        await self._call(
            self.client.edit_memory(memory["id"], status="active" if on else "off"),
            "Memory back on." if on else "Memory off: it stays out of every answer.",
        )

    async def delete(self) -> None:
        memory = self.current()
        if memory is None:
            self.app.notify("No memory selected.", severity="warning")
            return
        question = f"Forget “{memory['text']}”?"
        if not await self.app.push_screen_wait(ConfirmScreen(question, "Delete")):
            return
        answer = await self._call(self.client.delete_memory(memory["id"]), "Forgotten.")
        if answer and answer.get("restored"):
            self.app.notify("The memory it had replaced is back.")

    def action_add(self) -> None:
        self.run_worker(self.add())

    def action_edit(self) -> None:
        self.run_worker(self.edit())

    def action_toggle(self) -> None:
        self.run_worker(self.toggle())

    def action_delete(self) -> None:
        self.run_worker(self.delete())

    async def action_refresh(self) -> None:
        await self.reload()

    async def action_show_replaced(self) -> None:
        self.show_replaced = not self.show_replaced
        await self.reload()
        self.app.notify(
            "Showing replaced memories." if self.show_replaced else "Replaced memories hidden."
        )
