"""Fuzzing the real daemon from its own OpenAPI document (schemathesis, fixed seed).

Every operation gets generated requests, with the token; operations with ids in their path also
get requests on ids that exist (a conversation, a signal with its sample, two adapters),
created before the run. Any 5xx fails, and so does a daemon that is not healthy afterwards.
The number of examples is bounded so the test stays under a couple of minutes on 2 cores.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.adapterkit import register
from fixtures.daemon import RunningDaemon, start_daemon

EXAMPLES = 25  # generated requests per operation (and as many again on existing ids)


@pytest.fixture(scope="module")
def fuzzed(
    tiny_qwen3_gguf: Path, torch_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningDaemon, dict[str, str]]]:
    home = tmp_path_factory.mktemp("fuzz-home")
    register(home, tiny_qwen3_gguf, torch_cache, "parent-v", seed=1)
    register(home, tiny_qwen3_gguf, torch_cache, "child-v", seed=2, parent="parent-v")
    d = start_daemon(tiny_qwen3_gguf, home, n_ctx=512, settings={"CLAWD_AUTO_ACTIVATE": "false"})
    with d.client() as c:
        r = c.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
            headers={"X-Clawd-Conversation": "fuzz-conversation"},
        )
        assert r.status_code == 200, r.text
        fb = c.post("/v1/feedback", json={"id": r.json()["id"], "rating": -1, "comment": "shorter"})
        assert fb.status_code == 200 and fb.json()["sample"], fb.text
        signal = c.get("/v1/signals").json()["data"][0]
        ids = {"cid": "fuzz-conversation", "sid": str(signal["id"]), "version": "child-v"}
    try:
        yield d, ids
    finally:
        d.stop()


def test_no_generated_request_makes_the_daemon_fail(
    fuzzed: tuple[RunningDaemon, dict[str, str]],
) -> None:
    import schemathesis
    from hypothesis import HealthCheck, given, seed, settings

    d, ids = fuzzed
    with d.client() as c:
        doc = c.get("/openapi.json").json()
    schema = schemathesis.openapi.from_dict(doc)
    auth = {"Authorization": f"Bearer {d.token}"}
    failures: list[str] = []
    calls = 0

    def fuzz_operation(op: schemathesis.APIOperation) -> None:
        @seed(0)
        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=op.as_strategy())
        def fuzz(case: schemathesis.Case) -> None:
            nonlocal calls
            for existing in (False, True):
                if existing:
                    if not case.path_parameters:
                        return
                    case.path_parameters = {
                        k: ids.get(k, v) for k, v in case.path_parameters.items()
                    }
                resp = case.call(base_url=d.url, headers=auth, timeout=60)
                calls += 1
                if resp.status_code >= 500:
                    failures.append(
                        f"{op.method.upper()} {case.formatted_path} -> {resp.status_code}: "
                        f"{resp.text[:200]} (body {str(case.body)[:200]})"
                    )

        fuzz()

    for result in schema.get_all_operations():
        op = result.ok()
        if op.path == "/v1/train" and op.method.upper() == "POST":
            continue  # starts a training process; its refusals are tested in test_train_daemon
        fuzz_operation(op)
    with d.client() as c:
        health = c.get("/health")
    assert health.status_code == 200 and d.proc.poll() is None, health.text
    assert not failures, "\n".join(failures[:20])
    assert calls > EXAMPLES * 10  # it really reached the operations


# Strings no text can hold and bytes that are no UTF-8, in every place a body carries text.
HOSTILE = [
    ("POST", "/v1/chat/completions", b'{"messages":[{"role":"user","content":"\\ud800"}]}'),
    (
        "POST",
        "/v1/chat/completions",
        b'{"messages":[{"role":"user","content":"hi","tool_call_id":"\\udfff"}],"max_tokens":1}',
    ),
    (
        "POST",
        "/v1/chat/completions",
        b'{"messages":[{"role":"user","content":"hi"}],"stop":["\\udc80"],"max_tokens":1}',
    ),
    ("POST", "/v1/chat/completions", b'{"messages":[{"role":"user","content":"\xff\xfe"}]}'),
    ("POST", "/v1/chat/completions", b'{"\\ud800":1,"messages":[]}'),
    ("POST", "/v1/feedback", b'{"id":"\\ud800","rating":1}'),
    ("POST", "/v1/memories", b'{"text":"Call me \\udbff."}'),
    ("POST", "/v1/memories", b'{"text":"\xc3\x28"}'),
    ("PATCH", "/v1/conversations/fuzz-conversation", b'{"title":"\\udc00"}'),
]


@pytest.mark.parametrize(("method", "path", "body"), HOSTILE)
def test_hostile_text_is_a_4xx_with_or_without_the_token(
    fuzzed: tuple[RunningDaemon, dict[str, str]], method: str, path: str, body: bytes
) -> None:
    d, _ = fuzzed
    import httpx

    json_type = {"Content-Type": "application/json"}
    with d.client() as c:
        r = c.request(method, path, content=body, headers=json_type)
        assert 400 <= r.status_code < 500, r.text
        assert r.json()["error"]["message"]
    bare = httpx.request(method, f"{d.url}{path}", content=body, headers=json_type)
    assert bare.status_code == 401, bare.text
