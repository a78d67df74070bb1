"""What memories cost the first token: TTFT with 10 memories in the prompt and without.

Two daemons on the default model, one holding 10 memories (about 150 tokens in the system
message), one with none; rounds alternate between them with the same fresh question (1 new
token), so machine noise hits both alike, and each keeps its own prompt cache, as a user's
daemon does (the memories' block is the same in every request, so llama.cpp reuses it and only
the question is new). The daemon's own ``ttft_ms`` (from the request's arrival to the first
token) and the client's are recorded. Run alone (about a minute)::

    python -m bench.memoryttft [--rounds 20] [--out docs/bench/memoryttft.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from clawd.models import resolve
from fixtures.daemon import start_daemon

MEMORIES = [
    "Address the user as Ana.",
    "Keep answers to one line.",
    "The user is vegetarian.",
    "Answer in plain text, without markdown.",
    "Use metric units.",
    "The user lives in Lisbon.",
    "The user only codes in Rust.",
    "Do not use emojis.",
    "The user is a nurse; skip the medical basics.",
    "End with a question back to the user.",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    model = resolve(args.model)
    daemons = {
        arm: start_daemon(model, Path(tempfile.mkdtemp(prefix=f"clawd-bench-{arm}-")))
        for arm in ("memories", "none")
    }
    got: dict[str, dict[str, list[float]]] = {
        arm: {"daemon": [], "client": []} for arm in ("memories", "none")
    }
    clients = {arm: d.client() for arm, d in daemons.items()}
    try:
        for text in MEMORIES:
            clients["memories"].post("/v1/memories", json={"text": text}).raise_for_status()
        for i in range(args.rounds + 1):  # the first round fills the caches, not counted
            for arm in ("memories", "none") if i % 2 else ("none", "memories"):
                q = [{"role": "user", "content": f"Question {i}: what is {i} plus {i}?"}]
                t0 = time.perf_counter()
                r = clients[arm].post(
                    "/v1/chat/completions",
                    json={"messages": q, "max_tokens": 1, "temperature": 0},
                )
                wall = (time.perf_counter() - t0) * 1000
                r.raise_for_status()
                extra = r.json()["clawd"]
                assert len(extra["memories"]) == (10 if arm == "memories" else 0)
                if i:
                    got[arm]["daemon"].append(extra["ttft_ms"])
                    got[arm]["client"].append(wall)
    finally:
        for arm, d in daemons.items():
            clients[arm].close()
            d.stop()
    med = {arm: {k: round(statistics.median(v), 1) for k, v in m.items()} for arm, m in got.items()}
    report = {
        "model": args.model,
        "date": time.strftime("%Y-%m-%d"),
        "rounds": args.rounds,
        "median_ms": med,
        "added_ms": {
            k: round(med["memories"][k] - med["none"][k], 1) for k in ("daemon", "client")
        },
    }
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.write_text(json.dumps({**report, "samples": got}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
