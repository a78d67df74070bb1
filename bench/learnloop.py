"""One simulated user's learning loop on its own daemon: interact, wait for the signals,
train, evaluate (with and without the user's memories). ``bench.learning`` runs one per
(method, persona, seed).

Not run alone; see ``bench.learning``.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

from bench.learnreport import looping
from bench.learnsetup import Config
from bench.personas import Persona, SimulatedUser
from fixtures.daemon import RunningDaemon


class Loop:
    """One method, persona and seed on its own daemon."""

    def __init__(
        self,
        daemon: RunningDaemon,
        persona: Persona,
        cfg: Config,
        seed: int,
        oracle: bool,
        model: Path,
    ) -> None:
        self.d, self.persona, self.cfg, self.oracle = daemon, persona, cfg, oracle
        self.model = model  # the daemon's model: its tokens tell a looping answer
        self.user = SimulatedUser(persona, random.Random(seed))
        self.seed = seed
        self.http = daemon.client()

    def chat(self, messages: list[dict], **params: Any) -> dict:
        headers = params.pop("headers", None) or {}
        body = {"messages": messages, **params}
        resp = self.http.post("/v1/chat/completions", json=body, headers=headers)
        resp.raise_for_status()
        return resp.json()

    def interact(self, k: int) -> list[dict[str, Any]]:
        """K conversations; returns what happened in each (for judge agreement)."""
        out = []
        for i in range(k):
            question = self.user.ask()
            msgs = [{"role": "user", "content": question}]
            a = self.chat(
                msgs,
                max_tokens=self.cfg.answer_tokens,
                temperature=self.cfg.temperature,
                seed=self.seed * 1000 + i,
            )
            answer = a["choices"][0]["message"]["content"]
            reply = self.user.reply(answer)
            rating, hint = self.user.oracle(answer)
            if self.oracle:  # explicit feedback beats the judge
                self.http.post(
                    "/v1/feedback", json={"id": a["id"], "rating": rating, "comment": hint}
                ).raise_for_status()
            if reply is not None:  # the next state: the daemon records it with this turn
                follow = [
                    *msgs,
                    {"role": "assistant", "content": answer},
                    {"role": "user", "content": reply},
                ]
                self.chat(follow, max_tokens=1)
            out.append(
                {
                    "turn": a["id"],
                    "oracle": rating,
                    "reply": reply,
                    "signal": reply is not None or self.oracle,
                }
            )
        return out

    def wait_for_signals(self, turns: list[dict[str, Any]], timeout: float = 900) -> list[dict]:
        want = {t["turn"] for t in turns if t["signal"]}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.http.get("/v1/signals", params={"limit": 1000}).json()["data"]
            got = {r["turn_id"]: r for r in rows if r["turn_id"] in want}
            if len(got) == len(want):
                return list(got.values())
            time.sleep(1)
        raise TimeoutError(f"signals for {len(want)} turns not ready after {timeout}s")

    def train(self, timeout: float = 1800) -> dict[str, Any]:
        before = self.http.get("/v1/train").json()
        if before["learnable_samples"] == 0:  # none, or none the method can learn from
            return {"status": "no samples"}
        last = before["runs"][0]["id"] if before["runs"] else 0
        started = self.http.post("/v1/train")
        if started.status_code == 409:  # e.g. every reply scored the same and none has a hint
            error = started.json()["error"]
            if error.get("code") == "nothing_to_train":
                return {"status": "nothing to learn", "reason": error["message"]}
        started.raise_for_status()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            t = self.http.get("/v1/train").json()
            if t["runs"] and t["runs"][0]["id"] > last and t["runs"][0]["status"] != "running":
                run = t["runs"][0]
                break
            time.sleep(1)
        else:
            raise TimeoutError("training did not finish")
        if run["status"] != "succeeded":
            return {"status": "failed", "reason": run["reason"]}
        version = run["adapter_version"]
        while time.monotonic() < deadline:  # promotion runs every 5 s
            row = self.http.get(f"/v1/adapters/{version}").json()
            if row["status"] != "candidate":
                break
            time.sleep(1)
        gate = row.get("gate") or {}
        if row["status"] == "rejected" and self.cfg.bypass_gate:
            self.http.post(f"/v1/adapters/{version}/activate", json={"force": True})
            row["status"] = "rejected, served anyway (--bypass-gate)"
        return {
            "status": row["status"],
            "version": version,
            "kl_to_base": gate.get("kl_to_base"),
            "gate_passed": gate.get("passed"),
            "failed_checks": [k for k, ok in (gate.get("checks") or {}).items() if not ok],
            # the whole update failed and earlier points of it were judged (served_steps: the
            # one that serves, None: none passed)
            "walked_back": gate.get("walked_back"),
            # general answers that degenerated where the base model's did not (quoted)
            "new_degenerate": [
                d["answer"] for d in (gate.get("ability") or {}).get("new_degenerate", [])
            ],
            "samples": run["n_samples"],
            "seconds": (row.get("manifest") or {}).get("seconds"),  # per phase, gate included
        }

    def evaluate(self) -> dict[str, Any]:
        """Greedy answers to the held-out prompts, as served (the user's memories in context)
        and with ``X-Clawd-Memory: 0`` (what the weights alone do: what consolidation made
        stick)."""
        scores, examples, weights, plain = [], [], [], []
        pool = self.persona.eval_prompts
        if self.cfg.prompts == "tuning":
            pool = self.persona.tuning_prompts
        for prompt in pool[: self.cfg.eval_prompts]:
            for memory, into in (("1", scores), ("0", weights)):
                a = self.chat(
                    [{"role": "user", "content": prompt}],
                    max_tokens=self.cfg.answer_tokens,
                    temperature=0,
                    headers={"X-Clawd-Learn": "0", "X-Clawd-Memory": memory},
                )
                text = a["choices"][0]["message"]["content"]
                into.append(self.persona.compliance(text))
                (examples if memory == "1" else plain).append(text)
        mems = self.http.get("/v1/memories").json()["data"]
        return {
            "compliance": statistics.fmean(scores),
            # the same prompts without the memories in context: the weights alone
            "compliance_without_memory": statistics.fmean(weights),
            "scores_without_memory": weights,
            "examples_without_memory": plain,
            "memories": [
                {"text": m["text"], "status": m["status"], "gap": m["gap"], "base": m["base_gap"]}
                for m in mems
                if m["status"] != "replaced"
            ],
            # every held-out answer and its score: a fall shows which prompt fell and how
            "examples": examples,
            "scores": scores,
            "loops": looping(examples, self.model),  # compliance bought with a loop shows
            "adapter": a["clawd"]["adapter_version"],
        }
