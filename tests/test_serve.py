"""Black-box tests of the daemon: a real subprocess on each fixture model, real clients."""

from __future__ import annotations

import concurrent.futures
import os
import stat
import time
from pathlib import Path

import httpx
import openai

from fixtures.daemon import RunningDaemon, start_daemon

HI = [{"role": "user", "content": "Say hello."}]


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
