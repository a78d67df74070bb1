"""Memory's immediate effect: compliance on held-out prompts right after the first reply that
made a memory, with the memories in the system message and without, side by side.

For each simulated user (the six personas, the held-out users of
``bench/data/users-heldout.json`` and the new ones of ``bench/data/users-new.json``): the user
asks its interaction prompts, the served model answers (as the daemon samples: temperature 0.7),
and the user replies the way it does (a complaint about a broken preference, or thanks);
each reply goes through the daemon's capture (``clawd.signals.memory.capture``) into a store,
as the daemon does, until a reply has made a memory or ``--replies`` replies were made. Then
every held-out prompt of the user is answered ``--samples`` times in three arms, same seeds:
without memories (``off``), with them in the system message only (``prompt``:
``clawd.store.memories.system_block``, the daemon's block) and as the daemon serves them
(``on``: the block and what decoding keeps of them, ``clawd.signals.shaping``); each answer is
checked against each preference.

Printed per user and preference: k/n answers that meet it in each arm, with 95% Wilson
intervals; and how many replies it took to make the first memory. Run alone (SmolLM2-135M,
about 1 minute a user on 2 cores)::

    python -m bench.memory
    python -m bench.memory --users brief,sam --samples 2 --out docs/bench/memory.json
    python -m bench.memory --file bench/data/users-blind-a.json   # users of a file alone
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.capture import wilson
from bench.personas import PERSONAS, Persona, SimulatedUser
from bench.users import UsersFileError, load
from clawd.config import load_settings
from clawd.models import resolve
from clawd.serving.engine import Engine, GenParams, generate_blocking
from clawd.signals.memory import remember
from clawd.signals.shaping import Shape, shape_of
from clawd.store import memories
from clawd.store.db import Store

DATA = Path(__file__).parent / "data"
MAX_TOKENS = 96  # as bench.learning's evaluation
TEMPERATURE = 0.7  # the daemon's default


def all_users(files: list[Path] | None = None) -> dict[str, Persona]:
    """The personas and the users of the shipped files, or of ``files`` alone when given."""
    if files:
        users: dict[str, Persona] = {}
        for path in files:
            users.update(load(path))
        return users
    users = dict(PERSONAS)
    for name in ("users-heldout.json", "users-new.json"):
        if (DATA / name).exists():
            users.update(load(DATA / name))
    return users


def first_memories(
    engine: Engine, user: Persona, store: Store, replies: int, seed: int
) -> dict[str, Any]:
    """Converse as ``user`` until a reply makes a memory; what was said and made."""
    sim = SimulatedUser(user, random.Random(seed))
    said = []
    for i in range(replies):
        q = sim.ask()
        prompt = engine.tokenize(engine.render([{"role": "user", "content": q}]))
        params = GenParams(temperature=TEMPERATURE, max_tokens=MAX_TOKENS, seed=seed + i)
        answer = generate_blocking(engine, prompt, params).content
        reply = sim.reply(answer)
        if reply is None:
            continue
        made = remember(store, reply, source="reply", answer=answer)
        said.append({"reply": reply, "made": [m["memory"]["text"] for m in made]})
        if made:
            break
    return {"replies": said, "memories": [m["text"] for m in memories.in_prompt(store)]}


def compliance(
    engine: Engine, user: Persona, block: str, samples: int, seed: int, shape: Shape | None = None
) -> dict[str, list[bool]]:
    """Per preference, whether each answer (every held-out prompt, ``samples`` seeds) meets it,
    with ``block`` in the system message ("" : none) and ``shape`` kept by decoding."""
    met: dict[str, list[bool]] = {p.name: [] for p in user.preferences}
    for q in user.eval_prompts:
        messages = memories.with_memories([{"role": "user", "content": q}], block)
        prompt = engine.tokenize(engine.render(messages))
        for s in range(samples):
            params = GenParams(
                temperature=TEMPERATURE, max_tokens=MAX_TOKENS, seed=seed + s, shape=shape
            )
            text = generate_blocking(engine, prompt, params).content
            for p in user.preferences:
                met[p.name].append(p.check(text))
    return met


def share(flags: list[bool]) -> dict[str, Any]:
    k, n = sum(flags), len(flags)
    return {"k": k, "n": n, "rate": round(k / n, 3) if n else None, "ci95": wilson(k, n)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", default="", help="comma-separated names (default: all)")
    ap.add_argument(
        "--file",
        type=Path,
        action="append",
        help="a users file (bench/users.py) to run instead of the shipped users; repeatable",
    )
    ap.add_argument("--samples", type=int, default=2, help="answers per held-out prompt")
    ap.add_argument("--replies", type=int, default=8, help="most replies before giving up")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    try:
        users = all_users(args.file)
    except UsersFileError as e:
        ap.error(f"--file: {e}")
    names = [n for n in args.users.split(",") if n] or list(users)
    if unknown := [n for n in names if n not in users]:
        ap.error(f"--users: unknown {unknown}; known: {', '.join(users)}")
    settings = load_settings()
    model = resolve(args.model or settings.model)
    engine = Engine(model, n_ctx=2048, n_threads=settings.n_threads)
    engine.load()
    t0 = time.monotonic()
    rows = []
    try:
        for name in names:
            user = users[name]
            with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "clawd.db") as store:
                said = first_memories(engine, user, store, args.replies, args.seed)
                rows_in = memories.in_prompt(store)
                block, ids, _ = memories.system_block(
                    rows_in, lambda t: len(engine.tokenize(t)), 256
                )
            # each held-out prompt opens a conversation
            shape = shape_of([r["text"] for r in rows_in if r["id"] in ids], first_answer=True)
            off = compliance(engine, user, "", args.samples, args.seed)
            prompt = compliance(engine, user, block, args.samples, args.seed) if block else off
            on = (
                compliance(engine, user, block, args.samples, args.seed, shape) if shape else prompt
            )
            row = {
                "user": name,
                **said,
                "shaped": shape.describe(),
                "preferences": {
                    p: {"off": share(off[p]), "prompt": share(prompt[p]), "on": share(on[p])}
                    for p in off
                },
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        engine.close()
    report = {
        "model": model.name,
        "date": time.strftime("%Y-%m-%d"),
        "samples": args.samples,
        "temperature": TEMPERATURE,
        "minutes": round((time.monotonic() - t0) / 60, 1),
        "rows": rows,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    for r in rows:
        for p, f in r["preferences"].items():
            print(
                f"{r['user']:8} {p:22} off {f['off']['k']:3}/{f['off']['n']:<3} "
                f"prompt {f['prompt']['k']:3}/{f['prompt']['n']:<3} "
                f"on {f['on']['k']:3}/{f['on']['n']:<3}  memories: {r['memories']}"
            )


if __name__ == "__main__":
    main()
