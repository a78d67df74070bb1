"""The adapters view against a real daemon holding a really trained adapter, and the why view."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable, Sparkline, Static

from clawd.ui.adapters import AdaptersPane
from clawd.ui.app import ClawdApp
from clawd.ui.dialogs import ConfirmScreen
from clawd.ui.why import WhyScreen, extremes, scale_of, summary, token_style, why_text
from fixtures.daemon import RunningDaemon
from tests import uifixture
from tests.uikit import drive, until


def test_gate_curves_why_activate_and_roll_back(
    lived_in_daemon: tuple[RunningDaemon, str], tmp_path: Path
) -> None:
    daemon, version = lived_in_daemon
    with daemon.client() as c:
        report = c.get(f"/v1/adapters/{version}/report").json()
        assert c.get("/v1/adapters/nope/report").status_code == 404

    async def confirm(pilot: Pilot, app: ClawdApp, key: str) -> None:
        await pilot.press(key)
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")

    def active() -> str | None:
        with daemon.client() as c:
            return c.get("/v1/adapters").json()["active"]

    async def scenario(pilot: Pilot, app: ClawdApp) -> None:
        await pilot.press("f3")
        pane = app.query_one(AdaptersPane)
        table = pane.query_one("#adapters", DataTable)
        await until(pilot, lambda: version in [k.value for k in table.rows])
        table.move_cursor(row=[k.value for k in table.rows].index(version))
        await until(pilot, lambda: pane.report and pane.report["version"] == version)
        gate = str(pane.query_one("#gate", Static).render())
        assert version in gate and "gate" in gate and "KL to base" in gate
        assert "your prompts: degenerate" in gate and "own prompts ability" in gate
        loss = pane.query_one("#curve-loss", Sparkline).data
        assert list(loss) == [s["loss"] for s in report["steps"]] and len(loss) >= 2
        samples = pane.query_one("#samples", DataTable)
        assert samples.row_count == len(report["samples"])
        hinted = next(i for i, s in enumerate(report["samples"]) if s["opd_advantage"])
        samples.move_cursor(row=hinted)
        samples.focus()
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, WhyScreen))
        shown = app.screen.query_one("#why-tokens", Static).render()
        sample = report["samples"][hinted]
        assert str(shown).replace("↵", "") == "".join(sample["tokens"])
        assert sample["hint"] in str(app.screen.query_one("#why-summary", Static).render())
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, WhyScreen))

        table.focus()
        await confirm(pilot, app, "a")
        await until(pilot, lambda: active() == version, what="activation")
        await until(pilot, lambda: version in app.sub_title, what="the header to follow")
        await confirm(pilot, app, "b")
        await until(pilot, lambda: active() is None, what="the rollback")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")  # declined: nothing changes
        await pilot.pause(0.5)
        assert active() is None

    drive(daemon, tmp_path, scenario)


def test_why_colours_follow_the_sign_and_size_of_the_advantage() -> None:
    sample = uifixture.REPORT["samples"][0]
    text = why_text(sample)
    assert text.plain == "".join(sample["tokens"]).replace("\n", "↵\n")
    scale = scale_of(sample["opd_advantage"])
    down, up = token_style(-scale, scale).bgcolor, token_style(scale, scale).bgcolor
    red, green = down.get_truecolor(), up.get_truecolor()
    assert red.red > red.green and green.green > green.red
    faint = token_style(-scale / 10, scale).bgcolor.get_truecolor()
    assert faint.red < red.red  # a small push is a paler colour
    most_down, most_up = extremes(sample)
    assert most_down[0] == ("-", -2.4) and most_up[0] == (".", 0.9)
    plain = why_text(uifixture.REPORT["samples"][1])  # reward only: one colour
    assert len({span.style for span in plain.spans}) == 1
    # the tokens decoding forced for a memory are underlined, and said in the summary
    named = {**sample, "forced": [0]}
    spans = why_text(named).spans
    assert spans[0].style.underline and not any(s.style.underline for s in spans[1:])
    assert repr(sample["tokens"][0].strip()) in summary(named, "v1").plain


def test_the_gate_view_says_when_an_earlier_point_of_the_update_serves() -> None:
    from clawd.ui.adapters import gate_text

    summary = "the whole update (6 steps) failed general_ability; serving its first 3 steps"
    row = {
        "version": "v1",
        "status": "active",
        "gate": {"passed": True, "checks": {}, "walked_back": {"summary": summary}},
    }
    assert f"walked back: {summary}" in str(gate_text(row))
