"""Helpers for driving the TUI with Textual's pilot against a real daemon."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from clawd.ui.app import ClawdApp
from clawd.ui.client import Client
from fixtures.daemon import RunningDaemon


async def until(
    pilot: Pilot, predicate: Callable[[], Any], timeout: float = 120, what: str = ""
) -> Any:
    """Let the app run until ``predicate()`` is truthy; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        await pilot.pause(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


def drive(
    daemon: RunningDaemon,
    export_dir: Path,
    scenario: Callable[[Pilot, ClawdApp], Awaitable[None]],
    size: tuple[int, int] = (100, 32),
) -> None:
    """Run ``scenario(pilot, app)`` in a TUI connected to ``daemon``."""

    async def main() -> None:
        app = ClawdApp(Client(daemon.url, daemon.token), export_dir)
        try:
            async with app.run_test(size=size) as pilot:
                await pilot.pause()
                await scenario(pilot, app)
        finally:
            await app.client.close()

    asyncio.run(main())
