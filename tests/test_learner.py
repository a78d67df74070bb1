"""The learner across runs, on real training runs of the tiny model: the trust region, replay,
a rejected run's samples, held-out rotation; and what a run leaves on disk
(forget, a shared torch cache)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from clawd.store import record
from clawd.store.db import Store
from clawd.training import train
from tests.test_train import add_sample, settings_for, shared_torch_cache, small

__all__ = ["shared_torch_cache"]  # the autouse fixture applies here too


def _status(home: Path, ids: list[int]) -> list[tuple[str, int, int]]:
    with Store.open(home) as store:
        rows = {r["id"]: r for r in store.db["samples"].rows}
    return [(rows[i]["status"], rows[i]["attempts"], rows[i]["heldout_runs"]) for i in ids]


@pytest.mark.slow
def test_the_trust_region_stops_an_update_past_target_kl(tiny_qwen3_gguf: Path, home: Path) -> None:
    with Store.open(home) as store:
        for q in ("Name a colour.", "Name a fruit.", "Name a city.", "Name a tree."):
            add_sample(
                store, tiny_qwen3_gguf, hint="One word.", reward=-1, kind="opd+rl", question=q
            )
    summary = train.run(
        home,
        settings_for(tiny_qwen3_gguf),
        cfg=small(train_epochs=20, train_lr=3e-2, train_target_kl=0.02),
    )
    total = 20 * 2  # epochs x batches of 2
    assert summary["stopped_early"] and 1 <= summary["steps"] < total
    report = json.loads((Path(summary["path"]) / "report.json").read_text())
    assert report["ended"]["stopped_early"] and report["ended"]["kl_step"] > 0.02
    assert all(s["kl_step"] <= 0.02 for s in report["steps"])  # every step taken was inside
    manifest = json.loads((Path(summary["path"]) / "manifest.json").read_text())
    assert manifest["metrics"]["stopped_early"] is True


@pytest.mark.slow
def test_replay_and_a_rejected_run_sending_its_samples_back(
    tiny_qwen3_gguf: Path, home: Path
) -> None:
    settings = settings_for(tiny_qwen3_gguf)
    with Store.open(home) as store:
        first = [
            add_sample(store, tiny_qwen3_gguf, hint="Be brief.", reward=-1, kind="opd+rl"),
            add_sample(store, tiny_qwen3_gguf, hint=None, reward=1, kind="rl", answer="Paris."),
        ]
    one = train.run(home, settings, cfg=small(train_epochs=1))
    assert _status(home, first) == [("used", 0, 0)] * 2
    with Store.open(home) as store:
        store.db["adapters"].update(one["version"], {"status": "active"})
        second = [add_sample(store, tiny_qwen3_gguf, hint="Shorter.", reward=-1, kind="opd+rl")]
    # A drift budget nothing can meet: the candidate is rejected, its sample waits again.
    for attempt in (1, 2):
        out = train.run(home, settings, cfg=small(train_epochs=1, gate_max_kl=1e-12))
        assert out["gate"]["passed"] is False and out["replayed"] == 1
        manifest = json.loads((Path(out["path"]) / "manifest.json").read_text())
        assert manifest["status"] == "rejected" and manifest["replayed"] == [max(first)]
        assert _status(home, second) == [("approved", attempt, 0)]
        assert _status(home, first) == [("used", 0, 0)] * 2  # a replayed sample is not spent
    out = train.run(home, settings, cfg=small(train_epochs=1, gate_max_kl=1e-12))
    assert _status(home, second) == [("dropped", 3, 0)]  # three rejected runs: it stops waiting
    with pytest.raises(train.NothingToTrain):
        train.run(home, settings, cfg=small(train_epochs=1))


@pytest.mark.slow
def test_held_out_samples_rotate_and_train_in_the_next_run(
    tiny_qwen3_gguf: Path, home: Path
) -> None:
    settings = settings_for(tiny_qwen3_gguf)
    with Store.open(home) as store:
        ids = [
            add_sample(
                store, tiny_qwen3_gguf, hint="Be brief.", reward=-1, kind="opd+rl", question=q
            )
            for q in ("A?", "B?", "C?", "D?", "E?")
        ]
    one = train.run(home, settings, cfg=small(train_epochs=1, train_replay=0))
    held = one["gate"]["heldout"]
    manifest = json.loads((Path(one["path"]) / "manifest.json").read_text())
    assert held == 1 and manifest["heldout"] == [ids[4]] and ids[4] not in manifest["samples"]
    # Fewer than 4 held-out samples: the held-out checks are skipped and say so, never passed.
    assert any("held-out" in s for s in one["gate"]["skipped"])
    assert "opd_gap_shrinks" not in one["gate"]["checks"]
    assert _status(home, ids) == [("used", 0, 0)] * 4 + [("approved", 0, 1)]
    two = train.run(home, settings, cfg=small(train_epochs=1, train_replay=0))
    manifest = json.loads((Path(two["path"]) / "manifest.json").read_text())
    assert manifest["samples"] == [ids[4]] and manifest["heldout"] == []
    assert _status(home, ids)[4] == ("used", 0, 1)


@pytest.mark.slow
def test_forget_removes_every_copy_of_the_text(tiny_qwen3_gguf: Path, home: Path) -> None:
    """Turns, signals, samples and training reports: after forgetting a conversation no file
    under CLAWD_HOME holds its words, and the answer says what went."""
    import os

    from clawd.adapters import forget

    secret = "My neighbour's wifi password is hunter2-zebra."
    with Store.open(home) as store:
        sid = add_sample(
            store,
            tiny_qwen3_gguf,
            hint="Never repeat passwords.",
            reward=-1,
            kind="opd+rl",
            answer=secret,
        )
        add_sample(store, tiny_qwen3_gguf, hint=None, reward=1, kind="rl", answer="Paris.")
    summary = train.run(home, settings_for(tiny_qwen3_gguf), cfg=small(train_epochs=1))
    report = Path(summary["path"]) / "report.json"
    assert "Never repeat passwords." in report.read_text()
    with Store.open(home) as store:
        turn = store.db["samples"].get(sid)["turn_id"]
        cid = store.db["turns"].get(turn)["conversation_id"]
        removed = record.delete_conversation(store, cid)
        removed["reports"] = forget.scrub_reports(store, home, removed.pop("sample_ids"))
    assert removed == {
        "votes": 0,
        "samples": 1,
        "signals": 0,
        "feedback": 0,
        "turns": 1,
        "reports": 1,
    }
    for root, _dirs, files in os.walk(home):  # not into the shared torch cache (a symlink)
        for name in files:
            data = (Path(root) / name).read_bytes()
            assert b"hunter2" not in data and b"Never repeat passwords" not in data, name
    assert json.loads(report.read_text())["samples"]  # the other sample's entry stays


@pytest.mark.slow
def test_a_conversion_another_trainer_finished_first_is_used(
    tiny_qwen3_gguf: Path, tmp_path: Path
) -> None:
    """Two daemons sharing a cache convert the same model at once: the second rename finds the
    first one's copy in place and uses it (found by the learning benchmark's --jobs 2)."""
    from clawd.training import torchmodel

    target = torchmodel.cache_dir(tmp_path, tiny_qwen3_gguf, torch.float32)
    torchmodel._convert(tiny_qwen3_gguf, target, torch.float32)
    torchmodel._convert(tiny_qwen3_gguf, target, torch.float32)  # the loser of the race
    assert (target / "config.json").exists()
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".convert-")]


def test_unlikelihood_in_a_training_run(tiny_qwen3_gguf: Path, home: Path) -> None:
    """With the term on, a run writes the starting weights' greedy answers to the user's own
    prompts (not the gate's general ones), keeps those that repeat a 4-token phrase (random
    weights repeat a lot), and every step pays for them; the daemon's setting (on by default)
    reaches the run's configuration."""
    questions = ("Name a colour.", "Name a fruit.", "Name a city.", "Name a tree.")
    with Store.open(home) as store:  # thanked and corrected: something to tell apart
        for i, q in enumerate(questions):
            r = 1 if i % 2 == 0 else -1
            add_sample(store, tiny_qwen3_gguf, hint=None, reward=r, kind="rl", question=q)
    cfg = small(train_epochs=2, train_unlikelihood=1.0)
    summary = train.run(home, settings_for(tiny_qwen3_gguf), cfg=cfg)
    report = json.loads((Path(summary["path"]) / "report.json").read_text())
    found = report["repeating_answers"]
    assert found and all(a["repeated"] >= 1 and a["answer"] for a in found)
    assert report["steps"] and all(s["unlikelihood"] > 0 for s in report["steps"])
    assert "repeats" in report["seconds"]
    # The user's 4 distinct questions only: the gate's general prompts stay untrained.
    assert report["repeats_asked"] == len(questions)
    daemon = settings_for(tiny_qwen3_gguf).model_copy(update={"train_unlikelihood": 0.0})
    assert train.TrainConfig.from_settings(daemon).train_unlikelihood == 0.0
    assert train.TrainConfig.from_settings(settings_for(tiny_qwen3_gguf)).train_unlikelihood == 1.0
