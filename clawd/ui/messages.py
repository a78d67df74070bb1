"""The pieces of a chat: one message (streamed markdown, folded thinking, folded tool calls
with the tool's result, adapter label, rating, the memories it used and the ones your reply
made), the composer (Enter sends, Shift+Enter or
Ctrl+J adds a line), and Markdown export.

Not run alone; ``clawd.ui.chat`` puts them together.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Collapsible, Markdown, Static, TextArea
from textual.widgets._markdown import MarkdownStream


class MessageView(Vertical, can_focus=True):
    """A user or assistant message. Assistant messages take feedback when focused."""

    BINDINGS = [
        Binding("plus,equals_sign", "rate(1)", "Good"),
        Binding("minus", "rate(-1)", "Bad"),
        Binding("c", "comment", "Comment"),
        Binding("u", "undo_memory", "Undo memory", show=False),
    ]

    class Rate(Message):
        """The user rated this message (``rating`` +1/-1, ``comment`` None for a plain thumb)."""

        def __init__(self, view: MessageView, rating: int | None, comment: bool) -> None:
            super().__init__()
            self.view, self.rating, self.comment = view, rating, comment

    class UndoMemory(Message):
        """The user asked to forget the memories shown under this message."""

        def __init__(self, view: MessageView) -> None:
            super().__init__()
            self.view = view

    def __init__(
        self,
        role: str,
        text: str = "",
        *,
        reasoning: str = "",
        response_id: str | None = None,
        adapter: str | None = None,
        rating: int | None = None,
        calls: list[dict[str, Any]] | None = None,
        result: str | None = None,
    ) -> None:
        super().__init__(classes=f"message {role}")
        self.role, self.text, self.reasoning = role, text, reasoning
        self.calls, self.result = calls or [], result  # tool calls made; the tool's answer
        self.response_id, self.adapter, self.rating = response_id, adapter, rating
        self.state = "done" if text or role == "user" else "waiting"
        self._stream: MarkdownStream | None = None
        self.memory_ids: list[int] = []  # the memories in this answer's context
        # {"id", "text", "replaced", "undone"}: memories the reply before this answer made
        self.remembered: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Static(self.label_text(), classes="label")
        if self.role == "assistant":
            with Collapsible(title="thinking", collapsed=True, classes="thinking"):
                yield Static(self.reasoning, classes="reasoning")
            with Collapsible(title=calls_title(self.calls), collapsed=True, classes="tools"):
                yield Static(calls_body(self.calls, self.result), classes="tool-calls")
        yield Markdown(self.text, classes="body")
        if self.role == "assistant":
            with Collapsible(title="memory", collapsed=True, classes="memory"):
                yield Static(classes="memory-texts")
            yield Static(classes="remembered")

    def on_mount(self) -> None:
        if self.role == "assistant":
            self.query_one(".thinking", Collapsible).display = bool(self.reasoning)
            self.query_one(".tools", Collapsible).display = bool(self.calls)
            self.query_one(".memory", Collapsible).display = False
            self.query_one(".remembered", Static).display = False
        self.can_focus = self.role == "assistant"

    def label_text(self) -> str:
        if self.role == "user":
            return "[b]you[/]"
        parts = ["[b]clawd[/]", f"adapter [i]{self.adapter}[/]" if self.adapter else "base model"]
        if self.state == "waiting":
            parts.append("[dim]thinking…[/]")
        elif self.state == "streaming":
            parts.append("[dim]writing… (Esc stops)[/]")
        elif self.state == "cancelled":
            parts.append("[yellow]stopped[/]")
        if self.rating == 1:
            parts.append("[green]▲ good[/]")
        elif self.rating == -1:
            parts.append("[red]▼ bad[/]")
        return " · ".join(parts)

    def refresh_label(self) -> None:
        self.query_one(".label", Static).update(self.label_text())

    async def add(self, kind: str, text: str) -> None:
        """Append streamed ``reasoning`` or ``content`` text."""
        if self.state == "waiting":
            self.state = "streaming"
            self.refresh_label()
        if kind == "reasoning":
            self.reasoning += text
            self.query_one(".thinking", Collapsible).display = True
            self.query_one(".reasoning", Static).update(self.reasoning)
            return
        self.text += text
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(".body", Markdown))
        await self._stream.write(text)

    async def finish(self, state: str = "done") -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.state = state
        self.refresh_label()

    def show_memories(
        self,
        used: list[int],
        left_out: list[int],
        texts: dict[int, str] | None = None,
        shaped: dict[str, Any] | None = None,
    ) -> None:
        """A dim folded line "memory: 2 used" whose body lists the texts (when known) and
        what decoding kept of them (``shaped``: the response's ``clawd.shaped``)."""
        self.memory_ids = list(used)
        texts = texts or {}
        box = self.query_one(".memory", Collapsible)
        box.title = memory_title(used, left_out)
        body = Text()
        for mid in used:
            body.append(f"• {texts.get(mid, f'memory {mid}')}\n")
        for mid in left_out:
            body.append(f"• {texts.get(mid, f'memory {mid}')} (left out: over budget)\n", "dim")
        if shaped:
            body.append(f"kept in decoding: {shaped_text(shaped)}\n", "dim")
        self.query_one(".memory-texts", Static).update(body)
        box.display = bool(used or left_out)

    def show_remembered(self, entries: list[dict[str, Any]]) -> None:
        """Add memories the user's reply made; a notice under the answer says so."""
        known = {e["id"] for e in self.remembered}
        self.remembered += [{**e, "undone": False} for e in entries if e["id"] not in known]
        notice = self.query_one(".remembered", Static)
        notice.update(remembered_text(self.remembered))
        notice.display = bool(self.remembered)

    def pending_memories(self) -> list[dict[str, Any]]:
        """The remembered entries not undone yet."""
        return [e for e in self.remembered if not e["undone"]]

    def action_undo_memory(self) -> None:
        if self.pending_memories():
            self.post_message(self.UndoMemory(self))

    def action_rate(self, rating: int) -> None:
        if self.role == "assistant" and self.response_id:
            self.post_message(self.Rate(self, rating, comment=False))

    def action_comment(self) -> None:
        if self.role == "assistant" and self.response_id:
            self.post_message(self.Rate(self, None, comment=True))


def memory_title(used: list[int], left_out: list[int]) -> str:
    """The folded line's title: 'memory: 2 used', and 'N left out' when over the budget."""
    title = f"memory: {len(used)} used"
    return title + (f", {len(left_out)} left out" if left_out else "")


def shaped_text(shaped: dict[str, Any]) -> str:
    """'opened with "Ana,", at most 1 sentence, a closing question, signed off "Fair winds.",
    no emoji or lists'."""
    parts = []
    if shaped.get("opening"):
        parts.append(f'opened with "{shaped["opening"]}"')
    if shaped.get("limit"):
        parts.append(f"at most {shaped['limit']}")
    if shaped.get("closing_question"):
        parts.append("a closing question")
    if shaped.get("closing_summary"):
        parts.append(f'a closing "{shaped["closing_summary"]}" line')
    if shaped.get("sign_off"):
        parts.append(f'signed off "{shaped["sign_off"]}"')
    if shaped.get("avoid"):
        said = {"newlines": "line breaks", "exclamations": "exclamation marks"}
        parts.append("no " + " or ".join(said.get(a, a) for a in shaped["avoid"]))
    return ", ".join(parts)


def remembered_text(entries: list[dict[str, Any]]) -> Text:
    """One line per memory: "Remembered: <text> (replaces: <old>)", or "Undone: <text>"."""
    text = Text()
    for i, e in enumerate(entries):
        if i:
            text.append("\n")
        if e.get("undone"):
            text.append("Undone: ", "bold yellow")
            text.append(e["text"], "dim strike")
            continue
        text.append("Remembered: ", "bold green")
        text.append(e["text"])
        if e.get("replaced"):
            text.append(f" (replaces: {e['replaced']})", "dim")
    if any(not e.get("undone") for e in entries):
        text.append("   ^G or u: undo", "dim")
    return text


class Composer(TextArea):
    """The input box: Enter sends, Shift+Enter or Ctrl+J inserts a new line."""

    class Send(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            if self.text.strip():
                self.post_message(self.Send(self.text.strip()))
            return
        if event.key in ("shift+enter", "ctrl+j"):
            event.stop()
            event.prevent_default()
            start, end = self.selection
            self._replace_via_keyboard("\n", start, end)
            return
        await super()._on_key(event)


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return ""


def to_markdown(conversation: dict[str, Any]) -> str:
    """A conversation (as ``GET /v1/conversations/{id}`` returns it) as a Markdown document."""
    title = conversation.get("title") or conversation["id"]
    lines = [f"# {title}", "", f"conversation `{conversation['id']}`", ""]
    for turn in conversation["turns"]:
        lines += ["## You", "", last_user_text(turn["messages"]), ""]
        label = f"adapter {turn['adapter_version']}" if turn["adapter_version"] else "base model"
        lines += [f"## clawd ({label})", ""]
        if turn.get("reasoning"):
            quoted = "\n".join(f"> {line}" for line in turn["reasoning"].splitlines())
            lines += ["<details><summary>thinking</summary>", "", quoted, "", "</details>", ""]
        lines += [turn["response"] or "", ""]
        for fb in turn.get("feedback") or []:
            mark = "good" if fb["rating"] == 1 else "bad"
            lines += [f"*Feedback: {mark}{' - ' + fb['comment'] if fb['comment'] else ''}*", ""]
    return "\n".join(lines).rstrip() + "\n"


RESULT_CHARS = 2000  # of a tool's result shown unfolded; the rest is in the conversation


def calls_title(calls: list[dict[str, Any]]) -> str:
    """The folded line of an answer that called tools: "called get_weather, get_time"."""
    return "called " + ", ".join(c["function"]["name"] for c in calls) if calls else "tools"


def calls_body(calls: list[dict[str, Any]], result: str | None) -> Text:
    """Each call with its arguments, then what the tool answered (when it came back)."""
    body = Text()
    for c in calls:
        body.append(c["function"]["name"], style="bold")
        body.append(f"({c['function'].get('arguments', '')})\n")
    if result is not None:
        shown = result if len(result) <= RESULT_CHARS else result[:RESULT_CHARS] + " …"
        body.append("result: ", style="dim")
        body.append(shown)
    return body
