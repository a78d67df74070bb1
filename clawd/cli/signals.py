"""``clawd signals``: review what clawd learned from your replies (list, show, approve, veto,
score the waiting replies with the judge). ``clawd train`` is ``clawd.cli.train``.

They read the store directly, so they work without a daemon.

Run alone::

    python -m clawd signals --help
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from clawd.cli.util import err, fail, open_store, out
from clawd.config import ConfigError, clawd_home, load_settings
from clawd.models import ModelError
from clawd.signals.judge import JudgeError

if TYPE_CHECKING:
    from clawd.signals.scorer import Scorer

signals_app = typer.Typer(
    help="Review what clawd learned from your replies before it trains.", no_args_is_help=True
)


@signals_app.command("list")
def signals_list(
    status: str = typer.Option(
        None,
        "--status",
        help="Only samples in this state: pending, approved, vetoed, used, dropped.",
    ),
    limit: int = typer.Option(30, "--limit", help="How many, newest first."),
) -> None:
    """List learning signals: the judge's score, the hint, and the training sample's state."""
    from clawd.signals.review import list_signals

    if status not in (None, "pending", "approved", "vetoed", "used", "dropped"):
        raise fail("--status must be pending, approved, vetoed, used or dropped")
    with open_store() as store:
        rows = list_signals(store, status, limit)
    table = Table("id", "score", "sample", "state", "hint / next message", box=None)
    for r in rows:
        text = r["hint"] or f"({r['next_role'] or 'feedback'}) {r['next_state'] or ''}"
        table.add_row(
            str(r["id"]),
            f"{r['score']:+d}",
            r["sample_kind"] or "-",
            r["sample_status"] or "-",
            text.replace("\n", " ")[:70],
        )
    out.print(table)
    if not rows:
        out.print("no signals yet: they appear after you reply to an answer")


@signals_app.command("show")
def signals_show(signal_id: int = typer.Argument(..., help="The signal id (see `list`).")) -> None:
    """Show one signal: the answer, what came next, every vote's raw text, and the sample."""
    from clawd.signals.review import show_signal
    from clawd.store.record import NotFound

    with open_store() as store:
        try:
            s = show_signal(store, signal_id)
        except NotFound as exc:
            raise fail(str(exc)) from None
    out.print(f"[bold]signal {s['id']}[/] turn {s['turn_id']}  score {s['score']:+d}")
    out.print(f"[bold]answer:[/] {s['response']}", highlight=False)
    out.print(f"[bold]next ({s['next_role']}):[/] {s['next_state']}", highlight=False)
    out.print(f"[bold]hint[/] ({s['hint_source'] or 'none'}): {s['hint'] or '-'}", highlight=False)
    if s["judge_model"]:
        out.print(f"[bold]judged by[/] {s['judge_model']}", highlight=False)
    for i, v in enumerate(s["votes"]):
        out.print(
            f"[bold]vote {i} ({v['kind']}) -> {v['score']}[/]\n{v['raw_text']}", highlight=False
        )
    sample = s["sample"]
    if sample:
        out.print(
            f"[bold]sample:[/] {sample['kind']}, reward {sample['reward']:+.0f}, "
            f"{len(sample['response_token_ids'])} response tokens, {sample['status']}"
        )
    else:
        out.print("[bold]sample:[/] none (no hint and a neutral score)")


def _set_status(signal_id: int, status: str) -> None:
    from clawd.signals.review import ReviewError, set_status
    from clawd.store.record import NotFound

    with open_store() as store:
        try:
            set_status(store, signal_id, status)
        except (NotFound, ReviewError) as exc:
            raise fail(str(exc)) from None
    out.print(f"signal {signal_id}: sample {status}")


@signals_app.command("approve")
def signals_approve(signal_id: int = typer.Argument(..., help="The signal id.")) -> None:
    """Let this signal's sample be used by the next training run."""
    _set_status(signal_id, "approved")


@signals_app.command("veto")
def signals_veto(signal_id: int = typer.Argument(..., help="The signal id.")) -> None:
    """Never train on this signal's sample."""
    _set_status(signal_id, "vetoed")


def _scorer(home: Path) -> Scorer:
    from clawd.models import resolve
    from clawd.signals.scorer import make_scorer

    settings = load_settings(home)
    name = settings.judge_model or settings.model
    return make_scorer(settings, home, resolve(name, home), name)


def judge_waiting(home: Path) -> None:
    """Judge the replies still waiting for signals, so that train --now trains on them."""
    from clawd.signals.job import SignalJob

    try:
        settings = load_settings(home)
        with open_store() as store:
            job = SignalJob(store, _scorer(home), settings)
            waiting = len(job.pending(1000))
            if not waiting:
                return
            err.print(f"judging {waiting} replies that wait for signals ({job.scorer.mode})")
            try:
                done = job.run_once(1000, wait=True)
            finally:
                job.scorer.close()
    except (ModelError, ConfigError) as exc:
        raise fail(f"cannot judge the waiting replies: {exc}") from None
    failed = f"; {job.status.failed} failed ({job.status.last_error})" if job.status.failed else ""
    err.print(f"{done} judged{failed}")


@signals_app.command("score")
def signals_score(
    file: Path = typer.Argument(
        ...,
        help="A JSONL file of exchanges: request, answer, reply, optional role (user/tool).",
        exists=True,
        dir_okay=False,
    ),
) -> None:
    """Judge each exchange of FILE with the configured judge; one JSON line each, in order.

    Each line: score (-1, 0, 1), votes (every vote's score and raw text), hint, mode.
    """
    import json

    from clawd.signals.rules import Exchange
    from clawd.signals.scorer import decision

    rows = []
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
            for key in ("request", "answer", "reply"):
                if not isinstance(row.get(key), str):
                    raise ValueError(f"'{key}' must be a string")
            if row.get("role", "user") not in ("user", "tool"):
                raise ValueError("'role' must be user or tool")
        except ValueError as exc:
            raise fail(f"{file}:{n}: {exc}") from None
        rows.append(
            Exchange(row["request"], row["answer"], row["reply"], row.get("role") or "user")
        )
    home = clawd_home()
    try:
        settings = load_settings(home)
        scorer = _scorer(home)
    except (ModelError, ConfigError) as exc:
        raise fail(str(exc)) from None
    try:
        for i, ex in enumerate(rows):
            votes = scorer.assess(ex, f"{file.name}/{i}")
            d = decision(settings, ex, votes)
            line = {
                "score": d.score,
                "votes": [{"kind": k, "score": v, "raw": raw} for k, raw, v, _ in votes],
                "hint": d.hint,
                "mode": scorer.mode,
            }
            print(json.dumps(line, ensure_ascii=False), flush=True)
    except JudgeError as exc:
        raise fail(f"the judge failed: {exc}") from None
    finally:
        scorer.close()
