"""One update on a Ray cluster (``train_backend = ray``): inputs go out, the version folder
comes back, progress streams back step by step.

``run_update`` connects with ``ray.init(ray_address)`` (``auto``, a head's ``host:port``, or a
Ray Client address ``ray://host:10001``), ships clawd's own code with the job
(``runtime_env.py_modules``, so the workers run exactly this version; they need its training
dependencies: torch, transformers, peft, gguf), and submits one task with the resources the
settings ask for (``ray_num_gpus``, ``ray_num_cpus``, ``ray_memory_gb``) and no retries. The
task calls ``clawd.training.update.update`` on the worker: the samples and settings travel as
its arguments, the parent adapter's PEFT folder as a tar, the base GGUF by path on the workers
(``ray_model_path``, a shared disk, checked against its sha256) or, without one, through the
object store in 64 MiB pieces (cached on the worker by hash). Each step's metrics come back
through a ``ray.util.queue.Queue`` as they happen; the result is the update's plain-data
summary plus a tar of ``peft/``, ``adapter.gguf`` and the earlier points' ``earlier/``
(``clawd.training.earlier``), unpacked into the run's temp folder.

Anything that goes wrong there — a worker killed, a node lost, the cluster unreachable, an
error in the update — raises ``TrainingError`` with the reason; Ctrl+C or SIGTERM cancels the
task (``ray.cancel(force=True)``). The caller then records the failure, writes no adapter and
leaves the samples waiting, as for a local run. A task killed that way cannot clean up: the
next task on that machine removes what it left (its scratch folder, a half-shipped model).
``auto`` refuses a local cluster that another user started.

Run alone to check that a cluster can take a run (connects, runs a small task with the
configured resources, prints what the worker has)::

    python -m clawd.training.remote [ADDRESS]
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import socket
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from clawd.config import Settings
from clawd.threads import openmp_wait
from clawd.training.update import Cancelled, OnStep, TrainingError, UpdateInputs

CHUNK = 64 << 20  # bytes per object-store piece of a shipped model
START_TIMEOUT_S = 600.0  # no worker with the asked resources in this long: the run fails
# Ray Client's proxy starts a server per connection; on a busy head that start can time out
# once and succeed when asked again: connect asks once more, RETRY_AFTER_S later
CLIENT_SERVER_FAILED = "Starting Ray client server failed"
RETRY_AFTER_S = 2.0
Said = Callable[[str], None]


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise TrainingError(
            "train_backend = ray needs Ray on this machine: pip install 'clawd[ray]' "
            "(or ./install.sh --dev)"
        ) from None
    return ray


def connect(settings: Settings) -> Any:
    """``ray.init`` on ``ray_address`` with clawd's code shipped to the workers; returns ray."""
    import clawd

    ray = _ray()
    if ray.is_initialized():
        ray.shutdown()
    _reachable(settings.ray_address)
    code = [str(Path(clawd.__file__).parent)]
    ours = signal.getsignal(signal.SIGTERM)  # ray.init puts its own (sys.exit) in its place
    for attempt in (1, 2):
        try:
            ray.init(
                address=settings.ray_address,
                runtime_env={
                    "py_modules": code,
                    "excludes": ["__pycache__", "*.pyc"],
                    "env_vars": openmp_wait(os.environ),  # the workers wait as this process does
                },
                logging_level="WARNING",
                log_to_driver=True,
            )
            break
        except Exception as exc:  # ConnectionError, ValueError, RuntimeError, grpc errors...
            if attempt == 1 and CLIENT_SERVER_FAILED in str(exc):
                time.sleep(RETRY_AFTER_S)
                continue
            raise TrainingError(
                f"cannot reach the Ray cluster at ray_address {settings.ray_address!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from None
    if threading.current_thread() is threading.main_thread() and ours is not None:
        signal.signal(signal.SIGTERM, ours)  # a SIGTERM stays a cancel of the run
    return ray


def _reachable(address: str, timeout: float = 5.0) -> None:
    """A quick TCP check of ``host:port`` (plain or ray://): ray.init waits minutes on a dead
    address before it gives up."""
    if address == "auto":
        _own_cluster()
        return  # ray.init finds a local cluster itself, or fails at once
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise TrainingError(f"ray_address {address!r} is not 'auto', host:port or ray://host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise TrainingError(
            f"cannot reach the Ray cluster at ray_address {address!r}: {exc} (is `ray start "
            "--head` running there, and the port open to this machine?)"
        ) from None


def _own_cluster() -> None:
    """``auto`` attaches to the cluster this machine started last: refuse it when another user
    started it (it would run our samples, and we would unpickle what it sends back)."""
    from ray._common.utils import get_ray_address_file

    if os.environ.get("RAY_ADDRESS"):
        return  # named by the user in the environment, not found by chance
    found = Path(get_ray_address_file(None))
    with contextlib.suppress(FileNotFoundError):
        owner = found.stat().st_uid
        if owner != os.getuid():
            raise TrainingError(
                f"ray_address 'auto' found a Ray cluster started by another user (uid {owner}, "
                f"{found}): clawd sends it your samples and trusts what it sends back. Set "
                "ray_address to that cluster's address if you mean to use it."
            )


def _resources(settings: Settings) -> dict[str, Any]:
    res: dict[str, Any] = {"num_cpus": settings.ray_num_cpus, "num_gpus": settings.ray_num_gpus}
    if settings.ray_memory_gb:
        res["memory"] = int(settings.ray_memory_gb * 1e9)
    return res


def _check_fits(ray: Any, settings: Settings) -> None:
    """Fail at once when no cluster of this size could ever run the task."""
    have = ray.cluster_resources()
    asks = {
        "CPU": settings.ray_num_cpus,
        "GPU": settings.ray_num_gpus,
        "memory": settings.ray_memory_gb * 1e9,
    }
    short = [k for k, v in asks.items() if v and have.get(k, 0) < v]
    if short:
        shown = ", ".join(f"{k} {have.get(k, 0):g} (asked {asks[k]:g})" for k in short)
        raise TrainingError(f"the Ray cluster is too small for this run: {shown}")


def pack(folder: Path) -> bytes:
    """A folder's files as an uncompressed tar (adapters compress poorly)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(folder, arcname=".")
    return buf.getvalue()


def unpack(blob: bytes, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r") as tar:
        tar.extractall(folder, filter="data")  # no absolute paths, links out or devices


def _ship_model(ray: Any, path: Path) -> list[Any]:
    refs = []
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            refs.append(ray.put(block))
    return refs


def worker_cache() -> Path:
    """Where a worker keeps shipped models and their torch conversions."""
    env = os.environ.get("CLAWD_WORKER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "clawd-worker"


def _model_on_worker(digest: str, shared: str, pieces: list[Any] | None, cache: Path) -> Path:
    """The base GGUF on this worker: the shared path, or the shipped pieces (cached)."""
    import ray

    from clawd.models import sha256_file

    host = socket.gethostname()
    if shared:
        path = Path(shared)
        if not path.is_file():
            raise TrainingError(f"ray_model_path {shared} does not exist on Ray worker {host}")
        if sha256_file(path) != digest:
            raise TrainingError(
                f"ray_model_path {shared} on Ray worker {host} is not the model this daemon "
                "serves (its sha256 differs)"
            )
        return path
    target = cache / "models" / f"{digest[:16]}.gguf"
    if target.exists():
        return target  # it was hash-checked before it got its name
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".ship-{os.getpid()}-")
    try:
        with os.fdopen(fd, "wb") as fh:
            for piece in pieces or []:
                fh.write(ray.get(piece))
        if sha256_file(Path(tmp)) != digest:
            raise TrainingError("the base model arrived damaged on the Ray worker (sha256)")
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def _sweep(folder: Path, prefix: str) -> list[Path]:
    """Remove ``prefix<pid>-*`` entries of ``folder`` whose process is gone: what a task killed
    by ``ray.cancel(force=True)`` left (its ``finally`` never ran): the parent adapter, partial
    adapters, a half-shipped model (GBs). Returns what it removed."""
    removed = []
    for path in folder.glob(f"{prefix}*") if folder.is_dir() else []:
        pid = path.name[len(prefix) :].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _task(
    inputs: UpdateInputs, shared: str, pieces: list[Any] | None, parent: bytes | None, queue: Any
) -> tuple[dict[str, Any], bytes]:
    """Runs on the worker: the update in a scratch folder; returns (summary, tar of out)."""
    import torch

    from clawd.training.update import update

    queue.put(
        (
            "started",
            {"pid": os.getpid(), "host": socket.gethostname(), "cuda": torch.cuda.is_available()},
        )
    )
    cache = worker_cache()
    _sweep(Path(tempfile.gettempdir()), "clawd-update-")  # runs cancelled by force left these
    _sweep(cache / "models", ".ship-")
    work = Path(tempfile.mkdtemp(prefix=f"clawd-update-{os.getpid()}-"))
    try:
        inputs.model_path = _model_on_worker(inputs.digest, shared, pieces, cache)
        if parent is not None:
            unpack(parent, work / "parent")
            inputs.parent_peft = work / "parent"
        out = work / "out"
        out.mkdir()
        result = update(inputs, out, cache, on_step=lambda m: queue.put(("step", m)))
        return result, pack(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def _signals_set(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` instead of raising: an exception raised inside Ray's
    compiled ``wait`` comes out as a SystemError, not as the cancel it was."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    for s in saved:
        signal.signal(s, lambda *_: stop.set())
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def run_update(
    inputs: UpdateInputs, out: Path, settings: Settings, on_step: OnStep, said: Said
) -> dict[str, Any]:
    """``update(inputs)`` on the cluster; its files land in ``out``; returns its summary."""
    ray = connect(settings)
    try:
        return _submit(ray, inputs, out, settings, on_step, said)
    finally:
        ray.shutdown()


def _submit(
    ray: Any, inputs: UpdateInputs, out: Path, settings: Settings, on_step: OnStep, said: Said
) -> dict[str, Any]:
    from ray.util.queue import Queue

    _check_fits(ray, settings)
    queue = Queue(actor_options={"num_cpus": 0})
    shared = settings.ray_model_path
    pieces = None if shared else _ship_model(ray, inputs.model_path)
    parent = pack(inputs.parent_peft) if inputs.parent_peft else None
    remote = ray.remote(max_retries=0)(_task).options(**_resources(settings))
    ref = remote.remote(inputs, shared, pieces, parent, queue)
    said(
        f"submitted to the Ray cluster {settings.ray_address}"
        + ("" if shared else f" with the model ({len(pieces or [])} object-store pieces)")
    )
    started, since = False, time.monotonic()

    def drain() -> None:
        nonlocal started
        while not queue.empty():
            kind, body = queue.get(timeout=5)
            if kind == "step":
                on_step(body)
            elif kind == "started":
                started = True
                gpu = "a GPU" if body["cuda"] else "CPU only"
                said(f"running on Ray node {body['host']}, worker pid {body['pid']} ({gpu})")

    try:
        with _signals_set(stop := threading.Event()):
            while not ray.wait([ref], timeout=0.5)[0]:
                if stop.is_set():
                    raise Cancelled()
                drain()
                if not started and time.monotonic() - since > START_TIMEOUT_S:
                    raise TrainingError(
                        f"no Ray worker with {_resources(settings)} became free in "
                        f"{START_TIMEOUT_S / 60:.0f} minutes (see `ray status`)"
                    )
        result, blob = ray.get(ref)
        drain()
    except BaseException as exc:
        _cancel_unless_done(ray, ref)
        if isinstance(exc, ray.exceptions.RayTaskError):
            cause = exc.cause
            if isinstance(cause, TrainingError):
                raise TrainingError(str(cause)) from None
            raise TrainingError(f"on the Ray worker: {type(cause).__name__}: {cause}") from None
        if isinstance(exc, ray.exceptions.RayError):
            raise TrainingError(f"the Ray run was lost: {type(exc).__name__}: {exc}") from None
        raise
    unpack(blob, out)
    return result


def _cancel_unless_done(ray: Any, ref: Any) -> None:
    """``ray.cancel(force=True)`` on a task still pending or running, and never on one that has
    ended: cancelling a finished task races with its completion reply inside Ray's core worker,
    which can abort the whole driver process ("Tried to complete task that was not pending",
    seen in CI with Ray 2.60 after a task that raised). A lost cluster can do neither; the
    run's own error is the one raised."""
    with contextlib.suppress(Exception):
        if not ray.wait([ref], timeout=0)[0]:
            ray.cancel(ref, force=True)


def main() -> None:
    import sys

    from clawd.config import load_settings

    settings = load_settings()
    if len(sys.argv) > 1:
        settings = settings.model_copy(update={"ray_address": sys.argv[1]})
    ray = connect(settings)
    try:
        _check_fits(ray, settings)

        def probe() -> dict[str, Any]:
            import torch

            return {
                "host": socket.gethostname(),
                "torch": torch.__version__,
                "cuda": torch.cuda.is_available(),
                "cache": str(worker_cache()),
            }

        task = ray.remote(max_retries=0)(probe).options(**_resources(settings))
        print(ray.get(task.remote()))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
