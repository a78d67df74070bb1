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
So the gap is a figure to read (the memory list shows it), not the test of what was learned
(docs/experiments.md, "2026-12-06: the gap along the answer as served").

A memory is **closed** by an adapter, and leaves the prompt while that adapter serves
(``clawd.store.memories.sync_learned``), when the adapter keeps the memory's shape on its own
(the caller's ``check``: ``clawd.signals.kept.checker``): on ``CHECK_PROMPTS`` prompts never
trained on (the user's held-out ones, then the gate's general ones), its greedy answers written
with no memory in the prompt keep the shape in at least ``KEPT`` of them, and so do its answers
as served with the memories that stay (an adapter that over-applies those must not lose what
leaves). A memory without a shape (a fact, a tone, a language) has nothing to check and stays.
The gate records the figures in the manifest; they do not decide its verdict.

Run alone on a memory text and prompts (along greedy answers: the shape comes from the caller,
``clawd.training.verdict``)::

    python -m clawd.adapters.memgap BASE.gguf ADAPTER.gguf "Address the user as Ana." "Hi!" "Why?"
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from clawd.adapters.scoring import Scorer
from clawd.chattemplate import ChatTemplate
from clawd.store import memories

ANSWER_TOKENS = 96  # room for a length limit of three sentences, or a closing question
CHECK_PROMPTS = 12  # the prompts a memory's shape is checked on
KEPT = 0.9  # the share of their answers that must keep it: 11 of 12


# The served answer to one prompt (token ids, the memories in its system message) under the
# memories' texts, with the scorer's weights: its tokens and which of them decoding forced.
Served = Callable[[Scorer, list[int], list[str]], tuple[list[int], list[float]]]
# The test of one memory's text: whether an answer (its text, whether it ended on its own)
# keeps the memory; None for a memory with nothing to check (``clawd.signals.kept.checker``).
Check = Callable[[str], Callable[[str, bool], bool] | None]


def _greedy(scorer: Scorer, prompt: list[int], texts: list[str]) -> tuple[list[int], list[float]]:
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
    for p in prompts:
        plain = tokenize(render(p))
        hinted = tokenize(render(memories.with_all(p, [{"id": 0, "text": memory}])))
        answer, forced = served(scorer, hinted, [memory])
        if not answer:
            continue
        with_m = scorer.log_softmax(hinted + answer, len(hinted) - 1)[:-1]
        without = scorer.log_softmax(plain + answer, len(plain) - 1)[:-1]
        kl = (np.exp(with_m) * (with_m - without)).sum(-1)  # (T,)
        cost = -without[np.arange(len(answer)), answer]  # (T,)
        nats += float(np.where(np.array(forced) > 0, cost, kl).sum())
        tokens += len(answer)
    return nats / tokens if tokens else float("nan")


def _answers(
    scorer: Scorer,
    tokenize: Callable[[str], list[int]],
    render: Callable[[list[dict[str, Any]]], str],
    prompts: list[list[dict[str, Any]]],
    texts: list[str],
    served: Served,
) -> list[tuple[str, bool]]:
    """Each prompt's answer (its text, and whether it ended before ``ANSWER_TOKENS``) with the
    memories ``texts`` in the system message, as ``served`` writes it; none: greedy."""
    mems = [{"id": i, "text": t} for i, t in enumerate(texts)]
    out = []
    for p in prompts:
        ids = tokenize(render(memories.with_all(p, mems)))
        answer, _ = (served if texts else _greedy)(scorer, ids, texts)
        content = [t for t in answer if not scorer.is_end(t)]
        text = scorer.llm.detokenize(content).decode("utf-8", "replace")
        out.append((text, len(content) < ANSWER_TOKENS))
    return out


def kept_alone(
    scorer: Scorer,
    tokenize: Callable[[str], list[int]],
    render: Callable[[list[dict[str, Any]]], str],
    mems: list[dict[str, Any]],
    prompts: list[list[dict[str, Any]]],
    served: Served,
    check: Check,
) -> tuple[set[int], dict[int, str]]:
    """The ids of the memories the scorer's weights keep on their own (``KEPT`` of the answers
    to ``prompts`` without any memory, and as served with the memories that stay), and for each
    memory with a shape "k/n", the answers without any memory that keep it."""
    tests = {m["id"]: check(m["text"]) for m in mems}
    shapes = {i: t for i, t in tests.items() if t is not None}
    need = math.ceil(KEPT * len(prompts))

    def count(answers: list[tuple[str, bool]], i: int) -> int:
        return sum(shapes[i](text, ended) for text, ended in answers)

    alone = _answers(scorer, tokenize, render, prompts, [], served)
    counts = {i: count(alone, i) for i in shapes}
    leaving = {i for i, k in counts.items() if prompts and k >= need}
    while leaving:  # the memories that stay must not undo what leaves
        staying = [m["text"] for m in mems if m["id"] not in leaving]
        if not staying:
            break
        answers = _answers(scorer, tokenize, render, prompts, staying, served)
        still = {i for i in leaving if count(answers, i) >= need}
        if still == leaving:
            break
        leaving = still
    return leaving, {i: f"{k}/{len(prompts)}" for i, k in counts.items()}


def measure(
    model_path: Path,
    candidate: Path,
    mems: list[dict[str, Any]],
    prompts: list[list[dict[str, Any]]],
    threads: int = 0,
    served: Served | None = None,
    check: Check | None = None,
) -> dict[str, dict[str, Any]]:
    """``{str(id): {"gap", "base_gap", "kept", "closed"}}`` for each memory (``{"id", "text"}``):
    the gaps on the user's held-out ``prompts`` (chat messages without memories; none: the
    first general ones), along the answers ``served`` writes (greedy, nothing forced, without
    it); "kept" (None for a memory ``check`` cannot test) and "closed" from ``kept_alone`` on
    those prompts and general ones, ``CHECK_PROMPTS`` in all (no ``check``: none closes). {}
    without memories."""
    from clawd.adapters.gate import GENERAL

    if not mems:
        return {}
    general = [[{"role": "user", "content": q}] for q in GENERAL]
    probes = (prompts + general)[:CHECK_PROMPTS]
    tpl = ChatTemplate.from_gguf(model_path)
    scorer = Scorer(model_path, n_ctx=2048, threads=threads)

    def tokenize(text: str) -> list[int]:
        return scorer.llm.tokenize(text.encode(), add_bos=False, special=True)

    write = served or _greedy
    on = prompts or probes[:4]
    out: dict[str, dict[str, Any]] = {}
    try:
        base = {m["id"]: _gap(scorer, tokenize, tpl.render, m["text"], on, write) for m in mems}
        scorer.set_adapter(candidate)
        closed, kept = kept_alone(
            scorer, tokenize, tpl.render, mems, probes, write, check or (lambda _: None)
        )
        for m in mems:
            gap = _gap(scorer, tokenize, tpl.render, m["text"], on, write)
            out[str(m["id"])] = {
                "gap": round(gap, 5),
                "base_gap": round(base[m["id"]], 5),
                "kept": kept.get(m["id"]),
                "closed": m["id"] in closed,
            }
    finally:
        scorer.close()
    return out


if __name__ == "__main__":
    base_path, adapter = Path(sys.argv[1]), Path(sys.argv[2])
    qs = [[{"role": "user", "content": q}] for q in sys.argv[4:]]
    print(measure(base_path, adapter, [{"id": 1, "text": sys.argv[3]}], qs))
