"""The gate's ability check on rates: false rejections of tiny updates, catches of collapses.

Two kinds of real adapters for the default model (SmolLM2-135M), judged by the real gate
(``clawd.adapters.gate.evaluate``, 32 general prompts, 64 tokens) and then by two rules on the same
greedy answers, side by side:

- **nudges**: random LoRA weights at a small scale (KL to the base model about 0.003-0.02, the
  size of a first update trained on one reply). Their loops move by chance; any rejection of one
  is a false rejection;
- **collapsed**: LoRAs fitted to answer every general prompt with one loop ("I'm sorry, I'm
  sorry, ...", " 1. 1. 1.", "A: A: A:") for a few steps or many: every acceptance is a miss;
- **partial**: LoRAs fitted to loop on only some of the prompts (``--partial``: 3 and 8 of the
  32, 30 steps): where the rules differ by design. 3 new loops of 32 are within chance for the
  rate rule; 8 are not.

The rules: ``count`` (before: any prompt that loops with the adapter and not with the base
model fails it) and ``rate`` (now: ``clawd.adapters.loops.general_ability``, an exact sign
test on the prompts where the two differ). Both keep the distinct-openings check. Run alone
(about 1 minute an adapter on 2 cores)::

    python -m bench.gate                         # 8 nudges, 6 collapsed
    python -m bench.gate --nudges 4 --collapsed 3 --out docs/bench/gate.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from clawd.adapters import gate, loops
from clawd.chattemplate import ChatTemplate
from clawd.models import resolve
from fixtures.adapterkit import fit_answer, make_adapter

SCALES = (0.01, 0.02)  # random-nudge scales (KL to base measured in the results)
LOOPS = ("I'm sorry, I'm sorry, I'm sorry, I'm sorry.", " 1." * 16, "A: A: A: A: A: A: A:")
STEPS = (6, 60)  # fitting steps of a collapsed adapter
PARTIAL = (3, 8)  # prompts a partially looping adapter was fitted to loop on


def verdicts(result: dict[str, Any]) -> dict[str, Any]:
    """Both rules on one gate result: whether each passes, and the loop counts they read."""
    base, cand = result["ability"]["base"], result["ability"]["candidate"]
    new = loops.new_loops(base, cand)
    gone = sorted(set(base["at"]) - set(cand["at"]))
    fewer = round((base["distinct"] - cand["distinct"]) * cand["answers"])
    return {
        "kl_to_base": round(result["kl_to_base"], 4),
        "base_degenerate": len(base["at"]),
        "degenerate": len(cand["at"]),
        "new": len(new),
        "gone": len(gone),
        "fewer_openings": fewer,
        "count_passes": not new and fewer <= 8,
        "rate_passes": loops.general_ability(base, cand)[0],
        "p": loops.excess_pvalue(len(new), len(gone)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--nudges", type=int, default=8)
    ap.add_argument("--collapsed", type=int, default=6)
    ap.add_argument("--partial", type=int, default=0, help="partially looping adapters")
    ap.add_argument("--out", type=Path, default=Path("docs/bench/gate.json"))
    args = ap.parse_args()
    gguf = resolve(args.model)
    tpl = ChatTemplate.from_gguf(gguf)
    work = Path(tempfile.mkdtemp(prefix="clawd-bench-gate-"))
    from llama_cpp import Llama

    vocab = Llama(str(gguf), vocab_only=True, verbose=False)

    def tokenize(text: str) -> list[int]:
        return vocab.tokenize(text.encode(), add_bos=False, special=True)

    prompts = gate.general_prompts(tokenize, tpl.render)
    rows: list[dict[str, Any]] = []
    t0 = time.time()

    def judge(kind: str, name: str, path: Path) -> None:
        result = gate.evaluate(
            gguf, path, None, [], prompts, max_kl=1e9, step_kl=1e9, cache=work / "base.json"
        )
        rows.append({"kind": kind, "adapter": name, **verdicts(result)})
        print(json.dumps(rows[-1]), flush=True)

    for i in range(args.nudges):
        scale = SCALES[i % len(SCALES)]
        path = make_adapter(gguf, work, work / f"n{i}", seed=100 + i, scale=scale)
        judge("nudge", f"random seed {100 + i} scale {scale}", path)
    for i in range(args.collapsed):
        text, steps = LOOPS[i % len(LOOPS)], STEPS[(i // len(LOOPS)) % len(STEPS)]
        out = work / f"c{i}.gguf"
        (work / f"c{i}").mkdir()
        fit_answer(gguf, work, work / f"c{i}", prompts, tokenize(text), out, steps=steps)
        judge("collapsed", f"{text[:12]!r} x {steps} steps", out)
    for i in range(args.partial):
        k = PARTIAL[i % len(PARTIAL)]
        text = LOOPS[i % len(LOOPS)]
        out = work / f"p{i}.gguf"
        (work / f"p{i}").mkdir()
        some = prompts[i % 4 :: 4][:k] if k <= 8 else prompts[:k]
        fit_answer(gguf, work, work / f"p{i}", some, tokenize(text), out, steps=30)
        judge("partial", f"{text[:12]!r} on {k} prompts", out)
    summary = {}
    for kind in ("nudge", "collapsed", "partial"):
        mine = [r for r in rows if r["kind"] == kind]
        summary[kind] = {
            "n": len(mine),
            "count_passes": sum(r["count_passes"] for r in mine),
            "rate_passes": sum(r["rate_passes"] for r in mine),
        }
    report = {
        "model": gguf.name,
        "date": time.strftime("%Y-%m-%d"),
        "minutes": round((time.time() - t0) / 60, 1),
        "summary": summary,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
