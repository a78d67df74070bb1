"""The same complaint about a second answer becomes a memory, on the real store."""

from pathlib import Path

import pytest

from clawd.signals.corrections import complaints
from clawd.signals.memory import remember
from clawd.store import memories, record
from clawd.store.db import Store


@pytest.fixture
def store(home: Path):
    with Store.open(home) as s:
        yield s


def texts(made: list[dict]) -> list[str]:
    return [m["memory"]["text"] for m in made]


@pytest.mark.parametrize(
    ("reply", "forms"),
    [
        ("ugh, another essay", ["length"]),
        ("Stopped reading halfway. Get to the point.", ["length"]),
        ("why is everything a list with you", ["lists"]),
        ("Lose the little pictures, please.", ["emoji"]),
        ("All those asterisks and symbols, why?", ["markdown"]),
        ("No need to shout at me.", ["exclamations"]),
        ("One paragraph. The blank lines waste paper.", ["newlines"]),
        ("So... that's it? Conversation over?", ["question"]),
        ("lol that list was funny", []),
        # a request for a form is no complaint of it; a negated wish is one
        ("Can you list the steps?", []),
        ("no, I want a numbered list", []),
        ("I need a list, not a paragraph", []),
        ("I don't want lists", ["lists"]),
        ("I love the bullet points", []),
        ("Thanks, that's perfect.", []),
    ],
)
def test_what_a_reply_complains_of(reply: str, forms: list[str]) -> None:
    assert complaints(reply) == forms


def test_a_complaint_said_again_about_another_answer_makes_its_memory(store: Store) -> None:
    assert remember(store, "Too long.", source="reply") == []  # once: a one-off correction
    assert remember(store, "why all the emoji?", source="reply") == []  # another form
    made = remember(store, "ugh, another essay", source="reply")
    assert texts(made) == ["Keep answers short."]
    assert memories.in_prompt(store)[0]["source"] == "reply"
    # the memory asks for it now: a third complaint adds nothing
    assert remember(store, "Way too long again.", source="reply") == []
    assert texts(remember(store, "Lose the emoji, please.", source="reply")) == [
        "Do not use emoji."
    ]


def test_a_memory_that_asks_for_it_already_is_enough(store: Store) -> None:
    memories.add(store, "Keep answers to one line.", "length", source="user")
    remember(store, "Too long.", source="reply")
    assert remember(store, "Still a wall of text.", source="reply") == []
    assert len(memories.in_prompt(store)) == 1


def test_forgetting_a_conversation_forgets_its_complaints(store: Store) -> None:
    ctx = record.begin(store, [{"role": "user", "content": "hi"}], None, learn=True)
    record.record_turn(store, ctx, response_text="A long answer.", model="m")
    remember(store, "Too long.", source="reply", conversation_id=ctx.conversation_id)
    record.delete_conversation(store, ctx.conversation_id)
    assert remember(store, "ugh, another essay", source="reply") == []  # the first is gone


def test_a_name_correction_reads_the_answer_it_replies_to(store: Store) -> None:
    made = remember(store, "Tomasz. Not Thomas.", source="reply", answer="Hi Thomas, done.")
    assert texts(made) == ["Address the user as Tomasz."]
    assert remember(store, "Tomasz. Not Thomas.", source="reply") == []  # no answer: no name
