"""Decoding without what memories forbid: the token classes on a vocabulary's bytes, and the
real engine (SmolLM2) answering a request for a list, markdown or emoji without them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clawd.serving.engine import Engine, GenParams, generate_blocking
from clawd.signals.avoid import Avoider, TokenClasses
from clawd.signals.shaping import Shape

PIECES = [b"Hello", b" -", b"1", b".", b"\n-", b"**", b" world", b"\xf0\x9f", b"\x98\x8a", b"#"]
PIECES += [b"\xe2", b"\x80\x94", b"\x98\x80", "😊".encode(), b"`", b"\n\n", b"!", b"!\n"]
PIECES += [b"<think>", b""]  # a thinking tag, an end-of-turn token (no text)


def encode(text: str) -> list[int]:
    """Longest match over PIECES, enough of a tokenizer for a phrase ([] where none fits)."""
    out, rest = [], text.encode()
    while rest:
        fits = [i for i, p in enumerate(PIECES) if p and rest.startswith(p)]
        if not fits:
            return []
        out.append(max(fits, key=lambda i: len(PIECES[i])))
        rest = rest[len(PIECES[out[-1]]) :]
    return out


def banned(
    avoid: str, content: str, pending: bytes = b"", ids: list[int] | None = None
) -> set[bytes]:
    got = Avoider(TokenClasses(PIECES, encode), [avoid]).banned(content, pending, ids)
    return {PIECES[i] for i in got}


def test_lists_are_banned_until_a_line_has_a_word_and_nowhere_else() -> None:
    assert {b" -", b"\n-", b"**"} <= banned("lists", "")
    # a line opens with a word: not a number, a bullet or a symbol (nor a new line's bytes)
    assert {b" -", b"1", b"#", b"\xe2"} <= banned("lists", "Tea.\n")
    assert not {b"Hello", b"\n\n", b"<think>"} & banned("lists", "")
    assert banned("lists", "Boil the water - then wait") == {b"\n-"}
    assert b"." in banned("lists", "Tea.\n2") and b"." not in banned("lists", "It is 2")
    assert banned("lists", "```\n") == set()  # inside code, a line may start with anything


def test_markdown_and_emoji_are_banned_anywhere_and_an_emoji_is_not_completed() -> None:
    assert {b"**", b"`", b"#"} <= banned("markdown", "Some text.\n")
    assert b"#" not in banned("markdown", "Some text")
    assert banned("emoji", "Hi") == {b"\xf0\x9f", "😊".encode()}
    # after the first byte of U+2xxx: a dash may follow, a sun may not
    assert banned("emoji", "Hi", pending=b"\xe2") >= {b"\x98\x80"}
    assert b"\x80\x94" not in banned("emoji", "Hi", pending=b"\xe2")
    assert banned("exclamations", "Hi") == {b"!", b"!\n"}
    assert banned("exclamations", "```\nprint(") == set()
    assert banned("newlines", "Hi") == {b"\n-", b"\n\n", b"!\n"}
    assert banned("newlines", "```\nx = 1") == set()  # code keeps its lines
    # a closing question may end only with its "?": no ".", "!", new line or end of turn
    asked = Avoider(TokenClasses(PIECES, encode), []).banned("Would you like", asking=True)
    assert {PIECES[i] for i in asked} == {b".", b"\n-", b"\n\n", b"!", b"!\n", b""}


def test_a_phrase_loses_its_last_token_after_the_ones_before_it() -> None:
    hello_world = [PIECES.index(b"Hello"), PIECES.index(b" world")]
    assert banned('"Hello world"', "", ids=[]) == set()
    assert banned('"Hello world"', "Hello", ids=hello_world[:1]) == {b" world"}
    assert banned('"world"', "x", ids=[]) >= {b" world"}  # one token: banned everywhere


@pytest.fixture(scope="module")
def smollm2(smollm2_gguf: Path):
    e = Engine(smollm2_gguf, n_ctx=1024)
    e.load()
    yield e
    e.close()


def served(engine: Engine, question: str, avoid: tuple[str, ...]) -> str:
    prompt = engine.tokenize(engine.render([{"role": "user", "content": question}]))
    params = GenParams(temperature=0, max_tokens=96, shape=Shape(avoid=avoid) if avoid else None)
    return generate_blocking(engine, prompt, params).content


@pytest.mark.slow
def test_the_engine_answers_without_a_list_markdown_or_emoji(smollm2: Engine) -> None:
    ask = "List five fruits as a numbered list."
    item = re.compile(r"^\s*(?:[-*+•]|\d+[.)])", re.M)
    assert item.search(served(smollm2, ask, ()))  # the model's own answer is a list
    plain = served(smollm2, ask, ("lists",))
    assert plain.strip() and not item.search(plain), plain
    # and not a list in disguise ("1\n2\n3"): every line has words
    assert all(re.search("[A-Za-z]{2}", line) for line in plain.splitlines() if line.strip())
    ask = "Show me a Python function that adds two numbers."
    marked = re.compile(r"\*|`|^\s*[#|]", re.M)
    assert marked.search(served(smollm2, ask, ()))
    unmarked = served(smollm2, ask, ("markdown",))
    assert unmarked.strip() and not marked.search(unmarked), unmarked
    ask = "What emoji would you use for happiness?"
    assert "afraid" in served(smollm2, ask, ()).lower()
    said = served(smollm2, ask, ('"I\'m afraid"',))
    assert said.strip() and "i'm afraid" not in said.lower(), said
    ask = "Send me a smiley face emoji."
    emoji = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf]")
    assert emoji.search(served(smollm2, ask, ()))
    answer = served(smollm2, ask, ("emoji",))
    assert not emoji.search(answer), answer
    ask = "Give me three tips for sleeping better."
    assert "\n" in served(smollm2, ask, ()).strip()
    one_block = served(smollm2, ask, ("newlines",))
    assert one_block.strip() and "\n" not in one_block.strip(), one_block
