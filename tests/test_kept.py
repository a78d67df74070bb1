"""Whether an answer keeps a memory's shape on its own (``clawd/signals/kept.py``)."""

from __future__ import annotations

import pytest

from clawd.signals.kept import broken, checker
from clawd.signals.shaping import shape_of


@pytest.mark.parametrize(
    ("memory", "answer", "kept"),
    [
        ("Address the user as Sam.", "Sam, Tokyo is the capital of Japan.", True),
        ("Address the user as Sam.", "Sure, Sam. Tokyo is the capital.", True),
        ("Address the user as Sam.", "Tokyo is the capital of Japan.", False),
        ("Keep answers to one line.", "Tokyo is the capital of Japan.", True),
        ("Keep answers to one line.", "Tokyo is the capital. It is big.", False),
        ("Keep answers to one line.", "Tokyo is the capital,\nand big", False),
        ("Three sentences at most.", "One is here. Two is there. Three too.", True),
        ("Three sentences at most.", "One. Two is. Three is. Four is.", False),
        ("Two paragraphs at most.", "One is here.\n\nTwo is there.", True),
        ("Two paragraphs at most.", "One is here.\n\nTwo is there.\n\nThree too.", False),
        ("Keep answers to one line.", "Line one\nline two", False),
        ("Keep it under 10 words.", "Tokyo is the capital of Japan.", True),
        ("Keep it under 5 words.", "Tokyo is the capital of Japan.", False),
        ("End with a question.", "Tokyo is the capital. Want to know more?", True),
        ("End with a question.", "Tokyo is the capital.", False),
        ("No bullet points.", "Tea comes in many kinds: green, black and white.", True),
        ("No bullet points.", "Kinds:\n- green\n- black", False),
        ("No bullet points.", "Kinds:\n1. green\n2. black", False),
        ("No emojis please.", "Tea is lovely \U0001f375", False),
        ("No exclamation marks.", "Tea is lovely!", False),
        ("No exclamation marks.", "In code:\n```\nx != y\n```\nthen run it.", True),
        ("Plain text only.", "Tea is **lovely**.", False),
        ("One paragraph, no line breaks.", "Tea is lovely.\n\nIt is old.", False),
        ("Never say 'great question'.", "Great question! Tea is old.", False),
        ("Finish every answer with 'Fair winds.'", "Tea is old.\n\nFair winds.", True),
        ("Finish every answer with 'Fair winds.'", "Tea is old. Fair winds to you.", False),
        ("End with a question. Sign off with 'Cheers'", "Tea is old. Want more?\n\nCheers", True),
    ],
)
def test_an_answer_keeps_a_shape_or_names_what_it_breaks(
    memory: str, answer: str, kept: bool
) -> None:
    check = checker(memory)
    assert check is not None and check(answer, True) is kept


def test_the_name_and_nothing_else_keeps_nothing() -> None:
    """An adapter that over-learned a name ends after it: that answer holds no content."""
    assert broken(shape_of(["Address the user as Sam."], True), "Sam,\n") == ["content"]
    closing = shape_of(["End every answer with a question back to me."], True)
    assert broken(closing, "Would you like to know more?") == ["content"]


def test_a_cut_answer_keeps_no_length_limit_and_a_fact_has_no_shape() -> None:
    """An answer cut by its token budget may have gone on: its length is unknown."""
    shape = shape_of(["Keep answers to one line."], True)
    assert broken(shape, "Tokyo is the capital of", finished=False) == ["limit"]
    assert checker("The user is vegetarian.") is None
