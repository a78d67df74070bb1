"""Corrections said again: the same complaint about two answers becomes a memory.

Capture (``clawd.signals.memory``) keeps a one-off correction out of memory: "Too long." or
"why is everything a list with you" corrects the answer it follows, and says nothing of the
next. Said about a second answer, it does: a user who has complained twice about long answers
wants short ones. So each reply that complains about one of a few forms of an answer (its
length, lists, emoji, markdown, line breaks, exclamation marks, no question back) is noted in
the store (an event with the form and the conversation only, not the reply's words;
forgetting the conversation removes it), and when a reply makes the same complaint as one
made within ``DAYS`` before it, the memory the complaint implies is made
("Keep answers short."), unless the memories in the prompt already ask for it.

A complaint is the form's words after a sign of displeasure ("too long", "less of the lists",
"why all the emoji?"); "that list was funny" and "can you list the steps?" are none. Run
alone to see what a reply complains of::

    python -m clawd.signals.corrections "ugh, another essay" "why is everything a list with you"
"""

from __future__ import annotations

import re
import sys
import time
from typing import Any

from clawd.signals.shaping import Shape, shape_of
from clawd.store import memories
from clawd.store.db import Store

DAYS = 14  # how long a complaint is remembered for the next to match

# what a complaint about a form says before it ("too many lists", "why is everything a list",
# "another essay"), against what a request for it says ("I want a numbered list", "can you
# list the steps?"): the nearer of the two, within six words, decides
_CUE = re.compile(
    r"(?P<neg>\b(?:too|no|not|never|stop|quit|less|fewer|enough|hate|hated|dislike|without"
    r"|lose|drop|ditch|cut|ugh|meh|why|another|so many|so much|all th(?:e|ose|ese))\b|n't\b)"
    r"|(?P<want>\b(?:want|need|prefer|like|love|give me|make|use|add|include|put|can you"
    r"|could you|would you|list)\b)",
    re.I,
)
# form: (what a complaint about it says, whether it needs a sign of displeasure, memory, kind)
FORMS: dict[str, tuple[re.Pattern[str], bool, str, str]] = {
    "length": (
        re.compile(
            r"\btoo long\b|\bwall of text\b|\b(?:an?|another|whole) (?:essay|novel|lecture|"
            r"book)\b|\bshorter\b|\bget to the point\b|\btl;? ?dr\b|\btoo much (?:text|to read|"
            r"reading|detail)\b|\bstopped reading\b|\b(?:too )?(?:wordy|verbose|long-winded)\b"
            r"|\brambl\w+|\bless (?:text|words|detail)\b|\bkeep it (?:short|brief)\b",
            re.I,
        ),
        False,
        "Keep answers short.",
        "length",
    ),
    "lists": (
        re.compile(r"\b(?:lists?|bullet(?:s| points?)?|numbered|powerpoint)\b", re.I),
        True,
        "Do not use lists; write in sentences.",
        "format",
    ),
    "emoji": (
        re.compile(r"\b(?:emojis?|emoticons?|smileys?|little pictures|icons)\b", re.I),
        True,
        "Do not use emoji.",
        "format",
    ),
    "markdown": (
        re.compile(r"\b(?:asterisks?|markdown|formatting|hashtags?|symbols|bold|headers)\b", re.I),
        True,
        "Write plain text without markdown.",
        "format",
    ),
    "newlines": (
        re.compile(
            r"\b(?:one|a single|single) (?:paragraph|block)\b|\b(?:line|paragraph) breaks?\b"
            r"|\bblank lines?\b|\bnew ?lines?\b",
            re.I,
        ),
        False,
        "Write one paragraph, with no line breaks.",
        "format",
    ),
    "exclamations": (
        re.compile(r"\bexclamation|\bshout(?:ing|y)?\b", re.I),
        True,
        "Do not use exclamation marks.",
        "tone",
    ),
    "question": (
        re.compile(
            r"\bask(?:ing)? me (?:something|anything|a question|back)\b|\bcheck (?:back|in) with"
            r" me\b|\bconversation over\b|\bnot at me\b|\bquestions? back\b",
            re.I,
        ),
        False,
        "End each answer with a question back to the user.",
        "other",
    ),
}


def complaints(reply: str) -> list[str]:
    """The forms of an answer ``reply`` complains of (``FORMS``' names), in their order."""
    return [
        form
        for form, (words, displeased, _, _) in FORMS.items()
        if any(not displeased or _complains(reply[: m.start()]) for m in words.finditer(reply))
    ]


def _complains(before: str) -> bool:
    """Whether the words ``before`` a form's name complain of it: the nearest cue within six
    words is one of displeasure (a wish for it, "I want a list", counts as none, unless it is
    negated: "I don't want lists")."""
    near = re.search(r"(?:\S+\s+){0,6}\S*$", before)
    text = near.group(0) if near else ""
    cues = list(_CUE.finditer(text))
    if not cues:
        return False
    if cues[-1].group("neg"):
        return True
    if len(cues) < 2 or not cues[-2].group("neg"):
        return False
    # "don't want", "never need": the wish is negated
    between = text[cues[-2].end() : cues[-1].start()]
    return bool(re.fullmatch(r"\s*(?:(?:ever|really|even|actually)\s+)?", between))


def said_again(
    store: Store,
    reply: str,
    *,
    source: str = "reply",
    turn_id: str | None = None,
    conversation_id: str | None = None,
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Note ``reply``'s complaints; for each made within ``DAYS`` before too, the memory it
    implies, unless the memories in the prompt already ask for it: ``memories.add``'s
    ``(memory, replaced)`` per memory made."""
    said = complaints(reply)
    if not said:
        return []
    since = time.time() - DAYS * 86400
    before = [e["data"]["forms"] for e in store.events(50, "complaint") if e["ts"] >= since]
    store.event(
        "complaint",
        f"an answer's {', '.join(said)} complained of",
        forms=said,
        conversation_id=conversation_id,
    )
    kept = shape_of([m["text"] for m in memories.in_prompt(store)], first_answer=True)
    made = []
    for form in said:
        if not any(form in forms for forms in before) or _asked(kept, form):
            continue
        _, _, text, kind = FORMS[form]
        made.append(
            memories.add(
                store,
                text,
                kind,
                source=source,
                reply=reply[:2000],
                turn_id=turn_id,
                conversation_id=conversation_id,
            )
        )
    return made


def _asked(shape: Shape, form: str) -> bool:
    """Whether the memories' ``shape`` already asks for what a complaint of ``form`` wants."""
    if form == "length":
        return shape.limit is not None
    if form == "question":
        return shape.closing
    return form in shape.avoid


if __name__ == "__main__":
    for r in sys.argv[1:] or [sys.stdin.read()]:
        print(f"{complaints(r)!s:30} <- {r!r}")
