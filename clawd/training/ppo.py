"""The update itself: LoRA on the policy, scoring with the pre-update weights, PPO steps.

``score_examples`` fills each example's ``old_lp`` (plain context) and ``teacher_lp`` (the hint
in context), and ``ref_lp`` (the base model, when the KL penalty is on), without gradient.
``train_steps`` then runs PPO epochs on ``clawd.training.losses``: token advantages with a
centred reward, the clipped surrogate over a constant normaliser, a k3 KL-to-base penalty whose
coefficient adapts step by step, with ``train_unlikelihood`` a term against repeated
phrases (``clawd.training.repeats``), and a trust region: the update stops once its KL to the
pre-update weights passes ``train_target_kl``, and a step that lands past ``overshoot`` times
it is undone and retaken at half the rate. It raises on a non-finite loss or gradient. The tokens
decoding forced for a memory (``Example.forced``) are left out of every term here:
``clawd.training.consolidate.learn_forced`` trains them after these steps.

Run alone: see ``clawd.training.train`` (this module has no state of its own).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from clawd.training.batches import Example, collate
from clawd.training.config import TrainConfig
from clawd.training.losses import (
    adapt_kl_coef,
    centred_rewards,
    clipped_policy_loss,
    k3_kl,
    mean_k3_kl,
    opd_kl_baseline,
    token_advantages,
    unlikelihood_loss,
)
from clawd.training.repeats import Repeat, collate_repeats
from clawd.training.torchmodel import log_probs_of, response_log_softmax, token_logprobs

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class NonFinite(Exception):
    """A loss or gradient became NaN or infinite."""


def peft_model(model: Any, cfg: TrainConfig, warm_start: Path | None) -> Any:
    from peft import LoraConfig, PeftModel, get_peft_model

    if warm_start is not None:
        return PeftModel.from_pretrained(model, warm_start, is_trainable=True)
    config = LoraConfig(
        r=cfg.rank,
        lora_alpha=cfg.alpha,
        lora_dropout=0.0,
        bias="none",
        use_rslora=False,
        target_modules=list(TARGETS),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def logprobs(model: Any, batch: dict[str, torch.Tensor], side: str) -> torch.Tensor:

    return token_logprobs(
        model,
        batch[f"{side}_ids"],
        batch[f"{side}_attn"],
        batch[f"{side}_start"],
        batch["mask"].shape[1],
    )


@torch.inference_mode()
def score_examples(model: Any, examples: list[Example], cfg: TrainConfig) -> None:
    """Fill old_lp, teacher_lp and ref_lp of each example with the pre-update weights."""

    model.eval()
    for i in range(0, len(examples), cfg.batch_size):
        chunk = examples[i : i + cfg.batch_size]
        batch = collate(chunk)
        t = batch["mask"].shape[1]
        if batch["has_hint"].any():  # student and teacher views in one forward pass
            width = max(batch["student_ids"].shape[1], batch["teacher_ids"].shape[1])

            def widen(x: torch.Tensor, width: int = width) -> torch.Tensor:
                return torch.nn.functional.pad(x, (0, width - x.shape[1]))

            full, targets = response_log_softmax(
                model,
                torch.cat([widen(batch["student_ids"]), widen(batch["teacher_ids"])]),
                torch.cat([widen(batch["student_attn"]), widen(batch["teacher_attn"])]),
                torch.cat([batch["student_start"], batch["teacher_start"]]),
                t,
            )
            both = log_probs_of(full, targets)
            old, teacher = both[: len(chunk)], both[len(chunk) :]
            base = (
                opd_kl_baseline(full[: len(chunk)], full[len(chunk) :])
                if cfg.train_opd_baseline
                else None
            )
        else:
            old = teacher = logprobs(model, batch, "student")
            base = None
        if cfg.train_kl_coef > 0:  # the base model: the penalty's reference
            with model.disable_adapter():
                ref = logprobs(model, batch, "student")
        else:
            ref = old
        for j, ex in enumerate(chunk):
            n = len(ex.response_ids)
            ex.old_lp, ex.ref_lp = old[j, :n].tolist(), ref[j, :n].tolist()
            ex.teacher_lp = teacher[j, :n].tolist() if ex.teaches else ex.old_lp
            # The expectation over the student's next token; consolidation's answers, which the
            # teacher wrote, take it too (as measured: docs/benchmarks.md, "Consolidation").
            ex.opd_base = base[j, :n].tolist() if base is not None and ex.teaches else []


def train_steps(
    model: Any,
    examples: list[Example],
    cfg: TrainConfig,
    on_step: Callable[[dict[str, float]], None],
    kl_coef: float | None = None,
    on_kept: Callable[[dict[str, Any]], None] | None = None,
    repeats: list[Repeat] | None = None,
) -> dict[str, Any]:
    """PPO epochs over the scored examples; raises NonFinite on a NaN or infinite value.

    The trust region: before each step the KL to the pre-update weights is measured on the
    coming batch; past ``train_target_kl`` the update stops. Adam's first step moves every
    parameter by about ``train_lr`` whatever its gradient (``train_lr * g / |g|``), so one step
    can land far past the region; a step that lands past ``overshoot * train_target_kl`` is
    undone and taken again at half the learning rate, at most ``max_halvings`` times, then the
    update stops inside or just past the region instead of wherever one step threw it.

    With ``cfg.train_unlikelihood`` each step also pushes down, by unlikelihood, the tokens of
    its batch that repeat an earlier 4-gram of their answer and those of ``batch_size`` of the
    ``repeats`` (greedy answers of the starting weights, taken in turn).

    ``on_step`` gets every step taken, numbered in order, undone ones too; ``on_kept`` gets the
    state after each kept step that the trust region let the next one follow (``steps``, ``lr``,
    ``kl_coef``, ...; a count may come twice, after an undone step, with the same weights), so
    that the caller can keep the weights of earlier points. Returns how the update
    ended: ``stopped_early`` (the trust region ended it), ``steps`` (steps kept), ``undone``
    (steps taken back), ``lr`` (the rate it ended at), ``kl_coef`` (the penalty's coefficient
    after adapting, for the next run to start from).
    """
    region = _Region([p for p in model.parameters() if p.requires_grad], cfg, kl_coef)
    normalizer = float(cfg.batch_size * cfg.norm_tokens)
    # The reward's baseline is the run's mean reward (every example, not one batch).
    centred = centred_rewards(
        torch.tensor([e.reward for e in examples]),
        torch.tensor([1.0 if e.has_reward else 0.0 for e in examples]),
    ).tolist()
    advantage_reward = dict(zip(map(id, examples), centred, strict=True))
    batches = _schedule(examples, cfg)
    i = 0
    while i <= len(batches):
        if i == len(batches):  # after the last step: where did it land, on its own batch?
            if region.saved is None or cfg.train_target_kl <= 0:
                break
            with torch.no_grad():
                batch, logp = forward(model, batches[-1])
        else:
            model.train()
            batch, logp = forward(model, batches[i])
        mask = batch["sampled"]  # the tokens a memory forced train after (learn_forced)
        step_kl = mean_k3_kl(logp.detach(), batch["old_lp"], mask).item()
        if cfg.train_target_kl > 0 and step_kl > cfg.train_target_kl:
            if region.overshot(step_kl):
                # The last step overshot the region: take it back and retake it at half the rate.
                region.undo()
                region.halve()
                i -= 1
                continue
            if i < len(batches):
                return region.ended(True, step_kl)  # Trust region (PPO early stopping).
        if i == len(batches):
            return region.ended(False, step_kl)
        if on_kept is not None and region.step > 0:
            on_kept(region.ended(False))
        reward = torch.tensor([advantage_reward[id(e)] for e in batches[i]], device=mask.device)
        extra = None
        if repeats and cfg.train_unlikelihood > 0:
            extra = _repeats_loss(model, repeats, region.taken, cfg, normalizer)
        total, parts = _step_loss(logp, batch, reward, region.beta, cfg, normalizer, extra)
        region.step, region.taken = region.step + 1, region.taken + 1
        if not torch.isfinite(total):
            raise NonFinite(f"non-finite loss at step {region.taken}")
        if cfg.train_target_kl > 0:
            region.save()  # what an undone step goes back to
        region.opt.zero_grad()
        total.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(region.params, cfg.grad_clip)
        if not torch.isfinite(grad_norm):
            raise NonFinite(f"non-finite gradient at step {region.taken}")
        region.opt.step()
        i += 1
        used_beta = region.beta
        if cfg.train_kl_coef > 0:
            region.beta = adapt_kl_coef(region.beta, parts["kl_base"], cfg.gate_max_kl)
        on_step(
            {
                "step": region.taken,
                "loss": total.item(),
                **parts,
                "kl_step": step_kl,
                "kl_coef": used_beta,
                "lr": region.lr,
                "grad_norm": grad_norm.item(),
            }
        )
    return region.ended(False)


class _Region:
    """The optimiser of an update and its trust region's bookkeeping: the rate, the KL
    penalty's coefficient, the weights before the last step (to undo it) and the counts of
    steps kept, taken back and taken."""

    def __init__(self, params: list[torch.Tensor], cfg: TrainConfig, beta: float | None) -> None:
        self.params, self.cfg = params, cfg
        self.opt = torch.optim.AdamW(params, lr=cfg.train_lr, weight_decay=0.0)
        self.lr = cfg.train_lr
        self.beta = cfg.train_kl_coef if beta is None else beta
        self.step = self.undone = self.taken = 0
        self.saved: tuple[list[torch.Tensor], dict[str, Any], float] | None = None

    def ended(self, stopped: bool, kl_step: float | None = None) -> dict[str, Any]:
        out = {
            "stopped_early": stopped,
            "steps": self.step,
            "undone": self.undone,
            "lr": self.lr,
            "kl_coef": self.beta,
        }
        return out if kl_step is None else {**out, "kl_step": kl_step}

    def overshot(self, step_kl: float) -> bool:
        """Whether the last step landed past ``overshoot`` x the region and may be retaken."""
        cfg = self.cfg
        far = step_kl > cfg.overshoot * cfg.train_target_kl
        return far and self.saved is not None and self.undone < cfg.max_halvings

    def save(self) -> None:
        values = [p.detach().clone() for p in self.params]
        self.saved = (values, copy.deepcopy(self.opt.state_dict()), self.beta)

    def undo(self) -> None:
        """Back to the weights before the last step."""
        assert self.saved is not None
        values, state, self.beta = self.saved
        with torch.no_grad():
            for p, v in zip(self.params, values, strict=True):
                p.copy_(v)
        self.opt.load_state_dict(state)
        self.step, self.undone, self.saved = self.step - 1, self.undone + 1, None

    def halve(self) -> None:
        self.lr /= 2
        for group in self.opt.param_groups:
            group["lr"] = self.lr


def _schedule(examples: list[Example], cfg: TrainConfig) -> list[list[Example]]:
    """The update's batches: each epoch the examples in a new order (seeded), cut into
    ``batch_size``."""
    rng = random.Random(cfg.seed)
    batches: list[list[Example]] = []
    for _ in range(cfg.train_epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        batches += [
            [examples[k] for k in order[i : i + cfg.batch_size]]
            for i in range(0, len(order), cfg.batch_size)
        ]
    return batches


def _step_loss(
    logp: torch.Tensor,
    batch: dict[str, torch.Tensor],
    reward: torch.Tensor,
    beta: float,
    cfg: TrainConfig,
    normalizer: float,
    repeats_loss: torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """One step's loss: the clipped surrogate on token advantages, ``beta`` x the k3 KL to
    the base model and the unlikelihood of repeats (``repeats_loss``: the starting weights' own
    loops, added to the batch's), all on the sampled tokens (not those a memory forced).
    Returns the loss and its parts, detached."""
    mask = batch["sampled"]
    adv = token_advantages(
        batch["teacher_lp"],
        batch["old_lp"],
        reward,
        batch["has_hint"],
        batch["has_reward"],
        mask,
        cfg.w_opd,
        cfg.w_rl,
        batch["opd_base"],
    )
    loss, metrics = clipped_policy_loss(
        logp, batch["old_lp"], adv, mask, normalizer, cfg.eps_low, cfg.eps_high
    )
    kl = k3_kl(logp, batch["ref_lp"], mask, normalizer)
    marked = batch["repeated"] * mask
    unlikely = torch.zeros((), device=mask.device)
    if cfg.train_unlikelihood > 0:
        unlikely = unlikelihood_loss(logp, marked, normalizer)
        if repeats_loss is not None:
            unlikely = unlikely + repeats_loss
    total = loss + beta * kl + cfg.train_unlikelihood * unlikely
    n = mask.sum().clamp(min=1)
    opd = batch["teacher_lp"] - batch["old_lp"] - batch["opd_base"]
    opd = opd * batch["has_hint"][:, None] * mask
    return total, {
        "policy_loss": loss.item(),
        "kl": kl.item(),
        "unlikelihood": unlikely.item(),
        "repeated": int(marked.sum().item()),
        "kl_base": mean_k3_kl(logp.detach(), batch["ref_lp"], mask).item(),
        "adv_mean": (adv.sum() / n).item(),
        "clip_fraction": metrics["clip_fraction"].item(),
        "adv_opd": (opd.sum() / n).item(),
        "adv_rl": ((reward * batch["has_reward"])[:, None] * mask).sum().item() / n.item(),
        "tokens": int(n.item()),
    }


def _repeats_loss(
    model: Any, repeats: list[Repeat], taken: int, cfg: TrainConfig, normalizer: float
) -> torch.Tensor:
    """The unlikelihood of the repeating tokens of ``batch_size`` of the ``repeats``, the
    ``taken``-th such batch in turn (so that every answer comes up as the steps go on)."""
    size = min(cfg.batch_size, len(repeats))
    first = taken * size
    chunk = [repeats[(first + k) % len(repeats)] for k in range(size)]
    device = next(model.parameters()).device
    rb = collate_repeats(chunk, device)
    logp = token_logprobs(model, rb["ids"], rb["attn"], rb["start"], rb["marked"].shape[1])
    return unlikelihood_loss(logp, rb["marked"], normalizer)


def forward(model: Any, chunk: list[Example]) -> tuple[dict[str, Any], torch.Tensor]:
    """One batch through the weights being trained: the collated batch and the log-probs of the
    served tokens (B, T)."""
    batch = collate(chunk)
    return batch, logprobs(model, batch, "student")
