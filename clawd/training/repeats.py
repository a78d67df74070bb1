"""Repeated phrases in answers: which tokens repeat, and the pre-update weights' own loops.

On SmolLM2-135M the learner reached some users only through answers that say one phrase over
and over ("Don't drive alone." five times): the gate lets such answers through or, with a
stricter loop rule, refuses every update, and cannot fix them (docs/experiments.md, "One phrase
said over and over"). With ``train_unlikelihood`` the update also pushes such tokens down
(``losses.unlikelihood_loss``): the tokens of its training answers that repeat an earlier
n-gram of the same answer, and those of the greedy answers that the weights it starts from
write to the user's own prompts, where the gate also looks for loops (not to its general
prompts, which it measures drift on: docs/experiments.md, "Unlikelihood on the user's own
prompts only"). An update that starts from a lineage sliding into a loop thus pays for it,
instead of the loop being served or the update being refused.

Run alone to print a model's (or an adapter's) greedy answers to the gate's general prompts
with their repeating tokens in brackets::

    python -m clawd.training.repeats MODEL.gguf [PEFT_DIR]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from clawd.training.greedy import greedy_answers

NGRAM = 4  # Welleck et al. (2019) mark repeats of 4-grams


def repeated_ngrams(tokens: Sequence[int], n: int = NGRAM) -> list[bool]:
    """For each token: whether it ends an n-gram that already occurred earlier in ``tokens``
    (overlaps allowed). In ``a b c d a b c d a`` with n = 4 the second ``d`` and the third
    ``a`` are marked: from the second copy on, each token repeats the phrase it is part of."""
    if n < 1:
        raise ValueError("n must be at least 1")
    seen: set[tuple[int, ...]] = set()
    out = [False] * len(tokens)
    for i in range(n - 1, len(tokens)):
        gram = tuple(tokens[i - n + 1 : i + 1])
        out[i] = gram in seen
        seen.add(gram)
    return out


@dataclass
class Repeat:
    """An answer with repeating tokens: the prompt and answer token ids and, per answer token,
    whether it repeats (``repeated_ngrams``)."""

    prompt_ids: list[int]
    answer_ids: list[int]
    marked: list[bool]


def own_repeats(
    model: Any, prompts: list[list[int]], max_tokens: int, eos: list[int], n: int = NGRAM
) -> tuple[list[Repeat], int]:
    """The greedy answers of ``model`` (at most ``max_tokens`` each) to ``prompts`` that repeat
    an n-gram, as ``Repeat``s, and how many answers were written."""
    was = model.training
    model.eval()
    try:
        answers = greedy_answers(model, prompts, max_tokens, eos)
    finally:
        model.train(was)
    out = []
    for prompt, answer in zip(prompts, answers, strict=True):
        marked = repeated_ngrams(answer, n)
        if any(marked):
            out.append(Repeat(prompt, answer, marked))
    return out, len(answers)


def collate_repeats(chunk: list[Repeat], device: Any) -> dict[str, torch.Tensor]:
    """Right-padded ``ids``/``attn`` (B, L), ``start`` (B,) and ``marked`` (B, T), T the longest
    answer (0.0 on padding), for ``torchmodel.token_logprobs``."""
    rows = [r.prompt_ids + r.answer_ids for r in chunk]
    width, t = max(map(len, rows)), max(len(r.answer_ids) for r in chunk)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    marked = torch.zeros((len(rows), t))
    for i, (row, r) in enumerate(zip(rows, chunk, strict=True)):
        ids[i, : len(row)], attn[i, : len(row)] = torch.tensor(row), 1
        marked[i, : len(r.marked)] = torch.tensor(r.marked, dtype=torch.float32)
    start = torch.tensor([len(r.prompt_ids) for r in chunk])
    out = {"ids": ids, "attn": attn, "start": start, "marked": marked}
    return {k: v.to(device) for k, v in out.items()}


def main() -> None:
    from clawd.adapters.gate import ABILITY_TOKENS
    from clawd.training.greedy import script_model

    model, tok, prompts, eos = script_model("clawd.training.repeats")
    found, written = own_repeats(model, prompts, ABILITY_TOKENS, eos)
    for r in found:
        pairs = zip(r.answer_ids, r.marked, strict=True)
        pieces = [f"[{tok.decode([t])}]" if m else tok.decode([t]) for t, m in pairs]
        print(f"{sum(r.marked):3d} repeating: {''.join(pieces)!r}")
    print(f"{len(found)} of {written} greedy answers repeat a {NGRAM}-token phrase")


if __name__ == "__main__":
    main()
