"""Does the signals job make the user wait? Time-to-first-token while it judges vs while idle.

One daemon on the default model with the background signals job on (1 s interval, default
judge settings). In each cycle the bench adds a backlog of answered-and-replied turns, measures
chat requests while ``/health`` says the job is running, waits for the backlog to drain, then
measures the same number of requests while the job is idle. Prompts are fresh each time (no
prompt-cache hits), streamed, TTFT = first content chunk.

    .venv/bin/python bench/signals.py [--cycles 3] [--per-phase 6] [--backlog 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clawd.config import clawd_home
from clawd.models import resolve
from fixtures.daemon import start_daemon

counter = iter(range(1_000_000))


def ttft(client: httpx.Client) -> float:
    n = next(counter)
    body = {
        "messages": [{"role": "user", "content": f"Request {n}: name a color and a fruit."}],
        "max_tokens": 2,
        "stream": True,
        "temperature": 0,
    }
    t0 = time.perf_counter()
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        for line in r.iter_lines():
            if (
                line.startswith("data: {")
                and '"content": "' in line
                and '"content": ""' not in line
            ):
                return (time.perf_counter() - t0) * 1000
    raise RuntimeError("no content")


def add_backlog(client: httpx.Client, n: int) -> None:
    for _ in range(n):
        q = [{"role": "user", "content": f"Question {next(counter)}: what is the tallest tree?"}]
        a = client.post("/v1/chat/completions", json={"messages": q, "max_tokens": 24}).json()
        follow = [
            *q,
            {"role": "assistant", "content": a["choices"][0]["message"]["content"]},
            {"role": "user", "content": "No, that's wrong. Give me a shorter answer."},
        ]
        client.post("/v1/chat/completions", json={"messages": follow, "max_tokens": 1})


def job_state(d) -> dict:
    return d.health()["jobs"]["signals"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="GGUF (default: installed smollm2-135m)")
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--per-phase", type=int, default=6)
    ap.add_argument("--backlog", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("bench/results/signals.json"))
    args = ap.parse_args()
    model = args.model or resolve("smollm2-135m", clawd_home())
    d = start_daemon(
        model,
        Path(tempfile.mkdtemp(prefix="clawd-bench-")),
        settings={"CLAWD_SIGNALS_INTERVAL_S": "1"},
    )
    busy, idle = [], []
    try:
        with d.client() as c:
            ttft(c)  # warm up
            for cycle in range(args.cycles):
                add_backlog(c, args.backlog)
                while not job_state(d)["running"]:
                    time.sleep(0.05)
                got = 0
                while got < args.per_phase and job_state(d)["running"]:
                    busy.append(ttft(c))
                    got += 1
                    time.sleep(0.3)
                while job_state(d)["pending"] or job_state(d)["running"]:
                    time.sleep(0.2)
                for _ in range(args.per_phase):
                    idle.append(ttft(c))
                    time.sleep(0.3)
                print(f"cycle {cycle}: busy {busy[-got:]} idle {idle[-args.per_phase :]}")
            state = job_state(d)
    finally:
        d.stop()
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "model": model.name,
        "busy_ttft_ms": {"median": statistics.median(busy), "max": max(busy), "n": len(busy)},
        "idle_ttft_ms": {"median": statistics.median(idle), "max": max(idle), "n": len(idle)},
        "ratio_median": statistics.median(busy) / statistics.median(idle),
        "turns_judged": state["processed"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
