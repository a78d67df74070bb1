"""Asking: whether a clause of a reply asks anything of future answers.

A question ("why is every answer 6 paragraphs"), a habit ("I always mix them up"), a stay ("in
London this week"), someone else's ways ("my boss never reads past line one"), a tolerance
("emoji don't bother me") or a question about the assistant's memory ("do you remember my
name?") asks nothing that should last, whatever markers it holds. ``clawd.signals.memory``
skips such clauses. Pure functions of text, no model.

Run alone to see how a clause is read::

    python -m clawd.signals.asking "why is every answer 6 paragraphs"
"""

from __future__ import annotations

import re
import sys

from clawd.signals.phrasing import FACT, HABIT, SO_THEREFORE, STRONG
from clawd.signals.rewrite import PAST

# a question without its question mark ("why is every answer 6 paragraphs", "what if i only
# have a microwave"): a request ("can you always use metric") is not one
QUESTION = re.compile(
    # "ok so what happens if ...", "ok wait then when do i ...": a question after a filler
    r"^\W*(?:(?:ok|okay|so|and|but|hmm|well|right|wait|oh|also|then)\W+)+"
    r"(?:why|what|how|when|where|who)\s+(?:happens|if|do|does|did|is|are|was|should|can|could"
    r"|would|will|about)\b"
    r"|^\W*(?:why|what|how|when|where|who|which|whats|what's|does|did|do you|do i|is it|is there"
    r"|are you|are there"
    # "is the bank going to charge that from now on": an auxiliary, then not "you" (a request)
    r"|(?:is|are|was|were|will|does|did|has|have|am)\s+(?!you\b|u\b|ya\b|not\b)\w+)\b",
    re.IGNORECASE,
)


# "I always mix them up", "we always end up making too much": a habit, not a request
_MODAL = r"(?!(?:should|must|will|would|can|could|shall|need|needs|ought|has to|have to)\b)"
# "it" as a subject ("it always crashes"), not an object ("keep it short always")
_SUBJECT_IT = "".join(
    rf"(?<!\b{v} )" for v in ("keep", "make", "do", "say", "write", "put", "leave", "format")
)
_MY_HABIT = re.compile(
    rf"(?:\b(?:i|i'?m|im|we|we'?re|he|she|they|{_SUBJECT_IT}it"
    rf"|(?:my|our) (?:{_MODAL}\w+ )?{_MODAL}\w+)\s+"
    # not "my kids should never see ...": a modal makes it a rule
    rf"(?:{_MODAL}\w+\s+)?"
    r"(?:always|never|forever)|\bevery time (?:i|we|my)\b)"
    r"(?!\s+(?:want|wants|need|needs|prefer|prefers|like|likes|love|hate|appreciate)\b)",
    re.I,
)


_ASKED_HABIT = re.compile(r"\b(?:can|could|would|will|please) (?:you|u) (?:always|never)\b", re.I)


def habit(clause: str) -> bool:
    """Whether ``clause`` tells a habit or a story ("you always do this", "I never read
    past line one"); "can you always keep it short" asks for one."""
    asked = _ASKED_HABIT.search(clause)
    return bool((HABIT.search(clause) and not asked) or _MY_HABIT.search(clause))


# "I'm in Manchester all this week for a course", "on holiday until Friday": a stay, not a fact
STAY = re.compile(
    r"\b(?:this|next|all (?:this|next)|for the|for a|the whole|over the) (?:week|weekend|month"
    r"|fortnight|summer|winter|semester|term|trip|holiday|few days|couple of (?:days|weeks))\b"
    r"|\bfor (?:a|the|my|our) (?:course|conference|convention|trip|visit|holiday|vacation"
    r"|wedding|meeting|funeral|training|work trip|business trip)\b"
    r"|\b(?:on|for) (?:holiday|vacation|a trip|business|leave)\b|\buntil (?:\w+day|next|the)\b",
    re.I,
)
# "my colleague uses Windows and always ...", "she never listens": someone else's ways
_OTHERS = re.compile(
    r"^\W*(?:(?:and|but|so|also|oh|haha|lol|well)\W+)*(?:(?:my|our) (?:\w+ )?(?:colleague|friend"
    r"|boss|co-?workers?|brother|sister|mom|mum|dad|mother|father|neighbou?r|room-?mate|flatmate"
    r"|cousin|uncle|aunt|grandma|grandpa|mate|buddy|classmate|in-laws?)s?|he|she|they)\b",
    re.I,
)
# "emoji don't bother me", "I don't mind lists": nothing asked for
_TOLERATES = re.compile(
    r"\b(?:don'?t|doesn'?t|do not|does not|never) bothers? (?:me|us)\b"
    r"|\bi (?:don'?t|do not) mind\b",
    re.I,
)
# "Out of curiosity, do you remember ...?": a question to the assistant, whatever its words
_YES_NO = re.compile(
    r"(?:^|[,;:]\s*)(?:do|did|does|are|were|have|has) (?:you|u|ya)\b[^?]*\?\s*$", re.I
)


# "you can remember things about me for next time?", "do u remember stuff i tell u": asked
# whether it remembers, not told what to ("can you remember that I'm vegan" is a request)
_ASKS_MEMORY = re.compile(
    r"\b(?:(?:can|could|do|does|will|would)\s+(?:you|u|ya)|(?:you|u)\s+(?:can|could|will))\s+"
    r"(?:\w+\s+)?(?:remember|recall|keep track)\b(?!\s+(?:that|to|my|i\b|i'm|im\b))"
    # "u remember my name": asked without its question mark
    r"|^\W*(?:you|u|ya) (?:still )?(?:remember|recall|know) (?:my|what|who|where|how|me)\b",
    re.I,
)


def not_a_request(clause: str) -> bool:
    """A clause that asks nothing of future answers, whatever markers it holds: someone
    else's ways, a tolerance, a question to the assistant."""
    about_others = _OTHERS.search(clause) and not FACT.search(clause)
    others = about_others and not SO_THEREFORE.search(clause)
    asked = _YES_NO.search(clause) or _ASKS_MEMORY.search(clause)
    return bool(others or _TOLERATES.search(clause) or asked)


_TAG = re.compile(r"[,\s]+(?:ok|okay|pls|please|yeah|alright|right|k|thx|thanks)\s*\?+\s*$", re.I)


# "can you ALWAYS start with a summary?": a request said to last, asked politely
_POLITE = re.compile(
    r"(?:^|[,;]\s*)\W*(?:(?:ok|okay|so|and|but|hey|also|pls|please)\W+)*"
    r"(?:can|could|would|will) (?:you|u|ya)\b(?: please| pls| just)?"
    r"(?!\s+(?:tell|explain|remind|remember|say|help|check|confirm|recommend|suggest)\b)",
    re.I,
)


# fillers a reaction may open with ("ok so", "lol")
_LEAD_IN = r"^\W*(?:(?:but|and|so|lol|ok|okay|oh|haha|wow|alright|right)\W+)*"
# "I understood everything", "ye remembered ma name": what happened, told in the past
_PAST_SAID = re.compile(
    _LEAD_IN + r"(?:i|you|ye|u|ya|we)\s+(?:\w+ )?" + rf"(?:\w+[^e\s]ed|{'|'.join(sorted(PAST))})\b",
    re.I,
)
# "good to know", "good answer", "your answer was long", "that works for me", "ok good"
_VERDICT = re.compile(
    _LEAD_IN + r"(?:(?:good|nice|great|cool|interesting|useful|handy) to (?:know|hear|see)\b"
    r"|(?:(?:very|really|a) )?(?:good|great|nice|perfect|excellent|solid|fine|decent|helpful)"
    r" (?:answer|reply|response|job|one|stuff|work|explanation)\b"
    r"|(?:your|the|that|this) (?:answer|reply|response|explanation|list|one) (?:was|is)\b"
    r"|(?:that|this|it) was\b|(?:that|this|it) works(?: for (?:me|us))?\W*$"
    r"|(?:good|great|nice|perfect|cool|fine|thanks|awesome|lovely|brilliant)\W*$)",
    re.I,
)


def a_verdict(clause: str, past: bool = True) -> bool:
    """Whether ``clause`` only reacts to the answer ("good to know", "that works for me") or,
    with ``past``, tells what happened ("I understood everything"): it asks nothing of future
    answers."""
    return bool(_VERDICT.search(clause) or (past and _PAST_SAID.search(clause)))


def asks(clause: str) -> bool:
    """Whether ``clause`` is a question ("talk to me like a friend ok?" is not, nor "can you
    always keep it under 50 words?")."""
    if _POLITE.search(clause) and STRONG.search(clause) and not QUESTION.search(clause):
        return False
    return _TAG.sub("", clause).rstrip().endswith("?") or bool(QUESTION.search(clause))


if __name__ == "__main__":
    clause = " ".join(sys.argv[1:]) or sys.stdin.read()
    print(f"question: {asks(clause)}  habit: {habit(clause)}  stay: {bool(STAY.search(clause))}")
    print(f"asks nothing of future answers: {not_a_request(clause)}")
