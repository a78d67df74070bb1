"""The memory gap: how much a memory still changes an adapter's answers, against the base's.

For a memory m and a model M (the base model or the candidate adapter, in llama.cpp as it
serves), on each of the user's held-out prompts p (never trained on): M writes its greedy answer
with m in the system message (``ANSWER_TOKENS`` at most), and the gap is the mean per-token
KL(M with m || M without m) of the next-token distributions along that answer, averaged over the
prompts. The base model's gap is what the memory does to an untrained model; an adapter that has
learned the memory answers without it as it would with it, and its gap falls toward 0.

A memory is **closed** by an adapter when its gap is at most ``CLOSED`` of the base model's
(``closed``); the daemon then takes it out of the prompt while that adapter serves
(``clawd.store.memories.sync_learned``). The gate records the figures in the manifest; they do
not decide the verdict.

Run alone on a memory text and prompts::

    python -m clawd.adapters.memgap BASE.gguf ADAPTER.gguf "Address the user as Ana." "Hi!" "Why?"
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from clawd.adapters.gate import Scorer
from clawd.chattemplate import ChatTemplate
from clawd.store import memories

ANSWER_TOKENS = 32
# An adapter closes a memory when its gap is at most this share of the base model's: the
# memory then moves its answers a quarter as much as it moves the base model's.
CLOSED = 0.25


def _gap(
    scorer: Scorer, tokenize: Any, render: Any, memory: str, prompts: list[list[dict[str, Any]]]
) -> float:
    gaps = []
    block, _, _ = memories.system_block([{"id": 0, "text": memory}], len, 1 << 30)
    for p in prompts:
        plain = tokenize(render(p))
        hinted = tokenize(render(memories.with_memories(p, block)))
        answer = scorer.answer(hinted, ANSWER_TOKENS)
        if not answer:
            continue
        with_m = scorer.log_softmax(hinted + answer, len(hinted) - 1)[:-1]
        without = scorer.log_softmax(plain + answer, len(plain) - 1)[:-1]
        gaps.append(float((np.exp(with_m) * (with_m - without)).sum(-1).mean()))
    return float(np.mean(gaps)) if gaps else float("nan")


def measure(
    model_path: Path,
    candidate: Path,
    mems: list[dict[str, Any]],
    prompts: list[list[dict[str, Any]]],
    threads: int = 0,
) -> dict[str, dict[str, Any]]:
    """``{str(id): {"gap", "base_gap", "closed"}}`` for each memory (``{"id", "text"}``) on
    the held-out ``prompts`` (chat messages without memories); {} without either."""
    if not mems or not prompts:
        return {}
    tpl = ChatTemplate.from_gguf(model_path)
    scorer = Scorer(model_path, n_ctx=2048, threads=threads)

    def tokenize(text: str) -> list[int]:
        return scorer.llm.tokenize(text.encode(), add_bos=False, special=True)

    out: dict[str, dict[str, Any]] = {}
    try:
        base = {m["id"]: _gap(scorer, tokenize, tpl.render, m["text"], prompts) for m in mems}
        scorer.set_adapter(candidate)
        for m in mems:
            gap = _gap(scorer, tokenize, tpl.render, m["text"], prompts)
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
