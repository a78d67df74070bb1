"""The signals job: turns with a next state (or feedback) become signal sets and samples.

Runs in the daemon on an APScheduler interval. Each run picks turns that have a next state or
explicit feedback and no signal yet (or feedback newer than their signal), asks the configured
judge (``clawd.signals.scorer``: probe, written votes or an external endpoint) about the user's
request, the answer and the reply, applies the combination table, and writes the signal, every
vote's raw text and the sample in **one transaction**. A crash before the commit leaves
nothing; the unique index on ``signals.turn_id`` makes a second writer fail instead of adding a
second set. A failing judge call is recorded in ``signal_attempts`` and retried later with
exponential backoff; the turn is never dropped. Opted-out turns never yield signals or samples.

Run alone to process what is pending once, with the settings' judge::

    python -m clawd.signals.job
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any

from clawd.config import Settings
from clawd.signals.rules import Exchange, request_of
from clawd.signals.scorer import Scorer, Vote, decision, make_scorer
from clawd.signals.toolresult import tool_outcome
from clawd.store.db import Store

log = logging.getLogger("clawd.signals")
BACKOFF_BASE_S, BACKOFF_MAX_S = 30.0, 3600.0

PENDING_SQL = """
SELECT t.* FROM turns t
LEFT JOIN signals s ON s.turn_id = t.id
LEFT JOIN signal_attempts a ON a.turn_id = t.id
WHERE t.learn = 1
  AND (EXISTS (SELECT 1 FROM next_states n WHERE n.turn_id = t.id)
       OR EXISTS (SELECT 1 FROM feedback f WHERE f.turn_id = t.id))
  AND (s.id IS NULL
       OR (EXISTS (SELECT 1 FROM feedback f WHERE f.turn_id = t.id
                       AND f.created_at > s.created_at)
           AND NOT EXISTS (SELECT 1 FROM samples x WHERE x.turn_id = t.id
                           AND x.status = 'used')))
  AND (a.turn_id IS NULL OR a.next_try_at <= ?)
ORDER BY t.created_at
LIMIT ?
"""


@dataclass
class JobStatus:
    running: bool = False
    runs: int = 0
    processed: int = 0
    failed: int = 0
    last_run_at: float | None = None
    last_error: str | None = None


class SignalJob:
    def __init__(self, store: Store, scorer: Scorer, settings: Settings) -> None:
        self.store, self.scorer, self.settings = store, scorer, settings
        self.status = JobStatus()
        self._lock = threading.Lock()  # one run at a time

    def pending(self, limit: int = 50, store: Store | None = None) -> list[dict[str, Any]]:
        """Turns waiting for signals (``store``: a connection of the calling thread)."""
        return list((store or self.store).db.query(PENDING_SQL, [time.time(), limit]))

    def run_once(self, limit: int = 50, wait: bool = False) -> int:
        """Process up to ``limit`` pending turns; returns how many got a signal set.

        A run already in progress makes this one return 0 at once, or with ``wait`` (train
        now: judge what waits first) wait for it and then look again.
        """
        if not self._lock.acquire(blocking=wait):
            return 0
        try:
            self.status.running = True
            done = 0
            for turn in self.pending(limit):
                try:
                    done += self.process(turn)
                except Exception as exc:  # recorded and retried later, never fatal
                    self._failed(turn["id"], exc)
            self.status.processed += done
            return done
        finally:
            self.status.running = False
            self.status.runs += 1
            self.status.last_run_at = time.time()
            self._lock.release()

    def _failed(self, turn_id: str, exc: Exception) -> None:
        self.status.failed += 1
        self.status.last_error = f"{type(exc).__name__}: {exc}"
        row = self.store.db.execute(
            "SELECT attempts FROM signal_attempts WHERE turn_id = ?", [turn_id]
        ).fetchone()
        attempts = (row[0] if row else 0) + 1
        delay = min(BACKOFF_BASE_S * 2 ** (attempts - 1), BACKOFF_MAX_S)
        with self.store.db.conn:
            self.store.db.conn.execute(
                "INSERT INTO signal_attempts (turn_id, attempts, next_try_at, last_error) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(turn_id) DO UPDATE SET attempts = excluded."
                "attempts, next_try_at = excluded.next_try_at, last_error = excluded.last_error",
                (turn_id, attempts, time.time() + delay, self.status.last_error),
            )
        log.warning(
            "signals for %s failed (attempt %d, retry in %.0fs): %s",
            turn_id,
            attempts,
            delay,
            self.status.last_error,
        )

    def process(self, turn: dict[str, Any]) -> int:
        return process_turn(self.store, self.settings, turn, self.scorer)


def _replaceable(store: Store, turn_id: str) -> bool:
    """Whether feedback arrived after the turn's signal set was made (and it is untrained)."""
    return bool(
        store.db.execute(
            "SELECT 1 FROM signals s WHERE s.turn_id = ? "
            "AND EXISTS (SELECT 1 FROM feedback f WHERE f.turn_id = s.turn_id "
            "AND f.created_at > s.created_at) AND NOT EXISTS (SELECT 1 FROM samples x "
            "WHERE x.turn_id = s.turn_id AND x.status = 'used')",
            [turn_id],
        ).fetchone()
    )


def process_turn(
    store: Store, settings: Settings, turn: dict[str, Any], scorer: Scorer | None
) -> int:
    """One turn's signal set and sample, written at once; 1 if written, 0 if another was first.

    With feedback on the turn no judge is needed (``scorer`` may be None then).
    """
    db, s = store.db, settings
    ns = db.execute(
        "SELECT role, content FROM next_states WHERE turn_id = ?", [turn["id"]]
    ).fetchone()
    fb = db.execute(
        "SELECT rating, comment FROM feedback WHERE turn_id = ? "
        "ORDER BY created_at DESC, id DESC LIMIT 1",
        [turn["id"]],
    ).fetchone()
    role, content = ns if ns else (None, None)
    ex = Exchange(
        request=request_of(json.loads(turn["prompt_messages"] or "[]")),
        answer=turn["response_text"],
        reply=content or "",
        role=role or "user",
    )
    if ex.role == "tool" and fb is None:  # a tool's output: its own rules, never the judge
        votes: list[Vote] = [("tool", ex.reply[:4000], tool_outcome(ex.reply), None)]
    elif fb is None and scorer is None:
        raise ValueError(f"turn {turn['id']} has no feedback and no judge was given")
    else:
        votes = [] if fb or scorer is None else scorer.assess(ex, turn["id"])
    d = decision(s, ex, votes, feedback=(fb[0], fb[1]) if fb else None)
    now = time.time()
    try:
        with db.conn:  # all of the signal set, or none of it
            old = db.execute("SELECT id FROM signals WHERE turn_id = ?", [turn["id"]]).fetchone()
            if old and not _replaceable(store, turn["id"]):
                return 0  # another run got here first
            if old:  # newer feedback replaces a judged signal set
                db.conn.execute("DELETE FROM samples WHERE turn_id = ?", [turn["id"]])
                db.conn.execute("DELETE FROM signal_votes WHERE signal_id = ?", [old[0]])
                db.conn.execute("DELETE FROM signals WHERE id = ?", [old[0]])
            cur = db.conn.execute(
                "INSERT INTO signals (turn_id, score, hint, hint_source, judge_model, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    turn["id"],
                    d.score,
                    d.hint,
                    d.hint_source,
                    None if fb or scorer is None else scorer.name,
                    now,
                ),
            )
            signal_id = cur.lastrowid
            db.conn.executemany(
                "INSERT INTO signal_votes (signal_id, kind, raw_text, score, hint, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [(signal_id, k, raw, score, hint, now) for k, raw, score, hint in votes],
            )
            if d.kind:
                db.conn.execute(
                    "INSERT INTO samples (turn_id, signal_id, kind, prompt_token_ids, "
                    "response_token_ids, hint, reward, adapter_version, status, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        turn["id"],
                        signal_id,
                        d.kind,
                        turn["prompt_token_ids"] or "[]",
                        turn["response_token_ids"] or "[]",
                        d.hint,
                        float(d.score),
                        turn["adapter_version"],
                        "pending" if s.require_approval else "approved",
                        now,
                    ),
                )
            db.conn.execute("DELETE FROM signal_attempts WHERE turn_id = ?", [turn["id"]])
    except sqlite3.IntegrityError:
        log.info("turn %s already has a signal set; skipped", turn["id"])
        return 0
    store.event(
        "signal",
        f"turn {turn['id']}: score {d.score}, sample {d.kind}",
        turn_id=turn["id"],
        votes=[v[2] for v in votes],
        sample=d.kind,
    )
    return 1


def feedback_signal(store: Store, settings: Settings, turn_id: str) -> int:
    """The signal set and sample of a turn's newest feedback, at once (no judge needed).

    Used by ``POST /v1/feedback``, so that a thumbs-down trains the next run without waiting
    for the job. Opted-out turns get none; a sample that already trained stays.
    """
    turn = store.db["turns"].get(turn_id)
    if not turn["learn"]:
        return 0
    if store.db.execute("SELECT 1 FROM signals WHERE turn_id = ?", [turn_id]).fetchone():
        if not _replaceable(store, turn_id):
            return 0
    return process_turn(store, settings, turn, None)


def status_dict(job: SignalJob | None, store: Store, starting: bool = False) -> dict[str, Any]:
    """The signals job's state for /health. ``starting``: enabled, but its judge is still
    loading (the model already serves): the same keys, ``judge``, ``mode`` and ``pending``
    unknown (None)."""
    if job is None and not starting:
        return {"enabled": False}
    st = job.status if job else JobStatus()  # starting: nothing has run yet
    return {
        "enabled": True,
        "starting": job is None,
        "judge": job.scorer.model if job else None,
        "mode": job.scorer.mode if job else None,
        "running": st.running,
        "runs": st.runs,
        "processed": st.processed,
        "failed": st.failed,
        "pending": len(job.pending(1000, store)) if job else None,
        "last_run_at": st.last_run_at,
        "last_error": st.last_error,
    }


if __name__ == "__main__":
    from clawd.config import clawd_home, load_settings
    from clawd.models import resolve

    logging.basicConfig(level=logging.INFO)
    home = clawd_home()
    settings = load_settings(home)
    name = settings.judge_model or settings.model
    with Store.open(home) as store:
        scorer = make_scorer(settings, home, resolve(name, home), name)
        job = SignalJob(store, scorer, settings)
        print(json.dumps({"processed": job.run_once()}))
