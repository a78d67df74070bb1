"""Daemon overhead: streamed tokens/s and time-to-first-token, daemon vs direct llama-cpp-python.

Both arms use the same GGUF, the same prompts (a fresh one per round, so both evaluate it),
greedy decoding, 256 new tokens and 2 threads; rounds alternate between the arms so machine
noise hits both alike. A second part sends 8 concurrent clients x 20 requests and checks that
none failed and every turn was recorded exactly once.

    .venv/bin/python bench/serve.py [--model PATH] [--rounds 5] [--out bench/results/serve.json]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.daemon import start_daemon
from clawd.config import clawd_home
from clawd.models import resolve

MAX_TOKENS = 256


def prompt(i: int) -> list[dict]:
    return [{"role": "user", "content": f"Write a long story about a lighthouse keeper, part {i}."}]


def direct(llm, messages: list[dict]) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    first = last = None
    n = 0
    for chunk in llm.create_chat_completion(
        messages,
        temperature=0,
        max_tokens=MAX_TOKENS,
        stream=True,
        top_k=0,
        min_p=0.0,
        repeat_penalty=1.0,
    ):
        if chunk["choices"][0]["delta"].get("content"):
            n += 1
            last = time.perf_counter()
            first = first or last
    return (first - t0) * 1000, (n - 1) / (last - first), n


def through_daemon(client: httpx.Client, messages: list[dict]) -> tuple[float, float, int]:
    body = {
        "messages": messages,
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t0 = time.perf_counter()
    first = last = None
    n = 0
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            data = json.loads(line[6:])
            if data["choices"] and data["choices"][0]["delta"].get("content"):
                n += 1
                last = time.perf_counter()
                first = first or last
    return (first - t0) * 1000, (n - 1) / (last - first), n


def load_test(d, clients: int = 8, per_client: int = 20) -> dict:
    errors = 0

    def one(c: int) -> list[str]:
        nonlocal errors
        ids = []
        with d.client() as client:
            for i in range(per_client):
                r = client.post(
                    "/v1/chat/completions",
                    headers={"X-Clawd-Conversation": f"load-{c}"},
                    json={
                        "messages": [{"role": "user", "content": f"Hi {c}.{i}"}],
                        "max_tokens": 8,
                        "stream": i % 2 == 0,
                    },
                )
                if r.status_code != 200:
                    errors += 1
                elif i % 2:
                    ids.append(r.json()["id"])
        return ids

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(clients)))
    seconds = time.perf_counter() - t0
    with d.client() as client:
        counts = [
            len(client.get(f"/v1/conversations/load-{c}").json()["turns"]) for c in range(clients)
        ]
    return {
        "clients": clients,
        "requests": clients * per_client,
        "errors": errors,
        "turns_recorded": sum(counts),
        "all_recorded_once": counts == [per_client] * clients,
        "seconds": round(seconds, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="GGUF file (default: installed smollm2-135m)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per arm")
    ap.add_argument("--out", type=Path, default=Path("bench/results/serve.json"))
    args = ap.parse_args()
    model = args.model or resolve("smollm2-135m", clawd_home())

    from llama_cpp import Llama

    llm = Llama(str(model), n_ctx=2048, n_threads=2, verbose=False)
    d = start_daemon(model, Path(tempfile.mkdtemp(prefix="clawd-bench-")), n_ctx=2048)
    rows = {"direct": [], "daemon": []}
    try:
        with d.client() as client:
            through_daemon(client, prompt(-1))  # warm both arms
            direct(llm, prompt(-1))
            for i in range(args.rounds):
                rows["direct"].append(direct(llm, prompt(i)))
                rows["daemon"].append(through_daemon(client, prompt(i)))
                print(f"round {i}: direct {rows['direct'][-1]}, daemon {rows['daemon'][-1]}")
        load = load_test(d)
    finally:
        d.stop()
    med = {
        arm: {
            "ttft_ms": statistics.median(r[0] for r in v),
            "tokens_per_s": statistics.median(r[1] for r in v),
            "tokens": statistics.median(r[2] for r in v),
        }
        for arm, v in rows.items()
    }
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "model": model.name,
        "rounds": args.rounds,
        "max_tokens": MAX_TOKENS,
        "median": med,
        "throughput_ratio": med["daemon"]["tokens_per_s"] / med["direct"]["tokens_per_s"],
        "added_ttft_ms": med["daemon"]["ttft_ms"] - med["direct"]["ttft_ms"],
        "load": load,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
