"""Message pieces: Markdown export, and the composer's Enter / Ctrl+J / Shift+Enter."""

from __future__ import annotations

import asyncio
from pathlib import Path

from clawd.signals.shaping import shape_of
from clawd.ui.app import ClawdApp
from clawd.ui.client import Client
from clawd.ui.messages import Composer, MessageView, shaped_text, to_markdown
from tests import uifixture


def test_markdown_export_keeps_turns_labels_thinking_and_feedback() -> None:
    md = to_markdown(uifixture.CONVERSATION)
    assert md.startswith("# Name three fruits.\n")
    assert "## You\n\nName three fruits." in md
    assert f"## clawd (adapter {uifixture.VERSION})" in md
    assert "> The user wants three fruits." in md and "- apple" in md
    assert "*Feedback: bad - No lists please.*" in md


def test_enter_sends_and_ctrl_j_or_shift_enter_adds_a_line(tmp_path: Path) -> None:
    async def main() -> None:
        app = ClawdApp(Client("http://f", "t", transport=uifixture.transport()), tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("a", "ctrl+j", "b", "shift+enter", "c")
            assert app.query_one(Composer).text == "a\nb\nc" and not app.query(MessageView)
            await pilot.press("enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            user, answer = app.query(MessageView)
            assert user.text == "a\nb\nc" and answer.text.strip() == "Apple, pear and plum."
            assert answer.adapter == uifixture.VERSION and app.chat.conversation_id == "conv-new"
            assert app.query_one(Composer).text == ""

    asyncio.run(main())


def test_the_shape_line_says_what_decoding_kept() -> None:
    memories = ["Start with 'Short answer:'.", "Four sentences max.", "Sign off with 'Fair winds.'"]
    line = shaped_text(shape_of(memories, first_answer=False).describe())
    assert line == 'opened with "Short answer:", at most 4 sentences, signed off "Fair winds."'
    summary = shaped_text(shape_of(["End with a one-line TL;DR."], True).describe())
    assert summary == 'a closing "TL;DR:" line'
