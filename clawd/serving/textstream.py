"""Turning generated tokens into the text a client sees: UTF-8 safe, stop strings, thinking.

Pure functions and small state machines, no model: ``Detokenizer`` joins token bytes without
splitting a multi-byte character; ``StopScanner`` holds back text that might be the start of a
stop string; ``ThinkingSplitter`` routes Qwen3's ``<think>...</think>`` block to
``reasoning_content`` and the rest to ``content``.

Run alone to split a text the way the daemon would::

    python -m clawd.serving.textstream "<think>hmm</think>Hello"
"""

from __future__ import annotations

import codecs
import sys

from clawd.chattemplate import THINK_CLOSE, THINK_OPEN


class Detokenizer:
    """Accumulates token bytes and releases only complete UTF-8 characters; a byte that can
    never start or continue one becomes U+FFFD at once (it must not hold back all that
    follows it)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, piece: bytes) -> str:
        return self._decoder.decode(piece)

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


if __name__ == "__main__":
    reasoning, content = split_thinking(sys.argv[1])
    print(f"reasoning: {reasoning!r}\ncontent:   {content!r}")
