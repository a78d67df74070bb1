"""Fixed REST answers in the daemon's own shapes, for pixel-stable TUI snapshots.

Snapshots need the same screen every run, so ids and times are fixed here; the pilot tests in
``test_ui_*`` drive the real daemon and check that these shapes are the real ones. Served
through ``httpx.MockTransport``, so the TUI's client still speaks HTTP and parses SSE.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

T0 = 1_900_000_000.0  # 2030-03-17, never "today"
VERSION = "20300317-0300-r1"
ANSWER = "Here are three fruits:\n\n- apple\n- pear\n- plum\n\nEach is **sweet** and easy to find."
TOKENS = [
    "Here",
    " are",
    " three",
    " fruits",
    ":",
    "\n\n",
    "-",
    " apple",
    "\n",
    "-",
    " pear",
    "\n",
    "-",
    " plum",
    "\n\n",
    "Each",
    " is",
    " **",
    "sweet",
    "**",
    " and",
    " easy",
    ".",
]
ADVANTAGE = [
    0.1,
    0.0,
    -0.4,
    -0.2,
    -1.2,
    -1.6,
    -2.4,
    -0.8,
    -1.1,
    -2.2,
    -0.7,
    -1.0,
    -2.0,
    -0.5,
    -0.9,
    0.6,
    0.3,
    -0.3,
    0.2,
    -0.3,
    0.4,
    0.5,
    0.9,
]

TURN = {
    "id": "chatcmpl-1",
    "seq": 0,
    "created_at": T0,
    "messages": [{"role": "user", "content": "Name three fruits."}],
    "response": ANSWER,
    "reasoning": "The user wants three fruits. Keep it short.",
    "finish_reason": "stop",
    "model": "qwen3-1.7b",
    "adapter_version": VERSION,
    "learn": True,
    "usage": {"prompt_tokens": 12, "completion_tokens": 23},
    "timing": {"ttft_ms": 40.0, "total_ms": 300.0},
    "next_state": {"role": "user", "content": "No lists please.", "next_turn_id": None},
    "feedback": [{"rating": -1, "comment": "No lists please.", "created_at": T0}],
}
CONVERSATION = {
    "id": "conv-fruits",
    "title": "Name three fruits.",
    "learn": True,
    "created_at": T0,
    "updated_at": T0,
    "turns": [TURN],
}
SIGNALS = [
    {
        "id": 2,
        "turn_id": "chatcmpl-2",
        "score": 1.0,
        "hint": None,
        "hint_source": None,
        "created_at": T0,
        "conversation_id": "conv-b",
        "response": "Paris.",
        "next_state": "thanks!",
        "next_role": "user",
        "sample_id": 2,
        "sample_kind": "rl",
        "sample_status": "pending",
        "votes": 3,
    },
    {
        "id": 1,
        "turn_id": "chatcmpl-1",
        "score": -1.0,
        "hint": "No lists please.",
        "hint_source": "feedback",
        "created_at": T0,
        "conversation_id": "conv-fruits",
        "response": ANSWER[:200],
        "next_state": "No lists please.",
        "next_role": "user",
        "sample_id": 1,
        "sample_kind": "opd+rl",
        "sample_status": "approved",
        "votes": 0,
    },
]
STEPS = [
    {
        "step": i + 1,
        "loss": 0.9 / (i + 1),
        "adv_mean": -0.5 + 0.05 * i,
        "adv_opd": -0.8 + 0.07 * i,
        "adv_rl": -1.0,
        "clip_fraction": 0.0,
        "kl": 0.001 * i,
        "tokens": 23,
        "total_steps": 8,
    }
    for i in range(8)
]
GATE = {
    "passed": True,
    "checks": {
        "opd_gap_shrinks": True,
        "reward_logprob_holds": True,
        "drift_under_limit": True,
        "step_under_limit": True,
        "general_ability": True,
    },
    "skipped": [],
    "before": {"opd_gap": 0.842, "reward_logprob": -1.91},
    "after": {"opd_gap": 0.611, "reward_logprob": -1.72},
    "kl_to_base": 0.031,
    "kl_to_parent": 0.031,
    "max_kl": 0.5,
    "step_kl": 0.25,
    "ability": {
        "base": {"empty": 0.0, "repetitive": 0.031, "degenerate": 0.031, "distinct": 1.0},
        "candidate": {"empty": 0.0, "repetitive": 0.0, "degenerate": 0.0, "distinct": 1.0},
    },
    "tolerance": 0.02,
    "heldout": 4,
    "compared_with": "base model",
}
ADAPTER = {
    "version": VERSION,
    "parent": None,
    "base_sha256": "0" * 64,
    "run_id": 1,
    "path": "/home/user/.local/share/clawd/adapters/" + VERSION,
    "status": "active",
    "metrics": {"final_loss": 0.11, "steps": 8, "gate": GATE},
    "created_at": T0,
}
REPORT = {
    "run_id": 1,
    "version": VERSION,
    "status": "succeeded",
    "n_samples": 2,
    "skipped": 0,
    "config": {},
    "steps": STEPS,
    "samples": [
        {
            "sample_id": 1,
            "kind": "opd+rl",
            "hint": "No lists please.",
            "reward": -1.0,
            "tokens": TOKENS,
            "opd_advantage": ADVANTAGE,
        },
        {
            "sample_id": 2,
            "kind": "rl",
            "hint": None,
            "reward": 1.0,
            "tokens": ["Paris", "."],
            "opd_advantage": None,
        },
    ],
}


def _sse(text: str) -> bytes:
    chunks = [{"delta": {"role": "assistant", "content": ""}}]
    chunks += [{"delta": {"content": word + " "}} for word in text.split(" ")]
    out = []
    for c in chunks:
        out.append({"id": "chatcmpl-9", "choices": [{"index": 0, **c, "finish_reason": None}]})
    out.append(
        {
            "id": "chatcmpl-9",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "clawd": {"conversation_id": "conv-new", "adapter_version": VERSION},
        }
    )
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in out) + b"data: [DONE]\n\n"


def handler(request: httpx.Request) -> httpx.Response:
    """The fixed daemon: GETs answer from the data above; the chat streams a fixed answer."""
    path, method = request.url.path, request.method
    routes: dict[tuple[str, str], Any] = {
        ("GET", "/health"): {
            "status": "ok",
            "model": "qwen3-1.7b",
            "adapter": VERSION,
            "jobs": {"training": False},
        },
        ("GET", "/v1/conversations"): {"data": [{**CONVERSATION, "turns": 1}]},
        ("GET", "/v1/conversations/conv-fruits"): CONVERSATION,
        ("GET", "/v1/signals"): {"data": SIGNALS},
        ("GET", "/v1/signals/1"): {**SIGNALS[1], "votes": [], "response": ANSWER},
        ("GET", "/v1/signals/2"): {
            **SIGNALS[0],
            "votes": [{"kind": "judge", "score": 1.0, "hint": None, "raw_text": "\\boxed{1}"}] * 3,
        },
        ("GET", "/v1/train"): {
            "running": False,
            "runs": [{"id": 1, "status": "succeeded", "adapter_version": VERSION, "reason": None}],
            "latest_steps": STEPS,
            "approved_samples": 1,
            "learnable_samples": 1,
            "train_method": "combined",
            "next_runs": {"nightly": "2030-03-18T03:30:00+00:00"},
        },
        ("GET", "/v1/adapters"): {"active": VERSION, "data": [ADAPTER]},
        ("GET", f"/v1/adapters/{VERSION}"): {**ADAPTER, "gate": GATE, "samples": []},
        ("GET", f"/v1/adapters/{VERSION}/report"): REPORT,
    }
    if (method, path) == ("POST", "/v1/chat/completions"):
        return httpx.Response(
            200,
            content=_sse("Apple, pear and plum."),
            headers={"content-type": "text/event-stream"},
        )
    if (method, path) in routes:
        return httpx.Response(200, json=routes[(method, path)])
    return httpx.Response(404, json={"error": {"message": f"no fixture for {method} {path}"}})


def transport() -> httpx.MockTransport:
    return httpx.MockTransport(handler)
