"""Start the real daemon as a subprocess on a model, for benchmarks and black-box tests, and
tidy its home afterwards.

Not run alone: ``bench.serve``, ``bench.learning`` and the REST tests call ``start_daemon``.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RunningDaemon:
    url: str
    token: str
    home: Path
    proc: subprocess.Popen
    log: Path

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def client(self, **kw: object) -> httpx.Client:
        kw.setdefault("timeout", 120)
        return httpx.Client(base_url=self.url, headers=self.headers, **kw)

    def health(self) -> dict:
        """The daemon's whole /health body (asked with the token)."""
        return httpx.get(f"{self.url}/health", headers=self.headers, timeout=30).json()

    def server_errors(self) -> list[str]:
        """Lines of the daemon's log that show a 5xx answer or an unhandled exception."""
        if not self.log.exists():
            return []
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return [line for line in text.splitlines() if _SERVER_ERROR.search(line)]

    def stop(self, allow_server_errors: bool = False) -> None:
        """Stop the daemon; a 5xx it answered meanwhile fails the caller (a test), unless
        ``allow_server_errors``: a 500 is a defect even when the test did not look."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        errors = self.server_errors()
        if errors and not allow_server_errors:
            shown = "\n".join(errors[:10])
            raise AssertionError(f"the daemon answered 5xx or raised ({self.log}):\n{shown}")


# uvicorn's access line of a 5xx, our handler's log of an internal error, an ASGI crash
_SERVER_ERROR = re.compile(
    r'HTTP/1\.[01]" 5\d\d |ERROR internal error|Exception in ASGI application'
)


def start_daemon(
    model: Path,
    home: Path,
    *,
    n_ctx: int = 2048,
    timeout: float = 120,
    settings: dict[str, str] | None = None,
) -> RunningDaemon:
    """Start ``clawd serve`` on ``model`` with ``CLAWD_HOME=home``; waits until it is healthy.

    ``settings`` are extra CLAWD_* variables; the signals job is off unless they switch it on.
    The trainer runs at the daemon's own priority (``train_niceness`` 0): tests and benches
    measure what training does, and on a machine busy with other work a niced trainer waits
    behind all of it, by design.
    """
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWD_")}
    env.update(
        CLAWD_HOME=str(home),
        CLAWD_N_CTX=str(n_ctx),
        CLAWD_N_THREADS="2",
        CLAWD_SIGNALS_INTERVAL_S="0",
        CLAWD_TRAIN_NICENESS="0",
    )
    env.update(settings or {})
    log = home / "daemon.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "clawd", "serve", "--port", str(port), "--model", str(model)],
        env=env,
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited with {proc.returncode}: {log.read_text()}")
        with contextlib.suppress(httpx.HTTPError):  # not listening yet
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                token = (home / "token").read_text().strip()
                return RunningDaemon(url, token, home, proc, log)
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"daemon not healthy after {timeout}s: {log.read_text()}")


WEIGHTS = ("adapter.gguf", "adapter_model.safetensors", "adapter_model.bin")


def drop_adapter_weights(home: Path) -> int:
    """Remove the adapters' weight files under ``home/adapters`` (finished and unfinished
    versions, the peft copy included) and keep everything else: the store, the logs, each
    adapter's report and manifest. Returns the bytes freed."""
    freed = 0
    for path in sorted((home / "adapters").rglob("*")):
        if path.name in WEIGHTS and path.is_file() and not path.is_symlink():
            freed += path.stat().st_size
            path.unlink()
    return freed
