"""Rewrite: a clause of a reply turned into a memory's text.

"Please, from now on keep it short" -> "Keep it short."; "I prefer short answers" -> "The user
prefers short answers."; what the user quotes ("no 'great question'") is kept as said. Pure
functions of text, no model; ``clawd.signals.memory`` decides which clauses become memories.

Run alone to see a clause rewritten::

    python -m clawd.signals.rewrite "I'm vegetarian, so keep that in mind."
"""

from __future__ import annotations

import re
import sys

from clawd.signals.phrasing import topic_of

_LEAD = re.compile(
    r"^(?:(?:(?:no|nope|yes|yeah|ugh|hmm|lol)[,!.:;]+|and|but|also|so|oh|ok|okay|alright|well|hey|"
    r"hi|btw|by the way|ps|p\.s\.|one more thing|just|honestly|seriously|look|listen|thanks|"
    r"thank you|please|pls|"
    r"plz|kindly|could you|can you|would you|will you|i'd like you to|i want you to|i need you"
    r"to|make sure to|make sure you|be sure to|try to|remember to|remember that|keep in mind"
    r"that|keep in mind|note that|for the record|fyi|for future reference|from now on|going "
    r"forward|in (?:the )?future|in general|by default|as a rule)[\s,:;!-]+)+",
    re.IGNORECASE,
)
_TAIL = re.compile(
    r"[\s,;:-]*\b(?:(?:so |and )?(?:please )?(?:keep (?:that|this|it) in mind"
    r"|remember (?:that|this|it)|bear (?:that|this|it) in mind|note that"
    r"|take (?:that|this|it) into account)|from now on|going forward|moving forward"
    r"|in (?:the )?future|from here on"
    r"(?: out)?|for future (?:answers|replies|reference)|(?:each and )?every (?:single )?time"
    r"|each time|please|pls|plz|"
    r"thanks|thank you|ok|okay|in general|by default|as a rule|if you can|if possible|"
    r"from today|for the future|as well|too|all the time|thx|ty|going on|ever|from now|btw|"
    r"by the way|thanks in advance|remember (?:it|this|that))\b[\s,.!?]*$",
    re.IGNORECASE,
)


# past tenses that do not end in "-ed" ("I told you", "I said", "I spent years at sea")
PAST = set(
    "told said spent understood thought knew got made went came saw gave took wrote meant found"
    " felt kept left lost heard built bought taught brought sent grew began forgot became ran sat"
    " stood had did was were".split()
)


def _third_person(text: str) -> str:
    """First person to "the user": "I prefer" -> "The user prefers", "my" -> "the user's"."""

    def verb(m: re.Match[str]) -> str:
        adverb, v = m.group(1) or "", m.group(2)
        irregular = {
            "am": "is",
            "'m": "is",
            "have": "has",
            "do": "does",
            "go": "goes",
            "was": "was",
            "can": "can",
            "will": "will",
            "would": "would",
            "should": "should",
            "could": "could",
            "must": "must",
            "might": "might",
            "cant": "cannot",
            "can't": "cannot",
            "dont": "does not",
            "don't": "does not",
            "didnt": "did not",
            "didn't": "did not",
            "wont": "will not",
            "won't": "will not",
        }
        if v.lower() in irregular:
            return f"the user {adverb}{irregular[v.lower()]}"
        if re.search(r"[^e]ed$", v.lower()) or v.lower() in PAST:
            return f"the user {adverb}{v}"  # "I asked before": a past tense stays
        if v.lower().endswith(("s", "sh", "ch", "x", "z", "o")):
            return f"the user {adverb}{v}es"
        if re.search(r"[^aeiou]y$", v):
            return f"the user {adverb}{v[:-1]}ies"
        return f"the user {adverb}{v}s"

    t = re.sub(r"\bI'm\b|\bIm\b|\bi'm\b|\bim\b(?! [A-ZÄÖÜ])", "the user is", text)
    t = re.sub(r"\bI've\b", "the user has", t, flags=re.I)
    t = re.sub(r"\bI'd\b", "the user would", t, flags=re.I)
    t = re.sub(r"\bI'll\b", "the user will", t, flags=re.I)
    t = re.sub(r"\bI don'?t\b|\bI do not\b", "the user does not", t, flags=re.I)
    t = re.sub(r"\bI can'?t\b|\bI cannot\b", "the user cannot", t, flags=re.I)
    t = re.sub(
        r"\bI ((?:only|mostly|mainly|usually|really|also|always|never|just|actually|generally"
        r"|normally|typically|honestly|definitely|totally|literally|rarely|often|sometimes|still"
        r"|truly|seriously|absolutely|even) )?"
        r"([A-Za-z']+)",
        verb,
        t,
        flags=re.I,
    )
    t = re.sub(r"\bmy\b", "the user's", t, flags=re.I)
    t = re.sub(r"\bmine\b", "the user's", t, flags=re.I)
    t = re.sub(r"\bmyself\b", "themselves", t, flags=re.I)
    t = re.sub(r"\bme\b", "the user", t, flags=re.I)
    return t


_QUOTED = re.compile(r"((?<!\w)['\"“‘][^'\"“”‘’\n]{1,60}?['\"”’](?!\w))")


_PRONOUN = re.compile(
    r"\b(them|those|these)\b(?! (?:\w+ )?(?:emojis?|lists?|bullets?|tables?))", re.I
)


def name_them(text: str, before: str) -> tuple[str, str] | None:
    """``text`` with its first "them" (or "those", "these") named, when it stands for the last
    format or tone word ``before`` says ("the little faces are called emojis ... leave them
    out": "Leave the emojis out."), so that decoding knows what to avoid; and that word. None
    when there is nothing to name."""
    word = _PRONOUN.search(text) and topic_of(before)
    if not word:
        return None
    return _PRONOUN.sub(f"the {word.lower()}", text, count=1), word


def tidy(clause: str) -> str:
    """The clause as an instruction: lead-ins, markers and politeness out, first person turned
    into "the user", a capital first letter and a full stop."""
    t = clause.strip(" \t\"'`*_-")
    quoted = [m.end() for m in _QUOTED.finditer(clause.rstrip())]
    if quoted and quoted[-1] == len(clause.rstrip()):  # "end with 'Fair winds.'": kept whole
        t = clause.strip().lstrip("\"'`*_-")
    t = re.sub(r"\s+", " ", t)
    for _ in range(3):
        t = _LEAD.sub("", t).strip()
        t = _TAIL.sub("", t).strip(" ,;:-")
    t = re.sub(r"^(?:you should|you must|you need to|you have to)\s+", "", t, flags=re.I)
    t = re.sub(r"^stop using\b", "Do not use", t, flags=re.I)
    t = re.sub(r"^(?:please )?stop\b", "Do not keep", t, flags=re.I)
    t = re.sub(r"^no more\b", "No", t, flags=re.I)
    # "You never check back with me" asks for the opposite: "Check back with the user."
    t = re.sub(r"^(?:you|u) (?:never|don'?t ever|rarely|hardly ever) (?=\w)", "", t, flags=re.I)
    t = re.sub(r"^(?:you|u) always (?=\w)", "Do not ", t, flags=re.I)
    # what the user quotes is the assistant's words ("no 'let me know if'"): kept as said
    pieces = _QUOTED.split(t)
    t = "".join(p if i % 2 else _third_person(p) for i, p in enumerate(pieces))
    t = t.rstrip(" .!?,;:")
    return (t[:1].upper() + t[1:] + ".") if t else ""


def contentful(text: str) -> bool:
    """Whether a memory says something on its own (not "Do that." or "Never again.")."""
    words = re.findall(r"[a-z]+", text.lower())
    # words that say nothing on their own ("Generally, I mean, not just this one.")
    vague = set(
        "again always answer answers any anymore anywhere could default do doesn don each ever"
        " every everything everywhere for from generally here how is it just keep like likes"
        " maybe mean means mind more never not now once one only perhaps please prefer prefers"
        " replies reply rule said saves single so standing stop stuff that that's thats the"
        " thing things this time tops user want wants way when would you future next worth knowing"
        " suppose supposes excuse pardon sorry hey hello listen".split()
    )
    return any(w not in vague and len(w) > 2 for w in words)


if __name__ == "__main__":
    print(tidy(" ".join(sys.argv[1:])))
