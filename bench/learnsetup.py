"""The learning benchmark's methods and configurations (``bench/learning.py`` runs them).

A method is a set of daemon settings and where its signals come from (the system's own judge,
or ``oracle``: the persona's checkers and rules); a configuration is which personas, methods,
updates and sizes one run covers. Run alone to list both::

    python -m bench.learnsetup
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.personas import PERSONAS

METHODS: dict[str, dict[str, Any]] = {
    "rl": {"label": "binary RL only (own judge)", "train_method": "rl"},
    "opd": {"label": "OPD only (own judge + hints)", "train_method": "opd"},
    "combined": {"label": "combined, hint in user message", "train_method": "combined"},
    "combined-system": {
        "label": "combined, hint as system message",
        "train_method": "combined",
        "hint_placement": "system",
    },
    "oracle": {
        "label": "ORACLE signals (checkers + rules)",
        "train_method": "combined",
        "oracle": True,
    },
    "oracle-system": {
        "label": "ORACLE signals, hint as system message",
        "train_method": "combined",
        "hint_placement": "system",
        "oracle": True,
    },
}


@dataclass
class Config:
    personas: list[str]
    methods: list[str]
    updates: int
    interactions: int = 8  # K per update
    eval_prompts: int = 6  # how many of the prompt set below are scored
    prompts: str = "heldout"  # "heldout" (headline numbers) or "tuning" (choices)
    seeds: list[int] = field(default_factory=lambda: [0])
    answer_tokens: int = 96
    temperature: float = 0.8
    train_lr: float = 1e-3
    train_epochs: int = 2
    judge_votes: int = 3
    judge_max_tokens: int = 96  # the daemon's default
    bypass_gate: bool = False  # serve rejected adapters too: measures the learner, not the gate
    settings: dict[str, str] = field(default_factory=dict)  # more daemon settings (--set)
    users: str = ""  # a users file (bench/users.py) the personas may come from (--users)


CONFIGS = {
    "smoke": Config(["brief"], ["oracle"], 1, interactions=3, eval_prompts=2, answer_tokens=48),
    # 2 personas x 4 updates in under 30 minutes on 2 CPU cores: one judge vote, 6 turns.
    "quick": Config(
        ["brief", "sam"],
        ["rl", "opd", "combined", "oracle"],
        4,
        interactions=6,
        eval_prompts=5,
        judge_votes=1,
        prompts="tuning",  # for choosing between methods
    ),
    "full": Config(list(PERSONAS), list(METHODS), 8, eval_prompts=12, seeds=[0, 1]),
    # The learner's claim, re-checkable in under 30 minutes: brief with oracle signals and the
    # default method (combined).
    "brief": Config(
        ["brief"],
        ["oracle"],
        5,
        interactions=6,
        eval_prompts=20,  # every held-out prompt
        train_lr=1e-4,  # the daemon's defaults: many small steps inside the trust region
        train_epochs=6,
    ),
}


if __name__ == "__main__":
    for name, method in METHODS.items():
        print(f"{name:26} {method['label']}")
    for name, config in CONFIGS.items():
        print(f"--config {name}: {config}")
