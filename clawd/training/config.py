"""The settings of one training run, checked on creation, and how they follow from ``Settings``.

Shared by the run (``clawd.training.train``) and the update (``clawd.training.ppo``), so that
neither imports the other for it.

Run alone to print the run settings the effective configuration gives::

    python -m clawd.training.config
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from clawd.adapters.loops import ALPHA
from clawd.config import Settings, load_settings
from clawd.store.db import RUN_SAMPLES


@dataclass
class TrainConfig:
    rank: int = 16
    alpha: float = 32.0
    lr: float = 1e-4
    epochs: int = 6
    batch_size: int = 4
    max_samples: int = RUN_SAMPLES  # waiting samples one run takes, the oldest first
    eps_low: float = 0.2
    eps_high: float = 0.28
    kl_coef: float = 0.05  # initial coefficient of the KL-to-base penalty, adapted per step
    base_kl_target: float = 0.5  # the penalty adapts to keep KL to base per token near this
    target_kl: float = 0.05  # trust region: stop the update's steps past this KL to pre-update
    # A step landing past overshoot x target_kl is undone and retaken at half the rate
    # (ppo.train_steps), at most max_halvings times an update.
    overshoot: float = 2.0
    max_halvings: int = 4
    replay: int = 16  # earlier trained samples replayed per run, at most as many as new ones
    # The OPD term on the student's own answers taken relative to its expectation under the
    # student at each position (losses.opd_kl_baseline): without it the term is -KL <= 0 on
    # average and pushes every sampled answer down wherever the hint changes anything. On by
    # default: on `brief` over 4 seeds it served more updates, drifted less and fell less
    # (docs/experiments.md, "The claim config on `brief`").
    opd_baseline: bool = True
    w_opd: float = 1.0
    w_rl: float = 1.0
    hint_placement: str = "user"
    norm_tokens: int = 256  # normaliser = batch_size x norm_tokens, a constant
    max_seq_len: int = 4096
    grad_clip: float = 1.0
    threads: int = 0
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
    unlikelihood: float = 1.0

    def __post_init__(self) -> None:
        checks = {
            "rank": 1 <= self.rank <= 512,
            "alpha": self.alpha > 0,
            "lr": 0 < self.lr < 1,
            "epochs": 1 <= self.epochs <= 100,
            "batch_size": 1 <= self.batch_size <= 256,
            "eps_low": 0 < self.eps_low < 1,
            "eps_high": 0 < self.eps_high < 10,
            "kl_coef": self.kl_coef >= 0,
            "base_kl_target": self.base_kl_target >= 0,
            "target_kl": self.target_kl >= 0,
            "overshoot": self.overshoot >= 1,
            "max_halvings": 0 <= self.max_halvings <= 20,
            "replay": 0 <= self.replay <= 4096,
            "gate_max_kl/gate_step_kl": self.gate_max_kl > 0 and self.gate_step_kl > 0,
            "gate_prompts": 1 <= self.gate_prompts <= 32,
            "gate_own_prompts": 0 <= self.gate_own_prompts <= 256,
            "gate_ability_alpha": 0 <= self.gate_ability_alpha < 1,
            "gate_retries": 0 <= self.gate_retries <= 8,
            "gate_loop_samples": 0 <= self.gate_loop_samples <= 64,
            "norm_tokens": self.norm_tokens >= 1,
            "hint_placement": self.hint_placement in ("user", "system"),
            "unlikelihood": 0 <= self.unlikelihood <= 100,
            "w_opd/w_rl": min(self.w_opd, self.w_rl) >= 0 and max(self.w_opd, self.w_rl) > 0,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid training setting(s): {', '.join(bad)}")

    @property
    def method(self) -> str:
        """The ``train_method`` these weights amount to: combined, opd or rl."""
        if self.w_opd and self.w_rl:
            return "combined"
        return "opd" if self.w_opd else "rl"

    @classmethod
    def from_settings(cls, s: Settings) -> TrainConfig:
        return cls(
            lr=s.train_lr,
            epochs=s.train_epochs,
            kl_coef=s.train_kl_coef,
            base_kl_target=s.gate_max_kl,
            target_kl=s.train_target_kl,
            replay=s.train_replay,
            opd_baseline=s.train_opd_baseline,
            w_opd=0.0 if s.train_method == "rl" else 1.0,
            w_rl=0.0 if s.train_method == "opd" else 1.0,
            hint_placement=s.hint_placement,
            max_seq_len=s.n_ctx,
            threads=s.train_threads,
            gate_max_kl=s.gate_max_kl,
            gate_step_kl=s.gate_step_kl,
            gate_retries=s.gate_retries,
            gate_loop_samples=s.gate_loop_samples,
            unlikelihood=s.train_unlikelihood,
        )


if __name__ == "__main__":
    for key, value in asdict(TrainConfig.from_settings(load_settings())).items():
        print(f"{key} = {value}")
