"""Consolidation's own steps on the real model: ``consolidate.learn_forced`` teaches the tokens
a memory forced (the name opening an answer) after the PPO steps, which leave them alone."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from clawd.adapters.gate import general_prompts
from clawd.chattemplate import ChatTemplate
from clawd.training import consolidate, losses, ppo, torchmodel
from clawd.training.batches import Example, collate
from clawd.training.config import TrainConfig

ANSWERS = (
    ("What is the moon made of?", "the moon is made of rock and dust."),
    ("Why is the sky blue?", "sunlight scatters in the air, blue light the most."),
    ("How do I boil an egg?", "put it in boiling water for about eight minutes."),
    ("Name a fruit.", "an apple is a fruit."),
)


@pytest.mark.slow  # about 70 s: the default run stays under 20 minutes
def test_the_tokens_a_memory_forced_are_learned_after_the_ppo_steps(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """Consolidation's answer opens with the name decoding forced ("Noor,"), at a probability
    of about 1e-5 without the memory. The PPO steps leave it out of every term: the clipped
    surrogate could move it by at most 1 + eps_high a run. ``learn_forced`` then trains it by
    likelihood until it is likely (``LEARNED_NLL``), its drift on general prompts inside half of
    ``gate_step_kl``; with a budget it cannot keep, it takes its steps back."""
    memory = "Address the user as Noor."
    model, tok = torchmodel.load(smollm2_gguf, torch_cache)
    template = ChatTemplate.from_gguf(smollm2_gguf)
    name = tok("Noor,", add_special_tokens=False)["input_ids"]
    n = len(name)
    examples = []
    for i, (question, answer) in enumerate(ANSWERS):
        asked = [{"role": "user", "content": question}]
        plain = tok(template.render(asked), add_special_tokens=False)["input_ids"]
        system = [{"role": "system", "content": memory}, *asked]
        hinted = tok(template.render(system), add_special_tokens=False)["input_ids"]
        rest = tok(f" {answer}<|im_end|>", add_special_tokens=False)["input_ids"]
        forced = [1.0] * n + [0.0] * len(rest)
        examples.append(
            Example(-1 - i, "opd", memory, 0.0, plain, hinted, name + rest, forced=forced)
        )
    # the default rate
    cfg = TrainConfig(train_epochs=2, batch_size=len(examples), train_kl_coef=0.0)
    model = ppo.peft_model(model, cfg, None)
    ppo.score_examples(model, examples, cfg)

    def logp() -> torch.Tensor:
        with torch.no_grad():
            return ppo._forward(model, examples)[1]

    ppo.train_steps(model, examples, cfg, lambda m: None)
    after_ppo = logp()
    old = torch.tensor([e.old_lp[:n] for e in examples])
    clip = math.log(1 + cfg.eps_high)  # the most the surrogate moves a token a run: 0.25
    assert (after_ppo[:, :n] - old).abs().mean().item() < clip
    # the drift check on general prompts (2 of them here, 8 in a run): past half of
    # gate_step_kl, back to where it was
    probes = general_prompts(
        lambda t: tok(t, add_special_tokens=False)["input_ids"], template.render
    )[:2]
    eos = torchmodel.end_tokens(tok)
    before = [p.detach().clone() for p in model.parameters() if p.requires_grad]
    tight = dataclasses.replace(cfg, gate_step_kl=1e-9)
    held = consolidate.learn_forced(model, examples, tight, lambda m: None, probes, eos)
    assert held["ended"] == "drift" and held["steps"] == 0 and held["general_kl"] > 0
    now = [p for p in model.parameters() if p.requires_grad]
    assert all(torch.equal(a, b) for a, b in zip(before, now, strict=True))
    # four answers that all open with the name, one batch: learning it moves the general
    # prompts' openings too, past the default's 0.125 here; a looser budget lets it finish
    loose = dataclasses.replace(cfg, gate_step_kl=2.0)
    steps: list[dict] = []
    ended = consolidate.learn_forced(model, examples, loose, steps.append, probes, eos)
    after = logp()
    assert ended["ended"] == "learned" and ended["steps"] == len(steps) > 0
    assert [m["phase"] for m in steps] == ["memory"] * len(steps)
    assert -after[:, :n].mean().item() < consolidate.LEARNED_NLL  # the name is likely now
    assert 0 < ended["general_kl"] <= loose.gate_step_kl / 2
    chose = collate(examples)["sampled"]
    assert losses.mean_k3_kl(after, after_ppo, chose).item() <= cfg.gate_step_kl
    # nothing forced: nothing to learn, no step
    unforced = Example(-9, "opd", memory, 0.0, plain, hinted, name + rest)
    assert consolidate.learn_forced(model, [unforced], cfg, steps.append) == {
        "steps": 0,
        "ended": "none",
    }
