"""The clawd TUI: Chat, Learning, Adapters and Memories views over the daemon's REST API.

F1/F2/F3/F5 switch views (F4 renames the chat); Ctrl+G undoes what the newest answer's
"Remembered:" notice says; Ctrl+P opens the command palette, which lists every action; the footer
shows the keys of the focused view. Styles are in ``clawd.tcss`` beside this file.

Run alone against a running daemon (``clawd chat`` also starts one when none answers)::

    python -m clawd.ui [--url URL]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, TabbedContent, TabPane

from clawd.ui.adapters import AdaptersPane
from clawd.ui.chat import ChatPane
from clawd.ui.client import Client, DaemonError
from clawd.ui.learning import LearningPane
from clawd.ui.memories import MemoriesPane


class ClawdApp(App):
    """The TUI. ``client`` is the only way it reaches the daemon."""

    CSS_PATH = "clawd.tcss"
    TITLE = "clawd"
    BINDINGS = [
        Binding("f1", "view('chat')", "Chat", show=False),
        Binding("f2", "view('learning')", "Learning", show=False),
        Binding("f3", "view('adapters')", "Adapters", show=False),
        Binding("f5", "view('memories')", "Memories", show=False),
        Binding("ctrl+g", "undo_memory", "Undo memory", show=False),
        Binding("escape", "stop", "Stop", show=False),
        Binding("ctrl+n", "new_chat", "New"),
        Binding("ctrl+r", "regenerate", "Regenerate"),
        Binding("ctrl+l", "toggle_learn", "Learn on/off", show=False),
        Binding("ctrl+t", "toggle_thinking", "Thinking on/off", show=False),
        Binding("ctrl+s", "export", "Export", show=False),
        Binding("f4", "rename", "Rename", show=False),
        Binding("f8", "delete", "Delete chat", show=False),
        Binding("ctrl+q", "quit", "Quit"),
    ]

    def __init__(self, client: Client, export_dir: Path | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.client = client
        self.export_dir = export_dir or Path.cwd()
        self._problem: str | None = None  # the daemon's last reported error, notified once

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="chat", id="views"):
            with TabPane("Chat F1", id="chat"):
                yield ChatPane(self.client, self.export_dir, id="chat-pane")
            with TabPane("Learning F2", id="learning"):
                yield LearningPane(self.client, id="learning-pane")
            with TabPane("Adapters F3", id="adapters-tab"):
                yield AdaptersPane(self.client, id="adapters-pane")
            with TabPane("Memories F5", id="memories"):
                yield MemoriesPane(self.client, id="memories-pane")
        yield Footer()

    async def on_mount(self) -> None:
        await self.refresh_title_now()
        self.set_interval(5.0, self.refresh_title)

    def refresh_title(self) -> None:
        self.run_worker(self.refresh_title_now(), group="title", exclusive=True)

    async def refresh_title_now(self) -> None:
        """Model and serving adapter in the header; a notification when the daemon is down."""
        try:
            h = await self.client.health()
        except DaemonError as exc:
            if self.sub_title != "daemon unreachable":
                self.notify(str(exc), title="Daemon", severity="error", timeout=10)
            self.sub_title = "daemon unreachable"
            return
        adapter = h.get("adapter") or "base model"
        jobs = h.get("jobs") or {}
        training = " · training" if jobs.get("training") else ""
        problem = h.get("error") or jobs.get("error")
        if problem and problem != self._problem:  # once per new problem, not every 5 s
            self.notify(problem, title="Daemon", severity="error", timeout=15)
        self._problem = problem
        learning = " · learning off" if jobs.get("error") else ""
        self.sub_title = f"{h.get('model')} · {adapter}{training}{learning}"

    # The views live on the first screen; a dialog or the palette on top must not hide them.
    @property
    def chat(self) -> ChatPane:
        return self.screen_stack[0].query_one(ChatPane)

    @property
    def learning(self) -> LearningPane:
        return self.screen_stack[0].query_one(LearningPane)

    @property
    def adapters(self) -> AdaptersPane:
        return self.screen_stack[0].query_one(AdaptersPane)

    @property
    def memories(self) -> MemoriesPane:
        return self.screen_stack[0].query_one(MemoriesPane)

    # -- views --------------------------------------------------------------------------------
    async def action_view(self, name: str) -> None:
        tab = {"adapters": "adapters-tab"}.get(name, name)
        first = self.screen_stack[0]
        # Blur first: a focused widget inside the pane being hidden is focused again by Textual,
        # and a focus inside a tab pane switches the tabs back to it (F2 then stayed on chat).
        first.set_focus(None)
        first.query_one("#views", TabbedContent).active = tab
        await self.on_view_shown(tab)

    async def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        await self.on_view_shown(event.pane.id or "")

    async def on_view_shown(self, tab: str) -> None:
        if tab == "learning":
            await self.learning.reload()
            self.learning.query_one("#signals").focus()
        elif tab == "adapters-tab":
            await self.adapters.reload()
            self.adapters.query_one("#adapters").focus()
        elif tab == "memories":
            await self.memories.reload()
            self.memories.query_one("#memories").focus()
        elif tab == "chat":
            self.chat.query_one("#composer").focus()

    # -- chat actions -----------------------------------------------------------------------
    def action_stop(self) -> None:
        self.chat.cancel()  # dialogs and the why view close on Esc by their own bindings

    async def action_new_chat(self) -> None:
        await self.action_view("chat")
        await self.chat.new_chat()

    async def action_regenerate(self) -> None:
        await self.chat.regenerate()

    async def action_toggle_learn(self) -> None:
        await self.chat.toggle_learn()

    def action_toggle_thinking(self) -> None:
        self.chat.toggle_thinking()

    async def action_export(self) -> None:
        await self.chat.export()

    def action_rename(self) -> None:
        self.run_worker(self.chat.rename())

    def action_delete(self) -> None:
        self.run_worker(self.chat.delete())

    def action_rate(self, rating: int, comment: bool = False) -> None:
        self.run_worker(self.chat.rate(self.chat.target(), rating, comment))

    def action_undo_memory(self) -> None:
        self.run_worker(self.chat.undo_memory())

    # -- the command palette ---------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        commands: list[tuple[str, str, Callable[[], Any]]] = [
            ("Chat view", "Talk to clawd (F1)", lambda: self.action_view("chat")),
            (
                "Learning view",
                "Signals, review, training (F2)",
                lambda: self.action_view("learning"),
            ),
            (
                "Adapters view",
                "Versions, gate, curves, why (F3)",
                lambda: self.action_view("adapters"),
            ),
            (
                "Memories view",
                "What clawd remembers of you (F5)",
                lambda: self.action_view("memories"),
            ),
            ("New chat", "Start a new conversation (Ctrl+N)", self.action_new_chat),
            ("Regenerate", "Write the last answer again (Ctrl+R)", self.action_regenerate),
            ("Stop answering", "Stop the answer being written (Esc)", lambda: self.chat.cancel()),
            ("Rename chat", "Give this conversation a title (F4)", self.action_rename),
            (
                "Delete chat",
                "Forget this conversation and its signals (F8)",
                self.action_delete,
            ),
            (
                "Export chat to Markdown",
                "Write this conversation to a .md file (Ctrl+S)",
                self.action_export,
            ),
            (
                "Toggle learning for this chat",
                "Don't learn from this (Ctrl+L)",
                self.action_toggle_learn,
            ),
            (
                "Toggle thinking",
                "Ask Qwen3 to think first, or not (Ctrl+T)",
                self.action_toggle_thinking,
            ),
            ("Thumbs up", "Rate the selected answer good (+)", lambda: self.action_rate(1)),
            ("Thumbs down", "Rate the selected answer bad (-)", lambda: self.action_rate(-1)),
            (
                "Comment on answer",
                "Say what should have been different (c)",
                lambda: self.action_rate(-1, True),
            ),
            ("Approve signal", "Let the selected signal train (a)", self.learning.action_approve),
            ("Veto signal", "Never train on the selected signal (v)", self.learning.action_veto),
            (
                "Train now",
                "Start a training run on approved samples (t)",
                self.learning.action_train,
            ),
            ("Activate adapter", "Serve the selected adapter (a)", self.adapters.action_activate),
            (
                "Roll back adapter",
                "Go back to the active adapter's parent (b)",
                self.adapters.action_rollback,
            ),
            ("Use base model", "Serve without any adapter (0)", self.adapters.action_base),
            ("Why did it learn this?", "Tokens coloured by OPD advantage (w)", self.adapters.why),
            (
                "Undo remembered",
                "Forget what your last reply made clawd remember (Ctrl+G)",
                self.action_undo_memory,
            ),
            ("Add memory", "Something clawd should always know (a)", self.memories.action_add),
            ("Edit memory", "Change the selected memory (e)", self.memories.action_edit),
            (
                "Switch memory off/on",
                "Keep the selected memory out of answers, or put it back (o)",
                self.memories.action_toggle,
            ),
            ("Delete memory", "Forget the selected memory (x)", self.memories.action_delete),
        ]
        for title, help_text, callback in commands:
            yield SystemCommand(title, help_text, callback)


def run(url: str | None = None) -> None:
    """Find or start the daemon, then run the TUI until the user quits."""
    import asyncio

    from clawd.config import clawd_home, ensure_token, load_settings
    from clawd.ui.launch import ensure

    home = clawd_home()
    settings = load_settings(home)
    address, _ = ensure(url, home, settings.host, settings.port)
    client = Client(address, ensure_token(home))
    try:
        ClawdApp(client).run()
    finally:
        asyncio.run(client.close())


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="the daemon's address (default: start or find the local one)")
    run(parser.parse_args().url)
