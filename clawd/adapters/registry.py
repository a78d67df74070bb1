"""The versioned adapter store: ``CLAWD_HOME/adapters/<version>/`` plus the ``adapters`` table.

Each version folder holds ``adapter.gguf`` (llama.cpp), ``peft/`` (peft, vLLM),
``manifest.json`` (version, parent, base model sha256, run, samples, metrics, gate result,
status, file checksums) and the run's report. A folder appears by an atomic rename, whole or not
at all. The database row is the truth about status (candidate, active, retired, rejected); the
manifest mirrors it, rewritten atomically. At most one adapter is active. Retention keeps the
newest N and never deletes the active adapter or its parent.

No HTTP and no model here: the daemon hot-loads what this module says is active.

Run alone to list the adapters::

    python -m clawd.adapters.registry
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from clawd import trainlock
from clawd.adapters import forget
from clawd.store import memories
from clawd.store.db import Store

STATUSES = ("candidate", "active", "retired", "rejected", "parked")


class AdapterError(Exception):
    """An adapter is unknown, damaged, for another model, or the action is not allowed."""


class AdapterNotFound(AdapterError):
    """No such adapter version, or it has no training report (a 404 over REST)."""


def adapters_dir(home: Path) -> Path:
    path = home / "adapters"
    path.mkdir(parents=True, exist_ok=True)
    return path


_VERIFIED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256


def file_sha256(path: Path) -> str:
    """sha256 of a file; remembered while its size and mtime stay the same."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _VERIFIED:
        _VERIFIED[key] = _hash(path)
    return _VERIFIED[key]


def _hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    tmp = folder / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    tmp.replace(folder / "manifest.json")


def read_manifest(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AdapterError(f"{folder}: unreadable manifest ({exc})") from exc


MAX_ATTEMPTS = 3  # a sample in this many rejected runs stops waiting ("dropped")


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_tree(root: Path) -> None:
    """fsync every file under ``root`` and every folder, deepest first."""
    for folder, _, files in os.walk(root, topdown=False):
        for name in files:
            with open(Path(folder) / name, "rb") as fh:
                os.fsync(fh.fileno())
        _sync_dir(Path(folder))


def add_candidate(
    store: Store,
    home: Path,
    tmp: Path,
    manifest: dict[str, Any],
    used: list[int],
    heldout: list[int],
) -> Path:
    """Publish the folder ``tmp`` as a new version and settle its samples, in one step.

    A candidate that passed the gate uses its trained samples up. A rejected one sends them
    back to waiting (its adapter is kept for inspection, its samples are not spent on it),
    and a sample in ``MAX_ATTEMPTS`` rejected runs is dropped. Held-out samples wait again
    either way, marked so that they train in a later run instead of being held out again.
    """
    manifest = {
        **manifest,
        "status": manifest.get("status", "candidate"),
        "checksums": {"adapter.gguf": file_sha256(tmp / "adapter.gguf")},
    }
    write_manifest(tmp, manifest)
    final = adapters_dir(home) / manifest["version"]
    _sync_tree(tmp)  # on disk before the database says its samples are used (power loss)
    tmp.replace(final)  # the version appears whole or not at all
    _sync_dir(final.parent)
    run_id = manifest["run_id"]
    taken = [*used, *heldout, *manifest.get("replayed", [])]
    with store.db.conn:
        if not store.db.conn.in_transaction:  # no forget between the check and the row
            store.db.conn.execute("BEGIN IMMEDIATE")
        manifest = forget.scrub_published(store, final, manifest, taken)
        store.db["adapters"].insert(
            {
                "version": manifest["version"],
                "parent": manifest["parent"],
                "base_sha256": manifest["base_sha256"],
                "run_id": run_id,
                "path": str(final),
                "status": manifest["status"],
                "created_at": manifest["created_at"],
                "metrics": json.dumps({**manifest["metrics"], "gate": manifest.get("gate")}),
            }
        )
        if manifest["status"] == "rejected":
            store.db.conn.executemany(
                "UPDATE samples SET attempts = attempts + 1, run_id = ?, status = CASE WHEN "
                f"attempts + 1 >= {MAX_ATTEMPTS} THEN 'dropped' ELSE 'approved' END WHERE id = ? "
                "AND status != 'vetoed'",  # a veto during the run stands
                [(run_id, i) for i in used],
            )
        else:
            store.db.conn.executemany(
                "UPDATE samples SET status = 'used', run_id = ? "
                "WHERE id = ? AND status != 'vetoed'",
                [(run_id, i) for i in used],
            )
        store.db.conn.executemany(
            "UPDATE samples SET heldout_runs = heldout_runs + 1 WHERE id = ?",
            [(i,) for i in heldout],
        )
    return final


def get(store: Store, version: str) -> dict[str, Any]:
    row = next(store.db["adapters"].rows_where("version = ?", [version]), None)
    if row is None:
        raise AdapterNotFound(f"no adapter {version!r}; see `clawd adapters list`")
    return {**row, "metrics": json.loads(row["metrics"] or "{}")}


def active(store: Store) -> dict[str, Any] | None:
    row = next(store.db["adapters"].rows_where("status = 'active'"), None)
    return get(store, row["version"]) if row else None


def list_adapters(store: Store) -> list[dict[str, Any]]:
    return [
        {**r, "metrics": json.loads(r["metrics"] or "{}")}
        for r in store.db["adapters"].rows_where(order_by="created_at desc")
    ]


def show(store: Store, version: str) -> dict[str, Any]:
    """An adapter with its manifest, gate figures and the samples and hints that trained it."""
    row = get(store, version)
    manifest = read_manifest(Path(row["path"]))
    samples = (
        list(
            store.db.query(
                "SELECT x.id, x.kind, x.hint, x.reward, x.status, substr(t.response_text, 1, 200) "
                "AS response FROM samples x JOIN turns t ON t.id = x.turn_id WHERE x.run_id = ? "
                "ORDER BY x.id",
                [row["run_id"]],
            )
        )
        if row["run_id"]
        else []
    )
    return {**row, "manifest": manifest, "gate": manifest.get("gate"), "samples": samples}


def report(store: Store, version: str) -> dict[str, Any]:
    """The training report (report.json) of an adapter: steps, and per-sample OPD advantages."""
    path = Path(get(store, version)["path"]) / "report.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AdapterNotFound(
            f"no report for adapter {version!r} ({path}: {exc}); it was not made by a training run"
        ) from None


class ForeignBase(AdapterError):
    """The adapter belongs to another base model: not bad, only not for this one."""


def verify(store: Store, version: str, base_sha256: str) -> Path:
    """The GGUF path of a loadable adapter for this base model; raises AdapterError."""
    row = get(store, version)
    folder = Path(row["path"])
    manifest = read_manifest(folder)
    if manifest.get("base_sha256") != base_sha256:
        raise ForeignBase(
            f"adapter {version} was trained on another base model ({manifest.get('base_model')},"
            f" sha256 {str(manifest.get('base_sha256'))[:12]}...); it cannot be used with this one"
        )
    gguf = folder / "adapter.gguf"
    expected = manifest.get("checksums", {}).get("adapter.gguf")
    if not gguf.exists() or (expected and file_sha256(gguf) != expected):
        raise AdapterError(
            f"adapter {version}: adapter.gguf is missing or damaged (checksum mismatch)"
        )
    return gguf


def _set_status(store: Store, version: str, status: str) -> None:
    row = get(store, version)
    store.db.conn.execute("UPDATE adapters SET status = ? WHERE version = ?", (status, version))
    folder = Path(row["path"])
    if (folder / "manifest.json").exists():
        try:
            manifest = read_manifest(folder)
        except AdapterError:  # damaged: the database row is the truth; leave the file as it is
            return
        write_manifest(folder, {**manifest, "status": status})


def park(store: Store, version: str) -> None:
    """Set aside the active adapter of another base model (status ``parked``): it is not bad,
    and ``restore_parked`` makes it active again when that base model serves again."""
    with store.db.conn:
        _set_status(store, version, "parked")


def restore_parked(store: Store, base_sha256: str) -> str | None:
    """The newest parked adapter of this base model, made active again (None if there is none
    or another adapter is active)."""
    if active(store) is not None:
        return None
    row = next(
        store.db["adapters"].rows_where(
            "status = 'parked' AND base_sha256 = ?", [base_sha256], order_by="created_at desc"
        ),
        None,
    )
    if row is None:
        return None
    set_active(store, row["version"])
    return row["version"]


def set_active(store: Store, version: str | None, *, previous: str = "retired") -> None:
    """Make ``version`` the one active adapter (None: the base model), in one transaction
    that also reads the current one (BEGIN IMMEDIATE: no other writer in between)."""
    with store.db.conn:
        if not store.db.conn.in_transaction:
            store.db.conn.execute("BEGIN IMMEDIATE")
        current = active(store)
        if current and current["version"] != version:
            _set_status(store, current["version"], previous)
        if version is not None:
            _set_status(store, version, "active")
    store.event(
        "adapters", f"active adapter: {version or 'base model'}", version=version, switch=True
    )
    # The memories this adapter has learned leave the prompt; any others marked learned
    # (by the adapter it replaces) come back.
    learned = memories.learned_ids(get(store, version)["metrics"].get("gate")) if version else []
    moved = memories.sync_learned(store, version, learned)
    if moved["learned"] or moved["back"]:
        store.event("memory", f"learned by {version or 'nothing'}: {moved}", **moved)


def last_switch_at(store: Store) -> float | None:
    """When the serving adapter was last chosen (activation, rollback, the base model)."""
    row = store.db.execute(
        "SELECT ts FROM events WHERE kind = 'adapters' AND json_extract(data, '$.switch') = 1 "
        "ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return float(row[0]) if row else None


def rollback_target(store: Store) -> str | None:
    """The version to roll back to: the active adapter's parent (None: the base model)."""
    current = active(store)
    if current is None:
        raise AdapterError("nothing to roll back: the base model is already serving")
    return current["parent"]


def reject(store: Store, version: str, reason: str) -> None:
    with store.db.conn:
        _set_status(store, version, "rejected")
    store.event("adapters", f"adapter {version} rejected: {reason}", version=version)


def delete(store: Store, version: str) -> None:
    row = get(store, version)
    current = active(store)
    if row["status"] == "active":
        raise AdapterError(f"{version} is active; activate another or `clawd adapters base` first")
    if current and current["parent"] == version:
        raise AdapterError(f"{version} is the active adapter's parent (the rollback target)")
    with store.db.conn:
        store.db.conn.execute("UPDATE adapters SET parent = NULL WHERE parent = ?", (version,))
        store.db.conn.execute("DELETE FROM adapters WHERE version = ?", (version,))
    shutil.rmtree(row["path"], ignore_errors=True)
    store.event("adapters", f"deleted adapter {version}", version=version)


def retain(store: Store, keep: int) -> list[str]:
    """Delete all but the newest ``keep`` versions, sparing the active one and its parent."""
    current = active(store)
    spare = {current["version"], current["parent"]} if current else set()
    removed = []
    for row in list_adapters(store)[keep:]:
        if row["version"] not in spare:
            delete(store, row["version"])
            removed.append(row["version"])
    return removed


def export(store: Store, version: str, fmt: str, dest: Path) -> Path:
    """Copy the adapter out as ``gguf`` (one file) or ``peft`` (a folder)."""
    row = get(store, version)
    src = Path(row["path"]) / ("adapter.gguf" if fmt == "gguf" else "peft")
    if fmt not in ("gguf", "peft"):
        raise AdapterError("format must be gguf or peft")
    if dest.exists() and dest.is_dir() and fmt == "gguf":
        dest = dest / f"clawd-{version}.gguf"
    if dest.exists():
        raise AdapterError(f"{dest} already exists")
    if fmt == "gguf":
        shutil.copyfile(src, dest)
    else:
        shutil.copytree(src, dest)
    return dest


def reconcile(store: Store, home: Path) -> list[str]:
    """After a crash: drop temp folders, folders without a row (a crash between the rename and
    the row: that run never finished, its samples still wait), rows whose folder vanished; keep
    one active. A damaged manifest is reported, never fatal: the database is the truth."""
    notes = []
    training = trainlock.holder(home)  # a live run's files are unfinished, not stale
    if training:
        notes.append(f"a training run is in progress ({training}): its files are left alone")
    for stale in [] if training else adapters_dir(home).glob(".tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
        notes.append(f"removed unfinished {stale.name}")
    known = {Path(r["path"]).name for r in list_adapters(store)}
    for folder in sorted(adapters_dir(home).iterdir()):
        if training:
            break
        if folder.is_dir() and not folder.name.startswith(".") and folder.name not in known:
            shutil.rmtree(folder, ignore_errors=True)
            notes.append(f"removed {folder.name}: its run never finished (no database row)")
    with store.db.conn:
        for row in list_adapters(store):
            if not Path(row["path"]).exists():
                store.db.conn.execute("DELETE FROM adapters WHERE version = ?", (row["version"],))
                notes.append(f"forgot {row['version']}: its folder is gone")
        actives = list(
            store.db["adapters"].rows_where("status = 'active'", order_by="created_at desc")
        )
        for row in list_adapters(store):  # the database is the truth; manifests mirror it
            folder = Path(row["path"])
            if (folder / "manifest.json").exists():
                try:
                    manifest = read_manifest(folder)
                except AdapterError as exc:
                    notes.append(f"adapter {row['version']}: {exc}")
                    continue
                if manifest.get("status") != row["status"]:
                    write_manifest(folder, {**manifest, "status": row["status"]})
        for extra in actives[1:]:
            _set_status(store, extra["version"], "retired")
            notes.append(f"retired {extra['version']}: two adapters were marked active")
    return notes


if __name__ == "__main__":
    with Store.open() as st:
        for r in list_adapters(st):
            print(f"{r['version']:24} {r['status']:9} parent {r['parent'] or '-'}")
