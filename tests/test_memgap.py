"""The memory gap (``clawd/adapters/memgap.py``) on the real SmolLM2, along the answers as the
daemon serves them (``clawd.training.verdict.served_answer``). Both run with the slow tests (20 s
and 55 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawd.adapters import memgap
from clawd.adapters.scoring import Scorer
from clawd.chattemplate import ChatTemplate
from clawd.signals.kept import checker
from clawd.store import memories
from clawd.training.verdict import served_answer
from fixtures.adapterkit import fit_answer

NAME = "Address the user as Noor."
PROMPTS = [
    [{"role": "user", "content": "What is the capital of Japan?"}],
    [{"role": "user", "content": "How do I boil an egg?"}],
]


@pytest.mark.slow
def test_the_served_answer_opens_with_the_name_and_its_cost_counts_in_the_gap(
    smollm2_gguf: Path,
) -> None:
    """The base model's served answer opens with the forced name, and the gap counts what the
    name costs without the memory: more than along the unshaped answer, which never opens with
    it. A memory without a shape is measured alike both ways."""
    tpl = ChatTemplate.from_gguf(smollm2_gguf)
    scorer = Scorer(smollm2_gguf, threads=2)
    try:
        block, _, _ = memories.system_block([{"id": 0, "text": NAME}], len, 1 << 30)
        prompt = scorer.llm.tokenize(
            tpl.render(memories.with_memories(PROMPTS[0], block)).encode(), special=True
        )
        answer, forced = served_answer(scorer, prompt, [NAME])
        text = scorer.llm.detokenize(answer).decode()
        assert text.startswith("Noor,") and forced[: len(scorer.encode("Noor,"))] == [1.0] * len(
            scorer.encode("Noor,")
        )
        assert 0 < sum(forced) < len(forced)

        def tokenize(s: str) -> list[int]:
            return scorer.llm.tokenize(s.encode(), add_bos=False, special=True)

        def gap(memory: str, served: memgap.Served) -> float:
            return memgap._gap(scorer, tokenize, tpl.render, memory, PROMPTS, served)

        assert gap(NAME, served_answer) > 2 * gap(NAME, memgap._greedy) > 0
        fact = "The user is vegetarian."
        assert gap(fact, served_answer) == pytest.approx(gap(fact, memgap._greedy))
    finally:
        scorer.close()


@pytest.mark.slow
def test_an_adapter_that_opens_with_the_name_without_the_memory_closes_its_gap(
    smollm2_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    """An adapter fitted to open every answer with "Noor," (a collapsed one: it answers alike
    with and without the memory) closes the name's gap and keeps the name on its own, on the
    held-out prompts and the general ones; a fact has no shape to keep and stays."""
    tpl = ChatTemplate.from_gguf(smollm2_gguf)
    scorer = Scorer(smollm2_gguf, threads=2)
    plain = [
        scorer.llm.tokenize(tpl.render(p).encode(), add_bos=False, special=True) for p in PROMPTS
    ]
    answer = scorer.encode("Noor, here is what I know.")
    scorer.close()
    adapter = fit_answer(
        smollm2_gguf, torch_cache, tmp_path, plain, answer, tmp_path / "noor.gguf", steps=30
    )
    mems = [{"id": 7, "text": NAME}, {"id": 8, "text": "The user is vegetarian."}]
    got = memgap.measure(smollm2_gguf, adapter, mems, PROMPTS, 2, served_answer, checker)
    name, fact = got["7"], got["8"]
    kept, n = map(int, name["kept"].split("/"))
    assert n == memgap.CHECK_PROMPTS and kept >= memgap.KEPT * n, name
    assert name["closed"] and name["gap"] < name["base_gap"]
    assert fact["kept"] is None and not fact["closed"]
