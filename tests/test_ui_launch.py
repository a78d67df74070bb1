"""``clawd chat`` finds the daemon, or starts one in the background and says so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from clawd.ui.launch import LaunchError, ensure, health
from fixtures.daemon import free_port


def test_starts_a_daemon_when_none_answers_then_finds_it(
    smollm2_gguf: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAWD_MODEL", str(smollm2_gguf))
    monkeypatch.setenv("CLAWD_SIGNALS_INTERVAL_S", "0")
    port = free_port()
    said: list[str] = []
    url, pid = ensure(None, home, "127.0.0.1", port, say=said.append, wait_s=120)
    try:
        assert pid and url == f"http://127.0.0.1:{port}"
        assert health(url)["status"] == "ok"
        assert any("starting one" in s for s in said) and any(str(pid) in s for s in said)
        assert (home / "logs" / "daemon.log").stat().st_size > 0
        again = ensure(None, home, "127.0.0.1", port, say=said.append)
        assert again == (url, None)  # found, not started twice
        assert ensure(url, home, "127.0.0.1", port) == (url, None)
    finally:
        os.kill(pid, signal.SIGTERM)


def test_a_daemon_that_cannot_start_is_a_clear_error(home: Path, monkeypatch) -> None:
    monkeypatch.setenv("CLAWD_MODEL", str(home / "missing.gguf"))
    with pytest.raises(LaunchError, match="exited with status"):
        ensure(None, home, "127.0.0.1", free_port(), say=lambda _: None, wait_s=60)


def test_clawd_chat_with_a_url_where_nothing_answers(home: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(LaunchError, match="no daemon answers"):
        ensure(url, home, "127.0.0.1", 1)
    proc = subprocess.run(
        [sys.executable, "-m", "clawd", "chat", "--url", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "no daemon answers" in proc.stderr and "Traceback" not in proc.stderr
    with pytest.raises(httpx.HTTPError):
        httpx.get(url, timeout=1)
