"""How a training process's OpenMP threads wait: set by the daemon's scheduler (serving) before
it starts a training process, by ``clawd learn train`` before torch loads, and passed to Ray's
workers. Shared, so that serving need not import training for it.

Run alone to print what a training process started from this environment gets::

    python -m clawd.threads
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# libgomp (torch's OpenMP on Linux) lets a thread spin at each barrier before it sleeps. Beside
# other busy processes a spinning thread holds a core that the thread it waits for needs. With
# 1,000 spins a training test beside one busy loop per core took 72-75 s instead of 183-197 s,
# and 41-42 s instead of 40 s on the idle machine; OMP_WAIT_POLICY=PASSIVE (no spinning) took
# 75-81 s busy but 52 s idle (bench/busy.py; docs/experiments.md, "The test suite beside a busy
# machine").
OPENMP_ENV = {"GOMP_SPINCOUNT": "1000"}
OPENMP_WAIT = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # the user's own say in it


def openmp_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The OpenMP settings a training process starts with, unless ``environ`` already says how
    OpenMP threads wait (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``). They take effect only in a
    process that has not yet imported torch."""
    if any(name in environ for name in OPENMP_WAIT):
        return {}
    return dict(OPENMP_ENV)


def openmp_wait(environ: Mapping[str, str]) -> dict[str, str]:
    """How ``environ``'s OpenMP threads wait, clawd's setting where it says nothing: what a
    process started elsewhere (a Ray worker) needs to wait as this one does."""
    return {k: environ[k] for k in OPENMP_WAIT if k in environ} or dict(OPENMP_ENV)


if __name__ == "__main__":
    print(openmp_env(os.environ) or "(the environment already says how OpenMP threads wait)")
