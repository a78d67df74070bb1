"""A command beside a busy machine: its wall time idle and beside one busy loop per core.

For each environment variant (``NAME=VALUE`` pairs, or ``default`` for none) the command runs
once on the idle machine and once while ``python -c "while True: pass"`` runs once per core
at the normal priority, the way issue 19 asks the test suite to hold up. The variants run side by
side in one invocation, so their ratios compare on the same machine at the same time. Its
default compares how torch's OpenMP threads wait, on one in-process training test:

    .venv/bin/python -m bench.busy
    .venv/bin/python -m bench.busy --variant default --variant OMP_WAIT_POLICY=PASSIVE \\
        -- .venv/bin/python -m pytest -q tests/test_train.py

A variant runs without this process's ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT``, plus its own
pairs. ``default`` is then what the command does by itself: for the tests that is clawd's
setting, since ``tests/conftest.py`` sets ``GOMP_SPINCOUNT`` where neither is set. ``libgomp``
is libgomp's own default, as before clawd set anything.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEST = "tests/test_train.py::test_a_hint_to_answer_in_one_word_lowers_the_long_continuation"
COMMAND = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST]
# "libgomp": nothing set, libgomp's own default (an empty OMP_WAIT_POLICY, which libgomp ignores
# and clawd's openmp_env counts as the user's choice); PASSIVE does not spin; 1000 is clawd's
VARIANTS = ["libgomp", "OMP_WAIT_POLICY=PASSIVE", "GOMP_SPINCOUNT=1000"]


def variant_env(variant: str) -> dict[str, str]:
    """The environment a variant runs in: this one, without OpenMP wait settings, plus its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if variant == "libgomp":
        env["OMP_WAIT_POLICY"] = ""
    elif variant != "default":
        for pair in variant.split(","):
            name, sep, value = pair.partition("=")
            if not sep or not name:
                raise SystemExit(f"--variant {variant!r}: NAME=VALUE[,...], default or libgomp")
            env[name] = value
    return env


def timed(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.monotonic()
    rc = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL).returncode
    return time.monotonic() - start, rc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--variant", action="append", help="NAME=VALUE[,...], default or libgomp; repeatable"
    )
    ap.add_argument("--loops", type=int, default=os.cpu_count() or 1, help="busy loops (cores)")
    ap.add_argument("command", nargs="*", help="the command (after --); a training test by default")
    args = ap.parse_args()
    variants, command = args.variant or VARIANTS, args.command or COMMAND
    rows = []
    for variant in variants:
        env = variant_env(variant)
        idle, rc_idle = timed(command, env)
        loops = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.loops)
        ]
        try:
            busy, rc_busy = timed(command, env)
        finally:
            for p in loops:
                p.kill()
                p.wait()
        rows.append((variant, idle, busy, rc_idle, rc_busy))
        print(f"{variant}: idle {idle:.0f} s (rc {rc_idle}), busy {busy:.0f} s (rc {rc_busy})")
    print(f"\n{' '.join(command)}\n{args.loops} busy loops\n")
    print("| variant | idle | busy | busy / idle |\n|---|---|---|---|")
    for variant, idle, busy, rc_idle, rc_busy in rows:
        fails = "" if rc_idle == rc_busy == 0 else f" (rc {rc_idle}/{rc_busy})"
        print(f"| {variant} | {idle:.0f} s | {busy:.0f} s | {busy / idle:.1f}{fails} |")


if __name__ == "__main__":
    main()
