"""Tables and plots of bench/learning.py results: compliance per update and method, drift.

Run alone to redo both from a results file::

    python -m bench.learnreport bench/results/learning-quick.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def plot(result: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ran = {r["persona"] for r in result["runs"]}  # a partial result lacks some
    personas = [p for p in result["config"]["personas"] if p in ran]
    fig, axes = plt.subplots(2, len(personas), figsize=(5 * len(personas), 7), squeeze=False)
    for col, persona in enumerate(personas):
        for method in result["config"]["methods"]:
            runs = [r for r in result["runs"] if r["method"] == method and r["persona"] == persona]
            if not runs:
                continue
            n = min(len(r["rows"]) for r in runs)
            xs = list(range(n))
            ys = [statistics.fmean(r["rows"][i]["compliance"] for r in runs) for i in xs]
            style = "--" if method.startswith("oracle") else "-"
            axes[0][col].plot(xs, ys, style, marker="o", label=result["methods"][method])
            kl = [
                statistics.fmean((r["rows"][i]["train"].get("kl_to_base") or 0) for r in runs)
                for i in xs
            ]
            axes[1][col].plot(xs, kl, style, marker=".", label=method)
        for row in axes:
            row[col].xaxis.get_major_locator().set_params(integer=True)
        axes[0][col].set(
            title=f"persona '{persona}'",
            xlabel="update",
            ylabel="compliance (held-out, greedy)",
            ylim=(-0.05, 1.05),
        )
        axes[1][col].set(
            xlabel="update", ylabel="KL to base of the update's adapter\n(gate, nats/token)"
        )
    axes[0][0].legend(fontsize=7)
    bypass = " - gate bypassed" if result["config"].get("bypass_gate") else ""
    fig.suptitle(f"clawd learning benchmark ({result['model']}){bypass}")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def summary(result: dict[str, Any]) -> str:
    """A Markdown table: compliance per update (mean over seeds), verdicts, judge agreement."""
    n = result["config"]["updates"] + 1
    head = "| persona | method | " + " | ".join(f"u{i}" for i in range(n))
    lines = [head + " | gate (served/runs) | judge agreement |", "|---" * (n + 4) + "|"]
    for persona in result["config"]["personas"]:
        for method in result["config"]["methods"]:
            runs = [r for r in result["runs"] if (r["method"], r["persona"]) == (method, persona)]
            if not runs:
                continue
            cells = [
                f"{statistics.fmean(r['rows'][i]['compliance'] for r in runs):.2f}"
                for i in range(n)
            ]
            trained = [row["train"] for r in runs for row in r["rows"][1:]]
            served = sum(str(t["status"]).startswith(("active", "retired")) for t in trained)
            served += sum("served anyway" in str(t["status"]) for t in trained)
            agree = [
                row["judge_agreement"]
                for r in runs
                for row in r["rows"][1:]
                if row.get("judge_agreement") is not None
            ]
            judge = f"{statistics.fmean(agree):.2f}" if agree else "-"
            lines.append(
                f"| {persona} | {method} | " + " | ".join(cells) + f" | {served}/{len(trained)} "
                f"| {judge} |"
            )
    return "\n".join(lines)


def diagnosis(result: dict[str, Any]) -> str:
    """Per method, over all personas and seeds: what the signals said and why the gate refused.

    Only updates that recorded ``signal_scores`` and ``failed_checks`` count (older results
    lack them).
    """
    k = result["config"]["interactions"]
    lines = [
        "| method | updates | turns the checkers call violations | signal scores +1 / 0 / -1 "
        "| passed the gate | rejected: drift | rejected: ability (general or own prompts) "
        "| rejected: held-out "
        "checks only |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method in result["config"]["methods"]:
        rows = [
            row
            for r in result["runs"]
            if r["method"] == method
            for row in r["rows"][1:]
            if "signal_scores" in row and "failed_checks" in row["train"]
        ]
        if not rows:
            continue
        scores = [x for row in rows for x in row["signal_scores"]]
        share = " / ".join(f"{scores.count(v) / max(len(scores), 1):.0%}" for v in (1, 0, -1))
        failed = [row["train"]["failed_checks"] for row in rows]
        drifted = ["drift_under_limit" in f or "step_under_limit" in f for f in failed]
        drift = sum(drifted)
        ability = sum(  # on the general prompts or on the user's own (own_prompts_ability)
            any(c.endswith("ability") for c in f) and not d
            for f, d in zip(failed, drifted, strict=True)
        )
        held = sum(bool(f) for f in failed) - drift - ability
        violations = statistics.fmean(row["violations"] / k for row in rows)
        walked = sum(
            bool((row["train"].get("walked_back") or {}).get("served_steps")) for row in rows
        )
        passed = f"{len(rows) - drift - ability - held}" + (
            f" ({walked} an earlier point)" if walked else ""
        )
        lines.append(
            f"| {method} | {len(rows)} | {violations:.0%} | {share} "
            f"| {passed} | {drift} | {ability} | {held} |"
        )
    return "\n".join(lines)


def report(result: dict[str, Any]) -> str:
    """The compliance table and the diagnosis table, as Markdown."""
    return f"{summary(result)}\n\n{diagnosis(result)}"


if __name__ == "__main__":
    path = Path(sys.argv[1])
    saved = json.loads(path.read_text())
    print(report(saved))
    plot(saved, path.with_suffix(".png"))
