"""Cost of learning from replies: an OPD+RL update vs a plain LoRA SFT step, per response token.

Same model (the served GGUF in torch), same LoRA (r 16 on every projection), same 8 samples
(a hinted, negatively rewarded answer of about 100 tokens each), same batch size and epochs.
The OPD+RL arm includes everything an update does: scoring ``old_lp`` and ``teacher_lp`` with
the pre-update weights, the clipped-loss steps and the optimizer. The SFT arm is
cross-entropy on the response tokens. Arms alternate for ``--rounds`` rounds; the ratio of
median seconds per response token trained is the figure. The OPD+RL update may stop early at
its trust region: its tokens are those of the steps it took (undone ones included, they cost
the same), not the whole schedule's.

    .venv/bin/python bench/train.py [--rounds 3] [--epochs 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clawd.chattemplate import ChatTemplate, teacher_messages
from clawd.config import clawd_home
from clawd.models import resolve
from clawd.training import ppo, torchmodel, train
from clawd.training.batches import Example, collate

ANSWER = (
    "The capital of France is Paris. It is known for the Eiffel Tower, the Louvre museum, "
    "Notre-Dame cathedral and the long avenues of the Champs-Elysees. Paris has been the centre "
    "of French political life for centuries, and today it is also a hub of fashion, art, food "
    "and science, visited by tens of millions of people every year."
)


def examples(tok, template: ChatTemplate, n: int) -> list[Example]:
    out = []
    for i in range(n):
        msgs = [{"role": "user", "content": f"Question {i}: what is the capital of France?"}]
        prompt = tok(template.render(msgs), add_special_tokens=False)["input_ids"]
        hinted = template.render(teacher_messages(msgs, "Answer in one word only."))
        teacher = tok(hinted, add_special_tokens=False)["input_ids"]
        response = tok(ANSWER, add_special_tokens=False)["input_ids"]
        out.append(
            Example(i, "opd+rl", "Answer in one word only.", -1.0, prompt, teacher, response)
        )
    return out


def opd_rl_update(base, cfg: train.TrainConfig, exs: list[Example]) -> tuple[float, int]:
    """Seconds of one whole update and the response tokens of the steps it took."""
    model = ppo.peft_model(base, cfg, None)
    steps: list[dict] = []
    t0 = time.perf_counter()
    ppo.score_examples(model, exs, cfg)
    ppo.train_steps(model, exs, cfg, steps.append)
    seconds = time.perf_counter() - t0
    model.unload()
    return seconds, sum(s["tokens"] for s in steps)


def sft_update(base, cfg: train.TrainConfig, exs: list[Example]) -> float:
    model = ppo.peft_model(base, cfg, None)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.train_lr)
    t0 = time.perf_counter()
    for _ in range(cfg.train_epochs):
        for i in range(0, len(exs), cfg.batch_size):
            model.train()
            batch = collate(exs[i : i + cfg.batch_size])
            lp = ppo.logprobs(model, batch, "student")
            loss = -(lp * batch["mask"]).sum() / batch["mask"].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    seconds = time.perf_counter() - t0
    model.unload()
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="GGUF (default: installed smollm2-135m)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("bench/results/train.json"))
    args = ap.parse_args()
    home = clawd_home()
    gguf = args.model or resolve("smollm2-135m", home)
    base, tok = torchmodel.load(gguf, home)
    cfg = train.TrainConfig(train_epochs=args.epochs, batch_size=4)
    exs = examples(tok, ChatTemplate.from_gguf(gguf), args.samples)
    tokens = args.epochs * sum(len(e.response_ids) for e in exs)  # the whole schedule
    sft_update(base, cfg, exs)  # warm up allocators and kernels
    rows: dict[str, list[float]] = {"opd_rl": [], "sft": []}
    trained: list[int] = []
    for r in range(args.rounds):
        seconds, n = opd_rl_update(base, cfg, exs)
        trained.append(n)
        rows["opd_rl"].append(seconds / n)
        rows["sft"].append(sft_update(base, cfg, exs) / tokens)
        print(
            f"round {r}: opd+rl {rows['opd_rl'][-1] * 1e3:.2f} ms/token ({n} of {tokens} "
            f"tokens trained), sft {rows['sft'][-1] * 1e3:.2f} ms/token"
        )
    med = {k: statistics.median(v) for k, v in rows.items()}
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "model": gguf.name,
        "samples": len(exs),
        "epochs": args.epochs,
        "response_tokens_scheduled": tokens,
        "opd_rl_tokens_trained": trained,
        "threads": torch.get_num_threads(),
        "ms_per_token": {k: v * 1e3 for k, v in med.items()},
        "ratio": med["opd_rl"] / med["sft"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
