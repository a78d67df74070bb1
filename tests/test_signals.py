"""The pure signal rules, with scripted judge outputs."""

import pytest

from clawd.signals.rules import (
    LEARNABLE_KINDS,
    NO_REQUEST,
    Exchange,
    decide,
    hint_messages,
    judge_messages,
    majority,
    nothing_to_learn,
    nothing_to_tell_apart,
    parse_boxed,
    parse_hint,
    request_of,
    sample_kind,
    select_hint,
)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("The user corrected it. \\boxed{-1}", -1),
        ("\\boxed{1}", 1),
        ("first \\boxed{1} then changed my mind \\boxed{0}", 0),  # the last box counts
        ("\\boxed{ +1 }", 1),
        ("\\boxed{2}", None),  # out of scale
        ("\\boxed{yes}", None),
        ("\\boxed{-1", None),  # never closed
        ("no box at all: -1", None),
        ("", None),
    ],
)
def test_parse_boxed(text: str, expected: int | None) -> None:
    assert parse_boxed(text) == expected


def test_parse_boxed_respects_the_allowed_values() -> None:
    assert parse_boxed("\\boxed{0}", allowed=(1, -1)) is None


@pytest.mark.parametrize(
    "votes,expected",
    [
        ([1, 1, -1], 1),
        ([-1, None, -1], -1),
        ([1, -1], 0),  # tie
        ([1, -1, 0], 0),  # three-way tie
        ([None, None, None], 0),  # no valid vote
        ([], 0),
        ([0, 0, 1], 0),
    ],
)
def test_majority(votes: list[int | None], expected: int) -> None:
    assert majority(votes) == expected


def test_hints_are_parsed_filtered_and_the_longest_wins() -> None:
    out = "It was long. \\boxed{1}\n[HINT_START]Answer in one word only.[HINT_END]"
    assert parse_hint(out) == (1, "Answer in one word only.")
    assert parse_hint("\\boxed{-1} [HINT_START]ignored[HINT_END]") == (-1, None)
    assert parse_hint("\\boxed{1} [HINT_START] unterminated hint text") == (
        1,
        "unterminated hint text",
    )
    assert parse_hint("\\boxed{1} but no hint") == (1, None)
    outputs = [
        (1, "short"),
        (1, "Check the file before editing it."),
        (-1, "x" * 50),
        (1, "Use no bullet lists."),
        (None, None),
    ]
    assert select_hint(outputs) == "Check the file before editing it."
    assert select_hint([(1, "ten chars!")]) is None  # must be longer than 10 characters


@pytest.mark.parametrize(
    "score,hint,kind",
    [
        (1, "a hint here", "opd+rl"),
        (-1, "a hint here", "opd+rl"),
        (0, "a hint here", "opd"),
        (1, None, "rl"),
        (-1, None, "rl"),
        (0, None, None),
    ],
)
def test_combination_table(score: int, hint: str | None, kind: str | None) -> None:
    assert sample_kind(score, hint) == kind


def test_nothing_to_learn_says_why() -> None:
    assert nothing_to_learn(3, 1, "opd") is None
    assert "reply to a few answers" in str(nothing_to_learn(0, 0, "combined"))
    why = str(nothing_to_learn(4, 0, "rl"))
    assert "'rl' needs samples with a +1 or -1 score" in why and "none of the 4" in why
    assert set(LEARNABLE_KINDS["opd"]) | set(LEARNABLE_KINDS["rl"]) == set(
        LEARNABLE_KINDS["combined"]
    )


def test_nothing_to_tell_apart_says_why() -> None:
    def row(reward: float, hint: str | None = None) -> dict:
        return {"kind": ("opd+rl" if hint else "rl"), "reward": reward, "hint": hint}

    complaints = [row(-1), row(-1), row(-1)]
    why = str(nothing_to_tell_apart(complaints, "rl"))
    assert "all 3 samples a run would take scored -1" in why and "scores otherwise" in why
    assert "combined" not in why  # no hint: switching methods would not help either
    why = str(nothing_to_tell_apart(complaints, "combined"))
    assert "scored -1 and none has a hint" in why and "says what to change" in why
    assert "scored +1" in str(nothing_to_tell_apart([row(1)], "opd"))
    assert nothing_to_tell_apart([*complaints, row(1)], "rl") is None  # a thanked one differs
    hinted = [*complaints, row(-1, "Be brief.")]
    assert nothing_to_tell_apart(hinted, "combined") is None  # the OPD term learns the hint
    assert "train_method = combined" in str(nothing_to_tell_apart(hinted, "rl"))  # rl uses none
    assert nothing_to_tell_apart([], "rl") is None  # nothing waits: nothing_to_learn says so


def test_judge_extractor() -> None:
    d = decide(
        judge_votes=[-1, -1, 1],
        hint_outputs=[(1, "Answer in one word only.")],
        extractor="judge",
        next_role="user",
        next_content="too long",
    )
    assert (d.score, d.hint, d.hint_source, d.kind) == (
        -1,
        "Answer in one word only.",
        "judge",
        "opd+rl",
    )
    d = decide(
        judge_votes=[1, 0, -1],
        hint_outputs=[(1, "Answer in one word only.")],
        extractor="judge",
        next_role="user",
        next_content="ok",
    )
    assert (d.score, d.kind) == (0, "opd")


def test_reply_extractor_uses_the_correction_itself() -> None:
    d = decide(
        judge_votes=[-1, -1, 0],
        hint_outputs=[],
        extractor="reply",
        next_role="user",
        next_content="  No, just one word please. ",
    )
    assert (d.hint, d.hint_source, d.kind) == ("No, just one word please.", "reply", "opd+rl")
    d = decide(
        judge_votes=[1, 1, 1],
        hint_outputs=[],
        extractor="reply",
        next_role="user",
        next_content="Thanks!",
    )
    assert (d.hint, d.kind) == (None, "rl")
    d = decide(
        judge_votes=[-1, -1, -1],
        hint_outputs=[],
        extractor="reply",
        next_role="tool",
        next_content="Error: file not found",
    )
    assert (d.hint, d.kind) == (None, "rl")  # a tool's output is not the user's instruction


def test_explicit_feedback_wins() -> None:
    d = decide(
        judge_votes=[1, 1, 1],
        hint_outputs=[(1, "A judged hint, long enough.")],
        extractor="judge",
        next_role="user",
        next_content="thanks",
        feedback=(-1, "Do not use bullet lists."),
    )
    assert (d.score, d.hint, d.hint_source, d.kind) == (
        -1,
        "Do not use bullet lists.",
        "feedback",
        "opd+rl",
    )
    d = decide(
        judge_votes=[-1],
        hint_outputs=[],
        extractor="reply",
        next_role="user",
        next_content="redo",
        feedback=(1, "great"),
    )
    assert (d.score, d.hint, d.kind) == (1, None, "rl")  # a thumbs-up comment is not a hint


def test_judge_prompt_carries_the_request_the_answer_and_the_next_state() -> None:
    ex = Exchange("Fix the build.", "The answer.", "Error: exit 1", role="tool")
    for msgs in (judge_messages(ex), hint_messages(ex)):
        text = msgs[-1]["content"]
        assert "Fix the build." in text and "The answer." in text
        assert "from the tool" in text and "Error: exit 1" in text
        assert text.index("Fix the build.") < text.index("The answer.") < text.index("exit 1")
    assert "\\boxed{-1}" in judge_messages(ex)[-1]["content"]


def test_the_request_is_the_last_user_message() -> None:
    msgs = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": "An answer"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Second"}, {"type": "text", "text": "question"}],
        },
    ]
    assert request_of(msgs) == "Second question"
    assert request_of(msgs[:2]) == "First question"
    assert request_of([{"role": "system", "content": "x"}]) == NO_REQUEST


def test_a_vote_without_a_score_abstains() -> None:
    # A small model's vote that wandered off (as in the tea exchange) is no vote at all.
    wandered = "1. Boil the water. 2. Add the tea bag. The user's next message is:"
    assert parse_boxed(wandered) is None
    assert majority([parse_boxed(wandered), parse_boxed(wandered), None]) == 0
    assert majority([parse_boxed(wandered), -1, None]) == -1  # one real vote decides
