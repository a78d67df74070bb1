"""Named schema migrations for the SQLite store, applied in order and recorded once each.

Each migration is a function ``mNNN_name(db)``; :func:`migrate` runs those not yet listed in
the ``_migrations`` table, each inside its own transaction. Never edit a migration that has
shipped: add the next one. The schema is documented in ``docs/schema.md``.

Run alone to migrate a database file::

    python -m clawd.store.migrations path/to/clawd.db
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import sqlite_utils

Migration = Callable[[sqlite_utils.Database], None]
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_initial(db: sqlite_utils.Database) -> None:
    """The first schema, one step of the data flow at a time (in the order the foreign keys
    need)."""
    _conversation_tables(db)
    _signal_tables(db)
    _training_tables(db)
    _event_table(db)


def _conversation_tables(db: sqlite_utils.Database) -> None:
    """What the user and the model said: conversations, turns, next states, feedback."""
    db["conversations"].create(
        {
            "id": str,
            "title": str,
            "learn": int,  # 0: the user opted this conversation out of learning
            "created_at": float,
            "updated_at": float,
        },
        pk="id",
        not_null={"learn", "created_at", "updated_at"},
        defaults={"learn": 1},
    )
    db["turns"].create(
        {
            "id": str,  # the response id the client saw ("chatcmpl-...")
            "conversation_id": str,
            "seq": int,  # position of this assistant turn in its conversation, from 0
            "prompt_messages": str,  # JSON list of OpenAI messages the model answered
            "prompt_token_ids": str,  # JSON list: the rendered prompt as tokens
            "response_text": str,
            "reasoning_text": str,  # Qwen3 thinking, kept apart from the answer
            "response_token_ids": str,  # JSON list: the exact tokens served
            "finish_reason": str,
            "model": str,
            "model_sha256": str,
            "adapter_version": str,  # NULL: the base model answered
            "params": str,  # JSON: temperature, top_p, seed, ...
            "learn": int,
            "prompt_tokens": int,
            "completion_tokens": int,
            "ttft_ms": float,
            "total_ms": float,
            "created_at": float,
        },
        pk="id",
        foreign_keys=[("conversation_id", "conversations", "id")],
        not_null={
            "conversation_id",
            "seq",
            "prompt_messages",
            "response_text",
            "model",
            "learn",
            "created_at",
        },
        defaults={"learn": 1},
    )
    db["turns"].create_index(["conversation_id", "seq"], unique=True)
    db["next_states"].create(
        {
            "turn_id": str,  # the assistant turn this message answers
            "role": str,  # "user" or "tool"
            "content": str,
            "next_turn_id": str,  # the turn whose request carried it, if any
            "created_at": float,
        },
        pk="turn_id",
        foreign_keys=[("turn_id", "turns", "id"), ("next_turn_id", "turns", "id")],
        not_null={"role", "content", "created_at"},
    )
    db["feedback"].create(
        {"id": int, "turn_id": str, "rating": int, "comment": str, "created_at": float},
        pk="id",
        foreign_keys=[("turn_id", "turns", "id")],
        not_null={"turn_id", "rating", "created_at"},
    )
    db["feedback"].create_index(["turn_id"])


def _signal_tables(db: sqlite_utils.Database) -> None:
    """What the signals job made of a reply: a signal per turn and its judges' votes."""
    db["signals"].create(
        {
            "id": int,
            "turn_id": str,
            "score": int,  # majority of valid judge votes: -1, 0 or +1
            "hint": str,
            "hint_source": str,  # "judge", "reply" or "feedback"
            "judge_model": str,
            "created_at": float,
        },
        pk="id",
        foreign_keys=[("turn_id", "turns", "id")],
        not_null={"turn_id", "score", "created_at"},
    )
    db["signals"].create_index(["turn_id"], unique=True)  # one signal set per turn
    db["signal_votes"].create(
        {
            "id": int,
            "signal_id": int,
            "kind": str,  # "judge" or "hint"
            "raw_text": str,
            "score": int,  # parsed \\boxed{} value; NULL for an invalid vote
            "hint": str,
            "created_at": float,
        },
        pk="id",
        foreign_keys=[("signal_id", "signals", "id")],
        not_null={"signal_id", "kind", "raw_text", "created_at"},
    )


def _training_tables(db: sqlite_utils.Database) -> None:
    """Training runs, their steps, the adapters they made and the samples they learn from."""
    db["training_runs"].create(
        {
            "id": int,
            "status": str,  # "running", "succeeded", "failed"
            "reason": str,  # why it failed, in words
            "config": str,  # JSON
            "n_samples": int,
            "adapter_version": str,
            "report_path": str,
            "started_at": float,
            "finished_at": float,
        },
        pk="id",
        not_null={"status", "started_at"},
    )
    db["training_steps"].create(
        {"run_id": int, "step": int, "metrics": str, "created_at": float},
        pk=("run_id", "step"),
        foreign_keys=[("run_id", "training_runs", "id")],
    )
    db["adapters"].create(
        {
            "version": str,
            "parent": str,
            "base_sha256": str,
            "run_id": int,
            "path": str,
            "status": str,  # "candidate", "active", "retired", "rejected", "parked"
            "metrics": str,  # JSON, including the gate's figures
            "created_at": float,
        },
        pk="version",
        foreign_keys=[("run_id", "training_runs", "id")],
        not_null={"base_sha256", "path", "status", "created_at"},
    )
    db["samples"].create(
        {
            "id": int,
            "turn_id": str,
            "signal_id": int,
            "kind": str,  # "opd+rl", "opd" or "rl"
            "prompt_token_ids": str,  # JSON
            "response_token_ids": str,  # JSON, exactly as served
            "hint": str,
            "reward": float,
            "adapter_version": str,  # the adapter that produced the response
            "status": str,  # "pending", "approved", "vetoed", "used", "dropped" (m004)
            "run_id": int,  # the training run that used it
            "created_at": float,
        },
        pk="id",
        foreign_keys=[
            ("turn_id", "turns", "id"),
            ("signal_id", "signals", "id"),
            ("run_id", "training_runs", "id"),
        ],
        not_null={
            "turn_id",
            "kind",
            "prompt_token_ids",
            "response_token_ids",
            "status",
            "created_at",
        },
    )
    db["samples"].create_index(["turn_id"], unique=True)  # one sample per turn at most


def _event_table(db: sqlite_utils.Database) -> None:
    """What happened, for the user to see."""
    db["events"].create(
        {"id": int, "ts": float, "kind": str, "message": str, "data": str},
        pk="id",
        not_null={"ts", "kind", "message"},
    )
    db["events"].create_index(["ts"])


@migration
def m002_history_hash(db: sqlite_utils.Database) -> None:
    # Hash chain over a turn's prompt messages plus its answer: how a request that resends
    # the whole history (as editors do) finds the conversation and the turn it extends.
    db["turns"].add_column("history_hash", str)
    db["turns"].create_index(["history_hash"])


@migration
def m003_signal_attempts(db: sqlite_utils.Database) -> None:
    # A failed judge call is retried later with backoff; the turn is never dropped.
    db["signal_attempts"].create(
        {"turn_id": str, "attempts": int, "next_try_at": float, "last_error": str},
        pk="turn_id",
        foreign_keys=[("turn_id", "turns", "id")],
        not_null={"attempts", "next_try_at"},
    )


@migration
def m004_sample_rotation(db: sqlite_utils.Database) -> None:
    # A rejected run's samples go back to waiting (``attempts`` counts those runs; a sample in
    # too many is ``dropped``); a held-out sample trains in a later run and is held out once.
    db["samples"].add_column("attempts", int, not_null_default=0)
    db["samples"].add_column("heldout_runs", int, not_null_default=0)
    db.execute("UPDATE samples SET status = 'approved', heldout_runs = 1 WHERE status = 'heldout'")


@migration
def m005_memories(db: sqlite_utils.Database) -> None:
    # Standing preferences and facts about the user, said in a reply, a feedback comment or
    # directly: in the system message of every answer until an adapter has learned them.
    db["memories"].create(
        {
            "id": int,
            "text": str,  # second person: "Address the user as Ana."
            "kind": str,  # name, length, language, format, tone, fact, other
            "topic": str,  # what a newer memory on the same thing replaces (a slot)
            "source": str,  # "reply", "feedback" or "user"
            "reply": str,  # the user's words it came from (NULL: added directly)
            "turn_id": str,  # the answer that reply was about
            "conversation_id": str,
            "status": str,  # "active", "learned", "off" or "replaced"
            "replaces": int,  # the memory it replaced (restored when this one is deleted)
            "learned_by": str,  # the adapter version that closed its gap
            "gap": float,  # the last measured gap (mean per-token KL), and the base model's
            "base_gap": float,
            "created_at": float,
            "confirmed_at": float,  # created, or said again
            "updated_at": float,
        },
        pk="id",
        not_null={"text", "kind", "topic", "source", "status", "created_at", "confirmed_at"},
    )
    db["memories"].create_index(["conversation_id"])
    db["turns"].add_column("memory_ids", str)  # JSON: the memories in this answer's context


@migration
def m006_tool_calls(db: sqlite_utils.Database) -> None:
    # The calls an answer made (JSON, OpenAI's shape): part of the answer, and of the history
    # hash that finds the turn a tool's result answers.
    db["turns"].add_column("tool_calls", str)


def applied(db: sqlite_utils.Database) -> list[str]:
    if "_migrations" not in db.table_names():
        return []
    return [row["name"] for row in db["_migrations"].rows_where(order_by="applied_at")]


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations; returns the names applied now."""
    if "_migrations" not in db.table_names():
        db["_migrations"].create({"name": str, "applied_at": float}, pk="name")
    done = set(applied(db))
    ran = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        # One explicit transaction per migration (sqlite3 would autocommit DDL): all or none.
        db.conn.execute("BEGIN")
        try:
            fn(db)
            db.conn.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                (fn.__name__, time.time()),
            )
            db.conn.execute("COMMIT")
        except BaseException:
            db.conn.execute("ROLLBACK")
            raise
        ran.append(fn.__name__)
    return ran


if __name__ == "__main__":
    names = migrate(sqlite_utils.Database(sys.argv[1]))
    print("applied:", ", ".join(names) or "nothing (up to date)")
