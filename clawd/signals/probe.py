"""The probe: scores a reply from the judge model's hidden states, without making it write.

A small model asked to *write* a verdict votes +1 on almost everything (the majority-label bias
of DESIGN.md's last section); the same model's hidden states do tell complaints from thanks. So
the probe reads them: one forward pass over a fixed frame around the reply
(``The user replied to the answer: "<reply>"`` + ``In one word, the user was``) on an embedding
context of the adapter-free judge model (pooling none; the file is mmapped and shared).
Features: the mean of the reply's token states, the frame's last token state, and the cheap
cues of ``clawd.signals.cues`` (which read the request and the answer too). A second pass over
the request (its mean state and its cosine to the reply's) was measured and dropped: it decided
no more turns correctly in cross-validation (900 vs 901 of 1500) and cost 40% more time.
A multinomial logistic regression (``clawd.signals.fitprobe``) gives p(-1), p(0), p(+1); the
probe votes -1 or +1 only when that probability passes its threshold, else 0 (abstains).

Weights belong to one model file (its sha256): shipped for the default model, fitted once on
the labelled exchanges that ship with clawd and cached under ``CLAWD_HOME/cache/probe/`` for
any other. Before each batch of tokens it waits on ``yield_to`` (the engine's idle event), so a
waiting user goes first.

Run alone to score one exchange with the configured judge model::

    python -m clawd.signals.probe "Capital of France?" "Paris is the capital." "no, one word"
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clawd.signals import cues
from clawd.signals.judge import JudgeError
from clawd.signals.rules import Exchange

log = logging.getLogger("clawd.signals")
FRAME_HEAD = 'The user replied to the answer: "'
FRAME_TAIL = '"\nIn one word, the user was'
MAX_REPLY_TOKENS = 160
N_CTX = 512
BATCH = 64  # tokens decoded between two checks for a waiting user
LABELS = (-1, 0, 1)
FORMAT = 1  # the weights file's layout


@dataclass
class ProbeWeights:
    """A fitted probe for one model: standardisation, the regression, the abstain thresholds."""

    model_sha256: str
    model_name: str
    dims: int
    features: list[str]
    mean: list[float]
    scale: list[float]
    coef: list[list[float]]  # (3, n_features), rows for LABELS
    intercept: list[float]
    threshold_neg: float
    threshold_pos: float
    fit: dict[str, Any]
    format: int = FORMAT

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)), encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> ProbeWeights:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise ValueError(f"{path}: probe weights of format {data.get('format')}, not {FORMAT}")
        return cls(**data)

    def proba(self, x: np.ndarray) -> np.ndarray:
        """p(-1), p(0), p(+1) for a feature row (or rows)."""
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        logits = z @ np.asarray(self.coef).T + np.asarray(self.intercept)
        logits = logits - logits.max(axis=-1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=-1, keepdims=True)

    def score(self, p: np.ndarray) -> int:
        """The vote for probabilities ``p``: -1 or +1 past its threshold, else 0 (abstain)."""
        neg, pos = float(p[0]), float(p[2])
        if neg >= self.threshold_neg and neg >= pos:
            return -1
        if pos >= self.threshold_pos and pos > neg:
            return 1
        return 0


DATA = Path(__file__).parent / "data"


def weights_name(model_sha256: str) -> str:
    return f"probe-{model_sha256[:16]}.json"


def weights_places(model_sha256: str, home: Path | None) -> list[Path]:
    """Where weights for a model file may be: shipped with clawd, then the user's cache."""
    name = weights_name(model_sha256)
    return [DATA / name] + ([home / "cache" / "probe" / name] if home else [])


def find_weights(model_sha256: str, home: Path | None) -> ProbeWeights | None:
    """The shipped or cached weights for a model file, or None (a damaged file is skipped)."""
    for path in weights_places(model_sha256, home):
        if path.exists():
            try:
                return ProbeWeights.read(path)
            except (ValueError, TypeError, json.JSONDecodeError) as exc:
                log.warning("probe: ignoring %s: %s", path, exc)
    return None


def feature_names(dims: int) -> list[str]:
    return [
        *(f"reply_mean_{i}" for i in range(dims)),
        *(f"frame_last_{i}" for i in range(dims)),
        *cues.NAMES,
    ]


class Probe:
    def __init__(
        self,
        model_path: Path,
        *,
        home: Path | None = None,
        n_threads: int = 0,
        yield_to: threading.Event | None = None,
        weights: ProbeWeights | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.home = home
        self.n_threads = n_threads or None
        self.yield_to = yield_to
        self.weights = weights
        self.llm: Any = None
        self._lock = threading.Lock()

    def open(self) -> None:
        """Open the embedding context (no weights needed: fitting uses this)."""
        import llama_cpp

        if self.llm is not None:
            return
        try:
            self.llm = llama_cpp.Llama(
                str(self.model_path),
                embedding=True,
                pooling_type=llama_cpp.LLAMA_POOLING_TYPE_NONE,
                n_ctx=N_CTX,
                n_batch=N_CTX,
                n_ubatch=N_CTX,
                n_threads=self.n_threads,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise JudgeError(f"cannot load {self.model_path} for the probe: {exc}") from exc

    def load(self) -> None:
        """Open the model and check the weights (``clawd.signals.fitprobe.prepare`` finds them)."""
        self.open()
        if self.weights is None:
            raise JudgeError("the probe has no weights: clawd.signals.fitprobe.prepare finds them")
        if self.weights.dims != self.dims:
            raise JudgeError(
                f"probe weights are for {self.weights.dims}-dimensional states; "
                f"{self.model_path.name} has {self.dims}"
            )

    def close(self) -> None:
        if self.llm is not None:
            self.llm.close()
            self.llm = None

    @property
    def dims(self) -> int:
        return int(self.llm.n_embd())

    def _tokens(self, text: str, limit: int) -> list[int]:
        ids = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        return ids[:limit]

    def states(self, tokens: list[int]) -> np.ndarray:
        """The last layer's state of every token, shape (len(tokens), dims)."""
        import llama_cpp

        llm = self.llm
        with self._lock:
            llm._ctx.kv_cache_clear()
            out = np.empty((len(tokens), self.dims), dtype=np.float32)
            for start in range(0, len(tokens), BATCH):
                if self.yield_to is not None:
                    self.yield_to.wait()
                chunk = tokens[start : start + BATCH]
                llm._batch.set_batch(chunk, n_past=start, logits_all=True)
                llm._ctx.decode(llm._batch)
                ptr = llama_cpp.llama_get_embeddings(llm._ctx.ctx)
                if not ptr:
                    raise JudgeError("the probe's context returned no token states")
                out[start : start + len(chunk)] = np.ctypeslib.as_array(
                    ptr, shape=(len(chunk), self.dims)
                )
            llm._ctx.kv_cache_clear()
        return out

    def featurize(self, ex: Exchange) -> np.ndarray:
        """The probe's feature row for ``ex`` (see ``feature_names``)."""
        bos = [self.llm.token_bos()] if self.llm.token_bos() >= 0 else []
        head = bos + self._tokens(FRAME_HEAD, 32)
        reply = self._tokens(ex.reply.strip() or "(nothing)", MAX_REPLY_TOKENS)
        tail = self._tokens(FRAME_TAIL, 32)
        h = self.states(head + reply + tail)
        reply_mean = h[len(head) : len(head) + len(reply)].mean(axis=0)
        row = np.concatenate([reply_mean, h[-1], np.asarray(cues.features(ex))])
        return row.astype(np.float64)

    def proba(self, ex: Exchange) -> np.ndarray:
        if self.weights is None:
            raise JudgeError("the probe is not loaded")
        return self.weights.proba(self.featurize(ex))

    def vote(self, ex: Exchange) -> tuple[int, str]:
        """(score, raw text): the vote and the probabilities behind it."""
        p = self.proba(ex)
        w = self.weights
        assert w is not None
        score = w.score(p)
        raw = (
            f"probe: p(-1) {p[0]:.3f}  p(0) {p[1]:.3f}  p(+1) {p[2]:.3f}; votes -1 from "
            f"{w.threshold_neg:.3f}, +1 from {w.threshold_pos:.3f} -> \\boxed{{{score}}}"
        )
        return score, raw


if __name__ == "__main__":
    from clawd.config import clawd_home, load_settings
    from clawd.models import resolve, sha256_file

    home = clawd_home()
    s = load_settings(home)
    path = resolve(s.judge_model or s.model, home)
    weights = find_weights(sha256_file(path), home)
    if weights is None:
        raise SystemExit(f"no probe weights for {path.name}: python -m clawd.signals.fitprobe")
    probe = Probe(path, home=home, weights=weights)
    probe.load()
    print(probe.vote(Exchange(*sys.argv[1:4]))[1])
    probe.close()
