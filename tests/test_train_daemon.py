"""Training from the daemon: REST-triggered runs in their own process, crashes contained."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import psutil
import pytest

from fixtures.daemon import start_daemon
from tests.test_signals_daemon import converse, signal_of, wait_for

# Written votes of 8 tokens: quick on the tiny model, whose random states leave the probe mute.
# The trainer one step below the daemon's priority: checked, and too little to slow it down.
SETTINGS = {
    "CLAWD_SIGNALS_INTERVAL_S": "1",
    "CLAWD_JUDGE_MODE": "generate",
    "CLAWD_JUDGE_MAX_TOKENS": "8",
    "CLAWD_TRAIN_NICENESS": "1",
}


def ended_run(c: httpx.Client) -> dict:
    """The first run that is no longer running, once there is one: ends on the run's state
    (however slow the machine), with a backstop under pytest's 600 s."""
    return wait_for(
        lambda: next(
            (run for run in c.get("/v1/train").json()["runs"] if run["status"] != "running"),
            None,
        ),
        timeout=420,
    )


@pytest.fixture
def daemon(tiny_qwen3_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)  # the daemon gives it to its trainer
    d = start_daemon(tiny_qwen3_gguf, tmp_path / "home", settings=SETTINGS)
    yield d
    d.stop()


def approved_sample(c: httpx.Client) -> None:
    turn = converse(c, "Name a color.", "ok")
    assert (
        c.post(
            "/v1/feedback", json={"id": turn, "rating": -1, "comment": "Answer in one word."}
        ).status_code
        == 200
    )
    # the job may judge the reply "ok" first (3 votes), then apply the feedback: slow under load
    wait_for(lambda: (signal_of(c, turn) or {}).get("sample"), timeout=240)


@pytest.mark.slow  # 40-55 s: the default run stays near 20 minutes
def test_train_through_rest_makes_a_candidate(daemon) -> None:
    with daemon.client() as c:
        r = c.post("/v1/train")
        assert r.status_code == 409 and r.json()["error"]["code"] == "nothing_to_train"
        approved_sample(c)
        r = c.post("/v1/train")
        assert r.status_code == 202, r.text
        assert c.post("/v1/train").status_code == 409  # one run at a time
        trainer = psutil.Process(r.json()["pid"])
        # it lowers its own priority, to the setting, as soon as it starts
        wait_for(lambda: trainer.nice() == 1, timeout=120)
        assert trainer.environ().get("GOMP_SPINCOUNT") == "1000"  # its threads do not spin
        done = ended_run(c)
        assert done["status"] == "succeeded", done
        status = c.get("/v1/train").json()
        assert (status["approved_samples"], status["learnable_samples"]) == (0, 0)
        assert status["latest_steps"] and "loss" in status["latest_steps"][0]
        assert "nightly" in status["next_runs"]
    assert (daemon.home / "adapters" / done["adapter_version"] / "adapter.gguf").exists()


@pytest.mark.slow
def test_the_daemon_survives_a_trainer_crash(daemon) -> None:
    with daemon.client() as c:
        approved_sample(c)
        pid = c.post("/v1/train").json()["pid"]
        wait_for(lambda: c.get("/v1/train").json()["runs"], timeout=120, every=0.1)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not daemon.health()["jobs"]["training"])
        assert httpx.get(f"{daemon.url}/health").status_code == 200
        r = c.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
        )
        assert r.status_code == 200
        # The next run finds the dead one, records why it ended, and trains.
        assert c.post("/v1/train").status_code == 202
        wait_for(
            lambda: any(run["status"] == "succeeded" for run in c.get("/v1/train").json()["runs"]),
            timeout=420,
        )
        statuses = {run["status"]: run for run in c.get("/v1/train").json()["runs"]}
    assert "interrupted" in statuses["failed"]["reason"]
    assert not list((daemon.home / "adapters").glob(".tmp-*"))


def test_a_method_with_nothing_to_learn_is_refused_with_the_reason(
    tiny_qwen3_gguf: Path, tmp_path: Path
) -> None:
    """OPD alone cannot learn from a bare thumbs-down: 409 with why, and the sample waits."""
    d = start_daemon(
        tiny_qwen3_gguf, tmp_path / "home", settings={**SETTINGS, "CLAWD_TRAIN_METHOD": "opd"}
    )
    try:
        with d.client() as c:
            turn = converse(c, "Name a color.", "ok")
            assert c.post("/v1/feedback", json={"id": turn, "rating": -1}).status_code == 200

            def counts() -> tuple:
                t = c.get("/v1/train").json()
                return t["approved_samples"], t["learnable_samples"], t["train_method"]

            wait_for(lambda: counts() == (1, 0, "opd"), timeout=240)
            r = c.post("/v1/train")
            assert r.status_code == 409 and r.json()["error"]["code"] == "nothing_to_train"
            assert "'opd' needs samples with a hint" in r.json()["error"]["message"]
            assert c.get("/v1/train").json()["runs"] == []
    finally:
        d.stop()


QUIET = {**SETTINGS, "CLAWD_SIGNALS_INTERVAL_S": "3600"}  # the job runs once, at start


def thumbs_down_with_a_hint(c: httpx.Client) -> tuple[str, httpx.Response]:
    """An answer and a thumbs-down on it that says what to change: its id and the answer."""
    first = c.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "Name a color."}], "max_tokens": 4},
    ).json()
    return first["id"], c.post(
        "/v1/feedback", json={"id": first["id"], "rating": -1, "comment": "One word."}
    )


def test_feedback_makes_its_signal_and_sample_in_the_same_request(
    tiny_qwen3_gguf: Path, tmp_path: Path
) -> None:
    d = start_daemon(tiny_qwen3_gguf, tmp_path / "home", settings=QUIET)
    try:
        with d.client() as c:
            turn, r = thumbs_down_with_a_hint(c)
            assert r.status_code == 200
            body = r.json()
            assert body["signal"] is True
            assert body["sample"]["kind"] == "opd+rl" and body["sample"]["status"] == "approved"
            sig = signal_of(c, turn)  # no waiting for the job
            assert (sig["score"], sig["hint"], sig["hint_source"]) == (-1, "One word.", "feedback")
            up = c.post("/v1/feedback", json={"id": turn, "rating": 1}).json()
            assert up["sample"]["kind"] == "rl"  # newer feedback replaces the untrained sample
            assert c.get("/v1/train").json()["approved_samples"] == 1
    finally:
        d.stop()


@pytest.mark.slow
def test_train_now_judges_the_waiting_replies_first(smollm2_gguf: Path, tmp_path: Path) -> None:
    quiet = {  # the default judge (the probe) on the default model
        "CLAWD_SIGNALS_INTERVAL_S": "3600",
        "CLAWD_TRAIN_EPOCHS": "1",
    }
    d = start_daemon(smollm2_gguf, tmp_path / "home", settings=quiet)
    try:
        with d.client() as c:
            wait_for(lambda: d.health()["jobs"]["signals"]["runs"] >= 1)
            turn = converse(c, "How do I reverse a list in Python?", "No, that's wrong. Try again.")
            assert signal_of(c, turn) is None  # the job will not run for an hour
            r = c.post("/v1/train")
            assert r.status_code == 202, r.text
            sig = signal_of(c, turn)
            assert sig is not None and sig["score"] == -1 and sig["sample"]["kind"] == "opd+rl"
            done = ended_run(c)
            assert done["status"] == "succeeded" and done["n_samples"] == 1, done
    finally:
        d.stop()


def test_a_trainer_that_cannot_start_is_a_503_with_the_reason(
    tiny_qwen3_gguf: Path, tmp_path: Path
) -> None:
    """The trainer's log folder cannot be made: 503 naming why, the sample still waits."""
    home = tmp_path / "home"
    d = start_daemon(tiny_qwen3_gguf, home, settings=QUIET)
    try:
        with d.client() as c:
            _, r = thumbs_down_with_a_hint(c)
            assert r.status_code == 200 and r.json()["sample"]["status"] == "approved"
            (home / "logs").write_text("a file where the log folder should be")
            r = c.post("/v1/train")
            assert r.status_code == 503, r.text
            error = r.json()["error"]
            assert error["code"] == "trainer_not_started"
            assert "could not start the trainer (api)" in error["message"]
            assert f"File exists: '{home / 'logs'}'" in error["message"]
            assert httpx.get(f"{d.url}/health").status_code == 200
            t = c.get("/v1/train").json()
            assert (t["runs"], t["approved_samples"], t["running"]) == ([], 1, False)
    finally:
        d.stop()
