"""The configured judge as one object: what votes on a turn, and where hints come from.

Three ways to judge a reply (``clawd config show`` explains each setting):

- ``judge_mode = "probe"`` (default): one vote from the probe (``clawd.signals.probe``), a
  classifier over the adapter-free model's hidden states and cues of the reply. It does not
  need the model to write, which a 135M model cannot do reliably, and it abstains when unsure.
- ``judge_mode = "generate"``: ``judge_votes`` written votes of the local model
  (``clawd.signals.judge``); a vote without a ``\\boxed{}`` score abstains.
- ``judge_url`` set: written votes from an OpenAI-compatible endpoint
  (``clawd.signals.external``), whatever ``judge_mode`` says.

With ``hint_extractor = "judge"`` the hints are written by the local model or the endpoint in
every mode. A vote is ``(kind, raw_text, score, hint)``; kinds are ``probe``, ``judge`` and
``hint``. Votes are seeded by the turn, so a rerun after a crash asks the same questions.

Not meant to run alone: ``clawd signals score FILE`` uses it on a file of exchanges.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from clawd.config import Settings
from clawd.signals.rules import Decision, Exchange, decide, parse_boxed, parse_hint

if TYPE_CHECKING:
    from clawd.signals.probe import Probe

Vote = tuple[str, str, int | None, str | None]  # kind, raw text, score, hint
VOTE_KINDS = ("probe", "judge", "tool")  # the kinds whose score counts toward the majority


class Writer(Protocol):
    """A judge that writes: the local ``Judge`` or an ``ExternalJudge``."""

    def load(self) -> None: ...
    def close(self) -> None: ...
    def vote(self, ex: Exchange, *, temperature: float, seed: int) -> str: ...
    def hint(self, ex: Exchange, *, temperature: float, seed: int) -> str: ...


def seed_of(key: str, kind: str, i: int) -> int:
    """A vote's seed, from the turn: 31 bits, as OpenAI-compatible endpoints accept."""
    digest = hashlib.sha256(f"{key}/{kind}/{i}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class Scorer:
    def __init__(
        self,
        settings: Settings,
        *,
        name: str,
        model: str,
        mode: str,
        writer: Writer | None = None,
        probe: Probe | None = None,
    ) -> None:
        self.settings, self.name, self.model, self.mode = settings, name, model, mode
        self.writer, self.probe = writer, probe
        self._lock = threading.Lock()
        self._loaded = False

    def load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            if self.probe is not None:
                from clawd.signals.fitprobe import prepare

                prepare(self.probe)
            if self.writer is not None:
                self.writer.load()
            self._loaded = True

    def close(self) -> None:
        if self.probe is not None:
            self.probe.close()
        if self.writer is not None:
            self.writer.close()
        self._loaded = False

    def assess(self, ex: Exchange, key: str) -> list[Vote]:
        """Every vote on ``ex``: the evaluative votes, then the hint votes if hints are written."""
        self.load()
        s = self.settings
        votes: list[Vote] = []
        if self.probe is not None:
            score, raw = self.probe.vote(ex)
            votes.append(("probe", raw, score, None))
        elif self.writer is not None:
            for i in range(s.judge_votes):
                raw = self.writer.vote(
                    ex, temperature=s.judge_temperature, seed=seed_of(key, "judge", i)
                )
                votes.append(("judge", raw, parse_boxed(raw), None))
        if s.hint_extractor == "judge" and self.writer is not None:
            for i in range(s.judge_votes):
                raw = self.writer.hint(
                    ex, temperature=s.judge_temperature, seed=seed_of(key, "hint", i)
                )
                decision, hint = parse_hint(raw)
                votes.append(("hint", raw, decision, hint))
        return votes


def decision(
    settings: Settings,
    ex: Exchange,
    votes: list[Vote],
    feedback: tuple[int, str | None] | None = None,
) -> Decision:
    """The combination table over ``votes`` for ``ex`` (explicit ``feedback`` wins)."""
    return decide(
        judge_votes=[v[2] for v in votes if v[0] in VOTE_KINDS],
        hint_outputs=[(v[2], v[3]) for v in votes if v[0] == "hint"],
        extractor=settings.hint_extractor,
        next_role=ex.role if ex.reply else None,
        next_content=ex.reply or None,
        feedback=feedback,
    )


def make_scorer(
    settings: Settings,
    home: Path,
    judge_path: Path,
    judge_name: str,
    *,
    yield_to: threading.Event | None = None,
) -> Scorer:
    """The judge the settings ask for (nothing is loaded until the first ``assess``)."""
    s = settings
    if s.judge_url:
        from clawd.signals.external import ExternalJudge

        writer = ExternalJudge.from_settings(s)
        return Scorer(s, name=writer.name, model=writer.url, mode="external", writer=writer)
    from clawd.signals.judge import Judge

    def local() -> Judge:
        return Judge(
            judge_path,
            n_ctx=s.n_ctx,
            n_threads=s.n_threads,
            max_tokens=s.judge_max_tokens,
            yield_to=yield_to,
        )

    if s.judge_mode == "generate":
        return Scorer(s, name=judge_name, model=judge_path.name, mode="generate", writer=local())
    from clawd.signals.probe import Probe

    probe = Probe(judge_path, home=home, n_threads=s.n_threads, yield_to=yield_to)
    writer = local() if s.hint_extractor == "judge" else None
    return Scorer(
        s,
        name=f"{judge_name} (probe)",
        model=judge_path.name,
        mode="probe",
        writer=writer,
        probe=probe,
    )
