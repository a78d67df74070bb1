"""What forgetting a conversation removes from the adapters' files: every copy of the user's
words that a training run wrote down.

A run copies the user's words into its version folder: each sample's tokens and hint
(``report.json`` "samples", "hindsight_answers", keyed by sample id), and text written from
the user's own prompts that names no sample (the starting weights' repeating answers, the
memory distillation's answers, the gate's looping answers to the user's prompts, in
``report.json``, ``manifest.json`` and the database's ``adapters.metrics``). A forget drops the
forgotten samples' entries and all of the text that names no sample (it cannot be traced to a
conversation; it is diagnostics, and the figures beside it stay). A run that read the rows
before a forget and publishes after it is scrubbed the same way when it publishes
(``scrub_published``). The weights keep what they learned; the text is gone.

Run alone to scrub every version of a home (what a forget does, with no sample named)::

    python -m clawd.adapters.forget [CLAWD_HOME]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from clawd.store.db import Store

FORGOTTEN = "(forgotten)"


def scrub_report(report: dict[str, Any], ids: set[int]) -> dict[str, Any]:
    """``report`` without the entries of samples ``ids`` and without any text written from the
    user's prompts that names no sample."""
    out = dict(report)
    for key in ("samples", "hindsight_answers"):  # the second: reports of older versions
        if isinstance(report.get(key), list):
            out[key] = [e for e in report[key] if e.get("sample_id") not in ids]
    if isinstance(report.get("repeating_answers"), list):
        out["repeating_answers"] = [{**r, "answer": FORGOTTEN} for r in report["repeating_answers"]]
    if isinstance(report.get("memories"), dict) and report["memories"].get("answers"):
        out["memories"] = {**report["memories"], "answers": []}
    return out


def scrub_gate(gate: Any) -> Any:
    """The gate's verdict without its answers to the user's own prompts (the general prompts'
    answers are the gate's own words and stay)."""
    if not isinstance(gate, dict) or not isinstance(gate.get("own_ability"), dict):
        return gate
    own = gate["own_ability"]
    if not own.get("new_degenerate"):
        return gate
    looped = [{**e, "answer": FORGOTTEN} for e in own["new_degenerate"]]
    return {**gate, "own_ability": {**own, "new_degenerate": looped}}


def _rewrite(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    tmp.replace(path)


def scrub_folder(folder: Path, ids: set[int]) -> bool:
    """Scrub one version folder's report and manifest; whether either changed."""
    changed = False
    path = folder / "report.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = None
    if isinstance(report, dict) and (clean := scrub_report(report, ids)) != report:
        _rewrite(path, clean)
        changed = True
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none, or damaged: reconcile reports it; nothing to scrub
        return changed
    if isinstance(manifest, dict) and (gate := scrub_gate(manifest.get("gate"))) != manifest.get(
        "gate"
    ):
        _rewrite(folder / "manifest.json", {**manifest, "gate": gate})
        changed = True
    return changed


def scrub_reports(store: Store, home: Path, sample_ids: list[int]) -> int:
    """After a forget: scrub every version folder and every adapter's stored metrics; returns
    how many versions changed."""
    ids, changed = set(sample_ids), set()
    root = home / "adapters"
    for folder in sorted(root.iterdir()) if root.exists() else []:
        if folder.is_dir() and scrub_folder(folder, ids):
            changed.add(folder.name)
    with store.db.conn:
        for row in list(store.db["adapters"].rows):
            metrics = json.loads(row["metrics"] or "{}")
            if (gate := scrub_gate(metrics.get("gate"))) != metrics.get("gate"):
                store.db["adapters"].update(
                    row["version"], {"metrics": json.dumps({**metrics, "gate": gate})}
                )
                changed.add(Path(row["path"]).name)
    return len(changed)


def scrub_published(
    store: Store, folder: Path, manifest: dict[str, Any], ids: list[int]
) -> dict[str, Any]:
    """At publication, inside the write transaction that records the version: if a forget came
    while the run went on (samples ``ids`` it read are gone, or a forget is newer than the
    run's start), scrub ``folder`` as that forget would have; returns the manifest to record.
    A forget writes its event before it scrubs, so either it sees this version or this sees
    it."""
    marks = ",".join("?" * len(ids))
    rows = store.db.execute(f"SELECT id FROM samples WHERE id IN ({marks})", ids) if ids else []
    gone = set(ids) - {r[0] for r in rows}
    run = store.db["training_runs"].get(manifest["run_id"]) if manifest.get("run_id") else None
    started = run["started_at"] if run else 0.0
    forgot = store.db.execute(
        "SELECT 1 FROM events WHERE kind = 'forget' AND ts >= ? LIMIT 1", [started]
    ).fetchone()
    if not (gone or forgot):
        return manifest
    scrub_folder(folder, gone)
    return {**manifest, "gate": scrub_gate(manifest.get("gate"))}


if __name__ == "__main__":
    from clawd.config import clawd_home

    where = Path(sys.argv[1]) if len(sys.argv) > 1 else clawd_home()
    with Store.open(where) as st:
        print(f"scrubbed {scrub_reports(st, where, [])} version(s)")
