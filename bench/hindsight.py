"""How often the hindsight answer that would train meets the persona, by number of candidates.

For each persona and interaction prompt, the base model's greedy answer plays the served
answer; ``clawd.training.hindsight.hindsight_examples`` (the trainer's own code, base weights) then
writes and chooses the hindsight answers with ``hindsight_candidates`` = each value given, ranked
by each ``hindsight_peak`` given (0: mean hint gain; k: the mean of the k largest per-token
gains), with ``hindsight_guidance`` = each scale given (1: no guided answer). Every setting
samples from the same seed, so settings with the same number of candidates
choose among the same answers. The table counts, per setting, how many answers were kept, how
many meet every preference and how many quote the hint's header, and how long the hindsight
phase took. Run alone::

    python -m bench.hindsight --personas curious,sam --prompts 8:16 --candidates 1,4
    python -m bench.hindsight --personas curious,sam --prompts 8:16 --candidates 4 --peaks 0,3
    python -m bench.hindsight --personas curious,sam --prompts 8:16 --candidates 1 --guidance 1,1.5
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from adapters.gate import general_prompts
from bench.personas import INTERACTION_PROMPTS, PERSONAS
from clawd.chattemplate import HINT_HEADER, ChatTemplate, teacher_messages
from clawd.config import clawd_home
from clawd.models import resolve
from clawd.training import hindsight, torchmodel
from clawd.training.batches import Example
from clawd.training.config import TrainConfig


def measure(
    gguf: Path,
    home: Path,
    personas: list[str],
    prompts: tuple[str, ...],
    counts: list[int],
    peaks: tuple[int, ...] = (0,),
    guidance: tuple[float, ...] = (1.0,),
) -> list[dict]:
    model, tok = torchmodel.load(gguf, home)
    template = ChatTemplate.from_gguf(gguf)

    def tokens(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    references = general_prompts(tokens, template.render)[::8]
    eos = [tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id]
    rows = []
    for name in personas:
        persona = PERSONAS[name]
        hint = " ".join(p.rule for p in persona.preferences)
        examples = []
        for i, q in enumerate(prompts):
            msgs = [{"role": "user", "content": q}]
            plain = tokens(template.render(msgs))
            hinted = tokens(template.render(teacher_messages(msgs, hint)))
            ids = torch.tensor([plain])
            served = model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=128,
                do_sample=False, eos_token_id=eos, pad_token_id=eos[0],
            )[0, ids.shape[1] :].tolist()  # fmt: skip
            examples.append(Example(i, "opd+rl", hint, -1.0, plain, hinted, served))
        for n, peak, g in [(n, k, g) for n in counts for k in peaks for g in guidance]:
            torch.manual_seed(0)
            started = time.monotonic()
            cfg = TrainConfig(
                hindsight=True, hindsight_candidates=n, hindsight_peak=peak, hindsight_guidance=g
            )
            written, seen = hindsight.hindsight_examples(model, examples, cfg, eos, references)
            texts = [tok.decode(e.response_ids, skip_special_tokens=True) for e in written]
            rows.append(
                {
                    "persona": name,
                    "candidates": n,
                    "peak": peak,
                    "guidance": g,
                    "hinted": len(examples),
                    "kept": len(written),
                    "meets_all": sum(not persona.violated(t) for t in texts),
                    "quotes_header": sum(HINT_HEADER in t for t in texts),
                    "seconds": round(time.monotonic() - started, 1),
                    "texts": texts,
                    "seen": seen,
                }
            )
            print({k: v for k, v in rows[-1].items() if k not in ("texts", "seen")}, flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--personas", default="curious,sam")
    p.add_argument("--prompts", default="8:16", help="a slice of the interaction prompts")
    p.add_argument("--candidates", default="1,4", help="hindsight_candidates values to compare")
    p.add_argument("--peaks", default="0", help="hindsight_peak values to compare (0: mean)")
    p.add_argument("--guidance", default="1", help="hindsight_guidance values (1: none)")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--out", type=Path, default=Path("bench/results/hindsight.json"))
    args = p.parse_args()
    torch.set_num_threads(2)
    lo, hi = (int(x) for x in args.prompts.split(":"))
    gguf = resolve(args.model, clawd_home())
    rows = measure(
        gguf, clawd_home() / "cache", args.personas.split(","),  # the user's torch conversion
        INTERACTION_PROMPTS[lo:hi], [int(n) for n in args.candidates.split(",")],
        tuple(int(k) for k in args.peaks.split(",")),
        tuple(float(g) for g in args.guidance.split(",")),
    )  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
