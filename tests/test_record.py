"""Conversation identity and next states, on the real store (no model needed)."""

from pathlib import Path

import pytest

from clawd.store import record
from clawd.store.db import Store


def answer(store: Store, messages: list[dict], reply: str, cid: str | None = None) -> str:
    ctx = record.begin(store, messages, cid, learn=True)
    return record.record_turn(store, ctx, response_text=reply, model="m")


@pytest.fixture
def store(home: Path):
    with Store.open(home) as s:
        yield s


def test_longest_stored_prefix_wins(store: Store) -> None:
    u1 = {"role": "user", "content": "hi"}
    t1 = answer(store, [u1], "hello")
    t2 = answer(
        store,
        [u1, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"}],
        "sure",
    )
    long = [
        u1,
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": "sure"},
        {"role": "user", "content": "thanks"},
    ]
    ctx = record.begin(store, long, None, learn=True)
    assert ctx.previous_turn_id == t2
    conv = record.get_conversation(store, ctx.conversation_id)
    assert [t["id"] for t in conv["turns"]] == [t1, t2]
    assert conv["turns"][0]["next_state"]["content"] == "more"
    assert conv["turns"][1]["next_state"]["content"] == "thanks"


def test_whitespace_and_content_parts_match(store: Store) -> None:
    t1 = answer(store, [{"role": "user", "content": "hi"}], "hello ")
    resent = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": "hello"},
        {"role": "tool", "content": "ok"},
    ]
    ctx = record.begin(store, resent, None, learn=True)
    assert ctx.previous_turn_id == t1
    ns = record.get_conversation(store, ctx.conversation_id)["turns"][0]["next_state"]
    assert ns["role"] == "tool"


def test_unrelated_histories_are_separate(store: Store) -> None:
    answer(store, [{"role": "user", "content": "a"}], "x")
    ctx = record.begin(
        store,
        [
            {"role": "user", "content": "b"},
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": "c"},
        ],
        None,
        learn=True,
    )
    assert ctx.previous_turn_id is None
    assert len(record.list_conversations(store)) == 2


def test_a_next_state_is_linked_once(store: Store) -> None:
    u = {"role": "user", "content": "hi"}
    t1 = answer(store, [u], "hello")
    follow = [u, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}]
    answer(store, follow, "one")
    answer(store, follow, "two")  # a regenerate resends the same history
    conv = record.get_conversation(store, record.list_conversations(store)[0]["id"])
    first = next(t for t in conv["turns"] if t["id"] == t1)
    assert first["next_state"]["content"] == "again"
    assert store.db["next_states"].count == 1


def test_opt_out_and_forget(store: Store) -> None:
    u = {"role": "user", "content": "secret"}
    t1 = answer(store, [u], "ok")
    cid = store.db["turns"].get(t1)["conversation_id"]
    record.add_feedback(store, t1, -1, "no")
    record.update_conversation(store, cid, learn=False)
    assert store.db["turns"].get(t1)["learn"] == 0
    ctx = record.begin(
        store,
        [u, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}],
        None,
        learn=True,
    )
    assert ctx.learn is False  # the conversation's switch wins over the request's default
    record.delete_conversation(store, cid)
    for table in ("turns", "feedback", "next_states", "conversations"):
        assert store.db[table].count == 0
    with pytest.raises(record.NotFound):
        record.delete_conversation(store, cid)
    with pytest.raises(record.NotFound):
        record.add_feedback(store, t1, 1, None)


def test_answers_recorded_at_once_in_one_conversation_each_get_their_own_seq(
    store: Store,
) -> None:
    """Once two turns read the same MAX(seq): the second was a 500 (or a cut stream)."""
    import threading

    ctx = record.begin(store, [{"role": "user", "content": "hi"}], "conv-race", learn=True)
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def write(i: int) -> None:
        start.wait()
        try:
            record.record_turn(store, ctx, response_text=f"answer {i}", model="m")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    seqs = [t["seq"] for t in store.db["turns"].rows_where("conversation_id = 'conv-race'")]
    assert sorted(seqs) == list(range(8))
