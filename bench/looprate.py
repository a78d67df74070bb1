"""Are the gate's loops robust, or one greedy path? Sampled answers where the gate saw a loop.

The gate's ability check (``adapters.gate``) reads one greedy answer per prompt: an adapter is
rejected when that answer loops where the base model's does not. The daemon samples (temperature
0.7 by default), so a user sees a loop as often as sampled answers loop. For every adapter that
``bench.learning --keep-adapters`` kept in the given daemon homes whose gate verdict names new
degenerate answers to the general prompts (or loops its sampled answers excused), this asks
those prompts again in llama.cpp: the greedy answer now, and ``--samples`` answers sampled at
``--temperature`` (seeds 0..N-1), from the adapter and from the base model, and prints how
many of each loop (``adapters.loops.sampled_loops``, the gate's own sampler, 64 tokens). Run
alone::

    python -m bench.looprate HOME [HOME ...] --samples 8 --temperature 0.5
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from adapters.gate import ABILITY_TOKENS, Scorer, general_prompts
from adapters.loops import degeneration, sampled_loops
from clawd.chattemplate import ChatTemplate
from clawd.config import clawd_home
from clawd.models import resolve


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("homes", nargs="+", type=Path, help="bench.learning daemon homes")
    p.add_argument("--samples", type=int, default=8, help="sampled answers per prompt")
    p.add_argument("--temperature", type=float, default=0.5)
    p.add_argument("--model", default="smollm2-135m")
    args = p.parse_args()
    gguf = resolve(args.model, clawd_home())
    scorer = Scorer(gguf, n_ctx=1024)

    def tokenize(text: str) -> list[int]:
        return scorer.llm.tokenize(text.encode(), add_bos=False, special=True)

    prompts = general_prompts(tokenize, ChatTemplate.from_gguf(gguf).render)

    def loops(tokens: list[int]) -> bool:
        return bool(degeneration([tokens], scorer.is_end)["at"])

    def sampled(prompt: list[int]) -> int:
        return sampled_loops(scorer, prompt, args.samples, ABILITY_TOKENS, args.temperature)

    totals = {"adapter": 0, "base": 0, "answers": 0}
    for home in args.homes:
        for path in sorted(home.glob("adapters/*/manifest.json")):
            adapter = path.parent / "adapter.gguf"
            ability = json.loads(path.read_text())["gate"].get("ability", {})
            # new loops that counted, and those the gate's own sampled answers excused
            flagged = {n["prompt"] for n in ability.get("new_degenerate", [])}
            flagged |= {n["prompt"] for n in ability.get("sampled", [])}
            if not flagged or not adapter.exists():
                continue
            for k in sorted(flagged):
                scorer.set_adapter(None)
                base = sampled(prompts[k])
                scorer.set_adapter(adapter)
                mine = sampled(prompts[k])
                greedy = "loops" if loops(scorer.answer(prompts[k], ABILITY_TOKENS)) else "sound"
                totals["adapter"] += mine
                totals["base"] += base
                totals["answers"] += args.samples
                print(
                    f"{home.name} {path.parent.name} prompt {k}: greedy {greedy}; sampled answers"
                    f" that loop: adapter {mine}/{args.samples}, base {base}/{args.samples}",
                    flush=True,
                )
    scorer.close()
    print(f"in all, of {totals['answers']} sampled answers per model: {totals}")


if __name__ == "__main__":
    main()
