"""Cheap features of a reply: what the probe reads besides the model's hidden states.

A general sentiment lexicon (VADER's, inside the ``vaderSentiment`` wheel) says how warm or cold
a reply sounds, but misses corrections that carry no sentiment ("I asked for Python, not C++")
and change requests said kindly ("could you keep it to one line?"). So pattern families sit on
top: thanks, failure reports, corrections, redo requests, complaints about form (length, lists,
formatting, tone, language), stated preferences, acknowledgements; plus word overlap with the
request (a rephrased request repeats it) and with the answer (a clarifying question quotes it).
Every feature is a float; ``NAMES`` fixes their order. No model here.

Run alone to see the features of one reply::

    python -m clawd.signals.cues "Capital of France?" "Paris is the capital." "thanks!"
"""

from __future__ import annotations

import math
import re
import sys
from functools import lru_cache
from typing import Any

from clawd.signals.rules import Exchange


def _words(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


PATTERNS: dict[str, re.Pattern[str]] = {
    "thanks": _words(
        r"\b(thanks?|thank(s| you)|thx|tysm|ty|cheers|appreciated?|grateful|perfect|great|"
        r"awesome|excellent|brilliant|amazing|wonderful|fantastic|lovely|nice|neat|cool|"
        r"helpful|exactly|spot on|nailed it|love (it|this)|that'?s it|you'?re the best)\b"
    ),
    "worked": _words(
        r"\b(it |that |this )?(works?|worked|working now|fixed (it)?|solved|did the trick|"
        r"sorted|that helped|helps a lot|makes sense now)\b"
    ),
    "failed": _words(
        r"\b(does ?n[o']?t|did ?n[o']?t|does not|did not|won'?t|can'?t|cannot|still|same)\s+"
        r"(work|help|run|compile|load|fix|make sense|error|problem|issue|broken|fails?)\b|"
        r"\b(error|exception|traceback|crash(es|ed)?|broke|broken|fails?|failed)\b"
    ),
    "negation_start": _words(r"^\W*(no+|nope|nah|not|wrong|incorrect|meh|ugh|um+|uh+|hm+|wait)\b"),
    "negation": _words(r"\b(not|never|no|none|nothing|isn'?t|aren'?t|wasn'?t|n't)\b|n't\b"),
    "correction": _words(
        r"\b(actually|in fact|i meant|i mean|i asked|i said|i wanted|i was asking|i need(ed)?|"
        r"instead|rather than|that'?s not|that is not|isn'?t (right|true|correct)|not (right|true|"
        r"correct|what)|wrong|incorrect|mistaken?|mistake|typo|inaccurate|outdated|you forgot|"
        r"you missed|missing|supposed to|should (be|have)|it'?s (actually )?\w+,? not)\b"
    ),
    "redo": _words(
        r"\b(again|redo|re-?do|retry|try (again|once more|that again)|start over|from scratch|"
        r"one more time|another (one|version|try|way|go|attempt)|rewrite|re-?write|rephrase|"
        r"different(ly)?|something else)\b"
    ),
    "form": _words(
        r"\b(short(er)?|long(er)?|brief(er|ly)?|concise|too (long|short|much|many|formal|casual)|"
        r"wordy|verbose|rambl\w*|wall of text|essay|novel|length|tl;?dr|summar\w*|gist|bullets?|"
        r"lists?|points|numbered|paragraphs?|sentences?|one line|one word|few words|format\w*|"
        r"markdown|asterisks|symbols|stars|headings?|headers?|bold|emojis?|smileys?|icons|tone|"
        r"formal|casual|chatty|cheerful|friendl\w*|stiff|robotic|simpler|simple|plain|jargon|"
        r"technical|language|english|spanish|french|german|units?|metric|imperial|detail\w*)\b"
    ),
    "preference": _words(
        r"\b(i'?d (prefer|rather|like|love)|i prefer|i like (it )?when|i want(ed)? you to|"
        r"i'?d appreciate|it (helps|would help)( me)? (if|when)|(please|pls|plz) (just |always |"
        r"don'?t |do not |stop |keep |use |call |be |make |give |write |answer |say )|call me|"
        r"my name'?s|my name is|address me|from now on|next time|in (the )?future|going forward|"
        r"always|stop|don'?t|do not|keep it|make it|less|more|without)\b"
    ),
    "ask_change": _words(r"^\W*(can|could|would|will|might) (you|u)\b|\b(please|pls|plz)\b"),
    "acknowledge": _words(
        r"^\W*(ok(ay)?|k|kk|alright|all right|i see|got it|gotcha|sure|right|hm+|mhm|noted|"
        r"understood|fair enough|fine|cool|yeah|yep|yes)\W*$"
    ),
    "question_word": _words(r"^\W*(what|why|how|when|where|which|who|does|do|is|are|can|should)\b"),
    "what_about": _words(
        r"\b(what about|how about|and (what|how)|also|another question|btw|"
        r"by the way|unrelated|different question|new question|next)\b"
    ),
    "tool_error": _words(
        r"\b(error|exception|traceback|failed|failure|not found|denied|"
        r"invalid|exit (code|status) [1-9])\b"
    ),
}

STOP = frozenset(
    "a an the and or but if of to in on at for with by from as is are was were be been it its "
    "this that these those i you he she we they me my your our their what which who how why "
    "when where do does did can could would should will just so not no yes please thanks ok "
    "okay me about into than then there here have has had get got make".split()
)
WORD = re.compile(r"[a-z0-9']+")

NAMES: tuple[str, ...] = (
    "vader_neg",
    "vader_neu",
    "vader_pos",
    "vader_compound",
    "log_words",
    "has_question",
    "ends_question",
    "exclaims",
    "caps",
    *(f"re_{k}" for k in PATTERNS),
    "overlap_request",
    "overlap_answer",
    "is_tool",
)


@lru_cache(maxsize=1)
def _vader() -> Any:
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def _content(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP and len(w) > 2}


def _share(words: set[str], other: set[str]) -> float:
    return len(words & other) / len(words) if words else 0.0


def features(ex: Exchange) -> list[float]:
    """The cheap features of ``ex``, in the order of ``NAMES``."""
    reply = ex.reply.strip()
    polarity = _vader().polarity_scores(reply)
    letters = [c for c in reply if c.isalpha()]
    caps = sum(c.isupper() for c in letters) / len(letters) if len(letters) > 3 else 0.0
    words = _content(reply)
    values = [
        polarity["neg"],
        polarity["neu"],
        polarity["pos"],
        polarity["compound"],
        math.log1p(len(reply.split())),
        float("?" in reply),
        float(reply.endswith("?")),
        min(reply.count("!"), 3) / 3,
        caps,
        *(min(len(p.findall(reply)), 3) / 3 for p in PATTERNS.values()),
        _share(words, _content(ex.request)),
        _share(words, _content(ex.answer)),
        float(ex.role == "tool"),
    ]
    assert len(values) == len(NAMES)
    return values


if __name__ == "__main__":
    ex = Exchange(request=sys.argv[1], answer=sys.argv[2], reply=sys.argv[3])
    for name, value in zip(NAMES, features(ex), strict=True):
        print(f"{name:20s} {value:+.3f}")
