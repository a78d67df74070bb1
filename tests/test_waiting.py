"""What a run would take: samples answered by another base model wait for it and the refusal
says so (once their token ids trained the new model as other words)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawd.signals.waiting import next_run, why_no_run
from clawd.store.db import Store
from fixtures.samples import add_sample


@pytest.fixture
def store(home: Path):
    with Store.open(home) as s:
        yield s


def answered_by(store: Store, sample_id: int, sha: str | None) -> None:
    turn = store.db["samples"].get(sample_id)["turn_id"]
    store.db["turns"].update(turn, {"model_sha256": sha})


def test_samples_of_another_base_model_wait_and_the_refusal_says_why(
    store: Store, smollm2_gguf: Path
) -> None:
    old = [add_sample(store, smollm2_gguf, hint="Be brief.", reward=-1.0, kind="opd+rl")]
    old.append(add_sample(store, smollm2_gguf, hint=None, reward=1.0, kind="rl"))
    for i in old:
        answered_by(store, i, "sha-of-the-old-model")
    why = why_no_run(store, "combined", 0, "sha-of-the-new-model")
    assert why and "2 approved samples were answered by another base model" in why
    new, _, why = next_run(store, "combined", 0, base_sha256="sha-of-the-old-model")
    assert why is None and sorted(r["id"] for r in new) == sorted(old)
    mine = add_sample(store, smollm2_gguf, hint="Be brief.", reward=-1.0, kind="opd+rl")
    answered_by(store, mine, "sha-of-the-new-model")
    unknown = add_sample(store, smollm2_gguf, hint="Say hi.", reward=-1.0, kind="opd")
    answered_by(store, unknown, None)  # a turn recorded before digests were kept
    new, _, why = next_run(store, "combined", 0, base_sha256="sha-of-the-new-model")
    assert why is None and sorted(r["id"] for r in new) == sorted([mine, unknown])
    assert store.waiting_samples(("opd+rl", "opd", "rl"), "sha-of-the-new-model") == (2, 2)


def test_samples_that_tie_still_run_while_a_memory_waits_to_be_learned(
    store: Store, smollm2_gguf: Path
) -> None:
    """A content user (every answer thanked, no hint) gives the reward term nothing, but an
    active memory is still to be distilled: with the memory setting on, the run goes ahead;
    with it off, or once no memory is active, the samples wait as before."""
    from clawd.store import memories

    for q in ("Name a colour.", "Name a fruit."):
        add_sample(store, smollm2_gguf, hint=None, reward=1.0, kind="rl", question=q)
    assert "scored +1" in str(why_no_run(store, "combined", 0, memory=True))
    mem, _ = memories.add(store, "Address the user as Ana.", "name", source="user")
    new, _, why = next_run(store, "combined", 0, memory=True)
    assert why is None and len(new) == 2
    assert "scored +1" in str(why_no_run(store, "combined", 0, memory=False))
    memories.sync_learned(store, "v1", [mem["id"]])  # in the weights: nothing left to distil
    assert "scored +1" in str(why_no_run(store, "combined", 0, memory=True))
