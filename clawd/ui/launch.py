"""Find the daemon for ``clawd chat``, or start one in the background and wait until it serves.

A daemon started here outlives the TUI (so training and the signal job keep running); its log
is ``CLAWD_HOME/logs/daemon.log``. Messages about what happens go through ``say``.

Run alone to make sure a daemon runs::

    python -m clawd.ui.launch
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from clawd.config import token_path


class LaunchError(Exception):
    """No daemon answers and one could not be started; the message says why and what to do."""


def health(url: str, timeout: float = 2.0, token: str | None = None) -> dict | None:
    """The daemon's /health body (all of it with ``token``), or None when nothing answers."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        resp = httpx.get(f"{url.rstrip('/')}/health", timeout=timeout, headers=headers)
        return resp.json()
    except (httpx.HTTPError, ValueError):
        return None


def start(home: Path, host: str, port: int) -> subprocess.Popen:
    """``clawd serve`` as a detached background process logging to CLAWD_HOME/logs."""
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = open(logs / "daemon.log", "ab")
    cmd = [sys.executable, "-m", "clawd", "serve", "--host", host, "--port", str(port)]
    env = {**os.environ, "CLAWD_HOME": str(home)}
    return subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )


def ensure(
    url: str | None,
    home: Path,
    host: str,
    port: int,
    *,
    say: Callable[[str], None] = print,
    wait_s: float = 300,
) -> tuple[str, int | None]:
    """(URL of a daemon that serves, pid of the one started here or None).

    ``url`` given: a daemon must answer there. Otherwise the local one, started if needed.
    """
    if url:
        if health(url) is None:
            raise LaunchError(f"no daemon answers at {url}; start one with `clawd serve`")
        return url.rstrip("/"), None
    url = f"http://{host}:{port}"
    body = health(url)
    if body is None:
        say(f"No daemon answers at {url}; starting one (log: {home / 'logs' / 'daemon.log'}).")
        proc = start(home, host, port)
    else:
        proc = None
    deadline, last = time.monotonic() + wait_s, ""
    path = token_path(home)
    while True:
        # with this home's token, a daemon that failed says why
        body = health(url, token=path.read_text().strip() if path.exists() else None)
        state = (body or {}).get("status")
        if state == "ok":
            if proc is not None:
                say(f"The daemon (pid {proc.pid}) serves and keeps running after you quit.")
            return url, proc.pid if proc else None
        if state == "error":
            raise LaunchError(f"the daemon at {url} failed to start: {body.get('error')}")
        if proc is not None and proc.poll() is not None:
            tail = _tail(home / "logs" / "daemon.log")
            raise LaunchError(f"the daemon exited with status {proc.returncode}:\n{tail}")
        if state and state != last:
            say(f"The daemon is {state} ({body.get('model')})...")
            last = state
        if time.monotonic() > deadline:
            raise LaunchError(f"the daemon at {url} was not ready after {wait_s:.0f} s")
        time.sleep(0.3)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


if __name__ == "__main__":
    from clawd.config import clawd_home, load_settings

    h = clawd_home()
    s = load_settings(h)
    print(ensure(None, h, s.host, s.port))
