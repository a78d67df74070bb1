"""The learning benchmark's smoke configuration (CI): the loop makes an adapter and a score.

Quality thresholds belong to the benchmark (docs/benchmarks.md), not here.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench import learning, learnreport
from bench.learnreport import RESTATED_SHARE, count_loops, looping, loops, restated
from bench.personas import EVAL_PROMPTS, INTERACTION_PROMPTS, PERSONAS, SimulatedUser
from clawd.adapters.loops import degeneration
from fixtures.daemon import drop_adapter_weights


@pytest.mark.slow
def test_smoke_loop_trains_promotes_and_scores(smollm2_gguf: Path, tmp_path: Path) -> None:
    result = learning.main(
        ["--config", "smoke", "--model", str(smollm2_gguf), "--out", str(tmp_path)]
    )
    (run,) = result["runs"]
    base, first = run["rows"]
    assert base["train"]["status"] == "base" and base["adapter"] is None
    assert first["train"]["version"] and first["train"]["status"] in ("active", "rejected")
    if first["train"]["status"] == "active":
        assert first["adapter"] == first["train"]["version"]  # the evaluation used it
    assert first["signals"] == learning.CONFIGS["smoke"].interactions  # oracle: every turn
    for row in run["rows"]:
        assert 0.0 <= row["compliance"] <= 1.0
    saved = json.loads((tmp_path / "learning-smoke.json").read_text())
    assert saved["runs"][0]["rows"][1]["train"]["version"] == first["train"]["version"]
    assert (tmp_path / "learning-smoke.png").stat().st_size > 10_000
    assert "| brief | oracle | " in learnreport.summary(result)
    scores = first["signal_scores"]  # explicit feedback: one per turn, +1 or -1
    assert len(scores) == learning.CONFIGS["smoke"].interactions and set(scores) <= {1, -1}
    verdict = "rejected" if first["train"]["failed_checks"] else "active"
    assert first["train"]["status"] == verdict
    assert "| oracle | 1 | " in learnreport.diagnosis(result)
    assert all(isinstance(row["loops"], list) for row in run["rows"])  # every evaluation
    assert "| brief | oracle | " in learnreport.loops(result)


def test_personas_check_what_they_say_and_never_leak_the_rule() -> None:
    brief, sam, prose = PERSONAS["brief"], PERSONAS["sam"], PERSONAS["prose"]
    assert brief.compliance("Short and sweet.") == 1.0
    assert brief.compliance("word " * 31) == 0.0
    assert sam.compliance("Sure, Sam: tea is easy.") == 1.0
    assert sam.compliance("Sure: tea is easy.") == 0.5
    assert prose.compliance("- one\n- two") == 0.0 and prose.compliance("One, two.") == 1.0
    assert PERSONAS["calm"].compliance("Hi 😀") == 0.5
    assert PERSONAS["curious"].compliance("What do you think?") == 1.0
    user = SimulatedUser(brief)
    rules = {p.rule for persona in PERSONAS.values() for p in persona.preferences}
    for _ in range(50):
        reply = user.reply("word " * 40)
        assert reply and reply not in rules
        assert user.reply("ok.") in (None, *brief.thanks)
    assert user.oracle("word " * 40) == (-1, "Answer in at most 30 words.")
    assert not set(INTERACTION_PROMPTS) & set(EVAL_PROMPTS) and len(PERSONAS) >= 5


def test_a_runs_home_keeps_its_reports_and_store_without_the_adapter_weights(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    kept = [
        home / "clawd.db",
        home / "adapters" / "v1" / "report.json",
        home / "adapters" / "v1" / "manifest.json",
        home / "adapters" / "v1" / "peft" / "adapter_config.json",
    ]
    weights = [
        home / "adapters" / "v1" / "adapter.gguf",
        home / "adapters" / "v1" / "peft" / "adapter_model.safetensors",
        home / "adapters" / ".tmp-x" / "adapter.gguf",  # a run that never finished
    ]
    for i, path in enumerate(kept + weights):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * (i + 1))
    assert drop_adapter_weights(home) == sum(range(len(kept) + 1, len(kept) + len(weights) + 1))
    assert all(p.exists() for p in kept) and not any(p.exists() for p in weights)
    assert drop_adapter_weights(home) == 0  # nothing left to free
    assert drop_adapter_weights(tmp_path / "no-adapters-yet") == 0


def test_held_out_answers_that_loop_are_counted_by_the_gates_rule(smollm2_gguf: Path) -> None:
    texts = ["Tea is brewed with hot water.", "a sound of joy, " * 12, ""]
    assert looping(texts, smollm2_gguf) == [1, 2]  # the loop and the empty answer
    rows = [{"examples": texts}, {"examples": texts[:1], "loops": []}]
    result = {
        "config": {"updates": 1, "personas": ["brief"], "methods": ["oracle"]},
        "runs": [{"method": "oracle", "persona": "brief", "seed": 0, "rows": rows}],
    }
    assert count_loops(result, smollm2_gguf) == 1  # only the row that lacked them
    assert "| brief | oracle | 2/3 | 0/1 |" in loops(result)
    del rows[1]["loops"]
    assert "| brief | oracle | 2/3 | - |" in loops(result)
    rows[1]["loops"] = [0]  # a stale count
    assert count_loops(result, smollm2_gguf, again=True) == 2
    assert "| brief | oracle | 2/3 | 0/1 |" in loops(result)


def test_a_phrase_said_over_and_over_loops_though_the_gates_rule_passes_it(
    smollm2_gguf: Path,
) -> None:
    """Held-out answers of served adapters (docs/experiments.md, "One phrase said over and
    over"): a numbered list repeating one item, whose changing numbers keep its trigrams
    distinct, and a short phrase said four times. A parallel list, which the 4-token version
    of the rule rejected in the gate, and a sound answer are not loops."""
    numbered = (
        "1. Clean your bike. 2. Use a bike chain cleaner. 3. Use a bike chain wrench. "
        "4. Use a bike chain wrench. 5. Use a bike chain wrench. 6. Use a bike chain wrench."
    )
    joy = (
        "The sound of thunder is a sound of purest joy. It is a sound of purest joy, a sound "
        "of purest joy, a sound of purest joy."
    )
    sound = [
        "1. Don't eat before bed. 2. Don't drink before bed. 3. Don't watch TV before bed. "
        "4. Don't use your phone before bed. 5. Don't use your computer before bed.",
        "To make a cup of tea, boil water, pour it over a tea bag in a mug, wait three to "
        "five minutes, then take the bag out and add milk or sugar if you like.",
        "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\nprint(add(3, 4))",
    ]
    tokens = learnreport.tokenize([numbered, joy, *sound], smollm2_gguf)
    assert degeneration(tokens, lambda _: False)["at"] == []  # the gate's rule passes them all
    assert [restated(t) >= RESTATED_SHARE for t in tokens] == [True, True, False, False, False]
    assert looping([numbered, joy, *sound], smollm2_gguf) == [0, 1]
    # The share of tokens inside a phrase said three times or more, on token ids.
    assert restated([]) == 0.0 and restated(list(range(20))) == 0.0
    assert restated([1, 2, 3, 4, 5, 6] * 3) == 1.0 and restated([1, 2, 3, 4, 5, 6] * 2) == 0.0
    assert restated([9, 1, 2, 3, 4, 5, 6, 8, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6]) == 18 / 21


def test_loading_vocabularies_from_two_threads_leaves_stdout_where_it_was(
    smollm2_gguf: Path,
) -> None:
    """llama-cpp-python's quiet load points fds 1 and 2 at /dev/null and restores what it saved;
    two threads loading at once could leave them there for good, and the learning bench's
    report (--jobs 2) vanished from its log. ``tokenize`` loads one vocabulary at a time."""
    before = [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)]
    for _ in range(10):
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda t: learnreport.tokenize([t], smollm2_gguf), ["a b"] * 8))
        assert all(g == got[0] for g in got) and got[0][0]
        assert [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)] == before
