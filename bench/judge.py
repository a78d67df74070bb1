"""Does the judge agree with the user? Scorers measured on labelled exchanges.

Data (``--data``, comma-separated):

- ``heldout``: ``bench/data/judge-heldout.jsonl``, exchanges in voices that the probe's fitting
  set (``clawd/signals/data/exchanges.jsonl``) does not contain; nothing was fitted or tuned on
  them.
- ``personas``: the learning benchmark's simulated users (``bench/personas.py``): the default
  model answers their prompts, each persona replies as it would (a complaint about a broken
  preference or thanks), labelled by its checkers. ``agreement`` here is the learning
  benchmark's judge agreement: the share of replies whose score equals the checker's label.
- a path: any JSONL file of exchanges with labels.

Scorers (``--scorers``): ``probe`` (the default judge_mode) and ``generate`` (written votes
with ``--votes`` votes, slow on CPU: at most ``--generate-limit`` exchanges per data set).
Per scorer and data set: wrong-sign rate among decided turns (a decided turn whose score has
the opposite sign of its label), complaint recall, abstention on neutral replies, recall of
positive replies, median milliseconds per exchange; then per category.

Run (about 5 minutes on 2 cores with the default model)::

    .venv/bin/python -m bench.judge --data heldout,personas --scorers probe,generate
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.personas import INTERACTION_PROMPTS, PERSONAS, SimulatedUser
from clawd.config import Settings
from clawd.models import resolve
from clawd.signals.fitprobe import exchange, metrics, read_exchanges
from clawd.signals.rules import majority, parse_boxed

HELDOUT = Path(__file__).parent / "data" / "judge-heldout.jsonl"


def persona_rows(model: Path, per_persona: int, seed: int) -> list[dict[str, Any]]:
    """The default model's answers to persona prompts, with each persona's reply and label."""
    from llama_cpp import Llama

    llm = Llama(str(model), n_ctx=2048, verbose=False)
    rng = random.Random(seed)
    rows = []
    try:
        prompts = rng.sample(INTERACTION_PROMPTS, per_persona)
        answers = {}
        for i, prompt in enumerate(prompts):
            out = llm.create_chat_completion(
                [{"role": "user", "content": prompt}], max_tokens=96, temperature=0.7, seed=i
            )
            answers[prompt] = out["choices"][0]["message"]["content"]
        for persona in PERSONAS.values():
            user = SimulatedUser(persona, random.Random(f"{seed}/{persona.name}"), move_on=0.0)
            for prompt in prompts:
                reply = user.reply(answers[prompt])
                label, _ = user.oracle(answers[prompt])
                rows.append(
                    {
                        "request": prompt,
                        "answer": answers[prompt],
                        "reply": reply,
                        "label": label,
                        "category": persona.name,
                        "voice": persona.name,
                    }
                )
    finally:
        llm.close()
    return rows


def run_probe(model: Path, rows: list[dict[str, Any]]) -> tuple[list[int], list[float]]:
    from clawd.signals.fitprobe import prepare
    from clawd.signals.probe import Probe

    probe = prepare(Probe(model))
    votes, ms = [], []
    try:
        for row in rows:
            t0 = time.perf_counter()
            votes.append(probe.vote(exchange(row))[0])
            ms.append((time.perf_counter() - t0) * 1000)
    finally:
        probe.close()
    return votes, ms


def run_generate(model: Path, rows: list[dict[str, Any]], n: int) -> tuple[list[int], list[float]]:
    from clawd.signals.judge import Judge

    s = Settings()
    judge = Judge(model, n_ctx=2048, max_tokens=s.judge_max_tokens)
    judge.load()
    votes, ms = [], []
    try:
        for i, row in enumerate(rows):
            t0 = time.perf_counter()
            ex = exchange(row)
            raw = [
                judge.vote(ex, temperature=s.judge_temperature, seed=i * 10 + k) for k in range(n)
            ]
            votes.append(majority([parse_boxed(r) for r in raw]))
            ms.append((time.perf_counter() - t0) * 1000)
    finally:
        judge.close()
    return votes, ms


def summarise(rows: list[dict[str, Any]], votes: list[int], ms: list[float]) -> dict[str, Any]:
    labels = np.asarray([r["label"] for r in rows])
    v = np.asarray(votes)
    out: dict[str, Any] = {
        "n": len(rows),
        **metrics(labels, v),
        "agreement": float(np.mean(v == labels)),
        "median_ms": statistics.median(ms) if ms else None,
        "abstained": float(np.mean(v == 0)),
    }
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_cat[r.get("category") or "?"].append(i)
    out["categories"] = {
        c: {
            "n": len(ix),
            "label": statistics.mode(int(labels[i]) for i in ix),
            "agreement": float(np.mean(v[ix] == labels[ix])),
            "wrong_sign": int(np.sum((v[ix] != 0) & (v[ix] == -labels[ix]) & (labels[ix] != 0))),
        }
        for c, ix in sorted(by_cat.items())
    }
    return out


def fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="heldout,personas")
    ap.add_argument("--scorers", default="probe,generate")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--votes", type=int, default=3)
    ap.add_argument("--generate-limit", type=int, default=60)
    ap.add_argument("--per-persona", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    args = ap.parse_args(argv)
    model = resolve(args.model)
    results: dict[str, Any] = {"model": model.name, "date": time.strftime("%Y-%m-%d")}
    for name in args.data.split(","):
        if name == "heldout":
            rows = read_exchanges(HELDOUT)
        elif name == "personas":
            rows = persona_rows(model, args.per_persona, args.seed)
        else:
            rows = read_exchanges(Path(name))
        for scorer in args.scorers.split(","):
            if scorer == "probe":
                votes, ms = run_probe(model, rows)
                used = rows
            elif scorer == "generate":
                used = random.Random(args.seed).sample(rows, min(len(rows), args.generate_limit))
                votes, ms = run_generate(model, used, args.votes)
            else:
                raise SystemExit(f"unknown scorer {scorer!r}: probe or generate")
            res = summarise(used, votes, ms)
            results[f"{name}/{scorer}"] = res
            print(
                f"{name:9s} {scorer:9s} n={res['n']:4d}  wrong-sign {fmt(res['wrong_sign'])}  "
                f"complaint recall {fmt(res['complaint_recall'])}  neutral abstain "
                f"{fmt(res['neutral_abstain'])}  positive recall {fmt(res['positive_recall'])}  "
                f"agreement {fmt(res['agreement'])}  median {fmt(res['median_ms'])} ms",
                flush=True,
            )
            for cat, c in res["categories"].items():
                print(
                    f"    {cat:12s} n={c['n']:3d} label {c['label']:+d}  agreement "
                    f"{c['agreement']:.2f}  wrong-sign {c['wrong_sign']}"
                )
    if args.out:
        args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
