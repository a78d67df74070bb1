"""Tool use and structured output: do the daemon's tool calls and JSON answers parse and fit
their schemas, what JSON mode costs in speed, and how well the rules read a tool's output.

Four parts; the first three on the real daemon (``fixtures.daemon.start_daemon``) serving the
configured model, every request non-streamed with ``max_tokens`` 200 and a fixed seed (the
daemon's sampling otherwise; Qwen3's thinking off unless ``--thinking``):

1. ``tools``: each request of ``bench/data/tool_requests.jsonl`` (categories ``single``,
   ``choice``, ``no_call``, ``nested``, ``enum``, ``array``, ``agent``; ``tool_choice`` "auto",
   "required" or a named function). Per mode: of the calls made, the share whose arguments parse
   as JSON and fit the tool's parameters schema; the share of requests that called the expected
   function (``no_call``: that answered in prose), also per category, reported with no goal;
   with "auto", the share of answers whose content holds a ``<tool_call>`` that did not become a
   call (goal 0).
2. ``json``: each request of ``bench/data/json_requests.jsonl`` (``json_schema`` and
   ``json_object``): the share of answers that parse and fit the schema (``json_object``: a JSON
   object), answers cut by ``max_tokens`` (finish_reason "length") counted apart.
3. ``speed``: the same 10 prompts asking for JSON, each sent with ``response_format``
   ``json_object`` and without, the order alternating; tokens/s per arm (completion tokens over
   wall seconds, and over the daemon's own decode time), and their ratio.
4. ``outputs`` (no model): ``clawd.signals.toolresult.tool_outcome`` on each labelled output of
   ``bench/data/tool_outputs.jsonl``: wrong-sign (a success scored -1), misses (an error scored
   0), ambiguous outputs scored -1, each k/n with a 95% Wilson interval.

Schemas are checked by a small validator of the features the data use
(``bench.schemacheck``). Run alone (SmolLM2-135M: a few minutes on 2 cores)::

    .venv/bin/python -m bench.tools
    .venv/bin/python -m bench.tools --model PATH --out docs/bench/tools.json
    .venv/bin/python -m bench.tools --parts outputs
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.capture import share
from bench.schemacheck import check_schemas, extra_keys, schema_errors
from clawd.config import load_settings
from clawd.models import resolve
from clawd.signals.toolresult import tool_outcome
from fixtures.daemon import RunningDaemon, start_daemon

DATA = Path(__file__).parent / "data"
MAX_TOKENS = 200
SEED = 7
PARTS = ("tools", "json", "speed", "outputs")
NO_LEARN = {"X-Clawd-Learn": "0", "X-Clawd-Memory": "0"}  # out of training and memories
MODES = ("auto", "required", "named")
SPEED_PROMPTS = [
    f"Describe {thing} as a JSON object with a few fields."
    for thing in (
        "a bicycle",
        "the planet Mars",
        "a cup of coffee",
        "a public library",
        "a thunderstorm",
        "a chess opening",
        "a hiking trail",
        "a sourdough bread",
        "a city bus",
        "a house cat",
    )
]


# --- a validator for the JSON-schema features the data use ----------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def mode_of(tool_choice: Any) -> str:
    return tool_choice if isinstance(tool_choice, str) else "named"


def post(
    client: httpx.Client, body: dict[str, Any], thinking: bool
) -> tuple[dict[str, Any] | None, float, str | None]:
    """The response body (None on an HTTP error), wall seconds and the error's text."""
    body = {"max_tokens": MAX_TOKENS, "seed": SEED, **body}
    if not thinking:
        body["chat_template_kwargs"] = {"enable_thinking": False}
    t0 = time.perf_counter()
    r = client.post("/v1/chat/completions", json=body, headers=NO_LEARN)
    wall = time.perf_counter() - t0
    if r.status_code != 200:
        return None, wall, f"{r.status_code}: {r.text[:300]}"
    return r.json(), wall, None


def check_call(call: dict[str, Any], tools: dict[str, dict]) -> dict[str, Any]:
    name = call["function"]["name"]
    out: dict[str, Any] = {"name": name, "json": False, "valid": False, "errors": [], "extra": []}
    try:
        args = json.loads(call["function"]["arguments"])
    except ValueError as exc:
        out["errors"] = [f"arguments do not parse: {exc}"]
        return out
    out["json"] = True
    if name not in tools:
        out["errors"] = [f"no tool {name!r} was given"]
        return out
    schema = tools[name]["function"]["parameters"]
    out["errors"] = schema_errors(args, schema)[:5]
    out["valid"] = not out["errors"]
    out["extra"] = extra_keys(args, schema)
    return out


def run_tool_requests(d: RunningDaemon, rows: list[dict], thinking: bool) -> list[dict]:
    out = []
    with d.client(timeout=600) as client:
        for r in rows:
            body = {"messages": r["messages"], "tools": r["tools"], "tool_choice": r["tool_choice"]}
            resp, wall, error = post(client, body, thinking)
            row: dict[str, Any] = {
                "id": r["id"],
                "category": r["category"],
                "mode": mode_of(r["tool_choice"]),
                "expect": r["expect"],
                "http_error": error,
                "seconds": round(wall, 2),
            }
            if resp is not None:
                choice = resp["choices"][0]
                msg = choice["message"]
                tools = {t["function"]["name"]: t for t in r["tools"]}
                calls = [check_call(c, tools) for c in msg.get("tool_calls") or []]
                content = msg.get("content") or ""
                first = calls[0]["name"] if calls else None
                row.update(
                    finish_reason=choice["finish_reason"],
                    calls=calls,
                    content=content[:400],
                    unparsed_tag=not calls and "<tool_call>" in content,
                    called_expected=first == r["expect"],
                    completion_tokens=resp["usage"]["completion_tokens"],
                )
            print(json.dumps({k: v for k, v in row.items() if k != "content"}), flush=True)
            out.append(row)
    return out


def summarize_tools(rows: list[dict]) -> dict[str, Any]:
    answered = [r for r in rows if r["http_error"] is None]
    per_mode = {}
    for mode in MODES:
        mine = [r for r in answered if r["mode"] == mode]
        calls = [c for r in mine for c in r["calls"]]
        per_mode[mode] = {
            "requests": sum(r["mode"] == mode for r in rows),
            "http_errors": sum(r["mode"] == mode and r["http_error"] is not None for r in rows),
            "length": sum(r["finish_reason"] == "length" for r in mine),
            "made_a_call": share(sum(bool(r["calls"]) for r in mine), len(mine)),
            "calls_json": share(sum(c["json"] for c in calls), len(calls)),
            "calls_valid": share(sum(c["valid"] for c in calls), len(calls)),
            "calls_with_extra_keys": sum(bool(c["extra"]) for c in calls),
            "expected": share(sum(r["called_expected"] for r in mine), len(mine)),
        }
    auto = [r for r in answered if r["mode"] == "auto"]
    per_mode["auto"]["unparsed_tool_call"] = share(sum(r["unparsed_tag"] for r in auto), len(auto))
    categories = sorted({r["category"] for r in rows})
    per_category = {
        cat: share(
            sum(r["called_expected"] for r in answered if r["category"] == cat),
            sum(r["category"] == cat for r in answered),
        )
        for cat in categories
    }
    all_calls = [c for r in answered for c in r["calls"]]
    return {
        "n": len(rows),
        "http_errors": [f"{r['id']}: {r['http_error']}" for r in rows if r["http_error"]],
        "calls_valid": share(sum(c["valid"] for c in all_calls), len(all_calls)),
        "per_mode": per_mode,
        "expected_per_category": per_category,
        "invalid_calls": [
            {"id": r["id"], "name": c["name"], "errors": c["errors"]}
            for r in answered
            for c in r["calls"]
            if not c["valid"]
        ],
        "unparsed": [{"id": r["id"], "content": r["content"]} for r in auto if r["unparsed_tag"]],
    }


def run_json_requests(d: RunningDaemon, rows: list[dict], thinking: bool) -> list[dict]:
    out = []
    with d.client(timeout=600) as client:
        for r in rows:
            fmt = r["response_format"]
            resp, wall, error = post(
                client, {"messages": r["messages"], "response_format": fmt}, thinking
            )
            row: dict[str, Any] = {
                "id": r["id"],
                "type": fmt["type"],
                "http_error": error,
                "seconds": round(wall, 2),
            }
            if resp is not None:
                choice = resp["choices"][0]
                content = choice["message"].get("content") or ""
                row.update(finish_reason=choice["finish_reason"], parsed=False, valid=False)
                try:
                    value = json.loads(content)
                    row["parsed"] = True
                except ValueError as exc:
                    row["errors"] = [f"does not parse: {exc}"]
                if row["parsed"]:
                    if fmt["type"] == "json_schema":
                        schema = fmt["json_schema"]["schema"]
                        row["errors"] = schema_errors(value, schema)[:5]
                        row["extra"] = extra_keys(value, schema)
                    else:
                        row["errors"] = [] if isinstance(value, dict) else ["not a JSON object"]
                    row["valid"] = not row["errors"]
                row["content"] = content[:400]
                row["completion_tokens"] = resp["usage"]["completion_tokens"]
            print(json.dumps({k: v for k, v in row.items() if k != "content"}), flush=True)
            out.append(row)
    return out


def summarize_json(rows: list[dict]) -> dict[str, Any]:
    answered = [r for r in rows if r["http_error"] is None]
    whole = [r for r in answered if r["finish_reason"] != "length"]
    out: dict[str, Any] = {
        "n": len(rows),
        "http_errors": [f"{r['id']}: {r['http_error']}" for r in rows if r["http_error"]],
        "length": share(len(answered) - len(whole), len(answered)),
        "valid": share(sum(r["valid"] for r in whole), len(whole)),
        "parsed": share(sum(r["parsed"] for r in whole), len(whole)),
        "with_extra_keys": sum(bool(r.get("extra")) for r in whole),
    }
    for kind in ("json_schema", "json_object"):
        mine = [r for r in whole if r["type"] == kind]
        out[kind] = share(sum(r["valid"] for r in mine), len(mine))
    out["invalid"] = [{"id": r["id"], "errors": r["errors"]} for r in whole if not r["valid"]]
    return out


def run_speed(d: RunningDaemon, thinking: bool) -> dict[str, Any]:
    arms: dict[str, list[tuple[int, float, float]]] = {"json_object": [], "plain": []}
    with d.client(timeout=600) as client:
        post(client, {"messages": [{"role": "user", "content": "Hello."}]}, thinking)  # warm up
        for i, text in enumerate(SPEED_PROMPTS):
            order = ["json_object", "plain"] if i % 2 == 0 else ["plain", "json_object"]
            for arm in order:
                body: dict[str, Any] = {"messages": [{"role": "user", "content": text}]}
                if arm == "json_object":
                    body["response_format"] = {"type": "json_object"}
                resp, wall, error = post(client, body, thinking)
                if resp is None:
                    raise RuntimeError(f"speed prompt {i} ({arm}): {error}")
                extra = resp.get("clawd") or {}
                decode_s = (extra.get("total_ms", 0) - extra.get("ttft_ms", 0)) / 1000
                arms[arm].append((resp["usage"]["completion_tokens"], wall, decode_s))
                shown = {"prompt": i, "arm": arm, "tokens": arms[arm][-1][0], "s": round(wall, 2)}
                print(json.dumps(shown), flush=True)
    out: dict[str, Any] = {"prompts": len(SPEED_PROMPTS)}
    for arm, got in arms.items():
        tokens = sum(t for t, _, _ in got)
        decode_tokens = sum(t - 1 for t, _, s in got if t > 1 and s > 0)
        decode_s = sum(s for t, _, s in got if t > 1 and s > 0)
        out[arm] = {
            "completion_tokens": tokens,
            "wall_s": round(sum(w for _, w, _ in got), 2),
            "tokens_per_s": round(tokens / sum(w for _, w, _ in got), 2),
            "decode_tokens_per_s": round(decode_tokens / decode_s, 2) if decode_s else None,
            "median_tokens": statistics.median(t for t, _, _ in got),
        }
    out["ratio"] = round(out["json_object"]["tokens_per_s"] / out["plain"]["tokens_per_s"], 3)
    if out["json_object"]["decode_tokens_per_s"] and out["plain"]["decode_tokens_per_s"]:
        out["decode_ratio"] = round(
            out["json_object"]["decode_tokens_per_s"] / out["plain"]["decode_tokens_per_s"], 3
        )
    return out


def score_outputs(rows: list[dict]) -> dict[str, Any]:
    by: dict[str, list[tuple[str, int]]] = {"error": [], "success": [], "ambiguous": []}
    for r in rows:
        by[r["label"]].append((r["output"], tool_outcome(r["output"])))

    def shown(items: list[tuple[str, int]], value: int) -> list[str]:
        return [o[:100] for o, v in items if v == value]

    return {
        "n": len(rows),
        "labels": {k: len(v) for k, v in by.items()},
        "wrong_sign": share(sum(v == -1 for _, v in by["success"]), len(by["success"])),
        "caught": share(sum(v == -1 for _, v in by["error"]), len(by["error"])),
        "misses": share(sum(v == 0 for _, v in by["error"]), len(by["error"])),
        "ambiguous_scored_bad": share(
            sum(v == -1 for _, v in by["ambiguous"]), len(by["ambiguous"])
        ),
        "wrong_sign_outputs": shown(by["success"], -1),
        "missed_outputs": shown(by["error"], 0),
        "ambiguous_scored_bad_outputs": shown(by["ambiguous"], -1),
    }


# --- the table ------------------------------------------------------------------------------


def pct(s: dict[str, Any]) -> str:
    if not s["n"]:
        return "-"
    lo, hi = s["ci95"]
    return f"{s['k']}/{s['n']} {s['rate']:.0%} [{lo:.2f}, {hi:.2f}]"


def table(report: dict[str, Any]) -> str:
    lines = []
    if "tools" in report:
        t = report["tools"]
        lines.append(f"tool requests (n={t['n']}, http errors {len(t['http_errors'])})")
        lines.append(f"  {'mode':<9} {'calls valid':<26} {'expected fn':<26} {'made a call':<24}")
        for mode, m in t["per_mode"].items():
            lines.append(
                f"  {mode:<9} {pct(m['calls_valid']):<26} {pct(m['expected']):<26} "
                f"{pct(m['made_a_call']):<24} length {m['length']}"
            )
        unparsed = t["per_mode"]["auto"]["unparsed_tool_call"]
        lines.append(f"  auto: <tool_call> left unparsed {pct(unparsed)} (goal 0)")
        per_cat = t["expected_per_category"].items()
        lines.append(
            "  expected fn per category: " + ", ".join(f"{c} {s['k']}/{s['n']}" for c, s in per_cat)
        )
    if "json" in report:
        j = report["json"]
        lines.append(
            f"json requests (n={j['n']}): valid {pct(j['valid'])}; "
            f"json_schema {pct(j['json_schema'])}, json_object {pct(j['json_object'])}; "
            f"cut by length {j['length']['k']}"
        )
    if "speed" in report:
        s = report["speed"]
        lines.append(
            f"speed: json_object {s['json_object']['tokens_per_s']} tok/s, plain "
            f"{s['plain']['tokens_per_s']} tok/s, ratio {s['ratio']}"
            + (f" (decode ratio {s['decode_ratio']})" if "decode_ratio" in s else "")
        )
    for key, name in (("outputs", "tool outputs"), ("outputs_blind", "tool outputs, blind")):
        if key in report:
            o = report[key]
            lines.append(
                f"{name} (n={o['n']}, {o['labels']}): wrong-sign {pct(o['wrong_sign'])}, "
                f"caught {pct(o['caught'])}, misses {pct(o['misses'])}, "
                f"ambiguous scored -1 {pct(o['ambiguous_scored_bad'])}"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="GGUF path or installed model name (default: the configured)")
    ap.add_argument("--out", type=Path, default=Path("docs/bench/tools.json"))
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {PARTS}")
    ap.add_argument("--n-ctx", type=int, default=4096, help="context (agent requests are long)")
    ap.add_argument("--thinking", action="store_true", help="let Qwen3 think (off by default)")
    args = ap.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    if unknown := set(parts) - set(PARTS):
        ap.error(f"unknown parts: {sorted(unknown)}")
    tool_requests = read_jsonl(DATA / "tool_requests.jsonl")
    json_requests = read_jsonl(DATA / "json_requests.jsonl")
    outputs = read_jsonl(DATA / "tool_outputs.jsonl")  # read while the rules were widened
    blind = read_jsonl(DATA / "tool_outputs_b.jsonl")  # written blind, never read for the rules
    check_schemas(tool_requests, json_requests)

    settings = load_settings()
    model = resolve(args.model or settings.model)
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "model": model.name,
        "max_tokens": MAX_TOKENS,
        "seed": SEED,
        "thinking": args.thinking,
        "n": {
            "tool_requests": len(tool_requests),
            "json_requests": len(json_requests),
            "speed_prompts": len(SPEED_PROMPTS),
            "tool_outputs": len(outputs),
            "tool_outputs_blind": len(blind),
        },
    }
    rows: dict[str, list[dict]] = {}
    if {"tools", "json", "speed"} & set(parts):
        d = start_daemon(
            model, Path(tempfile.mkdtemp(prefix="clawd-bench-tools-")), n_ctx=args.n_ctx
        )
        try:
            if "tools" in parts:
                rows["tools"] = run_tool_requests(d, tool_requests, args.thinking)
                report["tools"] = summarize_tools(rows["tools"])
            if "json" in parts:
                rows["json"] = run_json_requests(d, json_requests, args.thinking)
                report["json"] = summarize_json(rows["json"])
            if "speed" in parts:
                report["speed"] = run_speed(d, args.thinking)
        finally:
            report["server_errors"] = d.server_errors()[:10]
            d.stop(allow_server_errors=True)
    if "outputs" in parts:
        report["outputs"] = score_outputs(outputs)
        report["outputs_blind"] = score_outputs(blind)
    report["rows"] = rows
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    print(table(report))
    print(f"report: {args.out}")


if __name__ == "__main__":
    main()
