"""bench/teacher.py on SmolLM2: what the hinted model writes, scored against the persona."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import teacher
from bench.personas import PERSONAS


def test_scores_count_the_preferences_met_and_prompts_with_a_compliant_sample() -> None:
    sam = PERSONAS["sam"]
    greedy = ["Sam, boil it for eight minutes.", "Boil it."]  # both preferences, then one
    sampled = [["Boil it.", "Sam, boil it."], ["Boil it.", "Boil it."]]
    got = teacher.score(sam, greedy, sampled)
    assert got["greedy"] == 0.75
    assert got["sampled"] == 0.625  # 0.5, 1.0, 0.5, 0.5
    assert got["some_sample_meets_all"] == 0.5  # the first prompt only
    assert teacher.score(sam, greedy, [])["sampled"] is None  # no samples: unknown, not 0


def test_a_run_on_the_real_model_writes_every_context(
    smollm2_gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "teacher.json"
    argv = ["--personas", "sam", "--prompts", "1", "--samples", "1", "--model", str(smollm2_gguf)]
    assert teacher.main([*argv, "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["persona"] == "sam" and row["hint"].startswith("Address the user by their name")
    for context in ("plain", "hinted_user"):
        assert 0.0 <= row[context]["greedy"] <= 1.0 and 0.0 <= row[context]["sampled"] <= 1.0
    assert row["hinted_system"]["sampled"] is None  # greedy only in the system placement
    assert row["hinted_user"]["some_sample_meets_all"] in (0.0, 1.0)  # one prompt
    assert all(row["examples"][k].strip() for k in ("plain", "hinted_user", "hinted_system"))
    assert "| sam | " in capsys.readouterr().out


def test_an_unknown_persona_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        teacher.main(["--personas", "sam,nobody"])
    assert exc.value.code == 2 and "nobody" in capsys.readouterr().err
