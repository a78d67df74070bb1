"""The promotion gate: a candidate adapter must help and must not harm before it serves.

Measured in llama.cpp, the runtime that serves:

- **drift**, per update and in all: the mean per-token KL(candidate || parent) and
  KL(candidate || base) of the next-token distributions along the base model's own greedy
  answers (end-of-turn token included) to the first 16 of 32 fixed general prompts. The first
  must stay under ``step_kl`` (one update may move only so far), the second under ``max_kl``
  (the drift budget of the whole lineage, so improvements add up until the budget is spent);
- **general ability**: the candidate's own greedy answers to the same prompts (up to 64 tokens:
  a loop with a long period, "a solid ball of rock that is made of a solid ball of rock that
  ...", shows only past 32) must not degenerate more often than the base model's: the
  candidate's share of empty or repetitive answers (a token run or few distinct trigrams)
  against the base model's on the same prompts, by a paired sign test, so that a loop that only
  moves from one prompt to another is not a failure; and the answers must not collapse (many
  prompts, one answer: few distinct openings). KL alone misses an adapter that says "I'm sorry,
  I'm sorry..." to everything at a modest KL. The same check runs on the user's own prompts (the
  training run's samples, newest first): a served adapter looped ("1. 1. 1. ...") on a user's
  question and on none of the 32; - on samples the training run held out (only with at least
  ``min_heldout`` of them; fewer is reported as skipped, never as passed): the **OPD gap**, mean
  |teacher_lp - student_lp| of hinted samples, must not grow, and the **reward-weighted log-
  prob**, mean ``r x mean_t student_lp`` of rewarded samples, must not fall.

The verdict, every figure and a few of the candidate's answers go into the manifest.

Run alone::

    python -m clawd.adapters.gate BASE.gguf CANDIDATE.gguf [PARENT.gguf]
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clawd.adapters import loops
from clawd.adapters.loops import degeneration, general_ability
from clawd.adapters.scoring import Scorer

# Tokens of each greedy answer the ability check reads: a loop with a long period shows only
# past 32 (docs/experiments.md, "The general-ability check reads 64 tokens").
ABILITY_TOKENS = 64

# Fixed general prompts: facts, code, advice, writing, maths, language, everyday tasks.
GENERAL = [
    "What is the boiling point of water at sea level?",
    "Write a Python function that adds two numbers.",
    "Give me a tip for sleeping better.",
    "Translate 'good morning' into French.",
    "What is the capital of Japan?",
    "How many days are there in a leap year?",
    "Explain what photosynthesis is in one sentence.",
    "What is 12 times 8?",
    "Suggest a name for a small bakery.",
    "How do I reverse a list in Python?",
    "Why is the sky blue?",
    "Write a haiku about autumn.",
    "What should I pack for a weekend hiking trip?",
    "What does HTTP stand for?",
    "How can I make my coffee less bitter?",
    "Who wrote Romeo and Juliet?",
    "What is the difference between weather and climate?",
    "Give me three ideas for a rainy afternoon.",
    "How do I boil an egg?",
    "What is a prime number?",
    "Write a short thank-you note to a neighbour.",
    "How far is the Moon from the Earth?",
    "What is the plural of 'mouse'?",
    "How do I centre text in HTML?",
    "What are the symptoms of dehydration?",
    "Recommend a good habit for learning a language.",
    "What is the largest ocean on Earth?",
    "Convert 10 kilometres to miles.",
    "What is the main ingredient of guacamole?",
    "How do I keep houseplants alive?",
    "Summarise the plot of Cinderella in two sentences.",
    "What is the chemical symbol for gold?",
]


@dataclass(frozen=True)
class HeldOut:
    prompt_ids: list[int]
    teacher_prompt_ids: list[int]
    response_ids: list[int]
    reward: float
    has_hint: bool
    has_reward: bool


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


def _kl(lp: list[np.ndarray], ref: list[np.ndarray]) -> float:
    """Mean per-token KL(lp || ref), averaged over conversations (rows: positions, V)."""
    return float(
        np.mean([(np.exp(a) * (a - b)).sum(-1).mean() for a, b in zip(lp, ref, strict=True)])
    )


def _along(scorer: Scorer, general: list[tuple[list[int], int]]) -> list[np.ndarray]:
    return [scorer.log_softmax(t, s - 1)[:-1] for t, s in general]


def _base_answers(
    scorer: Scorer, prompts: list[list[int]], max_tokens: int, cache: Path | None
) -> list[list[int]]:
    """The base model's greedy answers to the general prompts (cached: they never change)."""
    key = hashlib.sha256(json.dumps([prompts, max_tokens]).encode()).hexdigest()
    if cache is not None and cache.exists():
        try:
            data = json.loads(cache.read_text(encoding="utf-8"))
            if data.get("key") == key:
                return [list(map(int, a)) for a in data["answers"]]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged cache is recomputed
    answers = [scorer.answer(p, max_tokens) for p in prompts]
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": key, "answers": answers}), encoding="utf-8")
        tmp.replace(cache)
    return answers


@dataclass
class _Measured:
    """What the gate measured of a candidate, before any verdict."""

    before: dict[str, Any]  # held-out figures under the parent ({} without held-out samples)
    after: dict[str, Any]  # the same under the candidate
    kl: float  # to the base model, along its general answers
    kl_parent: float  # to the parent
    ability: dict[str, Any]  # degeneration on the general prompts, base and candidate
    own: dict[str, Any]  # the same on the user's prompts ({} without them)
    excused: dict[str, list[int]]  # new greedy loops the sampled answers did not confirm
    text: list[str]  # the candidate's answers to the general prompts
    own_text: list[str]  # and to the user's


def _measure(
    scorer: Scorer,
    candidate: Path,
    parent: Path | None,
    heldout: list[HeldOut],
    prompts: list[list[int]],
    own_prompts: list[list[int]],
    *,
    answer_tokens: int,
    ability_tokens: int,
    drift_prompts: int,
    cache: Path | None,
    loop_samples: int,
) -> _Measured:
    """Everything ``evaluate`` judges, read with the base model, the parent and the candidate
    in turn on one loaded model."""
    scorer.set_adapter(None)
    base_answers = _base_answers(scorer, prompts, max(answer_tokens, ability_tokens), cache)
    # Greedy answers: the first n tokens of a longer one are the answer at n tokens.
    pairs = list(zip(prompts, base_answers, strict=True))[:drift_prompts]
    general = [(p + a[:answer_tokens], len(p)) for p, a in pairs if a]
    base = _along(scorer, general)
    own_base = [scorer.answer(p, ability_tokens) for p in own_prompts]
    scorer.set_adapter(parent)
    before = _figures(scorer, heldout) if heldout else {}
    ref = _along(scorer, general) if parent is not None else base
    scorer.set_adapter(candidate)
    after = _figures(scorer, heldout) if heldout else {}
    mine = _along(scorer, general)
    kl = _kl(mine, base)
    kl_parent = _kl(mine, ref) if parent is not None else kl
    answers = [scorer.answer(p, ability_tokens) for p in prompts]
    own_answers = [scorer.answer(p, ability_tokens) for p in own_prompts]
    text, own_text = (
        [scorer.llm.detokenize(a).decode("utf-8", "replace") for a in got]
        for got in (answers, own_answers)
    )
    ability = {
        "base": degeneration([a[:ability_tokens] for a in base_answers], scorer.is_end),
        "candidate": degeneration(answers, scorer.is_end),
    }
    own = (
        {  # empty without the user's prompts: nothing was asked
            "base": degeneration(own_base, scorer.is_end),
            "candidate": degeneration(own_answers, scorer.is_end),
        }
        if own_prompts
        else {}
    )
    excused: dict[str, list[int]] = {"general": [], "own": []}
    for key, asked, figures in (("general", prompts, ability), ("own", own_prompts, own)):
        if figures and loop_samples:
            flagged = loops.new_loops(figures["base"], figures["candidate"])
            excused[key], figures["sampled"] = loops.confirm(
                scorer, candidate, asked, flagged, loop_samples, ability_tokens
            )
    return _Measured(before, after, kl, kl_parent, ability, own, excused, text, own_text)


def evaluate(
    model_path: Path,
    candidate: Path,
    parent: Path | None,
    heldout: list[HeldOut],
    prompts: list[list[int]],
    own_prompts: list[list[int]] | None = None,
    *,
    max_kl: float = 0.5,
    step_kl: float = 0.25,
    ability_alpha: float = loops.ALPHA,
    tolerance: float = 0.02,
    min_heldout: int = 4,
    answer_tokens: int = 32,
    ability_tokens: int = ABILITY_TOKENS,
    drift_prompts: int = 16,
    cache: Path | None = None,
    threads: int = 0,
    loop_samples: int = 0,
) -> dict[str, Any]:
    """Judge ``candidate`` against ``parent`` (None: the base model) and the base model, on
    ``threads`` CPU threads (0: all cores; the trainer passes its own ``train_threads``, so
    that the gate never oversubscribes the cores beside other work).

    Drift is measured along the first ``answer_tokens`` of the base model's greedy answers (the
    budgets were sized on those), degeneration on the first ``ability_tokens`` of each model's,
    on the general ``prompts`` and on ``own_prompts`` (the user's; None or empty: skipped).
    The ability checks fail on an excess of degenerate answers that chance explains less often
    than ``ability_alpha`` (``clawd.adapters.loops.general_ability``; 0: never on loops).
    With ``loop_samples`` n > 0 a new greedy loop counts only if n sampled answers confirm it
    (``clawd.adapters.loops.confirm``); 0: every greedy loop counts."""
    own_prompts = own_prompts or []
    longest = max(
        [len(p) + max(answer_tokens, ability_tokens) + 1 for p in prompts + own_prompts]
        + [max(len(h.prompt_ids), len(h.teacher_prompt_ids)) + len(h.response_ids) for h in heldout]
    )
    use_heldout = len(heldout) >= min_heldout
    n_ctx = 256 * (longest // 256 + 1)  # all logits are kept: the size matters
    scorer = Scorer(model_path, n_ctx=n_ctx, threads=threads)
    try:
        m = _measure(
            scorer,
            candidate,
            parent,
            heldout if use_heldout else [],
            prompts,
            own_prompts,
            answer_tokens=answer_tokens,
            ability_tokens=ability_tokens,
            drift_prompts=drift_prompts,
            cache=cache,
            loop_samples=loop_samples,
        )
    finally:
        scorer.close()
    before, after, kl, kl_parent = m.before, m.after, m.kl, m.kl_parent
    ability, own, excused, text, own_text = m.ability, m.own, m.excused, m.text, m.own_text
    checks: dict[str, Any] = {}
    skipped: list[str] = []
    if not use_heldout:
        skipped.append(f"held-out checks: {len(heldout)} held-out samples, {min_heldout} needed")
    if after.get("opd_gap") is not None:
        checks["opd_gap_shrinks"] = after["opd_gap"] <= before["opd_gap"] + tolerance
    if after.get("reward_logprob") is not None:
        checks["reward_logprob_holds"] = (
            after["reward_logprob"] >= before["reward_logprob"] - tolerance
        )
    checks["drift_under_limit"] = kl <= max_kl
    checks["step_under_limit"] = kl_parent <= step_kl
    checks["general_ability"], new = general_ability(
        ability["base"], ability["candidate"], ability_alpha, excused["general"]
    )
    ability["new_degenerate"] = [{"prompt": i, "answer": text[i]} for i in new]
    if own_prompts:
        checks["own_prompts_ability"], new = general_ability(
            own["base"], own["candidate"], ability_alpha, excused["own"]
        )
        own["new_degenerate"] = [{"prompt": i, "answer": own_text[i]} for i in new]
    else:
        skipped.append("ability on the user's prompts: no prompts")
    return {
        "passed": all(checks.values()),
        "checks": checks,
        "skipped": skipped,
        "before": before,
        "after": after,
        "kl_to_base": kl,
        "kl_to_parent": kl_parent,
        "max_kl": max_kl,
        "step_kl": step_kl,
        "ability": ability,
        "own_ability": own,
        "answers": text[:4],
        "tolerance": tolerance,
        "heldout": len(heldout),
        "compared_with": str(parent) if parent else "base model",
    }


def general_prompts(tokenize: Any, render: Any) -> list[list[int]]:
    """The fixed general prompts, rendered with the model's chat template, as tokens."""
    return [tokenize(render([{"role": "user", "content": q}])) for q in GENERAL]


if __name__ == "__main__":
    from clawd.chattemplate import ChatTemplate

    base_path = Path(sys.argv[1])
    tpl = ChatTemplate.from_gguf(base_path)
    vocab = Scorer(base_path)
    tok = vocab.llm.tokenize

    def tokenize(text: str) -> list[int]:
        return tok(text.encode(), add_bos=False, special=True)

    gen = general_prompts(tokenize, tpl.render)
    vocab.close()
    parent_path = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    print(json.dumps(evaluate(base_path, Path(sys.argv[2]), parent_path, [], gen), indent=1))
