"""Black-box tests of the daemon: a real subprocess on each fixture model, real clients."""

from __future__ import annotations

import concurrent.futures
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from fixtures.daemon import RunningDaemon, start_daemon

HI = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def daemon(any_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    d = start_daemon(any_gguf, tmp_path_factory.mktemp("daemon-home"))
    yield d
    d.stop()
    assert d.proc.returncode is not None


@pytest.fixture
def client(daemon: RunningDaemon) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{daemon.url}/v1", api_key=daemon.token, max_retries=0)


def conversation(daemon: RunningDaemon, cid: str) -> dict:
    with daemon.client() as c:
        r = c.get(f"/v1/conversations/{cid}")
    assert r.status_code == 200, r.text
    return r.json()


def test_health_models_and_token_file(daemon: RunningDaemon, client: openai.OpenAI) -> None:
    health = daemon.health()
    assert health["status"] == "ok" and health["adapter"] is None
    assert [m.id for m in client.models.list().data] == [health["model"]]
    assert stat.S_IMODE(os.stat(daemon.home / "token").st_mode) == 0o600


def test_openai_client_non_streaming_is_recorded(
    daemon: RunningDaemon, client: openai.OpenAI
) -> None:
    resp = client.chat.completions.create(model="x", messages=HI, max_tokens=12, temperature=0)
    choice = resp.choices[0]
    assert choice.finish_reason in ("stop", "length") and resp.usage.completion_tokens > 0
    raw = client.chat.completions.with_raw_response.create(
        model="x", messages=HI, max_tokens=12, temperature=0
    )
    cid = raw.headers["x-clawd-conversation"]
    again = raw.parse()
    assert again.choices[0].message.content == choice.message.content  # greedy is repeatable
    turns = {t["id"]: t for t in conversation(daemon, cid)["turns"]}
    turn = turns[again.id]  # the response id names the stored turn
    assert turn["response"] == again.choices[0].message.content
    assert turn["adapter_version"] is None and turn["learn"] is True
    assert turn["usage"]["completion_tokens"] == again.usage.completion_tokens


def test_openai_client_streaming(daemon: RunningDaemon, client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="x",
        messages=HI,
        max_tokens=16,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish in (["stop"], ["length"])
    assert chunks[-1].usage.completion_tokens == 16 or finish == ["stop"]
    full = client.chat.completions.create(model="x", messages=HI, max_tokens=16, temperature=0)
    assert text == full.choices[0].message.content


def test_seed_and_stop_are_honoured(daemon: RunningDaemon, client: openai.OpenAI) -> None:
    def ask(**kw: object) -> str:
        r = client.chat.completions.create(model="x", messages=HI, max_tokens=20, **kw)
        return r.choices[0].message.content

    assert ask(temperature=1.0, seed=7) == ask(temperature=1.0, seed=7)
    full = ask(temperature=0)
    if len(full) > 4:
        cut = full[2:4]
        stopped = ask(temperature=0, stop=[cut])
        assert stopped == full[: full.index(cut)]


def test_editor_resending_history_links_next_states(
    daemon: RunningDaemon, client: openai.OpenAI
) -> None:
    first = [{"role": "user", "content": f"Tell me a fact about the number {time.time()}."}]
    r1 = client.chat.completions.with_raw_response.create(
        model="x", messages=first, max_tokens=8, temperature=0
    )
    a1 = r1.parse()
    second = [
        *first,
        {"role": "assistant", "content": a1.choices[0].message.content},
        {"role": "user", "content": "No, shorter please."},
    ]
    a2 = client.chat.completions.create(model="x", messages=second, max_tokens=8, temperature=0)
    assert a2.usage.prompt_tokens_details.cached_tokens > 0  # the prompt cache was reused
    third = [
        *second,
        {"role": "assistant", "content": a2.choices[0].message.content},
        {"role": "user", "content": "Thanks!"},
    ]
    a3 = client.chat.completions.create(model="x", messages=third, max_tokens=8, temperature=0)
    conv = conversation(daemon, r1.headers["x-clawd-conversation"])
    turns = conv["turns"]
    assert [t["id"] for t in turns] == [a1.id, a2.id, a3.id]
    assert turns[0]["next_state"] == {
        "role": "user",
        "content": "No, shorter please.",
        "next_turn_id": a2.id,
    }
    assert turns[1]["next_state"]["content"] == "Thanks!"
    assert turns[2]["next_state"] is None


def test_conversation_header_and_opting_out(daemon: RunningDaemon, client: openai.OpenAI) -> None:
    cid = f"editor-{int(time.time() * 1000)}"
    r = client.chat.completions.create(
        model="x",
        messages=HI,
        max_tokens=4,
        temperature=0,
        extra_headers={"X-Clawd-Conversation": cid, "X-Clawd-Learn": "0"},
    )
    conv = conversation(daemon, cid)
    assert conv["turns"][0]["id"] == r.id and conv["turns"][0]["learn"] is False
    with daemon.client() as c:
        assert c.patch(f"/v1/conversations/{cid}", json={"learn": False}).json()["learn"] is False
        r2 = c.post(
            "/v1/chat/completions",
            headers={"X-Clawd-Conversation": cid},
            json={"messages": HI, "max_tokens": 4},
        )
        assert conversation(daemon, cid)["turns"][-1]["id"] == r2.json()["id"]
        assert conversation(daemon, cid)["turns"][-1]["learn"] is False
        assert c.delete(f"/v1/conversations/{cid}").json()["deleted"] is True
        assert c.get(f"/v1/conversations/{cid}").status_code == 404


def test_feedback(daemon: RunningDaemon, client: openai.OpenAI) -> None:
    r = client.chat.completions.with_raw_response.create(model="x", messages=HI, max_tokens=4)
    resp = r.parse()
    with daemon.client() as c:
        ok = c.post("/v1/feedback", json={"id": resp.id, "rating": -1, "comment": "too long"})
        assert ok.status_code == 200
        bad = c.post("/v1/feedback", json={"id": resp.id, "rating": 5})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "rating"
        missing = c.post("/v1/feedback", json={"id": "chatcmpl-nope", "rating": 1})
        assert missing.status_code == 404
    turn = conversation(daemon, r.headers["x-clawd-conversation"])["turns"][-1]
    assert turn["feedback"][0]["rating"] == -1 and turn["feedback"][0]["comment"] == "too long"


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


def test_a_long_history_is_prepared_off_the_event_loop(daemon: RunningDaemon) -> None:
    """Rendering and tokenizing ~7 MB of history take a while; the daemon answers others
    meanwhile (ordering, not timing: health returns while the long request is in flight)."""
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} " + "word " * 360}
        for i in range(3999)
    ]
    finished: dict[str, float] = {}

    def long_request() -> int:
        with daemon.client(timeout=300) as c:
            r = c.post("/v1/chat/completions", json={"messages": history, "max_tokens": 1})
        finished["long"] = time.monotonic()
        return r.status_code

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(long_request)
        time.sleep(0.5)  # let it be read and start being prepared
        with daemon.client() as c:
            assert c.get("/health").status_code == 200
            assert c.get("/v1/models").status_code == 200
        finished["health"] = time.monotonic()
        assert future.result() == 400  # longer than the context: refused after tokenizing
    assert finished["health"] < finished["long"]


def test_a_client_that_hangs_up_cancels_its_generation(daemon: RunningDaemon) -> None:
    cid = f"hangup-{int(time.time() * 1000)}"
    body = {"messages": HI, "max_tokens": 1500, "temperature": 1.0, "stream": True}
    with httpx.Client(
        base_url=daemon.url, headers={**daemon.headers, "X-Clawd-Conversation": cid}, timeout=60
    ) as c:
        with c.stream("POST", "/v1/chat/completions", json=body) as r:
            next(r.iter_lines())
    t0 = time.monotonic()
    with daemon.client() as c:
        r = c.post("/v1/chat/completions", json={"messages": HI, "max_tokens": 2})
    assert r.status_code == 200
    assert time.monotonic() - t0 < 5  # it did not wait for 1500 tokens of the first request
    assert conversation(daemon, cid)["turns"] == []  # an unfinished answer is not recorded


def test_an_abandoned_reply_is_no_next_state_and_its_edit_is(daemon: RunningDaemon) -> None:
    """Once the text the user abandoned (Esc) became the hint, and the edit was ignored."""
    with daemon.client() as c:
        first = c.post("/v1/chat/completions", json={"messages": HI, "max_tokens": 4}).json()
        cid = first["clawd"]["conversation_id"]
        said = {"role": "assistant", "content": first["choices"][0]["message"]["content"]}

        def reply(text: str) -> list[dict]:
            return [*HI, said, {"role": "user", "content": text}]

        body = {"messages": reply("make it rude"), "max_tokens": 1500, "stream": True}
        with c.stream("POST", "/v1/chat/completions", json=body) as r:
            next(r.iter_lines())  # the user presses Esc
        deadline = time.monotonic() + 10
        while conversation(daemon, cid)["turns"][0]["next_state"] is not None:
            assert time.monotonic() < deadline, "the abandoned reply stayed a next state"
            time.sleep(0.1)
        off = c.post(
            "/v1/chat/completions",
            json={"messages": reply("this one is not for learning"), "max_tokens": 2},
            headers={"X-Clawd-Learn": "0"},
        )
        assert off.status_code == 200
        assert conversation(daemon, cid)["turns"][0]["next_state"] is None
        edited = c.post(
            "/v1/chat/completions", json={"messages": reply("make it kind"), "max_tokens": 2}
        )
        assert edited.status_code == 200
        assert conversation(daemon, cid)["turns"][0]["next_state"]["content"] == "make it kind"


def test_concurrent_clients_each_turn_recorded_once(daemon: RunningDaemon) -> None:
    def one(i: int) -> str:
        with daemon.client() as c:
            r = c.post(
                "/v1/chat/completions",
                headers={"X-Clawd-Conversation": f"load-{i}"},
                json={
                    "messages": [{"role": "user", "content": f"Count to {i}."}],
                    "max_tokens": 4,
                    "stream": i % 2 == 0,
                },
            )
            assert r.status_code == 200
            return f"load-{i}"

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        cids = list(pool.map(one, range(16)))
    for cid in cids:
        assert len(conversation(daemon, cid)["turns"]) == 1


def test_thinking_switch_reaches_the_template(
    daemon: RunningDaemon, client: openai.OpenAI, any_gguf: Path
) -> None:
    def prompt_tokens(**kw: object) -> int:
        r = client.chat.completions.create(model="x", messages=HI, max_tokens=1, **kw)
        return r.usage.prompt_tokens

    plain = prompt_tokens()
    off = prompt_tokens(extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    if "qwen3" in any_gguf.name:  # Qwen3's template adds an empty <think></think> block
        assert off > plain
    else:
        assert off == plain


def test_clawd_forget_and_token_commands(daemon: RunningDaemon, client: openai.OpenAI) -> None:
    import subprocess
    import sys

    cid = f"forget-{int(time.time() * 1000)}"
    client.chat.completions.create(
        model="x", messages=HI, max_tokens=2, extra_headers={"X-Clawd-Conversation": cid}
    )
    env = {**os.environ, "CLAWD_HOME": str(daemon.home)}
    cmd = [sys.executable, "-m", "clawd"]
    token = subprocess.run([*cmd, "token"], env=env, capture_output=True, text=True, check=True)
    assert token.stdout.strip() == daemon.token
    out = subprocess.run(
        [*cmd, "forget", cid, "--url", daemon.url], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "removed 1 turns" in out.stdout  # it says what it removed
    with daemon.client() as c:
        assert c.get(f"/v1/conversations/{cid}").status_code == 404
    again = subprocess.run(
        [*cmd, "forget", cid, "--url", daemon.url], env=env, capture_output=True, text=True
    )
    assert again.returncode == 1 and "no conversation" in again.stderr
    # an id is one path segment: it cannot reach another route (DELETE /v1/adapters/x)
    sneaky = subprocess.run(
        [*cmd, "forget", "../adapters/x", "--url", daemon.url],
        env=env,
        capture_output=True,
        text=True,
    )
    assert sneaky.returncode == 1 and "adapter" not in sneaky.stderr.lower(), sneaky.stderr


def test_a_judge_model_that_cannot_load_leaves_chat_serving_and_says_why(
    smollm2_gguf: Path, tmp_path: Path
) -> None:
    """Once ``/health`` said 503 "loading" forever and only the log knew why."""
    d = start_daemon(smollm2_gguf, tmp_path / "home", settings={"CLAWD_JUDGE_MODEL": "nope"})
    try:
        health = d.health()
        assert health["status"] == "ok", health
        assert "judge" in health["jobs"]["error"] and "nope" in health["jobs"]["error"]
        assert health["jobs"]["signals"] == {"enabled": False}
        with d.client() as c:
            r = c.post("/v1/chat/completions", json={"messages": HI, "max_tokens": 2})
            assert r.status_code == 200, r.text
            r = c.post("/v1/train")
            assert r.status_code == 503 and "nope" in r.json()["error"]["message"]
    finally:
        d.stop()
