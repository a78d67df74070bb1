"""The update itself: LoRA on the policy, scoring with the pre-update weights, PPO steps.

``score_examples`` fills each example's ``old_lp`` (plain context) and ``teacher_lp`` (the hint
in context), and ``ref_lp`` (the base model, when the KL penalty is on), without gradient.
``train_steps`` then runs PPO epochs on ``clawd.training.losses``: token advantages with a
centred reward, the clipped surrogate over a constant normaliser, with ``distill_topk`` a top-k
distillation term toward the hinted teacher's likeliest tokens (``score_examples`` keeps them), a
k3 KL-to-base penalty whose coefficient adapts step by step, and a trust region: the update
stops once its KL to the pre-update weights passes ``target_kl``. It raises on a non-finite
loss or gradient.

Run alone: see ``clawd.training.run`` (this module has no state of its own).
"""

from __future__ import annotations

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
    token_advantages,
    topk_distill_loss,
)
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
            # Top-k distillation: the hinted teacher's k likeliest tokens at each position.
            top = full[len(chunk) :].topk(cfg.distill_topk, dim=-1) if cfg.distill_topk else None
        else:
            old = teacher = logprobs(model, batch, "student")
            top = None
        if cfg.kl_coef > 0:  # the base model: the penalty's reference
            with model.disable_adapter():
                ref = logprobs(model, batch, "student")
        else:
            ref = old
        for j, ex in enumerate(chunk):
            n = len(ex.response_ids)
            ex.old_lp, ex.ref_lp = old[j, :n].tolist(), ref[j, :n].tolist()
            ex.teacher_lp = teacher[j, :n].tolist() if ex.teaches else ex.old_lp
            teaches = top is not None and ex.teaches
            ex.top_ids = top.indices[j, :n].tolist() if teaches else []
            ex.top_lp = top.values[j, :n].tolist() if teaches else []


def train_steps(
    model: Any,
    examples: list[Example],
    cfg: TrainConfig,
    on_step: Callable[[dict[str, float]], None],
    kl_coef: float | None = None,
) -> dict[str, Any]:
    """PPO epochs over the scored examples; raises NonFinite on a NaN or infinite value.

    Returns how the update ended: ``stopped_early`` (the trust region ended it), ``steps``,
    ``kl_coef`` (the penalty's coefficient after adapting, for the next run to start from).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    rng = random.Random(cfg.seed)
    step = 0
    beta = cfg.kl_coef if kl_coef is None else kl_coef
    normalizer = float(cfg.batch_size * cfg.norm_tokens)
    # The reward's baseline is the run's mean reward (every example, not one batch).
    centred = centred_rewards(
        torch.tensor([e.reward for e in examples]),
        torch.tensor([1.0 if e.has_reward else 0.0 for e in examples]),
    ).tolist()
    advantage_reward = dict(zip(map(id, examples), centred, strict=True))
    for _ in range(cfg.epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        for i in range(0, len(order), cfg.batch_size):
            model.train()
            chunk = [examples[k] for k in order[i : i + cfg.batch_size]]
            batch = collate(chunk)
            mask = batch["mask"]
            t = mask.shape[1]
            reward = torch.tensor([advantage_reward[id(e)] for e in chunk], device=mask.device)
            adv = token_advantages(
                batch["teacher_lp"],
                batch["old_lp"],
                reward,
                batch["has_hint"],
                batch["has_reward"],
                mask,
                cfg.w_opd,
                cfg.w_rl,
            )
            full, targets = response_log_softmax(
                model, batch["student_ids"], batch["student_attn"], batch["student_start"], t
            )
            logp = log_probs_of(full, targets)
            distill = (  # the student's log-probs of the teacher's top-k, when it has them
                topk_distill_loss(
                    log_probs_of(full, batch["top_ids"]),
                    batch["top_lp"],
                    batch["has_top"],
                    mask,
                    normalizer,
                )
                if "top_ids" in batch
                else torch.zeros((), device=mask.device)
            )
            step_kl = mean_k3_kl(logp.detach(), batch["old_lp"], mask).item()
            if cfg.target_kl > 0 and step_kl > cfg.target_kl:
                # Trust region (PPO early stopping): this update has moved far enough.
                return {"stopped_early": True, "steps": step, "kl_coef": beta, "kl_step": step_kl}
            loss, metrics = clipped_policy_loss(
                logp, batch["old_lp"], adv, mask, normalizer, cfg.eps_low, cfg.eps_high
            )
            kl = k3_kl(logp, batch["ref_lp"], mask, normalizer)
            total = loss + beta * kl + cfg.w_opd * distill
            step += 1
            if not torch.isfinite(total):
                raise NonFinite(f"non-finite loss at step {step}")
            opt.zero_grad()
            total.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            if not torch.isfinite(grad_norm):
                raise NonFinite(f"non-finite gradient at step {step}")
            opt.step()
            n = mask.sum().clamp(min=1)
            opd = (batch["teacher_lp"] - batch["old_lp"]) * batch["has_hint"][:, None] * mask
            base_kl = mean_k3_kl(logp.detach(), batch["ref_lp"], mask).item()
            used_beta = beta
            if cfg.kl_coef > 0:
                beta = adapt_kl_coef(beta, base_kl, cfg.base_kl_target)
            on_step(
                {
                    "step": step,
                    "loss": total.item(),
                    "policy_loss": loss.item(),
                    "kl": kl.item(),
                    "distill": distill.item(),
                    "kl_base": base_kl,
                    "kl_step": step_kl,
                    "kl_coef": used_beta,
                    "adv_mean": (adv.sum() / n).item(),
                    "adv_opd": (opd.sum() / n).item(),
                    "adv_rl": ((reward * batch["has_reward"])[:, None] * mask).sum().item()
                    / n.item(),
                    "clip_fraction": metrics["clip_fraction"].item(),
                    "grad_norm": grad_norm.item(),
                    "tokens": int(n.item()),
                }
            )
    return {"stopped_early": False, "steps": step, "kl_coef": beta}
