"""Phrasing: the words that say a request lasts, and a reply cut into clauses.

The vocabulary ``clawd.signals.memory`` reads a reply with: markers that a request lasts
("from now on", "always", "I prefer") or covers one answer ("this time", "redo it"), names
("call me Ana"), facts about the user ("I'm vegetarian", "we rent"); a reply cut into sentences
and clauses, and a clause's kind (length, format, tone, language). Rewriting a clause into a
memory's text is ``clawd.signals.rewrite``. Pure functions of text, no model.

Run alone to see a reply cut into clauses, each with its kind::

    python -m clawd.signals.phrasing "Way too long. Call me Ana, and keep it to one line."
"""

from __future__ import annotations

import re
import sys

from clawd.signals.lengths import QUOTED

LANGUAGES = (
    "english french spanish german italian portuguese dutch polish russian ukrainian czech "
    "swedish norwegian danish finnish greek turkish arabic hebrew hindi bengali urdu chinese "
    "mandarin cantonese japanese korean vietnamese thai indonesian malay tagalog swahili "
    "romanian hungarian catalan persian farsi latin"
).split()
_LANG = "|".join(LANGUAGES)

LASTING = re.compile(
    r"\b(from now( on)?|from here on|every (answer|reply|response|message)|each (answer|reply)"
    r"|(no|none|nothing|not|without)\b[^.]*\bever|only [\w+#.]+ for me"
    r"|(talk|speak|write|be) \w+ (to|with) me|suits? (me|us)|works? (better|best) for (me|us)"
    r"|would (be )?(preferable|appreciated|ideal|better|best|welcome|helpful|suit|help)"
    r"|i (do |really |would |'d )?(prefer|welcome|appreciate|find (it|\w+) (easier|harder|better))"
    r"|(stuff|things|everything|anything) like|for (anything|everything|all|any) \w+"
    r"|(explain|give|write|suggest|use|keep|make|show) (stuff|things|everything|anything)"
    r"|in every \w+|for all \w+|(stick to|follow) (that|those|this|it|them)"
    r"|(keep|bear) (both|that|this|it|them) in mind|worth knowing|for context|fyi|f\.y\.i"
    r"|for what it'?s worth|incidentally|i should mention|if that changes|unless i"
    r"|(in )?subsequent|you (may|can|should) assume|assume (that )?i|don'?t ever"
    r"|my answers|that'?s (the|a|my) rule|from this point|going forward|moving forward"
    r"|henceforth|hereon|(in|for) (your|the) (answers|replies|responses|messages)"
    r"|(you|u) (can|may) (\w+ ){1,4}again|(is|are) (fine|ok|okay|good) (now|again)"
    r"|(don'?t|do not|never) \w+ (\w+ ){0,2}again\b"
    r"|in (the )?future|from here (on )?out|from this point|after this|hereafter|the default"
    r"|(is|are) (what|how) i (want|like|prefer|need)|(not|never|don'?t|no) \w+( \w+)? with me"
    r"|for future|next time|every time|each time|all the time|whenever|in general|generally"
    r"|by default|as a rule|always|never|any more|anymore|remember|keep in mind|note that"
    r"|don'?t forget|for the future|from today|all (of )?your (answers|replies|responses)"
    r"|(in|for) (all|every|each|any) (answer|reply|response|message)s?"
    r"|(?:leave|keep) \w+(?: \w+)? (?:out |off |down )?with me\b"
    r"|(your|the) (answers|replies|responses) (should|need|must|to be|could)"
    r"|keep (your |the |all |)(answers|replies|responses)"
    r"|(answers|replies|responses) (in|to|under|at|of|like|that|should|must|need)"
    r"|i('d| would)? (really )?(prefer|like|want|need|love|hate) (it )?(when|if|that|short|"
    r"long|brief|concise|answers|replies|responses|things|you|to get|code|bullet|no |plain)"
    r"|i('d| would)? rather|please stop|stop (using|adding|writing|putting|saying|calling"
    r"|with|giving|starting|ending|including|explaining|being)"
    r"|don'?t (ever )?(use|add|write|put|include|start|end|call|give|explain|bother|say)"
    r"|no more|not again|(i'?m|i am) (more )?(comfortable|fluent|native|better) in"
    r"|my (native|first|preferred) language|the way i like|how i like)\b",
    re.IGNORECASE,
)
# Markers that say outright that a request lasts, whatever else the sentence corrects.
STRONG = re.compile(
    r"\b(from now on|always|in (the )?future|going forward|every time|each time|by default"
    r"|for (?:the )?future|for next time|in perpetuity|as a (?:general )?rule"
    r"|whatever i (?:ask|say)|no matter what i (?:ask|say)|never\b[^.?!]{1,60}\bagain"
    r"|remember|from here on|in general|for all|in every|all (of )?your|permanently|for good"
    r"|forever|henceforth|ever again|standing (?:rule|order|instruction)|unless i (?:say|ask)"
    r"|every (?:single )?(?:answer|reply|response|message|msg)|each (?:answer|reply|response)"
    # "no lists in any answer", "drop them in everything you write to me"
    r"|in (?:any|all) (?:of )?(?:your |my )?(?:answers?|replies|reply|responses?|messages?)"
    r"|in (?:everything|anything) you (?:write|say|send)"
    r"|not just (?:this|that|here)\b(?: one| time| answer| reply)?|(?:not|nor) anywhere"
    # "Numbered steps. That's how I like everything.", "Use a table. Default for me."
    r"|(?:that'?s|thats|this is|it'?s) (?:how|the way) i (?:like|want|prefer)"
    r"|default for me|(?:as )?my default"
    r"|(?:\d+|one|two|three|four|five|a few|a couple of) (?:lines?|sentences?|words?|paragraphs?"
    r"|bullets?|points?) (?:is|are) (?:enough|plenty|fine|all i need))\b",
    re.IGNORECASE,
)
# "We rent, so nothing that damages paint": something about the user and what follows from it.
SO_THEREFORE = re.compile(
    r"\b(i|i'?m|im|we|we'?re|my|our|me|us)\b.*\b(so|as|since|because)\b.*\b(keep|use|give|"
    r"assume|stick|skip|avoid|would|need|pls|please|suggest|make|mind|prefer|only|no|don'?t|"
    r"better|ideal|realistic|cheap|should|must|want|easier|help|helps|explain|recipes?|ideas?|"
    r"answers?|replies|examples?|tips|lists?)\b",
    re.IGNORECASE,
)
# "you always do this", "I never said that": a complaint or a statement, not an instruction.
HABIT = re.compile(
    r"\b(you|u|they|he|she|i|we)\s+(always|never)\s+\w+\s+(this|that|it|the same|so|me)\b"
    r"|\b(it|this|that)\s+(always|never)\b|\bi never (said|asked|meant|wanted)\b"
    r"|\bnever (mind|again|heard|thought|knew|would'?ve|would have)\b",
    re.I,
)
ONE_OFF = re.compile(
    r"\b(this time|just this once|this once|for now|for this (one|answer|question|task|time)"
    r"|(in|for) this (case|one)|right now|today only|only here|this (answer|reply|response)"
    r"|that (answer|reply|response)|redo|re-?write (it|this|that)|try again|again please"
    r"|not that|i asked (for|about)|i meant|i said|wrong|you forgot|you missed|you made"
    r"|should (be|say|read) [^,.;]+,? not"
    # "just give me steps now": this answer, at once
    r"|\b(?:give|tell|show|send|do|write|make|list|just)\b[^,.;!?]{0,30}\bnow(?=\s*[,.!]|\s*$)"
    r"|instead of (that|this|it)|here|(make|do|write|redo|change|fix|rewrite|shorten|translate"
    r"|expand|rephrase) (it|this|that)\b)\b",
    re.IGNORECASE,
)
FACT = re.compile(
    r"\b(?:i'?m|i am)\s+(?:a |an )?(?:(?:strict|lifelong|practicing|practising|full[- ]time|"
    r"freelance|still|also|type [12]|"
    r"senior|junior|professional|retired|trained|registered|beginner|complete|total|huge)\s+)*"
    r"(vegetarian|vegan|veggie|pescatarian|diabetic|asthmatic|epileptic|autistic|illustrator|allergic|lactose|gluten|coeliac|celiac|pregnant|"
    r"blind|deaf|colou?r ?blind|dyslexic|left[- ]handed|retired|nurse|doctor|teacher|student|"
    r"developer|programmer|engineer|designer|lawyer|accountant|scientist|researcher|writer|"
    r"parent|mother|father|mom|mum|dad|beginner|expert|novice|physician|pharmacist|chef|"
    r"musician|artist|manager|carpenter|electrician|farmer|pilot|vet|veterinarian|"
    r"photographer|journalist|translator|freelancer|data scientist|sysadmin|professor|"
    r"halal|kosher|(?:\w+ )?(?:developer|engineer|programmer|student|teacher|nurse|doctor))\b"
    r"|\bi (?:live|work|study|grew up|was born) (?:in|at|as|for|from|near)\b"
    r"|\b(?:i'?m|i am) (?:from|based in|located in|living in|moving to)\b"
    r"|\bi (?:only|mostly|mainly|usually|always|exclusively) (?:use|code|write|program|speak|"
    r"eat|drink|work|read|cook|run|develop|deploy)\b"
    r"|\bi (?:don'?t|do not|never) (?:eat|drink|use|read|speak|have|own|drive)\b"
    r"(?! time| the time| a clue| any idea| much time)"
    # "I can't read the clock": what a moment does not allow, not the user
    r"|\bi (?:can'?t|cannot) (?:eat|drink|use|read|speak|have|own|drive)\b"
    r"(?! time| the\b| this\b| that\b| it\b| your\b| those\b| these\b| a clue| any idea| much)"
    r"|\bi (?:have|own) (?:a |an |two |three |\d+ )?(?:kids?|children|sons?|daughters?|"
    r"dogs?|cats?|wife|husband|partner|allergy|allergies|diabetes|condition|mac|windows|"
    r"linux|iphone|android)\b"
    r"|\bmy (?:wife|husband|partner|kids?|children|son|daughter|dog|cat|job|work|company|"
    r"team|stack|os|editor|diet|language|timezone|time zone|city|country|birthday|pronouns|"
    r"field|background|area) (?:is|are|uses?|works?|lives?|has|have)\b"
    r"|\bi (?:wear|need) (?:glasses|contacts|contact lenses|hearing aids?|a hearing aid)\b"
    r"|\bi(?:'ve| have) got (?:a |an |two |three |\d+ )?(?:kids?|children|sons?|daughters?|"
    r"\d+ ?(?:yr|year|month)s?[- ]old|allergy|diabetes|asthma|rsi|arthritis|adhd)\b"
    r"|\bi (?:have|use|own) (?:a |an |the )?(?:\w+ )?(?:ipad|tablet|laptop|chromebook|kindle|pc"
    r"|iphone|android|mac|macbook|pixel|samsung)\b"
    r"|\bour (?:whole )?(?:place|farm|house|home|business|shop|restaurant|company|school|office"
    r"|team|family|kitchen) (?:is|are|uses?|runs?)\b"
    r"|\bi (?:use|run|am (?:still )?on|'m (?:still )?on|work on|develop on) (?:a |an )?"
    r"(?!it\b|this\b|that\b|them\b|the (?:train|bus|road|way|go|move|plane|subway|tube|metro"
    r"|phone|clock|job|fence|mend|run)\b)"
    r"[A-Z][\w+#.]*"
    r"|\b(?:i'?m|i am) (?:in|at|near) (?:the )?(?-i:[A-Z])"
    r"|\bmy pronouns\b|\bi use (?:he|she|they)/\b|\ballergic to\b|\bintolerant\b",
    re.IGNORECASE,
)
# A first-person statement of something that lasts: "we keep kosher", "I'm on a Mac", "my
# daughter has a nut allergy", "I read these on my phone" (what follows it decides nothing).
_KIN = (
    r"(?:daughter|son|kids?|children|child|wife|husband|partner|family|dog|cat|job|company|team"
    r"|school|budget|doctor|eyesight|hearing|diet|stack|setup|laptop|computer|phone|os|field"
    r"|background|house|home|apartment|flat|city|country|time ?zone|schedule|shift|office"
    r"|workplace|employer|manager|students|clients|customers|audience|readers|native language"
    r"|first language|mother tongue|english|(?:\w+ )?(?:is|are) )"
)
ABOUT_ME = re.compile(
    r"^(?:\W*(?:fyi|btw|by the way|also|oh|and|ps|just so you know|for context|for the record"
    r"|heads up|note|oh and|ok|okay|thanks|thx|ty|cool|great|nice)[,:.!]?\s+)*"
    r"(?:(?:i'?m|i am|im|we'?re|we are)\s+(?:also |really |usually |mostly |only |still |both "
    r"|all |actually )?(?:a |an |on |in |from |based |allergic|vegetarian|vegan|left|right"
    r"|colou?r|deaf|blind|hard of|not allowed|not able|unable|severely|mildly|over|under|\d+)"
    r"|(?:i|we)\s+(?:also |really |usually |mostly |only |mainly |still |both |all |actually "
    r"|exclusively |always |never )?(?:have|keep|live|work|use|read|speak|eat|cook|own|study"
    r"|teach|run|write|code|follow|practi[cs]e|can'?t (?:eat|have|use|read|see|hear|drink|do)"
    r"|cannot|don'?t (?:eat|drink|use|have|own|drive|speak|read)|do not|hate|avoid|rent)\b"
    r"|(?:my|our) (?:\w+ )?" + _KIN + r"\w*)",
    re.IGNORECASE,
)
EPHEMERAL = re.compile(
    r"\bon the (?:train|bus|road|way|go|move|plane|subway|tube|metro)\b"
    r"|\bin (?:a |the )?(?:queue|line|meeting|hurry|rush|cab|taxi)\b"
    r"|\b(today|tonight|right now|yesterday|tomorrow|this (morning|week|weekend|evening|time)"
    r"|at the moment|just now|last (night|week)|a question|an idea|a problem|a doubt|a follow"
    r"|an issue|an error|a bug|no idea|no clue|fun|time for|(is|are) (broken|wrong|not working)"
    r"|said|told|asked|liked|loved|thought)\b",
    re.IGNORECASE,
)
TRANSIENT = re.compile(
    r"\b(?:i'?m|i am) (?:\w+ )?(?:\w+ing|tired|confused|lost|stuck|sorry|sure|not sure|done|"
    r"back|here|busy|bored|curious|afraid|a bit|a little|kind of|just)\b",
    re.IGNORECASE,
)
_KIND_WORDS = (
    ("language", re.compile(rf"\b(in|into|to) ({_LANG})\b|\b({_LANG}) only\b", re.I)),
    (
        "length",
        re.compile(
            r"\b(short|shorter|brief|briefer|concise|one[- ]line|single line|one sentence|"
            r"\d+ words?|\w+ words? or (less|fewer)|under \w+ words|word count|long|longer|"
            r"\w+ (sentences?|words?|lines?|paragraphs?) (max|at most|or (less|fewer))|"
            r"max(imum)? (of )?\w+ (sentences?|words?|lines?|paragraphs?)|"
            r"\w+ (sentences?|words?|lines?|paragraphs?) (is|are) (enough|plenty)|"
            r"length|verbose|wordy|tl;?dr|detail(ed)?|to the point|succinct|terse|rambl\w*)\b",
            re.I,
        ),
    ),
    (
        "format",
        re.compile(
            r"\b(bullet|bullets|list|lists|markdown|table|tables|headings?|headers?|code blocks?"
            r"|numbered|format|formatting|bold|plain text|json|emojis?|examples?|comments?|"
            r"type hints?|snake_case|camelcase|tabs|spaces|indent\w*|semicolons?|units?|metric"
            r"|imperial|celsius|fahrenheit)\b",
            re.I,
        ),
    ),
    (
        "tone",
        re.compile(
            r"\b(formal|informal|casual|friendly|polite|tone|jokes?|humou?r|funny|serious|"
            r"sarcas\w*|apologi\w*|sorry|warm|blunt|direct|chatty|enthusias\w*|exclamation|"
            r"cheerful|professional|emotional|flattery|compliments?)\b",
            re.I,
        ),
    ),
)
# "Finish by asking me something back, would you?": a request with a tag, not a question
_TAG_QUESTION = re.compile(
    r",\s*(?:would|will|could|can|won'?t) you(?: please)?\s*\?+|,\s*(?:ok|okay|yeah|please)\s*\?+",
    re.I,
)


def sentences(reply: str) -> list[list[str]]:
    """The reply cut into sentences, and each into clauses at ", and" / "; " / " but "; a
    request with a question tag ("..., would you?") is a request."""
    out: list[list[str]] = []
    reply = _TAG_QUESTION.sub(".", reply)
    protected = re.sub(r"\b(Mr|Mrs|Ms|Dr|Prof|St|e\.g|i\.e|vs)\.", r"\1<dot>", reply, flags=re.I)
    protected = re.sub(r"\b(tl);\s?(dr)\b", r"\1<semi>\2", protected, flags=re.I)
    # a sentence ends at its punctuation, a line break, or an emoji ("so loud 😭 chill w those")
    ends = r"(?<=[.!?])\s+|\n+|(?<=[a-z])\.(?=[A-Z])|\s*[\U0001F300-\U0001FAFF]+\s+"
    for sentence in re.split(ends, protected):
        sentence = sentence.replace("<dot>", ".")
        pieces = re.split(
            r";\s*|,?\s+\band also\b\s+|,\s*and\s+|,?\s+\bbut\b\s+|\s+-+\s+"
            # "I'm always between classes, can you always ...": a request of its own
            r"|,\s*(?=(?:so |and )?(?:can|could|would|will) (?:you|u)\b)",
            sentence,
        )
        kept = [p.strip().replace("<semi>", ";") for p in pieces if p and p.strip(" .!?,")]
        if kept:
            out.append(kept)
    return out


def clauses(reply: str) -> list[str]:
    """Every clause of the reply, in order (``sentences``, flattened)."""
    return [c for s in sentences(reply) for c in s]


def kind_of(clause: str) -> str:
    """What ``clause`` is about: "name", "length", "language", "tone", "format", ... or
    "other"; words in quotes ("start with 'Short answer:'") are the answer's, not the kind's."""
    if re.search(
        r"\b(?:start|begin|open|end|finish|close|sign)\w*\b[^.]{0,30}[\"'“‘]\w", clause, re.I
    ):
        return "format"  # words every answer starts or ends with
    clause = QUOTED.sub(" ", clause)
    for kind, pattern in _KIND_WORDS:
        if pattern.search(clause):
            return kind
    return "other"


def topic_of(text: str) -> str | None:
    """The last format or tone word ``text`` names ("emojis", "bullet points", "exclamation
    marks"), or None: what a later "them" or "those" may stand for."""
    words = [m for kind, p in _KIND_WORDS if kind in ("format", "tone") for m in p.finditer(text)]
    if not words:
        return None
    last = max(words, key=lambda m: m.start())
    noun = re.match(r"\s+(?:points?|marks?|lists?|blocks?)\b", text[last.end() :])
    return last.group(0) + (noun.group(0) if noun else "")


if __name__ == "__main__":
    for c in clauses(" ".join(sys.argv[1:]) or sys.stdin.read()):
        print(f"{kind_of(c):9} {c}")
