"""Earlier points of an update, for the gate to fall back on when the whole update harms.

An update is a few small steps; the gate judges where they end. On SmolLM2-135M most rejected
updates were rejected for a loop ("1. 1. 1. ...") that the last steps had made, at a KL of
0.01-0.04 nats from the parent: the update moved the right way and one step too far, and its
samples then waited for a run that often did the same. So the trainer keeps the LoRA weights at
a few kept step counts (``on_grid``: 1, 2, 3, 4, 6, 8, 12, ... so that memory grows with the log
of the steps), writes the ones at about half and a quarter of the update's steps
(``points_to_try``) next to the adapter (and, before them, every PPO step with about half of
the memory steps, when ``clawd.training.consolidate.learn_forced`` took some), and when the gate
rejects the whole update for harm only (drift, ability: ``HARM``) the run asks the gate about
those, latest first, and serves the first that passes every check (``walk_back``). A rejection
on the held-out checks says the update went the wrong way, not too far: nothing is walked back
then.

Run alone to print the points an update of N steps would try::

    python -m clawd.training.earlier N [RETRIES]
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Checks that an update can fail by going too far in a right direction.
HARM = frozenset(
    {"drift_under_limit", "step_under_limit", "general_ability", "own_prompts_ability"}
)


def on_grid(steps: int) -> bool:
    """Whether the weights after ``steps`` kept steps are kept: 1, 2, 3, 4, 6, 8, 12, 16, ...
    (2^k and 3 x 2^k), so that any later step count has one at or under its half within a
    factor 1.5."""
    if steps < 1:
        return False
    while steps % 2 == 0:
        steps //= 2
    return steps in (1, 3)


def points_to_try(steps: int, kept: list[int], retries: int) -> list[int]:
    """The kept step counts to ask the gate about after an update of ``steps`` steps failed:
    the latest at or under half of ``steps``, then under a quarter, ... (``retries`` at most,
    each earlier than the last)."""
    out: list[int] = []
    target = steps / 2
    for _ in range(retries):
        below = [k for k in kept if 1 <= k <= target and (not out or k < out[-1])]
        if not below:
            break
        out.append(max(below))
        target = out[-1] / 2
    return out


def walk_back(
    tmp: Path,
    verdict: dict[str, Any],
    earlier: list[dict[str, Any]],
    steps: int,
    judge: Callable[[Path], dict[str, Any]],
    export: Callable[[Path, Path], None],
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """After the gate's ``verdict`` on the whole update (``steps`` steps) in ``tmp``: the verdict
    to record and the earlier point served instead (None: the whole update stands, passed or
    rejected).

    ``earlier`` are the points ``update`` wrote (``steps``, ``lr``, ``kl_coef``, ``peft``: a
    folder relative to ``tmp``), latest first. Each is exported (``export(peft, gguf)``) and
    judged (``judge(gguf)``) while every check failed so far is a harm check (an error doing so
    ends the walk, recorded, and the whole update's verdict stands). The first to pass
    replaces ``tmp/peft`` and ``tmp/adapter.gguf``; its verdict is recorded. If none passes the
    whole update's verdict is kept, with what was tried. Either way the verdict says so under
    ``walked_back``, and the points' folders are removed."""
    tried: list[dict[str, Any]] = []
    served: dict[str, Any] | None = None
    last = verdict
    try:
        for point in earlier:
            failed = {k for k, ok in last["checks"].items() if not ok}
            if last["passed"] or not failed <= HARM:
                break
            peft = tmp / point["peft"]
            gguf = peft.parent / "adapter.gguf"
            try:
                export(peft, gguf)
                last = judge(gguf)
            except Exception as exc:  # the whole update's verdict stands, kept for inspection
                tried.append({"steps": point["steps"], "passed": False, "error": str(exc)})
                break
            tried.append(
                {
                    "steps": point["steps"],
                    **({"memory_steps": point["memory_steps"]} if "memory_steps" in point else {}),
                    "passed": last["passed"],
                    "failed": sorted(k for k, ok in last["checks"].items() if not ok),
                    "kl_to_parent": last["kl_to_parent"],
                    "kl_to_base": last["kl_to_base"],
                }
            )
            if last["passed"]:
                served = point
                shutil.rmtree(tmp / "peft")
                peft.replace(tmp / "peft")
                gguf.replace(tmp / "adapter.gguf")
    finally:
        shutil.rmtree(tmp / "earlier", ignore_errors=True)
    if not tried:
        return verdict, None
    whole = {
        "steps": steps,
        "failed": sorted(k for k, ok in verdict["checks"].items() if not ok),
        "kl_to_parent": verdict["kl_to_parent"],
        "kl_to_base": verdict["kl_to_base"],
    }
    record: dict[str, Any] = {
        "whole": whole,
        "tried": tried,
        "served_steps": served and served["steps"],
        "served_memory_steps": served.get("memory_steps", 0) if served else 0,
    }
    record["summary"] = describe(record)  # what the CLI and the TUI show
    return {**(last if served else verdict), "walked_back": record}, served


def describe(walked: dict[str, Any]) -> str:
    """A ``walked_back`` record in words."""
    whole = walked["whole"]
    head = f"the whole update ({whole['steps']} steps) failed {', '.join(whole['failed'])}"
    if walked.get("served_memory_steps"):
        return (
            f"{head}; serving its {walked['served_steps']} steps and the first "
            f"{walked['served_memory_steps']} of its memory steps, which passed"
        )
    if walked.get("served_steps"):
        return f"{head}; serving its first {walked['served_steps']} steps, which passed"

    def point(t: dict[str, Any]) -> str:
        memory = f" + {t['memory_steps']} memory steps" if t.get("memory_steps") else ""
        return f"{t['steps']} steps{memory} ({t.get('error') or ', '.join(t['failed'])})"

    tried = ", ".join(point(t) for t in walked["tried"])
    return f"{head}; earlier points failed too: {tried}"


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python -m clawd.training.earlier STEPS [RETRIES]")
    n, retries = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) == 3 else 2
    kept = [k for k in range(1, n) if on_grid(k)]
    print(f"kept: {kept}")
    print(f"tried after a rejection: {points_to_try(n, kept, retries)}")
