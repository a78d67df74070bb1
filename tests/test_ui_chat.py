"""The chat view driven by the pilot against the real daemon on the SmolLM2 fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Collapsible, Static

from clawd.ui.app import ClawdApp
from clawd.ui.client import Client
from clawd.ui.dialogs import ConfirmScreen, PromptScreen
from clawd.ui.messages import Composer, MessageView
from fixtures.daemon import RunningDaemon, free_port, start_daemon
from tests.uikit import drive, until


@pytest.fixture(scope="module")
def daemon(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory):
    d = start_daemon(smollm2_gguf, tmp_path_factory.mktemp("ui-chat-home"))
    yield d
    d.stop()


def answers(app: ClawdApp) -> list[MessageView]:
    return [v for v in app.query(MessageView) if v.role == "assistant"]


async def ask(pilot: Pilot, app: ClawdApp, text: str) -> MessageView:
    before = len(answers(app))
    await pilot.press(*text, "enter")
    view = await until(pilot, lambda: len(answers(app)) > before and answers(app)[-1])
    await until(pilot, lambda: view.state == "done" and not app.chat.busy, 120, "the answer")
    return view


def test_send_stream_rate_and_find_the_feedback_through_rest(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    seen: list[tuple[str, int]] = []

    async def scenario(pilot: Pilot, app: ClawdApp) -> None:
        await pilot.press(*"What is the capital of France?", "enter")
        view = await until(pilot, lambda: answers(app) and answers(app)[-1])
        while view.state != "done":  # watch the answer grow while it streams
            seen.append((view.state, len(view.text)))
            await pilot.pause(0.02)
        assert view.text and view.response_id and app.chat.conversation_id
        assert "base model" in view.label_text()
        view.focus()
        await pilot.press("plus")
        await until(pilot, lambda: view.rating == 1)
        await pilot.press("minus")
        await until(pilot, lambda: view.rating == -1)
        await pilot.press("c")
        await until(pilot, lambda: app.screen.__class__.__name__ == "CommentScreen")
        await pilot.press(*"Shorter please.", "enter")
        await until(pilot, lambda: not app.chat.workers)
        items = app.chat.query_one("#conversations").children
        assert [i.name for i in items] == [app.chat.conversation_id]
        with daemon.client() as c:
            conv = c.get(f"/v1/conversations/{app.chat.conversation_id}").json()
        (turn,) = conv["turns"]
        assert turn["id"] == view.response_id and turn["response"] == view.text
        assert [(f["rating"], f["comment"]) for f in turn["feedback"]] == [
            (1, None),
            (-1, None),
            (-1, "Shorter please."),
        ]

    drive(daemon, tmp_path, scenario)
    lengths = [n for state, n in seen if state == "streaming"]
    assert len(set(lengths)) > 1, "the answer should appear piece by piece"


def test_regenerate_new_chat_and_reopen_from_the_sidebar(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    async def scenario(pilot: Pilot, app: ClawdApp) -> None:
        first = await ask(pilot, app, "Name a colour.")
        cid = app.chat.conversation_id
        await pilot.press("ctrl+r")
        await until(pilot, lambda: answers(app) and answers(app)[-1] is not first)
        again = answers(app)[-1]
        await until(pilot, lambda: again.state == "done" and not app.chat.busy, 120)
        assert len(answers(app)) == 1 and again.response_id != first.response_id
        assert app.chat.conversation_id == cid
        await pilot.press("ctrl+n")
        assert app.chat.conversation_id is None and not app.query(MessageView)
        await app.chat.refresh_list()
        listing = app.chat.query_one("#conversations")
        index = next(i for i, item in enumerate(listing.children) if item.name == cid)
        listing.focus()
        listing.index = index
        await pilot.press("enter")
        await until(pilot, lambda: app.chat.conversation_id == cid)
        await until(pilot, lambda: len(answers(app)) == 2)  # both answers were stored
        assert [v.response_id for v in answers(app)] == [first.response_id, again.response_id]
        assert app.chat.history[-1] == {"role": "assistant", "content": again.text}

    drive(daemon, tmp_path, scenario)


def test_esc_stops_the_answer_and_gives_the_message_back(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    async def scenario(pilot: Pilot, app: ClawdApp) -> None:
        await pilot.press(*"Tell me a very long story about a dragon.", "enter")
        await until(pilot, lambda: answers(app) and answers(app)[-1].state == "streaming")
        await pilot.press("escape")
        await until(pilot, lambda: not app.chat.busy and not app.query(MessageView))
        assert app.query_one(Composer).text == "Tell me a very long story about a dragon."
        assert app.chat.history == [] and app.chat.conversation_id is None

    drive(daemon, tmp_path, scenario)


def test_learn_switch_rename_export_and_delete(daemon: RunningDaemon, tmp_path: Path) -> None:
    async def scenario(pilot: Pilot, app: ClawdApp) -> None:
        await ask(pilot, app, "Say hello.")
        cid = app.chat.conversation_id
        await pilot.press("ctrl+l")
        await until(pilot, lambda: not app.chat.learn)
        with daemon.client() as c:
            await until(pilot, lambda: not c.get(f"/v1/conversations/{cid}").json()["learn"])
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen))
        app.screen.query_one("#answer").value = ""
        await pilot.press(*"Greetings", "enter")
        await until(pilot, lambda: app.chat.title_text == "Greetings")
        await pilot.press("ctrl+s")
        path = await until(pilot, lambda: next(tmp_path.glob("clawd-Greetings-*.md"), None))
        text = path.read_text()
        assert text.startswith("# Greetings\n") and "Say hello." in text
        await pilot.press("f8")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: app.chat.conversation_id is None)
        with daemon.client() as c:
            assert c.get(f"/v1/conversations/{cid}").status_code == 404

    drive(daemon, tmp_path, scenario)


def test_the_palette_runs_actions(daemon: RunningDaemon, tmp_path: Path) -> None:
    async def scenario(pilot: Pilot, app: ClawdApp) -> None:
        await pilot.press("ctrl+p")
        await pilot.press(*"Learning view")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await until(pilot, lambda: app.query_one("#views").active == "learning")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for action in ("New chat", "Thumbs down", "Veto signal", "Roll back adapter", "Why"):
            assert any(t.startswith(action) for t in titles), action

    drive(daemon, tmp_path, scenario)


def test_a_daemon_that_is_down_or_refuses_the_token_is_a_notification(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    async def run(client: Client) -> list[str]:
        app = ClawdApp(client, tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await pilot.press(*"hello", "enter")
            await until(pilot, lambda: not app.chat.busy)
            await pilot.pause()
            messages = [n.message for n in app._notifications]
            assert app.is_running  # no traceback, still usable
        await client.close()
        return messages

    import asyncio

    down = asyncio.run(run(Client(f"http://127.0.0.1:{free_port()}", "x")))
    assert any("cannot reach the daemon" in m and "clawd serve" in m for m in down)
    refused = asyncio.run(run(Client(daemon.url, "wrong-token")))
    assert any("refused the token" in m and "clawd token" in m for m in refused)
    assert daemon.health()["status"] == "ok"


def test_an_editor_s_tool_call_shows_folded_with_its_result(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """A conversation an editor agent had (a call, then the tool's answer) opens with the call
    folded like thinking: its title names the function, its body the arguments and result."""
    from clawd.ui.chat import tool_result

    tool = {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}},
        },
    }
    ask_ = [{"role": "user", "content": "What time is it in Tokyo?"}]
    with daemon.client() as c:
        r = c.post(
            "/v1/chat/completions",
            json={
                "messages": ask_,
                "tools": [tool],
                "tool_choice": "required",
                "max_tokens": 80,
                "seed": 1,
            },
        ).json()
        message = r["choices"][0]["message"]
        call = message["tool_calls"][0]
        follow = [*ask_, message, {"role": "tool", "tool_call_id": call["id"], "content": "09:41"}]
        c.post("/v1/chat/completions", json={"messages": follow, "max_tokens": 4})
        cid = r["clawd"]["conversation_id"]
        stored = c.get(f"/v1/conversations/{cid}").json()["turns"][0]
    assert tool_result(stored) == "09:41"

    async def scenario(pilot: Pilot, app: ClawdApp) -> None:
        await app.chat.open(cid)
        view = await until(pilot, lambda: answers(app) and answers(app)[0])
        folded = view.query_one(".tools", Collapsible)
        assert folded.display and folded.collapsed and folded.title == "called get_time"
        body = str(view.query_one(".tool-calls", Static).content)
        assert body.startswith("get_time(") and body.endswith("result: 09:41")

    drive(daemon, tmp_path, scenario)
