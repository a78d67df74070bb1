"""Turning generated tokens into the text a client sees: UTF-8 safe, stop strings, thinking.

Small state machines, no model: ``Detokenizer`` joins token bytes without splitting a
multi-byte character; ``StopScanner`` holds back text that might be the start of a stop string;
``ThinkingSplitter`` routes Qwen3's ``<think>...</think>`` block to ``reasoning_content`` and the
rest to ``content``. ``Answer`` chains them for one answer of the engine
(``clawd.serving.engine``), with the shape's verdict on the content and the tokens served.

Run alone to split a text the way the daemon would::

    python -m clawd.serving.textstream "<think>hmm</think>Hello"
"""

from __future__ import annotations

import codecs
import copy
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clawd.chattemplate import THINK_CLOSE, THINK_OPEN
from clawd.signals.shaper import Shaper
from clawd.signals.shaping import Shape


class Detokenizer:
    """Accumulates token bytes and releases only complete UTF-8 characters; a byte that can
    never start or continue one becomes U+FFFD at once (it must not hold back all that
    follows it)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, piece: bytes) -> str:
        return self._decoder.decode(piece)

    def pending(self) -> bytes:
        """The bytes of a character not complete yet."""
        return self._decoder.getstate()[0]

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


def _partial_suffix(text: str, marker: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``marker``."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0


class StopScanner:
    """Finds stop strings across token boundaries; never releases part of a stop string."""

    def __init__(self, stops: list[str]) -> None:
        self.stops = [s for s in stops if s]
        self._held = ""
        self.stopped = False

    def push(self, text: str) -> str:
        """Text that is safe to send now; sets ``stopped`` when a stop string appeared."""
        if self.stopped:
            return ""
        self._held += text
        hits = [i for i in (self._held.find(s) for s in self.stops) if i >= 0]
        if hits:
            self.stopped = True
            out, self._held = self._held[: min(hits)], ""
            return out
        keep = max((_partial_suffix(self._held, s) for s in self.stops), default=0)
        out = self._held[: len(self._held) - keep]
        self._held = self._held[len(out) :]
        return out

    def flush(self) -> str:
        out, self._held = ("" if self.stopped else self._held), ""
        return out


class ThinkingSplitter:
    """Routes streamed text into (reasoning, content) deltas.

    A response that starts with ``<think>`` (after optional whitespace) is in thinking mode
    until ``</think>``; whitespace right after the closing tag is dropped. ``enabled=False``
    (a model whose vocabulary has no thinking tag) routes everything to content at once:
    nothing is held back for a tag that model does not produce.
    """

    def __init__(self, enabled: bool = True) -> None:
        self._state = "start" if enabled else "content"  # start -> thinking -> content
        self._buf = ""

    @property
    def thinking(self) -> bool:
        """Whether the text is inside the thinking block now."""
        return self._state == "thinking"

    def push(self, text: str) -> tuple[str, str]:
        self._buf += text
        reasoning = content = ""
        if self._state == "start":
            stripped = self._buf.lstrip()
            if stripped.startswith(THINK_OPEN):
                self._state, self._buf = "thinking", stripped[len(THINK_OPEN) :]
            elif THINK_OPEN.startswith(stripped):
                return "", ""  # could still become "<think>"
            else:
                self._state = "content"
        if self._state == "thinking":
            end = self._buf.find(THINK_CLOSE)
            if end < 0:
                keep = _partial_suffix(self._buf, THINK_CLOSE)
                reasoning = self._buf[: len(self._buf) - keep]
                self._buf = self._buf[len(reasoning) :]
                return reasoning, ""
            reasoning, self._buf = self._buf[:end], self._buf[end + len(THINK_CLOSE) :]
            self._state = "after"
        if self._state == "after":
            self._buf = self._buf.lstrip()
            if not self._buf:
                return reasoning, ""
            self._state = "content"
        content, self._buf = self._buf, ""
        return reasoning, content

    def flush(self) -> tuple[str, str]:
        rest, self._buf = self._buf, ""
        if self._state == "thinking":
            return rest, ""
        return "", rest if self._state != "after" else rest.lstrip()


def split_thinking(text: str) -> tuple[str, str]:
    """(reasoning, content) of a whole response."""
    splitter = ThinkingSplitter()
    r1, c1 = splitter.push(text)
    r2, c2 = splitter.flush()
    return r1 + r2, c1 + c2


@dataclass
class Delta:
    """A piece of the answer as it is produced."""

    content: str = ""
    reasoning: str = ""


class Answer:
    """One answer's text pipeline: token bytes -> whole UTF-8 characters -> stop strings ->
    thinking or content -> deltas to the client, with the shape's verdict on the content; and
    the tokens served (forced ones included)."""

    def __init__(
        self,
        llm: Any,
        stop: list[str],
        shape: Shape | None,
        on_delta: Callable[[Delta], None],
        thinks: bool,
        budget: int,
    ) -> None:
        self.llm, self.on_delta, self.budget = llm, on_delta, budget
        self.detok, self.stops = Detokenizer(), StopScanner(stop)
        self.think = ThinkingSplitter(thinks)
        self.shaper = Shaper(shape) if shape else None
        self.out_ids: list[int] = []
        self.forced: list[int] = []  # positions in out_ids that were not sampled
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.first: dict[str, float] = {}  # perf_counter of the first token and content

    def push(self, piece: bytes, left: int) -> str:
        """A sampled token's bytes through the pipeline; the shaper's verdict."""
        return self.emit(self.stops.push(self.detok.push(piece)), left=left)

    def emit(self, text: str, sampled: bool = True, left: int | None = None) -> str:
        """Route ``text``; the shaper's verdict on the content it made."""
        r, c = self.think.push(text)
        if not self._deliver(r, c) or self.shaper is None or not c:
            return "go on"
        if not sampled:
            self.shaper.forced(c)
            return "go on"
        return self.shaper.push(c, left)

    def _deliver(self, reasoning: str, content: str) -> bool:
        """Send a delta to the client, if there is anything to send."""
        if not (reasoning or content):
            return False
        self.reasoning.append(reasoning)
        self.content.append(content)
        if content:
            self.first.setdefault("content", time.perf_counter())
        self.on_delta(Delta(content=content, reasoning=reasoning))
        return True

    def force(self, text: str) -> bool:
        """Feed ``text`` to the model as if sampled, and serve it, if it fits the budget."""
        ids = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        if len(self.out_ids) + len(ids) >= self.budget:
            return False
        self.forced += range(len(self.out_ids), len(self.out_ids) + len(ids))
        self.out_ids.extend(ids)
        self.emit(self.stops.push(text), sampled=False)
        return True

    def avoid_state(self) -> tuple[str, bytes, list[int], bool] | None:
        """The content so far, a character's pending bytes, the tokens served and whether the
        closing question is being written; None inside thinking."""
        if self.think.thinking or self.shaper is None:
            return None
        shaper = self.shaper
        return shaper.text, self.detok.pending(), self.out_ids, shaper.closing_started

    def starts_content(self, piece: bytes) -> bool:
        """Whether ``piece`` would begin the answer's content (after any thinking), judged on
        copies so that nothing is consumed."""
        d, s, t = copy.deepcopy((self.detok, self.stops, self.think))
        return bool(t.push(s.push(d.push(piece)))[1].strip())

    def flush(self) -> None:
        """Whatever the pipeline still holds, at the answer's end."""
        self.emit(self.stops.push(self.detok.flush()) + self.stops.flush())
        self._deliver(*self.think.flush())


if __name__ == "__main__":
    reasoning, content = split_thinking(sys.argv[1])
    print(f"reasoning: {reasoning!r}\ncontent:   {content!r}")
