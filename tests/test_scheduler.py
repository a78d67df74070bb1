"""The daemon's jobs (clawd.serving.scheduler): a scheduled start that cannot start the trainer, and
the idle trigger that starts none the trainer would refuse."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from clawd.config import Settings
from clawd.serving.engine import Engine
from clawd.serving.scheduler import Jobs, TrainerNotStarted
from clawd.store.db import Store
from fixtures.samples import add_sample


def test_a_scheduled_start_that_fails_is_one_event_and_tries_again(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "logs").write_text("a file where the log folder should be")
    # Starting a trainer touches neither the engine nor the models: none is loaded here.
    jobs = Jobs(home, Settings(), cast(Engine, None), "m", home / "m.gguf", home / "m.gguf", "0")
    with pytest.raises(TrainerNotStarted, match=r"could not start the trainer \(api\).*logs"):
        jobs.start_training("api")
    for _ in range(3):  # the idle job every minute: one event, not three
        jobs._scheduled("idle")
    with Store.open(home) as store:
        said = [e["message"] for e in store.events(kind="train")]
    assert len(said) == 1 and said[0].startswith("could not start the trainer (idle)")
    assert "File exists" in said[0] and jobs.trainer is None


def test_the_idle_trigger_starts_no_run_the_trainer_would_refuse(
    home: Path, tiny_qwen3_gguf: Path
) -> None:
    """Complaints alone, no hint: not a run every idle minute; a thanked answer: a start."""
    home.mkdir(parents=True)
    (home / "logs").write_text("a file where the log folder should be")  # a start: an event
    settings = Settings(train_method="rl", train_min_samples=2)
    idle = cast(Engine, SimpleNamespace(last_request_at=0.0))  # no request for ages
    jobs = Jobs(home, settings, idle, "m", home / "m.gguf", home / "m.gguf", "0")
    with Store.open(home) as store:
        for q in ("Name a colour.", "Name a fruit."):
            add_sample(store, tiny_qwen3_gguf, hint=None, reward=-1, kind="rl", question=q)
    try:
        jobs._train_if_idle()
        with Store.open(home) as store:
            assert store.events(kind="train") == []  # not tried
            add_sample(store, tiny_qwen3_gguf, hint=None, reward=1, kind="rl")
        jobs._train_if_idle()
        with Store.open(home) as store:
            [said] = [e["message"] for e in store.events(kind="train")]
        assert said.startswith("could not start the trainer (idle)")
    finally:
        jobs.stop()


def test_the_idle_trigger_backs_off_after_failed_runs(home: Path) -> None:
    """Once a run that could never succeed was started by the idle trigger every minute."""
    with Store.open(home) as store:
        assert not Jobs._backing_off(store)

        def run(status: str, finished: float) -> None:
            store.db["training_runs"].insert(
                {"status": status, "started_at": finished - 5, "finished_at": finished}
            )

        run("succeeded", 1000.0)
        assert not Jobs._backing_off(store, now=1001.0)
        run("failed", 2000.0)  # one failure: 2 minutes
        assert Jobs._backing_off(store, now=2000.0 + 119)
        assert not Jobs._backing_off(store, now=2000.0 + 121)
        run("failed", 3000.0)  # two in a row: 4 minutes
        assert Jobs._backing_off(store, now=3000.0 + 239)
        assert not Jobs._backing_off(store, now=3000.0 + 241)
        for i in range(10):
            run("failed", 4000.0 + i)
        assert Jobs._backing_off(store, now=4009.0 + 6 * 3600 - 1)  # at most 6 hours
        assert not Jobs._backing_off(store, now=4009.0 + 6 * 3600 + 1)
        run("succeeded", 30000.0)
        assert not Jobs._backing_off(store, now=30001.0)
