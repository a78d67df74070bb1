"""Earlier points of an update: which are kept and tried, and real runs that fall back on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from clawd.cli.main import app
from clawd.store.db import Store
from clawd.training import earlier, train
from fixtures.samples import add_sample
from tests.test_train import settings_for, shared_torch_cache, small  # noqa: F401 (a fixture)


def test_points_are_kept_on_a_log_grid_and_tried_at_half_then_a_quarter() -> None:
    assert [k for k in range(1, 40) if earlier.on_grid(k)] == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
    kept = [1, 2, 3, 4, 6, 8, 12, 16]
    assert earlier.points_to_try(24, kept, 2) == [12, 6]
    assert earlier.points_to_try(5, [1, 2, 3, 4], 2) == [2, 1]
    assert earlier.points_to_try(7, [1, 2, 3, 4, 6], 3) == [3, 1]  # nothing under 3/4 but 0
    assert earlier.points_to_try(1, [], 2) == [] and earlier.points_to_try(24, kept, 0) == []


def _verdict(passed: bool, failed: tuple[str, ...] = ()) -> dict[str, Any]:
    checks = {"drift_under_limit": True, "general_ability": True, "opd_gap_shrinks": True}
    return {
        "passed": passed,
        "checks": {**checks, **dict.fromkeys(failed, False)},
        "kl_to_parent": 0.1,
        "kl_to_base": 0.2,
    }


def _folder(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    for name in ("peft", "earlier/step-2/peft", "earlier/step-1/peft"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "weights").write_text(name)
    (tmp_path / "adapter.gguf").write_text("whole")
    points = [{"steps": n, "lr": 1e-4, "peft": f"earlier/step-{n}/peft"} for n in (2, 1)]
    return tmp_path, points


def test_only_a_harm_rejection_is_walked_back_and_the_first_point_that_passes_serves(
    tmp_path: Path,
) -> None:
    def export(peft: Path, gguf: Path) -> None:
        gguf.write_text(f"gguf of {(peft / 'weights').read_text()}")

    judged: list[str] = []

    def judge(passing_at: str) -> Any:
        def run(gguf: Path) -> dict[str, Any]:
            judged.append(gguf.read_text())
            return _verdict(passing_at in gguf.read_text(), ("general_ability",))

        return run

    tmp, points = _folder(tmp_path / "a")
    whole = _verdict(False, ("general_ability",))
    verdict, point = earlier.walk_back(tmp, whole, points, 4, judge("step-1"), export)
    assert point == points[1] and verdict["walked_back"]["served_steps"] == 1
    assert judged == ["gguf of earlier/step-2/peft", "gguf of earlier/step-1/peft"]
    assert [t["passed"] for t in verdict["walked_back"]["tried"]] == [False, True]
    assert (tmp / "peft" / "weights").read_text() == "earlier/step-1/peft"
    assert (tmp / "adapter.gguf").read_text() == "gguf of earlier/step-1/peft"
    assert not (tmp / "earlier").exists()
    assert "serving its first 1 steps" in verdict["walked_back"]["summary"]

    # A held-out failure says the update went the wrong way: nothing is tried.
    tmp, points = _folder(tmp_path / "b")
    judged.clear()
    wrong_way = _verdict(False, ("general_ability", "opd_gap_shrinks"))
    verdict, point = earlier.walk_back(tmp, wrong_way, points, 4, judge("step"), export)
    assert point is None and verdict is wrong_way and judged == []
    assert (tmp / "adapter.gguf").read_text() == "whole" and not (tmp / "earlier").exists()


def test_a_point_with_half_the_memory_steps_is_tried_first_and_said_so(tmp_path: Path) -> None:
    """The whole update's PPO steps with half its memory steps come before the PPO steps' own
    points; when it passes, the verdict says which memory steps serve."""
    tmp, points = _folder(tmp_path)
    (tmp / "earlier/memory-8/peft").mkdir(parents=True)
    (tmp / "earlier/memory-8/peft/weights").write_text("memory-8")
    with_memory = {"steps": 4, "lr": 1e-4, "memory_steps": 8, "peft": "earlier/memory-8/peft"}

    def export(peft: Path, gguf: Path) -> None:
        gguf.write_text((peft / "weights").read_text())

    def judge(gguf: Path) -> dict[str, Any]:
        return _verdict(True) if gguf.read_text() == "memory-8" else whole

    whole = _verdict(False, ("general_ability",))
    verdict, point = earlier.walk_back(tmp, whole, [with_memory, *points], 4, judge, export)
    walked = verdict["walked_back"]
    assert point == with_memory and walked["served_memory_steps"] == 8
    assert walked["tried"] == [
        {
            "steps": 4,
            "memory_steps": 8,
            "passed": True,
            "failed": [],
            "kl_to_parent": 0.1,
            "kl_to_base": 0.2,
        }
    ]
    assert "serving its 4 steps and the first 8 of its memory steps" in walked["summary"]
    assert (tmp / "adapter.gguf").read_text() == "memory-8"

    tried = [{"steps": 4, "memory_steps": 8, "failed": ["general_ability"]}]
    tried.append({"steps": 2, "failed": ["general_ability"]})
    failed = {"whole": {"steps": 4, "failed": ["general_ability"]}, "tried": tried}
    assert "4 steps + 8 memory steps (general_ability), 2 steps" in earlier.describe(failed)


@pytest.mark.slow  # 40-55 s: the default run stays near 20 minutes
def test_a_harmful_update_serves_an_earlier_point_that_passes(
    tiny_qwen3_gguf: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole update is judged against a step limit of 0, which no update meets (the gate
    runs for real, with that limit); its earlier points against the run's own limit."""
    from clawd.adapters import gate

    real, judged = gate.evaluate, []

    def first_strict(*args: Any, **kw: Any) -> dict[str, Any]:
        judged.append(args[1])
        return real(*args, **{**kw, "step_kl": 0.0} if len(judged) == 1 else kw)

    monkeypatch.setattr(gate, "evaluate", first_strict)
    with Store.open(home) as store:
        ids = [
            add_sample(
                store, tiny_qwen3_gguf, hint="Answer in one word only.", reward=-1, kind="opd+rl"
            ),
            add_sample(store, tiny_qwen3_gguf, hint=None, reward=1, kind="rl", answer="Paris."),
            add_sample(store, tiny_qwen3_gguf, hint="Be brief.", reward=0, kind="opd"),
        ]
    summary = train.run(home, settings_for(tiny_qwen3_gguf), cfg=small())  # 4 steps
    folder = Path(summary["path"])
    manifest = json.loads((folder / "manifest.json").read_text())
    walked = manifest["gate"]["walked_back"]
    assert manifest["status"] == "candidate" and manifest["gate"]["passed"]
    assert walked["whole"]["steps"] == 4 and walked["whole"]["failed"] == ["step_under_limit"]
    assert [t["steps"] for t in walked["tried"]] == [2] and walked["served_steps"] == 2
    assert summary["steps"] == manifest["metrics"]["steps"] == 2
    # the point served drifted less than the whole update, and it is what the folder holds
    assert walked["tried"][0]["kl_to_base"] < walked["whole"]["kl_to_base"]
    assert judged[1].name == "adapter.gguf" and judged[1].parent.name == "step-2"
    assert not (folder / "earlier").exists() and (folder / "peft").is_dir()
    with Store.open(home) as store:
        assert {store.db["samples"].get(i)["status"] for i in ids} == {"used"}
    shown = CliRunner().invoke(app, ["adapters", "show", summary["version"]])
    assert "walked back: the whole update (4 steps) failed step_under_limit" in shown.output
    report = json.loads((folder / "report.json").read_text())
    assert report["walked_back"]["served_steps"] == 2
    # The served weights are those of the update's first 2 steps: a run of 1 epoch (2 steps,
    # same seed, same first shuffle) on the same samples ends on the same weights.
    with Store.open(home) as store:
        store.db.conn.execute("UPDATE samples SET status = 'approved'")
        store.db.conn.commit()
    short = train.run(home, settings_for(tiny_qwen3_gguf), cfg=small(train_epochs=1))
    assert short["steps"] == 2 and "walked_back" not in short["gate"]
    a, b = (
        load_file(str(Path(p) / "peft" / "adapter_model.safetensors"))
        for p in (folder, short["path"])
    )
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


@pytest.mark.slow  # 40-55 s: the default run stays near 20 minutes
def test_when_no_earlier_point_passes_the_whole_update_is_rejected(
    tiny_qwen3_gguf: Path, home: Path
) -> None:
    with Store.open(home) as store:
        add_sample(
            store, tiny_qwen3_gguf, hint="Answer in one word only.", reward=-1, kind="opd+rl"
        )
        add_sample(store, tiny_qwen3_gguf, hint=None, reward=1, kind="rl", answer="Paris.")
    strict = small(train_epochs=4, gate_step_kl=1e-12)  # 4 steps: points 2 and 1
    summary = train.run(home, settings_for(tiny_qwen3_gguf), cfg=strict)
    gate = summary["gate"]
    assert not gate["passed"] and summary["steps"] == 4
    walked = gate["walked_back"]
    assert walked["served_steps"] is None and [t["steps"] for t in walked["tried"]] == [2, 1]
    assert all(t["failed"] == ["step_under_limit"] for t in walked["tried"])
    assert "earlier points failed too: 2 steps (step_under_limit)" in walked["summary"]
    with Store.open(home) as store:
        assert {r["status"] for r in store.db["samples"].rows} == {"approved"}  # they wait
    off = train.run(
        home,
        settings_for(tiny_qwen3_gguf),
        cfg=small(train_epochs=4, gate_step_kl=1e-12, gate_retries=0),
    )
    assert not off["gate"]["passed"] and "walked_back" not in off["gate"]
