"""The memories view and the chat's "Remembered:" notice: against the real daemon on the
SmolLM2 fixture, and once on fixed answers (``uifixture``) so the notice's wording and undo are
checked without depending on when the daemon's capture finishes.

Run alone: ``pytest tests/test_ui_memories.py``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.pilot import Pilot
from textual.widgets import Collapsible, DataTable, Static

from clawd.ui.app import ClawdApp
from clawd.ui.client import Client
from clawd.ui.dialogs import ConfirmScreen, MemoryScreen
from clawd.ui.messages import MessageView
from fixtures.daemon import RunningDaemon, start_daemon
from tests import uifixture
from tests.uikit import drive, until


@pytest.fixture(scope="module")
def daemon(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory):
    d = start_daemon(smollm2_gguf, tmp_path_factory.mktemp("ui-memories-home"))
    yield d
    d.stop()


def keys(table: DataTable) -> list[str | None]:
    return [k.value for k in table.rows]


def memories(daemon: RunningDaemon) -> list[dict[str, Any]]:
    with daemon.client() as c:
        return c.get("/v1/memories").json()["data"]


async def ask(pilot: Pilot, app: ClawdApp, text: str) -> MessageView:
    before = len([v for v in app.query(MessageView) if v.role == "assistant"])
    await pilot.press(*text, "enter")
    answers = lambda: [v for v in app.query(MessageView) if v.role == "assistant"]  # noqa: E731
    view = await until(pilot, lambda: len(answers()) > before and answers()[-1])
    await until(pilot, lambda: view.state == "done" and not app.chat.busy, 120, "the answer")
    await app.workers.wait_for_complete()  # the memory texts are fetched after the answer
    return view


def test_the_view_lists_switches_off_deletes_and_adds(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    with daemon.client() as c:
        body = {"text": "Keep answers to one line.", "kind": "length"}
        mid = c.post("/v1/memories", json=body).json()["id"]

    def status() -> str | None:
        return next((m["status"] for m in memories(daemon) if m["id"] == mid), None)

    async def scenario(pilot: Pilot, app: ClawdApp) -> None:
        await pilot.press("f5")
        pane = app.memories
        table = pane.query_one("#memories", DataTable)
        await until(pilot, lambda: str(mid) in keys(table), what="the memory's row")
        table.move_cursor(row=keys(table).index(str(mid)))
        await pilot.pause()
        detail = str(pane.query_one("#memory-text", Static).render())
        assert "Keep answers to one line." in detail and "added by you" in detail
        await pilot.press("o")
        await until(pilot, lambda: status() == "off", what="the PATCH")
        await until(pilot, lambda: pane.rows[mid]["status"] == "off", what="the row")
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: status() is None, what="the DELETE")
        await until(pilot, lambda: str(mid) not in keys(table), what="the row to go")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, MemoryScreen))
        await pilot.press(*"Use metric units.", "enter")
        await until(pilot, lambda: "Use metric units." in [m["text"] for m in memories(daemon)])
        await until(pilot, lambda: len(pane.rows) == 1, what="the new row")

    drive(daemon, tmp_path, scenario)


def test_a_reply_naming_the_user_is_remembered_used_and_undone(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    def ana() -> dict[str, Any] | None:
        return next((m for m in memories(daemon) if "Ana" in m["text"]), None)

    async def scenario(pilot: Pilot, app: ClawdApp) -> None:
        await ask(pilot, app, "Hello there.")
        view = await ask(pilot, app, "Please call me Ana from now on.")
        made = await until(pilot, ana, what="the daemon to capture the name")
        assert made["source"] == "reply" and made["status"] == "active"
        # Capture is rules over the reply, done long before the answer ends, so this answer's
        # final chunk carries it.
        notice = view.query_one(".remembered", Static)
        await until(pilot, lambda: f"Remembered: {made['text']}" in str(notice.render()))
        used = await ask(pilot, app, "What is my name?")
        assert made["id"] in used.memory_ids
        assert used.query_one(".memory", Collapsible).title.startswith("memory: ")
        assert made["text"] in str(used.query_one(".memory-texts", Static).render())
        await pilot.press("ctrl+g")
        await until(pilot, lambda: "Undone" in str(notice.render()), what="the undo")
        assert ana() is None

    drive(daemon, tmp_path, scenario)


def _sse(clawd: dict[str, Any]) -> bytes:
    chunks = [
        {"id": "chatcmpl-m", "choices": [{"index": 0, "delta": {"content": "Hi Ana."}}]},
        {
            "id": "chatcmpl-m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "clawd": clawd,
        },
    ]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def test_the_notice_says_what_it_replaces_and_undo_deletes_it(tmp_path: Path) -> None:
    ana = "Address the user as Ana."
    clawd = {
        "conversation_id": "conv-new",
        "adapter_version": None,
        "memories": [7],
        "memories_left_out": [],
        "remembered": [{"id": 7, "text": ana, "replaced": "Address the user as Sam."}],
    }
    deleted: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        route = (request.method, request.url.path)
        if route == ("POST", "/v1/chat/completions"):
            headers = {"content-type": "text/event-stream"}
            return httpx.Response(200, content=_sse(clawd), headers=headers)
        if route == ("GET", "/v1/memories"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": 7, "text": ana}]})
        if route == ("DELETE", "/v1/memories/7"):
            deleted.append(request.url.path)
            body = {"id": 7, "object": "memory.deleted", "deleted": True, "restored": [3]}
            return httpx.Response(200, json=body)
        return uifixture.handler(request)

    async def main() -> None:
        client = Client("http://fixture", "token", transport=httpx.MockTransport(handler))
        app = ClawdApp(client, tmp_path)
        async with app.run_test(size=(100, 32)) as pilot:
            view = await ask(pilot, app, "Call me Ana.")
            notice = str(view.query_one(".remembered", Static).render())
            assert f"Remembered: {ana} (replaces: Address the user as Sam.)" in notice
            assert view.query_one(".memory", Collapsible).title == "memory: 1 used"
            assert ana in str(view.query_one(".memory-texts", Static).render())
            await pilot.press("ctrl+g")
            await until(pilot, lambda: deleted, 10, "the DELETE")
            await until(pilot, lambda: "Undone" in str(view.query_one(".remembered").render()))
            assert not view.pending_memories()
        await client.close()

    asyncio.run(main())
