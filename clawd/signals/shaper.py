"""The shaper: follows one answer as it streams and says when its shape ends it.

``clawd.signals.shaping`` reads what the memories ask (a ``Shape``: a name opening, a length
limit, a closing question or summary line, what to avoid); a ``Shaper`` applies it while the
answer is decoded (``clawd.serving.engine``, ``clawd.training.greedy``) and when an answer is
checked afterwards (``clawd.signals.kept``): it counts sentences, lines, paragraphs or words,
ignoring code blocks, and says when to end, cut, or force the closing words or the sign-off.

Run alone to see where a shape would end a text::

    python -m clawd.signals.shaper "Keep answers to two sentences." "One. Two. Three."
"""

from __future__ import annotations

import re
import sys

from clawd.signals.shaping import Shape, shape_of

CLOSING_TOKENS = 48  # the most a closing question may take
CLOSING_RESERVE = 32  # tokens kept for it when the answer has a token budget
CLOSING_WORDS = 8  # room a word limit keeps for the closing question
SIGNOFF_RESERVE = 16  # tokens kept for the sign-off when the answer has a token budget

_END = re.compile(r"(?<![0-9])(?<!\b[A-Za-z])(?<!\be\.g)(?<!\bi\.e)(?<!\betc)[.!?]+[\"')\]]*$")
_ABBREV = re.compile(r"\b(Mr|Mrs|Ms|Dr|Prof|St|vs|No|approx|Fig)\.$")


class Shaper:
    """Follows the content of one answer as it streams and says when the shape ends it.

    ``push(piece)`` takes each sampled piece of content and answers "go on", "end" (a limit
    reached at a sentence end, or the closing question asked) or "cut" (a word limit reached
    mid-sentence); ``forced(text)`` adds words that were not sampled; ``closing()`` says
    whether the closing question is to be forced now, ``signing()`` whether the sign-off."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.text = ""
        self.ends = 0  # sentences (lines count) or paragraphs ended so far
        self.closing_started = False
        self.closing_pieces = 0
        self.signed = False

    def forced(self, text: str) -> None:
        self.text += text

    def _in_code(self) -> bool:
        return self.text.count("```") % 2 == 1

    def push(self, piece: str, tokens_left: int | None = None) -> str:
        """The verdict on one more sampled ``piece``; ``tokens_left``: how many tokens the
        answer may still take (a closing question is asked before they run out)."""
        if not piece:
            return "go on"
        before = self.text
        self.text += piece
        if self.closing_started:
            self.closing_pieces += 1
            done = self._sentence_ended(before) or "\n" in piece
            # out of room: end it here (``question_open``: its "?" is forced)
            left = SIGNOFF_RESERVE // 2 if self.shape.signoff else 2  # the sign-off's room
            full = self.closing_pieces >= CLOSING_TOKENS or (
                tokens_left is not None and tokens_left <= left
            )
            return "end" if done or full else "go on"
        if self._in_code():
            return "go on"
        shape = self.shape
        ended = self._sentence_ended(before)
        reserve = (CLOSING_RESERVE if shape.closes else 0) + (
            SIGNOFF_RESERVE if shape.signoff else 0
        )
        if reserve and tokens_left is not None and tokens_left <= reserve:
            # room for the question (or the sign-off) is running out: end this sentence, or now
            if ended or tokens_left <= reserve // 2:
                return "end"
        if not shape.limit:
            return "go on"
        if shape.unit == "paragraphs":
            blank = re.compile(r"\n\s*\n\s*$")
            if blank.search(self.text) and self.text.strip() and not blank.search(before):
                self.ends += 1
            return "end" if self.ends >= shape.limit else "go on"
        self.ends += ended
        signoff = shape.signoff or ""
        if shape.unit == "sentences":
            # the sign-off's sentence counts too ("Four sentences" and "... 'Fair winds.'")
            room = max(1, shape.limit - bool(_is_end(signoff.rstrip())))
            return "end" if ended and self.ends >= room else "go on"
        room = shape.limit - (CLOSING_WORDS if shape.closes else 0) - len(signoff.split())
        words = len(self.text.split())
        if ended and words + words / self.ends > room:
            return "end"  # one more sentence of the mean length would pass the limit
        return "cut" if words >= room else "go on"

    def _sentence_ended(self, before: str) -> bool:
        """Whether the content just ended a sentence (or a line that has words, did not end
        one already and does not introduce what follows: no ":", "," or ";" at its end)."""
        text = self.text.rstrip(" \t")
        if text.endswith("\n"):
            if before.endswith("\n") or "\n" in before[len(before.rstrip()) :]:
                return False
            line = before.rsplit("\n", 1)[-1].rstrip()
            # a line that introduces what follows ("Here is the code:", the opening "Ana,", a
            # greeting "Hi Sam,") ends nothing
            return (
                bool(re.search(r"\w", line))
                and not _is_end(line)
                and not line.endswith((":", ",", ";"))
            )
        return _is_end(text)

    def question_open(self) -> bool:
        """Whether the closing question was begun and is not asked yet (no "?" at its end):
        an answer that ends now gets its "?" forced."""
        asking = self.closing_started and self.shape.closing
        return asking and not self.text.rstrip().endswith("?")

    def closing(self) -> bool:
        """Whether to force the closing question (or summary line) now: once; never after a
        question, nor after a last line that holds the summary's label."""
        if not self.shape.closes or self.closing_started or self._in_code():
            return False
        text = self.text.rstrip()
        if self.shape.closing:
            if text.endswith("?"):
                return False
        elif self.shape.summary.lower().rstrip(":") in text.rsplit("\n", 1)[-1].lower():
            return False
        self.closing_started = True
        return True

    def signing(self) -> bool:
        """Whether to add the sign-off now, at the answer's end: once, outside code, unless
        the answer ends with it already."""
        signoff = self.shape.signoff
        if not signoff or self.signed or self._in_code():
            return False
        self.signed = True
        return not self.text.rstrip().lower().endswith(signoff.rstrip().lower())


def _is_end(text: str) -> bool:
    """Whether ``text`` ends with a sentence's end (not "e.g.", "Dr.", "3." or a list's "1.")."""
    if not _END.search(text) or _ABBREV.search(text):
        return False
    return not re.search(r"(^|\n)\s*\d+[.)]$", text)


if __name__ == "__main__":
    shaper = Shaper(shape_of([sys.argv[1]], first_answer=False))
    for word in re.findall(r"\s*\S+", sys.argv[2]):
        verdict = shaper.push(word)
        if verdict != "go on":
            print(f"{verdict} after: {shaper.text!r}")
            break
    else:
        print(f"the shape never ends: {shaper.text!r}")
