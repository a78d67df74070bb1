"""Answer shaping: what memories ask of decoding, and the real engine keeping it (the tiny
Qwen3 and SmolLM2), with the forced words recorded as part of the answer's tokens."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clawd.serving.engine import Engine, GenParams, generate_blocking
from clawd.signals.kept import broken
from clawd.signals.lengths import limit_of
from clawd.signals.shaper import Shaper
from clawd.signals.shaping import (
    CLOSING,
    Shape,
    avoids_of,
    name_of,
    phrases_of,
    shape_of,
    summary_of,
)


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("Keep answers to one line.", (1, "sentences")),
        ("Give the user two or three lines.", (3, "sentences")),
        ("A sentence or two is plenty.", (2, "sentences")),
        ("No more than 50 words.", (50, "words")),
        ("Twenty-five words max.", (25, "words")),
        ("Keep it under thirty two words.", (32, "words")),
        ("Fifteen words or fewer.", (15, "words")),
        ("The user wants a 40-word answer at most.", (40, "words")),
        ("Don't write more than two paragraphs.", (2, "paragraphs")),
        ("The user prefers short answers.", (1, "sentences")),
        ("Tl;dr, always.", (1, "sentences")),
        ("Write at least 3 sentences.", None),
        ("Explain things in detail.", None),
        ("Use three examples.", None),
        ("The user finds answers too short.", None),
        ("End every answer with a one-line tl;dr summary.", None),  # a part, not the answer
        ("Start with a two-sentence summary, then the details.", None),
        ("Answers in 2 sentences, summary first.", (2, "sentences")),
        ("You forgot the 'Short answer:' opener again.", None),  # quoted words are no length
    ],
)
def test_the_length_a_memory_states(text: str, limit: tuple[int, str] | None) -> None:
    assert limit_of(text) == limit


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Address the user as Ana.", "Ana"),
        ("The user's name is Noor.", "Noor"),
        ("Call me Sam", "Sam"),
        ("Address the user as Mrs. Delacroix.", "Mrs. Delacroix"),
        ("Address the user as Dr Okafor.", "Dr Okafor"),
        ("The user's favourite colour is Blue.", None),
        ("The user is vegetarian.", None),
    ],
)
def test_the_name_a_memory_gives(text: str, name: str | None) -> None:
    assert name_of(text) == name


@pytest.mark.parametrize(
    ("text", "avoid"),
    [
        ("Do not use bullet points.", {"lists"}),
        ("The user hates lists.", {"lists"}),
        ("Write in prose, not lists.", {"lists"}),
        ("Always talk to the user in normal sentences.", {"lists"}),
        ("No emojis.", {"emoji"}),
        ("The user does not like emoji in answers.", {"emoji"}),
        ("Plain text only.", {"markdown"}),
        ("No formatting.", {"lists", "markdown"}),
        ("Avoid emoji and lists.", {"emoji", "lists"}),
        ("Stop with the exclamation marks.", {"exclamations"}),
        ("Leave out the exclamation marks.", {"exclamations"}),
        ("Get rid of the bullet points.", {"lists"}),
        ("Drop the 'great question!' bit, permanently.", {'"great question"'}),
        ("Don't use the word delve.", {'"delve"'}),
        ("One paragraph, no line breaks.", {"newlines"}),
        ("Keep answers to one line.", {"newlines"}),
        ("The user wants a single block of text.", {"newlines"}),
        ("Two paragraphs at most.", set()),
        ("The user's dog is called 'Rex'.", set()),
        ("Use bullet points.", set()),
        ("Emojis are fine.", set()),
        ("No more than 5 bullet points.", set()),
        ("Don't write paragraphs, use lists.", set()),
        ("The user would rather you left the emojis out.", {"emoji"}),
        ("Chill w the exclamation marks.", {"exclamations"}),
        ("Add a one-line summary at the end.", set()),
    ],
)
def test_what_a_memory_says_to_avoid(text: str, avoid: set[str]) -> None:
    assert avoids_of(text) == avoid


def test_a_shape_opens_only_a_conversations_first_answer_and_keeps_the_tighter_limit() -> None:
    texts = ["Address the user as Ana.", "Keep it under 60 words.", "At most 40 words, please."]
    assert shape_of(texts, first_answer=True) == Shape("Ana,", 40, "words", False)
    assert shape_of(texts, first_answer=False).opening is None
    assert shape_of(["Check back with the user."], first_answer=True).closing
    assert shape_of(["Finish by asking the user something back."], first_answer=True).closing
    assert not shape_of(["The user lives in Lisbon."], first_answer=True)
    avoiding = shape_of(["No emojis.", "Do not use lists."], first_answer=False)
    assert avoiding.avoid == ("emoji", "lists") and avoiding.describe()["avoid"] == [
        "emoji",
        "lists",
    ]


@pytest.mark.parametrize(
    ("text", "phrases"),
    [
        (
            "The user would like every reply to finish wi' 'Fair winds.' as the last words.",
            (None, "Fair winds."),
        ),
        ("Sign off with 'Cheers, G' every time.", (None, "Cheers, G")),
        ('Always start with "Short answer:" and then the details.', ("Short answer:", None)),
        ("You forgot the 'Short answer:' opener again.", ("Short answer:", None)),
        ("Never say 'great question'.", (None, None)),  # a phrase to avoid
        ("Don't start with 'Great question!'", (None, None)),
        ("End each reply with a 'TL;DR:' line.", (None, None)),  # a summary's label
        ("That's what the user's dad always says.", (None, None)),  # apostrophes quote nothing
    ],
)
def test_the_words_a_memory_says_to_open_or_end_with(
    text: str, phrases: tuple[str | None, str | None]
) -> None:
    assert phrases_of(text) == phrases


def test_a_number_said_holds_over_vague_brevity_and_the_asking_summary_counts() -> None:
    texts = ["Four sentences, that's all the user wants.", "The user likes things brief."]
    assert shape_of(texts, first_answer=True).limit == 4
    assert shape_of(texts[::-1], first_answer=True).limit == 4
    assert shape_of(["Keep it short.", "Or shorter."], first_answer=True).limit == 1
    said = "No TL;DR at the bottom again. End each reply with a 'tldr:' line summing it up."
    assert summary_of(said) == "TL;DR:"
    # a summary asked for at the top opens the answer with its label, and limits nothing
    top = shape_of(["Put a TL;DR at the top of every answer."], first_answer=False)
    assert top.opening == "TL;DR:" and top.limit is None and not top.avoid
    assert shape_of(["Bottom line up front, always."], True).opening == "Bottom line:"
    # a phrase opens every answer, the name only a conversation's first
    both = ["Always start with 'Short answer:'.", "Address the user as Kojo."]
    assert shape_of(both, first_answer=True).opening == "Short answer: Kojo,"
    assert shape_of(both, first_answer=False).opening == "Short answer:"


def test_the_sign_off_takes_its_room_from_a_limit_and_is_added_once() -> None:
    shape = shape_of(["Four sentences at most.", "Close with 'Fair winds.'"], first_answer=True)
    shaper = Shaper(shape)
    assert feed(shaper, ["One. ", "Two. ", "Three. ", "Four. "]) == ("end", "One. Two. Three. ")
    assert shaper.signing() and not shaper.signing()
    done = Shaper(shape)
    feed(done, ["Sail on. ", "Fair winds."])
    assert not done.signing()  # the answer ends with it already


def feed(shaper: Shaper, pieces: list[str]) -> tuple[str, str]:
    for piece in pieces:
        verdict = shaper.push(piece)
        if verdict != "go on":
            return verdict, shaper.text
    return "go on", shaper.text


def test_a_sentence_limit_ends_at_a_sentence_end_never_at_a_number_or_in_code() -> None:
    pieces = ["It", " has", " 3", ".", "5", " million", " people", ".", " It", " is", " big", "."]
    assert feed(Shaper(Shape(limit=1, unit="sentences")), pieces) == (
        "end",
        "It has 3.5 million people.",
    )
    code = ["Here", ":", "\n", "```", "x", " =", " 1", ".", "\n", "```", "\n", "Done", "."]
    assert feed(Shaper(Shape(limit=1, unit="sentences")), code) == ("end", "".join(code))
    listed = ["Steps", ":\n", "1", ".", " Boil", ".", "\n", "2", ".", " Eat", "."]
    assert feed(Shaper(Shape(limit=3, unit="sentences")), listed)[1].endswith("Eat.")


def test_the_opening_on_a_line_of_its_own_is_no_sentence() -> None:
    """ "Sam," and a new line open the answer; a one-sentence limit ends after the sentence
    that follows, not after the name (which served "Sam,\n" and nothing else)."""
    shaper = Shaper(Shape(opening="Sam,", limit=1, unit="sentences"))
    shaper.forced("Sam,")
    pieces = ["\n", "I", "'m", " glad", " you", " asked", ".", " Tea", " is", " easy", "."]
    assert feed(shaper, pieces) == ("end", "Sam,\nI'm glad you asked.")
    hello = Shaper(Shape(limit=1, unit="sentences"))
    assert feed(hello, ["Hi", " Ana", ",", "\n", "Yes", ".", " No", "."]) == (
        "end",
        "Hi Ana,\nYes.",
    )


def test_a_word_limit_ends_before_a_sentence_that_would_pass_it_or_cuts_at_it() -> None:
    shaper = Shaper(Shape(limit=18, unit="words"))
    words = "One two three four five six seven eight nine ten. Eleven twelve thirteen".split()
    verdict, text = feed(shaper, [w if i == 0 else " " + w for i, w in enumerate(words)])
    assert (verdict, text) == ("end", "One two three four five six seven eight nine ten.")
    long = Shaper(Shape(limit=5, unit="words"))
    assert feed(long, ["a", " b", " c", " d", " e", " f"]) == ("cut", "a b c d e")


def test_the_closing_question_is_asked_once_and_never_after_a_question() -> None:
    shaper = Shaper(Shape(closing=True))
    assert not Shaper(Shape()).closing()
    feed(shaper, ["Tokyo", "."])
    assert shaper.closing() and not shaper.closing()
    shaper.forced(CLOSING)
    assert feed(shaper, [" to", " know", " more", "?"]) == (
        "end",
        "Tokyo." + CLOSING + " to know more?",
    )
    asked = Shaper(Shape(closing=True))
    feed(asked, ["Anything", " else", "?"])
    assert not asked.closing() and not asked.question_open()
    # out of room, the question ends where it is, and is still to be asked ("?" is forced)
    short = Shaper(Shape(closing=True))
    feed(short, ["Tokyo", "."])
    short.closing()
    short.forced(CLOSING)
    assert short.push(" to", tokens_left=5) == "go on"
    assert short.push(" learn", tokens_left=2) == "end" and short.question_open()


def loaded(gguf: Path):
    e = Engine(gguf, n_ctx=1024)
    e.load()
    yield e
    e.close()


@pytest.fixture(scope="module")
def engine(any_gguf: Path):
    yield from loaded(any_gguf)


@pytest.fixture(scope="module")
def smollm2(smollm2_gguf: Path):
    yield from loaded(smollm2_gguf)  # the tiny random model writes no sentences to count


def answer(engine: Engine, question: str, shape: Shape, seed: int = 1, max_tokens: int = 64):
    prompt = engine.tokenize(engine.render([{"role": "user", "content": question}]))
    params = GenParams(temperature=0.7, max_tokens=max_tokens, seed=seed, shape=shape)
    return generate_blocking(engine, prompt, params)


def served_text(engine: Engine, ids: list[int]) -> str:
    """The text of the answer's recorded tokens (end-of-generation tokens are not text)."""
    return engine.llm.detokenize(ids, special=False).decode("utf-8", errors="replace")


def test_the_engine_opens_with_the_name_and_records_the_forced_tokens(engine: Engine) -> None:
    for seed in (1, 2, 3):
        r = answer(engine, "What is the capital of Japan?", Shape(opening="Ana,"), seed=seed)
        content = r.content
        assert content.startswith("Ana,"), content
        if not r.reasoning:  # the recorded tokens are what was served
            assert served_text(engine, r.response_token_ids).strip() == content.strip()
        assert len(r.response_token_ids) <= 64


def test_the_engine_keeps_a_limit_and_asks_the_closing_question(smollm2: Engine) -> None:
    engine = smollm2
    for seed in (1, 2):
        r = answer(engine, "Tell me about the history of Rome.", Shape(limit=2, unit="sentences"))
        ends = re.findall(r"[a-z][.!?](\s|$)", r.content)
        assert r.finish_reason == "stop" and len(ends) <= 2, r.content
        assert r.response_token_ids[-1] == engine.llm.token_eos()
        assert served_text(engine, r.response_token_ids).strip() == r.content.strip()
        words = answer(engine, "Explain photosynthesis.", Shape(limit=25, unit="words"), seed)
        assert len(words.content.split()) <= 25, words.content
        asked = answer(
            engine, "Tell me about Rome.", Shape(limit=1, unit="sentences", closing=True), seed
        )
        assert CLOSING in asked.content and asked.content.rstrip().endswith("?"), asked.content
        line = Shape(limit=1, unit="sentences", closing=True, avoid=("newlines",))
        one_line = answer(engine, "Tell me about Rome.", line, seed).content.strip()
        assert "\n" not in one_line and one_line.endswith("?"), one_line
        # a client's max_tokens leaves room for the question: it is asked before they run out
        tight = answer(engine, "Explain photosynthesis.", Shape(closing=True), seed, max_tokens=60)
        assert CLOSING in tight.content and len(tight.response_token_ids) <= 60, tight.content
        assert tight.content.rstrip().endswith("?"), tight.content


def test_the_engine_ends_with_the_summary_line_a_memory_asks_for(smollm2: Engine) -> None:
    shape = shape_of(["End every answer with a one-line TL;DR."], first_answer=True)
    assert shape.summary == "TL;DR:" and shape.limit is None
    for seed in (1, 2):
        r = answer(smollm2, "Tell me about the history of Rome.", shape, seed, max_tokens=96)
        last = r.content.rstrip().rsplit("\n", 1)[-1]
        assert last.startswith("TL;DR:") and len(last.split()) > 1, r.content
        assert r.content.count("TL;DR:") == 1
        assert not broken(shape, r.content), r.content


def test_the_engine_opens_and_signs_off_with_the_quoted_words(smollm2: Engine) -> None:
    memories = [
        "Always start with 'Short answer:'.",
        "Three sentences max.",
        "Sign off: 'Fair winds.'",
    ]
    shape = shape_of(memories, first_answer=False)
    assert shape.opening == "Short answer:" and shape.signoff == "Fair winds."
    for seed in (1, 2):
        r = answer(smollm2, "Tell me about the history of Rome.", shape, seed, max_tokens=96)
        assert r.content.startswith("Short answer:"), r.content
        assert r.content.rstrip().endswith("\n\nFair winds."), r.content
        assert r.content.count("Fair winds.") == 1
        assert not broken(shape, r.content), r.content
        assert served_text(smollm2, r.response_token_ids).strip() == r.content.strip()
        # a client's max_tokens leaves room for it, with a closing question before it too
        both = Shape(closing=True, signoff="Fair winds.")
        tight = answer(smollm2, "Explain photosynthesis.", both, seed, max_tokens=60)
        assert tight.content.rstrip().endswith("?\n\nFair winds."), tight.content
        assert len(tight.response_token_ids) <= 60
