"""Learning signals, the pure part: judge prompts, parsing votes, majority, hints, samples.

A turn's *next state* says two things (DESIGN.md). The **evaluative** judge sees the user's
request, the answer and what came next, and votes ``\\boxed{1}``
(the user moved on / thanked / a tool succeeded), ``\\boxed{-1}`` (redo, correction, rephrase,
a change request, a tool error the answer caused) or ``\\boxed{0}``; the majority of valid votes
is the reward, a tie or no valid vote gives 0. A vote whose text reaches no score abstains:
a wrong-signed signal is worse than none. The **directive** extractor says whether the next
state reveals hindsight and, if so, writes a hint between ``[HINT_START]`` and ``[HINT_END]``;
hints over 10 characters count and the longest wins. Explicit feedback beats both.

Combination table (one sample per turn at most)::

    hint accepted | eval is +1/-1 | sample
    yes           | yes           | "opd+rl", reward = eval
    yes           | no            | "opd"
    no            | yes           | "rl"
    no            | no            | none

No model and no database here; ``clawd.signals.judge`` runs the calls and writes the results.

Run alone to parse a judge output::

    python -m clawd.signals.rules 'The user corrected it. \\boxed{-1}'
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any

BOXED_RE = re.compile(r"\\boxed\{\s*([^{}]*?)\s*\}")
HINT_RE = re.compile(r"\[HINT_START\](.*?)(?:\[HINT_END\]|$)", re.DOTALL)
MIN_HINT_CHARS = 10

JUDGE_SYSTEM = (
    "You grade an AI assistant's answer by what happened right after it: the user's next "
    "message or a tool's output."
)
JUDGE_TEMPLATE = """## The user's request
{request}

## The assistant's answer
{response}

## What came next (from the {role})
{next_state}

## How to score
\\boxed{{1}}: the user moves on to something new, thanks the assistant, or builds on the answer; \
a tool reports success.
\\boxed{{-1}}: the user asks to redo it, corrects it, complains, or rephrases the same request; \
a tool error caused by the answer. Asking for a change is negative, not neutral.
\\boxed{{0}}: unclear, or unrelated to the answer.

Think in one or two sentences, then give the score as \\boxed{{1}}, \\boxed{{-1}} or \
\\boxed{{0}}."""

HINT_SYSTEM = (
    "You read an AI assistant's answer and what came after it, and find hindsight: what the "
    "assistant should have done differently."
)
HINT_TEMPLATE = """## The user's request
{request}

## The assistant's answer
{response}

## What came next (from the {role})
{next_state}

## Your task
Does what came next reveal something that would have made the answer better (a preference, a \
correction, a missing step)? If yes, answer \\boxed{{1}} and then write a concrete, actionable \
hint of 1-3 sentences addressed to the assistant between [HINT_START] and [HINT_END]. If not, \
answer \\boxed{{-1}}."""


@dataclass(frozen=True)
class Exchange:
    """What a judge reads: the user's request, the answer, and what came next (its role)."""

    request: str
    answer: str
    reply: str
    role: str = "user"


NO_REQUEST = "(not recorded)"


def request_of(prompt_messages: list[dict[str, Any]]) -> str:
    """The user's request of a turn: the text of the last user message of its prompt."""
    for message in reversed(prompt_messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # OpenAI content parts
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "").strip() or NO_REQUEST
    return NO_REQUEST


def judge_messages(ex: Exchange) -> list[dict[str, str]]:
    text = JUDGE_TEMPLATE.format(
        request=ex.request, response=ex.answer, role=ex.role, next_state=ex.reply
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": text}]


def hint_messages(ex: Exchange) -> list[dict[str, str]]:
    text = HINT_TEMPLATE.format(
        request=ex.request, response=ex.answer, role=ex.role, next_state=ex.reply
    )
    return [{"role": "system", "content": HINT_SYSTEM}, {"role": "user", "content": text}]


def parse_boxed(text: str, allowed: tuple[int, ...] = (1, 0, -1)) -> int | None:
    """The value of the last ``\\boxed{...}`` if it is one of ``allowed``; else None."""
    found = BOXED_RE.findall(text)
    if not found:
        return None
    value = found[-1].replace(" ", "")
    if not re.fullmatch(r"[+-]?\d+", value):
        return None
    score = int(value)
    return score if score in allowed else None


def majority(votes: list[int | None]) -> int:
    """Majority of the valid votes; a tie or no valid vote gives 0."""
    counts = Counter(v for v in votes if v is not None).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return 0
    return counts[0][0]


def parse_hint(text: str) -> tuple[int | None, str | None]:
    """(decision, hint) of one extractor output; the hint only when the decision is 1."""
    decision = parse_boxed(text, allowed=(1, -1))
    if decision != 1:
        return decision, None
    found = HINT_RE.findall(text)
    hint = found[-1].strip() if found else ""
    return decision, hint or None


def select_hint(outputs: list[tuple[int | None, str | None]]) -> str | None:
    """The longest hint among votes that said 1 with a hint over MIN_HINT_CHARS characters."""
    good = [h for d, h in outputs if d == 1 and h and len(h) > MIN_HINT_CHARS]
    return max(good, key=len) if good else None


def sample_kind(score: int, hint: str | None) -> str | None:
    """The combination table."""
    if hint and score != 0:
        return "opd+rl"
    if hint:
        return "opd"
    if score != 0:
        return "rl"
    return None


# What each training method (``train_method``) can learn from: a sample of another kind gives it
# an advantage of 0 on every token, so training on it alone would change nothing.
LEARNABLE_KINDS: dict[str, tuple[str, ...]] = {
    "combined": ("opd+rl", "opd", "rl"),
    "opd": ("opd+rl", "opd"),
    "rl": ("opd+rl", "rl"),
}
NEEDS = {"opd": "a hint", "rl": "a +1 or -1 score"}  # combined learns from every sample


def nothing_to_learn(approved: int, learnable: int, method: str) -> str | None:
    """Why a run of ``method`` would learn nothing from the waiting samples (None if it would)."""
    if approved == 0:
        return "no approved samples to train on: reply to a few answers first"
    if learnable == 0:
        return (
            f"nothing to learn: training method '{method}' needs samples with {NEEDS[method]},"
            f" and none of the {approved} approved samples has one (they wait for"
            " train_method = combined)"
        )
    return None


def nothing_to_tell_apart(taken: list[dict[str, Any]], method: str) -> str | None:
    """Why the samples a run of ``method`` would take (new and replayed rows with ``kind``,
    ``reward`` and ``hint``) teach it nothing though each is learnable (None if they would).

    The reward term is centred on the run's mean reward (``losses.centred_rewards``): when every
    rewarded sample scored the same it is 0 on every token, and with no hint for the OPD term
    (``rl`` uses none) a run would only spend drift budget on its penalty and unlikelihood.
    """
    if not taken or (method != "rl" and any(r["hint"] for r in taken)):
        return None
    rewards = {float(r["reward"] or 0.0) for r in taken if "rl" in r["kind"].split("+")}
    if len(rewards) > 1:
        return None
    score = f"{next(iter(rewards)):+.0f}" if rewards else "0"
    if method != "rl":
        more = " and none has a hint", ", or for a reply that says what to change"
    elif any(r["hint"] for r in taken):
        more = "", " (train_method = combined would learn from their hints now)"
    else:
        more = "", ""
    return (
        f"nothing to learn yet: all {len(taken)} samples a run would take scored {score}"
        f"{more[0]}; the reward term learns only from how answers score against each other, so"
        f" the run would change nothing. They wait for an answer that scores otherwise{more[1]}"
    )


@dataclass(frozen=True)
class Decision:
    score: int
    hint: str | None
    hint_source: str | None  # "feedback", "judge" or "reply"
    kind: str | None


def decide(
    *,
    judge_votes: list[int | None],
    hint_outputs: list[tuple[int | None, str | None]],
    extractor: str,
    next_role: str | None,
    next_content: str | None,
    feedback: tuple[int, str | None] | None = None,
) -> Decision:
    """Combine votes, hints and explicit feedback into one decision for a turn.

    ``extractor`` is ``"judge"`` (hints written by the model) or ``"reply"`` (the user's
    corrective next message itself is the hint when the judge scored -1: small models write
    poor hints). Explicit feedback wins: its rating is the reward and a thumbs-down comment is
    the hint.
    """
    if feedback is not None:
        rating, comment = feedback
        hint = comment.strip() if rating < 0 and comment and comment.strip() else None
        return Decision(rating, hint, "feedback" if hint else None, sample_kind(rating, hint))
    score = majority(judge_votes)
    if extractor == "reply":
        ok = score == -1 and next_role == "user" and next_content and next_content.strip()
        hint, source = (next_content.strip(), "reply") if ok else (None, None)
    else:
        hint = select_hint(hint_outputs)
        source = "judge" if hint else None
    return Decision(score, hint, source, sample_kind(score, hint))


if __name__ == "__main__":
    text = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    print("vote:", parse_boxed(text), " hint:", parse_hint(text))
