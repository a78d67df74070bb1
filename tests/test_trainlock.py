"""One training lock across processes: a run in another process is seen, named, and its
unfinished files are left alone (once the daemon's start-up clean-up deleted a live run's
folder and its idle trigger started a doomed trainer every minute)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawd import trainlock
from clawd.adapters import registry
from clawd.store.db import Store
from clawd.training.train import TrainingError, run_lock

HOLD = """
import sys, time
from pathlib import Path
from clawd import trainlock
with trainlock.hold(Path(sys.argv[1]), "nightly"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_run_in_another_process_is_seen_named_and_left_alone(home: Path) -> None:
    assert trainlock.holder(home) is None
    other = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "held"
        who = trainlock.holder(home)
        assert who and f"pid {other.pid}" in who and "nightly" in who
        with pytest.raises(TrainingError, match=f"in progress \\(pid {other.pid}"):
            with run_lock(home, "manual"):
                raise AssertionError("a held lock was taken")
        unfinished = registry.adapters_dir(home) / ".tmp-live"
        unfinished.mkdir(parents=True)
        with Store.open(home) as store:
            notes = registry.reconcile(store, home)
        assert unfinished.exists() and any("in progress" in n for n in notes)
    finally:
        other.kill()
        other.wait()
    deadline = time.monotonic() + 5
    while trainlock.holder(home) is not None:  # the kernel frees it with the process
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with Store.open(home) as store:
        registry.reconcile(store, home)
    assert not unfinished.exists()
    with run_lock(home, "manual"):
        assert "manual" in (home / trainlock.LOCK_FILE).read_text()
