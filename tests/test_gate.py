"""The promotion gate (``clawd/adapters/gate.py``): drift, general ability and their verdicts, on
the real tiny models and on token lists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawd.adapters import gate
from fixtures.adapterkit import fit_answer, make_adapter

Q = [{"role": "user", "content": "Tell me something about the sea."}]
OWN = [
    "Tell me something about the sea.",
    "How do I fix a flat bicycle tyre?",
    "What should I cook tonight?",
    "Explain recursion to a child.",
    "Plan a day trip near the mountains.",
    "How do I learn to juggle?",
    "What is a good name for a goldfish?",
]


def _vocab(gguf: Path) -> tuple[Any, Any]:
    from llama_cpp import Llama

    from clawd.chattemplate import ChatTemplate

    vocab = Llama(str(gguf), vocab_only=True, verbose=False)

    def tokenize(text: str) -> list[int]:
        return vocab.tokenize(text.encode(), add_bos=False, special=True)

    return tokenize, ChatTemplate.from_gguf(gguf).render


@pytest.mark.parametrize("model", ["qwen3", pytest.param("smollm2", marks=pytest.mark.slow)])
def test_the_gate_accepts_a_gentle_adapter_and_rejects_a_drifting_one(
    model: str, request: pytest.FixtureRequest, torch_cache: Path, tmp_path: Path
) -> None:
    # On SmolLM2 (32 greedy answers, about 2 minutes) with the slow tests.
    any_gguf = request.getfixturevalue("smollm2_gguf" if model == "smollm2" else "tiny_qwen3_gguf")
    tokenize, render = _vocab(any_gguf)
    prompts = gate.general_prompts(tokenize, render)
    assert len(prompts) >= 32
    prompt = tokenize(render(Q))
    held = [gate.HeldOut(prompt, prompt, tokenize("The sea is big."), -1.0, True, True)] * 4
    gentle = make_adapter(any_gguf, torch_cache, tmp_path / "g", seed=5, scale=0.004)
    wild = make_adapter(any_gguf, torch_cache, tmp_path / "w", seed=6, scale=0.3)
    cache = tmp_path / "cache.json"
    # The random-weight model answers noise, which a nudge may turn into a loop by chance. On
    # SmolLM2 this nudge (KL 0.004) moves one loop: "How do I boil an egg?" gets "Boil an
    # egg:\n\nBoil an egg: ..." and the base model's own "10 kilometres ... 1000000..." goes away;
    # the gate decides on the rate of loops, so a moved loop passes (docs/benchmarks.md, "The
    # gate on rates").
    ok = gate.evaluate(any_gguf, gentle, None, held, prompts, [prompt], max_kl=0.5, cache=cache)
    assert ok["checks"]["drift_under_limit"] and ok["kl_to_base"] < 0.5
    assert ok["checks"]["step_under_limit"] and ok["kl_to_parent"] == ok["kl_to_base"]
    assert ok["checks"]["general_ability"] and ok["checks"]["own_prompts_ability"]
    assert ok["skipped"] == []
    assert ok["before"]["reward_logprob"] is not None and ok["after"]["opd_gap"] is not None
    assert cache.exists()  # the base model's answers are computed once
    few = prompts[:8]  # the same checks on fewer prompts, to keep the test short
    bad = gate.evaluate(any_gguf, wild, None, held, few, max_kl=0.5, cache=tmp_path / "c8.json")
    assert bad["passed"] is False and bad["checks"]["drift_under_limit"] is False
    # Against a parent: the step is measured from it, the budget from the base model.
    step = gate.evaluate(
        any_gguf, wild, wild, held[:1], few, max_kl=100, cache=tmp_path / "c8.json"
    )
    assert step["kl_to_parent"] < 1e-6 < step["kl_to_base"] and step["checks"]["step_under_limit"]
    assert "opd_gap_shrinks" not in step["checks"] and "held-out" in step["skipped"][0]


@pytest.mark.slow
def test_the_gate_rejects_an_adapter_that_says_the_same_to_everyone(
    tiny_qwen3_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    """A LoRA fitted to answer every prompt with one apology: the collapse seen in a held-out
    run ("I'm sorry, I'm sorry for what I can't help you with...") is caught by the
    general-ability check whatever the KL says."""

    tokenize, render = _vocab(tiny_qwen3_gguf)
    sorry = tokenize("I am sorry, I am sorry.")
    rows = [tokenize(render([{"role": "user", "content": q}])) for q in gate.GENERAL]
    fit_answer(tiny_qwen3_gguf, torch_cache, tmp_path, rows, sorry, tmp_path / "sorry.gguf")
    prompts = gate.general_prompts(tokenize, render)
    verdict = gate.evaluate(tiny_qwen3_gguf, tmp_path / "sorry.gguf", None, [], prompts, max_kl=1e9)
    assert verdict["checks"]["drift_under_limit"]  # a budget this loose would let it through
    assert verdict["checks"]["general_ability"] is False and verdict["passed"] is False
    ability = verdict["ability"]
    assert ability["candidate"]["distinct"] < ability["base"]["distinct"] - 0.25
    assert all("sorry" in a for a in verdict["answers"])


@pytest.mark.slow
def test_the_gate_asks_the_users_own_prompts_too(
    tiny_qwen3_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    """A served adapter looped ("1. 1. 1. ...") on a user's questions and on none of the general
    prompts (docs/experiments.md, "The ability check on the user's own prompts"): the same check
    runs on the prompts of the run's samples, against the base model's answers to them. One
    loop is within chance; a loop on 5 or more questions the base model answers is not."""
    tokenize, render = _vocab(tiny_qwen3_gguf)
    mine = [tokenize(render([{"role": "user", "content": q}])) for q in OWN]
    fit_answer(
        tiny_qwen3_gguf, torch_cache, tmp_path, mine, tokenize(" 1." * 24), tmp_path / "l.gguf"
    )
    general = gate.general_prompts(tokenize, render)[:2]
    verdict = gate.evaluate(tiny_qwen3_gguf, tmp_path / "l.gguf", None, [], general, mine)
    own = verdict["own_ability"]
    new = sorted(set(own["candidate"]["at"]) - set(own["base"]["at"]))
    assert len(new) >= 5 and len(own["base"]["at"]) <= 2  # the random model loops on a few
    assert verdict["checks"]["own_prompts_ability"] is False and verdict["passed"] is False
    assert [d["prompt"] for d in own["new_degenerate"]] == new
    assert own["new_degenerate"][0]["answer"].count("1.") >= 8
    assert "user's prompts" not in " ".join(verdict["skipped"])
    first = [mine[new[0]]]
    one = gate.evaluate(tiny_qwen3_gguf, tmp_path / "l.gguf", None, [], general, first)
    assert one["own_ability"]["candidate"]["at"] == [0] and one["checks"]["own_prompts_ability"]
    # Without the user's prompts the check is reported as skipped, never as passed.
    alone = gate.evaluate(tiny_qwen3_gguf, tmp_path / "l.gguf", None, [], general)
    assert "own_prompts_ability" not in alone["checks"] and alone["own_ability"] == {}
    assert "ability on the user's prompts: no prompts" in alone["skipped"]
