"""The external judge: another clawd daemon as the OpenAI-compatible endpoint, and a dead one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from clawd.signals.external import ExternalJudge, chat_url
from clawd.signals.judge import JudgeError
from clawd.signals.rules import Exchange
from fixtures.daemon import free_port, start_daemon
from tests.test_signals_daemon import FAST_JOB, converse, signal_of, wait_for

TEA = Exchange(
    "How do I make a cup of tea?",
    "Tea is a drink with a long history. " * 5,
    "That is far too long and rambling. Give me three short steps.",
)


def test_endpoint_urls() -> None:
    assert chat_url("http://h:1/v1") == "http://h:1/v1/chat/completions"
    assert chat_url("http://h:1/v1/") == "http://h:1/v1/chat/completions"
    assert chat_url("http://h:1/v1/chat/completions") == "http://h:1/v1/chat/completions"


def test_a_dead_endpoint_is_retried_then_fails_clearly() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    judge = ExternalJudge(url, retries=2, backoff_s=0.05, timeout_s=2)
    t0 = time.monotonic()
    with pytest.raises(JudgeError, match=r"did not answer after 3 tries: ConnectError"):
        judge.vote(TEA, temperature=0.6, seed=0)
    assert time.monotonic() - t0 >= 0.05 + 0.1  # backoff between the tries
    judge.close()


def test_a_second_daemon_judges_the_first_one(smollm2_gguf: Path, tmp_path: Path) -> None:
    endpoint = start_daemon(smollm2_gguf, tmp_path / "judge-home")
    try:
        wrong_key = ExternalJudge(f"{endpoint.url}/v1", api_key="nope", retries=0)
        with pytest.raises(JudgeError, match="refused the request .HTTP 401"):
            wrong_key.vote(TEA, temperature=0.6, seed=0)
        direct = ExternalJudge(
            f"{endpoint.url}/v1", api_key=endpoint.token, model_name="clawd", max_tokens=24
        )
        raw = direct.vote(TEA, temperature=0.6, seed=1)
        assert isinstance(raw, str) and raw
        direct.close()
        settings = {
            **FAST_JOB,
            "CLAWD_JUDGE_URL": f"{endpoint.url}/v1",
            "CLAWD_JUDGE_API_KEY": endpoint.token,
            "CLAWD_JUDGE_MODEL_NAME": "clawd",
            "CLAWD_JUDGE_VOTES": "2",
        }
        d = start_daemon(smollm2_gguf, tmp_path / "home", settings=settings)
        try:
            # the daemon serves before its jobs have started: wait for the judge's mode
            jobs = wait_for(lambda: (h := d.health()["jobs"]["signals"])["mode"] and h)
            assert jobs["mode"] == "external" and jobs["judge"].startswith(endpoint.url)
            with d.client() as c:
                turn = converse(c, TEA.request, TEA.reply)
                sig = wait_for(lambda: signal_of(c, turn))
            assert sig["judge_model"].startswith("clawd @ " + endpoint.url)
            assert [v["kind"] for v in sig["votes"]] == ["judge", "judge"]
            assert all(v["raw_text"] for v in sig["votes"])
            assert sig["score"] in (-1, 0, 1)
        finally:
            d.stop()
        # The endpoint recorded the judge's calls but was told not to learn from them.
        with endpoint.client() as c:
            convs = c.get("/v1/conversations").json()["data"]
            turns = [
                t for cv in convs for t in c.get(f"/v1/conversations/{cv['id']}").json()["turns"]
            ]
        assert turns and not any(t["learn"] for t in turns)
    finally:
        endpoint.stop()


def test_a_dead_endpoint_leaves_the_turn_waiting(smollm2_gguf: Path, tmp_path: Path) -> None:
    settings = {
        **FAST_JOB,
        "CLAWD_JUDGE_URL": f"http://127.0.0.1:{free_port()}/v1",
        "CLAWD_JUDGE_TIMEOUT_S": "2",
    }
    d = start_daemon(smollm2_gguf, tmp_path / "home", settings=settings)
    try:
        with d.client() as c:
            turn = converse(c, "Name a colour.", "thanks!")
            health = wait_for(lambda: (h := d.health()["jobs"]["signals"])["failed"] and h)
            assert "did not answer" in health["last_error"]
            assert signal_of(c, turn) is None  # nothing made up; it waits for the judge
            r = c.post(
                "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
            )
            assert r.status_code == 200  # the daemon keeps answering
    finally:
        d.stop()
