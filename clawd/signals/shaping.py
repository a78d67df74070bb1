"""Answer shaping: what decoding keeps of the memories, for a model that does not.

A memory in the system message is enough for a model that follows its system message. The
135M default does not (docs/benchmarks.md, "Memory": "Address the user as Noor." put the name
in 1 answer of 32). So the few preferences that decoding can keep without writing the answer
for the model are kept there too, from the memories in the answer's context:

- a **name** ("Address the user as Ana."): the first answer of a conversation opens with
  "Ana," and the model goes on from there;
- **opening words** the memory quotes ("Always start with 'Short answer:'.") or a summary asked
  for at the top ("a TL;DR at the top", "bottom line up front": its label): every answer opens
  with them;
- a **sign-off** the memory quotes ("Finish every reply with 'Fair winds.'"): every answer
  ends with it on a line of its own, added once when the answer ends (a length limit keeps
  room for it);
- a **length** ("Keep answers to one line.", "50 words max", "three sentences at most",
  "The user prefers short answers."): the answer ends at the end of a sentence once the limit
  is reached. A sentence, line or paragraph limit counts them; a word limit ends at a sentence
  end when one more sentence of the mean length so far would pass it, or cuts at the limit
  itself (``finish_reason`` "length"). Vague brevity ("short", "brief", "concise", "tl;dr")
  means one sentence, as "tl;dr" or "a one-liner" do. Nothing is counted or cut inside
  a code block;
- a **closing question** ("End with a question.", "Check back with the user."): an answer
  that ends without a question goes on with a new paragraph opened by "Would you like", which
  the model finishes, up to its first question mark;
- a **closing summary line** ("End every answer with a one-line tl;dr."): an answer that
  ends without it goes on with a new paragraph opened by its label ("TL;DR:", or the one the
  memory quotes), which the model finishes on that line;
- what to **avoid** ("Do not use bullet points.", "No emojis.", "Plain text only.", "No
  exclamation marks.", "One paragraph, no line breaks.", "Never say 'great question'.", "Don't
  use the word delve."): lists, markdown, emoji, "!", line breaks or a phrase (kept in
  quotes); the tokens that would begin one (or end the phrase) are never sampled
  (``clawd.signals.avoid``), so the model writes on without them. "One paragraph" and "one
  line" ask for no line breaks too, and a closing question then follows on the same line.

Everything else (a language, a tone, a fact) stays the system message's. The opening, the
closing words and the sign-off are the only words not sampled; they are recorded as part of
the answer, so training teaches the weights to write them (which is what consolidation wants).

Run alone to see what a set of memories would enforce::

    python -m clawd.signals.shaping "Address the user as Ana." "Keep answers to one line."
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from clawd.signals.lengths import NEGATED, ONE_LINE, QUOTED, a_part, limit_said
from clawd.signals.names import name_in

CLOSING = "\n\nWould you like"

_TITLED = r"((?:(?:Mr|Mrs|Ms|Miss|Dr|Prof|Professor)\.? )?[A-Z][\w'’-]{0,30})"
_NAMED = re.compile(
    rf"\b(?i:address|call|refer to|greet) (?i:the user)(?i: as| by)?\s+[\"'“]?{_TITLED}"
    rf"|\b(?i:the user)(?i:'s| goes by| is called)(?i: name is)?\s+[\"'“]?{_TITLED}"
)
_NOT_A_NAME = {"The", "Their", "Name", "First", "Full", "By", "As", "Sir", "Madam"}
# what an answer may be asked to go without, and the words that name it
AVOIDABLE = {
    "lists": r"lists?|listicles?|bullet(?:s|ed)?(?: points?| lists?)?|bulleted|numbered(?: lists?)?"
    r"|enumerations?",
    "markdown": r"markdown|formatting|bold(?: text)?|headings?|headers?|asterisks?|code fences",
    "emoji": r"emojis?|emoticons?|smileys?|emotes?",
    "exclamations": r"exclamation(?: marks?| points?)?|exclamations",
    "newlines": r"line ?breaks?|linebreaks?|new ?lines?|paragraph breaks?|blank lines?",
}
_NO = (
    r"\b(?:no|nae|not|don'?t|do not|never|without|avoid|avoids|skip|drop|ditch|hates?|dislikes?"
    r"|can'?t stand|cannot stand|instead of|rather than|nor|zero|less|fewer|over|free of|stop"
    r"|quit|enough"
    r"|lose|cut|ease up on|tone down|leave out|omit|strip|get rid of|remove|lay off|go easy on"
    r"|spare me|hold off on|ban|chill (?:out )?(?:w|with|on)|easy on|calm down (?:w|with|on))\b"
)
_AVOID = {
    # "no lists", "don't ever use bullet points"; not "no more than 5 bullet points"
    kind: re.compile(
        rf"{_NO}(?!\s+more than)(?:\s+[\w'’-]+){{0,6}}?\s+(?:{words})\b"
        # "left the emojis out": the thing between the verb and "out"
        rf"|\b(?:leave|left|leaving|keep|kept) (?:the |all the |those |these |any )?(?:{words})"
        r" out\b",
        re.I,
    )
    for kind, words in AVOIDABLE.items()
}
# "in prose", "plain text only", "no formatting": what these ask to go without
_PROSE = re.compile(
    r"\b(?:in|as|use|write|prefers?) (?:flowing |plain )?prose\b"
    r"|\b(?:proper|normal|full|whole|flowing|plain|connected) (?:paragraphs?|sentences)\b",
    re.I,
)
# "never say 'great question'", "drop the 'As an AI' bit", "don't use the word delve"
_SAYING = re.compile(
    rf"{_NO}[^\"'“‘.]{{0,40}}?[\"'“‘]([^\"”’]{{2,40}}?)[!?.,]?[\"'”’](?!\w)"
    rf"|{_NO}[^.]{{0,30}}?\bthe (?:word|phrase|term) [\"'“‘]?([A-Za-z][\w-]{{1,30}})",
    re.I,
)
# "one paragraph", "a single block of text", "all on one line": no line breaks at all
_ONE_BLOCK = re.compile(
    ONE_LINE.pattern + r"|\b(?:one|a single|single|1)[- ](?:paragraph|block|chunk|line)\b", re.I
)
_PLAIN = re.compile(r"\bplain[- ](?:text|words)\b|\bunformatted\b", re.I)
_ASKS_BACK = re.compile(
    r"\b(end|finish|close|wrap)\w*\b[^.]{0,40}\bquestions?\b|\bfollow[- ]?up questions?\b"
    r"|\bask(?:ing)? (?:the user|me|them)\b[^.]{0,30}\b(questions?|if|whether|what)\b"
    r"|\b(?:end|finish|close)\w* (?:\w+ )?by asking\b|\bquestions? back\b"
    r"|\bask(?:ing)? (?:the user|me|them) (?:something|anything)\b"
    r"|\bcheck (?:back |in )*with (?:the user|me)\b|\bkeep the conversation going\b",
    re.I,
)


@dataclass(frozen=True)
class Shape:
    """What decoding keeps of the memories: the opening words, the length limit (one unit:
    words, sentences or paragraphs; lines count as sentences), the closing question."""

    opening: str | None = None
    limit: int | None = None
    unit: str | None = None  # "words", "sentences" or "paragraphs"
    closing: bool = False
    avoid: tuple[str, ...] = ()  # AVOIDABLE's kinds and quoted phrases, sorted
    summary: str | None = None  # the label of a closing summary line ("TL;DR:")
    signoff: str | None = None  # words every answer ends with ("Fair winds.")

    @property
    def closes(self) -> bool:
        """Whether the answer ends with words decoding begins: a question or a summary line."""
        return self.closing or bool(self.summary)

    @property
    def closing_words(self) -> str:
        """The words that open the closing question (or the summary line): on a new
        paragraph, or on the same line when the answer is to have no line breaks."""
        words = CLOSING if self.closing else f"\n\n{self.summary}"
        return " " + words.lstrip("\n") if "newlines" in self.avoid else words

    @property
    def signoff_words(self) -> str:
        """The sign-off as decoding adds it: on a line of its own, or after a space when the
        answer is to have no line breaks."""
        return f" {self.signoff}" if "newlines" in self.avoid else f"\n\n{self.signoff}"

    def __bool__(self) -> bool:
        return bool(self.opening or self.limit or self.closes or self.avoid or self.signoff)

    def describe(self) -> dict[str, object]:
        """The shape as the response's ``clawd.shaped`` field shows it."""
        out: dict[str, object] = {}
        if self.opening:
            out["opening"] = self.opening
        if self.limit:
            unit = self.unit[:-1] if self.limit == 1 and self.unit else self.unit
            out["limit"] = f"{self.limit} {unit}"
        if self.closing:
            out["closing_question"] = True
        if self.summary:
            out["closing_summary"] = self.summary
        if self.signoff:
            out["sign_off"] = self.signoff
        if self.avoid:
            out["avoid"] = list(self.avoid)
        return out


def avoids_of(text: str) -> set[str]:
    """What a memory says answers should go without: of ``AVOIDABLE``'s kinds, and phrases
    (in double quotes: ``'"great question"'``)."""
    out = {kind for kind, pattern in _AVOID.items() if pattern.search(text)}
    if _PROSE.search(text):
        out.add("lists")
    if _PLAIN.search(text):
        out.add("markdown")
    block = _ONE_BLOCK.search(text)
    if block and not NEGATED.search(text[: block.start()]) and not a_part(text, *block.span()):
        out.add("newlines")
    if "markdown" in out and re.search(r"\bformatting\b", text, re.I):
        out.add("lists")  # "no formatting": no lists either
    for m in _SAYING.finditer(text):
        out.add(f'"{(m.group(1) or m.group(2)).strip()}"')  # a phrase, in quotes
        # "'easy' or 'simple'", "'sure', 'certainly' and 'absolutely'": the ones listed with it
        end = m.end()
        while more := _ALSO_SAID.match(text, end):
            out.add(f'"{more.group(1).strip()}"')
            end = more.end()
    return out


_ALSO_SAID = re.compile(
    r"\s*(?:,|,? or|,? and|,? nor)\s+[\"'“‘]([^\"”’]{2,40}?)[!?.,]?[\"'”’](?!\w)"
)


def name_of(text: str) -> str | None:
    """The name a memory says to address the user by, or None."""
    m = _NAMED.search(text)
    name = (m.group(1) or m.group(2)) if m else name_in(text)
    if not name or name in _NOT_A_NAME:
        return None
    return name.rstrip("'’.,")


# "end every answer with a one-line 'tldr:' summary", "a bottom line at the end"
_SUMMARY = re.compile(
    r"\b(?:end|ends|ending|finish|close|wrap)\w*\b[^.]{0,60}?\b(tl;? ?dr|summary|recap|bottom line)"
    r"|\b(tl;? ?dr|summary|recap|bottom line)\b[^.]{0,40}\b(?:at the (?:end|bottom)|last line"
    r"|final line)",
    re.I,
)
_LABELS = {"summary": "Summary:", "recap": "Recap:", "bottom line": "Bottom line:"}


def summary_of(text: str) -> str | None:
    """The label of the closing summary line a memory asks for ("TL;DR:"), or None; a label
    the memory quotes ("'tldr:'") as quoted."""
    # "No tl;dr at the bottom again. End each reply with a 'TL;DR:' line": the asking one
    m = next((m for m in _SUMMARY.finditer(text) if not NEGATED.search(text[: m.start()])), None)
    if not m:
        return None
    quoted = re.search(r"[\"'‘“]([^\"'’”\n]{2,20}:)[\"'’”]", text)
    if quoted:
        label = quoted.group(1)
        return "TL;DR:" if re.fullmatch(r"tl;? ?dr:", label, re.I) else label
    word = (m.group(1) or m.group(2)).lower()
    return _LABELS.get(word, "TL;DR:")


# "always start with 'Short answer:'", "the 'Short answer:' opener"; "finish with 'Fair winds.'",
# "'Cheers, G' as the sign-off"
_STARTS = re.compile(
    r"\b(?:start|starts|starting|begin|begins|beginning|open|opens|opening|lead)\b[^.?!\"“‘]{0,40}?"
    r"\bwith\s+$|\b(?:at the (?:very )?(?:start|beginning|top) of)\b[^.?!]{0,30}$",
    re.I,
)
_OPENER = re.compile(
    r"^\s*(?:opener|opening|intro|prefix|first line|at the (?:very )?(?:start|top))\b", re.I
)
_ENDS = re.compile(
    r"\b(?:end|ends|ending|finish|finishes|finishing|close|closes|closing|sign|signs|signing"
    r"|wrap)\w*\b[^.?!\"“‘]{0,40}?\s+$",
    re.I,
)
_SIGNOFF = re.compile(
    r"^\s*(?:sign[- ]?off|closer|closing line|as the (?:very )?last (?:words?|line)"
    r"|at the (?:very )?(?:end|bottom))\b",
    re.I,
)


def phrases_of(text: str) -> tuple[str | None, str | None]:
    """The words a memory says every answer starts with and ends with (each quoted in it), as
    (opening, sign-off); a summary label ("TL;DR:") and a phrase to avoid are neither."""
    opening = signoff = None
    for m in QUOTED.finditer(text):
        phrase, before, after = m.group(1).strip(), text[: m.start()], text[m.end() :]
        if (
            not re.search(r"\w", phrase)
            or NEGATED.search(before)
            or re.search(_NO + r"[^.]{0,30}$", before, re.I)
        ):
            continue
        if _STARTS.search(before) or _OPENER.search(after):
            opening = opening or phrase
        elif (_ENDS.search(before) or _SIGNOFF.search(after)) and not phrase.endswith(":"):
            if not _SUMMARY.search(phrase) and not phrase.rstrip().endswith("?"):
                signoff = signoff or phrase
    return opening, signoff


# "a TL;DR at the top", "start with a one-line summary", "bottom line up front"
_SUMMARY_FIRST = re.compile(
    r"\b(?:start|starts|starting|begin|begins|open|opens|lead|leads)\w*\b[^.]{0,40}?"
    r"\b(tl;? ?dr|summary|bottom line)\b"
    r"|\b(tl;? ?dr|summary|bottom line)\b[^.]{0,30}?(?:\bat the (?:very )?(?:top|start|beginning)\b"
    r"|\b(?:first|up front|upfront)\b)",
    re.I,
)


def summary_first_of(text: str) -> str | None:
    """The label of the summary line a memory asks answers to open with ("TL;DR:"), or None."""
    m = _SUMMARY_FIRST.search(text)
    if not m or NEGATED.search(text[: m.start()]):
        return None
    return _LABELS.get((m.group(1) or m.group(2)).lower(), "TL;DR:")


def shape_of(texts: list[str], first_answer: bool) -> Shape:
    """The shape the memories ``texts`` ask of an answer; the opening only on the
    ``first_answer`` of a conversation. Of two limits in one unit the tighter holds; of two
    units, the first memory's (the most recently confirmed)."""
    name, phrase, signoff = None, None, None
    limit, unit, vague, closing, avoid, summary = None, None, True, False, set(), None
    for text in texts:
        summary = summary or summary_of(text)
        avoid |= avoids_of(text)
        name = name or name_of(text)
        starts, ends = phrases_of(text)
        starts = starts or summary_first_of(text)
        phrase, signoff = phrase or starts, signoff or ends
        found = limit_said(text)
        # a number said ("four sentences") holds over a vague "keep it brief"
        if found and (
            unit is None
            or (vague and not found[2])
            or (found[1] == unit and found[0] < (limit or 0) and found[2] <= vague)
        ):
            limit, unit, vague = found
        closing = closing or bool(_ASKS_BACK.search(text))
    # the name opens a conversation's first answer only; a phrase opens every answer
    opening = (
        " ".join(w for w in (phrase, f"{name}," if name and first_answer else None) if w) or None
    )
    return Shape(opening, limit, unit, closing, tuple(sorted(avoid)), summary, signoff)


if __name__ == "__main__":
    print(shape_of(sys.argv[1:], first_answer=True).describe())
