"""What the daemon refuses before any route runs, and how (``clawd/serving/errors.py``): bodies
that are not what the API takes (400 naming the field), other hosts and bodies without the
token (refused before the body is read), unknown ids, prompts and bodies too large; the real
daemon on each fixture model."""

from __future__ import annotations

import json

import httpx
import pytest

from fixtures.daemon import RunningDaemon

HI = [{"role": "user", "content": "Say hello."}]


@pytest.mark.parametrize(
    "body,status,param",
    [
        (b"{not json", 400, None),
        (b"[1, 2]", 400, None),
        (json.dumps({"messages": "hi"}).encode(), 400, "messages"),
        (json.dumps({"messages": []}).encode(), 400, "messages"),
        (
            json.dumps({"messages": [{"role": "bot", "content": "x"}]}).encode(),
            400,
            "messages.0.role",
        ),
        (json.dumps({"messages": HI, "temperature": 9}).encode(), 400, "temperature"),
        (json.dumps({"messages": HI, "max_tokens": "many"}).encode(), 400, "max_tokens"),
        (json.dumps({"messages": HI, "n": 3}).encode(), 400, "n"),
        # valid JSON, but a lone surrogate is no text: once a 500 from the store's hashing
        (
            b'{"messages":[{"role":"user","content":"hi","tool_call_id":"\\ud800"}]}',
            400,
            "messages.0.tool_call_id",
        ),
        (b'{"messages":[{"role":"user","content":"a\\udfff b"}]}', 400, "messages.0.content"),
        (json.dumps({"messages": HI, "stop": ["\udc80"]}).encode(), 400, "stop.0"),
        (json.dumps({"messages": HI, "stop": ["a", "b", "c", "d", "e"]}).encode(), 400, "stop"),
    ],
)
def test_bad_bodies_are_400_naming_the_field(
    daemon: RunningDaemon, body: bytes, status: int, param: str | None
) -> None:
    with daemon.client() as c:
        r = c.post(
            "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"}
        )
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["message"] and err["type"] == "invalid_request_error"
    if param:
        assert err["param"] == param and param.split(".")[0] in err["message"]


def test_other_hosts_and_bodies_without_the_token_are_refused_before_the_body_is_read(
    daemon: RunningDaemon,
) -> None:
    port = daemon.url.rsplit(":", 1)[1]
    # DNS rebinding: a web page's request names its own host
    r = httpx.get(f"{daemon.url}/health", headers={"Host": f"evil.example:{port}"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_host"
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
        assert httpx.get(f"{daemon.url}/health", headers={"Host": host}).status_code == 200
    # without the token /health says whether it serves, not what or the judge's errors
    assert httpx.get(f"{daemon.url}/health").json() == {"status": "ok"}
    assert {"model", "adapter", "jobs", "error"} <= set(daemon.health())
    # not JSON and no token: the token decides (once the body was parsed first: a 400)
    r = httpx.post(f"{daemon.url}/v1/chat/completions", content=b"{not json")
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    big = b"x" * (9 * 2**20)
    r = httpx.post(f"{daemon.url}/v1/feedback", content=big)
    assert r.status_code == 401


def test_a_surrogate_pair_is_text_and_is_answered(daemon: RunningDaemon) -> None:
    with daemon.client() as c:
        body = b'{"messages":[{"role":"user","content":"\\ud83d\\ude00"}],"max_tokens":1}'
        r = c.post(
            "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 200, r.text


def test_auth_unknown_ids_oversize_prompts(daemon: RunningDaemon) -> None:
    r = httpx.post(f"{daemon.url}/v1/chat/completions", json={"messages": HI})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    r = httpx.get(f"{daemon.url}/v1/conversations", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    with daemon.client() as c:
        assert c.get("/v1/conversations/conv-unknown").status_code == 404
        assert c.delete("/v1/conversations/conv-unknown").status_code == 404
        assert c.get("/v1/nothing-here").status_code == 404
        huge = [{"role": "user", "content": "word " * 5000}]
        r = c.post("/v1/chat/completions", json={"messages": huge})
        assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
        assert "2048" in r.json()["error"]["message"]
        r = c.post(
            "/v1/chat/completions",
            json={"messages": HI},
            headers={"X-Clawd-Conversation": "bad id with spaces"},
        )
        assert r.status_code == 400
        for dots in ("..", "a..b"):
            r = c.post(
                "/v1/chat/completions",
                json={"messages": HI},
                headers={"X-Clawd-Conversation": dots},
            )
            assert r.status_code == 400 and r.json()["error"]["param"] == "X-Clawd-Conversation"
    assert httpx.get(f"{daemon.url}/health").status_code == 200  # still up


def test_oversized_bodies_and_lists_are_refused_before_any_work(daemon: RunningDaemon) -> None:
    big = json.dumps({"messages": [{"role": "user", "content": "x" * (9 * 2**20)}]})
    with daemon.client() as c:
        r = c.post(
            "/v1/chat/completions", content=big, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"

        def chunks():  # no Content-Length: counted while it streams in
            for _ in range(10):
                yield b"x" * 2**20

        r = c.post("/v1/chat/completions", content=chunks())
        assert r.status_code == 413 and r.json()["error"]["type"] == "invalid_request_error"
        many = [{"role": "user", "content": "hi"}] * 5000
        r = c.post("/v1/chat/completions", json={"messages": many})
        assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
        r = c.post("/v1/chat/completions", json={"messages": HI, "stop": ["s" * 300]})
        assert r.status_code == 400 and r.json()["error"]["param"] == "stop"
        r = c.post("/v1/feedback", content=big, headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        ok = c.post("/v1/chat/completions", json={"messages": HI, "max_tokens": 2})
        assert ok.status_code == 200  # the limit does not touch normal requests
    assert httpx.get(f"{daemon.url}/health").status_code == 200
