"""Lengths: the length limit a memory states ("50 words max", "two or three lines", "keep it
short"), as a number and a unit, and whether it was only vague; with the phrases the memory
quotes ("the 'Short answer:' opener") and a length said of a part of the answer ("end with a
one-line tl;dr") left out. ``clawd.signals.shaping`` builds the answer's shape from it.

Run alone to read one memory's limit::

    python -m clawd.signals.lengths "Keep answers under thirty two words."
"""

from __future__ import annotations

import re
import sys

# "keep it short": one sentence. On SmolLM2 and the 20 held-out prompts (2026-12-07) one
# sentence ran 4-26 words (median 15), two 4-53 (median 35, 2 of 20 within 30 words): the
# word limits users state (25-60) are kept by one
VAGUE_SENTENCES = 1

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "single": 1,
    "a single": 1,
    "two": 2,
    "a couple of": 2,
    "couple of": 2,
    "three": 3,
    "a few": 3,
    "few": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "a hundred": 100,
    "hundred": 100,
}
_UNITS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_TEENS = ("eleven", "thirteen", "fourteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_NUMBERS |= {w: 11 + i + (i > 0) + (i > 2) for i, w in enumerate(_TEENS)}
_NUMBERS |= {w: 20 + 10 * i for i, w in enumerate(_TENS)}
# "twenty-five", "thirty two": read as digits before anything else
_COMPOUND = re.compile(rf"\b({'|'.join(_TENS)})[- ]({'|'.join(_UNITS)})\b", re.I)
_NUM = (
    r"(\d{1,4}|a single|a couple of|couple of|a few|a hundred|"
    + "|".join(sorted((k for k in _NUMBERS if " " not in k), key=len, reverse=True))
    + ")"
)
_UNIT = r"(words?|sentences?|lines?|paragraphs?)"
# "two or three lines", "a sentence or two", "a 50-word answer", "50 words": the larger number
_LIMIT = re.compile(
    rf"\b{_NUM}\s*(?:or|to|-)\s*{_NUM}[\s-]+{_UNIT}\b"
    rf"|\b{_NUM}[\s-]+{_UNIT}\s+(?:or|to)\s+{_NUM}\b"
    rf"|\b{_NUM}[\s-]+{_UNIT}\b",
    re.I,
)
_AT_LEAST = re.compile(r"\b(at least|minimum|min\.?|more than|over|longer than)\s+$", re.I)
_NOT_MORE = re.compile(r"(\bno|\bnot|\bnever|n't)\b[^.]{0,20}\bmore than\s+$", re.I)
_VAGUE = re.compile(
    r"\b(short|shorter|brief|briefer|concise|succinct|terse|to the point|bite[- ]sized)\b",
    re.I,
)
ONE_LINE = re.compile(r"\b(tl;? ?dr|one[- ]liners?|(?:one|single)[- ]line(?:r|rs)?)\b", re.I)
# "end every answer with a one-line tl;dr", "a two-sentence summary at the top": a part of the
# answer has that length, not the answer
_PART = re.compile(
    r"\b(?:end|ends|ending|finish|close|add|append|include|followed|start|begin|open)\w*\b"
    r"[^.]{0,40}$",
    re.I,
)
_PART_NOUN = re.compile(
    r"^[\s\"'‘“]*(?:\w+:?[\"'’”]?\s+)?(?:summary|recap|tl;? ?dr|takeaway|conclusion|intro"
    r"|headline|title|answer first|verdict)\b",
    re.I,
)


def a_part(text: str, start: int, end: int) -> bool:
    """Whether the length said at ``text[start:end]`` is of a part of the answer."""
    return bool(
        _PART.search(text[:start])
        or _PART_NOUN.search(text[end:])
        # "a TL;DR at the top of every answer"
        or re.match(
            r"[^.]{0,20}?\bat the (?:very )?(?:top|start|beginning|end|bottom)\b", text[end:]
        )
    )


NEGATED = re.compile(r"\b(not|never|don'?t|no|stop|less|too)\s+(\w+\s+){0,3}$", re.I)


def _number(text: str | None) -> int | None:
    if not text:
        return None
    return int(text) if text.isdigit() else _NUMBERS.get(text.lower())


def _unit(word: str) -> str:
    word = word.lower().rstrip("s")
    return {"word": "words", "paragraph": "paragraphs"}.get(word, "sentences")


# a phrase in quotes: "start with 'Short answer:'", "end with "Fair winds."" (an apostrophe
# inside a word, "that's", opens none)
QUOTED = re.compile(r"(?:(?<=[\s(:,])|^)[\"'“‘]([^\"“”‘’\n]{1,40}?)[\"'”’](?!\w)")


def limit_of(text: str) -> tuple[int, str] | None:
    """The length limit a memory states, as (number, unit), or None."""
    found = limit_said(text)
    return found[:2] if found else None


def limit_said(text: str) -> tuple[int, str, bool] | None:
    """``limit_of``, and whether the limit is only vague ("keep it short")."""
    text = QUOTED.sub(" ", text)  # "the 'Short answer:' opener" states no length
    text = _COMPOUND.sub(
        lambda m: str(_NUMBERS[m.group(1).lower()] + _UNITS.index(m.group(2).lower()) + 1), text
    )
    for m in _LIMIT.finditer(text):
        before = text[: m.start()]
        if _AT_LEAST.search(before) and not _NOT_MORE.search(before):
            continue
        if a_part(text, *m.span()):
            continue
        g = m.groups()
        numbers = [n for n in map(_number, (g[0], g[1], g[3], g[5], g[6])) if n]
        unit = g[2] or g[4] or g[7]
        if numbers and unit:
            return max(numbers), _unit(unit), False
    one = ONE_LINE.search(text)
    if one and not NEGATED.search(text[: one.start()]) and not a_part(text, *one.span()):
        return 1, "sentences", False  # "tl;dr" is a one-line summary
    vague = _VAGUE.search(text)
    if vague and not NEGATED.search(text[: vague.start()]):
        return VAGUE_SENTENCES, "sentences", True
    return None


if __name__ == "__main__":
    print(limit_said(" ".join(sys.argv[1:])))
