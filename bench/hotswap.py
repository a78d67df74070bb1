"""Hot-swapping adapters under load: failures, mixed answers, the delay a swap adds, p99.

One daemon on the default model with two real adapters (random LoRAs exported by the product's
exporter). Reference answers for the base model and each adapter are taken first (greedy, a
fixed prompt per client). Then 4 concurrent streaming clients send their prompts for the same
number of requests twice: once with no swaps, once while an adapter is activated about every
3 seconds. Every answer must equal the reference of the adapter its turn records (a mixed answer
would match none), and none may fail. A request *overlaps* a swap when the activation call
was in flight while the request was; the delay a swap adds is the median latency of the
overlapping requests over that of the requests without swaps (the same load), set against
one activation: the call's own time (reading the adapter, then the worker's switch: set
adapters, clear the KV cache, free the old one). The user's goal: a swap delays an
overlapping request by at most one activation.

    .venv/bin/python bench/hotswap.py [--requests 250]   # per client and phase: 1,000 each
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clawd.config import clawd_home
from clawd.models import resolve
from fixtures.adapterkit import register
from fixtures.daemon import start_daemon

TOPICS = ["the sea", "a forest", "the moon", "a city at night"]


def body(i: int) -> dict:
    """Client i's request: its own prompt, as real users' prompts differ."""
    return {
        "messages": [{"role": "user", "content": f"Describe {TOPICS[i]} in one sentence."}],
        "max_tokens": 12,
        "temperature": 0,
        "stream": True,
    }


def stream(c: httpx.Client, i: int) -> dict:
    t0 = time.perf_counter()
    first, text, version, ok = None, [], "?", True
    try:
        with c.stream("POST", "/v1/chat/completions", json=body(i)) as r:
            ok = r.status_code == 200
            for line in r.iter_lines():
                if not line.startswith("data: {"):
                    continue
                data = json.loads(line[6:])
                delta = data["choices"][0]["delta"] if data.get("choices") else {}
                if delta.get("content"):
                    first = first or time.perf_counter()
                    text.append(delta["content"])
                if "clawd" in data:
                    version = data["clawd"]["adapter_version"]
    except httpx.HTTPError:
        ok = False
    end = time.perf_counter()
    return {
        "ok": ok and first is not None,
        "text": "".join(text),
        "version": version,
        "latency": end - t0,
        "ttft": (first or end) - t0,
        "start": t0,
        "client": i,
    }


def load(
    d, n_per_client: int, swaps: list[str | None] | None, interval: float = 1.0
) -> tuple[list[dict], list[dict]]:
    results: list[dict] = []
    swap_log: list[dict] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        with d.client() as c:
            for _ in range(n_per_client):
                r = stream(c, i)
                with lock:
                    results.append(r)

    def swapper() -> None:
        with d.client() as c:
            for target in swaps or []:
                if done.wait(interval):
                    return
                t0 = time.perf_counter()
                path = f"/v1/adapters/{target}/activate" if target else "/v1/adapters/base"
                resp = c.post(path).json()
                swap_log.append(
                    {
                        "at": t0,
                        "until": time.perf_counter(),
                        "target": target,
                        "worker_ms": resp.get("pause_ms"),
                    }
                )

    done = threading.Event()
    clients = [threading.Thread(target=client, args=(i,)) for i in range(len(TOPICS))]
    swapping = threading.Thread(target=swapper)
    for t in [*clients, swapping]:
        t.start()
    for t in clients:
        t.join()
    done.set()  # no swap after the last request
    swapping.join()
    return results, swap_log


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="GGUF (default: installed smollm2-135m)")
    ap.add_argument("--requests", type=int, default=250, help="requests per client per phase")
    ap.add_argument("--out", type=Path, default=Path("bench/results/hotswap.json"))
    args = ap.parse_args()
    home = clawd_home()
    model = args.model or resolve("smollm2-135m", home)
    bench_home = Path(tempfile.mkdtemp(prefix="clawd-bench-"))
    for i, v in enumerate(["x", "y"]):
        register(bench_home, model, home, v, seed=40 + i)
    d = start_daemon(model, bench_home, settings={"CLAWD_AUTO_ACTIVATE": "false"})
    try:
        reference = {}
        with d.client() as c:
            for target in [None, "y", "x"]:
                c.post(f"/v1/adapters/{target}/activate" if target else "/v1/adapters/base")
                for i in range(len(TOPICS)):
                    reference[(target, i)] = stream(c, i)["text"]
        for i in range(len(TOPICS)):  # a mixed answer must be detectable
            assert len({reference[(t, i)] for t in (None, "x", "y")}) == 3
        with d.client() as c:  # both phases serve an adapter: LoRA has a per-token cost
            c.post("/v1/adapters/x/activate")
        calm, _ = load(d, args.requests, None)
        phase = max(r["start"] + r["latency"] for r in calm) - min(r["start"] for r in calm)
        n_swaps = max(20, int(phase / 3))  # about one every 3 s: a third of requests overlap
        busy, swap_log = load(d, args.requests, ["y", "x"] * n_swaps, interval=phase / n_swaps)
    finally:
        d.stop()

    def summary(rows: list[dict]) -> dict:
        lat = sorted(r["latency"] for r in rows)
        return {
            "requests": len(rows),
            "failed": sum(not r["ok"] for r in rows),
            "mixed": sum(
                r["ok"] and reference.get((r["version"], r["client"])) != r["text"] for r in rows
            ),
            "p50_ms": 1000 * statistics.median(lat),
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
        }

    def overlaps(r: dict) -> bool:
        end = r["start"] + r["latency"]
        return any(s["at"] < end and s["until"] > r["start"] for s in swap_log)

    ok = [r for r in busy if r["ok"]]
    hit = [1000 * r["latency"] for r in ok if overlaps(r)]
    clear = [1000 * r["latency"] for r in ok if not overlaps(r)]
    calm_p50 = summary(calm)["p50_ms"]
    activation = statistics.median(1000 * (s["until"] - s["at"]) for s in swap_log)
    added = statistics.median(hit) - calm_p50
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "model": model.name,
        "swaps": len(swap_log),
        "without_swaps": summary(calm),
        "with_swaps": summary(busy),
        "p99_ratio": summary(busy)["p99_ms"] / summary(calm)["p99_ms"],
        "activation_ms_median": activation,
        "worker_switch_ms_median": statistics.median(s["worker_ms"] for s in swap_log),
        "overlapping_requests": len(hit),
        "overlapping_p50_ms": statistics.median(hit),
        "not_overlapping_p50_ms": statistics.median(clear) if clear else None,
        "delay_added_by_a_swap_ms": added,
        "delay_in_activations": added / activation,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
