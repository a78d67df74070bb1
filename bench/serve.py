"""Daemon overhead: time to the first content chunk and streamed tokens/s, daemon vs direct.

The direct arm is llama-cpp-python's own streaming chat completion on the same GGUF, with the
same prompt, greedy decoding and 2 threads. Each round sends a fresh prompt (neither arm has
seen it: the whole prompt is evaluated) and then the same prompt again (the repeated case: the
prompt is in the KV cache, one token is replayed), to both arms, the arm going first
alternating between rounds so that machine noise hits both alike. TTFT is the time to the
first chunk that carries content (the daemon's role chunk does not count); the daemon's own
timeline of each request (``clawd.timings_ms``) says where its share went. A second part sends
8 concurrent clients x 20 requests and checks that none failed and every turn was recorded
exactly once.

    .venv/bin/python bench/serve.py [--model PATH] [--rounds 9] [--out bench/results/serve.json]
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

from clawd.config import clawd_home
from clawd.models import resolve
from fixtures.daemon import start_daemon

MAX_TOKENS = 256  # the fresh prompt's answer, over which tokens/s is measured
REPEAT_TOKENS = 32  # the repeated prompt's (read to the end in both arms, as a client would)


def prompt(i: int) -> list[dict]:
    return [{"role": "user", "content": f"Write a long story about a lighthouse keeper, part {i}."}]


def direct(llm, messages: list[dict], max_tokens: int) -> dict:
    t0 = time.perf_counter()
    first = last = None
    n = 0
    for chunk in llm.create_chat_completion(
        messages,
        temperature=0,
        max_tokens=max_tokens,
        stream=True,
        top_k=0,
        min_p=0.0,
        repeat_penalty=1.0,
    ):
        if chunk["choices"][0]["delta"].get("content"):
            n += 1
            last = time.perf_counter()
            first = first or last
    return {"ttft_ms": (first - t0) * 1000, "tokens_per_s": (n - 1) / (last - first)}


def through_daemon(client: httpx.Client, messages: list[dict], max_tokens: int) -> dict:
    body = {"messages": messages, "temperature": 0, "max_tokens": max_tokens, "stream": True}
    t0 = time.perf_counter()
    first = last = None
    n, timings = 0, {}
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            data = json.loads(line[6:])
            if data["choices"] and data["choices"][0]["delta"].get("content"):
                n += 1
                last = time.perf_counter()
                first = first or last
            timings = data.get("clawd", {}).get("timings_ms", timings)
    return {
        "ttft_ms": (first - t0) * 1000,
        "tokens_per_s": (n - 1) / (last - first),
        "timings_ms": timings,
    }


def rounds(llm, client: httpx.Client, n: int) -> dict[str, dict[str, list[dict]]]:
    """Per case (fresh, repeated) and arm, one row per round."""
    arms = {
        "direct": lambda m, k: direct(llm, m, k),
        "daemon": lambda m, k: through_daemon(client, m, k),
    }
    rows = {case: {arm: [] for arm in arms} for case in ("fresh", "repeated")}
    for i in range(n):
        order = ["direct", "daemon"] if i % 2 == 0 else ["daemon", "direct"]
        for case, max_tokens in (("fresh", MAX_TOKENS), ("repeated", REPEAT_TOKENS)):
            for arm in order:
                # the repeated case follows the arm's own answer to the same prompt
                rows[case][arm].append(arms[arm](prompt(i), max_tokens))
        print(
            f"round {i}: "
            + ", ".join(
                f"{case} {arm} {rows[case][arm][-1]['ttft_ms']:.1f} ms"
                for case in rows
                for arm in order
            ),
            flush=True,
        )
    return rows


def summary(rows: dict[str, dict[str, list[dict]]]) -> dict:
    out = {}
    for case, arms in rows.items():
        med = {arm: statistics.median(r["ttft_ms"] for r in v) for arm, v in arms.items()}
        added = [
            b["ttft_ms"] - a["ttft_ms"] for a, b in zip(arms["direct"], arms["daemon"], strict=True)
        ]
        steps = arms["daemon"][0]["timings_ms"].keys()
        out[case] = {
            "ttft_ms": med,
            # the median of the rounds' paired differences (each round: both arms, same prompt)
            "added_ttft_ms": statistics.median(added),
            "added_ttft_ms_per_round": [round(a, 1) for a in added],
            "daemon_timeline_ms": {
                k: statistics.median(r["timings_ms"].get(k, 0) for r in arms["daemon"])
                for k in steps
            },
        }
    fresh = rows["fresh"]
    tps = {arm: statistics.median(r["tokens_per_s"] for r in v) for arm, v in fresh.items()}
    out["tokens_per_s"] = tps
    out["throughput_ratio"] = tps["daemon"] / tps["direct"]
    return out


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
    ap.add_argument("--rounds", type=int, default=9, help="alternating rounds per case")
    ap.add_argument("--out", type=Path, default=Path("bench/results/serve.json"))
    args = ap.parse_args()
    model = args.model or resolve("smollm2-135m", clawd_home())

    from llama_cpp import Llama

    llm = Llama(str(model), n_ctx=2048, n_threads=2, verbose=False)
    d = start_daemon(model, Path(tempfile.mkdtemp(prefix="clawd-bench-")), n_ctx=2048)
    try:
        with d.client() as client:
            through_daemon(client, prompt(-1), 8)  # warm both arms
            direct(llm, prompt(-1), 8)
            rows = rounds(llm, client, args.rounds)
        load = load_test(d)
    finally:
        d.stop()
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "model": model.name,
        "rounds": args.rounds,
        "max_tokens": {"fresh": MAX_TOKENS, "repeated": REPEAT_TOKENS},
        **summary(rows),
        "load": load,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
