"""Names in a reply: what the user asks to be called ("call me Ana", "I'm Sam btw", "it's Dee,
not Deirdre", "use inkmoth instead of my legal name").

``name_in(clause)`` gives the name one clause asks for, or None; a name said as what nobody
calls them ("nobody calls me Deirdre") or a word that is no name ("I go by everywhere") is not
one. ``corrected(reply, answer)`` gives the name a reply puts in place of what the answer
called the user ("Tomasz. Not Thomas." after "Hi Thomas, ..."; "Not buddy. Kowalski."; "dont
call me jonathan ... its jojo"). Run alone to see the name in a text (and the answer)::

    python -m clawd.signals.names "also it's Dee btw, nobody calls me Deirdre"
    python -m clawd.signals.names "Tomasz. Not Thomas." "Hi Thomas, here it is."
"""

from __future__ import annotations

import re
import sys

from clawd.signals.phrasing import LANGUAGES

# Capitalised words that follow "I'm" without being a name.
_NOT_NAMES = frozenset(
    LANGUAGES
    + [w + "n" for w in ("america", "canadia", "australia", "asia", "africa", "europea")]
    + "british irish scottish welsh brazilian mexican indian pakistani nigerian kenyan "
    "egyptian israeli iranian iraqi afghan chilean peruvian colombian argentinian cuban "
    "jewish muslim christian catholic buddhist hindu atheist sorry not just so here back "
    "done fine ok okay good sure afraid confused tired busy new still also really very "
    "gonna going trying asking looking wondering sick happy sad glad curious lost stuck "
    "vegan vegetarian".split()
)
# Words after "call me" that are not a name ("call me back", "call me crazy").
_NOT_CALLED = frozenset(
    "back later crazy when if tomorrow tonight now maybe old a an the on at in by sometime "
    "whatever anything something anytime soon again please that this it him her them what "
    "whenever out everywhere anywhere online irl here there too also are is was were more "
    "often sometimes instead for and so every each properly right correctly".split()
)
# "nobody calls me Deirdre": a name said as what the user is not called
_NOT_SO = re.compile(
    r"\b(?:nobody|no one|noone|never|don'?t|do not|doesn'?t|does not|not|stop|quit)\b"
    r"[^,.;!?]{0,20}$",
    re.IGNORECASE,
)
# "use inkmoth instead of my legal name"; "it's Dee, not Deirdre" (two capitalised words)
_INSTEAD = re.compile(
    r"\buse ([A-Za-z][\w'-]{1,30}) (?:instead of|rather than|not) my (?:\w+ )?name\b", re.I
)
_NOT_THAT = re.compile(
    r"\b[Ii]t'?s ([A-Z][a-z][\w'-]{0,30}),? not [A-Z][a-z]+"
    # "it's Mrs Abernathy to you", "I prefer Dr. Osei"
    r"|\b(?:[Ii] prefer|[Ii]t'?s|[Ii]ts) ((?:Mr|Mrs|Ms|Miss|Dr|Prof)\.? [A-Z][a-z][\w'-]*)"
)

# a title said with the name ("address me as barrister okafor", "Dr. Lund")
_TITLE = (
    r"(?:(?:mr|mrs|ms|miss|dr|prof|professor|doctor|barrister|judge|captain|capt|coach|pastor"
    r"|reverend|rev|father|sister|brother|auntie|aunty|uncle|chef|chief|sir|dame|lady|lord"
    r"|nurse|officer|sergeant|sgt|madam|madame|señor|señora|herr|frau)\.?\s+)?"
)
NAME = re.compile(
    r"\b(?:call me|address me as|refer to me as|my name(?:'s| is)|i go by|you can call me"
    # "use my name, Priya, when you reply"
    r"|(?:use|say|with|by) my (?:first |real |actual )?name,?(?: which is| it'?s)?"
    # "I'd appreciate it if you called me ...", "I'd like to be called ...": asked, not told
    r"|(?:if you|you could|would you|could you|please|start|prefer|rather|like)(?: \w+){0,2}?"
    r" (?:call(?:ed|ing)? me|be(?:ing)? called|be(?:ing)? addressed as)"
    r"|just call me|name'?s|i am called|i'?m called|(?:people|everyone|everybody|friends"
    r"|they|most people|folks)(?: \w+){0,2}? (?:usually |just |all )?calls? me)\s+"
    rf"({_TITLE}[A-Za-z][\w'-]{{1,30}}(?-i:\s+[A-Z][a-z][\w'-]*)?)",
    re.IGNORECASE,
)
_IM_NAME = re.compile(
    r"\b(?:[Ii]'?m|[Ii] am|[Tt]his is|[Ii]t'?s)\s+((?:(?:Mr|Mrs|Ms|Dr|Prof)\.?\s+)?"
    r"[A-Z][a-z][\w'-]{0,30})\b(.*)$"
)
_IM_NAME_LOWER = re.compile(
    r"\b(?:i'?m|im|i am|this is|it'?s|its)\s+([a-z][\w'-]{1,30})\s*,?\s+(?:btw|by the way|here)\b",
    re.IGNORECASE,
)
# what the user asks to be called wins over their full name ("My name is Nguyen Thi Linh, you
# can call me Linh": Linh)
CALL_ME = re.compile(
    r"\b(?:call me|address me as|refer to me as|i go by|calls? me)\s+"
    rf"({_TITLE}[A-Za-z][\w'-]{{1,30}}(?-i:\s+[A-Z][a-z][\w'-]*)?)",
    re.IGNORECASE,
)


# "all my friends say Zosia", "everyone at work calls me Kowalski"
_SAY = re.compile(
    r"\b(?:my |all my |all |)(?:friends|mates|everyone|everybody|people|colleagues|family)"
    r"(?: \w+){0,2}? (?:all |just |usually )?(?:say|says|call me|use) ((?-i:[A-Z])[\w'-]{1,30})"
    r"\s*(?:[.,!;]|$)",
    re.I,
)
# "please use Dr. Lund when you speak to me", "say Kit whenever you reply to me"
_USE = re.compile(
    r"\b(?:use|say|write) ((?:(?:Mr|Mrs|Ms|Miss|Dr|Prof)\.? )?(?-i:[A-Z])[\w'-]{1,30})"
    r" (?:when|whenever|each time|every time|if) (?:you )?(?:(?:speak|talk|write|reply|respond)"
    r"\w* (?:to|with) me|(?:address|greet)\w* me)\b",
    re.I,
)
# "surname is Wiśniewska, not Wisniewski": what letters written for the user must spell
_SURNAME = re.compile(
    r"(?<!her )(?<!his )(?<!their )(?<!its )(?<!whose )(?<!'s )(?<!the )(?<!a )(?<!your )"
    r"\b(?:my )?(?:surname|last name|family name)(?:'s| is)\s+((?-i:[A-Z])[\w'-]{1,30})",
    re.I,
)


def surname_in(text: str) -> str | None:
    """The surname ``text`` says the user has ("my surname is Wiśniewska"), or None."""
    m = _SURNAME.search(text)
    return m.group(1) if m and m.group(1).lower() not in _NOT_NAMES else None


def _called(pattern: re.Pattern[str], clause: str) -> str | None:
    """The first name a "call me"-like ``pattern`` gives in ``clause`` that is a name and is
    not said as what the user is not called."""
    for m in pattern.finditer(clause):
        name = m.group(1)
        if name.lower() not in _NOT_CALLED and not _NOT_SO.search(clause[: m.start()]):
            # "barrister okafor" -> "Barrister Okafor"; "McKenzie" as written
            words = name.split() if name.islower() else [name]
            return " ".join(w[:1].upper() + w[1:] for w in words)
    return None


def name_in(clause: str) -> str | None:
    """The name ``clause`` asks the user to be called by, or None."""
    m = _INSTEAD.search(clause) or _NOT_THAT.search(clause)
    said = m and next(g for g in m.groups() if g)
    if said and said.lower() not in _NOT_NAMES:
        return said[:1].upper() + said[1:]
    name = (
        _called(CALL_ME, clause)
        or _called(NAME, clause)
        or _called(_SAY, clause)
        or _called(_USE, clause)
    )
    if name:
        return name
    m = _IM_NAME.search(clause)
    # "We live in Freiburg im Breisgau": "im" after a place's name is no "I'm"
    if m and re.search(r"\b[A-Z][\w'-]+\s+im\s+$", clause[: m.start(1)]):
        m = None
    if m:
        name, rest = m.group(1), m.group(2).strip(" .,!")
        by_the_way = re.match(
            r"^(by the way|btw|here|,|by the by|not\b|, not\b|please|pls|thanks|thank you)?\W*$"
            r"|^(not\b)",
            rest,
            re.I,
        )
        about_name = re.search(r"\b(my name|call me|use my|address me)\b", rest, re.I)
        if name.lower() not in _NOT_NAMES and (
            not rest or (by_the_way and (by_the_way.group(1) or by_the_way.group(2))) or about_name
        ):
            return name
    m = _IM_NAME_LOWER.search(clause)
    if m and m.group(1).lower() not in _NOT_NAMES | _NOT_CALLED:
        return m.group(1)[:1].upper() + m.group(1)[1:]
    return None


# what an answer may call the user besides their name
_ADDRESS = frozenset(
    "buddy pal mate friend dear sweetie sweetheart honey hon love darling sir madam ma'am maam "
    "bro dude man champ boss chief kiddo young lady gentleman there".split()
)
# how an answer addresses the user: "Hi Thomas," at its start or "..., Thomas!" at a sentence end
_ADDRESSED = re.compile(
    r"^\W*(?:(?i:hi|hello|hey|dear|good (?:morning|afternoon|evening)|of course|sure|okay|ok"
    r"|great question|absolutely|certainly|thanks|thank you)[, ]+)([A-Z][\w'-]{1,30})\s*[,!]"
    r"|,\s*([A-Z][\w'-]{1,30})\s*[.!?:]"
)
# "don't call me Jonathan", "I'm not your sweetie": the word put aside, whatever it is
_PUT_ASIDE = re.compile(
    r"\b(?:don'?t|dont|do not|stop|quit|never) (?:call(?:ing)?|address(?:ing)?) me(?: as)? "
    r"([\w'-]{2,30})|\bi'?m not your ([\w'-]{2,30})"
    r"|\b(?:nobody|no one|noone|no-one) (?:ever |really )?calls me ([\w'-]{2,30})",
    re.I,
)
# "not buddy", "Tomasz, not Thomas": put aside if the answer called the user so
_NOT = re.compile(r"\bnot ([\w'-]{2,30})", re.I)
# the name put in its place: a sentence of its own ("Kowalski."), "it's jojo", "Tomasz, not ..."
_IN_PLACE = re.compile(
    r"(?:^|[.!?]\s+|\bits?'?s?\s+|\bit is\s+)([A-Za-z][\w'-]{1,30})(?:,?\s+not\s+([\w'-]+)"
    r"|\s*[.!]*\s*$|\s*[.!]+\s)"
    # "its Zofia with Z, not Sofia": "it's" and a capitalised name, whatever follows
    r"|\b(?:it'?s|its|it is)\s+((?-i:[A-Z])[\w'-]{1,30})\b",
    re.I,
)


def addressed(answer: str) -> set[str]:
    """The words ``answer`` addresses the user by ("Hi Thomas, ..." -> {"thomas"}), lowercase:
    after a greeting that opens it, or after a short phrase at a sentence's end ("Here you go,
    Robert.")."""
    called = set()
    for m in _ADDRESSED.finditer(answer):
        before = re.split(r"[.!?\n]", answer[: m.start()])[-1]
        # "Here you go, Robert.", not the last item of a list ("Go, Java, Rust.")
        if m.group(1) or ("," not in before and len(before.split()) <= 6):
            called.add((m.group(1) or m.group(2)).lower())
    return called


def not_a_correction(clause: str, answer: str) -> bool:
    """Whether the name in "it's X, not Y" is a fact put right instead ("It's Paris, not
    London" after an answer that says London without calling the user so)."""
    m = re.search(r"\b[Ii]t'?s ([\w'-]+),? not ([\w'-]+)", clause)
    if not m or not answer:
        return False
    said = m.group(2).lower()
    return said in answer.lower() and said not in addressed(answer)


def corrected(reply: str, answer: str = "") -> str | None:
    """The name ``reply`` gives in place of what the answer called the user, or None: the word
    it puts aside ("not Thomas", "don't call me jonathan") must be one the answer addressed the
    user with, or a word answers call people ("buddy", "sweetie"), and the name must stand
    alone ("Tomasz.", "its jojo"), so "Rust. Not Python." makes no name."""
    called = addressed(answer)
    aside = {w.lower() for m in _PUT_ASIDE.finditer(reply) for w in m.groups() if w}
    aside -= _NOT_CALLED  # "don't call me that": no word put aside
    aside |= {m.group(1).lower() for m in _NOT.finditer(reply)} & (called | _ADDRESS)
    if not aside:
        return None
    for m in _IN_PLACE.finditer(reply):
        name = m.group(1) or m.group(3)
        low = name.lower()
        if low in aside or low in _NOT_NAMES or low in _NOT_CALLED or low in _ADDRESS:
            continue
        # a lowercase name only after "its" or before "not" and the word put aside
        instead = (m.group(2) or "").lower() in aside
        its = re.match(r"\bit", m.group(0), re.I)
        if low in called or not (name[0].isupper() or its or instead):
            continue
        if low in _COMMON:
            continue
        return name[:1].upper() + name[1:]
    return None


# capitalised words that start a sentence of their own without being a name ("Thanks.", "No.")
_COMMON = frozenset(
    "thanks thank no yes yeah nope ok okay fine good great wrong right sure please ugh hmm "
    "seriously honestly again what why how really nice cool perfect better worse exactly "
    "anyway whatever done stop".split()
)


if __name__ == "__main__":
    print(name_in(sys.argv[1]) or corrected(sys.argv[1], " ".join(sys.argv[2:])))
