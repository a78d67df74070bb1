"""The adapters view: every version with its status and gate figures, its training curves, the
samples that trained it, and the *why* view for each sample.

Activate (Enter or a), roll back (b) and go to the base model (0) ask for confirmation first;
w opens the why view of the highlighted sample. Everything goes through the daemon's
``/v1/adapters`` routes.

Not run alone; ``python -m clawd.ui`` starts the whole TUI.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Label, Sparkline, Static

from clawd.ui.client import Client, DaemonError
from clawd.ui.dialogs import ConfirmScreen
from clawd.ui.why import WhyScreen

STATUS_STYLE = {
    "active": "bold green",
    "candidate": "cyan",
    "rejected": "red",
    "retired": "dim",
    "parked": "yellow",  # belongs to another base model
}
CURVES = [
    ("loss", "loss"),
    ("adv_mean", "advantage (mean)"),
    ("adv_opd", "OPD advantage"),
    ("kl", "KL to reference"),
]


def fmt(value: Any, digits: int = 3) -> str:
    return (
        "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)
    )


def gate_text(row: dict[str, Any]) -> Text:
    """The promotion gate's verdict and figures, before and after, in words."""
    gate = row.get("gate") or (row.get("metrics") or {}).get("gate")
    text = Text()
    text.append(f"{row['version']}", style="bold")
    text.append(f"  {row['status']}", style=STATUS_STYLE.get(row["status"], ""))
    text.append(f"  parent {row.get('parent') or 'base model'}\n", style="dim")
    if not gate:
        return text.append("No gate figures (not made by a training run).", style="italic")
    verdict = ("passed", "green") if gate.get("passed") else ("failed", "red")
    text.append("gate ", style="bold")
    text.append(verdict[0], style=f"bold {verdict[1]}")
    text.append(f" on {gate.get('heldout', 0)} held-out samples, vs {gate.get('compared_with')}\n")
    before, after = gate.get("before") or {}, gate.get("after") or {}
    for key, label in (("opd_gap", "OPD gap"), ("reward_logprob", "reward-weighted log-prob")):
        text.append(f"  {label}: {fmt(before.get(key))} → {fmt(after.get(key))}\n")
    text.append(f"  KL to base: {fmt(gate.get('kl_to_base'))} (budget {fmt(gate.get('max_kl'))})\n")
    if "kl_to_parent" in gate:
        text.append(
            f"  KL to parent: {fmt(gate['kl_to_parent'])} (step limit {fmt(gate.get('step_kl'))})\n"
        )
    for key, label in (("ability", "general prompts"), ("own_ability", "your prompts")):
        ability = gate.get(key) or {}
        if not ability:
            continue
        b, c = ability.get("base", {}), ability.get("candidate", {})
        text.append(
            f"  {label}: degenerate {fmt(b.get('degenerate'))} → "
            f"{fmt(c.get('degenerate'))}, distinct {fmt(b.get('distinct'))} → "
            f"{fmt(c.get('distinct'))}\n"
        )
        for d in (ability.get("new_degenerate") or [])[:3]:
            text.append(f"  degenerates where the base model does not: {d['answer'][:60]!r}\n")
    for name, ok in (gate.get("checks") or {}).items():
        text.append(
            f"  {'✓' if ok else '✗'} {name.replace('_', ' ')}\n", style="green" if ok else "red"
        )
    for why in gate.get("skipped") or []:
        text.append(f"  – skipped {why}\n", style="dim")
    if walked := gate.get("walked_back"):
        text.append(f"  walked back: {walked.get('summary')}\n", style="yellow")
    return text


class Curves(Vertical):
    """One line per training metric: its name, a sparkline over the steps, first → last."""

    def compose(self) -> ComposeResult:
        yield Label("[b]training curves[/]", classes="curve-title")
        for key, label in CURVES:
            with Horizontal(classes="curve-row"):
                yield Label(label, classes="curve-label")
                yield Sparkline([], id=f"curve-{key}", classes="curve")
                yield Label("", id=f"span-{key}", classes="curve-span")

    def show(self, steps: list[dict[str, Any]]) -> None:
        for key, _ in CURVES:
            values = [float(s[key]) for s in steps if s.get(key) is not None]
            self.query_one(f"#curve-{key}", Sparkline).data = values
            span = f"{values[0]:+.3f} → {values[-1]:+.3f}" if values else "no steps"
            self.query_one(f"#span-{key}", Label).update(f"[dim]{span}[/]")


class AdaptersPane(Vertical):
    """Versions on top; the selected version's gate, curves and samples below."""

    BINDINGS = [
        Binding("a", "activate", "Activate"),
        Binding("b", "rollback", "Roll back"),
        Binding("0", "base", "Base model"),
        Binding("w", "why", "Why"),
    ]

    def __init__(self, client: Client, **kw: Any) -> None:
        super().__init__(**kw)
        self.client = client
        self.current: dict[str, Any] | None = None
        self.report: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        table: DataTable = DataTable(id="adapters", cursor_type="row", zebra_stripes=True)
        table.add_columns("version", "status", "gate", "OPD gap", "KL", "steps", "made")
        yield table
        with Horizontal(id="adapter-detail"):
            with VerticalScroll(id="adapter-left"):
                yield Static(id="gate")
                yield Curves(id="curves")
            samples: DataTable = DataTable(id="samples", cursor_type="row")
            samples.add_columns("sample", "kind", "reward", "hint")
            yield samples

    async def reload(self) -> None:
        try:
            listing = await self.client.adapters()
        except DaemonError as exc:
            self.app.notify(str(exc), severity="error")
            return
        table = self.query_one("#adapters", DataTable)
        keep = table.cursor_row
        table.clear()
        for row in listing["data"]:
            gate = row["metrics"].get("gate") or {}
            passed = {True: Text("passed", "green"), False: Text("failed", "red")}
            table.add_row(
                row["version"],
                Text(row["status"], style=STATUS_STYLE.get(row["status"], "")),
                passed.get(gate.get("passed"), Text("-", "dim")),
                fmt((gate.get("after") or {}).get("opd_gap")),
                fmt(gate.get("kl_to_base")),
                str(len(row["metrics"].get("samples") or []))
                if "samples" in row["metrics"]
                else fmt(row["metrics"].get("steps")),
                dt.datetime.fromtimestamp(row["created_at"]).strftime("%d %b %H:%M"),
                key=row["version"],
            )
        if listing["data"]:
            table.move_cursor(row=min(max(keep, 0), len(listing["data"]) - 1))
            version = self.selected_version()
            if version and version != (self.current or {}).get("version"):
                await self.show(version)  # the cursor did not move, so no highlight event
        else:
            self.query_one("#gate", Static).update(
                "No adapters yet. Chat, reply, and clawd trains one overnight "
                "(or press t in the Learning view)."
            )

    async def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "adapters" and event.row_key.value:
            await self.show(event.row_key.value)

    async def show(self, version: str) -> None:
        try:
            self.current = await self.client.adapter(version)
        except DaemonError as exc:
            self.app.notify(str(exc), severity="error")
            return
        self.query_one("#gate", Static).update(gate_text(self.current))
        try:
            self.report = await self.client.report(version)
        except DaemonError:
            self.report = None
        self.query_one(Curves).show((self.report or {}).get("steps") or [])
        samples = self.query_one("#samples", DataTable)
        samples.clear()
        for i, s in enumerate((self.report or {}).get("samples") or []):
            samples.add_row(
                str(s["sample_id"]),
                s.get("kind") or "-",
                fmt(s.get("reward"), 1),
                (s.get("hint") or "-")[:40],
                key=str(i),
            )

    def selected_version(self) -> str | None:
        table = self.query_one("#adapters", DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value

    async def _confirmed(self, question: str, yes: str) -> bool:
        return bool(await self.app.push_screen_wait(ConfirmScreen(question, yes)))

    async def _switch(self, call: Any, done: str) -> None:
        try:
            answer = await call
        except DaemonError as exc:
            self.app.notify(str(exc), title="Refused", severity="error", timeout=10)
            return
        pause = answer.get("pause_ms")
        self.app.notify(done + (f" (serving paused {pause:.1f} ms)" if pause else ""))
        await self.reload()
        if version := self.selected_version():
            await self.show(version)  # its status changed
        self.app.refresh_title()

    async def activate(self) -> None:
        """Run as a worker: asks for confirmation."""
        version = self.selected_version()
        if version is None:
            self.app.notify("No adapter selected.", severity="warning")
            return
        row = self.current if self.current and self.current["version"] == version else {}
        force = row.get("status") == "rejected"
        note = " The gate REJECTED it." if force else ""
        if await self._confirmed(f"Serve adapter {version} from now on?{note}", "Activate"):
            await self._switch(self.client.activate(version, force), f"Now serving {version}.")

    async def rollback(self) -> None:
        if await self._confirmed("Roll back to the active adapter's parent?", "Roll back"):
            await self._switch(self.client.rollback(), "Rolled back.")

    async def base(self) -> None:
        if await self._confirmed("Serve the base model, without any adapter?", "Use base"):
            await self._switch(self.client.to_base(), "Now serving the base model.")

    def why(self) -> None:
        if not self.report or not self.report.get("samples"):
            self.app.notify("This adapter has no training samples to explain.", severity="warning")
            return
        index = max(self.query_one("#samples", DataTable).cursor_row, 0)
        self.app.push_screen(WhyScreen(self.report, index))

    def action_activate(self) -> None:
        self.run_worker(self.activate())

    def action_rollback(self) -> None:
        self.run_worker(self.rollback())

    def action_base(self) -> None:
        self.run_worker(self.base())

    def action_why(self) -> None:
        self.why()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "samples":
            self.why()
        elif event.data_table.id == "adapters":
            self.action_activate()
