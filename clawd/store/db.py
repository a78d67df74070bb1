"""The store: one SQLite database (``CLAWD_HOME/clawd.db``) through sqlite-utils.

It holds conversations, turns, next states, feedback, signals, samples, adapters, training runs
and events (``docs/schema.md``). It knows nothing of HTTP or the UI: callers hand it plain
values and get plain dicts back. WAL mode lets the daemon write while the trainer and the CLI
read.

Run alone to create or migrate the database and print its tables::

    python -m clawd.store.db
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import sqlite_utils

from clawd.config import clawd_home
from clawd.store.migrations import applied, migrate


class StoreError(Exception):
    """The database cannot be opened or a record is missing."""


def db_path(home: Path) -> Path:
    return home / "clawd.db"


class Store:
    """A connection to the clawd database, migrated to the current schema on open."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
            self.db = sqlite_utils.Database(conn)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA secure_delete=ON")  # forgotten text is overwritten
            migrate(self.db)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open the database {path}: {exc}") from exc
        self.path = path

    @classmethod
    def open(cls, home: Path | None = None) -> Store:
        return cls(db_path(home or clawd_home()))

    def close(self) -> None:
        self.db.conn.close()

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

    def waiting_samples(self, kinds: tuple[str, ...]) -> tuple[int, int]:
        """Approved samples of turns that may be learned from, and how many are of ``kinds``."""
        marks = ", ".join("?" * len(kinds))
        approved, of_kinds = self.db.execute(
            f"SELECT COUNT(*), COALESCE(SUM(x.kind IN ({marks})), 0) FROM samples x "
            "JOIN turns t ON t.id = x.turn_id WHERE x.status = 'approved' AND t.learn = 1",
            list(kinds),
        ).fetchone()
        return int(approved), int(of_kinds)

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
