"""Background jobs of the daemon (APScheduler): signals, and when to train.

- ``signals``: every ``signals_interval_s`` seconds, turn replies into signal sets and samples
  (``clawd.signals.job``), on a judge that yields to the user.
- ``nightly``: at ``train_at`` local time, start a training run.
- ``promote``: every 5 s, hot-load the newest candidate that passed the gate (``auto_activate``).
- ``idle``: every minute, start a run early when at least ``train_min_samples`` approved samples
  wait and nobody has sent a request for ``train_idle_minutes``.

Training runs as a separate process (``python -m clawd.training.train``) at low priority: the
daemon keeps serving, and survives the trainer crashing. Its output goes to ``CLAWD_HOME/logs/``.
A trainer that cannot start is a 503 for ``POST /v1/train``; for the nightly and idle jobs it is
a ``train`` event naming why (once per reason), and they try again at their next time.

Not meant to run alone: ``clawd serve`` starts it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from clawd import trainlock
from clawd.config import Settings
from clawd.serving.engine import Engine
from clawd.signals.job import SignalJob
from clawd.signals.rules import LEARNABLE_KINDS
from clawd.signals.scorer import make_scorer
from clawd.signals.waiting import why_no_run
from clawd.store.db import Store
from clawd.threads import openmp_env

log = logging.getLogger("clawd.jobs")


class TrainerNotStarted(RuntimeError):
    """The trainer's process could not be started (its log folder or Python is missing...)."""


IDLE_BACKOFF_MAX_S = 6 * 3600.0


class Jobs:
    """The daemon's scheduled jobs and the one trainer process it may run at a time."""

    def __init__(
        self,
        home: Path,
        settings: Settings,
        engine: Engine,
        model: str,
        model_path: Path,
        judge_path: Path,
        model_sha256: str,
    ) -> None:
        self.home, self.settings, self.engine = home, settings, engine
        self.model, self.model_path, self.judge_path = model, model_path, judge_path
        self.model_sha256 = model_sha256
        self.signal_job: SignalJob | None = None
        self.scheduler = BackgroundScheduler(daemon=True)
        self.trainer: subprocess.Popen | None = None
        self._store: Store | None = None
        self._start_error: str | None = None  # the last reason a scheduled start failed

    def start(self) -> None:
        s = self.settings
        if s.signals_interval_s > 0:
            scorer = make_scorer(
                s,
                self.home,
                self.judge_path,
                s.judge_model or self.model,
                yield_to=self.engine.idle,
            )
            self.signal_job = SignalJob(Store.open(self.home), scorer, s)
            self.scheduler.add_job(
                self.signal_job.run_once,
                "interval",
                id="signals",
                seconds=s.signals_interval_s,
                max_instances=1,
                coalesce=True,
                next_run_time=datetime.now(),
            )
        hour, minute = (int(x) for x in s.train_at.split(":"))
        self.scheduler.add_job(
            self._scheduled,
            "cron",
            id="nightly",
            hour=hour,
            minute=minute,
            args=["nightly"],
            max_instances=1,
            coalesce=True,
        )
        self.scheduler.add_job(
            self._train_if_idle, "interval", id="idle", minutes=1, max_instances=1, coalesce=True
        )
        if s.auto_activate:
            self.scheduler.add_job(
                self._promote, "interval", id="promote", seconds=5, max_instances=1, coalesce=True
            )
        self.scheduler.start()

    def stop(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        if self.signal_job is not None:
            self.signal_job.scorer.close()
            self.signal_job.store.close()
        if self._store is not None:
            self._store.close()

    @property
    def training(self) -> bool:
        return self.trainer is not None and self.trainer.poll() is None

    def start_training(self, trigger: str) -> int | None:
        """Start a training run in its own process; returns its pid (None if one runs).
        Raises TrainerNotStarted, with the reason, if the process cannot be started. A run of
        another process (``clawd train --now``, an earlier daemon's trainer) counts as one."""
        if self.training or trainlock.holder(self.home):
            return None
        logs = self.home / "logs"
        env = {
            **os.environ,
            **openmp_env(os.environ),
            "CLAWD_HOME": str(self.home),
            "CLAWD_MODEL": str(self.model_path),
        }
        try:
            logs.mkdir(parents=True, exist_ok=True)
            with open(logs / f"train-{time.strftime('%Y%m%d-%H%M%S')}.log", "wb") as out:
                self.trainer = subprocess.Popen(
                    [sys.executable, "-m", "clawd.training.train", trigger],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )  # the trainer lowers its own priority (os.nice): no preexec_fn here (threads)
        except OSError as exc:
            why = f"could not start the trainer ({trigger}): {exc}"
            log.error(why)
            raise TrainerNotStarted(why) from None
        log.info("training started (%s), pid %d", trigger, self.trainer.pid)
        return self.trainer.pid

    def _train_if_idle(self) -> None:
        s = self.settings
        if self.training or time.time() - self.engine.last_request_at < s.train_idle_minutes * 60:
            return
        if self._store is None:
            self._store = Store.open(self.home)
        if self._backing_off(self._store):
            return
        kinds = LEARNABLE_KINDS[s.train_method]
        _, learnable = self._store.waiting_samples(kinds, self.model_sha256)
        if learnable >= s.train_min_samples and not why_no_run(
            self._store, s.train_method, s.train_replay, self.model_sha256, s.memory
        ):  # a run the trainer would refuse is not started every minute
            self._scheduled("idle")

    @staticmethod
    def _backing_off(store: Store, now: float | None = None) -> bool:
        """Whether the idle trigger waits after failed runs: 2, 4, 8... minutes after the
        last of k failed runs in a row (at most 6 hours), so a run that cannot succeed is not
        started every minute. The nightly run and "train now" never wait."""
        failed, last = 0, 0.0
        for run in store.db["training_runs"].rows_where(order_by="id desc", limit=12):
            if run["status"] != "failed":
                break
            failed += 1
            last = max(last, run["finished_at"] or run["started_at"] or 0.0)
        if not failed:
            return False
        wait = min(60.0 * 2**failed, IDLE_BACKOFF_MAX_S)
        return (now or time.time()) - last < wait

    def _scheduled(self, trigger: str) -> None:
        """A scheduled start: a trainer that cannot start becomes a ``train`` event (once per
        reason, not every minute) instead of a job that raises."""
        try:
            self.start_training(trigger)
            self._start_error = None
        except TrainerNotStarted as exc:
            why = str(exc)
            if why != self._start_error:
                self._start_error = why
                with Store.open(self.home) as store:
                    store.event("train", why)

    def _promote(self) -> None:
        from clawd.serving.promote import promote_candidates

        if self.training:
            return
        with Store.open(self.home) as store:
            version = promote_candidates(self.engine, store, self.model_sha256)
        if version:
            log.info("promoted adapter %s: it passed the gate and now serves", version)

    def next_runs(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for job in self.scheduler.get_jobs():
            when = getattr(job, "next_run_time", None)
            out[job.id] = when.isoformat() if when else None
        return out


def training_status(store: Store, jobs: Jobs | None, method: str) -> dict[str, Any]:
    approved, learnable = store.waiting_samples(LEARNABLE_KINDS[method])
    runs = list(store.db["training_runs"].rows_where(order_by="id desc", limit=20))
    latest = runs[0]["id"] if runs else None
    steps = (
        [
            {"step": r["step"], **json.loads(r["metrics"])}
            for r in store.db["training_steps"].rows_where("run_id = ?", [latest], order_by="step")
        ]
        if latest
        else []
    )
    return {
        "running": bool(jobs and jobs.training),
        "runs": runs,
        "latest_steps": steps,
        "approved_samples": approved,
        "learnable_samples": learnable,
        "train_method": method,
        "next_runs": jobs.next_runs() if jobs else {},
    }
