"""Overhead of a training run on Ray over the same run in the trainer's own process.

Same model, same samples (``--samples`` approved, hinted and negatively rewarded answers), same
settings; each run starts from a copy of one prepared CLAWD_HOME, so both train the same
inputs from the same start. The Ray arm runs on a real single-node cluster on loopback
(``fixtures.raycluster``) that the benchmark starts, with the task asking for every core, so the
update itself has the same threads in both arms and the difference is what Ray adds:
connecting, shipping clawd's code and the model, starting a worker, streaming steps and
returning the folder. Arms alternate for ``--rounds`` rounds after one warm-up run each (the
torch conversion cache and the worker's model cache are then warm in both). The figure is the
ratio of median wall seconds of ``clawd.training.train.run`` (gate included) and of the seconds
to the first step.

    .venv/bin/python -m bench.raytrain [--model smollm2-135m] [--rounds 3] [--samples 6]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from clawd.config import Settings, clawd_home
from clawd.models import resolve
from clawd.store.db import Store
from clawd.training import train
from fixtures.raycluster import start_cluster
from fixtures.samples import add_sample

QUESTIONS = [
    "What is the capital of France?",
    "How do I boil an egg?",
    "Name three primary colours.",
    "What does HTTP stand for?",
    "How far is the Moon?",
    "Why is the sky blue?",
    "What is a prime number?",
    "How do I reverse a list in Python?",
]


def prepare(template: Path, model: Path, n: int) -> None:
    template.mkdir(parents=True)
    with Store.open(template) as store:
        for i in range(n):
            add_sample(
                store,
                model,
                hint="Answer in one sentence.",
                reward=-1,
                kind="opd+rl",
                question=QUESTIONS[i % len(QUESTIONS)],
            )


def one_run(template: Path, work: Path, settings: Settings, cache: Path) -> dict[str, float]:
    home = work / f"home-{time.time_ns()}"
    shutil.copytree(template, home)
    (home / "cache").symlink_to(cache)  # the torch conversion and gate caches, shared
    first: list[float] = []
    t0 = time.perf_counter()
    summary = train.run(
        home,
        settings,
        progress=lambda s, n, m: first.append(time.perf_counter() - t0) if not first else None,
    )
    seconds = time.perf_counter() - t0
    shutil.rmtree(home, ignore_errors=True)
    return {"seconds": seconds, "first_step": first[0], "steps": summary["steps"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--samples", type=int, default=6)
    ap.add_argument("--out", type=Path, default=Path("docs/bench/raytrain.json"))
    args = ap.parse_args()
    model = resolve(args.model, clawd_home())
    cores = os.cpu_count() or 1
    work = Path(tempfile.mkdtemp(prefix="clawd-bench-ray-"))
    cache = work / "cache"
    cache.mkdir()
    template = work / "template"
    prepare(template, model, args.samples)
    base = {"model": str(model), "n_ctx": 2048, "train_threads": cores}
    local = Settings(**base)
    cluster = start_cluster(num_cpus=cores, cache=work / "worker-cache")
    on_ray = Settings(**base, train_backend="ray", ray_address=cluster.address, ray_num_cpus=cores)
    arms = {"local": local, "ray": on_ray}
    results: dict[str, list[dict[str, float]]] = {k: [] for k in arms}
    try:
        for name, settings in arms.items():
            print(f"warm-up {name}: {one_run(template, work, settings, cache)}", flush=True)
        for r in range(args.rounds):
            for name, settings in arms.items():
                res = one_run(template, work, settings, cache)
                results[name].append(res)
                print(f"round {r + 1} {name}: {res}", flush=True)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {
        k: {m: statistics.median(x[m] for x in v) for m in ("seconds", "first_step")}
        for k, v in results.items()
    }
    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "model": model.name,
        "samples": args.samples,
        "rounds": args.rounds,
        "cores": cores,
        "runs": results,
        "median": med,
        "ratio_seconds": med["ray"]["seconds"] / med["local"]["seconds"],
        "ratio_first_step": med["ray"]["first_step"] / med["local"]["first_step"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
