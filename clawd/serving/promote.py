"""Adapter lifecycle in the running daemon: start-up, activation, rollback, promotion.

The order is what makes a crash harmless: the new adapter is verified (checksum, base model)
and hot-loaded into the engine first, and only then does one database transaction make it the
active one. ``kill -9`` at any point leaves the database naming an adapter that was loadable
before, and the next start loads that. On start, an active adapter that fails to load falls
back to its parent, then to the base model, and the fallback is recorded.

Used by ``clawd.serving.app``; run alone to print what would be loaded at start::

    python -m clawd.serving.promote
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from clawd.adapters import registry
from clawd.adapters.registry import AdapterError
from clawd.serving import hotload
from clawd.serving.engine import Engine, EngineError
from clawd.store.db import Store

log = logging.getLogger("clawd.adapters")
# One switch at a time in this process: "hot-load, then write the database" is one step, so the
# REST routes and the promoter can never leave the engine serving another adapter than the
# database names. Re-entrant: rollback activates.
SWITCH = threading.RLock()


def activate(
    engine: Engine, store: Store, version: str, base_sha256: str, *, force: bool = False
) -> float:
    """Hot-load ``version`` and make it active; returns the serving pause in ms."""
    with SWITCH:
        return _activate(engine, store, version, base_sha256, force=force)


def _activate(
    engine: Engine, store: Store, version: str, base_sha256: str, *, force: bool
) -> float:
    row = registry.get(store, version)
    gate = row["metrics"].get("gate") or {}
    if row["status"] == "rejected" and not force:
        raise AdapterError(
            f"{version} failed the promotion gate ({gate.get('checks')}); "
            "pass force to activate it anyway"
        )
    gguf = registry.verify(store, version, base_sha256)
    try:
        pause = hotload.activate(engine, gguf, version)
    except EngineError as exc:
        raise AdapterError(f"{version} could not be loaded: {exc}") from exc
    registry.set_active(store, version)
    return pause


def to_base(engine: Engine, store: Store) -> float:
    with SWITCH:
        try:
            pause = hotload.activate(engine, None, None)
        except EngineError as exc:
            raise AdapterError(f"could not switch to the base model: {exc}") from exc
        registry.set_active(store, None)
        return pause


def rollback(engine: Engine, store: Store, base_sha256: str) -> str | None:
    """Go back to the active adapter's parent (or the base model); returns what now serves."""
    with SWITCH:
        target = registry.rollback_target(store)
        if target is None:
            to_base(engine, store)
            return None
        activate(engine, store, target, base_sha256, force=True)
        return target


def load_on_start(engine: Engine, store: Store, home: Path, base_sha256: str) -> list[str]:
    """Load the active adapter, falling back to its parent, then the base; returns notes."""
    notes = registry.reconcile(store, home)
    current = registry.active(store)
    if current is not None and current["base_sha256"] != base_sha256:
        # Another base model serves now: its adapter is set aside, not rejected, and comes back
        # when that model does.
        registry.park(store, current["version"])
        notes.append(f"adapter {current['version']} belongs to another base model; parked")
        current = None
    restored = registry.restore_parked(store, base_sha256) if current is None else None
    if restored:
        notes.append(f"adapter {restored} of this base model was parked; active again")
        current = registry.active(store)
    while current is not None:
        version = current["version"]
        try:
            gguf = registry.verify(store, version, base_sha256)
            hotload.activate(engine, gguf, version)
            notes.append(f"loaded adapter {version}")
            return notes
        except (AdapterError, EngineError) as exc:
            note = f"adapter {version} cannot be loaded ({exc}); falling back to " + (
                current["parent"] or "the base model"
            )
            log.warning(note)
            notes.append(note)
            registry.reject(store, version, str(exc))
            parent = current["parent"]
            if parent is None:
                break
            try:
                registry.set_active(store, parent)
                current = registry.get(store, parent)
            except AdapterError:
                break
    registry.set_active(store, None)
    notes.append("serving the base model")
    return notes


def promote_candidates(engine: Engine, store: Store, base_sha256: str) -> str | None:
    """Activate the newest candidate that passed the gate, is newer than the active one and
    grew from what serves (its parent is the active adapter, or none on the base model).

    With the base model serving, only candidates made after it was chosen count: `clawd adapters
    base` sticks until a new run makes something newer. A run that was already going when the
    user rolled back made a child of what they rolled back from: it waits for the user.
    """
    with SWITCH:
        return _promote(engine, store, base_sha256)


def _promote(engine: Engine, store: Store, base_sha256: str) -> str | None:
    current = registry.active(store)
    since = current["created_at"] if current else (registry.last_switch_at(store) or 0.0)
    newer = [
        r
        for r in registry.list_adapters(store)
        if r["status"] == "candidate"
        and r["base_sha256"] == base_sha256  # another base model's candidates wait for it
        and (r["metrics"].get("gate") or {}).get("passed")
        and r["created_at"] > since
        and r["parent"] == (current["version"] if current else None)
    ]
    if not newer:
        return None
    version = newer[0]["version"]
    try:
        activate(engine, store, version, base_sha256)
    except registry.ForeignBase:
        return None  # a candidate of another base model waits for it, unharmed
    except AdapterError as exc:
        registry.reject(store, version, str(exc))
        return None
    return version


if __name__ == "__main__":
    with Store.open() as st:
        cur = registry.active(st)
        print(f"active: {cur['version'] if cur else 'base model'}")
