"""The store: one SQLite database (``CLAWD_HOME/clawd.db``) through sqlite-utils.

It holds conversations, turns, next states, feedback, signals, samples, adapters, training runs
and events (``docs/schema.md``). It knows nothing of HTTP or the UI: callers hand it plain
values and get plain dicts back. WAL mode lets the daemon write while the trainer and the CLI
read.

One ``Store`` may be used from many threads (the daemon's request handlers run in worker
threads): each thread gets its own SQLite connection, opened on its first use of ``db``, so two
threads never share a transaction. SQLite's busy timeout (30 s) orders their writes.

Run alone to create or migrate the database and print its tables::

    python -m clawd.store.db
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import sqlite_utils

from clawd.config import clawd_home
from clawd.store.migrations import applied, migrate

RUN_SAMPLES = 256  # the most waiting samples one training run takes


class StoreError(Exception):
    """The database cannot be opened or a record is missing."""


def db_path(home: Path) -> Path:
    return home / "clawd.db"


class _Connection(sqlite3.Connection):
    """A connection that can be weakly referenced (the base class cannot)."""


# a sample's tokens are of the base model that answered its turn (unknown: an older turn)
_OF_BASE = " AND (t.model_sha256 IS NULL OR t.model_sha256 = '' OR t.model_sha256 = ?)"


class Store:
    """The clawd database, migrated to the current schema on open; one connection per thread."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._local = threading.local()
        # Every connection still open, so close() can close those of other threads too. A
        # thread that ends drops its connection with its thread-local, which closes it.
        self._open: weakref.WeakSet[_Connection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False
        try:
            migrate(self.db)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreError(f"cannot open the database {path}: {exc}") from exc

    @property
    def db(self) -> sqlite_utils.Database:
        """This thread's connection (opened on the thread's first use)."""
        db = getattr(self._local, "db", None)
        if db is None or self._closed:
            db = self._connect()
            self._local.db = db
        return db

    def _connect(self) -> sqlite_utils.Database:
        with self._lock:
            if self._closed:
                raise StoreError(f"the database {self.path} is closed")
            try:
                conn = sqlite3.connect(
                    str(self.path), timeout=30, check_same_thread=False, factory=_Connection
                )
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA foreign_keys=ON")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA secure_delete=ON")  # forgotten text is overwritten
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"cannot open the database {self.path}: {exc}") from exc
            self._open.add(conn)
        return sqlite_utils.Database(conn)

    @classmethod
    def open(cls, home: Path | None = None) -> Store:
        return cls(db_path(home or clawd_home()))

    def close(self) -> None:
        """Close every thread's connection; later use of ``db`` raises ``StoreError``."""
        with self._lock:
            self._closed = True
            conns = list(self._open)
        for conn in conns:
            conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def migrations(self) -> list[str]:
        return applied(self.db)

    def event(self, kind: str, message: str, **data: Any) -> int:
        """Record something that happened (a model pulled, a run failed, an adapter loaded)."""
        with self.db.conn:
            cur = self.db.conn.execute(
                "INSERT INTO events (ts, kind, message, data) VALUES (?, ?, ?, ?)",
                (time.time(), kind, message, json.dumps(data) if data else None),
            )
        return int(cur.lastrowid)

    def events(self, limit: int = 50, kind: str | None = None) -> list[dict[str, Any]]:
        """The newest events first."""
        where, args = ("kind = ?", [kind]) if kind else (None, [])
        rows = self.db["events"].rows_where(where, args, order_by="id desc", limit=limit)
        return [{**r, "data": json.loads(r["data"]) if r["data"] else {}} for r in rows]

    def waiting_samples(
        self, kinds: tuple[str, ...], base_sha256: str | None = None
    ) -> tuple[int, int]:
        """Approved samples of turns that may be learned from, and how many are of ``kinds``
        (with ``base_sha256``: only those answered by that base model, or by one unknown)."""
        marks = ", ".join("?" * len(kinds))
        approved, of_kinds = self.db.execute(
            f"SELECT COUNT(*), COALESCE(SUM(x.kind IN ({marks})), 0) FROM samples x "
            "JOIN turns t ON t.id = x.turn_id WHERE x.status = 'approved' AND t.learn = 1"
            + _OF_BASE
            * bool(base_sha256),
            [*kinds, *[base_sha256] * bool(base_sha256)],
        ).fetchone()
        return int(approved), int(of_kinds)

    def other_base_samples(self, base_sha256: str) -> int:
        """Approved samples answered by another base model: their token ids mean other words
        here, so they wait until that model serves again."""
        return int(
            self.db.execute(
                "SELECT COUNT(*) FROM samples x JOIN turns t ON t.id = x.turn_id "
                "WHERE x.status = 'approved' AND t.learn = 1 AND t.model_sha256 IS NOT NULL "
                "AND t.model_sha256 != '' AND t.model_sha256 != ?",
                [base_sha256],
            ).fetchone()[0]
        )

    def run_samples(
        self,
        kinds: tuple[str, ...],
        replay: int,
        limit: int = RUN_SAMPLES,
        base_sha256: str | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """What a training run takes now: the waiting samples of ``kinds`` (approved, oldest
        first, at most ``limit``) and its replay, the newest earlier trained ones (``used``), at
        most ``replay`` and at most as many as the new ones (what a lineage learned last is the
        likeliest to be overwritten by its next update). Rows carry the turn's prompt too.
        With ``base_sha256``, only samples answered by that base model (or by one unknown)."""
        base = [base_sha256] if base_sha256 else []

        def rows(where: str, order: str, n: int) -> list[dict[str, Any]]:
            return list(
                self.db.query(
                    "SELECT x.*, t.prompt_messages, t.params, t.model_sha256, t.memory_ids "
                    "FROM samples x "
                    f"JOIN turns t ON t.id = x.turn_id WHERE x.status = '{where}' AND t.learn = 1"
                    f" AND x.kind IN ({', '.join('?' * len(kinds))})"
                    + _OF_BASE * bool(base)
                    + f" ORDER BY x.id {order} LIMIT ?",
                    [*kinds, *base, n],
                )
            )

        new = rows("approved", "ASC", limit)
        n_replay = min(replay, len(new))
        return new, rows("used", "DESC", n_replay) if n_replay > 0 else []

    def counts(self) -> dict[str, int]:
        """Row counts of the main tables (for `clawd status`-like summaries)."""
        return {
            name: self.db[name].count for name in self.db.table_names() if not name.startswith("_")
        }


if __name__ == "__main__":
    with Store.open() as store:
        print(store.path)
        print("migrations:", ", ".join(store.migrations))
        for table, count in store.counts().items():
            print(f"  {table}: {count}")
