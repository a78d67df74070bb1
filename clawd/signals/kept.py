"""Whether an answer keeps a memory's shape on its own: the gate's test of what the weights learned.

Decoding keeps a memory's shape (``clawd.signals.shaping``) while the memory is in the prompt.
Before a memory may leave the prompt, the adapter must keep it without that help: its answers,
written without the memory, name the user, stay within the length, end with a question and go
without what is avoided (``clawd.adapters.memgap`` asks this of answers to prompts it was never
trained on). An answer that keeps the shape and says nothing else ("Sam," and the end: an adapter
that over-learned the name) keeps nothing: it must hold ``CONTENT_WORDS`` words besides the name
and the closing question. An answer cut by its token budget keeps no length limit: how long it
would have gone is unknown.

Run alone on a memory and an answer::

    python -m clawd.signals.kept "Keep answers to one line." "Tokyo is the capital of Japan."
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

from clawd.signals.avoid import EMOJI, MARKUP
from clawd.signals.shaper import Shaper
from clawd.signals.shaping import Shape, shape_of

CONTENT_WORDS = 3
_CODE = re.compile(r"```.*?(```|$)", re.S)
_ITEM = re.compile(r"^[ \t]*(?:[-*+\u2022]|\d+[.)])[ \t]+\S", re.M)
_QUESTION = re.compile(r"[^.!?\n]*\?[\"')\]\s]*$")


def _within(shape: Shape, text: str) -> bool:
    """Whether ``text`` is within the shape's length limit, counted as decoding counts."""
    if shape.unit == "words":
        return len(text.split()) <= (shape.limit or 0)
    shaper = Shaper(Shape(limit=shape.limit, unit=shape.unit))
    # words with the spaces before them, line breaks apart (a paragraph ends at a blank line)
    for piece in [*re.findall(r"[ \t]*[^\s]+|\s*\n\s*", text.strip()), "\n\n"]:
        shaper.push(piece)
    return shaper.ends <= (shape.limit or 0)


def broken(shape: Shape, text: str, finished: bool = True) -> list[str]:
    """What of ``shape`` the answer ``text`` does not keep (empty: it keeps all of it):
    "opening" (the name nowhere in it), "limit", "closing", "summary" (no last line with its
    label), "signoff" (not its last words), "content" (too few words of its own), or an
    avoided kind or phrase it holds.
    ``finished``: the answer ended on its own."""
    out: list[str] = []
    prose = _CODE.sub(" ", text)
    own = prose.rstrip()
    if shape.signoff:
        if own.lower().endswith(shape.signoff.rstrip().lower()):
            own = own[: -len(shape.signoff.rstrip())].rstrip()  # not the answer's own words
        else:
            out.append("signoff")
    asked = _QUESTION.search(own)
    if shape.closing:
        if asked:
            own = own[: asked.start()]
        else:
            out.append("closing")
    if shape.summary:
        *rest, last = own.rsplit("\n", 1)
        if shape.summary.rstrip(":").lower() not in last.lower():
            out.append("summary")
        elif rest:
            own = rest[0]  # the summary line is not the answer's own words
    if shape.opening:
        name = shape.opening.rstrip(",")
        if not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text):
            out.append("opening")
        own = own.replace(name, " ")
    if shape.limit and not (finished and _within(shape, text)):
        out.append("limit")
    if len(re.findall(r"\w+", own)) < CONTENT_WORDS:
        out.append("content")
    for kind in shape.avoid:
        if kind.startswith('"'):
            hit = kind[1:-1].lower() in text.lower()
        else:
            hit = {
                "exclamations": "!" in prose,
                "newlines": "\n" in prose.strip(),
                "lists": bool(_ITEM.search(prose)),
                "markdown": bool(MARKUP.search(b"\n" + text.encode())),  # as decoding bans it
                "emoji": bool(EMOJI.search(text)),
            }.get(kind, False)
        if hit:
            out.append(kind)
    return out


def checker(memory: str) -> Callable[[str, bool], bool] | None:
    """The test of ``memory`` (``clawd.adapters.memgap.Check``): whether an answer (a
    conversation's first; its text and whether it ended on its own) keeps what the memory
    shapes; None when the memory has no shape to check (a fact, a tone, a language)."""
    shape = shape_of([memory], first_answer=True)
    if not shape:
        return None
    return lambda text, finished: not broken(shape, text, finished)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m clawd.signals.kept MEMORY ANSWER")
    shape = shape_of([sys.argv[1]], first_answer=True)
    print(shape.describe(), "broken:", broken(shape, sys.argv[2]) if shape else "no shape")
