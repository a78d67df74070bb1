import gc
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlite_utils

from clawd.store import migrations, record
from clawd.store.db import Store, StoreError

TABLES = {
    "conversations",
    "turns",
    "next_states",
    "feedback",
    "signals",
    "signal_votes",
    "samples",
    "adapters",
    "training_runs",
    "training_steps",
    "events",
}


def test_migrates_an_empty_database(home: Path) -> None:
    with Store.open(home) as store:
        assert TABLES <= set(store.db.table_names())
        assert store.migrations == [fn.__name__ for fn in migrations.MIGRATIONS]
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    # Reopening applies nothing twice.
    with Store.open(home) as store:
        assert migrations.migrate(store.db) == []


def test_schema_enforces_its_rules(home: Path) -> None:
    with Store.open(home) as store:
        db = store.db
        db["conversations"].insert({"id": "c1", "created_at": 1.0, "updated_at": 1.0})
        row = {
            "id": "t1",
            "conversation_id": "c1",
            "seq": 0,
            "prompt_messages": "[]",
            "response_text": "hi",
            "model": "m",
            "created_at": 1.0,
        }
        db["turns"].insert(row)
        assert db["turns"].get("t1")["learn"] == 1  # learning is on unless opted out
        with pytest.raises(sqlite3.IntegrityError):  # unknown conversation
            db["turns"].insert({**row, "id": "t2", "conversation_id": "nope"})
        with pytest.raises(sqlite3.IntegrityError):  # one signal set per turn
            db["signals"].insert_all([{"turn_id": "t1", "score": 1, "created_at": 1.0}] * 2)


def test_a_failing_migration_leaves_nothing_behind(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def m999_broken(db: sqlite_utils.Database) -> None:
        db["half"].create({"id": int}, pk="id")
        raise RuntimeError("boom")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, m999_broken])
    with pytest.raises(RuntimeError, match="boom"):
        Store.open(home)
    db = sqlite_utils.Database(home / "clawd.db")
    assert "half" not in db.table_names()
    assert migrations.applied(db) == [fn.__name__ for fn in migrations.MIGRATIONS[:-1]]


def test_events_newest_first(home: Path) -> None:
    with Store.open(home) as store:
        store.event("model", "pulled smollm2-135m", size=1)
        store.event("train", "run 1 failed", reason="nan")
        assert [e["kind"] for e in store.events()] == ["train", "model"]
        assert store.events(kind="model")[0]["data"] == {"size": 1}


def test_one_store_serves_many_threads_at_once(home: Path) -> None:
    # The daemon's request handlers share one Store from worker threads. With one connection for
    # all of them, two threads inside one transaction failed at random ("SystemError: error
    # return without exception set", a 500 in CI).
    threads, each = 8, 30
    start = threading.Barrier(threads)
    with Store.open(home) as store:

        def chat(i: int) -> set[str]:
            start.wait()
            ids = set()
            for j in range(each):
                messages = [{"role": "user", "content": f"question {i}.{j}"}]
                ids.add(record.begin(store, messages, None, True).conversation_id)
                store.event("test", f"{i}.{j}")
            return ids

        with ThreadPoolExecutor(threads) as pool:
            ids = set().union(*pool.map(chat, range(threads)))
        assert len(ids) == threads * each
        assert store.db["conversations"].count == threads * each
        assert len(store.events(limit=1000, kind="test")) == threads * each
        # A thread's connection closes when the thread ends: only this thread's is left.
        gc.collect()
        assert len(store._open) == 1


def test_closing_a_store_closes_every_threads_connection(home: Path) -> None:
    store = Store.open(home)
    with ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: store.event("test", "from a worker")).result()
        conns = list(store._open)
        assert len(conns) == 2
        store.close()
        for conn in conns:
            with pytest.raises(sqlite3.ProgrammingError, match="closed"):
                conn.execute("SELECT 1")
        with pytest.raises(StoreError, match="closed"):
            pool.submit(lambda: store.db).result()
    with pytest.raises(StoreError, match="closed"):
        store.event("test", "after close")


def test_not_a_database_is_a_clear_error(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "clawd.db").write_text("this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open the database"):
        Store.open(home)


def test_each_older_schema_migrates_forward_keeping_rows(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = list(migrations.MIGRATIONS)
    for n in range(1, len(full)):
        path = home / f"old-{n}.db"
        monkeypatch.setattr(migrations, "MIGRATIONS", full[:n])
        with Store(path) as old:
            old.db["conversations"].insert({"id": "c", "created_at": 1.0, "updated_at": 1.0})
            old.event("old", "written by an older clawd")
        monkeypatch.setattr(migrations, "MIGRATIONS", full)
        with Store(path) as new:
            assert new.migrations == [fn.__name__ for fn in migrations.MIGRATIONS]
            assert new.db["conversations"].get("c")["learn"] == 1
            assert new.events()[0]["message"] == "written by an older clawd"
            assert "history_hash" in new.db["turns"].columns_dict
