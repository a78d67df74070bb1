"""Who trains: one lock across processes, in ``CLAWD_HOME/train.lock``.

A training run holds an exclusive ``flock`` on the file for as long as it runs and writes who
it is into it (pid, trigger, start). Every other process asks ``holder`` before it starts a
trainer or cleans up what looks like a dead run's files: the daemon's idle trigger, ``POST
/v1/train``, ``clawd train --now`` and the start-up clean-up of ``CLAWD_HOME/adapters``. The
kernel releases the lock when the holder dies, however it dies, so a crashed run never blocks
the next one.

Run alone to see who holds it::

    python -m clawd.trainlock
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from clawd.config import clawd_home

LOCK_FILE = "train.lock"


class Held(Exception):
    """Another process trains; the message says which."""


def _describe(text: str) -> str:
    try:
        info = json.loads(text)
        since = time.strftime("%H:%M", time.localtime(float(info["started_at"])))
        return f"pid {info['pid']}, {info['trigger']}, since {since}"
    except (ValueError, KeyError, TypeError):
        return "a trainer that did not say who it is"


@contextlib.contextmanager
def hold(home: Path, trigger: str = "manual") -> Iterator[None]:
    """Hold the training lock while the block runs; raises ``Held`` naming the holder."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / LOCK_FILE, "a+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            raise Held(f"another training run is in progress ({_describe(fh.read())})") from None
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "trigger": trigger, "started_at": time.time()}))
        fh.flush()
        try:
            yield
        finally:
            fh.seek(0)
            fh.truncate()


def holder(home: Path) -> str | None:
    """Who holds the training lock now ("pid 123, nightly, since 03:30"), or None."""
    path = home / LOCK_FILE
    if not path.exists():
        return None
    with open(path, "a+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            return _describe(fh.read())
        fcntl.flock(fh, fcntl.LOCK_UN)
        return None


if __name__ == "__main__":
    print(holder(clawd_home()) or "nobody trains now")
