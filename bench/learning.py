"""Does clawd learn its user? Simulated users, the real daemon, compliance curves per method.

For every (method, persona, seed) a fresh daemon runs on its own CLAWD_HOME. One update is:
K interactions through the REST API (the simulated user asks, reads the answer, and replies the
way a person would: a complaint in its own words, thanks, or moving on) -> the daemon's own
signal job turns the replies into signals and samples -> ``POST /v1/train`` -> the promotion
gate and hot-load -> evaluation: greedy answers to held-out prompts, scored by the persona's
checkers (compliance in [0, 1]). The prompts scored are the held-out set
(``bench.personas.HELDOUT_PROMPTS``; ``--prompts tuning``: the set choices are made on).
Drift is the gate's KL to the base model on fixed general conversations.

Methods: ``rl`` (binary reward only), ``opd`` (hint distillation only), ``combined`` (both;
hint appended to the user message), ``combined-system`` (hint as a system message), all with
the system's own judge and hints; and ``oracle``: scores from the checkers and hints from the
persona's rules, sent as explicit feedback, which separates the learner from the judge.

Run (writes learning.json and learning.png into --out)::

    python -m bench.learning --config quick      # 2 personas x 4 updates x 4 methods
    python -m bench.learning --config quick --methods combined-system   # the other placement
    python -m bench.learning --config full --jobs 2   # 6 personas x 8 updates x 6 methods x 2 seeds
    python -m bench.learning --config smoke      # 1 persona, 1 update, oracle (CI)
    python -m bench.learning --config brief      # brief, oracle signals, 5 updates (< 30 min)
    python -m bench.learning --config quick --bypass-gate --tag learning-quick-bypass
    python -m bench.learning --config brief --users bench/data/users-heldout.json  # held-out users
    python -m bench.learnreport bench/results/learning-quick.json    # the table and plot again

Results are saved after every (method, persona, seed) run in ``<tag>.partial.json``; running the
same command again resumes there (the full configuration takes hours).

``--bypass-gate`` also serves adapters the promotion gate rejected, which measures the learner
alone; without it the curves are the product's, gate included.

Each run's daemon home stays in the temporary directory (its path is printed), with the store,
the logs and every adapter's ``report.json`` and ``manifest.json``, for reading afterwards; the
adapters' weights (about 38 MB each, 11 GB for the full configuration) are removed unless
``--keep-adapters`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import users
from bench.learnloop import Loop
from bench.learnreport import plot, report
from bench.learnsetup import CONFIGS, METHODS, Config
from bench.personas import PERSONAS, Persona
from clawd.config import clawd_home
from clawd.models import resolve
from fixtures.daemon import drop_adapter_weights, start_daemon

_BASE_LOCKS: dict[tuple[str, int], threading.Lock] = {}


def run_one(
    model: Path,
    method: str,
    persona: Persona,
    cfg: Config,
    seed: int,
    cache: Path,
    base_eval: dict,
    threads: int,
    keep_adapters: bool = False,
) -> list[dict[str, Any]]:
    spec = METHODS[method]
    home = Path(tempfile.mkdtemp(prefix=f"clawd-learn-{method}-{persona.name}-"))
    (home / "cache").symlink_to(cache)
    settings = {
        "CLAWD_SIGNALS_INTERVAL_S": "1",
        "CLAWD_AUTO_ACTIVATE": "true",
        "CLAWD_TRAIN_METHOD": spec["train_method"],
        "CLAWD_HINT_PLACEMENT": spec.get("hint_placement", "user"),
        "CLAWD_TRAIN_LR": str(cfg.train_lr),
        "CLAWD_TRAIN_EPOCHS": str(cfg.train_epochs),
        "CLAWD_JUDGE_VOTES": str(cfg.judge_votes),
        "CLAWD_JUDGE_MAX_TOKENS": str(cfg.judge_max_tokens),
        "CLAWD_N_THREADS": str(threads),
        "CLAWD_TRAIN_THREADS": str(threads),
        **spec.get("settings", {}),
        **{f"CLAWD_{k.upper()}": v for k, v in cfg.settings.items()},
    }
    daemon = start_daemon(model, home, settings=settings)
    loop = Loop(daemon, persona, cfg, seed, bool(spec.get("oracle")), model)
    rows = []
    try:
        key = (persona.name, seed)
        with _BASE_LOCKS.setdefault(key, threading.Lock()):  # parallel jobs wait for one
            if key not in base_eval:  # the base model's score is the same for every method
                base_eval[key] = loop.evaluate()
        rows.append({"update": 0, **base_eval[key], "train": {"status": "base"}})
        for u in range(1, cfg.updates + 1):
            t0 = time.monotonic()
            turns = loop.interact(cfg.interactions)
            t1 = time.monotonic()
            signals = loop.wait_for_signals(turns)
            t2 = time.monotonic()
            oracle = {t["turn"]: t["oracle"] for t in turns}
            agree = [s["score"] == oracle[s["turn_id"]] for s in signals]
            trained = loop.train()
            t3 = time.monotonic()
            ev = loop.evaluate()
            t4 = time.monotonic()
            rows.append(
                {
                    "update": u,
                    **ev,
                    "train": trained,
                    "signals": len(signals),
                    "judge_agreement": statistics.fmean(agree) if agree else None,
                    "signal_scores": [s["score"] for s in signals],
                    "violations": sum(t["oracle"] < 0 for t in turns),
                    "seconds": {
                        "interact": round(t1 - t0, 1),
                        "signals": round(t2 - t1, 1),
                        "train": round(t3 - t2, 1),
                        "eval": round(t4 - t3, 1),
                    },
                }
            )
            print(
                f"  {method:16s} {persona.name:8s} seed {seed} update {u}: compliance "
                f"{ev['compliance']:.2f} ({trained['status']}, {t4 - t0:.0f} s: "
                f"{rows[-1]['seconds']})",
                flush=True,
            )
    finally:
        loop.http.close()
        daemon.stop()
        freed = 0 if keep_adapters else drop_adapter_weights(home)
        print(
            f"  {method:16s} {persona.name:8s} seed {seed}: home {home}"
            + (f" (adapter weights removed: {freed / 1e6:.0f} MB)" if freed else ""),
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", choices=list(CONFIGS), default="quick")
    p.add_argument("--personas", help="comma-separated, from: " + ", ".join(PERSONAS))
    p.add_argument(
        "--users",
        type=Path,
        help="a JSON file of more simulated users (bench/users.py), e.g. "
        "bench/data/users-heldout.json; without --personas its users are the ones run",
    )
    p.add_argument("--methods", help="comma-separated, from: " + ", ".join(METHODS))
    p.add_argument("--updates", type=int)
    p.add_argument("--interactions", type=int, help="K conversations per update")
    p.add_argument("--lr", type=float, dest="train_lr", help="training learning rate")
    p.add_argument(
        "--prompts",
        choices=("heldout", "tuning"),
        help="the prompts scored: held out (headline numbers) or the tuning set (choices); "
        "default: the configuration's",
    )
    p.add_argument("--eval-prompts", type=int, help="how many of them are scored")
    p.add_argument(
        "--bypass-gate",
        action="store_true",
        help="serve adapters the promotion gate rejected (measures the learner alone)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a daemon setting for every run, e.g. --set train_target_kl=0.1 (repeatable)",
    )
    p.add_argument("--seeds", help="comma-separated seeds, e.g. 0,1")
    p.add_argument("--jobs", type=int, default=1, help="runs side by side, on cores/jobs threads")
    p.add_argument("--model", default="smollm2-135m", help="installed model name or .gguf path")
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    p.add_argument("--tag", help="file name stem of the results (default: learning-CONFIG)")
    p.add_argument(
        "--keep-adapters",
        action="store_true",
        help="keep the adapters' weights in the runs' homes (removed by default: 38 MB each)",
    )
    args = p.parse_args(argv)
    cfg, personas = CONFIGS[args.config], dict(PERSONAS)
    if args.users:
        try:
            extra = users.load(args.users)
        except users.UsersFileError as e:
            p.error(f"--users: {e}")
        personas.update(extra)
        cfg = replace(cfg, personas=list(extra), users=str(args.users))
    for name in ("personas", "methods"):
        if getattr(args, name):
            cfg = replace(cfg, **{name: getattr(args, name).split(",")})
    for name in ("updates", "interactions", "train_lr", "prompts", "eval_prompts"):
        if getattr(args, name):
            cfg = replace(cfg, **{name: getattr(args, name)})
    if args.bypass_gate:
        cfg = replace(cfg, bypass_gate=True)
    if args.seeds:
        cfg = replace(cfg, seeds=[int(x) for x in args.seeds.split(",")])
    if args.set:
        bad = [x for x in args.set if "=" not in x]
        if bad:
            p.error(f"--set needs NAME=VALUE, got {bad[0]!r}")
        cfg = replace(cfg, settings={**cfg.settings, **dict(x.split("=", 1) for x in args.set)})
    if unknown := {*cfg.personas} - {*personas} | {*cfg.methods} - {*METHODS}:
        p.error(f"unknown persona or method: {', '.join(sorted(unknown))}")
    for name in cfg.personas:
        user = personas[name]
        pool = user.tuning_prompts if cfg.prompts == "tuning" else user.eval_prompts
        if not 1 <= cfg.eval_prompts <= len(pool):
            p.error(f"--eval-prompts: {name} has {len(pool)} {cfg.prompts} prompts")
    model = resolve(args.model, clawd_home())
    cache = clawd_home() / "cache"  # the torch conversion of the model, shared with the user's
    cache.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.tag or f"learning-{args.config}"
    partial = args.out / f"{stem}.partial.json"
    started, base_eval, runs, minutes = time.time(), {}, [], 0.0
    if partial.exists():  # a long configuration resumes where an interrupted one stopped
        saved = json.loads(partial.read_text())
        if saved["config"] == asdict(cfg) and saved["model"] == model.name:
            runs, minutes = saved["runs"], saved["minutes"]
            for r in runs:
                base_eval[(r["persona"], r["seed"])] = {
                    k: r["rows"][0][k]
                    for k in ("compliance", "examples", "scores", "loops", "adapter")
                    if k in r["rows"][0]
                }
            print(f"resuming {partial}: {len(runs)} runs done", flush=True)
    done = {(r["method"], r["persona"], r["seed"]) for r in runs}

    def collected() -> dict[str, Any]:
        return {
            "model": model.name,
            "config": asdict(cfg),
            "config_name": args.config,
            "date": time.strftime("%Y-%m-%d"),
            "minutes": round(minutes + (time.time() - started) / 60, 1),
            "methods": {m: METHODS[m]["label"] for m in cfg.methods},
            "runs": runs,
        }

    todo = [
        (method, persona, seed)
        for persona in cfg.personas
        for seed in cfg.seeds
        for method in cfg.methods
        if (method, persona, seed) not in done
    ]
    threads = max(1, (os.cpu_count() or 2) // args.jobs)
    saving = threading.Lock()

    def one(job: tuple[str, str, int]) -> None:
        method, persona, seed = job
        rows = run_one(
            model,
            method,
            personas[persona],
            cfg,
            seed,
            cache,
            base_eval,
            threads,
            args.keep_adapters,
        )
        with saving:
            runs.append({"method": method, "persona": persona, "seed": seed, "rows": rows})
            partial.write_text(json.dumps(collected(), indent=1))

    with ThreadPoolExecutor(args.jobs) as pool:
        try:
            list(pool.map(one, todo))
        except BaseException:  # the first failure stops the rest; what finished is saved
            pool.shutdown(cancel_futures=True)
            raise
    result = collected()
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=1))
    plot(result, args.out / f"{stem}.png")
    partial.unlink(missing_ok=True)
    print(report(result))
    print(f"done in {result['minutes']} min: {args.out}/{stem}.json and .png")
    return result


if __name__ == "__main__":
    main()
