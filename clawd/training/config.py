"""The settings of one training run: the user's training settings and the constants beside them.

A field named like a ``Settings`` field is that setting, under the same name, checked there
(``clawd.config``); the others are constants users never set, checked here on creation.
Shared by the run (``clawd.training.train``) and the update (``clawd.training.ppo``), so that
neither imports the other for it.

Run alone to print the run settings the effective configuration gives::

    python -m clawd.training.config
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from clawd.adapters.loops import ALPHA
from clawd.config import Settings, load_settings
from clawd.store.db import RUN_SAMPLES


@dataclass
class TrainConfig:
    """One run's settings: the user's training settings, under their ``Settings`` names, and
    the constants beside them that users never set."""

    rank: int = 16
    alpha: float = 32.0
    train_lr: float = 1e-4
    train_epochs: int = 6
    batch_size: int = 4
    max_samples: int = RUN_SAMPLES  # waiting samples one run takes, the oldest first
    eps_low: float = 0.2
    eps_high: float = 0.28
    # Initial coefficient of the KL-to-base penalty, adapted per step to keep the KL to base
    # per token near gate_max_kl.
    train_kl_coef: float = 0.05
    # Trust region: stop the update's steps past this KL to the pre-update weights.
    train_target_kl: float = 0.05
    # A step landing past overshoot x train_target_kl is undone and retaken at half the rate
    # (ppo.train_steps), at most max_halvings times an update.
    overshoot: float = 2.0
    max_halvings: int = 4
    train_replay: int = 16  # earlier trained samples replayed per run, at most as many as new ones
    # The OPD term on the student's own answers taken relative to its expectation under the
    # student at each position (losses.opd_kl_baseline): without it the term is -KL <= 0 on
    # average and pushes every sampled answer down wherever the hint changes anything. On by
    # default: on `brief` over 4 seeds it served more updates, drifted less and fell less
    # (docs/experiments.md, "The claim config on `brief`").
    train_opd_baseline: bool = True
    train_method: str = "combined"  # the advantage's terms: combined, opd or rl (w_opd, w_rl)
    hint_placement: str = "user"
    norm_tokens: int = 256  # normaliser = batch_size x norm_tokens, a constant
    n_ctx: int = 4096  # the longest sample (prompt and answer) that trains, in tokens
    grad_clip: float = 1.0
    train_threads: int = 0
    seed: int = 0
    gate_max_kl: float = 0.5  # cumulative drift budget: KL to the base model
    gate_step_kl: float = 0.25  # per-update drift limit: KL to the parent adapter
    # Significance of the gate's ability test (clawd.adapters.loops.general_ability); 0 only
    # in tests.
    gate_ability_alpha: float = ALPHA
    gate_prompts: int = 32  # general prompts of the ability check (fewer only in tests)
    # The user's own prompts (this run's samples, newest first) the ability check also asks:
    # a served adapter looped ("1. 1. 1. ...") on a user's question and on no general prompt.
    gate_own_prompts: int = 16
    # Answers sampled at the daemon's temperature to confirm a new greedy loop
    # (clawd.adapters.loops); 0: every greedy loop counts.
    gate_loop_samples: int = 0
    # Earlier points of a rejected update (about half its steps, then a quarter) the gate judges
    # when the whole update failed for drift or ability only; the first to pass serves
    # (clawd.training.earlier). 0 = off.
    gate_retries: int = 2
    # Unlikelihood on repeats (clawd.training.repeats): weight of a term that pushes down the
    # tokens repeating an earlier 4-gram of their own answer, in the training answers and in
    # the starting weights' greedy answers to the user's own prompts (not the gate's general
    # ones, which it measures drift on: docs/experiments.md, "Unlikelihood on the user's own
    # prompts only"). 0 = off. At 1 the claim config reached brief 0.90 and calm 1.00
    # (0.80 and 0.90 without), and the held-out user river's 0.80 has no looping answer (4 of
    # 10 without) (docs/experiments.md, "Unlikelihood on repeated phrases").
    train_unlikelihood: float = 1.0

    def __post_init__(self) -> None:
        """Check the constants; the settings' bounds are checked once, by ``Settings``."""
        checks = {
            "rank": 1 <= self.rank <= 512,
            "alpha": self.alpha > 0,
            "batch_size": 1 <= self.batch_size <= 256,
            "eps_low": 0 < self.eps_low < 1,
            "eps_high": 0 < self.eps_high < 10,
            "overshoot": self.overshoot >= 1,
            "max_halvings": 0 <= self.max_halvings <= 20,
            "norm_tokens": self.norm_tokens >= 1,
            "gate_prompts": 1 <= self.gate_prompts <= 32,
            "gate_own_prompts": 0 <= self.gate_own_prompts <= 256,
            "gate_ability_alpha": 0 <= self.gate_ability_alpha < 1,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid training setting(s): {', '.join(bad)}")

    @property
    def w_opd(self) -> float:
        """Weight of the advantage's OPD term (the hint): 0 when ``train_method`` is rl."""
        return 0.0 if self.train_method == "rl" else 1.0

    @property
    def w_rl(self) -> float:
        """Weight of the advantage's RL term (the reward): 0 when ``train_method`` is opd."""
        return 0.0 if self.train_method == "opd" else 1.0

    @classmethod
    def from_settings(cls, s: Settings) -> TrainConfig:
        """The run settings of ``s``: its value of every field named like a setting, the
        constants' defaults for the rest."""
        shared = [f.name for f in fields(cls) if f.name in Settings.model_fields]
        return cls(**{name: getattr(s, name) for name in shared})


if __name__ == "__main__":
    for key, value in asdict(TrainConfig.from_settings(load_settings())).items():
        print(f"{key} = {value}")
