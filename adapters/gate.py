"""The promotion gate: a candidate adapter must beat the current one before it serves.

Measured in llama.cpp, the runtime that serves, on samples the training run held out:

- **OPD gap**: mean |teacher_lp - student_lp| over the response tokens of hinted samples, the
  distance the hint still makes; it must not grow (it should shrink);
- **reward-weighted log-prob**: mean of ``r x mean_t student_lp`` over rewarded samples; it must
  not fall (liked answers more likely, disliked ones less);
- **drift**: mean per-token KL(candidate || base) of the next-token distributions over fixed
  general conversations; it must stay under ``max_kl`` (a guard against forgetting).

With no held-out sample of a kind that check is skipped and says so. The verdict and every
figure go into the manifest.

Run alone::

    python -m adapters.gate BASE.gguf CANDIDATE.gguf [CURRENT.gguf]
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

GENERAL = [
    (
        "What is the boiling point of water at sea level?",
        "Water boils at 100 degrees Celsius (212 degrees Fahrenheit) at sea level.",
    ),
    ("Write a Python function that adds two numbers.", "def add(a, b):\n    return a + b"),
    (
        "Give me a tip for sleeping better.",
        "Keep a regular schedule: go to bed and get up at the same time every day.",
    ),
    ("Translate 'good morning' into French.", "Bonjour."),
]


@dataclass(frozen=True)
class HeldOut:
    prompt_ids: list[int]
    teacher_prompt_ids: list[int]
    response_ids: list[int]
    reward: float
    has_hint: bool
    has_reward: bool


class Scorer:
    """One llama.cpp context with all logits kept; adapters switched on it in place."""

    def __init__(self, model_path: Path, n_ctx: int = 2048) -> None:
        from llama_cpp import Llama

        self.llm = Llama(str(model_path), n_ctx=n_ctx, logits_all=True, verbose=False)
        self._adapter: Any = None

    def set_adapter(self, path: Path | None) -> None:
        import llama_cpp

        ctx = self.llm._ctx.ctx
        new = None
        if path is not None:
            new = llama_cpp.llama_adapter_lora_init(self.llm.model, str(path).encode())
            if not new:
                raise ValueError(f"llama.cpp could not load {path}")
            arr = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(new)
            llama_cpp.llama_set_adapters_lora(ctx, arr, 1, (ctypes.c_float * 1)(1.0))
        else:
            llama_cpp.llama_set_adapters_lora(ctx, None, 0, None)
        if self._adapter is not None:
            llama_cpp.llama_adapter_lora_free(self._adapter)
        self._adapter = new
        self.llm.reset()
        self.llm._ctx.kv_cache_clear()

    def log_softmax(self, tokens: list[int]) -> np.ndarray:
        """(len(tokens), V) next-token log-probabilities after each prefix."""
        self.llm.reset()
        self.llm._ctx.kv_cache_clear()
        self.llm.eval(tokens)
        x = np.array(self.llm.scores[: len(tokens)], dtype=np.float64)
        x -= x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    def response_logprobs(self, prompt: list[int], response: list[int]) -> np.ndarray:
        lp = self.log_softmax(prompt + response)
        idx = np.arange(len(prompt) - 1, len(prompt) + len(response) - 1)
        return lp[idx, response]

    def close(self) -> None:
        self.set_adapter(None)
        self.llm.close()


def _figures(scorer: Scorer, heldout: list[HeldOut]) -> dict[str, float | None]:
    gaps, rewarded = [], []
    for h in heldout:
        student = scorer.response_logprobs(h.prompt_ids, h.response_ids)
        if h.has_hint:
            teacher = scorer.response_logprobs(h.teacher_prompt_ids, h.response_ids)
            gaps.append(float(np.abs(teacher - student).mean()))
        if h.has_reward:
            rewarded.append(h.reward * float(student.mean()))
    return {
        "opd_gap": float(np.mean(gaps)) if gaps else None,
        "reward_logprob": float(np.mean(rewarded)) if rewarded else None,
    }


def _drift(scorer: Scorer, base: list[np.ndarray], general: list[tuple[list[int], int]]) -> float:
    kls = []
    for (tokens, start), ref in zip(general, base, strict=True):
        lp = scorer.log_softmax(tokens)[start:]
        kls.append((np.exp(lp) * (lp - ref[start:])).sum(-1).mean())
    return float(np.mean(kls))


def evaluate(
    model_path: Path,
    candidate: Path,
    current: Path | None,
    heldout: list[HeldOut],
    general: list[tuple[list[int], int]],
    *,
    max_kl: float = 0.5,
    tolerance: float = 0.02,
) -> dict[str, Any]:
    """Compare ``candidate`` with ``current`` (None: the base model); returns the verdict."""
    longest = max(
        [len(t) for t, _ in general]
        + [max(len(h.prompt_ids), len(h.teacher_prompt_ids)) + len(h.response_ids) for h in heldout]
    )
    scorer = Scorer(model_path, n_ctx=256 * (longest // 256 + 1))  # logits kept: size matters
    try:
        scorer.set_adapter(None)
        base = [scorer.log_softmax(tokens) for tokens, _ in general]
        scorer.set_adapter(current)
        before = _figures(scorer, heldout)
        scorer.set_adapter(candidate)
        after = _figures(scorer, heldout)
        kl = _drift(scorer, base, general)
    finally:
        scorer.close()
    checks: dict[str, Any] = {}
    if after["opd_gap"] is not None:
        checks["opd_gap_shrinks"] = after["opd_gap"] <= before["opd_gap"] + tolerance
    if after["reward_logprob"] is not None:
        checks["reward_logprob_holds"] = (
            after["reward_logprob"] >= before["reward_logprob"] - tolerance
        )
    checks["drift_under_limit"] = kl <= max_kl
    return {
        "passed": all(checks.values()),
        "checks": checks,
        "before": before,
        "after": after,
        "kl_to_base": kl,
        "max_kl": max_kl,
        "tolerance": tolerance,
        "heldout": len(heldout),
        "compared_with": str(current) if current else "base model",
    }


def general_tokens(tokenize: Any, render: Any) -> list[tuple[list[int], int]]:
    """The fixed general conversations as (tokens, index of the first answer token)."""
    out = []
    for question, answer in GENERAL:
        prompt = tokenize(render([{"role": "user", "content": question}]))
        out.append((prompt + tokenize(answer), len(prompt)))
    return out


if __name__ == "__main__":
    from clawd.chattemplate import ChatTemplate

    base_path = Path(sys.argv[1])
    tpl = ChatTemplate.from_gguf(base_path)
    vocab = Scorer(base_path)
    tok = vocab.llm.tokenize

    def tokenize(text: str) -> list[int]:
        return tok(text.encode(), add_bos=False, special=True)

    gen = general_tokens(tokenize, tpl.render)
    vocab.close()
    current = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    print(evaluate(base_path, Path(sys.argv[2]), current, [], gen))
