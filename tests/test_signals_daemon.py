"""End to end: replies through the REST API become signals in the running daemon's job."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from clawd.store.db import Store
from fixtures.daemon import RunningDaemon, start_daemon

FAST_JOB = {"CLAWD_SIGNALS_INTERVAL_S": "1", "CLAWD_JUDGE_MAX_TOKENS": "24"}


def wait_for(predicate, timeout: float = 90, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s")


def converse(c: httpx.Client, question: str, reply: str) -> str:
    """An answer and the user's reply to it, as an editor would send them."""
    first = [{"role": "user", "content": question}]
    a1 = c.post(
        "/v1/chat/completions", json={"messages": first, "max_tokens": 16, "temperature": 0}
    ).json()
    follow = [
        *first,
        {"role": "assistant", "content": a1["choices"][0]["message"]["content"]},
        {"role": "user", "content": reply},
    ]
    c.post("/v1/chat/completions", json={"messages": follow, "max_tokens": 4})
    return a1["id"]


def signal_of(c: httpx.Client, turn_id: str) -> dict | None:
    for row in c.get("/v1/signals").json()["data"]:
        if row["turn_id"] == turn_id:
            return c.get(f"/v1/signals/{row['id']}").json()
    return None


@pytest.fixture(scope="module")
def daemon(any_gguf: Path, tmp_path_factory: pytest.TempPathFactory):
    d = start_daemon(any_gguf, tmp_path_factory.mktemp("signals-home"), settings=FAST_JOB)
    yield d
    d.stop()


def test_a_corrective_reply_becomes_a_signal_and_a_sample(daemon: RunningDaemon) -> None:
    with daemon.client() as c:
        judged = converse(c, "What is the capital of France?", "No! Just answer in one word.")
        rated = converse(c, "List three fruits.", "ok")
        fb = c.post("/v1/feedback", json={"id": rated, "rating": -1, "comment": "No lists."})
        assert fb.status_code == 200
        sig = wait_for(lambda: signal_of(c, judged), timeout=240)  # tiny Qwen3: fits its probe
        [vote] = sig["votes"]  # the default judge: one probe vote with its probabilities
        assert vote["kind"] == "probe" and "p(-1)" in vote["raw_text"]
        fitted = list((daemon.home / "cache" / "probe").glob("probe-*.json"))
        assert len(fitted) == (0 if "smollm2" in sig["judge_model"] else 1)  # shipped, or fitted
        assert sig["next_state"] == "No! Just answer in one word."
        kinds = {-1: "opd+rl", 1: "rl", 0: None}  # the reply extractor's table
        assert (sig["sample"] or {}).get("kind") == kinds[sig["score"]]
        fsig = wait_for(lambda: signal_of(c, rated))
        assert (fsig["score"], fsig["hint"], fsig["hint_source"]) == (-1, "No lists.", "feedback")
        assert fsig["sample"]["kind"] == "opd+rl" and fsig["sample"]["status"] == "approved"
        veto = c.post(f"/v1/signals/{fsig['id']}/veto")
        assert veto.status_code == 200 and veto.json()["sample_status"] == "vetoed"
        assert c.post("/v1/signals/99999/approve").status_code == 404
        for bad in ("24453415020501794816", "0", "-3", "x"):  # ids that no signal can have
            for r in (c.get(f"/v1/signals/{bad}"), c.post(f"/v1/signals/{bad}/veto")):
                assert r.status_code == 400, (bad, r.status_code, r.text)
                assert r.json()["error"]["param"] == "path.sid"
        assert c.get("/v1/signals", params={"status": "bogus"}).status_code == 400
        health = daemon.health()
        assert health["jobs"]["signals"]["enabled"] and health["jobs"]["signals"]["runs"] > 0


def test_the_daemon_log_says_what_happened_not_every_job_run(daemon: RunningDaemon) -> None:
    wait_for(lambda: daemon.health()["jobs"]["signals"]["runs"] >= 3)
    log = daemon.log.read_text()
    assert "clawd on http://" in log
    assert "Running job" not in log and "executed successfully" not in log


@pytest.mark.slow
def test_another_model_can_judge(smollm2_gguf: Path, tiny_qwen3_gguf: Path, tmp_path: Path) -> None:
    # written votes: the probe fitting itself for the tiny model is tested above ([qwen3])
    judge = {**FAST_JOB, "CLAWD_JUDGE_MODEL": str(tiny_qwen3_gguf), "CLAWD_JUDGE_MODE": "generate"}
    d = start_daemon(smollm2_gguf, tmp_path / "judge-home", settings=judge)
    try:
        jobs = d.health()["jobs"]
        assert jobs["signals"]["judge"] == tiny_qwen3_gguf.name != smollm2_gguf.name
        assert jobs["signals"]["mode"] == "generate"
        with d.client() as c:
            turn = converse(c, "What is the capital of France?", "No, that's wrong.")
            sig = wait_for(lambda: signal_of(c, turn))
        assert sig["judge_model"] == str(tiny_qwen3_gguf)
        assert [v["kind"] for v in sig["votes"]] == ["judge"] * 3
        assert all(v["raw_text"] is not None for v in sig["votes"])
    finally:
        d.stop()


def test_kill_9_during_the_job_leaves_exactly_one_signal_set(
    any_gguf: Path, tmp_path: Path
) -> None:
    home = tmp_path / "kill-home"
    slow = {  # written votes: a judge run long enough to be killed in the middle
        "CLAWD_JUDGE_MODE": "generate",
        "CLAWD_SIGNALS_INTERVAL_S": "1",
        "CLAWD_JUDGE_VOTES": "15",
        "CLAWD_JUDGE_MAX_TOKENS": "400",
    }
    d = start_daemon(any_gguf, home, settings=slow)
    try:
        with d.client() as c:
            turn = converse(c, "Tell me about the sea.", "That's wrong, try again.")
        wait_for(lambda: d.health()["jobs"]["signals"]["running"], every=0.05)
        time.sleep(0.3)
    finally:
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait()
    d = start_daemon(any_gguf, home, settings={**FAST_JOB, "CLAWD_JUDGE_MODE": "generate"})
    try:
        with d.client() as c:
            wait_for(lambda: signal_of(c, turn))
        with Store.open(home) as store:
            sets = list(store.db["signals"].rows_where("turn_id = ?", [turn]))
            assert len(sets) == 1
            votes = store.db["signal_votes"].count_where("signal_id = ?", [sets[0]["id"]])
            assert votes in (3, 15)  # the restarted run's, or the killed one's if it committed
            assert store.db["signal_votes"].count == votes  # no orphaned votes
            assert store.db["samples"].count_where("turn_id = ?", [turn]) <= 1
    finally:
        d.stop()
