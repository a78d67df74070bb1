"""Does a reply state something that should last? A small text classifier that decides it.

A logistic regression over word (1-2) and character (3-5) n-grams of the reply, fitted on the
labelled replies shipped in ``clawd/signals/data/standing.jsonl`` (replies to an assistant's
answer in nine voices, each ``standing``, ``oneoff`` or ``neither``). It needs no language
model, so it works whatever model serves, and fits in about a second on first use (once per
process). ``clawd.signals.memory`` asks it whether a reply is standing and which of its clauses
says so; its rules then write the memory.

The benchmark ``bench/capture.py`` measures it on replies it was not fitted on (other voices,
other writers). Run alone to score replies::

    python -m clawd.signals.standing "fyi I'm on a Mac" "make this one shorter"
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "standing.jsonl"


@functools.lru_cache(maxsize=1)
def _model() -> Any:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    return fit([r["reply"] for r in rows], [r["label"] for r in rows])


def fit(replies: list[str], labels: list[str]) -> Any:
    """The classifier fitted on ``replies`` labelled ``standing`` / ``oneoff`` / ``neither``."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline, make_union

    features = make_union(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
        TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True),
    )
    model = make_pipeline(
        features, LogisticRegression(C=4.0, max_iter=2000, class_weight="balanced")
    )
    model.fit(replies, [label == "standing" for label in labels])
    return model


def probabilities(texts: list[str]) -> list[float]:
    """For each text, the probability that it states a standing preference or fact."""
    if not texts:
        return []
    return [float(p) for p in _model().predict_proba(texts)[:, 1]]


def probability(text: str) -> float:
    return probabilities([text])[0]


if __name__ == "__main__":
    for text, p in zip(sys.argv[1:], probabilities(sys.argv[1:]), strict=True):
        print(f"{p:.2f}  {text}")
