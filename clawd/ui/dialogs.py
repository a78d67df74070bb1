"""Small modal dialogs of the TUI: confirm an action, ask for a line of text, comment on an answer,
add a memory.

Each is a ``ModalScreen`` that dismisses with its result (None when the user backs out with Esc).
Not run alone; ``python -m clawd.ui`` shows them in use.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Switch


class ConfirmScreen(ModalScreen[bool]):
    """Yes or no. Enter or y confirms, Esc or n declines."""

    BINDINGS = [
        Binding("escape,n", "dismiss(False)", "No"),
        Binding("y", "dismiss(True)", "Yes"),
    ]

    def __init__(self, question: str, yes: str = "Yes") -> None:
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="question")
            with Horizontal(classes="buttons"):
                yield Button(self.yes, variant="warning", id="yes")
                yield Button("Cancel", id="no")

    def on_mount(self) -> None:
        self.query_one("#yes", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class PromptScreen(ModalScreen[str | None]):
    """One line of text (a new title, ...). Enter accepts, Esc cancels."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, question: str, value: str = "") -> None:
        super().__init__()
        self.question, self.value = question, value

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="question")
            yield Input(self.value, id="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)


class CommentScreen(ModalScreen[tuple[int, str] | None]):
    """A comment on an answer and whether it was good; sent to the daemon as feedback."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, good: bool = False) -> None:
        super().__init__()
        self.good = good

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("What should have been different? (Enter sends)", classes="question")
            yield Input(placeholder="e.g. shorter, and no bullet points", id="comment")
            with Horizontal(classes="switch-row"):
                yield Switch(self.good, id="good")
                yield Label("the answer was good")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            self.notify("Write a comment, or press Esc to cancel.", severity="warning")
            return
        rating = 1 if self.query_one("#good", Switch).value else -1
        self.dismiss((rating, event.value.strip()))


MEMORY_KINDS = ("other", "name", "length", "language", "format", "tone", "fact")


class MemoryScreen(ModalScreen[tuple[str, str] | None]):
    """A new memory: its text and kind (a newer name, length or language replaces the older
    one). Enter adds, Esc cancels; dismisses with ``(text, kind)``."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("What should clawd remember? (Enter adds)", classes="question")
            yield Input(placeholder="e.g. Keep answers to one paragraph.", id="memory-text")
            yield Select(
                [(kind, kind) for kind in MEMORY_KINDS],
                value="other",
                allow_blank=False,
                id="memory-kind",
            )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            self.notify("Write the memory, or press Esc to cancel.", severity="warning")
            return
        kind = self.query_one("#memory-kind", Select).value
        self.dismiss((event.value.strip(), str(kind)))
