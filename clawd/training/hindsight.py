"""Hindsight answers: the model with the hint in context writes its own answer to a sample.

A behaviour the plain model never produces (no base answer of SmolLM2-135M ends with a question)
cannot be taught from its own tokens. ``hindsight_examples`` lets the hinted model write its
greedy answer for each hinted sample, keeps it if it still answers the question (``relevance``:
a small model told "call me Sam" often stops answering and writes "I'm here to help, what can I
do?", which distilled into the student collapses every answer into that) and does not copy the
question or the hint out (``echo_share``, ``hint_block``), and returns it, with how much the
hint explains it (``hint_gain``), as a new OPD-only example for ``clawd.training.ppo``. More
candidates (sampled answers, one written with the hint's pull amplified) and other rankings
chose no more compliant answers on SmolLM2-135M and were removed (docs/experiments.md,
"Removed from the code").

Run alone: see ``clawd.training.train`` with ``train_method = "hindsight"`` (this module has no
state of its own).
"""

from __future__ import annotations

from typing import Any

import torch

from clawd.training.batches import Example
from clawd.training.config import TrainConfig
from clawd.training.greedy import cut_at_end
from clawd.training.torchmodel import token_logprobs


def _answer_logprobs(model: Any, prompts: list[list[int]], answer: list[int]) -> torch.Tensor:
    """Per-token log p(a_t | prompt, a_<t) for each prompt, in one padded batch: (P, T)."""
    device = next(model.parameters()).device
    rows = [p + answer for p in prompts]
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long, device=device)
    attn = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, device=device)
        attn[i, : len(r)] = 1
    start = torch.tensor([len(p) for p in prompts], device=device)
    return token_logprobs(model, ids, attn, start, len(answer))


def _mean_logprobs(model: Any, prompts: list[list[int]], answer: list[int]) -> list[float]:
    """Mean per-token log p(answer | prompt) for each prompt."""
    return _answer_logprobs(model, prompts, answer).mean(-1).tolist()


@torch.inference_mode()
def relevance(
    model: Any, prompt: list[int], answer: list[int], references: list[list[int]]
) -> float:
    """How much ``answer`` belongs to ``prompt`` rather than to any question: its pointwise
    mutual information with the prompt, per token,

        mean_t log p(a_t | prompt, a_<t)  -  mean_r mean_t log p(a_t | reference_r, a_<t),

    in nats, with ``references`` other prompts (the gate's fixed general prompts). A generic
    answer ("I'm here to help. What can I do for you?") is about as likely after any question
    and scores near 0; "Canberra is the capital." after "What is the capital of Australia?"
    scores high. Per token, so a short answer is not penalised for being short."""
    if not answer or not references:
        return 0.0
    own, *others = _mean_logprobs(model, [prompt, *references], answer)
    return own - sum(others) / len(others)


def echo_share(answer: list[int], source: list[int], n: int = 4) -> float:
    """The share of ``answer``'s tokens that lie in a run of ``n`` or more tokens also found in
    ``source`` (the question with the hint): near 1 for an answer that copies the question or
    the hint out ("End every answer with a question back to the user."), near 0 for one in its
    own words. ``relevance`` cannot tell an echo from an answer: an echo of the question is as
    likely after it as an answer can be."""
    if len(answer) < n:
        return 0.0
    grams = {tuple(source[i : i + n]) for i in range(len(source) - n + 1)}
    covered = [False] * len(answer)
    for i in range(len(answer) - n + 1):
        if tuple(answer[i : i + n]) in grams:
            covered[i : i + n] = [True] * n
    return sum(covered) / len(answer)


@torch.inference_mode()
def hint_gain(model: Any, teacher_prompt: list[int], prompt: list[int], answer: list[int]) -> float:
    """How much the hint explains ``answer``, per token: the mean over the answer's tokens of

        g_t = log p(a_t | prompt with the hint, a_<t)  -  log p(a_t | prompt, a_<t),

    in nats: about 0 for an answer the model would have written without the hint, more for one
    that follows it ("Sam, the capital ..." over "The capital ..."). It is the trained answer's
    mean OPD advantage; as a choice among sampled answers it did no better than chance on
    SmolLM2-135M (docs/experiments.md, "Hindsight answers: several candidates")."""
    if not answer:
        return 0.0
    hinted, plain = _answer_logprobs(model, [teacher_prompt, prompt], answer)
    return float((hinted - plain).mean())


def hint_block(teacher_prompt: list[int], prompt: list[int]) -> list[int]:
    """The tokens the hint put into the prompt: what lies between the two prompts' common start
    and common end (the hint with its header, in the user message or the system message)."""
    start = 0
    while start < min(len(prompt), len(teacher_prompt)) and prompt[start] == teacher_prompt[start]:
        start += 1
    end = 0
    while end < min(len(prompt), len(teacher_prompt)) - start and (
        prompt[-1 - end] == teacher_prompt[-1 - end]
    ):
        end += 1
    return teacher_prompt[start : len(teacher_prompt) - end]


def _write(model: Any, prompt: list[int], cfg: TrainConfig, eos: list[int]) -> list[int]:
    """The hinted model's greedy answer to ``prompt`` (at most ``cfg.hindsight_max_tokens``
    tokens), cut after its end-of-turn token."""
    ids = torch.tensor([prompt], device=next(model.parameters()).device)
    row = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=cfg.hindsight_max_tokens,
        do_sample=False,
        eos_token_id=eos or None,
        pad_token_id=eos[0] if eos else 0,
    )[0]
    return cut_at_end(row[ids.shape[1] :].tolist(), eos)


@torch.inference_mode()
def hindsight_examples(
    model: Any,
    examples: list[Example],
    cfg: TrainConfig,
    eos: list[int],
    references: list[list[int]],
) -> tuple[list[Example], list[dict[str, Any]]]:
    """For each hinted example, an answer the model writes with the hint in context, as a new
    OPD-only example: the student learns, token by token and inside the same clipping, toward
    what it would have said had it known the hint.

    The model writes its greedy answer with the hint in context. It trains only if it still
    answers the question: its ``relevance`` (measured without the hint, where the student will
    say it) is at least ``cfg.hindsight_relevance`` of the served answer's and at least
    ``cfg.hindsight_min_relevance`` (the floor matters once the served answers have drifted off
    the question); it does not mostly copy out the question or the hint (``echo_share`` at most
    ``cfg.hindsight_max_echo``); and it quotes no run of 4 tokens of the hint (``hint_block``): a
    small model often writes "[user's hint / instruction]" or the hint itself into its answer,
    and the student would learn to print instructions. With ``cfg.hindsight_trust``, when the
    answer misses the relevance floor the hinted model is deflecting, and the example's own OPD
    term is dropped too (``Example.teacher_trusted``). Returns the new examples and, for every
    hinted example with an answer of its own, what was measured and whether it was kept."""
    model.eval()
    out, seen = [], []
    for ex in examples:
        if not ex.hint:
            continue
        answer = _write(model, ex.teacher_prompt_ids, cfg, eos)
        if not answer or answer == ex.response_ids:
            continue
        served = relevance(model, ex.prompt_ids, ex.response_ids, references)
        floor = max(served * cfg.hindsight_relevance, cfg.hindsight_min_relevance)
        rel = relevance(model, ex.prompt_ids, answer, references)
        echo = echo_share(answer, ex.teacher_prompt_ids)
        quote = echo_share(answer, hint_block(ex.teacher_prompt_ids, ex.prompt_ids))
        gain = hint_gain(model, ex.teacher_prompt_ids, ex.prompt_ids, answer)
        kept = rel >= floor and echo <= cfg.hindsight_max_echo and quote == 0
        # The teacher's view scores the served answer as the hinted model would write it; when
        # the hinted model's own answer no longer answers the question, that view teaches
        # deflection, not the preference, so the sample keeps its reward term only (a NaN
        # relevance too, hence not >=).
        if cfg.hindsight_trust and not rel >= floor:
            ex.teacher_trusted = False
        seen.append(
            {
                "sample_id": ex.sample_id,
                "relevance_served": round(served, 3),
                "relevance_hindsight": round(rel, 3),
                "echo": round(echo, 3),
                "quotes_hint": quote > 0,
                "hint_gain": round(gain, 3),
                "kept": kept,
                "teacher_trusted": ex.teacher_trusted,
            }
        )
        if not kept:
            continue
        out.append(
            Example(
                ex.sample_id,
                "opd",
                ex.hint,
                0.0,
                ex.prompt_ids,
                ex.teacher_prompt_ids,
                answer,
                ex.device,
                hindsight=True,
            )
        )
    return out, seen
