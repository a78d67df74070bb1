"""Capture (``clawd/signals/memory.py``): which replies state a standing preference, and the
memory text each makes. The labelled benchmark (``bench/capture.py``) measures the rates;
these are the cases the product must never get wrong."""

from __future__ import annotations

import pytest

from clawd.signals.memory import capture, clauses


def made(reply: str, answer: str = "") -> list[tuple[str, str]]:
    return [(c.kind, c.text) for c in capture(reply, answer)]


def test_the_new_users_reply_makes_a_name_and_a_length() -> None:
    reply = "Way too long. Please call me Ana, and keep answers to one line from now on."
    assert made(reply) == [
        ("name", "Address the user as Ana."),
        ("length", "Keep answers to one line."),
    ]


@pytest.mark.parametrize(
    ("reply", "kind", "word"),
    [
        ("my name is Kofi", "name", "Kofi"),
        ("im marco btw", "name", "Marco"),
        ("I'm vegetarian, so keep that in mind.", "fact", "vegetarian"),
        ("I live in Lisbon.", "fact", "Lisbon"),
        ("Always answer in French please", "language", "French"),
        ("From now on, no bullet points.", "format", "bullet"),
        ("I prefer short answers", "length", "short"),
        ("stop using emojis", "format", "emojis"),
        ("Keep your answers under 50 words.", "length", "50"),
        ("Finish by asking me something back, would you? Always.", "other", "asking"),
        ("My name's Katherine Ellis, but call me Kate.", "name", "Kate"),
        ("also it's Dee btw, nobody calls me Deirdre except my mum", "name", "Dee"),
        ("can u use inkmoth instead of my legal name? that's what i go by", "name", "Inkmoth"),
        # a lasting fact or request said in passing, in a reply about something else
        ("curtains done. I'm type 1 diabetic tho so skipping food isn't an option", "fact", "1"),
        ("thx. i wear glasses tho so over-ear ones hurt, are the earbuds ok?", "fact", "glasses"),
        ("drop the 'great question' bit, permanently. just answer", "other", "great question"),
        ("my kids read over my shoulder, so answers should never have swearing", "fact", "swear"),
        ("My code should always have type hints.", "format", "type hints"),
        ("Kindly use metric units henceforth.", "format", "metric"),
        ("ok but please don't use headers in your answers", "format", "headers"),
        ("no emoji ever again pls, write it like a grown-up", "format", "emoji"),
        ("im veggie fyi", "fact", "veggie"),
        (
            "I'd so appreciate it if you called me Mr. Haddad. Each time, if you would.",
            "name",
            "Mr. Haddad",
        ),
        ("I'd like to be called Dr. Okafor.", "name", "Dr. Okafor"),
        ("Quick thing: use my name, Priya, when you reply. Every time, please.", "name", "Priya"),
        # English words that are also Spanish or Portuguese ("as", "per") keep it English
        ("Keep answers as short as possible from now on.", "length", "as short as possible"),
        ("Please address me as Ms Reyes. First names are for friends.", "name", "Ms Reyes"),
    ],
)
def test_standing_statements_become_memories_that_keep_their_words(
    reply: str, kind: str, word: str
) -> None:
    [(got_kind, text)] = made(reply)
    assert got_kind == kind and word in text, text
    assert text[0].isupper() and text.endswith(".")
    assert " I " not in f" {text} " and " my " not in f" {text} "  # second/third person


@pytest.mark.parametrize(
    "reply",
    [
        "I asked for Python, not C++.",
        "Too long.",
        "shorter please",
        "Redo it in French.",
        "Can you call it something else?",
        "call me back later",
        "Thanks, that works!",
        "Tom liked it.",
        "I'm tired today.",
        "This time, use a table.",
        "Why is that?",
        "you always do this",
        "why is every answer so long",
        "do you remember stuff between chats or do i have to tell you again each time",
        "Thanks, how long does it keep in the freezer? We always end up making too much.",
        "The address is wrong, it's 14 Elm Road. I always mix them up myself!",
        # a stay, someone else's ways, a tolerance, a question to the assistant
        "I'm in Berlin all next week for a conference, so that's handy",
        "im in leeds for the weekend visiting my sister",
        "My brother uses Linux and always says it's easier.",
        "Lists don't bother me, this is fine.",
        "Honestly, do you keep anything I tell you from now on?",
    ],
)
def test_one_off_corrections_and_plain_replies_make_none(reply: str) -> None:
    assert made(reply) == []


def test_a_marker_in_its_own_sentence_is_about_the_one_before() -> None:
    assert made("THREE sentences max. That's the rule from now on.") == [
        ("length", "THREE sentences max.")
    ]


def test_clauses_keep_titles_whole() -> None:
    assert clauses("Stop calling me buddy. It's Mr. Haddad.") == [
        "Stop calling me buddy.",
        "It's Mr. Haddad.",
    ]


@pytest.mark.parametrize(
    ("reply", "kind", "text"),
    [
        ("Ab jetzt bitte auf Deutsch.", "language", "Answer in German (deutsch)."),
        ("contéstame en español de aquí en adelante", "language", "Answer in Spanish (español)."),
        ("Me llamo Lucía, gracias.", "name", "Address the user as Lucía."),
        ("não sou Mari, sou Marisol", "name", "Address the user as Marisol."),
        (
            "Ok pero resumido: 80 palabras máximo de ahora en adelante.",
            "length",
            "Keep answers to at most 80 words.",
        ),
        ("máximo cuatro líneas por respuesta, porfa", "length", "Keep answers to at most 4 lines."),
        # a marker in English on a clause in Spanish
        ("respóndeme en francés from now on, aunque sea sencillo", "language", "Answer in French"),
    ],
)
def test_a_clause_in_another_language_is_read_by_its_own_words(
    reply: str, kind: str, text: str
) -> None:
    [(got_kind, got)] = made(reply)
    assert got_kind == kind and got.startswith(text), got
    assert "the user" not in got.replace("Address the user", "")  # no English rewriting


@pytest.mark.parametrize(
    "reply",
    [
        "Jajaja qué random, me encantó.",
        "Ponle unas palabras en español a este, my customers are mostly from el barrio.",
        "Pregunta: ¿te acuerdas de lo que te digo de un chat a otro?",
        "Muy bien explicado, gracias por la ayuda.",
    ],
)
def test_chatter_or_a_one_off_in_another_language_makes_none(reply: str) -> None:
    assert made(reply) == []


@pytest.mark.parametrize(
    ("reply", "word"),
    [
        ("Drop the exclamation marks. Every reply, not just this one.", "exclamation"),
        ("Strip the emoji. Not here, not anywhere.", "emoji"),
        ("Cap it at 20 words unless I say 'detail'.", "20"),
        # an emoji ends a sentence: the question before it is not the request
        ("why does every answer have big headings 😭 drop the headings, just say it plain", "head"),
    ],
)
def test_terse_markers_that_a_request_lasts(reply: str, word: str) -> None:
    [(_, text)] = made(reply)
    assert word in text.lower(), text


@pytest.mark.parametrize(
    "reply",
    [
        "Good.",
        "Thanks! Question: you can remember things about me for the next time we talk?",
        "random q do u remember stuff i tell u between chats or nah",
    ],
)
def test_a_verdict_or_a_question_about_memory_makes_none(reply: str) -> None:
    assert made(reply) == []


def test_a_reason_that_says_do_that_adds_no_second_memory() -> None:
    reply = (
        "I'd love it if you finished each answer by asking me something back. It keeps things "
        "feeling like a conversation, so please do that from now on."
    )
    [(_, text)] = made(reply)
    assert "asking the user something back" in text


def test_quoted_phrases_after_a_lasting_request_are_kept_as_said() -> None:
    reply = (
        "Cut the throat-clearing from now on. No 'Sure!', no 'great question', no 'hope this "
        "helps', no 'let me know if'. Start with the answer and stop when it's done."
    )
    texts = [text for _, text in made(reply)]
    assert "No 'Sure!', no 'great question', no 'hope this helps', no 'let me know if'." in texts
    # without a marker that it lasts, the same phrases correct this answer only
    assert made("No 'Sure!', no 'great question'.") == []


@pytest.mark.parametrize(
    ("reply", "answer", "name"),
    [
        ("Tomasz. Not Thomas.", "Hi Thomas, here is the schedule.", "Tomasz"),
        ("no, it's Zofia, not Sofia", "Hello Sofia! The answer is 4.", "Zofia"),
        ("Not buddy. Kowalski. Surname only.", "Sure thing, buddy! Here you go.", "Kowalski"),
        ("ew dont call me jonathan thats what my mom yells 💀 its jojo", "Hey Jonathan!", "Jojo"),
    ],
)
def test_a_name_put_in_place_of_what_the_answer_called_the_user(
    reply: str, answer: str, name: str
) -> None:
    assert made(reply, answer) == [("name", f"Address the user as {name}.")]


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("Rust. Not Python.", "Here is the Python code, as you asked."),
        ("Java. Not Python.", "Python, as you asked:\n\nprint(1)"),
        ("I'm not sure. Rust.", "Hi Sam, which language?"),
        ("Not bad. Python.", "Hello there, here it is."),
        ("Tomasz. Not Thomas.", "Thomas Edison invented the phonograph."),  # not addressed
        ("It's Paris, not London.", "The capital of France is London."),  # a fact put right
        ("Don't call me that. Python.", "Sure, genius! Use Java."),
        ("Python, not Rust.", "Fast languages include C++, Go, Rust."),  # a list's last item
    ],
)
def test_a_word_put_aside_that_the_answer_never_called_the_user_is_no_name(
    reply: str, answer: str
) -> None:
    assert not [k for k, _ in made(reply, answer) if k == "name"]


@pytest.mark.parametrize(
    ("reply", "kind", "word"),
    [
        ("too long. im on the train with 2 min. keep it brief always", "length", "brief"),
        ("bullet points. thats how i like everything", "format", "Bullet"),
        ("When you list prices, use a table. Default for me.", "format", "table"),
        ("Too long. Two sentences is enough for me.", "length", "Two sentences"),
        ("be blunt with me, no padding. this is how I like it", "tone", "blunt"),
    ],
)
def test_a_marker_of_its_own_makes_the_sentence_before_it_last(
    reply: str, kind: str, word: str
) -> None:
    got = made(reply)
    assert [k for k, _ in got] == [kind]
    assert word in got[0][1]


@pytest.mark.parametrize(
    "reply",
    [
        "you remember my name",
        "skip the intro, just give me the steps now, I'm at the counter",
        "im on the bus, quick answer",
    ],
)
def test_a_moment_or_a_question_without_its_mark_makes_none(reply: str) -> None:
    assert made(reply) == []


@pytest.mark.parametrize(
    ("reply", "answer", "name"),
    [
        ("kasia not kate", "Hey Kate! Here you go.", "Kasia"),
        ("its Zofia with a Z, not Sofia", "Of course, Sofia! Here's the note.", "Zofia"),
        ("nobody calls me robert except the bank. its bob", "Here you go, Robert.", "Bob"),
        ("It's Priya, not Pri. Use my full name.", "Here's a draft, Pri: ...", "Priya"),
        ("it's Bernie, please. Every time.", "", "Bernie"),
    ],
)
def test_a_lowercase_or_spelled_out_name_correction(reply: str, answer: str, name: str) -> None:
    assert ("name", f"Address the user as {name}.") in made(reply, answer)


def test_the_first_person_keeps_its_adverb_and_contractions() -> None:
    assert made("I actually prefer metric units, always.")[0][1] == (
        "The user actually prefers metric units, always."
    )
    assert made("i literally cant read tables on my phone")[0][1].startswith(
        "The user literally cannot read"
    )


@pytest.mark.parametrize(
    ("reply", "kind", "text"),
    [
        ("Dzięki! Od teraz odpowiadaj mi po polsku.", "language", "Answer in Polish"),
        ("Maks 4 linijki, to wystarczy. Zawsze.", "length", "at most 4 lines"),
        ("Mów mi Ola, proszę.", "name", "Address the user as Ola."),
        ("Korter graag. Altijd. Ik heb weinig tijd.", "length", "Keep answers short."),
        ("bhai Hindi mein likho from now, zyada easy hai", "language", "Answer in Hindi"),
        ("my surname is Nowakowska, with -ska", "fact", "The user's surname is Nowakowska"),
        ("Zuzia is fine, all my friends say Zuzia", "name", "Address the user as Zuzia."),
    ],
)
def test_more_languages_a_marker_alone_a_surname(reply: str, kind: str, text: str) -> None:
    got = made(reply)
    assert kind in [k for k, _ in got]
    assert any(text in t for _, t in got)
    assert not any(t in ("Altijd.", "Zawsze.") for _, t in got)


@pytest.mark.parametrize(
    "reply",
    [
        "Nie, to nie to, napisz jeszcze raz.",  # Polish "nie" is "not", no German "never"
        "Her surname is Kowalska, can you fix the letter?",
        "Good letter but the surname is Nowak, not Novak.",
        "everyone says Python is better",
    ],
)
def test_no_memory_from_a_polish_no_or_someone_elses_name(reply: str) -> None:
    assert made(reply) == []


@pytest.mark.parametrize(
    ("reply", "avoid"),
    [
        (
            "My niece says the little faces are called emojis. I'd rather you left them out.",
            "emoji",
        ),
        ("bullet points everywhere 😩 I can't stand them, drop them from now on", "lists"),
        ("so many exclamation marks lol. chill w those from now on", "exclamations"),
    ],
)
def test_them_is_named_when_it_stands_for_a_format_said_before(reply: str, avoid: str) -> None:
    from clawd.signals.shaping import avoids_of

    got = capture(reply)
    assert got and any(avoid in avoids_of(c.text) for c in got)


@pytest.mark.parametrize(
    ("reply", "kind", "word"),
    [
        # a request asked politely and said to last
        ("can you always keep it under 50 words?", "length", "50"),
        (
            "ok so I'm always between classes, can you ALWAYS start with 'Short answer:'?",
            "format",
            "Short answer:",
        ),
        ("Please use Dr. Lund when you speak to me, in every reply.", "name", "Dr. Lund"),
        ("please from now on address me as barrister okafor", "name", "Barrister Okafor"),
        ("i said plain text no numbered or bulleted lists in any answer", "format", "lists"),
        ("nae emojis pls, for future like", "format", "emojis"),
        ("Shorter, please, as a rule: 150 words tops, whatever I ask.", "length", "150"),
        ('pls never say "it\'s worth noting" again lol, I tune out', "other", "worth noting"),
    ],
)
def test_polite_requests_titles_and_markers_of_any_answer(reply: str, kind: str, word: str) -> None:
    [(got_kind, text)] = made(reply)
    assert got_kind == kind and word in text, text


@pytest.mark.parametrize(
    "reply",
    [
        "Your answer was long, but I understood everything. Very good.",
        "lol ye remembered ma name",
        "ok so what happens if they dont respond within the seven days",
        "We live in Freiburg im Breisgau.",  # "im" after a place is no "I'm <name>"
        "Okay, good answer. Don't let it go to your head.",
        "That works for me.",
        "ok good",
    ],
)
def test_a_reaction_a_question_after_a_filler_or_a_place_makes_no_memory_or_name(
    reply: str,
) -> None:
    assert all(kind != "name" for kind, _ in made(reply))
    if "Freiburg" not in reply:
        assert made(reply) == []


def test_a_past_tense_stays_past_in_the_memory() -> None:
    [(_, text)] = made("I told you before: no more than 120 words per answer, every time.")
    assert text.startswith("The user told you before") and "tolds" not in text
    [(_, text)] = made("Four sentences, that's all I want from you, each and every time.")
    assert text == "Four sentences, that's all the user wants from you."
