"""Would the gate's ability check on the user's own prompts have caught a kept adapter's loop?

``bench.learning --keep-adapters`` keeps every adapter of a run in its daemon home. For each
adapter this re-asks, with the gate's own functions (``adapters.gate``: greedy answers in
llama.cpp, ``degeneration`` and ``general_ability``, 64 tokens):

- **own**: the user's prompts of the adapter's run (its trained, replayed and held-out samples,
  at most 16, newest first: what the gate now asks);
- **eval**: the learning bench's first ``--eval`` held-out prompts, which the gate never sees.

and prints, per adapter, its status in the run and the prompts where its answer is empty or
loops and the base model's is not, with the answer. With ``--cost N``, it also times the whole
gate (``adapters.gate.evaluate``) on the first kept adapter without and with its run's prompts,
alternated, N rounds (the base model's answers to the general prompts cached, as in the daemon).
Run alone, with the daemon homes ``bench.learning`` printed (``seed N: home PATH``)::

    python -m bench.ownprompts HOME [HOME ...] --eval 5 --cost 2
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from adapters.gate import (
    ABILITY_TOKENS,
    Scorer,
    degeneration,
    evaluate,
    general_ability,
    general_prompts,
)
from bench.personas import EVAL_PROMPTS
from clawd.chattemplate import ChatTemplate
from clawd.config import clawd_home
from clawd.models import resolve
from clawd.training.batches import Example
from clawd.training.config import TrainConfig
from clawd.training.update import own_prompts


def run_prompts(db: sqlite3.Connection, manifest: dict, limit: int) -> list[list[int]]:
    """The prompts the gate asks of the run's samples (``clawd.training.update.own_prompts``:
    distinct, newest sample first, at most ``limit``, none over 1024 tokens)."""
    examples = []
    for sid in {*manifest["samples"], *manifest["replayed"], *manifest["heldout"]}:
        row = db.execute("SELECT prompt_token_ids FROM samples WHERE id = ?", (sid,)).fetchone()
        if row and (prompt := json.loads(row[0])):
            examples.append(Example(sid, "rl", None, 0.0, prompt, prompt, []))
    return own_prompts(examples, limit)


def new_loops(scorer: Scorer, adapter: Path, prompts: list[list[int]]) -> list[str]:
    """The adapter's answers that degenerate where the base model's do not."""
    scorer.set_adapter(None)
    base = [scorer.answer(p, ABILITY_TOKENS) for p in prompts]
    scorer.set_adapter(adapter)
    mine = [scorer.answer(p, ABILITY_TOKENS) for p in prompts]
    _, new = general_ability(degeneration(base, scorer.is_end), degeneration(mine, scorer.is_end))
    return [scorer.llm.detokenize(mine[i]).decode("utf-8", "replace") for i in new]


def cost(gguf: Path, adapter: Path, own: list[list[int]], general: list[list[int]], n: int) -> None:
    """Seconds of a whole gate without and with ``own``, alternated, ``n`` rounds."""
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "gate.json"
        evaluate(gguf, adapter, None, [], general, cache=cache)  # fills the cache
        for i in range(n):
            for prompts in ([], own):
                started = time.perf_counter()
                evaluate(gguf, adapter, None, [], general, prompts, cache=cache)
                took = time.perf_counter() - started
                print(f"gate round {i + 1}, {len(prompts)} own prompts: {took:.1f} s", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("homes", nargs="+", type=Path, help="bench.learning daemon homes")
    p.add_argument("--eval", type=int, default=5, help="held-out prompts of the learning bench")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--cost", type=int, default=0, help="rounds of the gate's cost, side by side")
    args = p.parse_args()
    gguf = resolve(args.model, clawd_home())
    template = ChatTemplate.from_gguf(gguf)
    scorer = Scorer(gguf, n_ctx=4096)

    def tokenize(text: str) -> list[int]:
        return scorer.llm.tokenize(text.encode(), add_bos=False, special=True)

    evals = [tokenize(template.render([{"role": "user", "content": q}])) for q in EVAL_PROMPTS]
    limit = TrainConfig().gate_own_prompts
    timed = not args.cost
    for home in args.homes:
        db = sqlite3.connect(home / "clawd.db")
        for path in sorted(home.glob("adapters/*/manifest.json")):
            adapter = path.parent / "adapter.gguf"
            if not adapter.exists():
                print(f"{path.parent}: no weights (run bench.learning with --keep-adapters)")
                continue
            manifest = json.loads(path.read_text())
            prompts = run_prompts(db, manifest, limit)
            if not timed:
                timed = True
                cost(gguf, adapter, prompts, general_prompts(tokenize, template.render), args.cost)
            own = new_loops(scorer, adapter, prompts)
            held = new_loops(scorer, adapter, evals[: args.eval])
            print(
                f"{home.name} {path.parent.name} {manifest['status']}: own {len(own)}, eval "
                f"{len(held)}",
                flush=True,
            )
            for kind, answers in (("own", own), ("eval", held)):
                for a in answers:
                    print(f"    {kind}: {a[:100]!r}")
    scorer.close()


if __name__ == "__main__":
    main()
