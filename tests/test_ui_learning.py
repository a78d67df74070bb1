"""The learning view against a real daemon: signals from replies, review, training progress."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, ProgressBar, Static

from clawd.ui.app import ClawdApp
from clawd.ui.learning import LearningPane, when
from fixtures.daemon import RunningDaemon
from tests.test_signals_daemon import converse, signal_of, wait_for
from tests.uikit import drive, until


@pytest.mark.slow
def test_review_a_signal_then_train_with_a_live_progress_bar(
    lived_in_daemon: tuple[RunningDaemon, str], tmp_path: Path
) -> None:
    daemon, _ = lived_in_daemon
    with daemon.client() as c:
        turn = converse(c, "List three fruits.", "ok")
        c.post("/v1/feedback", json={"id": turn, "rating": -1, "comment": "No lists, one line."})
        sid = wait_for(lambda: signal_of(c, turn))["id"]

    async def scenario(pilot: Pilot, app: ClawdApp) -> None:
        await pilot.press("f2")
        pane = app.query_one(LearningPane)
        table = pane.query_one("#signals", DataTable)
        await until(pilot, lambda: str(sid) in [k.value for k in table.rows])
        row = [k.value for k in table.rows].index(str(sid))
        table.move_cursor(row=row)
        detail = pane.query_one("#signal-text", Static)
        await until(pilot, lambda: "No lists, one line." in str(detail.render()))
        await pilot.press("v")
        with daemon.client() as c:
            vetoed = lambda: c.get(f"/v1/signals/{sid}").json()["sample"]["status"] == "vetoed"  # noqa: E731
            await until(pilot, vetoed)
        await pilot.press("a")
        with daemon.client() as c:
            approved = lambda: c.get(f"/v1/signals/{sid}").json()["sample"]["status"] == "approved"  # noqa: E731
            await until(pilot, approved)
        assert "approved samples waiting" in str(pane.query_one("#schedule", Static).render())
        await pilot.press("t")
        bar = pane.query_one("#train-progress", ProgressBar)
        await until(pilot, lambda: bar.display, 60, "the progress bar")
        await until(pilot, lambda: bar.total and bar.progress >= 1, 300, "a training step")
        await until(pilot, lambda: not pane.training.get("running"), 300, "the run to end")
        await pilot.pause(2.5)  # one more poll draws the finished run
        assert not bar.display
        assert "last run" in str(pane.query_one("#schedule", Static).render())
        with daemon.client() as c:
            runs = c.get("/v1/train").json()["runs"]
        assert runs[0]["status"] == "succeeded", runs[0]

    drive(daemon, tmp_path, scenario)


def test_times_read_as_today_or_a_date() -> None:
    assert when(None) == "-"
    assert when("2030-03-18T03:30:00+00:00").endswith(":30")
