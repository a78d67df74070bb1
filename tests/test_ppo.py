"""The PPO update on the real model: what ``ppo.train_steps`` teaches a hinted sample."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from clawd.chattemplate import ChatTemplate, teacher_messages
from clawd.training import losses, ppo, torchmodel
from clawd.training.batches import Example
from clawd.training.config import TrainConfig


def _contexts(gguf: Path, tok: Any, question: str, hint: str) -> tuple[list[int], list[int]]:
    """The plain and the hinted prompt tokens of a one-turn conversation."""
    template = ChatTemplate.from_gguf(gguf)
    msgs = [{"role": "user", "content": question}]
    plain = tok(template.render(msgs), add_special_tokens=False)["input_ids"]
    hinted = tok(template.render(teacher_messages(msgs, hint)), add_special_tokens=False)
    return plain, hinted["input_ids"]


def _landing(
    gguf: Path, cache: Path, max_halvings: int, lr: float = 1e-2, kept: list | None = None
) -> tuple[dict, float, list[dict]]:
    """Train one sample at a learning rate far too large for the trust region (0.05); return
    how the update ended, the KL to the pre-update weights where it ended, and its steps.
    ``kept`` gets (state, LoRA weights) at each ``on_kept`` call."""
    model, tok = torchmodel.load(gguf, cache)
    hint = "Answer in one sentence."
    plain, hinted = _contexts(gguf, tok, "What is the moon made of?", hint)
    served = "The moon is made of rock, dust and a little ice, and it has no air.<|im_end|>"
    response = tok(served, add_special_tokens=False)["input_ids"]
    cfg = TrainConfig(
        train_lr=lr,
        train_epochs=4,
        batch_size=1,
        train_target_kl=0.05,
        train_kl_coef=0.0,
        max_halvings=max_halvings,
    )
    model = ppo.peft_model(model, cfg, None)
    example = Example(1, "opd+rl", hint, -1.0, plain, hinted, response)
    ppo.score_examples(model, [example], cfg)
    steps: list[dict] = []

    def keep(state: dict) -> None:
        lora = [p.detach().clone() for p in model.parameters() if p.requires_grad]
        kept.append((state, torch.cat([p.flatten() for p in lora])))

    ended = ppo.train_steps(
        model, [example], cfg, steps.append, on_kept=keep if kept is not None else None
    )
    with torch.no_grad():
        _, logp = ppo.forward(model, [example])
    kl = losses.mean_k3_kl(logp, torch.tensor([example.old_lp]), torch.ones_like(logp)).item()
    return ended, kl, steps


def test_a_step_that_overshoots_the_trust_region_is_undone_and_retaken_smaller(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """Adam's first step moves every weight by about lr: at lr 1e-2 it lands far past a trust
    region of 0.05 nats per token. Without undoing, the update keeps that step; with it, the
    step is taken back and retaken at half the rate until it lands within 2 x target_kl."""
    kept, kl_kept, _ = _landing(smollm2_gguf, torch_cache, max_halvings=0)
    assert kept["undone"] == 0 and kept["stopped_early"] and kl_kept > 2 * 0.05
    ended, kl, steps = _landing(smollm2_gguf, torch_cache, max_halvings=12)
    assert ended["undone"] >= 1 and ended["lr"] == 1e-2 / 2 ** ended["undone"]
    assert ended["steps"] >= 1 and kl <= 2 * 0.05  # it ended inside the allowance
    assert [s["lr"] for s in steps][-1] == ended["lr"]  # the kept step was taken at that rate


def test_a_kept_point_is_the_weights_its_steps_reached_never_a_step_taken_back(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """``on_kept`` (what the walk-back keeps) reports a step count only once the trust region
    lets the next step follow; after an undone step the same count comes again, with the same
    weights, never with the weights of the step taken back."""
    kept: list = []
    ended, _, _ = _landing(smollm2_gguf, torch_cache, max_halvings=12, lr=8e-4, kept=kept)
    assert ended["undone"] >= 1 and kept
    counts = [state["steps"] for state, _ in kept]
    assert counts == sorted(counts) and 1 <= counts[0] and counts[-1] <= ended["steps"]
    first: dict[int, torch.Tensor] = {}
    for state, weights in kept:
        assert torch.equal(first.setdefault(state["steps"], weights), weights)
    # Here (2 cores) 4 steps were undone and count 1 came twice, with the same weights; how
    # often it comes depends on the numbers, the rule above on nothing.


def test_the_opd_baseline_centres_the_hints_signal_on_the_models_own_answers(
    smollm2_gguf: Path, torch_cache: Path
) -> None:
    """With ``opd_baseline`` the served answer's OPD term is taken relative to -KL(student ||
    teacher) at each position, measured on the real model; without it, the plain term."""
    model, tok = torchmodel.load(smollm2_gguf, torch_cache)
    hint = "Answer in one sentence."
    plain, hinted = _contexts(smollm2_gguf, tok, "How do I boil an egg?", hint)
    served = tok(
        "Put the egg in boiling water for eight minutes, then cool it in cold water.<|im_end|>",
        add_special_tokens=False,
    )["input_ids"]
    cfg = TrainConfig(
        train_lr=1e-4, train_epochs=1, batch_size=2, train_kl_coef=0.0, train_opd_baseline=True
    )
    model = ppo.peft_model(model, cfg, None)
    own = Example(1, "opd", hint, 0.0, plain, hinted, served)
    ppo.score_examples(model, [own], cfg)
    assert len(own.opd_base) == len(served)
    assert all(b <= 1e-6 for b in own.opd_base) and min(own.opd_base) < -0.01  # -KL per position
    opd = [t - o for t, o in zip(own.teacher_lp, own.old_lp, strict=True)]
    reported = own.report(tok)["opd_advantage"]
    centred = [a - b for a, b in zip(opd, own.opd_base, strict=True)]
    assert reported == [round(a, 4) for a in centred]
    steps: list[dict] = []
    ppo.train_steps(model, [own], cfg, steps.append)
    assert steps and all(torch.isfinite(torch.tensor(s["adv_opd"])) for s in steps)
    off = Example(1, "opd", hint, 0.0, plain, hinted, served)
    ppo.score_examples(
        model, [off], TrainConfig(batch_size=1, train_kl_coef=0.0, train_opd_baseline=False)
    )
    assert off.opd_base == []
