"""Loops (``clawd/adapters/loops.py``): what the gate calls a degenerate answer, on token lists, and
the sampled check that a greedy loop is one a user would see, on the real tiny models."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawd.adapters import gate, loops
from clawd.serving.chat import DEFAULT_TEMPERATURE
from fixtures.adapterkit import fit_answer, make_adapter
from tests.test_gate import OWN, Q, _vocab


def test_degeneration_counts_empty_repeated_and_collapsed_answers() -> None:
    end = 0
    varied = [[i, i + 1, i + 2, end] for i in range(1, 33)]
    assert loops.degeneration(varied, lambda t: t == end) == {
        "empty": 0.0,
        "repetitive": 0.0,
        "degenerate": 0.0,
        "distinct": 1.0,
        "at": [],
        "answers": 32,
    }
    collapsed = [[7, 8, 9, 7, 8, 9, end]] * 32
    assert loops.degeneration(collapsed, lambda t: t == end)["distinct"] == 1 / 32
    looping = [[5] * 10, [end], [1, 2] * 10, [3, 4, 6, end]]
    got = loops.degeneration(looping, lambda t: t == end)
    assert got["empty"] == 0.25 and got["repetitive"] == 0.5 and got["degenerate"] == 0.75
    assert got["at"] == [0, 1, 2]


def test_general_ability_fails_on_an_excess_of_loops_not_on_a_loop_that_moved() -> None:
    """Decided on rates: the base model's own loops ("10 kilometres is equal to 1000000...")
    are no fault of the adapter; a loop that moves from one prompt to another is noise (the
    5-step update rejected for moving "Boil an egg: ..." from prompt 11 to 18); loops on many
    more prompts than the base model's fail."""
    end = 0

    def ability(answers: list[list[int]]) -> dict:
        return loops.degeneration(answers, lambda t: t == end)

    answers = [[i, i + 1, i + 2, end] for i in range(1, 33)]
    base_loop = [*answers[:5], [1, 2] * 8 + [end], *answers[6:]]
    base = ability(base_loop)
    assert loops.general_ability(base, ability(base_loop)) == (True, [])  # the same loop
    assert loops.general_ability(base, ability(answers)) == (True, [])  # loops less
    sorry = [9, 8, 7] * 6 + [end]  # "I'm sorry, I'm sorry, ..."
    worse = [*base_loop[:20], sorry, *base_loop[21:]]
    assert loops.general_ability(base, ability(worse)) == (True, [20])  # one: chance
    moved = [*answers[:5], *answers[5:18], sorry, *answers[19:]]  # from prompt 5 to 18
    assert loops.general_ability(base, ability(moved)) == (True, [18])
    four = [*base_loop[:20], *[sorry] * 4, *base_loop[24:]]
    assert loops.general_ability(base, ability(four)) == (True, [20, 21, 22, 23])
    five = [*base_loop[:20], *[sorry] * 5, *base_loop[25:]]
    assert loops.general_ability(base, ability(five)) == (False, [20, 21, 22, 23, 24])
    assert loops.general_ability(base, ability(five), alpha=0.0)[0]  # 0: never on loops
    # Collapse: many prompts, one answer, none of them repetitive.
    same = [[40, 41, 42, 43, end]] * 32
    assert ability(same)["degenerate"] == 0
    assert loops.general_ability(base, ability(same))[0] is False


def test_a_loop_with_a_long_period_shows_only_past_32_tokens() -> None:
    """Why the general-ability check reads 64 tokens: an opening, then a 9-token phrase over and
    over ("a solid ball of rock that is made of ...", served by an adapter on SmolLM2) still has
    enough distinct trigrams in 32 tokens, not in 64 (docs/experiments.md, "The general-ability
    check reads 64 tokens")."""
    end = 0
    loop = [100, 101, 102, 103, 104, *list(range(1, 10)) * 7]
    assert loops.degeneration([loop[:32]], lambda t: t == end)["at"] == []
    assert loops.degeneration([loop[:64]], lambda t: t == end)["at"] == [0]


def test_a_flagged_loop_counts_only_when_sampled_answers_confirm_it() -> None:
    """The rule on counts alone: a loop counts when the candidate's sampled answers degenerate
    in at least ``MARGIN`` more of them than the base model's."""
    assert loops.counts(2, 0) and loops.counts(3, 1) and loops.counts(8, 0)
    assert not loops.counts(1, 0) and not loops.counts(2, 1) and not loops.counts(8, 8)
    assert loops.counts(1, 0, margin=1) and not loops.counts(0, 0, margin=1)
    assert loops.TEMPERATURE == DEFAULT_TEMPERATURE  # what a user gets unless a client asks


def test_sampled_answers_follow_their_seed(tiny_qwen3_gguf: Path) -> None:
    """The gate's sampled answers are reproducible (seed n gives the same answer twice), differ
    between seeds, and greedy stays greedy."""
    tokenize, render = _vocab(tiny_qwen3_gguf)
    scorer = gate.Scorer(tiny_qwen3_gguf, n_ctx=512)
    try:
        prompt = tokenize(render(Q))
        one = [scorer.answer(prompt, 24, loops.TEMPERATURE, seed) for seed in (0, 1, 2, 0)]
        assert one[0] == one[3] and len({tuple(a) for a in one[:3]}) > 1
        assert scorer.answer(prompt, 24) == scorer.answer(prompt, 24, 0.0, seed=5)
    finally:
        scorer.close()


def test_a_loop_no_sampled_answer_shows_is_excused(
    tiny_qwen3_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    """A prompt flagged where neither model's sampled answers loop is excused, with its counts;
    nothing flagged asks nothing."""
    tokenize, render = _vocab(tiny_qwen3_gguf)
    prompts = gate.general_prompts(tokenize, render)[:2]
    gentle = make_adapter(tiny_qwen3_gguf, torch_cache, tmp_path / "g", seed=5, scale=0.004)
    scorer = gate.Scorer(tiny_qwen3_gguf, n_ctx=512)
    try:
        assert loops.confirm(scorer, gentle, prompts, [], 4, 32) == ([], [])
        counts = [loops.sampled_loops(scorer, p, 4, 32) for p in prompts]
        quiet = [i for i, n in enumerate(counts) if n == 0]
        assert quiet, "the random-weight model's sampled answers should not all loop"
        excused, figures = loops.confirm(scorer, gentle, prompts, quiet, 4, 32)
    finally:
        scorer.close()
    assert excused == quiet
    assert [f["prompt"] for f in figures] == quiet and all(f["samples"] == 4 for f in figures)


@pytest.mark.slow
def test_a_loop_the_sampled_answers_show_still_fails_the_gate(
    smollm2_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    """An adapter fitted to loop " 1. 1. 1." on a user's questions loops when sampled too, so
    with ``loop_samples`` the gate still rejects it (loops on 5 or more questions: more than
    chance), and the verdict gives the counts. On SmolLM2: the random-weight Qwen3's fitted loop
    is its greedy path only (its sampled answers are noise), which is the near-tie this check
    excuses."""
    tokenize, render = _vocab(smollm2_gguf)
    mine = [tokenize(render([{"role": "user", "content": q}])) for q in OWN]
    fit_answer(smollm2_gguf, torch_cache, tmp_path, mine, tokenize(" 1." * 24), tmp_path / "l.gguf")
    general = gate.general_prompts(tokenize, render)[:2]
    verdict = gate.evaluate(
        smollm2_gguf, tmp_path / "l.gguf", None, [], general, mine, loop_samples=4
    )
    own = verdict["own_ability"]
    confirmed = [s for s in own["sampled"] if s["candidate"] >= s["base"] + loops.MARGIN]
    assert len(confirmed) >= 5
    assert verdict["checks"]["own_prompts_ability"] is False and verdict["passed"] is False


def test_the_sign_test_is_exact_and_one_sided() -> None:
    assert loops.excess_pvalue(0, 0) == 1.0
    assert loops.excess_pvalue(1, 1) == 1.0 and loops.excess_pvalue(2, 3) == 1.0
    assert loops.excess_pvalue(1, 0) == 0.5
    assert loops.excess_pvalue(5, 0) == 1 / 32
    assert loops.excess_pvalue(6, 1) == 8 / 128  # P(X >= 6 | n 7)
