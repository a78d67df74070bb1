"""Training reports: a JSON file with every step and sample, and a PNG plot of the run.

The JSON keeps, for each sample, its response tokens and their OPD advantage (teacher minus
student log-prob), which is what the TUI's *why* view colours.

Run alone to redraw the plot of a report::

    python -m clawd.training.report path/to/report.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def step_line(m: dict[str, Any]) -> str:
    """One step's progress in words: the PPO step's loss, mean advantage and clip fraction, or
    a memory step's (``consolidate.learn_forced``) loss and its forced tokens' cost."""
    if m.get("phase") == "memory":
        return f"loss {m['loss']:+.4f}  memory: forced tokens {m['forced_nll']:.2f} nats"
    return f"loss {m['loss']:+.4f}  adv {m['adv_mean']:+.3f}  clip {m['clip_fraction']:.2f}"


def phase_times(seconds: dict[str, float]) -> str:
    """A run's ``seconds`` per phase as one line: "load 24 s, score 14 s, ..., gate 166 s"."""
    return ", ".join(f"{phase} {s:.0f} s" for phase, s in seconds.items())


def write_report(folder: Path, report: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.png`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "report.json"
    path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return path, plot(report, folder / "report.png")


def plot(report: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = report.get("steps", [])
    xs = [s["step"] for s in steps]
    ppo = [s for s in steps if s.get("phase") != "memory"]  # learn_forced's have no advantage
    px = [s["step"] for s in ppo]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=100)
    ax1.plot(xs, [s["loss"] for s in steps], marker="o", color="C0", label="loss")
    ax1.set_xlabel("step")
    ax1.set_ylabel("loss", color="C0")
    ax1.set_title("loss and drift")
    config = report.get("config", {})
    kl_coef = config.get("train_kl_coef", config.get("kl_coef", 0))  # kl_coef: older reports
    kl_to = "base" if kl_coef > 0 else "pre-update weights"
    twin = ax1.twinx()
    twin.plot(px, [s["kl"] for s in ppo], marker=".", color="C1")
    twin.set_ylabel(f"k3 KL to {kl_to}", color="C1")
    ax2.plot(px, [s["adv_opd"] for s in ppo], marker="o", label="OPD part")
    ax2.plot(px, [s["adv_rl"] for s in ppo], marker="s", label="RL part")
    ax2.plot(px, [s["adv_mean"] for s in ppo], marker=".", label="mean advantage")
    ax2.plot(px, [s["clip_fraction"] for s in ppo], linestyle="--", label="clip fraction")
    ax2.axhline(0.0, color="grey", linewidth=0.5)
    ax2.set_xlabel("step")
    ax2.set_title("advantages")
    ax2.legend(fontsize=8)
    fig.suptitle(
        f"run {report.get('run_id')}: {report.get('n_samples')} samples, {report.get('status')}"
    )
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


if __name__ == "__main__":
    src = Path(sys.argv[1])
    print(plot(json.loads(src.read_text()), src.with_suffix(".png")))
