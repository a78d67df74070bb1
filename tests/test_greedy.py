"""Greedy answers (``clawd.training.greedy``): cut after the end of turn, and written in
left-padded batches on the real SmolLM2."""

from __future__ import annotations

from pathlib import Path

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
