"""Review of learning signals: list, show, approve and veto (store queries, no HTTP).

Used by ``clawd signals ...`` (straight on the database, so it works without a daemon) and by
the REST routes ``/v1/signals``. Approving or vetoing acts on the signal's training sample; a
vetoed sample is never trained on, and a sample that already trained cannot change.

Run alone to list the newest signals::

    python -m clawd.signals.review
"""

from __future__ import annotations

import json
from typing import Any

from clawd.store.db import Store
from clawd.store.record import NotFound


class ReviewError(Exception):
    """The action does not apply to this signal (no sample, already trained)."""


LIST_SQL = """
SELECT s.id, s.turn_id, s.score, s.hint, s.hint_source, s.judge_model, s.created_at,
       t.conversation_id, substr(t.response_text, 1, 200) AS response,
       substr(n.content, 1, 200) AS next_state, n.role AS next_role,
       x.id AS sample_id, x.kind AS sample_kind, x.status AS sample_status,
       (SELECT COUNT(*) FROM signal_votes v WHERE v.signal_id = s.id) AS votes
FROM signals s
JOIN turns t ON t.id = s.turn_id
LEFT JOIN next_states n ON n.turn_id = s.turn_id
LEFT JOIN samples x ON x.signal_id = s.id
{where}
ORDER BY s.id DESC
LIMIT ?
"""


def list_signals(store: Store, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Newest first; ``status`` filters on the sample's status (pending, approved, vetoed, used)."""
    where, args = ("WHERE x.status = ?", [status]) if status else ("", [])
    return list(store.db.query(LIST_SQL.format(where=where), [*args, limit]))


def show_signal(store: Store, signal_id: int) -> dict[str, Any]:
    rows = list_signals_by_id(store, signal_id)
    if not rows:
        raise NotFound(f"no signal with id {signal_id}")
    votes = [
        {k: v[k] for k in ("kind", "score", "hint", "raw_text")}
        for v in store.db["signal_votes"].rows_where("signal_id = ?", [signal_id], order_by="id")
    ]
    sample = next(iter(store.db["samples"].rows_where("signal_id = ?", [signal_id])), None)
    if sample:
        sample = {
            **sample,
            "prompt_token_ids": json.loads(sample["prompt_token_ids"]),
            "response_token_ids": json.loads(sample["response_token_ids"]),
        }
    turn = store.db["turns"].get(rows[0]["turn_id"])
    return {
        **rows[0],
        "response": turn["response_text"],
        "votes": votes,
        "sample": sample,
        "prompt_messages": json.loads(turn["prompt_messages"]),
    }


def list_signals_by_id(store: Store, signal_id: int) -> list[dict[str, Any]]:
    if not 0 < signal_id < 2**63:  # not an SQLite integer: no such signal (never an overflow)
        return []
    sql = LIST_SQL.format(where="WHERE s.id = ?")
    return list(store.db.query(sql, [signal_id, 1]))


def set_status(store: Store, signal_id: int, status: str) -> dict[str, Any]:
    """Approve or veto the sample of a signal."""
    if status not in ("approved", "vetoed"):
        raise ValueError(status)
    rows = list_signals_by_id(store, signal_id)
    if not rows:
        raise NotFound(f"no signal with id {signal_id}")
    row = rows[0]
    if row["sample_id"] is None:
        raise ReviewError(
            f"signal {signal_id} produced no training sample; nothing to "
            f"{'approve' if status == 'approved' else 'veto'}"
        )
    if row["sample_status"] == "used":
        raise ReviewError(f"the sample of signal {signal_id} has already trained an adapter")
    with store.db.conn:
        store.db.conn.execute(
            "UPDATE samples SET status = ? WHERE id = ?", (status, row["sample_id"])
        )
    return list_signals_by_id(store, signal_id)[0]


if __name__ == "__main__":
    with Store.open() as store:
        for r in list_signals(store):
            print(
                f"{r['id']:5} score {r['score']:+d} {r['sample_kind'] or '-':7} "
                f"{r['sample_status'] or '-':9} {(r['hint'] or '')[:60]!r}"
            )
