"""Training on a Ray cluster (``train_backend = ray``): a real single-node cluster on loopback,
the daemon training through it on the tiny model, and what a lost or cancelled run leaves."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import httpx
import psutil
import pytest

from clawd.config import Settings
from clawd.store.db import Store
from clawd.training import remote, train
from fixtures.daemon import start_daemon
from fixtures.raycluster import Cluster, start_cluster
from tests.test_signals_daemon import wait_for
from tests.test_train import add_sample, small
from tests.test_train_daemon import ended_run

pytest.importorskip("ray", reason="the ray extra (./install.sh --dev installs it)")


def test_a_cancelled_task_s_leftovers_are_swept_by_the_next(tmp_path: Path) -> None:
    """ray.cancel(force=True) kills the worker before its clean-up: the next task removes the
    scratch of dead processes (the parent adapter, a half-shipped model), never a live one's."""
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    gone_pid = int(dead.stdout)
    stale = tmp_path / f"clawd-update-{gone_pid}-abc"
    (stale / "parent").mkdir(parents=True)
    (stale / "parent" / "adapter_model.safetensors").write_bytes(b"x" * 1024)
    live = tmp_path / f"clawd-update-{os.getpid()}-def"
    live.mkdir()
    half = tmp_path / f".ship-{gone_pid}-xyz"
    half.write_bytes(b"half a model")
    assert remote._sweep(tmp_path, "clawd-update-") == [stale]
    assert remote._sweep(tmp_path, ".ship-") == [half]
    assert live.exists() and not stale.exists() and not half.exists()


def test_auto_refuses_a_cluster_another_user_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    address = tmp_path / "ray" / "ray_current_cluster"
    address.parent.mkdir()
    address.write_text("10.0.0.9:6379")
    remote._own_cluster()  # ours: allowed
    monkeypatch.setattr(remote.os, "getuid", lambda: address.stat().st_uid + 1)
    with pytest.raises(remote.TrainingError, match="another user"):
        remote._reachable("auto")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:  # the workers' OpenMP setting comes from the run
        mp.delenv("GOMP_SPINCOUNT", raising=False)
        c = start_cluster(num_cpus=2, cache=tmp_path_factory.mktemp("ray-worker-cache"))
    yield c
    c.stop()


def _samples(home: Path, gguf: Path, n: int = 3) -> list[int]:
    home.mkdir(parents=True, exist_ok=True)
    with Store.open(home) as store:
        return [
            add_sample(store, gguf, hint="Answer in one word.", reward=-1, kind="opd+rl")
            for _ in range(n)
        ]


def _daemon(gguf: Path, home: Path, cluster: Cluster, client: bool = False, **extra: str):
    settings = {
        "CLAWD_TRAIN_BACKEND": "ray",
        "CLAWD_RAY_ADDRESS": cluster.client_address if client else cluster.address,
        "CLAWD_RAY_NUM_CPUS": "2",
        **extra,
    }
    return start_daemon(gguf, home, n_ctx=1024, settings=settings)


def _train_apart(home: Path, settings: Settings) -> dict:
    """``train.run`` in a child process, as the daemon's trainer runs it: a Ray driver whose core
    worker loses the cluster can end its own process outright (the likely cause of a CI slow run
    that stopped here with exit 1 and nothing printed), and that process must not be pytest.
    The run's TrainingError comes back as itself; a dead child is a BrokenProcessPool."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(train.run, home, settings, cfg=small()).result(timeout=480)


def _events(home: Path) -> list[str]:
    with Store.open(home) as store:
        return [e["message"] for e in store.db["events"].rows_where("kind = 'train'")]


def _worker_pid(home: Path, c: httpx.Client) -> int:
    """The Ray worker's pid once the run says it started; fails at once, with the run's reason,
    if the run ends first."""

    def started() -> str | None:
        runs = c.get("/v1/train").json()["runs"]  # first: the event may land in between
        said = next((m for m in _events(home) if "worker pid" in m), None)
        if said is None:
            assert not runs or runs[0]["status"] == "running", (runs[0], _events(home))
        return said

    said = wait_for(started, timeout=420)  # a backstop under pytest's 600 s: the run's end stops it
    return int(said.split("worker pid ")[1].split()[0])


def _chat_works(c: httpx.Client) -> None:
    r = c.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    )
    assert r.status_code == 200, r.text


def _nothing_changed(home: Path, ids: list[int]) -> None:
    with Store.open(home) as store:
        assert [store.db["samples"].get(i)["status"] for i in ids] == ["approved"] * len(ids)
        assert store.db["adapters"].count == 0
    adapters = home / "adapters"
    assert not adapters.exists() or not list(adapters.iterdir())  # not even a temp folder


@pytest.mark.slow
def test_a_run_through_ray_passes_the_gate_and_serves(
    tiny_qwen3_gguf: Path, tmp_path: Path, cluster: Cluster
) -> None:
    home = tmp_path / "home"
    ids = _samples(home, tiny_qwen3_gguf)
    d = _daemon(tiny_qwen3_gguf, home, cluster)
    try:
        with d.client() as c:
            assert c.post("/v1/train").status_code == 202
            done = ended_run(c)
            assert done["status"] == "succeeded", done
            version = done["adapter_version"]
            # auto_activate hot-loads it once it passed the gate
            wait_for(lambda: d.health()["adapter"] == version)
            _chat_works(c)
            steps = c.get("/v1/train").json()["latest_steps"]
            assert steps and steps[-1]["step"] == len(steps)  # every step streamed back
    finally:
        d.stop()
    manifest = json.loads((home / "adapters" / version / "manifest.json").read_text())
    assert manifest["backend"] == "ray" and manifest["gate"]["passed"]
    assert sorted(manifest["samples"]) == ids
    said = _events(home)
    assert any("submitted to the Ray cluster" in m for m in said)
    assert any("running on Ray node" in m for m in said)
    assert (home / "adapters" / version / "report.json").exists()
    # where the time went: the worker's phases, the cluster's own share, the gate
    assert list(manifest["seconds"]) == [
        "load",
        "score",
        "repeats",
        "train",
        "export",
        "ray",
        "gate",
    ]
    assert list((cluster.cache / "models").glob("*.gguf"))  # the model was shipped and cached


@pytest.mark.slow
def test_a_killed_ray_worker_changes_nothing_and_the_daemon_answers(
    tiny_qwen3_gguf: Path, tmp_path: Path, cluster: Cluster
) -> None:
    home = tmp_path / "home"
    ids = _samples(home, tiny_qwen3_gguf)
    # Many epochs and no trust region: the run lasts long enough to be killed in the middle.
    d = _daemon(tiny_qwen3_gguf, home, cluster, CLAWD_TRAIN_EPOCHS="100", CLAWD_TRAIN_TARGET_KL="0")
    try:
        with d.client() as c:
            assert c.post("/v1/train").status_code == 202
            pid = _worker_pid(home, c)
            assert psutil.Process(pid).environ().get("GOMP_SPINCOUNT") == "1000"  # no spinning
            wait_for(lambda: c.get("/v1/train").json()["latest_steps"], timeout=180, every=0.2)
            os.kill(pid, signal.SIGKILL)
            done = ended_run(c)
            assert done["status"] == "failed" and "Ray" in done["reason"], done
            assert httpx.get(f"{d.url}/health").status_code == 200
            _chat_works(c)
            assert c.get("/v1/train").json()["approved_samples"] == len(ids)  # they still wait
    finally:
        d.stop()
    _nothing_changed(home, ids)


@pytest.mark.slow
def test_cancelling_the_trainer_cancels_the_ray_task_through_ray_client(
    tiny_qwen3_gguf: Path, tmp_path: Path, cluster: Cluster
) -> None:
    home = tmp_path / "home"
    ids = _samples(home, tiny_qwen3_gguf)
    # Through Ray Client (ray://), the way a laptop reaches a GPU box.
    d = _daemon(
        tiny_qwen3_gguf,
        home,
        cluster,
        client=True,
        CLAWD_TRAIN_EPOCHS="100",
        CLAWD_TRAIN_TARGET_KL="0",
    )
    try:
        with d.client() as c:
            started = c.post("/v1/train")
            assert started.status_code == 202, started.text
            trainer = started.json()["pid"]
            worker = _worker_pid(home, c)
            os.kill(trainer, signal.SIGTERM)
            done = ended_run(c)
            assert (done["status"], done["reason"]) == ("failed", "cancelled")
            wait_for(lambda: worker not in cluster.workers(), timeout=60)
            _chat_works(c)
    finally:
        d.stop()
    _nothing_changed(home, ids)


@pytest.mark.slow
def test_a_model_on_the_workers_shared_disk_is_used_by_path_and_checked(
    tiny_qwen3_gguf: Path, home: Path, cluster: Cluster, tmp_path: Path
) -> None:
    ids = _samples(home, tiny_qwen3_gguf, n=2)
    on_ray = {"model": str(tiny_qwen3_gguf), "train_backend": "ray", "ray_address": cluster.address}
    missing = Settings(**on_ray, ray_model_path=str(tmp_path / "nowhere.gguf"))
    with pytest.raises(train.TrainingError, match="nowhere.gguf does not exist on Ray worker"):
        _train_apart(home, missing)
    _nothing_changed(home, ids)
    other = tmp_path / "other.gguf"
    other.write_bytes(tiny_qwen3_gguf.read_bytes()[:-1] + b"x")  # the same size, not the same
    with pytest.raises(train.TrainingError, match="not the model this daemon serves"):
        _train_apart(home, Settings(**on_ray, ray_model_path=str(other)))
    shared = Settings(**on_ray, ray_model_path=str(tiny_qwen3_gguf))
    summary = _train_apart(home, shared)
    assert summary["samples"] == 2
    submitted = [m for m in _events(home) if "submitted" in m]
    assert submitted and "object-store" not in submitted[-1]  # nothing shipped this time


def test_a_cluster_too_small_fails_clearly_and_leaves_the_samples(
    tiny_qwen3_gguf: Path, home: Path, cluster: Cluster
) -> None:
    ids = _samples(home, tiny_qwen3_gguf, n=1)
    settings = Settings(
        model=str(tiny_qwen3_gguf),
        train_backend="ray",
        ray_address=cluster.address,
        ray_num_gpus=1,
    )
    with pytest.raises(train.TrainingError, match=r"too small for this run: GPU 0 \(asked 1\)"):
        _train_apart(home, settings)
    _nothing_changed(home, ids)


def _cancel_unless_done_on(address: str) -> tuple[list[str], str, str, str]:
    """In a child process (a driver that Ray may abort): a task that has ended and one that is
    running, each passed to ``_cancel_unless_done``; returns the ids it cancelled, the two ids,
    and how the running one ended."""
    import time

    import ray

    ray.init(address=address, log_to_driver=False)
    try:
        cancelled: list[str] = []

        class Recording:  # the real ray, with its cancels written down
            def __getattr__(self, name: str) -> object:
                return getattr(ray, name)

            def cancel(self, ref: object, force: bool = False) -> None:
                cancelled.append(ref.hex())  # type: ignore[attr-defined]
                ray.cancel(ref, force=force)

        def fails() -> None:
            raise ValueError("the task's own error")

        def sleeps() -> None:
            time.sleep(120)

        ended = ray.remote(max_retries=0)(fails).remote()
        ray.wait([ended], timeout=120)
        remote._cancel_unless_done(Recording(), ended)
        running = ray.remote(max_retries=0)(sleeps).remote()
        time.sleep(2)
        remote._cancel_unless_done(Recording(), running)
        try:
            ray.get(running, timeout=60)
            how = "finished"
        except ray.exceptions.RayError as exc:
            how = type(exc).__name__
        return cancelled, ended.hex(), running.hex(), how
    finally:
        ray.shutdown()


def test_a_task_that_ended_is_never_cancelled_and_a_running_one_is(cluster: Cluster) -> None:
    """Cancelling a finished task can abort the driver inside Ray (a CI run died so, after a
    task that raised); the run cancels only what still runs."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        got = pool.submit(_cancel_unless_done_on, cluster.address).result(timeout=300)
    cancelled, ended, running, how = got
    assert cancelled == [running] and ended not in cancelled
    assert how in ("TaskCancelledError", "WorkerCrashedError"), how


def test_an_unreachable_cluster_fails_in_seconds_and_leaves_the_samples(
    tiny_qwen3_gguf: Path, home: Path
) -> None:
    from fixtures.daemon import free_port

    ids = _samples(home, tiny_qwen3_gguf, n=1)
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    settings = Settings(model=str(tiny_qwen3_gguf), train_backend="ray", ray_address=address)
    with pytest.raises(train.TrainingError, match="cannot reach the Ray cluster"):
        train.run(home, settings, cfg=small())
    _nothing_changed(home, ids)
    with Store.open(home) as store:
        (run,) = store.db["training_runs"].rows
    assert run["status"] == "failed" and address in run["reason"]


def test_ray_address_is_checked_when_set() -> None:
    from pydantic import ValidationError

    for good in ("auto", "10.0.0.5:6379", "ray://gpu-box:10001", "[::1]:6379"):
        assert Settings(ray_address=good).ray_address == good
    for bad in ("", "gpu-box", "http://gpu-box:6379", "gpu box:1"):
        with pytest.raises(ValidationError, match="ray_address"):
            Settings(ray_address=bad)


def test_pack_and_unpack_keep_a_folder_and_refuse_escapes(tmp_path: Path) -> None:
    import io
    import tarfile

    src = tmp_path / "src"
    (src / "peft").mkdir(parents=True)
    (src / "peft" / "a.bin").write_bytes(b"\x00\x01" * 1000)
    (src / "adapter.gguf").write_bytes(b"GGUF")
    remote.unpack(remote.pack(src), tmp_path / "dst")
    assert (tmp_path / "dst" / "peft" / "a.bin").read_bytes() == b"\x00\x01" * 1000
    assert (tmp_path / "dst" / "adapter.gguf").read_bytes() == b"GGUF"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../escaped")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(tarfile.TarError):
        remote.unpack(buf.getvalue(), tmp_path / "dst2")
    assert not (tmp_path / "escaped").exists()


def test_a_client_server_that_fails_to_start_once_is_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ray Client's proxy starts a server per connection, and on a busy head that start can
    time out once (seen in CI: "Starting Ray client server failed"). It cannot be caused on
    demand, so a stand-in for ``ray`` fails the first ``init`` that way: the connection is asked
    again once; a second failure, or any other error, is the clear error it always was."""
    from clawd.training import remote

    class Ray:
        def __init__(self, errors: list[Exception]) -> None:
            self.errors, self.calls = errors, 0

        def is_initialized(self) -> bool:
            return False

        def init(self, **_: object) -> None:
            self.calls += 1
            if self.errors:
                raise self.errors.pop(0)

    flaky = RuntimeError(f"{remote.CLIENT_SERVER_FAILED}. See ray_client_server_23000.err")
    monkeypatch.setattr(remote, "_reachable", lambda address: None)
    monkeypatch.setattr(remote, "RETRY_AFTER_S", 0.0)
    settings = Settings(train_backend="ray", ray_address="ray://127.0.0.1:10001")
    for errors, calls, fails in (
        ([flaky], 2, False),
        ([flaky, RuntimeError(str(flaky))], 2, True),
        ([ConnectionError("refused")], 1, True),
    ):
        ray = Ray(list(errors))
        monkeypatch.setattr(remote, "_ray", lambda ray=ray: ray)
        if fails:
            with pytest.raises(train.TrainingError, match="cannot reach the Ray cluster"):
                remote.connect(settings)
        else:
            assert remote.connect(settings) is ray
        assert ray.calls == calls
