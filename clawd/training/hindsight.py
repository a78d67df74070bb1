"""Hindsight answers: the model with the hint in context writes its own answer to a sample.

A behaviour the plain model never produces (no base answer of SmolLM2-135M ends with a question)
cannot be taught from its own tokens. ``hindsight_examples`` lets the hinted model write
answers for each hinted sample, keeps those that still answer the question (``relevance``: a
small model told "call me Sam" often stops answering and writes "I'm here to help, what can I
do?", which distilled into the student collapses every answer into that) and do not copy the
question or the hint out (``echo_share``, ``hint_block``), and returns the one the hint
explains best (``hint_gain``) as a new OPD-only example for ``clawd.training.ppo``.

Run alone: ``python -m bench.hindsight`` runs ``hindsight_examples`` on the default model with
a persona's hint and prints what it kept (this module has no state of its own).
"""

from __future__ import annotations

from typing import Any

import torch

from clawd.training.batches import Example
from clawd.training.config import TrainConfig
from clawd.training.guided import cut_at_end, guided_greedy
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
def hint_gain(
    model: Any, teacher_prompt: list[int], prompt: list[int], answer: list[int], peak: int = 0
) -> float:
    """How much the hint explains ``answer``, per token. With ``peak`` 0, the mean over the
    answer's tokens of

        g_t = log p(a_t | prompt with the hint, a_<t)  -  log p(a_t | prompt, a_<t),

    in nats: about 0 for an answer the model would have written without the hint, more for one
    that follows it ("Sam, the capital ..." over "The capital ..."). As a choice among sampled
    answers the mean did no better than chance on SmolLM2-135M (docs/experiments.md): a
    preference often lives in a few tokens (a name, a closing question), and the mean over a
    long answer dilutes them. With ``peak`` k > 0, the mean of the k largest g_t instead (all of
    them when the answer is shorter); as a choice the top 3 did no better on SmolLM2 either, for
    lack of compliant candidates to choose (docs/experiments.md, 2026-12-03)."""
    if not answer:
        return 0.0
    hinted, plain = _answer_logprobs(model, [teacher_prompt, prompt], answer)
    gains = hinted - plain
    if peak > 0:
        gains = gains.topk(min(peak, gains.numel())).values
    return float(gains.mean())


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


def _write(
    model: Any, prompt: list[int], plain: list[int], cfg: TrainConfig, eos: list[int]
) -> tuple[list[list[int]], list[int] | None]:
    """The hinted model's answers: the greedy one, with ``cfg.hindsight_guidance`` != 1 also the
    guided greedy one (``guided.guided_greedy``, ``plain`` the prompt without the hint), then
    ``cfg.hindsight_candidates - 1`` sampled at ``cfg.hindsight_temperature`` in one batch; each
    cut after its end-of-turn token. Returns them all and the guided one (None when off)."""
    ids = torch.tensor([prompt], device=next(model.parameters()).device)
    common = {
        "attention_mask": torch.ones_like(ids),
        "max_new_tokens": cfg.hindsight_max_tokens,
        "eos_token_id": eos or None,
        "pad_token_id": eos[0] if eos else 0,
    }
    rows = list(model.generate(input_ids=ids, do_sample=False, **common))
    if cfg.hindsight_candidates > 1:
        k = cfg.hindsight_candidates - 1
        common["attention_mask"] = common["attention_mask"].expand(k, -1)
        rows += list(
            model.generate(
                input_ids=ids.expand(k, -1),
                do_sample=True,
                temperature=cfg.hindsight_temperature,
                top_p=0.95,
                top_k=0,
                **common,
            )
        )
    out = [cut_at_end(row[ids.shape[1] :].tolist(), eos) for row in rows]
    guided = None
    if cfg.hindsight_guidance != 1:
        g, n = cfg.hindsight_guidance, cfg.hindsight_max_tokens
        guided = guided_greedy(model, prompt, plain, g, n, eos)
        out.insert(1, guided)
    return out, guided


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

    The model writes ``cfg.hindsight_candidates`` answers (greedy, then sampled: a small model
    often follows a hint in one answer of several and not in its greedy one). An answer may
    train only if it still answers the question: its ``relevance`` (measured without the hint,
    where the student will say it) is at least ``cfg.hindsight_relevance`` of the served
    answer's and at least ``cfg.hindsight_min_relevance`` (the floor matters once the served
    answers have drifted off the question); it does not mostly copy out the question or the hint
    (``echo_share`` at most ``cfg.hindsight_max_echo``); and it quotes no run of 4 tokens of the
    hint (``hint_block``): a small model often writes "[user's hint / instruction]" or the hint
    itself into its answer, and the student would learn to print instructions. Of those, the one
    with the largest ``hint_gain`` trains (the mean over its tokens, or with ``cfg.hindsight_peak``
    k over its k largest). With ``cfg.hindsight_trust``, when no answer reaches
    the relevance floor the hinted model is deflecting, and the example's own OPD term is
    dropped too (``Example.teacher_trusted``). Returns the new examples and, for every hinted
    example, what was measured and whether an answer was kept."""
    model.eval()
    out, seen = [], []
    for ex in examples:
        if not ex.hint:
            continue
        answers = []
        written, guided = _write(model, ex.teacher_prompt_ids, ex.prompt_ids, cfg, eos)
        for a in written:
            if a and a != ex.response_ids and a not in answers:
                answers.append(a)
        if not answers:
            continue
        served = relevance(model, ex.prompt_ids, ex.response_ids, references)
        floor = max(served * cfg.hindsight_relevance, cfg.hindsight_min_relevance)
        block = hint_block(ex.teacher_prompt_ids, ex.prompt_ids)
        measured = []
        for a in answers:
            rel = relevance(model, ex.prompt_ids, a, references)
            echo = echo_share(a, ex.teacher_prompt_ids)
            quote = echo_share(a, block)
            gain = hint_gain(model, ex.teacher_prompt_ids, ex.prompt_ids, a, cfg.hindsight_peak)
            fits = rel >= floor and echo <= cfg.hindsight_max_echo and quote == 0
            measured.append((fits, gain, rel, echo, quote, a))
        fit = [m for m in measured if m[0]]
        kept, gain, rel, echo, quote, answer = max(fit or measured, key=lambda m: (m[1], m[2]))
        # The teacher's view scores the served answer as the hinted model would write it; when
        # none of the hinted model's own answers still answers the question, that view teaches
        # deflection, not the preference, so the sample keeps its reward term only.
        if cfg.hindsight_trust and not any(m[2] >= floor for m in measured):
            ex.teacher_trusted = False
        seen.append(
            {
                "sample_id": ex.sample_id,
                "candidates": len(answers),
                "fit": len(fit),
                "relevance_served": round(served, 3),
                "relevance_hindsight": round(rel, 3),
                "echo": round(echo, 3),
                "quotes_hint": quote > 0,
                "guided": answer == guided,
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
