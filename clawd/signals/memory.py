"""Capture: does a reply state something that should hold for every future answer?

A reply ("Way too long. Please call me Ana, and keep answers to one line from now on.") may
carry a **standing** preference or fact about the user (a name, a length, a language, a format,
a tone, a fact such as "I'm vegetarian") or only a **one-off** correction of the answer it
follows ("I asked for Python, not C++", "shorter please"), or neither. Standing statements
become memories in a second-person form ("Address the user as Ana.", "Keep answers to one
line."), which the daemon puts in the system message of every answer from the next on.

The decision is made by rules over each clause of the reply, so that it works with any served
model, the 135M default included, and never depends on a model writing well:

- a **name** ("call me Ana", "my name is Ana", "I go by Ana") is standing by itself;
- a self-description that lasts ("I'm vegetarian", "I'm a nurse", "I live in Lisbon", "I only
  code in Rust", "I'm allergic to peanuts") is a standing **fact**;
- any other request is standing only with a marker that it lasts: "from now on", "always",
  "never", "in future", "going forward", "by default", "remember", "I prefer", "keep your
  answers ...", "every time"; without one ("make it shorter", "redo it in French") it corrects
  this answer only. "this time", "for now", "just this once" make any clause one-off.

The memory text is the clause itself, with the markers and politeness taken out and the first
person turned into "the user" ("I prefer short answers" -> "The user prefers short answers."),
so the preference's words (the name, the number, the language) are kept as said.

A one-off complaint said again about a second answer ("Too long." and later "ugh, another
essay") is a preference after all: ``remember`` makes the memory it implies
(``clawd.signals.corrections``).

Run alone to see what a reply would make::

    python -m clawd.signals.memory "Please call me Ana, and keep answers to one line from now on."
    python -m clawd.signals.memory "Tomasz. Not Thomas." "Hi Thomas, here it is."   # reply, answer
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, replace
from typing import Any

from clawd.signals import foreign
from clawd.signals.asking import QUESTION, STAY, a_verdict, asks, habit, not_a_request
from clawd.signals.corrections import said_again
from clawd.signals.names import (
    CALL_ME,
    NAME,
    corrected,
    name_in,
    not_a_correction,
    surname_in,
)
from clawd.signals.phrasing import (
    ABOUT_ME,
    EPHEMERAL,
    FACT,
    HABIT,
    LASTING,
    ONE_OFF,
    SO_THEREFORE,
    STRONG,
    TRANSIENT,
    clauses,
    kind_of,
    sentences,
)
from clawd.signals.rewrite import contentful, name_them, tidy
from clawd.signals.shaping import avoids_of, shape_of
from clawd.signals.standing import probabilities, probability
from clawd.store import memories
from clawd.store.db import Store

# The classifier's probability from which a reply counts as standing: chosen by leaving one
# voice of the fitted replies out at a time (0.5: precision 0.91, recall 0.96; 0.6: 0.96, 0.85;
# 0.7: 1.00, 0.77), for precision first (bench/capture.py). Again on 23 voices (2026-12-07):
# 0.6: 0.958, 0.941; 0.7: 0.972, 0.914; but 0.7 fell to recall 53/80 on the blind set
# (docs/experiments.md, "Capture on two more writers"), so it stays 0.6.
STANDING = 0.6
# The least a clause of a standing reply must score to become its memory when the rules found
# none (2026-12-07, leaving one fitted voice out: 0.0: precision 396/411, recall 396/419;
# 0.45: 393/405, 393/419; 0.6: 390/401, 390/419; the blind set's recall 62/80 up to 0.45).
CANDIDATE = 0.45


@dataclass(frozen=True)
class Captured:
    """One standing statement: its kind, the memory text, and the clause it came from."""

    kind: str
    text: str
    clause: str
    strong: bool = False  # said outright to last, in the clause or in a marker after it


def capture(reply: str, answer: str = "") -> list[Captured]:
    """The standing statements of ``reply`` to ``answer`` (empty when it only corrects the
    answer or says nothing lasting), at most one per kind and topic, in the order said.

    A name said outright ("call me Ana") always counts, and so does one put in place of what
    the answer called the user ("Tomasz. Not Thomas." after "Hi Thomas, ...": the answer is
    read for that alone). Anything else counts when the classifier
    (``clawd.signals.standing``) finds the reply standing: the clauses the rules pick, or, when
    they pick none, the clause the classifier finds most standing. Clauses in another language
    are read by ``clawd.signals.foreign`` alone."""
    found = [
        _say_what(reply, c)
        for c in _capture(reply)
        if not (c.kind == "name" and not_a_correction(c.clause, answer) and not _keep_name(reply))
    ]
    surname = surname_in(reply)
    if surname and not any(surname in c.text for c in found):
        found.append(Captured("fact", f"The user's surname is {surname}.", reply, True))
    name = not any(c.kind == "name" for c in found) and corrected(reply, answer)
    if not name:
        return found
    rest = [c for c in found if not _ABOUT_NAME.search(c.text)]
    return [Captured("name", f"Address the user as {name}.", reply, True), *rest]


# a memory about what to call the user, which the corrected name replaces
_ABOUT_NAME = re.compile(
    r"\b(?:call|calls|calling|address|addresses|addressing) (?:me|the user)\b", re.I
)


def _keep_name(reply: str) -> bool:
    """Whether ``reply`` says the name it corrects is the user's: a marker that it lasts or
    the word "name" ("It's Priya, not Pri. Please use my full first name going forward.")."""
    return bool(STRONG.search(reply) or re.search(r"\bnames?\b", reply, re.I))


def _capture(reply: str) -> list[Captured]:
    """``capture`` but for a name the answer's words show."""
    around = foreign.foreign(reply)
    split = [[(c, foreign.foreign(c, around)) for c in s] for s in sentences(reply)]
    if not any(theirs for s in split for _, theirs in s):
        return _english(reply)
    english, theirs, prev = [], [], ""
    for k, s in enumerate(split):
        # a marker that is a sentence of its own ("Altijd.", "Siempre.") is about the one before
        after = " ".join(c for c, _ in split[k + 1]) if k + 1 < len(split) else ""
        lasting = any(foreign.lasts(c) for c, _ in s) or (
            len(after.split()) <= 3 and foreign.lasts(after)
        )
        english.append(", ".join(c for c, other in s if not other))
        for c, other in s:
            got = other and "¿" not in c and foreign.read(c, lasting)
            if got:
                kind, text = got
                if (
                    kind == "other"
                    and prev
                    and re.search(r"\b(?:eso|esto|isso|isto|das|cela|ça|questo|dat)\b", c, re.I)
                ):
                    text = f"{prev.strip(' ,.!?')}. {text}"  # "Acuérdate de eso": of what
                theirs.append(Captured(kind, text, c, True))
            prev = c
    rest = " ".join(f"{e}." for e in english if e.strip(" .!?,"))
    found = _english(rest) if rest else []
    kinds = {c.kind for c in theirs if c.kind in ("name", "language")}
    return [c for c in found if c.kind not in kinds] + theirs


def _english(reply: str) -> list[Captured]:
    """``capture`` of a reply in English."""
    found = _by_rules(reply)
    names = [c for c in found if c.kind == "name"]
    if probability(reply) < STANDING:
        # a lasting fact said in passing ("I'm type 1 diabetic tho, so ...") counts as a name
        # does: the rest of the reply is about something else
        # and so does a request said to last ("never add them again", "permanently")
        return names + [
            c
            for c in found
            if c.kind != "name"
            and (
                (c.kind == "fact" and FACT.search(c.clause))
                or ((c.strong or STRONG.search(c.clause)) and not habit(c.clause))
            )
        ]
    rest = [c for c in found if c.kind != "name"]
    if rest:
        return names + rest
    candidates = [
        c
        for c in clauses(reply)
        if not asks(c)
        and not a_verdict(c)
        and not ONE_OFF.search(c)
        and not NAME.search(c)  # "call me back": the rules found no name in it
        and not name_in(c)  # a name the rules gave way to ("I'm Sam. Call me Alex.")
        and not habit(c)
        and not not_a_request(c)
        # a stay or a moment ("in London this week", "tonight") unless said to last
        and (not (STAY.search(c) or EPHEMERAL.search(c)) or bool(STRONG.search(c)))
        and contentful(tidy(c))
        and len(c.split()) > 1  # "Good.", "Perfect.": a verdict on the answer
        and not any(n.clause == c for n in names)
    ]
    if not candidates:
        return names
    scores = probabilities(candidates)
    score, best = max(zip(scores, candidates, strict=True))
    # a clause that asks for a shape decoding keeps ("drop the headings") is a request
    if score < (STANDING if names else CANDIDATE) and not shape_of([best], first_answer=True):
        return names  # no clause is standing enough: the name (if any) was what to keep
    is_fact = bool(FACT.search(best) or ABOUT_ME.search(best))
    kind = kind_of(best)
    return [*names, Captured("fact" if is_fact and kind == "other" else kind, tidy(best), best)]


def _by_rules(reply: str) -> list[Captured]:
    """The standing statements the rules find in ``reply``."""
    found: list[Captured] = []
    split = sentences(reply)
    parts = [c for s in split for c in s]
    said_to_last = any(STRONG.search(c) for c in parts)
    # "Redo it but funnier": a correction in a sentence makes its other clauses one-off too,
    # unless one says outright that it lasts.
    one_off = [any(ONE_OFF.search(c) for c in s) for s in split for _ in s]
    sentence_of = [n for n, s in enumerate(split) for _ in s]
    first = [j == 0 for s in split for j, _ in enumerate(s)]
    for i, clause in enumerate(parts):
        lasting = NAME.search(clause) or FACT.search(clause) or STRONG.search(clause)
        if one_off[i] and not lasting:
            continue
        name = name_in(clause)
        if name and not re.search(r"\b(call|name) (it|this|that|the|them|him|her)\b", clause, re.I):
            found.append(Captured("name", f"Address the user as {name}.", clause))
            continue
        if QUESTION.search(clause) or (asks(clause) and not LASTING.search(clause)):
            continue  # a question is not a standing statement ("why is every answer so long")
        if not_a_request(clause) or (a_verdict(clause, past=False) and not STRONG.search(clause)):
            continue
        is_fact = (
            (
                bool(FACT.search(clause))
                and not (TRANSIENT.search(clause) and not FACT.search(TRANSIENT.sub("", clause)))
            )
            or bool(ABOUT_ME.search(clause) and not EPHEMERAL.search(clause))
        ) and not STAY.search(clause)
        lasts = (
            LASTING.search(HABIT.sub(" ", clause))
            or (STRONG.search(clause) and not habit(clause))
            # "Cut the throat-clearing from now on. No 'Sure!', no 'great question'.": the
            # phrases the lasting request meant
            or (said_to_last and any(a.startswith('"') for a in avoids_of(clause)))
        )
        if not (is_fact or lasts or SO_THEREFORE.search(clause)):
            continue
        text, strong = tidy(clause), bool(STRONG.search(clause))
        if habit(clause) and not is_fact:
            continue  # "I always forget this", "my dad always said": a habit or a story
        if not contentful(text):
            # "THREE sentences max. That's the rule from now on.": the marker is about the
            # sentence before it when it starts its own, else about the clause before it.
            before = (
                (", ".join(split[sentence_of[i] - 1]) if first[i] else parts[i - 1]) if i else ""
            )
            if not before or before.rstrip().endswith("?") or ONE_OFF.search(before):
                continue
            clause, text = before, tidy(before)
            if any(c.clause in before for c in found):  # found already: now said to last
                found = [
                    replace(c, strong=c.strong or strong) if c.clause in before else c
                    for c in found
                ]
                continue
            if not contentful(text):
                continue
        elif i and re.search(
            # "keep it short": "it" is any answer, no earlier clause
            r"\b(them|it(?! (?:short|brief|simple|concise|casual|light|tight|quick|plain|clean"
            r"|formal|friendly|professional|real)\b)|those|these|that one)\b"
            r"|\b(follow|keep|remember|use|do) (that|this)\b",
            clause,
            re.I,
        ):
            # "Enough with the disclaimers. Never add them again.": say what "them" is.
            before = parts[i - 1]
            if any(c.clause == before for c in found) and re.search(
                r"\b(?:please|pls|just|so|and) (?:do|keep doing) (?:that|this|so)\b",
                clause,
                re.I,
            ):
                continue  # "..., so please do that from now on": the request before lasts
            if (
                not before.rstrip().endswith("?")
                and not habit(before)
                and not any(c.clause == before for c in found)
            ):
                text = f"{tidy(before)} {text}"
        kind = "fact" if is_fact and not LASTING.search(clause) else kind_of(clause)
        if kind == "other" and is_fact:
            kind = "fact"
        found.append(Captured(kind, text, clause, strong))
    names = [c for c in found if c.kind == "name"]
    if len(names) > 1:  # "my name's Rosalind but please call me Roz": what they ask to be called
        asked = [c for c in names if CALL_ME.search(c.clause)]
        keep = (asked or names)[-1]
        found = [c for c in found if c.kind != "name" or c is keep]
    seen: set[str] = set()
    out = []
    for c in found:
        key = c.text.lower() if c.kind not in ("name",) else "name"
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _say_what(reply: str, c: Captured) -> Captured:
    """``c`` with "them" named (``rewrite.name_them``) from what the reply said before it."""
    start = reply.find(c.clause)
    named = c.kind in ("other", "fact") and start > 0 and name_them(c.text, reply[:start])
    return replace(c, kind=kind_of(named[1]), text=named[0]) if named else c


def remember(
    store: Store,
    reply: str,
    *,
    source: str,
    answer: str = "",
    turn_id: str | None = None,
    conversation_id: str | None = None,
) -> list[dict[str, Any]]:
    """Capture ``reply`` (a reply's text or a feedback comment, ``source`` "reply" or
    "feedback"; ``answer``: the answer it is about) into the store: one memory per standing
    statement, each with the memory it replaced (a newer name replaces the older); and the
    memory a complaint implies when an earlier reply made it too
    (``clawd.signals.corrections``). Returns ``{"memory",
    "replaced"}`` per memory made or confirmed."""
    added = [
        memories.add(
            store,
            c.text,
            c.kind,
            source=source,
            reply=reply[:2000],
            turn_id=turn_id,
            conversation_id=conversation_id,
        )
        for c in capture(reply, answer)
    ]
    # the same complaint about a second answer (clawd.signals.corrections)
    added += said_again(
        store, reply, source=source, turn_id=turn_id, conversation_id=conversation_id
    )
    made = []
    for memory, replaced in added:
        made.append({"memory": memory, "replaced": replaced})
        store.event(
            "memory",
            f"remembered: {memory['text']}",
            memory_id=memory["id"],
            replaced=replaced and replaced["id"],
            turn_id=turn_id,
        )
    return made


def notices(made: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``remember``'s result as a response shows it: ``{"id", "text", "replaced"}`` each
    (``replaced``: the text of the memory it replaced, or None)."""
    return [
        {
            "id": m["memory"]["id"],
            "text": m["memory"]["text"],
            "replaced": m["replaced"] and m["replaced"]["text"],
        }
        for m in made
    ]


def remember_next_state(store: Store, turn_id: str) -> list[dict[str, Any]]:
    """``remember`` on the user's reply to ``turn_id`` (its next state), if it is a user
    message of a conversation that may be learned from; [] otherwise."""
    row = store.db.execute(
        "SELECT n.content, t.conversation_id, t.response_text FROM next_states n "
        "JOIN turns t ON t.id = n.turn_id "
        "JOIN conversations c ON c.id = t.conversation_id "
        "WHERE n.turn_id = ? AND n.role = 'user' AND t.learn = 1 AND c.learn = 1",
        [turn_id],
    ).fetchone()
    if not row or not row[0]:
        return []
    return remember(
        store,
        row[0],
        source="reply",
        answer=row[2] or "",
        turn_id=turn_id,
        conversation_id=row[1],
    )


if __name__ == "__main__":
    for c in capture(
        sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read(), " ".join(sys.argv[2:])
    ):
        print(f"{c.kind:9} {c.text}    <- {c.clause!r}")
