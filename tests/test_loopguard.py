"""The loop guard on the real model: greedy answers checked incrementally, and an update whose
steps would make an answer loop taken back to where it does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from adapters.gate import general_prompts
from adapters.loops import degeneration
from clawd.chattemplate import ChatTemplate
from clawd.training import ppo, torchmodel
from clawd.training.batches import Example
from clawd.training.config import TrainConfig
from clawd.training.loopguard import LoopGuard, greedy_answers

Q = "What is the moon made of?"


def _setup(
    gguf: Path, cache: Path, cfg: TrainConfig
) -> tuple[Any, Any, list[list[int]], list[int]]:
    """A fresh LoRA model, its tokenizer, [Q] + 3 general prompts, the end-of-turn ids."""
    model, tok = torchmodel.load(gguf, cache)  # a copy of its own: LoRA goes in place
    render = ChatTemplate.from_gguf(gguf).render

    def tokenize(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    prompts = [tokenize(render([{"role": "user", "content": Q}]))]
    prompts += general_prompts(tokenize, render)[:3]
    return ppo.peft_model(model, cfg, None), tok, prompts, [tok.convert_tokens_to_ids("<|im_end|>")]


def test_checked_answers_are_the_greedy_answers(smollm2_gguf: Path, torch_cache: Path) -> None:
    """Answers a step ago are checked in one teacher-forced pass: unchanged weights rewrite
    none; nudged weights rewrite only those that changed, and the result is what writing every
    answer anew gives."""
    model, _, prompts, eos = _setup(smollm2_gguf, torch_cache, TrainConfig())
    prompts = prompts[:2]
    model.eval()
    before, written = greedy_answers(model, prompts, 64, eos)
    assert written == len(prompts) and all(0 < len(a) <= 64 for a in before)
    same, rewritten = greedy_answers(model, prompts, 64, eos, previous=before)
    assert same == before and rewritten == 0
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.add_(torch.randn_like(p) * 3e-3)
    checked, rewritten = greedy_answers(model, prompts, 64, eos, previous=before)
    anew, _ = greedy_answers(model, prompts, 64, eos)
    assert checked == anew
    changed = sum(a != b for a, b in zip(before, anew, strict=True))
    assert rewritten == changed and changed >= 1  # measured: both moved at this nudge


def _loop_update(gguf: Path, cache: Path, guarded: bool) -> tuple[dict, list[int], list[int], Any]:
    """Rewards that favour " 1. 1. 1. ..." over a sound answer to Q, at a rate that makes the
    greedy answer loop within a few steps; returns how the update ended, the greedy answer to Q
    before and after, and the tokenizer."""
    cfg = TrainConfig(lr=1e-2, epochs=4, batch_size=2, target_kl=0.0, kl_coef=0.0, w_opd=0.0)
    model, tok, prompts, eos = _setup(gguf, cache, cfg)
    loop = tok(" 1." * 24 + "<|im_end|>", add_special_tokens=False)["input_ids"]
    sound = tok("Rock and dust.<|im_end|>", add_special_tokens=False)["input_ids"]
    q = prompts[0]
    examples = [Example(1, "rl", None, 1.0, q, q, loop), Example(2, "rl", None, -1.0, q, q, sound)]
    ppo.score_examples(model, examples, cfg)
    model.eval()
    start, _ = greedy_answers(model, [q], 64, eos)
    guard = LoopGuard(model, prompts, 64, eos) if guarded else None
    ended = ppo.train_steps(model, examples, cfg, lambda _: None, guard=guard)
    model.eval()
    end, _ = greedy_answers(model, [q], 64, eos)
    return ended, start[0], end[0], guard


@pytest.mark.slow
def test_a_step_that_makes_an_answer_loop_is_undone(smollm2_gguf: Path, torch_cache: Path) -> None:
    """Without the guard the rewards teach the loop: the greedy answer to Q degenerates. With it,
    each step that makes an answer degenerate is taken back and retaken at half the rate, and
    the update ends where no answer loops that did not at its start (here, 2 cores: 5 steps
    taken back, the last loop on a general prompt, " 1. 1. 1." spreading; about 90 s)."""

    def loops(answer: list[int], eos: int) -> bool:
        return degeneration([answer], lambda t: t == eos)["at"] == [0]

    end_token = torchmodel.load(smollm2_gguf, torch_cache)[1].convert_tokens_to_ids("<|im_end|>")
    ended, start, free, _ = _loop_update(smollm2_gguf, torch_cache, guarded=False)
    assert not loops(start, end_token) and loops(free, end_token)
    assert "looped" not in ended  # no guard, nothing reported
    ended, _, kept, guard = _loop_update(smollm2_gguf, torch_cache, guarded=True)
    assert ended["looped"] >= 1 and ended["undone"] >= ended["looped"]
    assert not loops(kept, end_token)
    assert guard.check() is None  # where it ended, no prompt loops that did not at the start
    report = guard.report()
    assert report["prompts"] == 4 and report["checks"] >= ended["steps"] + ended["looped"]
    if ended["stopped_early"]:  # out of retakes: it says which prompt and answer looped
        assert ended["loop"]["prompt"] in range(4) and ended["loop"]["answer"]
