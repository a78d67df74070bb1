"""The adapter store without a daemon: retention, refusals, crash clean-up, export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawd.adapters import registry
from clawd.models import sha256_file
from clawd.store.db import Store
from fixtures.adapterkit import register
from fixtures.samples import add_sample


@pytest.fixture
def store(home: Path):
    with Store.open(home) as s:
        yield s


def test_retention_spares_the_active_adapter_and_its_parent(
    home: Path, store: Store, tiny_qwen3_gguf: Path, torch_cache: Path
) -> None:
    for i, (v, parent) in enumerate([("v1", None), ("v2", "v1"), ("v3", "v2"), ("v4", "v3")]):
        register(home, tiny_qwen3_gguf, torch_cache, v, seed=i, parent=parent)
    registry.set_active(store, "v2")
    removed = registry.retain(store, keep=1)
    assert sorted(removed) == ["v3"]  # v4 is the newest; v2 is active; v1 is its parent
    assert {r["version"] for r in registry.list_adapters(store)} == {"v1", "v2", "v4"}
    assert not (home / "adapters" / "v3").exists()
    with pytest.raises(registry.AdapterError, match="is active"):
        registry.delete(store, "v2")
    with pytest.raises(registry.AdapterError, match="parent"):
        registry.delete(store, "v1")


def test_verify_refuses_damage_and_other_base_models(
    home: Path, store: Store, tiny_qwen3_gguf: Path, torch_cache: Path
) -> None:
    register(home, tiny_qwen3_gguf, torch_cache, "ok", seed=1)
    sha = sha256_file(tiny_qwen3_gguf)
    assert registry.verify(store, "ok", sha).name == "adapter.gguf"
    with pytest.raises(registry.AdapterError, match="another base model"):
        registry.verify(store, "ok", "f" * 64)
    (home / "adapters" / "ok" / "adapter.gguf").write_bytes(b"GGUF broken")
    with pytest.raises(registry.AdapterError, match="damaged"):
        registry.verify(store, "ok", sha)
    with pytest.raises(registry.AdapterError, match="no adapter 'nope'"):
        registry.verify(store, "nope", sha)


def test_reconcile_after_a_crash(
    home: Path, store: Store, tiny_qwen3_gguf: Path, torch_cache: Path
) -> None:
    register(home, tiny_qwen3_gguf, torch_cache, "a", seed=1)
    register(home, tiny_qwen3_gguf, torch_cache, "b", seed=2)
    (home / "adapters" / ".tmp-halfwritten").mkdir()
    with store.db.conn:  # what a crash between two writes could leave
        store.db.conn.execute("UPDATE adapters SET status = 'active'")
    manifest = json.loads((home / "adapters" / "a" / "manifest.json").read_text())
    assert manifest["status"] == "candidate"
    notes = registry.reconcile(store, home)
    assert any("unfinished" in n for n in notes) and any("two adapters" in n for n in notes)
    assert [r["status"] for r in registry.list_adapters(store)].count("active") == 1
    for v in ("a", "b"):
        on_disk = json.loads((home / "adapters" / v / "manifest.json").read_text())["status"]
        assert on_disk == registry.get(store, v)["status"]
    assert not (home / "adapters" / ".tmp-halfwritten").exists()


def test_reconcile_survives_a_damaged_manifest_and_drops_an_unfinished_version(
    home: Path, store: Store, tiny_qwen3_gguf: Path, torch_cache: Path
) -> None:
    from clawd.serving import promote
    from clawd.serving.engine import Engine

    register(home, tiny_qwen3_gguf, torch_cache, "a", seed=1)
    registry.set_active(store, "a")
    (home / "adapters" / "a" / "manifest.json").write_text("{ not json")
    orphan = home / "adapters" / "renamed-then-crashed"  # a folder whose row never came
    orphan.mkdir()
    (orphan / "adapter.gguf").write_bytes(b"GGUF")
    notes = registry.reconcile(store, home)
    assert any("a: " in n and "unreadable manifest" in n for n in notes)
    assert any("renamed-then-crashed" in n for n in notes) and not orphan.exists()
    assert registry.get(store, "a")["status"] == "active"  # the database is the truth
    engine = Engine(tiny_qwen3_gguf, n_ctx=512)  # and start-up goes on, whatever loads
    engine.load()
    try:
        notes = promote.load_on_start(engine, store, home, sha256_file(tiny_qwen3_gguf))
    finally:
        engine.close()
    assert notes and notes[-1] in ("loaded adapter a", "serving the base model")


def test_export_both_formats(
    home: Path, store: Store, tiny_qwen3_gguf: Path, torch_cache: Path, tmp_path: Path
) -> None:
    register(home, tiny_qwen3_gguf, torch_cache, "e", seed=1)
    gguf = registry.export(store, "e", "gguf", tmp_path)
    assert gguf.name == "clawd-e.gguf" and gguf.read_bytes()[:4] == b"GGUF"
    peft = registry.export(store, "e", "peft", tmp_path / "peft")
    assert (peft / "adapter_model.safetensors").exists()
    with pytest.raises(registry.AdapterError, match="already exists"):
        registry.export(store, "e", "gguf", gguf)


@pytest.mark.parametrize("status", ["candidate", "rejected"])
def test_a_veto_during_a_run_stands_whatever_the_run_decides(
    store: Store, home: Path, smollm2_gguf: Path, status: str
) -> None:
    """Once a rejected run sent a sample vetoed meanwhile back to training, a passing one
    marked it used."""
    taken = [add_sample(store, smollm2_gguf, hint="Be brief.", reward=-1.0, kind="opd")]
    taken.append(add_sample(store, smollm2_gguf, hint=None, reward=1.0, kind="rl"))
    store.db["samples"].update(taken[0], {"status": "vetoed"})  # the user, while it trained
    run_id = store.db["training_runs"].insert({"status": "succeeded", "started_at": 0.0}).last_pk
    tmp = registry.adapters_dir(home) / ".tmp-veto"
    tmp.mkdir(parents=True)
    (tmp / "adapter.gguf").write_bytes(b"not read here")
    manifest = {
        "version": "v1",
        "parent": None,
        "base_sha256": "x",
        "created_at": 0.0,
        "run_id": run_id,
        "status": status,
        "metrics": {},
    }
    registry.add_candidate(store, home, tmp, manifest, taken, [])
    after = [store.db["samples"].get(i)["status"] for i in taken]
    assert after == ["vetoed", "used" if status == "candidate" else "approved"]


KILLED_PUBLISH = """
import json, os, signal, sys
from pathlib import Path
from clawd.adapters import registry
from clawd.store.db import Store

home, taken = Path(sys.argv[1]), json.loads(sys.argv[2])
# killed inside the transaction that records the version: its folder has its final name, the
# database has not committed it
registry.forget.scrub_published = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
with Store.open(home) as store:
    tmp = registry.adapters_dir(home) / ".tmp-killed"
    tmp.mkdir(parents=True)
    (tmp / "adapter.gguf").write_bytes(b"weights")
    manifest = {"version": "v-killed", "parent": None, "base_sha256": "x", "created_at": 0.0,
                "run_id": int(sys.argv[3]), "status": "candidate", "metrics": {}}
    registry.add_candidate(store, home, tmp, manifest, taken, [])
"""


def test_a_trainer_killed_while_publishing_leaves_its_samples_waiting(
    store: Store, home: Path, smollm2_gguf: Path
) -> None:
    """kill -9 between the adapter's write and its commit: no version is served or listed
    whose samples train again; the next start removes the orphan folder."""
    import subprocess
    import sys

    taken = [add_sample(store, smollm2_gguf, hint="Be brief.", reward=-1.0, kind="opd")]
    run_id = store.db["training_runs"].insert({"status": "running", "started_at": 0.0}).last_pk
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_PUBLISH, str(home), json.dumps(taken), str(run_id)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -9, proc.stderr  # it was killed, not finished
    assert (registry.adapters_dir(home) / "v-killed").is_dir()  # renamed on disk ...
    assert registry.list_adapters(store) == []  # ... but never committed
    assert store.db["samples"].get(taken[0])["status"] == "approved"  # waits for a run
    notes = registry.reconcile(store, home)
    assert any("v-killed" in n and "never finished" in n for n in notes), notes
    assert not (registry.adapters_dir(home) / "v-killed").exists()


SECRET = "my locker code is 4417"


def _run_folder(home: Path, name: str, sample_id: int) -> Path:
    """A version folder as a run writes it: the user's words in every place a run copies them."""
    folder = registry.adapters_dir(home) / name
    folder.mkdir(parents=True)
    (folder / "adapter.gguf").write_bytes(b"weights")
    report = {
        "samples": [{"sample_id": sample_id, "hint": SECRET, "tokens": [SECRET]}],
        "hindsight_answers": [{"sample_id": sample_id, "answer": SECRET}],
        "repeating_answers": [{"answer": f"{SECRET} {SECRET}", "repeated": 4}],
        "memories": {"memories": [1], "answers": [SECRET]},
    }
    (folder / "report.json").write_text(json.dumps(report))
    return folder


def _manifest(version: str, run_id: int, **extra: object) -> dict:
    """A candidate's manifest as a run hands it to ``add_candidate``."""
    return {
        "version": version,
        "parent": None,
        "base_sha256": "x",
        "created_at": 2.0,
        "run_id": run_id,
        "status": "candidate",
        "metrics": {},
        **extra,
    }


def _gate() -> dict:
    looped = [{"prompt": 0, "answer": f"{SECRET}, {SECRET}"}]
    return {"passed": True, "answers": ["Paris."], "own_ability": {"new_degenerate": looped}}


def test_a_run_that_read_the_rows_before_a_forget_publishes_without_them(
    store: Store, home: Path, smollm2_gguf: Path
) -> None:
    """The forget came while the run trained: the run's report, manifest and metrics, written
    after it, hold none of the forgotten words (issue 51, item 11)."""
    from clawd.adapters import forget

    kept = add_sample(store, smollm2_gguf, hint="Be brief.", reward=-1.0, kind="opd")
    gone = add_sample(store, smollm2_gguf, hint=SECRET, reward=-1.0, kind="opd")
    run_id = store.db["training_runs"].insert({"status": "running", "started_at": 1.0}).last_pk
    # the user forgets the conversation meanwhile (its rows go, then the event, then the scrub)
    store.db["samples"].delete(gone)
    store.event("forget", "deleted conversation c")
    assert forget.scrub_reports(store, home, [gone]) == 0  # nothing written yet
    tmp = _run_folder(home, ".tmp-late", gone)  # then the run writes what it read before
    manifest = _manifest("v-late", run_id, gate=_gate())
    final = registry.add_candidate(store, home, tmp, manifest, [kept, gone], [])
    for path in final.iterdir():
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path.name
    assert SECRET not in json.dumps(registry.get(store, "v-late")["metrics"])
    assert json.loads((final / "report.json").read_text())["repeating_answers"][0]["repeated"] == 4
    assert registry.get(store, "v-late")["metrics"]["gate"]["answers"] == ["Paris."]


def test_a_forget_scrubs_every_published_copy(store: Store, home: Path, smollm2_gguf: Path) -> None:
    """The report's unkeyed answers, the manifest's and the database's gate answers to the
    user's prompts go too, not only the forgotten samples' entries."""
    from clawd.adapters import forget

    sid = add_sample(store, smollm2_gguf, hint=SECRET, reward=-1.0, kind="opd")
    run_id = store.db["training_runs"].insert({"status": "running", "started_at": 1.0}).last_pk
    tmp = _run_folder(home, ".tmp-early", sid)
    manifest = _manifest("v-early", run_id, gate=_gate())
    final = registry.add_candidate(store, home, tmp, manifest, [sid], [])
    assert SECRET in (final / "manifest.json").read_text()  # published with its words
    store.db["samples"].delete(sid)
    assert forget.scrub_reports(store, home, [sid]) == 1
    for path in final.iterdir():
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path.name
    assert SECRET not in json.dumps(registry.get(store, "v-early")["metrics"])


def test_an_adapter_is_on_disk_before_the_database_says_its_samples_are_used(
    store: Store, home: Path, smollm2_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a power loss the database and the disk must agree: every file of the version and
    the folders that name it are fsynced before the transaction that records it."""
    import os

    taken = [add_sample(store, smollm2_gguf, hint="Be brief.", reward=-1.0, kind="opd")]
    run_id = store.db["training_runs"].insert({"status": "running", "started_at": 0.0}).last_pk
    tmp = _run_folder(home, ".tmp-durable", taken[0])
    order: list[str] = []
    real_fsync, real_scrub = os.fsync, registry.forget.scrub_published

    def fsync(fd: int) -> None:
        order.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def scrub(*args: object) -> dict:
        order.append("database")
        return real_scrub(*args)

    monkeypatch.setattr(registry.os, "fsync", fsync)
    monkeypatch.setattr(registry.forget, "scrub_published", scrub)
    manifest = _manifest("v-durable", run_id)
    final = registry.add_candidate(store, home, tmp, manifest, taken, [])
    synced = order[: order.index("database")]
    for name in ("adapter.gguf", "manifest.json", "report.json"):
        assert any(p.endswith(f"{name}") for p in synced), (name, synced)
    assert str(final.parent) in synced  # the rename itself is durable
