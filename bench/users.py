"""Simulated users from a file: preferences, complaints and prompts the six personas do not have.

``bench/personas.py`` holds the six users the learner was built and tuned against. A learner
tuned to them can look good on them alone, so ``python -m bench.learning --users FILE`` also
runs users described in a JSON file: their own preferences (checked by a small set of checker
kinds), their own complaints (the words the system's judge and hint extractor must read) and
their own questions and held-out questions. ``bench/data/users-heldout.json`` holds such users;
no default, setting or test of the learner was chosen on them. The format::

    {"interaction_prompts": ["..."], "eval_prompts": ["..."],
     "users": [{"name": "river", "thanks": ["..."],
                "preferences": [{"name": "one_paragraph", "kind": "forbid", "pattern": "\\\\n",
                                 "rule": "Answer in one paragraph.", "complaints": ["..."]}]}]}

Checker kinds, each applied to the answer with surrounding whitespace stripped:
``max_words`` (``n``), ``max_sentences`` (``n``: runs of ``.!?`` followed by a space or the
end), ``forbid`` and ``require`` (``pattern``, a Python regular expression, case-insensitive with
``"ignore_case": true``), ``ends_with`` (``text``). A malformed file raises ``UsersFileError``
naming the user and the field. Run alone to check a file and score an answer against it::

    python -m bench.users bench/data/users-heldout.json "Some answer to check"
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.personas import PERSONAS, Persona, Preference, at_most_words

SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")


class UsersFileError(ValueError):
    """A users file that cannot be used; the message names the place."""


def _need(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (kind in (str, list) and not value):
        raise UsersFileError(f"{where}: '{key}' must be a non-empty {kind.__name__}")
    return value


def _strings(obj: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    items = _need(obj, key, list, where)
    if not all(isinstance(x, str) and x.strip() for x in items):
        raise UsersFileError(f"{where}: every item of '{key}' must be a non-empty string")
    return tuple(items)


def checker(spec: dict[str, Any], where: str) -> Callable[[str], bool]:
    """The check a preference ``spec`` describes: a pure function of the answer's text."""
    kind = _need(spec, "kind", str, where)
    if kind in ("max_words", "max_sentences"):
        n = spec.get("n")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise UsersFileError(f"{where}: '{kind}' needs 'n', a whole number >= 1")
        if kind == "max_words":
            return at_most_words(n).check  # the personas' own word limit
        return lambda text: len(SENTENCE_END.findall(text.strip())) <= n
    if kind in ("forbid", "require"):
        flags = re.IGNORECASE if spec.get("ignore_case") else 0
        try:
            pattern = re.compile(_need(spec, "pattern", str, where), flags)
        except re.error as e:
            raise UsersFileError(f"{where}: 'pattern' is not a regular expression: {e}") from e
        if kind == "forbid":
            return lambda text: pattern.search(text.strip()) is None
        return lambda text: pattern.search(text.strip()) is not None
    if kind == "ends_with":
        end = _need(spec, "text", str, where)
        return lambda text: text.strip().endswith(end)
    raise UsersFileError(
        f"{where}: unknown 'kind' {kind!r}; known: max_words, max_sentences, forbid, require, "
        "ends_with"
    )


def parse(data: Any, source: str = "users file") -> dict[str, Persona]:
    """The users ``data`` (a users file's JSON) describes, by name."""
    if not isinstance(data, dict):
        raise UsersFileError(f"{source}: the top level must be an object")
    asks = _strings(data, "interaction_prompts", source)
    held = _strings(data, "eval_prompts", source)
    if shared := set(asks) & set(held):
        raise UsersFileError(f"{source}: held-out prompts are also asked: {sorted(shared)[0]!r}")
    users: dict[str, Persona] = {}
    for i, u in enumerate(_need(data, "users", list, source)):
        where = f"{source}: users[{i}]"
        if not isinstance(u, dict):
            raise UsersFileError(f"{where}: must be an object")
        name = _need(u, "name", str, where)
        where = f"{source}: user {name!r}"
        if name in PERSONAS or name in users:
            raise UsersFileError(f"{where}: the name is taken (a shipped persona or another user)")
        prefs = []
        for j, spec in enumerate(_need(u, "preferences", list, where)):
            at = f"{where}, preferences[{j}]"
            if not isinstance(spec, dict):
                raise UsersFileError(f"{at}: must be an object")
            rule = _need(spec, "rule", str, at)
            complaints = _strings(spec, "complaints", at)
            if any(rule.lower() in c.lower() for c in complaints):
                raise UsersFileError(f"{at}: a complaint quotes the rule; use a person's words")
            check = checker(spec, at)
            prefs.append(Preference(_need(spec, "name", str, at), check, rule, complaints))
        extra = {"thanks": _strings(u, "thanks", where)} if "thanks" in u else {}
        # a file's users are scored on their own held-out prompts; nothing is tuned on them
        users[name] = Persona(
            name, tuple(prefs), prompts=asks, eval_prompts=held, tuning_prompts=(), **extra
        )
    return users


def load(path: Path) -> dict[str, Persona]:
    """The users in the JSON file at ``path``; ``UsersFileError`` names what is wrong."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise UsersFileError(f"{path}: cannot read it: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise UsersFileError(f"{path}: not JSON: {e}") from e
    return parse(data, str(path))


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python -m bench.users FILE [ANSWER]")
    try:
        users = load(Path(sys.argv[1]))
    except UsersFileError as e:
        sys.exit(str(e))
    for name, persona in users.items():
        line = f"{name}: {', '.join(p.name for p in persona.preferences)}"
        if len(sys.argv) == 3:
            broken = [p.name for p in persona.violated(sys.argv[2])]
            line += f"  compliance {persona.compliance(sys.argv[2]):.2f}" + (
                f" (breaks {', '.join(broken)})" if broken else ""
            )
        print(line)


if __name__ == "__main__":
    main()
