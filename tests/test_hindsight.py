"""Hindsight answers' measures on the real model: how much an answer belongs to its question
(``hindsight.relevance``, ``hindsight.hint_gain``) and whether it copies
(``hindsight.echo_share``, ``hindsight.hint_block``): what decides which hindsight answer
trains."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clawd.adapters.gate import general_prompts
from clawd.chattemplate import ChatTemplate, teacher_messages
from clawd.training import hindsight, torchmodel
from clawd.training.config import TrainConfig

Tokens = Callable[[str], list[int]]


@pytest.fixture(scope="module")
def smol(smollm2_gguf: Path, torch_cache: Path) -> tuple[Any, ChatTemplate, Tokens]:
    """SmolLM2 in torch, its chat template and its tokenizer as a function."""
    model, tok = torchmodel.load(smollm2_gguf, torch_cache)

    def tokens(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    return model, ChatTemplate.from_gguf(smollm2_gguf), tokens


def test_relevance_tells_an_answer_from_one_that_fits_any_question(
    smol: tuple[Any, ChatTemplate, Tokens],
) -> None:
    model, template, tokens = smol
    references = general_prompts(tokens, template.render)[::8]
    end = tokens("<|im_end|>")

    def rel(question: str, answer: str) -> float:
        prompt = tokens(template.render([{"role": "user", "content": question}]))
        return hindsight.relevance(model, prompt, tokens(answer) + end, references)

    q = "What is the capital of Australia?"
    specific = rel(q, "The capital of Australia is Canberra.")
    short = rel(q, "Canberra.")
    named = rel(q, "Sam, the capital of Australia is Canberra.")
    generic = rel(q, "I'm here to assist you. What can I help you with today?")
    advice = rel("How do I make friends in a new city?", "Join a club and go every week.")
    deflect = rel("How do I make friends in a new city?", "I'm here to help. What's on your mind?")
    floor = TrainConfig().hindsight_min_relevance
    # Answers to the question, short or with a name, clear the floor; answers to any question
    # do not, and fall under a quarter of the specific answer's relevance.
    assert min(specific, short, named) > 1.0 and advice > floor
    assert generic < floor and deflect < floor
    assert generic < 0.25 * specific and deflect < advice
    assert hindsight.relevance(model, [1, 2], [], references) == 0.0


def test_echo_share_tells_a_copied_question_or_hint_from_an_answer() -> None:
    source = list(range(100, 130))  # the question with the hint, as tokens
    assert hindsight.echo_share(source[3:15], source) == 1.0  # copied out
    assert hindsight.echo_share([1, 2, 3, 4, 5, 6, 7, 8], source) == 0.0  # its own words
    # An answer that ends by repeating 4 tokens of the question: 4 of its 12 tokens.
    assert hindsight.echo_share([1, 2, 3, 4, 5, 6, 7, 8, *source[:4]], source) == 4 / 12
    assert hindsight.echo_share([1, 2, *source[:3], 9], source) == 0.0  # runs under 4 tokens
    assert hindsight.echo_share([100, 101], source) == 0.0  # shorter than a run


def test_hint_gain_is_largest_for_the_answer_that_follows_the_hint(
    smol: tuple[Any, ChatTemplate, Tokens],
) -> None:
    model, template, tokens = smol
    end = tokens("<|im_end|>")
    question = [{"role": "user", "content": "What is the capital of Australia?"}]
    plain = tokens(template.render(question))

    def gain(hint: str, answer: str) -> float:
        hinted = tokens(template.render(teacher_messages(question, hint)))
        return hindsight.hint_gain(model, hinted, plain, tokens(answer) + end)

    name = "Address the user by their name, Sam."
    ask = "End every answer with a question back to the user."
    plain_answer = "The capital of Australia is Canberra."
    assert gain(name, "Sam, the capital of Australia is Canberra.") > gain(name, plain_answer)
    asked = "The capital of Australia is Canberra. Have you been there?"
    assert gain(ask, asked) > gain(ask, plain_answer)
    assert hindsight.hint_gain(model, plain, plain, []) == 0.0


def test_hint_block_is_what_the_hint_put_into_the_prompt(
    smol: tuple[Any, ChatTemplate, Tokens],
) -> None:
    assert hindsight.hint_block([1, 2, 7, 8, 3], [1, 2, 3]) == [7, 8]
    assert hindsight.hint_block([1, 2, 3], [1, 2, 3]) == []
    _, template, tokens = smol
    question = [{"role": "user", "content": "What is the capital of Australia?"}]
    plain = tokens(template.render(question))
    hint = "End every answer with a question back to the user."
    for placement in ("user", "system"):
        msgs = teacher_messages(question, hint, placement)
        hinted = tokens(template.render(msgs))
        block = hindsight.hint_block(hinted, plain)
        assert _contains(block, tokens(hint)[1:-1])  # the hint (its ends may tokenize apart)
        assert not _contains(block, tokens("Australia"))
        # An answer that writes the hint out quotes it; one in its own words does not.
        quoted = tokens(f"Canberra. {hint}")
        own = tokens("Canberra. Have you been there?")
        assert hindsight.echo_share(quoted, block) > 0.5
        assert hindsight.echo_share(own, block) == 0.0


def _contains(seq: list[int], run: list[int]) -> bool:
    return any(seq[i : i + len(run)] == run for i in range(len(seq) - len(run) + 1))
