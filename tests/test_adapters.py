"""Adapter lifecycle on both fixture models: activate, roll back, gate, refusals, crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from clawd.adapters import registry
from clawd.store.db import Store
from fixtures.adapterkit import register
from fixtures.daemon import RunningDaemon, start_daemon

Q = [{"role": "user", "content": "Tell me something about the sea."}]
NO_AUTO = {"CLAWD_AUTO_ACTIVATE": "false"}


def ask(c: httpx.Client) -> tuple[str, str | None]:
    r = c.post("/v1/chat/completions", json={"messages": Q, "max_tokens": 12, "temperature": 0})
    assert r.status_code == 200, r.text
    body = r.json()
    return body["choices"][0]["message"]["content"], body["clawd"]["adapter_version"]


@pytest.fixture(scope="module")
def lineage(any_gguf: Path, torch_cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """A CLAWD_HOME with adapters a (parent) -> b, and a rejected c."""
    home = tmp_path_factory.mktemp("adapters-home")
    register(home, any_gguf, torch_cache, "a", seed=1)
    register(home, any_gguf, torch_cache, "b", seed=2, parent="a")
    register(
        home,
        any_gguf,
        torch_cache,
        "c",
        seed=3,
        parent="b",
        gate={"passed": False, "checks": {"drift_under_limit": False}, "kl_to_base": 9.9},
    )
    return home


@pytest.fixture(scope="module")
def daemon(any_gguf: Path, lineage: Path):
    d = start_daemon(any_gguf, lineage, settings=NO_AUTO)
    yield d
    d.stop()


def cli(d: RunningDaemon, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLAWD_HOME": str(d.home), "CLAWD_PORT": d.url.rsplit(":", 1)[1]}
    return subprocess.run(
        [sys.executable, "-m", "clawd", "adapters", *args], env=env, capture_output=True, text=True
    )


def test_activate_and_roll_back_through_rest_and_cli(daemon: RunningDaemon) -> None:
    with daemon.client() as c:
        base_text, version = ask(c)
        assert version is None
        r = c.post("/v1/adapters/a/activate")
        assert r.status_code == 200 and r.json()["pause_ms"] < 1000
        a_text, version = ask(c)
        assert version == "a" and a_text != base_text
        out = cli(daemon, "activate", "b")
        assert out.returncode == 0 and "now serving: b" in out.stdout, out.stderr
        b_text, version = ask(c)
        assert version == "b" and b_text != a_text
        assert daemon.health()["adapter"] == "b"
        listed = c.get("/v1/adapters").json()
        assert listed["active"] == "b"
        assert {r["version"]: r["status"] for r in listed["data"]}["a"] == "retired"
        out = cli(daemon, "rollback")
        assert out.returncode == 0 and "now serving: a" in out.stdout, out.stderr
        assert ask(c) == (a_text, "a")  # the same words as before, at temperature 0
        assert c.post("/v1/adapters/rollback").json()["active"] is None  # a has no parent
        assert ask(c) == (base_text, None)
        assert c.post("/v1/adapters/rollback").status_code == 409  # nothing left to undo
        c.post("/v1/adapters/b/activate")
        assert cli(daemon, "base").returncode == 0
        assert ask(c) == (base_text, None)
        shown = c.get("/v1/adapters/b").json()
        assert shown["manifest"]["parent"] == "a" and shown["gate"]["passed"] is True


def test_a_rejected_candidate_needs_force(daemon: RunningDaemon) -> None:
    with daemon.client() as c:
        r = c.post("/v1/adapters/c/activate")
        assert r.status_code == 409 and "promotion gate" in r.json()["error"]["message"]
        assert c.post("/v1/adapters/c/activate", json={"force": True}).status_code == 200
        assert ask(c)[1] == "c"
        assert c.post("/v1/adapters/nope/activate").status_code == 404
        assert c.delete("/v1/adapters/c").status_code == 409  # active
        c.post("/v1/adapters/base")


def test_an_adapter_for_another_base_model_is_refused(
    daemon: RunningDaemon, lineage: Path, any_gguf: Path, torch_cache: Path
) -> None:
    register(lineage, any_gguf, torch_cache, "foreign", seed=4, base_sha256="0" * 64)
    with daemon.client() as c:
        r = c.post("/v1/adapters/foreign/activate")
        assert r.status_code == 409 and "another base model" in r.json()["error"]["message"]
        assert ask(c)[1] is None


def test_export_and_delete_from_the_cli(daemon: RunningDaemon, tmp_path: Path) -> None:
    out = cli(daemon, "export", "a", "--format", "gguf", "--out", str(tmp_path / "a.gguf"))
    assert out.returncode == 0 and (tmp_path / "a.gguf").stat().st_size > 0
    out = cli(daemon, "export", "a", "--format", "peft", "--out", str(tmp_path / "peft"))
    assert (tmp_path / "peft" / "adapter_config.json").exists()
    assert cli(daemon, "list").returncode == 0
    assert "gate: passed" in cli(daemon, "show", "b").stdout


def test_a_corrupt_active_adapter_falls_back_to_its_parent(
    any_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    register(home, any_gguf, torch_cache, "p", seed=7)
    register(home, any_gguf, torch_cache, "k", seed=8, parent="p")
    with Store.open(home) as store:
        registry.set_active(store, "k")
    with open(home / "adapters" / "k" / "adapter.gguf", "r+b") as fh:
        fh.seek(-64, 2)
        fh.write(b"\0" * 64)
    d = start_daemon(any_gguf, home, settings=NO_AUTO)
    try:
        assert d.health()["adapter"] == "p"
        with d.client() as c:
            assert ask(c)[1] == "p"
    finally:
        d.stop()
    with Store.open(home) as store:
        assert registry.get(store, "k")["status"] == "rejected"
        notes = [e["message"] for e in store.events(kind="adapters")]
        assert any("falling back to p" in n for n in notes)


@pytest.mark.slow
def test_switching_the_base_model_parks_its_adapters_and_switching_back_restores_them(
    smollm2_gguf: Path, tiny_qwen3_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    register(home, tiny_qwen3_gguf, torch_cache, "p", seed=7)
    register(home, tiny_qwen3_gguf, torch_cache, "k", seed=8, parent="p")
    with Store.open(home) as store:
        registry.set_active(store, "k")
    d = start_daemon(smollm2_gguf, home, settings=NO_AUTO)  # another base model
    try:
        assert d.health()["adapter"] is None
    finally:
        d.stop()
    with Store.open(home) as store:  # set aside, not condemned
        assert registry.get(store, "k")["status"] == "parked"
        assert registry.get(store, "p")["status"] == "candidate"
    d = start_daemon(tiny_qwen3_gguf, home, settings=NO_AUTO)  # and back
    try:
        assert d.health()["adapter"] == "k"
    finally:
        d.stop()
    with Store.open(home) as store:
        assert registry.get(store, "k")["status"] == "active"
        notes = [e["message"] for e in store.events(kind="adapters")]
        assert any("parked" in n for n in notes)


def test_kill_9_during_activations_leaves_a_loadable_active_adapter(
    any_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    for i, v in enumerate(["x", "y"]):
        register(home, any_gguf, torch_cache, v, seed=20 + i)
    d = start_daemon(any_gguf, home, settings=NO_AUTO)
    stop = threading.Event()

    def flip() -> None:
        with d.client() as c:
            i = 0
            while not stop.is_set():
                try:
                    c.post(f"/v1/adapters/{'xy'[i % 2]}/activate")
                except httpx.HTTPError:
                    return
                i += 1

    flipper = threading.Thread(target=flip)
    flipper.start()
    time.sleep(1.5)
    os.kill(d.proc.pid, signal.SIGKILL)
    d.proc.wait()
    stop.set()
    flipper.join()
    with Store.open(home) as store:
        actives = [r["version"] for r in registry.list_adapters(store) if r["status"] == "active"]
    assert len(actives) <= 1
    d = start_daemon(any_gguf, home, settings=NO_AUTO)
    try:
        served = d.health()["adapter"]
        assert served == (actives[0] if actives else None)
        with d.client() as c:
            assert ask(c)[1] == served
    finally:
        d.stop()
    for v in ("x", "y"):
        manifest = json.loads((home / "adapters" / v / "manifest.json").read_text())
        with Store.open(home) as store:
            assert manifest["status"] == registry.get(store, v)["status"]


def test_a_passing_candidate_is_promoted_automatically(
    any_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    d = start_daemon(any_gguf, home)
    try:
        register(home, any_gguf, torch_cache, "fresh", seed=30)
        deadline = time.monotonic() + 30
        while d.health()["adapter"] != "fresh":
            assert time.monotonic() < deadline, "not promoted within 30 s"
            time.sleep(0.5)
    finally:
        d.stop()


def test_the_base_model_chosen_by_the_user_sticks(
    tiny_qwen3_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    """`clawd adapters base` is not undone by the promoter; a later run's candidate still is
    promoted."""
    from clawd.models import sha256_file
    from clawd.serving import promote
    from clawd.serving.engine import Engine

    home = tmp_path / "home"
    register(home, tiny_qwen3_gguf, torch_cache, "older", seed=31)  # passed, never served
    engine = Engine(tiny_qwen3_gguf, n_ctx=512)
    engine.load()
    sha = sha256_file(tiny_qwen3_gguf)
    try:
        with Store.open(home) as store:
            promote.to_base(engine, store)  # what `clawd adapters base` does
            assert promote.promote_candidates(engine, store, sha) is None
            assert engine.adapter_version is None and registry.active(store) is None
            register(home, tiny_qwen3_gguf, torch_cache, "newer", seed=32)
            assert promote.promote_candidates(engine, store, sha) == "newer"
            assert engine.adapter_version == "newer"
            assert registry.get(store, "older")["status"] == "candidate"
    finally:
        engine.close()


def test_a_run_going_during_a_rollback_does_not_undo_it(
    tiny_qwen3_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    """Once the child of the rolled-back adapter, finished by a run that was already going,
    was promoted within seconds of the rollback."""
    from clawd.models import sha256_file
    from clawd.serving import promote
    from clawd.serving.engine import Engine

    home = tmp_path / "home"
    engine = Engine(tiny_qwen3_gguf, n_ctx=512)
    engine.load()
    sha = sha256_file(tiny_qwen3_gguf)
    try:
        with Store.open(home) as store:
            register(home, tiny_qwen3_gguf, torch_cache, "a", seed=33)
            assert promote.promote_candidates(engine, store, sha) == "a"
            register(home, tiny_qwen3_gguf, torch_cache, "b", seed=34, parent="a")
            assert promote.promote_candidates(engine, store, sha) == "b"
            assert promote.rollback(engine, store, sha) == "a"  # the user rolls back
            # the run that started from "b" before the rollback finishes now
            register(home, tiny_qwen3_gguf, torch_cache, "c", seed=35, parent="b")
            assert promote.promote_candidates(engine, store, sha) is None
            assert engine.adapter_version == "a" and registry.active(store)["version"] == "a"
            register(home, tiny_qwen3_gguf, torch_cache, "d", seed=36, parent="a")
            assert promote.promote_candidates(engine, store, sha) == "d"
    finally:
        engine.close()


def test_concurrent_switches_leave_engine_and_database_agreeing(
    tiny_qwen3_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    """The REST route and the promoter switch from different threads: one active row, and the
    engine serves exactly what the database names."""
    from clawd.models import sha256_file
    from clawd.serving import promote
    from clawd.serving.engine import Engine

    home = tmp_path / "home"
    for i, v in enumerate(("a", "b")):
        register(home, tiny_qwen3_gguf, torch_cache, v, seed=40 + i)
    engine = Engine(tiny_qwen3_gguf, n_ctx=512)
    engine.load()
    sha = sha256_file(tiny_qwen3_gguf)
    errors: list[BaseException] = []

    def switcher(plan: list[str | None]) -> None:
        try:
            with Store.open(home) as store:
                for v in plan:
                    if v is None:
                        promote.to_base(engine, store)
                    else:
                        promote.activate(engine, store, v, sha)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [
        threading.Thread(target=switcher, args=(["a", "b", None] * 4,)),
        threading.Thread(target=switcher, args=(["b", None, "a"] * 4,)),
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        with Store.open(home) as store:
            actives = [
                r["version"] for r in registry.list_adapters(store) if r["status"] == "active"
            ]
            assert len(actives) <= 1
            assert engine.adapter_version == (actives[0] if actives else None)
    finally:
        engine.close()


def test_a_delete_waits_for_an_activation_of_that_version_in_flight(
    tiny_qwen3_gguf: Path, torch_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DELETE /v1/adapters/{v} while {v} is being activated: it waits for the switch, then
    refuses the now active version; the engine never serves files deleted under it."""
    from types import SimpleNamespace

    from clawd.adapters.registry import AdapterError
    from clawd.models import sha256_file
    from clawd.serving import adapterapi, hotload, promote
    from clawd.serving.engine import Engine
    from clawd.serving.protocol import ApiError

    home = tmp_path / "home"
    register(home, tiny_qwen3_gguf, torch_cache, "a", seed=40)
    engine = Engine(tiny_qwen3_gguf, n_ctx=512)
    engine.load()
    reading, release = threading.Event(), threading.Event()
    real_load = hotload.load_adapter

    def slow_load(*args: object) -> object:  # the adapter file is being read ...
        reading.set()
        release.wait(30)
        return real_load(*args)

    monkeypatch.setattr(hotload, "load_adapter", slow_load)
    outcome: dict[str, object] = {}
    try:
        with Store.open(home) as store:
            request = SimpleNamespace(
                app=SimpleNamespace(state=SimpleNamespace(daemon=SimpleNamespace(store=store)))
            )

            def activate() -> None:
                with Store.open(home) as own:
                    promote.activate(engine, own, "a", sha256_file(tiny_qwen3_gguf))

            def delete() -> None:
                try:
                    outcome["deleted"] = adapterapi.delete("a", request)
                except (ApiError, AdapterError) as exc:
                    outcome["refused"] = str(exc)

            first = threading.Thread(target=activate)
            first.start()
            assert reading.wait(30)
            second = threading.Thread(target=delete)
            second.start()
            second.join(1.0)
            assert second.is_alive()  # ... and the delete waits for it
            release.set()
            first.join(60)
            second.join(60)
            assert "refused" in outcome, outcome
            assert engine.adapter_version == "a"
            assert registry.get(store, "a")["status"] == "active"
            assert Path(registry.get(store, "a")["path"]).is_dir()
    finally:
        release.set()
        engine.close()
