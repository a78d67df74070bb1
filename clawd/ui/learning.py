"""The learning view: what clawd took from your replies, and when it trains next.

Shows the signals queue (score, votes, hint, the reply it came from) with approve and veto, the
next scheduled training, and a live progress bar while a run trains. Polls the daemon's
``/v1/signals`` and ``/v1/train`` every two seconds while it is shown.

Not run alone; ``python -m clawd.ui`` starts the whole TUI.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, ProgressBar, Static

from clawd.ui.client import Client, DaemonError

STATUS_STYLE = {
    "pending": "yellow",
    "approved": "green",
    "vetoed": "red",
    "used": "dim",
    "dropped": "dim",
}


def when(iso: str | None) -> str:
    """'today 03:00' / 'Mon 03:00' for an ISO time; '-' for none."""
    if not iso:
        return "-"
    t = dt.datetime.fromisoformat(iso).astimezone()
    today = dt.datetime.now().astimezone().date()
    day = "today" if t.date() == today else t.strftime("%a %d %b")
    return f"{day} {t:%H:%M}"


def score_text(score: float | None) -> Text:
    if score is None:
        return Text("-", style="dim")
    style = "green" if score > 0 else "red" if score < 0 else "yellow"
    return Text(f"{score:+.0f}", style=f"bold {style}")


class LearningPane(Vertical):
    """Schedule and progress on top, the signals table, the selected signal below."""

    BINDINGS = [
        Binding("a", "approve", "Approve"),
        Binding("v", "veto", "Veto"),
        Binding("t", "train", "Train now"),
    ]

    def __init__(self, client: Client, **kw: Any) -> None:
        super().__init__(**kw)
        self.client = client
        self.training: dict[str, Any] = {}
        self.detail_id: int | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="train-row"):
            yield Static(id="schedule")
            yield ProgressBar(id="train-progress", show_eta=False)
        table: DataTable = DataTable(id="signals", cursor_type="row", zebra_stripes=True)
        table.add_columns("#", "status", "score", "votes", "hint", "your reply")
        yield table
        with VerticalScroll(id="signal-detail"):
            yield Static("Select a signal to see where it came from.", id="signal-text")

    def on_mount(self) -> None:
        self.query_one("#train-progress").display = False
        self.set_interval(2.0, self.poll)

    async def poll(self) -> None:
        if self.display and self.app.is_running and self.is_on_screen:
            await self.reload(quiet=True)

    async def reload(self, quiet: bool = False) -> None:
        try:
            signals = await self.client.signals()
            self.training = await self.client.training()
        except DaemonError as exc:
            if not quiet:
                self.app.notify(str(exc), severity="error")
            return
        self.show_training(self.training)
        self.show_signals(signals)

    def show_training(self, t: dict[str, Any]) -> None:
        nxt = t.get("next_runs") or {}
        approved, learnable = t.get("approved_samples", 0), t.get("learnable_samples", 0)
        usable = (
            f" ([b]{learnable}[/] usable by method {t.get('train_method')})"
            if learnable < approved
            else ""
        )
        lines = [
            f"[b]{approved}[/] approved samples waiting{usable} · "
            f"next nightly run: [b]{when(nxt.get('nightly'))}[/]"
        ]
        runs = t.get("runs") or []
        if runs:
            r = runs[0]
            state = {"succeeded": "[green]succeeded[/]", "failed": "[red]failed[/]"}.get(
                r["status"], f"[yellow]{r['status']}[/]"
            )
            detail = r.get("adapter_version") or r.get("reason") or ""
            lines.append(f"last run #{r['id']}: {state} {detail}")
        bar = self.query_one("#train-progress", ProgressBar)
        if t.get("running"):
            steps = t.get("latest_steps") or []
            total = steps[-1].get("total_steps") if steps else None
            bar.update(total=total, progress=len(steps))
            lines.append("[b yellow]training now[/]" + ("" if steps else " (loading the model)"))
        else:
            lines.append("[dim]t: train now[/]")
        bar.display = bool(t.get("running"))
        self.query_one("#schedule", Static).update("\n".join(lines))

    def show_signals(self, signals: list[dict[str, Any]]) -> None:
        table = self.query_one("#signals", DataTable)
        keep, keep_id = table.cursor_row, self.selected()
        table.clear()
        for s in signals:
            status = s.get("sample_status") or "no sample"
            table.add_row(
                str(s["id"]),
                Text(status, style=STATUS_STYLE.get(status, "dim")),
                score_text(s.get("score")),
                str(s.get("votes", 0)),
                (s.get("hint") or "-")[:40],
                (s.get("next_state") or "")[:60].replace("\n", " "),
                key=str(s["id"]),
            )
        if signals:
            # The selected signal stays selected when newer ones arrive above it.
            ids = [s["id"] for s in signals]
            row = ids.index(keep_id) if keep_id in ids else keep
            table.move_cursor(row=min(max(row, 0), len(signals) - 1))
            sid = self.selected()
            if sid is not None and sid != self.detail_id:  # a cursor that did not move
                self.run_worker(self.show_detail(sid), group="detail", exclusive=True)

    def selected(self) -> int | None:
        table = self.query_one("#signals", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        return int(key) if key else None

    async def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "signals" and event.row_key.value:
            await self.show_detail(int(event.row_key.value))

    async def show_detail(self, sid: int) -> None:
        self.detail_id = sid
        try:
            s = await self.client.signal(sid)
        except DaemonError as exc:
            self.app.notify(str(exc), severity="error")
            return
        votes = ", ".join(
            f"{v['kind']} {v['score']:+.0f}" if v["score"] is not None else f"{v['kind']} -"
            for v in s["votes"]
        )
        text = Text()
        text.append(f"signal {sid}", style="bold")
        text.append(f"  score {s['score']}  votes: {votes or 'none (your feedback)'}\n")
        if s.get("hint"):
            text.append("hint: ", style="bold")
            text.append(f"{s['hint']}\n", style="italic cyan")
        text.append("clawd said: ", style="bold")
        text.append(f"{(s.get('response') or '')[:400]}\n")
        text.append("you replied: ", style="bold")
        text.append(s.get("next_state") or "(feedback only)")
        self.query_one("#signal-text", Static).update(text)

    async def review(self, verdict: str) -> None:
        sid = self.selected()
        if sid is None:
            self.app.notify("No signal selected.", severity="warning")
            return
        try:
            await self.client.review(sid, verdict)
        except DaemonError as exc:
            self.app.notify(str(exc), severity="error")
            return
        self.app.notify(f"Signal {sid} {'approved' if verdict == 'approve' else 'vetoed'}.")
        await self.reload()

    async def action_approve(self) -> None:
        await self.review("approve")

    async def action_veto(self) -> None:
        await self.review("veto")

    async def action_train(self) -> None:
        try:
            answer = await self.client.train_now()
        except DaemonError as exc:
            self.app.notify(str(exc), title="Not training", severity="warning")
            return
        self.app.notify(f"Training started (pid {answer['pid']}).")
        await self.reload()
