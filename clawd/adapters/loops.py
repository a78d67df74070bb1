"""Loops: what the gate calls a degenerate answer, and whether a user would see the loop.

The gate's ability check (``clawd.adapters.gate``) reads one greedy answer per prompt:
``degeneration`` finds the empty and repetitive answers and counts the distinct openings, and
``general_ability`` rejects an adapter that degenerates on more prompts than the base model by
more than chance (a paired sign test), not one whose loop merely sits on another prompt.

The daemon samples (temperature 0.7 unless a client asks for another), and the loops at stake
are often greedy near-ties: of 9 prompts the gate rejected adapters for, 6 never looped in 8
answers sampled at 0.7 (docs/experiments.md, "A loop guard inside the update"). ``confirm`` asks
each such prompt again n times at the daemon's sampler (``TEMPERATURE``, top-p 1, no top-k or
min-p, seeds 0..n-1), with the candidate and with the base model; the loop counts only when the
candidate's sampled answers degenerate in at least ``MARGIN`` more of the n than the base
model's (same seeds: a paired comparison). An adapter that loops on everything loops when
sampled too; one greedy path tipped into a loop does not, and is excused. The gate does this
with its ``loop_samples`` (the ``gate_loop_samples`` setting) above 0.

It has no state of its own: the gate calls it (``clawd.adapters.gate.evaluate``, ``loop_samples``
from the daemon's ``gate_loop_samples``), and ``tests/test_loops.py`` runs ``sampled_loops``
and ``confirm`` alone on the tiny model.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# The daemon's default sampling temperature (clawd.serving.chat.DEFAULT_TEMPERATURE; a test
# keeps the two equal): the answers a user gets unless a client asks for another.
TEMPERATURE = 0.7
# How many more of the n sampled answers must degenerate with the candidate than with the base
# model for a greedy loop to count (8 samples: a quarter of them).
MARGIN = 2
# Significance of the general-ability check's sign test: an adapter fails when its excess of
# degenerate answers over the base model's would arise by chance less than 5% of the time.
ALPHA = 0.05


def _repetitive(content: list[int]) -> bool:
    """A run of 8 equal tokens, or under 40% distinct trigrams in 12 tokens or more."""
    run = longest = 1
    for x, y in itertools.pairwise(content):
        run = run + 1 if x == y else 1
        longest = max(longest, run)
    trigrams = list(zip(content, content[1:], content[2:], strict=False))
    return longest >= 8 or (len(content) >= 12 and len(set(trigrams)) < 0.4 * len(trigrams))


def degeneration(answers: list[list[int]], is_end: Any) -> dict[str, Any]:
    """Shares of ``answers`` (token lists) that are empty (no token before the end of turn),
    repetitive (``_repetitive``) and of distinct openings (distinct first-8-token openings over
    all answers: 1.0 when every prompt gets its own answer); ``at``, the indices of the empty or
    repetitive answers, and the number of ``answers``."""
    contents = [[t for t in a if not is_end(t)] for a in answers]
    at = [i for i, c in enumerate(contents) if not c or _repetitive(c)]
    empty = sum(not contents[i] for i in at)
    n = max(len(answers), 1)
    return {
        "empty": empty / n,
        "repetitive": (len(at) - empty) / n,
        "degenerate": len(at) / n,
        "distinct": len({tuple(c[:8]) for c in contents}) / n,
        "at": at,
        "answers": len(answers),
    }


def new_loops(base: dict[str, Any], candidate: dict[str, Any]) -> list[int]:
    """The prompts whose answer degenerates in ``candidate`` and not in ``base`` (two
    ``degeneration`` results on the same prompts)."""
    return sorted(set(candidate["at"]) - set(base["at"]))


def excess_pvalue(new: int, gone: int) -> float:
    """One-sided exact sign test (McNemar's, exact) on paired answers: the probability of at
    least ``new`` of ``new + gone`` discordant prompts going the candidate's bad way if loops
    only moved between prompts by chance (each discordant prompt a fair coin). 1.0 when the
    candidate loses no more answers than it repairs."""
    n = new + gone
    if new <= gone:
        return 1.0
    return sum(math.comb(n, k) for k in range(new, n + 1)) / 2**n


def general_ability(
    base: dict[str, Any],
    candidate: dict[str, Any],
    alpha: float = ALPHA,
    excused: Iterable[int] = (),
) -> tuple[bool, list[int]]:
    """The general-ability verdict from two ``degeneration`` results on the same prompts, and
    the prompts where the candidate's answer degenerates and the base model's does not.

    Decided on rates, not on which prompt a loop sits on: the candidate fails when it
    degenerates on more prompts than the base model by more than chance explains, the exact
    sign test on the prompts where the two differ (``excess_pvalue`` below ``alpha``). With 32
    prompts and none repaired, 5 new loops fail and 4 pass; a loop that moves from one prompt
    to another (1 new, 1 gone) is noise and passes. Before, any one new loop failed: a 5-step
    update (KL 0.009) was rejected for moving the base model's own "Boil an egg:\n\nBoil an
    egg: ..." from one prompt to another (docs/benchmarks.md, "The gate on rates"). The
    candidate may also have at most 8 fewer distinct openings (of 32 prompts, a quarter; many
    prompts, one answer: a collapse that is not repetitive). The ``excused`` prompts do not
    count (``clawd.adapters.loops.confirm``: their loop is one greedy path, rarely seen sampled)."""
    new = sorted(set(new_loops(base, candidate)) - set(excused))
    gone = set(base["at"]) - set(candidate["at"])
    fewer = round((base["distinct"] - candidate["distinct"]) * candidate["answers"])
    return excess_pvalue(len(new), len(gone)) >= alpha and fewer <= 8, new


def sampled_loops(
    scorer: Any, prompt: list[int], samples: int, max_tokens: int, temperature: float = TEMPERATURE
) -> int:
    """How many of ``samples`` answers to ``prompt``, sampled at ``temperature`` with seeds
    0..samples-1 on the ``clawd.adapters.gate.Scorer``'s current adapter, are empty or repetitive
    (``degeneration`` on their first ``max_tokens`` tokens)."""
    answers = [scorer.answer(prompt, max_tokens, temperature, seed) for seed in range(samples)]
    return len(degeneration(answers, scorer.is_end)["at"])


def counts(candidate: int, base: int, margin: int = MARGIN) -> bool:
    """Whether a greedy loop counts, from the number of sampled answers that degenerate with the
    candidate and with the base model (same prompts, same seeds): at least ``margin`` more."""
    return candidate >= base + margin


def confirm(
    scorer: Any,
    candidate: Path,
    prompts: list[list[int]],
    flagged: list[int],
    samples: int,
    max_tokens: int,
    margin: int = MARGIN,
) -> tuple[list[int], list[dict[str, int]]]:
    """For the ``flagged`` prompts (indices into ``prompts`` whose greedy answer degenerates
    with ``candidate`` and not with the base model), the sampled loop counts of both models and
    the prompts whose loop is excused (``counts`` is false). Leaves ``candidate`` set on
    ``scorer``. Returns (excused indices, one ``{"prompt", "candidate", "base", "samples"}``
    per flagged prompt)."""
    if not flagged or samples <= 0:
        return [], []
    scorer.set_adapter(None)
    base = {i: sampled_loops(scorer, prompts[i], samples, max_tokens) for i in flagged}
    scorer.set_adapter(candidate)
    mine = {i: sampled_loops(scorer, prompts[i], samples, max_tokens) for i in flagged}
    excused = [i for i in flagged if not counts(mine[i], base[i], margin)]
    figures = [
        {"prompt": i, "candidate": mine[i], "base": base[i], "samples": samples} for i in flagged
    ]
    return excused, figures
