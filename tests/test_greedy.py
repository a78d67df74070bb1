"""Greedy answers (``clawd.training.greedy``): cut after the end of turn, and written in
left-padded batches on the real SmolLM2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from clawd.adapters.gate import general_prompts
from clawd.chattemplate import ChatTemplate
from clawd.training import torchmodel
from clawd.training.greedy import cut_at_end, greedy_answers


def test_an_answer_is_cut_after_its_first_end_of_turn_token() -> None:
    assert cut_at_end([5, 6, 2, 7, 2], [2]) == [5, 6, 2]
    assert cut_at_end([5, 6, 3, 7], [2, 3]) == [5, 6, 3]  # any of the end-of-turn ids
    assert cut_at_end([5, 6, 7], [2]) == [5, 6, 7]  # none: all of it
    assert cut_at_end([], [2]) == []


def test_batched_greedy_answers_are_cut_and_within_their_budget(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """Prompts of different lengths in one batch (left-padded) and across batches: every answer
    is non-empty, at most the budget, and holds an end-of-turn token only as its last."""
    model, tok = torchmodel.load(smollm2_gguf, torch_cache)
    model.eval()
    render = ChatTemplate.from_gguf(smollm2_gguf).render
    prompts = general_prompts(lambda s: tok(s, add_special_tokens=False)["input_ids"], render)[:3]
    assert len({len(p) for p in prompts}) > 1  # the batch needs padding
    eos = torchmodel.end_tokens(tok)
    answers = greedy_answers(model, prompts, 24, eos, batch=2)
    assert len(answers) == 3
    for a in answers:
        assert 0 < len(a) <= 24
        assert not any(t in eos for t in a[:-1])


def test_a_shaped_answer_opens_ends_and_asks_as_the_daemon_serves_it(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """``shaped_answer`` under a name and a one-sentence limit: the answer opens with the name,
    forced; it ends after its first sentence with a forced end of turn; the tokens the model
    chose are marked 0. Under "end with a question" an answer that would end without one
    goes on with the forced "Would you like", which the model finishes (up to its sentence's
    end)."""
    from clawd.signals.shaping import CLOSING, shape_of
    from clawd.training.greedy import shaped_answer

    model, tok = torchmodel.load(smollm2_gguf, torch_cache)
    model.eval()
    template = ChatTemplate.from_gguf(smollm2_gguf)
    eos = torchmodel.end_tokens(tok)
    system = "Address the user as Noor.\nKeep answers to one sentence."
    msgs = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Why is the sky blue?"},
    ]
    prompt = tok(template.render(msgs), add_special_tokens=False)["input_ids"]
    shape = shape_of(system.split("\n"), first_answer=True)
    answer, forced = shaped_answer(model, prompt, shape, tok, 96, eos)
    assert len(answer) == len(forced) <= 96
    opening = tok("Noor,", add_special_tokens=False)["input_ids"]
    assert answer[: len(opening)] == opening and forced[: len(opening)] == [1.0] * len(opening)
    assert answer[-1] == eos[0] and forced[-1] == 1.0  # the limit ended it
    text = tok.decode(answer[:-1])
    assert text.startswith("Noor,") and text.rstrip()[-1] in ".!?"
    assert sum(forced) == len(opening) + 1 and 0.0 in forced
    ask = shape_of(["End every answer with a question."], first_answer=False)
    plain = [{"role": "user", "content": "What is 2+2?"}]
    prompt = tok(template.render(plain), add_special_tokens=False)["input_ids"]
    answer, forced = shaped_answer(model, prompt, ask, tok, 96, eos)
    text = tok.decode(answer, skip_special_tokens=True)
    if CLOSING in text:  # the model ended without a question: decoding asked one
        closing = tok(CLOSING, add_special_tokens=False)["input_ids"]
        start = text.index(CLOSING)
        ended = forced[-1] == 1.0 and answer[-1] == eos[0]  # the question's end ended it
        assert sum(forced) == len(closing) + ended and len(text) > start + len(CLOSING)
    else:
        assert "?" in text
    # a sign-off ends the answer, forced, before its end of turn
    sign = shape_of(["Two sentences max.", "Sign off with 'Fair winds.'"], first_answer=False)
    answer, forced = shaped_answer(model, prompt, sign, tok, 96, eos)
    text = tok.decode(answer, skip_special_tokens=True)
    assert text.rstrip().endswith("\n\nFair winds.") and text.count("Fair winds.") == 1, text
    signoff = tok("\n\nFair winds.", add_special_tokens=False)["input_ids"]
    assert forced[-len(signoff) - 1 : -1] == [1.0] * len(signoff) and answer[-1] == eos[0]


@pytest.mark.slow
def test_a_shaped_answer_avoids_what_the_memory_forbids(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """Under "Do not use lists." the loop bans what would start a list item, as the engine
    does: the model's own numbered list becomes lines without numbers."""
    from clawd.signals.shaping import shape_of
    from clawd.training.greedy import shaped_answer

    model, tok = torchmodel.load(smollm2_gguf, torch_cache)
    model.eval()
    template = ChatTemplate.from_gguf(smollm2_gguf)
    eos = torchmodel.end_tokens(tok)
    msgs = [{"role": "user", "content": "List five fruits as a numbered list."}]
    prompt = tok(template.render(msgs), add_special_tokens=False)["input_ids"]
    item = re.compile(r"^\s*(?:[-*+•]|\d+[.)])", re.M)
    own = greedy_answers(model, [prompt], 64, eos)[0]
    assert item.search(tok.decode(own, skip_special_tokens=True))
    shape = shape_of(["Do not use lists."], first_answer=True)
    answer, forced = shaped_answer(model, prompt, shape, tok, 64, eos)
    text = tok.decode(answer, skip_special_tokens=True)
    assert text.strip() and not item.search(text) and sum(forced) <= 1, text
    assert all(re.search("[A-Za-z]{2}", line) for line in text.splitlines() if line.strip())


def test_a_thinking_models_shape_starts_after_its_thinking(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """As the engine does, ``shaped_answer`` leaves a ``<think>...</think>`` block alone: the
    name opens the content after it, and a sentence ended inside the thinking does not count
    toward a one-sentence limit. (SmolLM2 with the two tags added to its vocabulary; the first
    four tokens are scripted: ``<think>``, "Yes", ".", ``</think>``.)"""
    from clawd.signals.shaping import shape_of
    from clawd.training.greedy import shaped_answer

    model, tok = torchmodel.load(smollm2_gguf, torch_cache)
    tok.add_tokens(["<think>", "</think>"])
    model.resize_token_embeddings(len(tok))
    model.eval()
    think, done = tok.convert_tokens_to_ids(["<think>", "</think>"])
    yes, stop = tok("Yes", add_special_tokens=False)["input_ids"][0], tok(".")["input_ids"][0]
    scripted = Scripted(model, {0: think, 1: yes, 2: stop, 3: done})
    template = ChatTemplate.from_gguf(smollm2_gguf)
    msgs = [{"role": "user", "content": "Why is the sky blue?"}]
    prompt = tok(template.render(msgs), add_special_tokens=False)["input_ids"]
    eos = torchmodel.end_tokens(tok)
    shape = shape_of(["Address the user as Noor.", "Answer in one sentence."], first_answer=True)
    answer, forced = shaped_answer(scripted, prompt, shape, tok, 96, eos)
    assert answer[:4] == [think, yes, stop, done] and forced[:4] == [0.0] * 4
    opening = tok("Noor,", add_special_tokens=False)["input_ids"]
    at = next(i for i in range(4, len(answer)) if forced[i])
    assert answer[at : at + len(opening)] == opening
    assert all(tok.decode([t]).strip() == "" for t in answer[4:at])  # only blanks before it
    assert len(answer) > at + len(opening)  # the thinking's "Yes." did not end the answer


class Scripted(torch.nn.Module):
    """The real model, whose choice at a few steps is scripted (a logit boost on one token):
    how a thinking model's first tokens are made to happen on a vocabulary without them."""

    def __init__(self, model: torch.nn.Module, script: dict[int, int]) -> None:
        super().__init__()
        self.model, self.script, self.step = model, script, 0

    def forward(self, **kwargs: object) -> object:
        out = self.model(**kwargs)
        if self.step in self.script:
            out.logits[0, -1, self.script[self.step]] += 1e4
        self.step += 1
        return out
