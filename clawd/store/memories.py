"""Memories: standing preferences and facts about the user, kept until an adapter learns them.

A memory is a short second-person statement ("Address the user as Ana.") made from a reply, a
feedback comment (``clawd.signals.memory`` decides which replies state one) or added by the
user. Active memories go into the system message of every answer (``system_block``); a newer
memory on the same topic (a name, a length, a language...) replaces the older one, which comes
back if the newer is deleted. An adapter that has closed a memory's gap marks it ``learned``
(``sync_learned``, on every switch of the active adapter): it leaves the prompt, and returns
when another adapter or a rollback is active.

No HTTP here: callers pass plain values and catch ``NotFound`` and ``ValueError``.

Run alone to list the memories of ``CLAWD_HOME``::

    python -m clawd.store.memories
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from clawd.store.db import Store
from clawd.store.record import NotFound

MAX_CHARS = 300  # a memory is one short statement
STATUSES = ("active", "learned", "off", "replaced")
KINDS = ("name", "length", "language", "format", "tone", "fact", "other")
HEADER = "What you know about the user (follow it in every answer):"


def clean_text(text: Any) -> str:
    """A memory's text as stored: one line, trimmed. Raises ``ValueError`` naming the field
    for anything that is not a short non-empty statement."""
    if not isinstance(text, str):
        raise ValueError("text: must be a string")
    one = " ".join(text.split())
    if not one:
        raise ValueError("text: must not be empty")
    if len(one) > MAX_CHARS:
        raise ValueError(f"text: at most {MAX_CHARS} characters ({len(one)} given)")
    return one


def _plain(text: str) -> str:
    """A memory as data inside the system block: no newline, and no character that could form
    a chat-template tag (``<|im_end|>``, ``<think>``), so it cannot close the block or add a
    role whatever it says."""
    return " ".join(text.split()).replace("<", "‹").replace(">", "›")


def topic_of(kind: str, text: str) -> str:
    """The slot a memory fills: one name, one length, one language; other kinds by their
    words, so that "Use bullet points." and "Do not use bullet points." share one."""
    if kind in ("name", "length", "language"):
        return kind
    words = sorted({w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3} - _STOP)
    return f"{kind}:{' '.join(words[:6])}"


_STOP = frozenset(
    "user users answer answers always never every from with that this your about what when "
    "their them they should would could please reply replies keep give make don't does".split()
)


def get(store: Store, memory_id: int) -> dict[str, Any]:
    rows = list(store.db["memories"].rows_where("id = ?", [memory_id]))
    if not rows:
        raise NotFound(f"no memory with id {memory_id}")
    return rows[0]


def list_memories(store: Store, status: str | None = None) -> list[dict[str, Any]]:
    """Every memory (or those of one ``status``), newest first."""
    where, args = ("status = ?", [status]) if status else (None, [])
    return list(store.db["memories"].rows_where(where, args, order_by="id desc"))


def add(
    store: Store,
    text: str,
    kind: str = "other",
    *,
    source: str = "user",
    reply: str | None = None,
    turn_id: str | None = None,
    conversation_id: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Add a memory; returns it and the memory it replaced (None). The same text again
    confirms the existing memory instead (its ``confirmed_at`` moves; no second row)."""
    text = clean_text(text)
    if kind not in KINDS:
        raise ValueError(f"kind: one of {', '.join(KINDS)}")
    topic = topic_of(kind, text)
    now = time.time()
    with store.db.conn:
        same = store.db.execute(
            "SELECT id FROM memories WHERE lower(text) = lower(?) AND status != 'replaced'",
            [text],
        ).fetchone()
        if same:
            store.db.conn.execute(
                "UPDATE memories SET confirmed_at = ?, updated_at = ?, "
                "status = CASE status WHEN 'off' THEN 'active' ELSE status END WHERE id = ?",
                (now, now, same[0]),
            )
            return get(store, same[0]), None
        old = store.db.execute(
            "SELECT id FROM memories WHERE topic = ? AND status IN ('active', 'learned', 'off') "
            "ORDER BY id DESC LIMIT 1",
            [topic],
        ).fetchone()
        cur = store.db.conn.execute(
            "INSERT INTO memories (text, kind, topic, source, reply, turn_id, conversation_id, "
            "status, replaces, created_at, confirmed_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?)",
            (
                text,
                kind,
                topic,
                source,
                reply,
                turn_id,
                conversation_id,
                old and old[0],
                now,
                now,
                now,
            ),
        )
        if old:
            store.db.conn.execute(
                "UPDATE memories SET status = 'replaced', updated_at = ? WHERE id = ?",
                (now, old[0]),
            )
    return get(store, int(cur.lastrowid)), get(store, old[0]) if old else None


def edit(
    store: Store, memory_id: int, text: str | None = None, status: str | None = None
) -> dict[str, Any]:
    """Change a memory's text (its gap is measured anew by the next run) or switch it
    ``active`` / ``off``."""
    mem = get(store, memory_id)
    fields: dict[str, Any] = {"updated_at": time.time()}
    if text is not None:
        fields["text"] = clean_text(text)
        fields["topic"] = topic_of(mem["kind"], fields["text"])
        fields.update(gap=None, base_gap=None, learned_by=None, confirmed_at=time.time())
        if mem["status"] == "learned":
            fields["status"] = "active"  # a new text is not learned yet
    if status is not None:
        if status not in ("active", "off"):
            raise ValueError("status: 'active' or 'off'")
        fields["status"] = status
    with store.db.conn:
        store.db["memories"].update(memory_id, fields)
    return get(store, memory_id)


def delete(store: Store, memory_ids: list[int]) -> list[int]:
    """Delete memories; a memory one of them had replaced becomes active again. Returns the
    ids restored."""
    restored = []
    with store.db.conn:
        for memory_id in memory_ids:
            mem = get(store, memory_id)
            store.db.conn.execute("DELETE FROM memories WHERE id = ?", [memory_id])
            store.db.conn.execute(
                "UPDATE memories SET replaces = NULL WHERE replaces = ?", [memory_id]
            )
            if mem["replaces"] and mem["status"] != "replaced":
                n = store.db.conn.execute(
                    "UPDATE memories SET status = 'active', updated_at = ? "
                    "WHERE id = ? AND status = 'replaced'",
                    (time.time(), mem["replaces"]),
                ).rowcount
                restored += [mem["replaces"]] if n else []
    return restored


def of_conversation(store: Store, conversation_id: str) -> list[int]:
    """The ids of the memories a conversation's replies made."""
    rows = store.db.execute(
        "SELECT id FROM memories WHERE conversation_id = ? ORDER BY id", [conversation_id]
    )
    return [r[0] for r in rows.fetchall()]


def in_prompt(store: Store, include_learned: bool = False) -> list[dict[str, Any]]:
    """The memories an answer's context holds: the active ones (and the learned ones with
    ``include_learned``), the most recently confirmed first (``learned`` ones are in the
    adapter, ``off`` and ``replaced`` ones nowhere)."""
    where = "status IN ('active', 'learned')" if include_learned else "status = 'active'"
    return list(store.db["memories"].rows_where(where, order_by="confirmed_at desc, id desc"))


def system_block(
    memories: list[dict[str, Any]], count_tokens: Callable[[str], int], budget: int
) -> tuple[str, list[int], list[int]]:
    """The memories as one system-message block within ``budget`` tokens: (text, ids used,
    ids left out). ``memories`` come most recently confirmed first; those that do not fit in
    what is left of the budget are left out (the oldest first, as the order goes)."""
    if not memories:
        return "", [], []
    used, left, lines = [], [], []
    spent = count_tokens(HEADER)
    for mem in memories:
        line = f"- {_plain(mem['text'])}"
        n = count_tokens(line) + 1
        if spent + n > budget:
            left.append(mem["id"])
            continue
        spent += n
        used.append(mem["id"])
        lines.append(line)
    if not lines:
        return "", [], left
    return "\n".join([HEADER, *lines]), used, left


def with_memories(messages: list[dict[str, Any]], block: str) -> list[dict[str, Any]]:
    """``messages`` with ``block`` appended to the client's own system message (the first
    one), or as a new system message first."""
    if not block:
        return messages
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        own = first.get("content")
        if isinstance(own, list):  # content parts: the block is one more text part
            first["content"] = [*own, {"type": "text", "text": "\n\n" + block}]
        else:
            first["content"] = f"{own or ''}\n\n{block}".lstrip()
        return [first, *messages[1:]]
    return [{"role": "system", "content": block}, *messages]


def with_all(messages: list[dict[str, Any]], mems: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every memory of ``mems`` in the system block, no budget: how
    training and the gate put them (the daemon keeps to ``memory_token_budget``)."""
    block, _, _ = system_block(mems, len, 1 << 30)
    return with_memories(messages, block)


def record_gaps(store: Store, gaps: dict[int, dict[str, float]]) -> None:
    """The gaps a gate measured (``{id: {"gap", "base_gap"}}``) as each memory's latest."""
    with store.db.conn:
        for memory_id, g in gaps.items():
            store.db.conn.execute(
                "UPDATE memories SET gap = ?, base_gap = ? WHERE id = ?",
                (g.get("gap"), g.get("base_gap"), memory_id),
            )


def learned_ids(gate: dict[str, Any] | None) -> list[int]:
    """The memories an adapter's gate verdict found closed (``clawd.adapters.memgap``)."""
    figures = (gate or {}).get("memories") or {}
    return sorted(int(k) for k, v in figures.items() if isinstance(v, dict) and v.get("closed"))


def sync_learned(store: Store, version: str | None, learned: list[int]) -> dict[str, list[int]]:
    """After the active adapter changed to ``version`` (None: the base model): the memories in
    ``learned`` (those whose gap that adapter closed, from its manifest) leave the prompt, and
    every other memory marked learned comes back. Returns the ids that moved each way."""
    now = time.time()
    moved: dict[str, list[int]] = {"learned": [], "back": []}
    with store.db.conn:
        for mem in list_memories(store):
            if mem["status"] == "learned" and (mem["id"] not in learned or version is None):
                store.db["memories"].update(
                    mem["id"], {"status": "active", "learned_by": None, "updated_at": now}
                )
                moved["back"].append(mem["id"])
            elif mem["status"] == "active" and version is not None and mem["id"] in learned:
                store.db["memories"].update(
                    mem["id"], {"status": "learned", "learned_by": version, "updated_at": now}
                )
                moved["learned"].append(mem["id"])
    return moved


if __name__ == "__main__":
    with Store.open() as store:
        for m in list_memories(store):
            print(f"{m['id']:4} {m['status']:8} {m['kind']:8} {m['text']}")
