"""The daemon's jobs (clawd.scheduler): a scheduled start that cannot start the trainer."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from clawd.config import Settings
from clawd.scheduler import Jobs, TrainerNotStarted
from clawd.serving.engine import Engine
from clawd.store.db import Store


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
