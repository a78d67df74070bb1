"""Simulated users from a file (bench/users.py): the checkers, the held-out file, clear errors."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bench import learning, users
from bench.personas import EVAL_PROMPTS, INTERACTION_PROMPTS, SimulatedUser

HELDOUT = Path(__file__).resolve().parent.parent / "bench" / "data" / "users-heldout.json"


def _file(*prefs: dict, **top: object) -> dict:
    data = {
        "interaction_prompts": ["Why is grass green?"],
        "eval_prompts": ["What is rust?"],
        "users": [{"name": "ada", "preferences": list(prefs)}],
    }
    return {**data, **top}


def _pref(**spec: object) -> dict:
    return {"name": "p", "rule": "Do it this way.", "complaints": ["not like that"], **spec}


ASKED_TWICE = _file(_pref(kind="forbid", pattern="x"), eval_prompts=["Why is grass green?"])
TAKEN = {**_file(), "users": [{"name": "brief", "preferences": [_pref(kind="max_words", n=3)]}]}


@pytest.mark.parametrize(
    ("spec", "good", "bad"),
    [
        ({"kind": "max_words", "n": 3}, "one two three", "one two three four"),
        ({"kind": "max_sentences", "n": 2}, "One. Two!\n", "One. Two? Three."),
        ({"kind": "max_sentences", "n": 1}, "Pi is 3.14 or so.", "Yes. No."),
        ({"kind": "forbid", "pattern": "\\n"}, "one line\n\n", "two\nlines"),
        ({"kind": "require", "pattern": "\\byou\\b", "ignore_case": True}, "You can.", "One can."),
        ({"kind": "require", "pattern": "\\byou\\b"}, "you can", "You can"),
        ({"kind": "ends_with", "text": "?"}, "Ok? ", "Ok."),
    ],
)
def test_each_checker_kind_checks_what_it_says(spec: dict, good: str, bad: str) -> None:
    (user,) = users.parse(_file(_pref(**spec))).values()
    assert user.compliance(good) == 1.0 and user.compliance(bad) == 0.0


def test_the_heldout_users_ask_their_own_prompts_and_complain_in_their_own_words() -> None:
    found = users.load(HELDOUT)
    assert set(found) == {"river", "jo"}
    for persona in found.values():
        assert not set(persona.prompts) & set(INTERACTION_PROMPTS + EVAL_PROMPTS)
        assert not set(persona.eval_prompts) & set(persona.prompts)
        user = SimulatedUser(persona, random.Random(0))
        assert {user.ask() for _ in range(50)} <= set(persona.prompts)
        answer = "Line one.\nLine two. " + "word " * 60
        reply = user.reply(answer)
        assert reply in {c for p in persona.violated(answer) for c in p.complaints}
        rating, hint = user.oracle(answer)
        assert rating == -1 and hint == " ".join(p.rule for p in persona.violated(answer))
    river = found["river"]
    assert river.compliance("Tides follow the moon. The sun helps a little.") == 1.0
    assert river.compliance("Tides follow the moon.\nThe sun helps.") == 0.5
    assert found["jo"].compliance("Oil your chain and you are set.") == 1.0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_file(_pref(kind="max_lines", n=2)), "unknown 'kind' 'max_lines'"),
        (_file(_pref(kind="max_words", n=0)), "'max_words' needs 'n'"),
        (_file(_pref(kind="forbid", pattern="(")), "'pattern' is not a regular expression"),
        (_file(_pref(kind="ends_with")), "'text' must be a non-empty str"),
        (_file(_pref(kind="forbid", pattern="x", complaints=[])), "'complaints' must be"),
        (
            _file(_pref(kind="forbid", pattern="x", complaints=["Please do it this way."])),
            "a complaint quotes the rule",
        ),
        (ASKED_TWICE, "also asked"),
        ({"users": []}, "'interaction_prompts' must be"),
        (TAKEN, "user 'brief': the name is taken"),
    ],
)
def test_a_malformed_file_names_the_place(data: dict, message: str) -> None:
    with pytest.raises(users.UsersFileError, match=message.replace("(", r"\(")):
        users.parse(data, "f.json")


def test_the_learning_bench_rejects_a_bad_users_file_before_starting(tmp_path: Path) -> None:
    bad = tmp_path / "users.json"
    bad.write_text("{not json")
    with pytest.raises(SystemExit) as stop:
        learning.main(["--users", str(bad), "--out", str(tmp_path)])
    assert stop.value.code == 2  # argparse's usage error, with the file named
    good = tmp_path / "ok.json"
    good.write_text(json.dumps(_file(_pref(kind="max_words", n=3))))
    with pytest.raises(SystemExit):  # its users are known; a persona outside it and the six is not
        learning.main(["--users", str(good), "--personas", "nobody", "--out", str(tmp_path)])
