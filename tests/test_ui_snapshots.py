"""Snapshots of the TUI's main screens (pytest-textual-snapshot), on fixed daemon answers.

The SVGs live in ``tests/__snapshots__/``; after a deliberate change to the look, look at the
new ones and accept them with ``pytest tests/test_ui_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Collapsible, TextArea

from clawd.ui.app import ClawdApp
from clawd.ui.client import Client
from clawd.ui.messages import Composer, MessageView
from tests import uifixture
from tests.uikit import until


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """Times on screen are local times; pin the zone so the pictures do not depend on it."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


def app(tmp_path: Path) -> ClawdApp:
    return ClawdApp(Client("http://fixture", "token", transport=uifixture.transport()), tmp_path)


def steady(pilot: Pilot) -> None:
    """A blinking cursor is drawn or not depending on when the picture is taken: timing, not
    look (a CI run caught the composer's cursor in the other phase). Hold it steady."""
    for area in pilot.app.query(TextArea):
        area.cursor_blink = False


def keys(*pressed: str):
    """A run_before that presses keys, each followed by a pause for the work it started."""

    async def run(pilot: Pilot) -> None:
        steady(pilot)
        for key in pressed:
            await pilot.press(key)
            await pilot.pause(0.3)
            await pilot.pause()

    return run


async def open_fruits(pilot: Pilot) -> None:
    steady(pilot)
    await pilot.app.chat.open("conv-fruits")
    await pilot.pause()


def test_chat_with_a_stored_conversation(snap_compare, tmp_path: Path) -> None:
    assert snap_compare(app(tmp_path), run_before=open_fruits)


def test_chat_in_a_large_terminal_with_thinking_unfolded(snap_compare, tmp_path: Path) -> None:
    async def unfold(pilot: Pilot) -> None:
        await open_fruits(pilot)
        pilot.app.query_one(".thinking", Collapsible).collapsed = False
        await pilot.pause()

    assert snap_compare(app(tmp_path), terminal_size=(140, 40), run_before=unfold)


def test_chat_after_a_streamed_answer(snap_compare, tmp_path: Path) -> None:
    async def ask(pilot: Pilot) -> None:
        app = pilot.app
        steady(pilot)
        await until(pilot, lambda: isinstance(app.focused, Composer), what="the composer")
        await pilot.press(*"Fruit?", "enter")
        await until(pilot, lambda: app.query(MessageView), what="the answer")
        await until(pilot, lambda: not app.chat.busy, what="the answer to end")
        await app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(app(tmp_path), run_before=ask)


def test_learning_view(snap_compare, tmp_path: Path) -> None:
    assert snap_compare(app(tmp_path), run_before=keys("f2"))


def test_adapters_view(snap_compare, tmp_path: Path) -> None:
    assert snap_compare(app(tmp_path), run_before=keys("f3"))


def test_why_view(snap_compare, tmp_path: Path) -> None:
    assert snap_compare(app(tmp_path), run_before=keys("f3", "w"))


def test_activation_asks_first(snap_compare, tmp_path: Path) -> None:
    assert snap_compare(app(tmp_path), run_before=keys("f3", "a"))
