"""Does the loop guard (torch) see the loops the gate (llama.cpp) sees, adapter by adapter?

The loop guard (``clawd.training.loopguard``) asks the gate's prompts with the weights being
trained, in torch (float32 weights dequantized from the GGUF); the gate asks them in llama.cpp
(the quantized GGUF and the exported LoRA). Greedy answers at a near-tie can break differently
in the two. For every adapter ``bench.learning --keep-adapters`` kept in the given daemon homes
this writes the greedy answers to the 32 general prompts (64 tokens, the gate's
``ABILITY_TOKENS``) both ways, the base model's too, and counts per prompt whether each calls
the answer degenerate (``adapters.loops.degeneration``), and per adapter whether each finds a
new loop (``general_ability``: degenerate where the base model's answer is not, in the same
runtime). Run alone, with the homes ``bench.learning`` printed (``seed N: home PATH``)::

    python -m bench.guardagree HOME [HOME ...] --max 5
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from adapters.gate import ABILITY_TOKENS, Scorer, general_prompts
from adapters.loops import degeneration, general_ability
from clawd.chattemplate import ChatTemplate
from clawd.config import clawd_home
from clawd.models import resolve
from clawd.training import torchmodel
from clawd.training.loopguard import greedy_answers


def main() -> None:
    from peft import PeftModel

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("homes", nargs="+", type=Path, help="bench.learning daemon homes")
    p.add_argument("--max", type=int, default=5, help="adapters per home, oldest first")
    p.add_argument("--model", default="smollm2-135m")
    args = p.parse_args()
    gguf = resolve(args.model, clawd_home())
    render = ChatTemplate.from_gguf(gguf).render
    scorer = Scorer(gguf, n_ctx=1024)

    def tokenize(text: str) -> list[int]:
        return scorer.llm.tokenize(text.encode(), add_bos=False, special=True)

    prompts = general_prompts(tokenize, render)
    base, tok = torchmodel.load(gguf, clawd_home())
    base.eval()
    eos = torchmodel.end_tokens(tok)
    started = time.monotonic()
    torch_base, _ = greedy_answers(base, prompts, ABILITY_TOKENS, eos)
    torch_base_deg = degeneration(torch_base, lambda t: t in eos)
    scorer.set_adapter(None)
    llama_base_deg = degeneration(
        [scorer.answer(q, ABILITY_TOKENS) for q in prompts], scorer.is_end
    )
    print(
        f"base model: degenerate in torch {torch_base_deg['at']}, in llama.cpp "
        f"{llama_base_deg['at']} ({time.monotonic() - started:.0f} s)",
        flush=True,
    )
    counts = {"both": 0, "torch only": 0, "llama.cpp only": 0, "neither": 0}
    verdicts = {"both": 0, "torch only": 0, "llama.cpp only": 0, "neither": 0}
    for home in args.homes:
        folders = sorted(home.glob("adapters/*/peft/adapter_model.safetensors"))[: args.max]
        for weights in folders:
            folder = weights.parent.parent
            status = json.loads((folder / "manifest.json").read_text())["status"]
            started = time.monotonic()
            model = PeftModel.from_pretrained(base, folder / "peft")
            model.eval()
            mine, _ = greedy_answers(model, prompts, ABILITY_TOKENS, eos, previous=torch_base)
            base = model.unload()  # the plain base model again, for the next adapter
            torch_deg = degeneration(mine, lambda t: t in eos)
            scorer.set_adapter(folder / "adapter.gguf")
            llama_deg = degeneration(
                [scorer.answer(q, ABILITY_TOKENS) for q in prompts], scorer.is_end
            )
            t_at, l_at = set(torch_deg["at"]), set(llama_deg["at"])
            for k in range(len(prompts)):
                key = _cell(k in t_at, k in l_at)
                counts[key] += 1
            torch_ok, torch_new = general_ability(torch_base_deg, torch_deg)
            llama_ok, llama_new = general_ability(llama_base_deg, llama_deg)
            verdicts[_cell(not torch_ok, not llama_ok)] += 1
            print(
                f"{home.name} {folder.name} {status}: new loops in torch {torch_new}, "
                f"in llama.cpp {llama_new} ({time.monotonic() - started:.0f} s)",
                flush=True,
            )
    scorer.close()
    print(f"per prompt, degenerate in: {counts}")
    print(f"per adapter, a new loop found in: {verdicts}")


def _cell(torch_says: bool, llama_says: bool) -> str:
    if torch_says and llama_says:
        return "both"
    if torch_says:
        return "torch only"
    return "llama.cpp only" if llama_says else "neither"


if __name__ == "__main__":
    main()
