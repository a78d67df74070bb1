"""``clawd train``: recent training runs, or with ``--now`` one run here with a progress bar.

It reads the store directly, so it works without a daemon (and beside one: one training lock
across processes decides who trains).

Run alone::

    python -m clawd train --help
"""

from __future__ import annotations

import contextlib
import os

import typer
from rich.table import Table

from clawd.cli.signals import judge_waiting
from clawd.cli.util import err, fail, open_store, out
from clawd.config import ConfigError, clawd_home, load_settings
from clawd.models import ModelError
from clawd.signals.rules import LEARNABLE_KINDS


def train_cmd(
    now: bool = typer.Option(False, "--now", help="Train on the approved samples right now."),
) -> None:
    """Show recent training runs, or with --now run one here with a progress bar."""
    import json

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from clawd.threads import openmp_env

    os.environ.update(openmp_env(os.environ))  # before torch loads: how its threads wait
    from clawd.training import train
    from clawd.training.report import step_line

    home = clawd_home()
    try:
        settings = load_settings(home)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if not now:
        with open_store() as store:
            runs = list(store.db["training_runs"].rows_where(order_by="id desc", limit=10))
            waiting, learnable = store.waiting_samples(LEARNABLE_KINDS[settings.train_method])
        table = Table("run", "status", "samples", "adapter", "reason", box=None)
        for r in runs:
            table.add_row(
                str(r["id"]),
                r["status"],
                str(r["n_samples"]),
                r["adapter_version"] or "-",
                (r["reason"] or "")[:60],
            )
        out.print(table if runs else "no training runs yet")
        usable = (
            f" ({learnable} usable by train_method {settings.train_method})"
            if learnable < waiting
            else ""
        )
        out.print(
            f"{waiting} approved samples wait{usable}; nightly run at {settings.train_at} "
            "while `clawd serve` runs; `clawd train --now` trains immediately"
        )
        return
    with contextlib.suppress(OSError):  # as the daemon's trainer: foreground work comes first
        os.nice(settings.train_niceness)
    judge_waiting(home)
    columns = (
        TextColumn("[bold]training"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
    )
    with Progress(*columns, console=err, transient=False) as bar:
        task = bar.add_task("train", total=None, info="loading the model")

        def progress(step: int, total: int, m: dict) -> None:
            bar.update(task, completed=step, total=total, info=step_line(m))

        try:
            summary = train.run(home, settings, progress=progress, trigger="cli")
        except train.NothingToTrain as exc:
            out.print(f"{exc} (see `clawd signals list`)")
            return
        except (train.TrainingError, ModelError, ConfigError) as exc:
            raise fail(f"training failed: {exc}") from None
    out.print(json.dumps(summary, indent=2), highlight=False)
    out.print(f"candidate adapter {summary['version']} written to {summary['path']}")
