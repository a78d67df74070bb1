"""The memory gap: how much a memory still changes an adapter's answers, against the base's.

For a memory m and a model M (the base model or the candidate adapter, in llama.cpp as it
serves), on each of the user's held-out prompts p (never trained on): M writes its answer with m
in the system message as the daemon serves it (``ANSWER_TOKENS`` at most; greedy, under the
memory's shape when the caller passes ``served``: the name opening it, the end a length limit
sets, a closing question), and along that answer the gap is the mean per token of

- KL(M with m || M without m) of the next-token distributions, where M chose the token;
- -log P(token | M without m), where decoding forced it (with m, its probability is 1),

over all the answers' tokens (a short answer weighs as few tokens, not as a whole answer: its
forced name would otherwise count as much as in a long one). The base model's gap is what the
memory does to an untrained model; an adapter that has learned the memory answers without it as
it is served with it, and its gap falls toward 0. Along an unshaped answer a learned name could
never close the gap: the adapter opens with "Noor," where the unshaped answer with the memory
does not. Along the served answer it does not close on the default model either: an adapter
trained with all the memories together, given one alone, over-applies it (`sam`'s ended its
answers after "Sam,"); measured against all the other memories instead, it closed "tl;dr" a
night before the weights were brief without the memories, and the answers lost their content.
So, measured here, a memory stays in the prompt (docs/experiments.md, "2026-12-06: the gap
along the answer as served").

A memory is **closed** by an adapter when its gap is at most ``CLOSED`` of the base model's
(``closed``); the daemon then takes it out of the prompt while that adapter serves
(``clawd.store.memories.sync_learned``). The gate records the figures in the manifest; they do
not decide the verdict.

Run alone on a memory text and prompts (along greedy answers: the shape comes from the caller,
``clawd.training.verdict``)::

    python -m clawd.adapters.memgap BASE.gguf ADAPTER.gguf "Address the user as Ana." "Hi!" "Why?"
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from clawd.adapters.scoring import Scorer
from clawd.chattemplate import ChatTemplate
from clawd.store import memories

ANSWER_TOKENS = 96  # room for a length limit of three sentences, or a closing question
# An adapter closes a memory when its gap is at most this share of the base model's: the
# memory then moves its answers a quarter as much as it moves the base model's.
CLOSED = 0.25


# The served answer to one prompt (token ids, the memory in its system message) under one
# memory's text, with the scorer's weights: its tokens and which of them decoding forced.
Served = Callable[[Scorer, list[int], str], tuple[list[int], list[float]]]


def _greedy(scorer: Scorer, prompt: list[int], memory: str) -> tuple[list[int], list[float]]:
    answer = scorer.answer(prompt, ANSWER_TOKENS)
    return answer, [0.0] * len(answer)


def _gap(
    scorer: Scorer,
    tokenize: Callable[[str], list[int]],
    render: Callable[[list[dict[str, Any]]], str],
    memory: str,
    prompts: list[list[dict[str, Any]]],
    served: Served,
) -> float:
    nats, tokens = 0.0, 0
    block, _, _ = memories.system_block([{"id": 0, "text": memory}], len, 1 << 30)
    for p in prompts:
        plain = tokenize(render(p))
        hinted = tokenize(render(memories.with_memories(p, block)))
        answer, forced = served(scorer, hinted, memory)
        if not answer:
            continue
        with_m = scorer.log_softmax(hinted + answer, len(hinted) - 1)[:-1]
        without = scorer.log_softmax(plain + answer, len(plain) - 1)[:-1]
        kl = (np.exp(with_m) * (with_m - without)).sum(-1)  # (T,)
        cost = -without[np.arange(len(answer)), answer]  # (T,)
        nats += float(np.where(np.array(forced) > 0, cost, kl).sum())
        tokens += len(answer)
    return nats / tokens if tokens else float("nan")


def measure(
    model_path: Path,
    candidate: Path,
    mems: list[dict[str, Any]],
    prompts: list[list[dict[str, Any]]],
    threads: int = 0,
    served: Served | None = None,
) -> dict[str, dict[str, Any]]:
    """``{str(id): {"gap", "base_gap", "closed"}}`` for each memory (``{"id", "text"}``) on
    the held-out ``prompts`` (chat messages without memories), along the answers ``served``
    writes (greedy, nothing forced, without it); {} without memories or prompts."""
    if not mems or not prompts:
        return {}
    tpl = ChatTemplate.from_gguf(model_path)
    scorer = Scorer(model_path, n_ctx=2048, threads=threads)

    def tokenize(text: str) -> list[int]:
        return scorer.llm.tokenize(text.encode(), add_bos=False, special=True)

    write = served or _greedy
    out: dict[str, dict[str, Any]] = {}
    try:
        base = {
            m["id"]: _gap(scorer, tokenize, tpl.render, m["text"], prompts, write) for m in mems
        }
        scorer.set_adapter(candidate)
        for m in mems:
            gap = _gap(scorer, tokenize, tpl.render, m["text"], prompts, write)
            out[str(m["id"])] = {
                "gap": round(gap, 5),
                "base_gap": round(base[m["id"]], 5),
                "closed": closed(gap, base[m["id"]]),
            }
    finally:
        scorer.close()
    return out


def closed(gap: float, base_gap: float) -> bool:
    """Whether an adapter with ``gap`` has learned a memory whose base-model gap is
    ``base_gap`` (a memory that changes nothing in the base model is never learned)."""
    if not (np.isfinite(gap) and np.isfinite(base_gap)) or base_gap <= 0:
        return False
    return gap <= CLOSED * base_gap


if __name__ == "__main__":
    base_path, adapter = Path(sys.argv[1]), Path(sys.argv[2])
    qs = [[{"role": "user", "content": q}] for q in sys.argv[4:]]
    print(measure(base_path, adapter, [{"id": 1, "text": sys.argv[3]}], qs))
