"""What waits to be learned: whether a training run now would learn anything, and why not.

The one check that the trainer (``clawd.training.train``), ``POST /v1/train`` and the daemon's
idle trigger share, so that none of them starts a run the others would refuse: no approved
sample, none that the training method can use (``rules.nothing_to_learn``), or samples that
all scored the same with no hint to learn from (``rules.nothing_to_tell_apart``), unless a
memory waits to be learned: with ``memory`` on, samples that tie still carry the run that
distils the active memories (``clawd.training.consolidate``), or a user who is content would
keep them in the prompt for good. Given the served base model's digest, samples answered by
another base model wait (their token ids mean other words here) and the refusal says so.

Run alone to ask it of ``CLAWD_HOME`` with its settings::

    python -m clawd.signals.waiting
"""

from __future__ import annotations

from typing import Any

from clawd.config import clawd_home, load_settings
from clawd.signals.rules import LEARNABLE_KINDS, nothing_to_learn, nothing_to_tell_apart
from clawd.store import memories
from clawd.store.db import RUN_SAMPLES, Store


def next_run(
    store: Store,
    method: str,
    replay: int,
    limit: int = RUN_SAMPLES,
    base_sha256: str | None = None,
    memory: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]:
    """What a training run of ``method`` would take from ``store`` now (``Store.run_samples``:
    the new samples and up to ``replay`` replayed ones, of the base model ``base_sha256``) and
    why it would learn nothing from them (None if it would learn something; then the trainer
    trains on exactly these). With ``memory`` (the setting), an active memory is something to
    learn whenever there are samples to run with."""
    kinds = LEARNABLE_KINDS[method]
    why = nothing_to_learn(*store.waiting_samples(kinds, base_sha256), method)
    if why:
        others = store.other_base_samples(base_sha256) if base_sha256 else 0
        if others:
            why += (
                f" ({others} approved samples were answered by another base model: they wait "
                "until it serves again)"
            )
        return [], [], why
    new, old = store.run_samples(kinds, replay, limit, base_sha256)
    why = nothing_to_tell_apart(new + old, method)
    if why and memory and memories.in_prompt(store):
        why = None  # the run distils the memories the weights have not learned yet
    return new, old, why


def why_no_run(
    store: Store,
    method: str,
    replay: int,
    base_sha256: str | None = None,
    memory: bool = False,
) -> str | None:
    """Why a training run of ``method`` (with up to ``replay`` replayed samples) would learn
    nothing from what waits in ``store`` now; None if it would learn something."""
    return next_run(store, method, replay, base_sha256=base_sha256, memory=memory)[2]


if __name__ == "__main__":
    home = clawd_home()
    settings = load_settings(home)
    with Store.open(home) as store:
        method = settings.train_method
        approved, learnable = store.waiting_samples(LEARNABLE_KINDS[method])
        print(f"{home}: {approved} approved samples, {learnable} of them for '{method}'")
        why = why_no_run(store, method, settings.train_replay, memory=settings.memory)
        print(why or "a run now would learn")
