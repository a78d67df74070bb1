"""The signals job on the real fixture models, in process (the daemon test is separate)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from clawd.config import Settings
from clawd.signals import review
from clawd.signals.job import SignalJob, status_dict
from clawd.signals.judge import Judge
from clawd.signals.rules import parse_boxed
from clawd.signals.scorer import Scorer
from clawd.store import record
from clawd.store.db import Store

ANSWER = "The capital of France is Paris. It is known for the Eiffel Tower and its cafes."
CORRECTION = "No, that's far too long. Answer in one word."


@pytest.fixture(scope="module")
def judge(any_gguf: Path):
    j = Judge(any_gguf, n_ctx=1024, max_tokens=24)
    j.load()
    yield j
    j.close()


@pytest.fixture
def store(home: Path):
    with Store.open(home) as s:
        yield s


def exchange(
    store: Store, reply: str | None = CORRECTION, learn: bool = True, answer: str = ANSWER
) -> str:
    """A recorded turn and, if ``reply``, the user's next message."""
    q = {"role": "user", "content": f"What is the capital of France? ({time.time()})"}
    ctx = record.begin(store, [q], None, learn)
    tid = record.record_turn(
        store,
        ctx,
        response_text=answer,
        model="m",
        prompt_token_ids=[1, 2, 3],
        response_token_ids=[4, 5, 6],
    )
    if reply:
        record.begin(
            store,
            [q, {"role": "assistant", "content": answer}, {"role": "user", "content": reply}],
            None,
            learn,
        )
    return tid


def job(store: Store, judge: Judge, **settings: object) -> SignalJob:
    """A job whose judge writes its votes (judge_mode generate) with ``judge``."""
    s = Settings(judge_mode="generate", **settings)
    scorer = Scorer(s, name="fixture", model=judge.model_path.name, mode="generate", writer=judge)
    return SignalJob(store, scorer, s)


def signal_sets(store: Store, tid: str) -> list[dict]:
    return list(store.db["signals"].rows_where("turn_id = ?", [tid]))


def test_a_corrective_reply_becomes_a_signal_with_votes(store: Store, judge: Judge) -> None:
    tid = exchange(store)
    untouched = exchange(store, reply=None)  # no next state yet: nothing to judge
    assert job(store, judge).run_once() == 1
    [sig] = signal_sets(store, tid)
    votes = list(store.db["signal_votes"].rows_where("signal_id = ?", [sig["id"]]))
    assert len(votes) == 3 and all(v["kind"] == "judge" for v in votes)
    assert all(parse_boxed(v["raw_text"]) == v["score"] for v in votes)  # raw text kept
    assert signal_sets(store, untouched) == []
    shown = review.show_signal(store, sig["id"])
    if sig["score"] == -1:  # the reply extractor: the correction is the hint
        assert sig["hint"] == CORRECTION and shown["sample"]["kind"] == "opd+rl"
    elif sig["score"] == 1:
        assert shown["sample"]["kind"] == "rl" and shown["sample"]["hint"] is None
    else:
        assert shown["sample"] is None
    if shown["sample"]:
        assert shown["sample"]["response_token_ids"] == [4, 5, 6]
        assert shown["sample"]["prompt_token_ids"] == [1, 2, 3]
        assert shown["sample"]["status"] == "approved"


def test_votes_that_reach_no_score_abstain(store: Store, any_gguf: Path) -> None:
    tid = exchange(store)
    mute = Judge(any_gguf, n_ctx=1024, max_tokens=2)  # too few tokens to write a boxed score
    try:
        assert job(store, mute).run_once() == 1
    finally:
        mute.close()
    [sig] = signal_sets(store, tid)
    votes = list(store.db["signal_votes"].rows_where("signal_id = ?", [sig["id"]]))
    assert len(votes) == 3 and all(v["score"] is None for v in votes)
    assert all(v["raw_text"] is not None and "\\boxed{" not in v["raw_text"] for v in votes)
    assert sig["score"] == 0  # no vote, no reward: never a forced score
    assert store.db["samples"].count == 0


def test_runs_are_idempotent(store: Store, judge: Judge) -> None:
    tid = exchange(store)
    j = job(store, judge)
    assert j.run_once() == 1
    assert j.run_once() == 0
    turn = store.db["turns"].get(tid)
    assert j.process(turn) == 0  # a racing second run adds nothing
    assert len(signal_sets(store, tid)) == 1
    assert store.db["signal_votes"].count == 3


def test_the_judge_extractor_writes_hint_votes(store: Store, judge: Judge) -> None:
    tid = exchange(store)
    job(store, judge, hint_extractor="judge", judge_votes=2).run_once()
    [sig] = signal_sets(store, tid)
    kinds = [v["kind"] for v in store.db["signal_votes"].rows_where("signal_id = ?", [sig["id"]])]
    assert kinds == ["judge", "judge", "hint", "hint"]
    for v in store.db["signal_votes"].rows_where("kind = 'hint'"):
        assert parse_boxed(v["raw_text"], allowed=(1, -1)) == v["score"]
        assert (v["hint"] is not None) <= (v["score"] == 1)


def test_opted_out_turns_never_yield_signals(store: Store, judge: Judge) -> None:
    tid = exchange(store, learn=False)
    assert job(store, judge).run_once() == 0
    assert signal_sets(store, tid) == [] and store.db["samples"].count == 0


def test_feedback_overrides_and_replaces_the_judged_set(store: Store, judge: Judge) -> None:
    tid = exchange(store)
    j = job(store, judge)
    j.run_once()
    time.sleep(0.01)
    record.add_feedback(store, tid, -1, "Use one word.")
    assert j.run_once() == 1
    [sig] = signal_sets(store, tid)
    assert (sig["score"], sig["hint"], sig["hint_source"]) == (-1, "Use one word.", "feedback")
    sample = next(store.db["samples"].rows_where("turn_id = ?", [tid]))
    assert (sample["kind"], sample["reward"]) == ("opd+rl", -1.0)
    assert store.db["signal_votes"].count == 0  # the judge was not needed
    assert j.run_once() == 0


def test_a_failing_judge_call_is_retried_with_backoff(
    home: Path, any_gguf: Path, store: Store
) -> None:
    tid = exchange(store, answer="word " * 400)  # longer than the small judge's context
    small = Judge(any_gguf, n_ctx=256, max_tokens=8)
    try:
        j = job(store, small)
        assert j.run_once() == 0
        attempt = store.db["signal_attempts"].get(tid)
        assert attempt["attempts"] == 1 and "does not fit" in attempt["last_error"]
        assert attempt["next_try_at"] > time.time() + 20
        assert j.run_once() == 0  # not due yet: not retried, not dropped
        assert store.db["signal_attempts"].get(tid)["attempts"] == 1
    finally:
        small.close()
    store.db["signal_attempts"].update(tid, {"next_try_at": time.time() - 1})
    big = Judge(any_gguf, n_ctx=2048, max_tokens=8)
    try:
        assert job(store, big).run_once() == 1
    finally:
        big.close()
    assert len(signal_sets(store, tid)) == 1
    assert store.db["signal_attempts"].count == 0


def test_approval_and_veto(store: Store, judge: Judge) -> None:
    tid = exchange(store, reply=None)
    record.add_feedback(store, tid, -1, "Answer in one word.")
    job(store, judge, require_approval=True).run_once()
    [sig] = review.list_signals(store)
    assert sig["sample_status"] == "pending"
    assert review.list_signals(store, "pending")[0]["id"] == sig["id"]
    assert review.set_status(store, sig["id"], "approved")["sample_status"] == "approved"
    assert review.set_status(store, sig["id"], "vetoed")["sample_status"] == "vetoed"
    store.db["samples"].update(sig["sample_id"], {"status": "used"})
    with pytest.raises(review.ReviewError, match="already trained"):
        review.set_status(store, sig["id"], "approved")
    with pytest.raises(record.NotFound):
        review.set_status(store, 999, "vetoed")


def test_the_signals_commands_show_and_review(store: Store, judge: Judge) -> None:
    from typer.testing import CliRunner

    from clawd.cli.main import app

    tid = exchange(store)
    rated = exchange(store, reply=None)
    record.add_feedback(store, rated, -1, "Shorter.")
    assert job(store, judge).run_once() == 2
    judged = next(iter(signal_sets(store, tid)))
    fb = next(iter(signal_sets(store, rated)))
    run = CliRunner().invoke
    listed = run(app, ["signals", "list"])
    assert listed.exit_code == 0 and "Shorter." in listed.stdout
    shown = run(app, ["signals", "show", str(judged["id"])])
    assert shown.exit_code == 0, shown.output
    assert "judged by fixture" in shown.stdout and "vote 2 (judge)" in shown.stdout
    assert "judged by" not in run(app, ["signals", "show", str(fb["id"])]).stdout  # feedback
    assert run(app, ["signals", "veto", str(fb["id"])]).exit_code == 0
    assert run(app, ["signals", "list", "--status", "vetoed"]).stdout.count("Shorter.") == 1
    assert run(app, ["signals", "approve", str(fb["id"])]).exit_code == 0
    sample = next(iter(store.db["samples"].rows_where("signal_id = ?", [fb["id"]])))
    assert sample["status"] == "approved"
    missing = run(app, ["signals", "show", "999"])
    assert missing.exit_code == 1 and "no signal with id 999" in missing.output


def test_a_starting_job_reports_the_same_keys_with_unknowns(store: Store, judge: Judge) -> None:
    started = status_dict(job(store, judge), store)
    starting = status_dict(None, store, starting=True)
    assert set(starting) == set(started) and starting["starting"] and not started["starting"]
    assert (starting["mode"], starting["pending"], started["mode"]) == (None, None, "generate")
    assert status_dict(None, store) == {"enabled": False}


def test_a_tools_output_is_scored_by_its_own_rules_never_the_judge(store: Store) -> None:
    """An agent's tool result is no person's reply: an error the call caused is -1, a result
    that looks fine abstains (no sample), and no judge runs for either."""
    from clawd.signals.job import process_turn
    from clawd.signals.toolresult import tool_outcome

    def called(output: str) -> str:
        q = {"role": "user", "content": f"Run the tests ({time.time()})"}
        call = [{"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]
        ctx = record.begin(store, [q], None, True)
        tid = record.record_turn(store, ctx, response_text="", tool_calls=call, model="m")
        said = {"role": "assistant", "content": "", "tool_calls": call}
        record.begin(
            store, [q, said, {"role": "tool", "tool_call_id": "c1", "content": output}], None, True
        )
        turn = store.db["turns"].get(tid)
        assert process_turn(store, Settings(), turn, scorer=None) == 1  # no judge needed
        return tid

    failed = called("Traceback (most recent call last):\n  ...\nKeyError: 'x'")
    [sig] = signal_sets(store, failed)
    assert sig["score"] == -1 and review.show_signal(store, sig["id"])["sample"]["kind"] == "rl"
    [vote] = list(store.db["signal_votes"].rows_where("signal_id = ?", [sig["id"]]))
    assert vote["kind"] == "tool" and "Traceback" in vote["raw_text"]
    fine = called('{"passed": 12, "failed": 0}')
    [sig] = signal_sets(store, fine)
    assert sig["score"] == 0 and review.show_signal(store, sig["id"])["sample"] is None
    assert [tool_outcome(t) for t in ("exit code 2", '{"error": "no city"}', "done")] == [
        -1,
        -1,
        0,
    ]
