"""The probe judge on the real models: shipped weights for SmolLM2, fitted ones for another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawd.cli.main import app
from clawd.signals.fitprobe import prepare
from clawd.signals.judge import JudgeError
from clawd.signals.probe import Probe
from clawd.signals.rules import Exchange

# The exchange from the issue that made the old judge reward a complaint.
TEA = Exchange(
    "How do I make a cup of tea?",
    "Making tea is a wonderful ritual enjoyed around the world for centuries. First, you will "
    "want to consider the type of tea, since black, green, white and oolong teas each have "
    "their own ideal temperatures and steeping times, and the quality of the water matters.",
    "That is far too long and rambling. Give me three short steps.",
)


@pytest.fixture(scope="module")
def probe(smollm2_gguf: Path):
    p = prepare(Probe(smollm2_gguf))  # the weights shipped for this model file: no fitting
    yield p
    p.close()


def test_the_tea_complaint_is_never_a_reward(probe: Probe) -> None:
    score, raw = probe.vote(TEA)
    assert score in (-1, 0)
    assert "p(-1)" in raw and raw.endswith(f"\\boxed{{{score}}}")


def test_clear_replies_get_their_sign(probe: Probe) -> None:
    q, a = "How do I reverse a list in Python?", "Use my_list.reverse() or my_list[::-1]."
    assert probe.vote(Exchange(q, a, "That worked, thank you so much!"))[0] == 1
    assert probe.vote(Exchange(q, a, "No, that's wrong. I asked about tuples, try again."))[0] == -1


def test_the_shipped_weights_were_fitted_without_the_held_out_voices(probe: Probe) -> None:
    from bench.judge import HELDOUT
    from clawd.signals.fitprobe import FIT_FILE, read_exchanges

    held = {r["voice"] for r in read_exchanges(HELDOUT)}
    fit = {r["voice"] for r in read_exchanges(FIT_FILE)}
    assert held and fit and not held & fit
    replies = {r["reply"] for r in read_exchanges(FIT_FILE)}
    assert not replies & {r["reply"] for r in read_exchanges(HELDOUT)}
    assert probe.weights is not None and probe.weights.fit["voices"] == len(fit)


def test_another_model_fits_its_weights_once_and_caches_them(
    tiny_qwen3_gguf: Path, home: Path
) -> None:
    p = prepare(Probe(tiny_qwen3_gguf, home=home))
    [cached] = (home / "cache" / "probe").glob("probe-*.json")
    assert p.weights is not None and p.weights.dims == p.dims
    stamp = cached.stat().st_mtime_ns
    assert p.vote(TEA)[0] in (-1, 0, 1)
    p.close()
    again = prepare(Probe(tiny_qwen3_gguf, home=home))  # read from the cache, not fitted again
    assert cached.stat().st_mtime_ns == stamp and again.weights == p.weights
    again.close()


def test_weights_of_another_model_are_refused(probe: Probe, tiny_qwen3_gguf: Path) -> None:
    other = Probe(tiny_qwen3_gguf, weights=probe.weights)
    with pytest.raises(JudgeError, match="dimensional states"):
        other.load()
    other.close()


def test_the_score_command_judges_a_file_in_order(
    smollm2_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAWD_MODEL", str(smollm2_gguf))
    rows = [
        {"request": TEA.request, "answer": TEA.answer, "reply": TEA.reply},
        {"request": "Capital of France?", "answer": "Paris.", "reply": "perfect, thanks!"},
        {"request": "Run the tests", "answer": "Done.", "reply": "3 failed", "role": "tool"},
    ]
    path = tmp_path / "exchanges.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = CliRunner().invoke(app, ["signals", "score", str(path)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 3 and all(line["mode"] == "probe" for line in lines)
    assert lines[0]["score"] in (-1, 0) and lines[1]["score"] in (0, 1)
    for line in lines:
        assert set(line) == {"score", "votes", "hint", "mode"}
        assert line["votes"][0]["kind"] == "probe" and "p(+1)" in line["votes"][0]["raw"]
    if lines[0]["score"] == -1:  # the reply extractor: the correction itself is the hint
        assert lines[0]["hint"] == TEA.reply
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"request": "x", "answer": "y"}))
    bad = CliRunner().invoke(app, ["signals", "score", str(path)])
    assert bad.exit_code == 1 and "'reply' must be a string" in bad.output and ":2:" in bad.output
