"""The chat view: a conversation sidebar, the messages, and the composer.

Streams answers from the daemon, labels each answer with the adapter that wrote it, sends
thumbs and comments as feedback, and keeps the per-chat "don't learn from this" switch. Under an
answer, a folded "memory: N used" line lists the memories in its context, and a notice says what
your reply made clawd remember, with undo (^G, or u on the answer).
Every action here is also a command in the palette (see ``clawd.ui.app``).

Not run alone; ``python -m clawd.ui`` starts the whole TUI.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Label, ListItem, ListView, Static

from clawd.ui.client import ChatEvent, Client, DaemonError
from clawd.ui.dialogs import CommentScreen, ConfirmScreen, PromptScreen
from clawd.ui.messages import Composer, MessageView, last_user_text, to_markdown


class ChatPane(Horizontal):
    """Sidebar of conversations on the left, the open conversation on the right."""

    def __init__(self, client: Client, export_dir: Path, **kw: Any) -> None:
        super().__init__(**kw)
        self.client, self.export_dir = client, export_dir
        self.conversation_id: str | None = None
        self.title_text = "New chat"
        self.history: list[dict[str, Any]] = []
        self.learn = True
        self.thinking = True
        self.busy = False

    def compose(self) -> ComposeResult:
        with Vertical(id="sidebar"):
            yield Static("[b]Chats[/]  [dim]^N new[/]", id="sidebar-title")
            yield ListView(id="conversations")
        with Vertical(id="chat-main"):
            yield Static(id="chat-header")
            yield VerticalScroll(id="messages")
            yield Composer(
                id="composer",
                placeholder="Message clawd (Enter sends, Shift+Enter or Ctrl+J: new line)",
                highlight_cursor_line=False,
            )

    async def on_mount(self) -> None:
        self.update_header()
        # Focus first: the list comes over REST, and a view switched to meanwhile keeps its focus.
        self.query_one(Composer).focus()
        await self.refresh_list()

    # -- header and sidebar ---------------------------------------------------------------
    def update_header(self) -> None:
        learn = "[green]learning on[/]" if self.learn else "[yellow]not learning from this[/]"
        think = "thinking on" if self.thinking else "thinking off"
        self.query_one("#chat-header", Static).update(
            f"[b]{self.title_text}[/] · {learn} [dim](^L)[/] · {think} [dim](^T)[/]"
        )

    async def refresh_list(self) -> None:
        try:
            rows = await self.client.conversations()
        except DaemonError as exc:
            self.app.notify(str(exc), title="Daemon", severity="error", timeout=10)
            return
        view = self.query_one("#conversations", ListView)
        await view.clear()
        items = []
        for row in rows:
            title = row.get("title") or row["id"]
            mark = "" if row.get("learn", 1) else " [yellow]⊘[/]"
            item = ListItem(Label(f"{title[:40]}{mark}"), name=row["id"])
            items.append(item)
        await view.extend(items)
        for i, item in enumerate(items):
            if item.name == self.conversation_id:
                view.index = i

    @on(ListView.Selected, "#conversations")
    async def open_selected(self, event: ListView.Selected) -> None:
        if event.item.name and event.item.name != self.conversation_id:
            await self.open(event.item.name)

    async def open(self, cid: str) -> None:
        """Show a stored conversation, answer by answer, with labels and ratings."""
        try:
            conv = await self.client.conversation(cid)
        except DaemonError as exc:
            self.app.notify(str(exc), severity="error")
            return
        self.conversation_id, self.learn = cid, conv["learn"]
        self.title_text = conv.get("title") or cid
        log = self.query_one("#messages", VerticalScroll)
        await log.remove_children()
        views: list[MessageView] = []
        for turn in conv["turns"]:
            views.append(MessageView("user", last_user_text(turn["messages"])))
            ratings = [f["rating"] for f in turn["feedback"]]
            views.append(
                MessageView(
                    "assistant",
                    turn["response"] or "",
                    reasoning=turn["reasoning"] or "",
                    response_id=turn["id"],
                    adapter=turn["adapter_version"],
                    rating=ratings[-1] if ratings else None,
                    calls=turn.get("tool_calls"),
                    result=tool_result(turn),
                )
            )
        await log.mount_all(views)
        if conv["turns"]:
            last = conv["turns"][-1]
            self.history = [*last["messages"], {"role": "assistant", "content": last["response"]}]
        else:
            self.history = []
        log.scroll_end(animate=False)
        self.update_header()

    # -- sending ----------------------------------------------------------------------------
    @on(Composer.Send)
    async def on_send(self, event: Composer.Send) -> None:
        if self.busy:
            self.app.notify("clawd is still answering; Esc stops it.", severity="warning")
            return
        self.query_one(Composer).clear()
        self.history.append({"role": "user", "content": event.text})
        await self.query_one("#messages").mount(MessageView("user", event.text))
        await self.answer()

    async def answer(self) -> None:
        view = MessageView("assistant")
        log = self.query_one("#messages", VerticalScroll)
        await log.mount(view)
        log.scroll_end(animate=False)
        self.busy = True
        self.stream(view)

    @work(exclusive=True, group="chat")
    async def stream(self, view: MessageView) -> None:
        log = self.query_one("#messages", VerticalScroll)
        state = "cancelled"
        done: ChatEvent | None = None
        try:
            events = self.client.stream_chat(
                self.history,
                conversation_id=self.conversation_id,
                learn=self.learn,
                thinking=self.thinking,
            )
            async for event in events:
                if event.kind == "done":
                    done = event
                    view.response_id, view.adapter = event.id, event.adapter_version
                    new = self.conversation_id is None
                    self.conversation_id = event.conversation_id or self.conversation_id
                    if new:
                        self.title_text = last_user_text(self.history)[:60] or "chat"
                    state = "done"
                else:
                    await view.add(event.kind, event.text)
                    log.scroll_end(animate=False)
        except DaemonError as exc:
            self.app.notify(str(exc), title="No answer", severity="error", timeout=10)
            state = "failed"
        except asyncio.CancelledError:  # Esc: leaving the stream hangs up, the daemon stops
            state = "cancelled"
        self.busy = False
        await view.finish(state if state == "done" else "cancelled")
        if state == "done":
            self.history.append({"role": "assistant", "content": view.text})
            self.update_header()
            await self.refresh_list()
            if done is not None:
                await self.show_memory_notes(view, done)
        else:
            await self._undo_last_question(view)

    async def show_memory_notes(self, view: MessageView, done: ChatEvent) -> None:
        """Under the answer: the memories it used (folded) and those the reply made."""
        if done.remembered:
            view.show_remembered(done.remembered)
        used, left = done.memories, done.memories_left_out
        if not (used or left):
            return
        texts: dict[int, str] = {}
        try:
            texts = {m["id"]: m["text"] for m in await self.client.memories()}
        except DaemonError:
            pass  # the count still shows; the Memories view has the texts
        view.show_memories(used, left, texts, done.clawd.get("shaped") or {})

    @on(MessageView.UndoMemory)
    def on_undo_memory(self, event: MessageView.UndoMemory) -> None:
        self.run_worker(self.undo_memory(event.view))

    async def undo_memory(self, view: MessageView | None = None) -> None:
        """Forget what the newest (or the given) answer's notice says was remembered; a memory
        one of them replaced comes back."""
        if view is None:
            pending = [v for v in self.query(MessageView) if v.pending_memories()]
            view = pending[-1] if pending else None
        if view is None:
            self.app.notify("Nothing remembered to undo.", severity="warning")
            return
        restored, failed = 0, None
        for entry in view.pending_memories():
            try:
                answer = await self.client.delete_memory(entry["id"])
                restored += len(answer.get("restored") or [])
            except DaemonError as exc:
                if exc.status != 404:  # 404: already forgotten (in the Memories view)
                    failed = exc
                    break
            entry["undone"] = True
        view.show_remembered([])
        if failed is not None:
            self.app.notify(str(failed), severity="error")
            return
        self.app.notify("Undone." + (" The memory it replaced is back." if restored else ""))

    async def _undo_last_question(self, view: MessageView) -> None:
        """A stopped or failed answer is not kept: the question goes back into the composer."""
        question = self.history.pop() if self.history else {"content": ""}
        await view.remove()
        views = self.query(MessageView)
        if views and views.last().role == "user":
            await views.last().remove()
        composer = self.query_one(Composer)
        composer.text = question["content"]
        composer.focus()

    def cancel(self) -> bool:
        """Stop the answer being written (the daemon stops generating when we hang up)."""
        if not self.busy:
            return False
        self.workers.cancel_group(self, "chat")
        self.app.notify("Stopped. Your message is back in the box.")
        return True

    async def regenerate(self) -> None:
        if self.busy or not self.history or self.history[-1]["role"] != "assistant":
            self.app.notify("Nothing to regenerate yet.", severity="warning")
            return
        self.history.pop()
        last = self.query(MessageView).last()
        await last.remove()
        await self.answer()

    # -- feedback and conversation actions ---------------------------------------------------
    def target(self) -> MessageView | None:
        """The focused assistant message, else the newest answered one."""
        focused = self.app.focused
        if isinstance(focused, MessageView) and focused.response_id:
            return focused
        answered = [v for v in self.query(MessageView) if v.response_id]
        return answered[-1] if answered else None

    @on(MessageView.Rate)
    def on_rate(self, event: MessageView.Rate) -> None:
        self.run_worker(self.rate(event.view, event.rating, event.comment))

    async def rate(self, view: MessageView | None, rating: int | None, comment: bool) -> None:
        """Send a thumb, or ask for a comment first (run as a worker: it may open a dialog)."""
        if view is None or not view.response_id:
            self.app.notify("No answer to rate yet.", severity="warning")
            return
        text: str | None = None
        if comment:
            result = await self.app.push_screen_wait(CommentScreen(good=view.rating == 1))
            if result is None:
                return
            rating, text = result
        try:
            answer = await self.client.feedback(view.response_id, rating, text)
        except DaemonError as exc:
            self.app.notify(str(exc), severity="error")
            return
        view.rating = rating
        view.refresh_label()
        if answer.get("remembered"):  # a comment may state a standing preference too
            view.show_remembered(answer["remembered"])
        self.app.notify("Thanks: clawd will learn from this." if self.learn else "Feedback saved.")

    async def toggle_learn(self) -> None:
        self.learn = not self.learn
        if self.conversation_id:
            try:
                await self.client.update_conversation(self.conversation_id, learn=self.learn)
            except DaemonError as exc:
                self.learn = not self.learn
                self.app.notify(str(exc), severity="error")
                return
            await self.refresh_list()
        self.update_header()
        self.app.notify(
            "Learning from this chat." if self.learn else "Not learning from this chat."
        )

    def toggle_thinking(self) -> None:
        self.thinking = not self.thinking
        self.update_header()

    async def new_chat(self) -> None:
        if self.busy:
            self.cancel()
        self.conversation_id, self.history, self.learn = None, [], True
        self.title_text = "New chat"
        await self.query_one("#messages").remove_children()
        self.query_one("#conversations", ListView).index = None
        self.update_header()
        self.query_one(Composer).focus()

    async def rename(self) -> None:
        if not self.conversation_id:
            self.app.notify("Send a message first; then the chat can be renamed.")
            return
        title = await self.app.push_screen_wait(PromptScreen("New title", self.title_text))
        if title:
            try:
                await self.client.update_conversation(self.conversation_id, title=title)
            except DaemonError as exc:
                self.app.notify(str(exc), severity="error")
                return
            self.title_text = title
            self.update_header()
            await self.refresh_list()

    async def delete(self) -> None:
        if not self.conversation_id:
            self.app.notify("No stored chat open.")
            return
        question = f"Delete “{self.title_text}” and everything learned from it?"
        if not await self.app.push_screen_wait(ConfirmScreen(question, "Delete")):
            return
        try:
            await self.client.delete_conversation(self.conversation_id)
        except DaemonError as exc:
            self.app.notify(str(exc), severity="error")
            return
        await self.new_chat()
        await self.refresh_list()
        self.app.notify("Deleted.")

    async def export(self) -> Path | None:
        if not self.conversation_id:
            self.app.notify("No stored chat open.")
            return None
        try:
            conv = await self.client.conversation(self.conversation_id)
        except DaemonError as exc:
            self.app.notify(str(exc), severity="error")
            return None
        self.export_dir.mkdir(parents=True, exist_ok=True)
        stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in self.title_text)[:40]
        path = self.export_dir / f"clawd-{stem.strip('-') or 'chat'}-{conv['id'][:8]}.md"
        path.write_text(to_markdown(conv), encoding="utf-8")
        self.app.notify(f"Exported to {path}")
        return path


def tool_result(turn: dict[str, Any]) -> str | None:
    """What the tool answered to the calls of ``turn`` (its next state), if it came back."""
    nxt = turn.get("next_state") or {}
    return nxt.get("content") if turn.get("tool_calls") and nxt.get("role") == "tool" else None
