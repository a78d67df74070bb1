"""Tables and plots of bench/learning.py results: compliance per update and method, drift, and
how many held-out answers loop.

A checker measures the preference, not the answer: "I'm here to help with anything you're
looking for. I'm here to help ..." speaks to the user as "you", over and over. So each
evaluation also records which held-out answers loop (``looping``, on the model's llama.cpp
tokens: the gate's own rule, ``clawd.adapters.loops.degeneration``, or one phrase said again and
again over half the answer, ``restated``, which the gate's rule misses), and ``loops`` tables
them beside the compliance.

Run alone to redo the tables and plot from a results file (``--model`` counts the loops of
results saved before evaluations recorded them, ``--recount`` those of every row again)::

    python -m bench.learnreport bench/results/learning-quick.json
    python -m bench.learnreport docs/bench/learning-claim-s23.json --model smollm2-135m
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clawd.adapters.loops import degeneration

# One phrase said again and again: an answer of 16 tokens or more with at least RESTATED_SHARE
# of them inside a RESTATED_N-token phrase said RESTATED_TIMES times or more. The gate's rule
# misses such loops when something changes between the repeats ("1. Use a bike chain wrench.
# 2. Use a bike chain wrench. ...") or the phrase is short ("a sound of purest joy" four
# times). The gate does not use it: as a gate rule (4-token phrases) it also rejected parallel
# lists and stalled learning (docs/experiments.md, "One phrase said over and over").
RESTATED_N = 6
RESTATED_TIMES = 3
RESTATED_SHARE = 0.5


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


def _groups(result: dict[str, Any]) -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """(persona, method, its runs over seeds) in the configuration's order, those that ran."""
    for persona in result["config"]["personas"]:
        for method in result["config"]["methods"]:
            runs = [r for r in result["runs"] if (r["method"], r["persona"]) == (method, persona)]
            if runs:
                yield persona, method, runs


def _head(result: dict[str, Any]) -> str:
    """A table's first columns: persona, method and one per update."""
    n = result["config"]["updates"] + 1
    return "| persona | method | " + " | ".join(f"u{i}" for i in range(n))


def summary(result: dict[str, Any]) -> str:
    """A Markdown table: compliance per update (mean over seeds), verdicts, judge agreement."""
    n = result["config"]["updates"] + 1
    lines = [_head(result) + " | gate (served/runs) | judge agreement |", "|---" * (n + 4) + "|"]
    for persona, method, runs in _groups(result):
        cells = [
            f"{statistics.fmean(r['rows'][i]['compliance'] for r in runs):.2f}" for i in range(n)
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


def restated(tokens: list[int], n: int = RESTATED_N, times: int = RESTATED_TIMES) -> float:
    """The share of ``tokens`` inside an ``n``-token phrase said at least ``times`` times in
    them, whatever changes between the repeats; 0.0 for no tokens."""
    grams = Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    inside = [False] * len(tokens)
    for i in range(len(tokens) - n + 1):
        if grams[tuple(tokens[i : i + n])] >= times:
            inside[i : i + n] = [True] * n
    return sum(inside) / max(len(tokens), 1)


# llama-cpp-python's quiet mode (verbose=False) points the process's file descriptors 1 and 2
# at /dev/null while it loads a model and then restores what it saved. Two threads loading at
# once (the learning bench with --jobs 2) can save each other's /dev/null and restore it for
# good: the bench's progress and final report then vanished from its log. One load at a time.
_LOAD = threading.Lock()


def tokenize(texts: list[str], model: Path) -> list[list[int]]:
    """``texts`` as ``model``'s llama.cpp tokens (no special tokens parsed), with one
    vocabulary load for all of them (one thread at a time: ``_LOAD``)."""
    from llama_cpp import Llama

    with _LOAD:
        vocab = Llama(str(model), vocab_only=True, verbose=False)  # closed here, not at exit
        try:
            return [vocab.tokenize(t.encode(), add_bos=False, special=False) for t in texts]
        finally:
            vocab.close()


def looping(texts: list[str], model: Path) -> list[int]:
    """The indices of ``texts`` that loop or are empty on ``model``'s tokens: by the gate's rule
    (``clawd.adapters.loops.degeneration``; the answers' end-of-turn tokens are already gone), or
    with one phrase said over and over (``restated`` at least ``RESTATED_SHARE``)."""
    tokens = tokenize(texts, model)
    said = {i for i, t in enumerate(tokens) if len(t) >= 16 and restated(t) >= RESTATED_SHARE}
    return sorted(set(degeneration(tokens, lambda _: False)["at"]) | said)


def count_loops(result: dict[str, Any], model: Path, again: bool = False) -> int:
    """Fill ``loops`` in every evaluation row of ``result`` that lacks it (every row with
    ``again``); how many were filled."""
    rows = [row for r in result["runs"] for row in r["rows"] if again or "loops" not in row]
    texts = [row.get("examples") or [] for row in rows]
    at = set(looping([t for ts in texts for t in ts], model))  # one vocabulary load for all
    start = 0
    for row, ts in zip(rows, texts, strict=True):
        row["loops"] = [i for i in range(len(ts)) if start + i in at]
        start += len(ts)
    return len(rows)


def loops(result: dict[str, Any]) -> str:
    """A Markdown table: held-out answers that loop per update (over seeds), of all answers;
    "-" where an evaluation did not record them."""
    n = result["config"]["updates"] + 1
    lines = [_head(result) + " |", "|---" * (n + 2) + "|"]
    for persona, method, runs in _groups(result):
        cells = []
        for i in range(n):
            rows = [r["rows"][i] for r in runs]
            if any("loops" not in row for row in rows):
                cells.append("-")
                continue
            total = sum(len(row.get("examples") or []) for row in rows)
            cells.append(f"{sum(len(row['loops']) for row in rows)}/{total}")
        lines.append(f"| {persona} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(result: dict[str, Any]) -> str:
    """The compliance table, the diagnosis table and the loops table, as Markdown."""
    looped = f"held-out answers that loop:\n{loops(result)}"
    return f"{summary(result)}\n\n{diagnosis(result)}\n\n{looped}"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path, help="a bench/learning.py results file (.json)")
    p.add_argument("--model", help="count the loops of older results with this model's tokens")
    p.add_argument(
        "--recount",
        action="store_true",
        help="with --model: count every row's loops again (rows counted before the restated "
        "phrase was counted saw only the gate's rule)",
    )
    args = p.parse_args(argv)
    if args.recount and not args.model:
        p.error("--recount needs --model")
    saved = json.loads(args.results.read_text())
    if args.model:
        from clawd.config import clawd_home
        from clawd.models import resolve

        count_loops(saved, resolve(args.model, clawd_home()), again=args.recount)
    print(report(saved))
    plot(saved, args.results.with_suffix(".png"))


if __name__ == "__main__":
    main()
