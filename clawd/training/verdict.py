"""The gate's verdict on one update: the gate itself, the walk-back to an earlier point of the
update when the whole one harms, and each memory's gap once it passed.

``clawd.training.train`` runs it after the update; it writes nothing but the gaps (to the store)
and, on a walk-back, the point served into the run's folder (``clawd.training.earlier``). The gap
is read along the answer as the daemon serves it (``served_answer``: the memory's shape, in
llama.cpp, with consolidation's decode loop ``clawd.training.greedy.shaped_decode``).

Run alone to see one memory's served answer on the base model::

    python -m clawd.training.verdict MODEL.gguf "Address the user as Ana." "What is tea?"
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from clawd.store import memories
from clawd.store.db import Store
from clawd.training.update import UpdateInputs


def verdict_on(
    store: Store,
    home: Path,
    inputs: UpdateInputs,
    result: dict[str, Any],
    current: dict[str, Any] | None,
    tmp: Path,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The gate's verdict on the update (or on the earlier point of it that serves, which the
    second value names), with each memory's gap when it passed."""
    from clawd.adapters import gate
    from clawd.adapters.export import export_gguf
    from clawd.training import earlier

    cfg, model_path = inputs.cfg, inputs.model_path
    heldout = [gate.HeldOut(**h) for h in result["heldout"]]

    def judge(candidate: Path) -> dict[str, Any]:
        return gate.evaluate(
            model_path,
            candidate,
            Path(current["path"]) / "adapter.gguf" if current else None,
            heldout,
            result["general"],
            result["own_prompts"],
            max_kl=cfg.gate_max_kl,
            step_kl=cfg.gate_step_kl,
            ability_alpha=cfg.gate_ability_alpha,
            loop_samples=cfg.gate_loop_samples,
            cache=home / "cache" / f"gate-{inputs.digest[:16]}.json",
            threads=cfg.train_threads,
        )

    verdict, point = earlier.walk_back(
        tmp,
        judge(tmp / "adapter.gguf"),
        result.get("earlier", []),
        result["ended"]["steps"],
        judge,
        lambda peft, gguf: export_gguf(peft, model_path, gguf),
    )
    if verdict["passed"] and inputs.memory:  # how far the adapter has learned each memory
        from clawd.adapters import memgap
        from clawd.signals.kept import checker

        verdict["memories"] = memgap.measure(
            model_path,
            tmp / "adapter.gguf",
            inputs.memory["memories"],
            inputs.memory["heldout"],
            threads=cfg.train_threads,
            served=served_answer,
            check=checker,
        )
        memories.record_gaps(store, {int(k): v for k, v in verdict["memories"].items()})
    return verdict, point


def served_answer(
    scorer: Any, prompt: list[int], texts: list[str]
) -> tuple[list[int], list[float]]:
    """The gap measurement's answer (``clawd.adapters.memgap.Served``): greedy, in llama.cpp,
    under the memories' shape as the daemon serves a conversation's first answer."""
    from clawd.adapters.memgap import ANSWER_TOKENS
    from clawd.signals.avoid import llama_classes
    from clawd.signals.shaping import shape_of
    from clawd.training.greedy import shaped_decode

    scorer.restart()
    shape = shape_of(texts, first_answer=True)
    return shaped_decode(
        scorer.next_token,
        prompt,
        shape,
        scorer.encode,
        scorer.piece,
        ANSWER_TOKENS,
        scorer.is_end,
        scorer.llm.token_eos(),
        llama_classes(scorer.llm) if shape.avoid or shape.closes else None,
    )


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python -m clawd.training.verdict MODEL.gguf MEMORY PROMPT")
    from clawd.adapters.scoring import Scorer
    from clawd.chattemplate import ChatTemplate

    gguf, memory, prompt = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    block, _, _ = memories.system_block([{"id": 0, "text": memory}], len, 1 << 30)
    messages = memories.with_memories([{"role": "user", "content": prompt}], block)
    scorer = Scorer(gguf)
    ids = scorer.llm.tokenize(ChatTemplate.from_gguf(gguf).render(messages).encode(), special=True)
    answer, forced = served_answer(scorer, ids, [memory])
    print(repr(scorer.llm.detokenize(answer).decode()), f"{int(sum(forced))} tokens forced")
    scorer.close()
