"""The memory gap: how much a memory still changes an adapter's answers, against the base's.

For a memory m among the active memories and a model M (the base model or the candidate
adapter, in llama.cpp as it serves), on each of the user's held-out prompts p (never trained on):
M writes its answer with every memory in the system message as the daemon serves it
(``ANSWER_TOKENS`` at most; greedy, under the memories' shape when the caller passes
``served``: the name opening it, the end a length limit sets, a closing question), and along
that answer the gap is the mean per token of

- KL(M with every memory || M with all but m) of the next-token distributions, where M chose
  the token;
- -log P(token | M with all but m), where decoding forced it for m (with m, its probability is
  1); nothing where it forced it for another memory, which the prompt keeps either way,

over all the answers' tokens (a short answer weighs as few tokens, not as a whole answer: its
forced name would otherwise count as much as in a long one). It is what taking m out of the
prompt would change: the base model's gap is what m does to an untrained model; an adapter that
has learned m answers without it as it is served with it, and its gap falls toward 0. Measured
with m alone in the prompt, an adapter trained with all memories together over-applies it
(`sam`'s ended its answers after "Sam,"); along an unshaped answer a learned name could never
close the gap (docs/experiments.md, "2026-12-06: the gap along the answer as served").

A memory is **closed** by an adapter when its gap is at most ``CLOSED`` of the base model's
(``closed``); the daemon then takes it out of the prompt while that adapter serves
(``clawd.store.memories.sync_learned``). The gate records the figures in the manifest; they do
not decide the verdict.

Run alone on a memory text and prompts (along greedy answers: the shape comes from the caller,
``clawd.training.train``)::

    python -m clawd.adapters.memgap BASE.gguf ADAPTER.gguf "Address the user as Ana." "Hi!" "Why?"
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from clawd.adapters.gate import Scorer
from clawd.chattemplate import ChatTemplate
from clawd.store import memories

ANSWER_TOKENS = 96  # room for a length limit of three sentences, or a closing question
# An adapter closes a memory when its gap is at most this share of the base model's. Chosen on
# `sam` (the tuning persona; docs/experiments.md, "2026-12-06: the gap along the answer as
# served"): his name's gap fell to 0.58 of the base's at update 1 (4 of 10 answers without the
# memories opened with it) and 0.40 at update 2 (9 of 10); the rest of 0.40 is wording the
# name still changes ("Sam,\n\nI'm glad" against "Sam, I'm glad").
CLOSED = 0.5


# The served answer to one prompt (token ids, with every memory in its system message) under
# the memories' texts, the measured one first, with the scorer's weights: its tokens and, per
# token, "chosen" (the model chose it), "this" (decoding forced it for the measured memory) or
# "others" (forced for the other memories, which the prompt keeps either way).
Served = Callable[[Scorer, list[int], list[str]], tuple[list[int], list[str]]]


def _greedy(scorer: Scorer, prompt: list[int], texts: list[str]) -> tuple[list[int], list[str]]:
    answer = scorer.answer(prompt, ANSWER_TOKENS)
    return answer, ["chosen"] * len(answer)


def _gap(
    scorer: Scorer,
    tokenize: Callable[[str], list[int]],
    render: Callable[[list[dict[str, Any]]], str],
    memory: dict[str, Any],
    others: list[dict[str, Any]],
    prompts: list[list[dict[str, Any]]],
    served: Served,
) -> float:
    nats, tokens = 0.0, 0
    every, _, _ = memories.system_block([memory, *others], len, 1 << 30)
    rest, _, _ = memories.system_block(others, len, 1 << 30)
    texts = [m["text"] for m in (memory, *others)]
    for p in prompts:
        hinted = tokenize(render(memories.with_memories(p, every)))
        without = tokenize(render(memories.with_memories(p, rest)))
        answer, marks = served(scorer, hinted, texts)
        if not answer:
            continue
        lp_with = scorer.log_softmax(hinted + answer, len(hinted) - 1)[:-1]  # (T, V)
        lp_without = scorer.log_softmax(without + answer, len(without) - 1)[:-1]
        kl = (np.exp(lp_with) * (lp_with - lp_without)).sum(-1)  # (T,)
        cost = -lp_without[np.arange(len(answer)), answer]  # (T,)
        kind = np.array(marks)
        nats += float(np.where(kind == "this", cost, np.where(kind == "chosen", kl, 0.0)).sum())
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
    """``{str(id): {"gap", "base_gap", "closed"}}`` for each memory (``{"id", "text"}``,
    all of them in the prompt as served) on the held-out ``prompts`` (chat messages without
    memories), along the answers ``served`` writes (greedy, nothing forced, without it); {}
    without memories or prompts."""
    if not mems or not prompts:
        return {}
    tpl = ChatTemplate.from_gguf(model_path)
    scorer = Scorer(model_path, n_ctx=2048, threads=threads)

    def tokenize(text: str) -> list[int]:
        return scorer.llm.tokenize(text.encode(), add_bos=False, special=True)

    def gaps() -> dict[int, float]:
        return {
            m["id"]: _gap(
                scorer, tokenize, tpl.render, m, [o for o in mems if o is not m], prompts, write
            )
            for m in mems
        }

    write = served or _greedy
    try:
        base = gaps()
        scorer.set_adapter(candidate)
        now = gaps()
    finally:
        scorer.close()
    return {
        str(k): {
            "gap": round(now[k], 5),
            "base_gap": round(base[k], 5),
            "closed": closed(now[k], base[k]),
        }
        for k in now
    }


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
