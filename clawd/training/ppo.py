"""The update itself: LoRA on the policy, scoring with the pre-update weights, PPO steps.

``score_examples`` fills each example's ``old_lp`` (plain context) and ``teacher_lp`` (the hint
in context), and ``ref_lp`` (the base model, when a KL penalty is on), without gradient.
``train_steps`` then runs PPO epochs on ``clawd.training.losses``: token advantages, the
clipped surrogate over a constant normaliser, the optional k3 KL; it stops on a non-finite loss
or gradient.

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
from clawd.training.losses import clipped_policy_loss, k3_kl, token_advantages
from clawd.training.torchmodel import token_logprobs

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

            both = token_logprobs(
                model,
                torch.cat([widen(batch["student_ids"]), widen(batch["teacher_ids"])]),
                torch.cat([widen(batch["student_attn"]), widen(batch["teacher_attn"])]),
                torch.cat([batch["student_start"], batch["teacher_start"]]),
                t,
            )
            old, teacher = both[: len(chunk)], both[len(chunk) :]
        else:
            old = teacher = logprobs(model, batch, "student")
        if cfg.kl_coef > 0:
            with model.disable_adapter():
                ref = logprobs(model, batch, "student")
        else:
            ref = old
        for j, ex in enumerate(chunk):
            n = len(ex.response_ids)
            ex.old_lp, ex.ref_lp = old[j, :n].tolist(), ref[j, :n].tolist()
            ex.teacher_lp = teacher[j, :n].tolist() if ex.hint else ex.old_lp


def train_steps(
    model: Any,
    examples: list[Example],
    cfg: TrainConfig,
    on_step: Callable[[dict[str, float]], None],
) -> None:
    """PPO epochs over the scored examples; raises NonFinite on a NaN or infinite value."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    rng = random.Random(cfg.seed)
    step = 0
    normalizer = float(cfg.batch_size * cfg.norm_tokens)
    for _ in range(cfg.epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        for i in range(0, len(order), cfg.batch_size):
            model.train()
            batch = collate([examples[k] for k in order[i : i + cfg.batch_size]])
            mask = batch["mask"]
            adv = token_advantages(
                batch["teacher_lp"],
                batch["old_lp"],
                batch["reward"],
                batch["has_hint"],
                batch["has_reward"],
                mask,
                cfg.w_opd,
                cfg.w_rl,
            )
            logp = logprobs(model, batch, "student")
            loss, metrics = clipped_policy_loss(
                logp, batch["old_lp"], adv, mask, normalizer, cfg.eps_low, cfg.eps_high
            )
            kl = k3_kl(logp, batch["ref_lp"], mask, normalizer)
            total = loss + cfg.kl_coef * kl
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
            on_step(
                {
                    "step": step,
                    "loss": total.item(),
                    "policy_loss": loss.item(),
                    "kl": kl.item(),
                    "adv_mean": (adv.sum() / n).item(),
                    "adv_opd": (opd.sum() / n).item(),
                    "adv_rl": ((batch["reward"] * batch["has_reward"])[:, None] * mask).sum().item()
                    / n.item(),
                    "clip_fraction": metrics["clip_fraction"].item(),
                    "grad_norm": grad_norm.item(),
                    "tokens": int(n.item()),
                }
            )
