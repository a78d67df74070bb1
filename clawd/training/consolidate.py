"""Consolidation: each training run distils the user's memories into the adapter.

The memories (``clawd.store.memories``) shape every answer from the system message; a training
run teaches the model to answer as it does with them without them (context distillation:
Askell et al. 2021, Snell et al. 2022). On the user's recent prompts, the *teacher* is the
model with the memories in the system message and the *student* the same prompt without them;
the teacher writes its answer (greedy, ``ANSWER_TOKENS`` at most, with the update's starting
weights) and the existing token-level OPD term, ``teacher_lp - old_lp`` on each of its tokens,
moves the student toward it inside the same clipping, trust region and KL budget as every
other sample.

The teacher answers as the daemon serves them: under the memories' shape
(``clawd.signals.shaping``: the name opening the answer, the end where a length limit falls, a
closing question), which a small model's system message alone does not give (SmolLM2-135M
wrote "Address the user as Noor." into 1 answer of 32). The tokens decoding forced are marked;
the update trains them by likelihood (``losses.likelihood_loss``), outside the clipping and
the trust region that a token at probability 1e-5 could never leave: the memory says what they
are, no sample has to find them. Distilling the unshaped teacher taught nothing in 4 updates
(docs/experiments.md, "consolidation of `noor`'s memories over four updates").

The prompts come from the store (``memory_inputs``): the user's newest distinct prompts of
conversations that may be learned from; every third is held out, never trained on, for the
gate's gap measurement (``clawd.adapters.memgap``). Memories already learned are distilled too, so
that a later update keeps them.

Run alone to see what the next run would distil::

    python -m clawd.training.consolidate
"""

from __future__ import annotations

import json
from typing import Any

from clawd.signals.shaping import shape_of
from clawd.store import memories
from clawd.store.db import Store
from clawd.training.batches import Example
from clawd.training.greedy import greedy_answers, shaped_answer

# The teacher's answer per prompt: room for a length limit of three sentences to end it.
ANSWER_TOKENS = 96
PROMPTS = 12  # the user's newest distinct prompts a run reads
HELD_OUT_EVERY = 3  # every third is kept for the gap measurement


def memory_inputs(store: Store, prompts: int = PROMPTS) -> dict[str, Any] | None:
    """What a run distils: the memories (active and learned: ``{"id", "text"}``), the user's
    prompts to train on and those held out (each a list of chat messages, the client's own,
    without memories). None when there is no memory or no prompt."""
    mems = [
        {"id": m["id"], "text": m["text"]} for m in memories.in_prompt(store, include_learned=True)
    ]
    if not mems:
        return None
    seen: set[str] = set()
    picked: list[list[dict[str, Any]]] = []
    rows = store.db.execute(
        "SELECT t.prompt_messages FROM turns t JOIN conversations c ON c.id = t.conversation_id "
        "WHERE t.learn = 1 AND c.learn = 1 ORDER BY t.created_at DESC LIMIT ?",
        [prompts * 8],
    )
    for (raw,) in rows.fetchall():
        messages = [m for m in json.loads(raw or "[]") if m.get("role") != "system"]
        last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        if last is None:
            continue
        key = json.dumps(last.get("content"))
        if key in seen:
            continue
        seen.add(key)
        picked.append([last])  # the question alone: the memory, not the conversation, teaches
        if len(picked) >= prompts:
            break
    if not picked:
        return None
    heldout = picked[HELD_OUT_EVERY - 1 :: HELD_OUT_EVERY]
    train = [p for i, p in enumerate(picked) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1]
    return {"memories": mems, "train": train, "heldout": heldout}


def teacher_messages(
    messages: list[dict[str, Any]], mems: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``messages`` with every memory in the system block, as the daemon serves them."""
    block, _, _ = memories.system_block(mems, len, 1 << 30)  # no budget: all of them
    return memories.with_memories(messages, block)


def memory_examples(
    model: Any,
    tok: Any,
    template: Any,
    memory: dict[str, Any] | None,
    eos: list[int],
    max_seq_len: int,
    device: Any = "cpu",
) -> tuple[list[Example], dict[str, Any]]:
    """One OPD example per training prompt of ``memory`` (``memory_inputs``): student view
    without the memories, teacher view with them, the teacher's greedy answer under the
    memories' shape as the response, its forced tokens marked. Sample ids are negative (-1,
    -2, ...): these are no stored samples. Returns the examples and what the report says of
    them."""
    if not memory or not memory["train"]:
        return [], {}
    block = teacher_messages([], memory["memories"])[0]["content"]

    def ids(messages: list[dict[str, Any]]) -> list[int]:
        return tok(template.render(messages), add_special_tokens=False)["input_ids"]

    students = [ids(p) for p in memory["train"]]
    teachers = [ids(teacher_messages(p, memory["memories"])) for p in memory["train"]]
    model.eval()
    # one-question prompts: the first answer of a conversation, which opens with the name
    shape = shape_of([m["text"] for m in memory["memories"]], first_answer=True)
    if shape:
        shaped = [shaped_answer(model, t, shape, tok, ANSWER_TOKENS, eos) for t in teachers]
    else:
        shaped = [(a, []) for a in greedy_answers(model, teachers, ANSWER_TOKENS, eos)]
    out = []
    for i, (s, t, (a, forced)) in enumerate(zip(students, teachers, shaped, strict=True)):
        if not a or max(len(s), len(t)) + len(a) > max_seq_len:
            continue
        out.append(Example(-(i + 1), "opd", block, 0.0, s, t, a, device, forced=forced))
    answers = [a for a, _ in shaped]
    report = {
        "memories": [m["id"] for m in memory["memories"]],
        "prompts": len(memory["train"]),
        "heldout_prompts": len(memory["heldout"]),
        "examples": len(out),
        "shape": shape.describe(),
        "forced_tokens": int(sum(sum(f) for _, f in shaped)),
        "answers": [tok.decode(a, skip_special_tokens=True)[:200] for a in answers[:3]],
    }
    return out, report


if __name__ == "__main__":
    with Store.open() as store:
        print(json.dumps(memory_inputs(store), indent=1))
