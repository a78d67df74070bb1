"""Recording: conversations, turns, next states and feedback, on top of the store.

Editors resend the whole history with every request and send no ids. A turn's
``history_hash`` is a hash chain over its prompt messages plus its answer, so a request finds
the turn it extends by hashing each of its own prefixes that ends in an assistant message: the
longest stored match wins. The message right after that prefix (a user or tool message) is the
*next state* of the matched turn, the signal that the learner feeds on.

No HTTP here: callers pass plain values and catch ``NotFound``.

Run alone to print the stored conversations::

    python -m clawd.store.record
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from clawd.store.db import Store

CONVERSATION_ID_RE = re.compile(r"^(?!.*\.\.)[A-Za-z0-9_.:-]{1,128}$")  # no ".."


class NotFound(Exception):
    """No record with that id."""


def message_text(content: Any) -> str:
    """The text of an OpenAI message ``content`` (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def _message_key(message: dict[str, Any]) -> str:
    parts = [message.get("role", ""), message_text(message.get("content")).strip()]
    if message.get("tool_calls"):
        parts.append(json.dumps(message["tool_calls"], sort_keys=True))
    if message.get("tool_call_id"):
        parts.append(str(message["tool_call_id"]))
    return "\x1f".join(parts)


def chain_hashes(messages: list[dict[str, Any]]) -> list[str]:
    """``out[k]`` is the hash of ``messages[: k + 1]``."""
    out, h = [], ""
    for message in messages:
        h = hashlib.sha256((h + "\x1e" + _message_key(message)).encode("utf-8")).hexdigest()
        out.append(h)
    return out


@dataclass
class Context:
    """What a request is: which conversation, which turn it answers, whether to learn from it."""

    conversation_id: str
    previous_turn_id: str | None
    learn: bool
    messages: list[dict[str, Any]]
    next_state: str | None = None  # the reply this request linked, until its answer is stored


def _find_previous(
    store: Store, messages: list[dict[str, Any]], conversation_id: str | None
) -> tuple[int, dict[str, Any]] | None:
    hashes = chain_hashes(messages)
    for k in range(len(messages) - 1, -1, -1):
        if messages[k].get("role") != "assistant":
            continue
        where, args = "history_hash = ?", [hashes[k]]
        if conversation_id:
            where, args = where + " and conversation_id = ?", [*args, conversation_id]
        rows = list(store.db["turns"].rows_where(where, args, order_by="created_at desc", limit=1))
        if rows:
            return k, rows[0]
    return None


def begin(
    store: Store, messages: list[dict[str, Any]], conversation_id: str | None, learn: bool
) -> Context:
    """Find or create the conversation of a request and link its next state, in one write."""
    now = time.time()
    next_state = None
    found = _find_previous(store, messages, conversation_id)
    with store.db.conn:
        if found:
            k, prev = found
            conversation_id = prev["conversation_id"]
            after = messages[k + 1] if k + 1 < len(messages) else None
            # A reply sent with learning off is no signal. One whose answer was never stored
            # (the user pressed Esc, the client hung up) is replaced by the one sent next.
            if learn and after and after.get("role") in ("user", "tool"):
                said = message_text(after.get("content"))
                cur = store.db.conn.execute(
                    "INSERT INTO next_states (turn_id, role, content, created_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT(turn_id) DO UPDATE SET role = excluded.role,"
                    " content = excluded.content, created_at = excluded.created_at "
                    "WHERE next_states.next_turn_id IS NULL AND next_states.content != "
                    "excluded.content",
                    (prev["id"], after["role"], said, now),
                )
                next_state = said if cur.rowcount else None
        conversation_id = conversation_id or f"conv-{uuid.uuid4().hex[:20]}"
        first_user = next((m for m in messages if m.get("role") == "user"), None)
        title = message_text(first_user.get("content"))[:80] if first_user else ""
        store.db.conn.execute(
            "INSERT INTO conversations (id, title, learn, created_at, updated_at) "
            "VALUES (?, ?, 1, ?, ?) ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at",
            (conversation_id, title, now, now),
        )
    conv_learn = store.db["conversations"].get(conversation_id)["learn"]
    return Context(
        conversation_id,
        found[1]["id"] if found else None,
        learn and bool(conv_learn),
        messages,
        next_state,
    )


def abandon(store: Store, ctx: Context) -> None:
    """The request of ``ctx`` ended without a stored answer: the reply it linked is no next
    state (the user may edit and resend it; what they abandoned must not train)."""
    if ctx.previous_turn_id and ctx.next_state is not None:
        with store.db.conn:
            store.db.conn.execute(
                "DELETE FROM next_states WHERE turn_id = ? AND next_turn_id IS NULL "
                "AND content = ?",
                (ctx.previous_turn_id, ctx.next_state),
            )


def record_turn(store: Store, ctx: Context, **fields: Any) -> str:
    """Store one answered turn; returns its id (the response id the client sees)."""
    turn_id = fields.pop("id", None) or f"chatcmpl-{uuid.uuid4().hex}"
    answer: dict[str, Any] = {"role": "assistant", "content": fields["response_text"]}
    if fields.get("tool_calls"):  # served as calls with no content: the client resends that
        answer = {"role": "assistant", "content": "", "tool_calls": fields["tool_calls"]}
    row = {
        **fields,
        "id": turn_id,
        "conversation_id": ctx.conversation_id,
        "prompt_messages": json.dumps(ctx.messages),
        "history_hash": chain_hashes([*ctx.messages, answer])[-1],
        "learn": int(ctx.learn),
        "created_at": time.time(),
    }
    for key in ("prompt_token_ids", "response_token_ids", "params", "memory_ids", "tool_calls"):
        if key in row and not isinstance(row[key], str):
            row[key] = json.dumps(row[key])
    with store.db.conn:
        # the write lock before the read: two answers in one conversation never take one seq
        store.db.conn.execute("BEGIN IMMEDIATE")
        seq = store.db.execute(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM turns WHERE conversation_id = ?",
            [ctx.conversation_id],
        ).fetchone()[0]
        store.db["turns"].insert({**row, "seq": seq})
        if ctx.previous_turn_id:
            store.db.conn.execute(
                "UPDATE next_states SET next_turn_id = ? "
                "WHERE turn_id = ? AND next_turn_id IS NULL",
                (turn_id, ctx.previous_turn_id),
            )
    return turn_id


def add_feedback(store: Store, turn_id: str, rating: int, comment: str | None) -> int:
    if store.db["turns"].count_where("id = ?", [turn_id]) == 0:
        raise NotFound(f"no response with id {turn_id!r}")
    with store.db.conn:
        cur = store.db.conn.execute(
            "INSERT INTO feedback (turn_id, rating, comment, created_at) VALUES (?, ?, ?, ?)",
            (turn_id, rating, comment, time.time()),
        )
    return int(cur.lastrowid)


def list_conversations(store: Store, limit: int = 100) -> list[dict[str, Any]]:
    return list(
        store.db.query(
            "SELECT c.*, (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id) AS turns "
            "FROM conversations c ORDER BY updated_at DESC LIMIT ?",
            [limit],
        )
    )


def get_conversation(store: Store, conversation_id: str) -> dict[str, Any]:
    """A conversation with its turns, each with its next state and feedback."""
    rows = list(store.db["conversations"].rows_where("id = ?", [conversation_id]))
    if not rows:
        raise NotFound(f"no conversation with id {conversation_id!r}")
    turns = []
    for t in store.db["turns"].rows_where("conversation_id = ?", [conversation_id], order_by="seq"):
        ns = list(store.db["next_states"].rows_where("turn_id = ?", [t["id"]]))
        fb = list(store.db["feedback"].rows_where("turn_id = ?", [t["id"]], order_by="id"))
        turns.append(
            {
                "id": t["id"],
                "seq": t["seq"],
                "created_at": t["created_at"],
                "messages": json.loads(t["prompt_messages"]),
                "response": t["response_text"],
                "tool_calls": json.loads(t.get("tool_calls") or "null"),  # OpenAI's shape
                "reasoning": t["reasoning_text"],
                "finish_reason": t["finish_reason"],
                "model": t["model"],
                "adapter_version": t["adapter_version"],
                "memories": json.loads(t.get("memory_ids") or "[]"),  # ids in its context
                "learn": bool(t["learn"]),
                "usage": {
                    "prompt_tokens": t["prompt_tokens"],
                    "completion_tokens": t["completion_tokens"],
                },
                "timing": {"ttft_ms": t["ttft_ms"], "total_ms": t["total_ms"]},
                "next_state": {k: ns[0][k] for k in ("role", "content", "next_turn_id")}
                if ns
                else None,
                "feedback": [{k: f[k] for k in ("rating", "comment", "created_at")} for f in fb],
            }
        )
    return {**rows[0], "learn": bool(rows[0]["learn"]), "turns": turns}


def update_conversation(
    store: Store, conversation_id: str, *, learn: bool | None = None, title: str | None = None
) -> None:
    if store.db["conversations"].count_where("id = ?", [conversation_id]) == 0:
        raise NotFound(f"no conversation with id {conversation_id!r}")
    with store.db.conn:
        if title is not None:
            store.db.conn.execute(
                "UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id)
            )
        if learn is not None:
            store.db.conn.execute(
                "UPDATE conversations SET learn = ? WHERE id = ?", (int(learn), conversation_id)
            )
            if not learn:  # opting out also covers what was already said
                store.db.conn.execute(
                    "UPDATE turns SET learn = 0 WHERE conversation_id = ?", (conversation_id,)
                )


def delete_conversation(store: Store, conversation_id: str) -> dict[str, Any]:
    """Forget a conversation: its turns and everything learned from them (signals, votes,
    feedback, samples, trained or not). Returns how many rows of each went and the ids of the
    samples, so that the caller can scrub the training reports that quote them."""
    if store.db["conversations"].count_where("id = ?", [conversation_id]) == 0:
        raise NotFound(f"no conversation with id {conversation_id!r}")
    turn_ids = "SELECT id FROM turns WHERE conversation_id = ?"
    sample_ids = [
        r[0]
        for r in store.db.execute(
            f"SELECT id FROM samples WHERE turn_id IN ({turn_ids})", (conversation_id,)
        ).fetchall()
    ]
    removed: dict[str, Any] = {}
    with store.db.conn:
        for name, sql in (
            (
                "votes",
                f"DELETE FROM signal_votes WHERE signal_id IN "
                f"(SELECT id FROM signals WHERE turn_id IN ({turn_ids}))",
            ),
            ("samples", f"DELETE FROM samples WHERE turn_id IN ({turn_ids})"),
            ("", f"DELETE FROM signal_attempts WHERE turn_id IN ({turn_ids})"),
            ("signals", f"DELETE FROM signals WHERE turn_id IN ({turn_ids})"),
            ("feedback", f"DELETE FROM feedback WHERE turn_id IN ({turn_ids})"),
            ("", f"DELETE FROM next_states WHERE turn_id IN ({turn_ids})"),
            ("", f"UPDATE next_states SET next_turn_id = NULL WHERE next_turn_id IN ({turn_ids})"),
            # the complaints its replies made (clawd.signals.corrections)
            (
                "",
                "DELETE FROM events WHERE kind = 'complaint' "
                "AND json_extract(data, '$.conversation_id') = ?",
            ),
            ("turns", "DELETE FROM turns WHERE conversation_id = ?"),
            ("", "DELETE FROM conversations WHERE id = ?"),
        ):
            n = store.db.conn.execute(sql, (conversation_id,)).rowcount
            if name:
                removed[name] = n
    # The write-ahead log still holds the old pages: fold it in and empty it.
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    removed["sample_ids"] = sample_ids
    return removed


if __name__ == "__main__":
    with Store.open() as store:
        for c in list_conversations(store):
            print(f"{c['id']}  {c['turns']:3} turns  {c['title']!r}")
