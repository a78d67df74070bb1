"""The loop guard: no step of an update may make a greedy answer loop.

The gate rejects an adapter whose greedy answer to a general prompt or to one of the user's own
prompts turns empty or loops where the base model's does not (``adapters.loops.general_ability``).
On SmolLM2-135M most rejected updates were rejected for such a loop ("1. 1. 1. ...") that their
last steps had made, and some lineages sat so close to one that every earlier point of an update,
down to one step, looped too (docs/experiments.md, "Walking back a harmful update"). So the
trainer asks the gate's prompts after every step, with the weights being trained, and
``ppo.train_steps`` undoes a step that makes an answer degenerate where the update's starting
weights answered soundly, and retakes it at half the rate; with no retakes left the update ends
before it. It is a proxy of the gate (torch in float32, not llama.cpp: a near-tie may break the
other way there), so the gate still judges.

Writing 32 answers of 64 tokens anew takes 12-16 s on 2 cores (SmolLM2-135M). A small step
changes few greedy answers, and a greedy answer changes only where the model's choice does:
``greedy_answers`` checks the previous answers in one teacher-forced pass and writes again only
those that changed, from their first changed token. Even so a check of 38 prompts took 28 s on
one thread, and torch found 4 of the 6 kept adapters' loops that llama.cpp found: the setting
``train_loop_guard`` is off by default (docs/experiments.md, "A loop guard inside the update").

Run alone to print a model's (or an adapter's) greedy answers to the general prompts and which
degenerate::

    python -m clawd.training.loopguard MODEL.gguf [PEFT_DIR]
"""

from __future__ import annotations

import time
from typing import Any

import torch

from clawd.training.guided import cut_at_end
from clawd.training.torchmodel import response_log_softmax


@torch.inference_mode()
def _write(
    model: Any, rows: list[list[int]], budgets: list[int], eos: list[int], batch: int
) -> list[list[int]]:
    """Greedy continuations of ``rows``, each at most its budget of tokens, cut after the first
    end-of-turn token; left-padded batches (``generate`` derives positions from the mask)."""
    out: list[list[int]] = []
    device = next(model.parameters()).device
    for i in range(0, len(rows), batch):
        chunk, limits = rows[i : i + batch], budgets[i : i + batch]
        width = max(map(len, chunk))
        ids = torch.tensor([[eos[0]] * (width - len(r)) + r for r in chunk], device=device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in chunk], device=device)
        got = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max(limits),
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos[0],
        )
        out += [
            cut_at_end(row[width:].tolist()[:n], eos) for row, n in zip(got, limits, strict=True)
        ]
    return out


@torch.inference_mode()
def _first_change(
    model: Any, prompts: list[list[int]], answers: list[list[int]], batch: int
) -> list[tuple[int, int] | None]:
    """For each answer: None when the model's greedy choice at every one of its positions is the
    token there, else ``(j, token)``, the first position where it is not and its choice there."""
    out: list[tuple[int, int] | None] = []
    device = next(model.parameters()).device
    for i in range(0, len(prompts), batch):
        rows = [p + a for p, a in zip(prompts[i : i + batch], answers[i : i + batch], strict=True)]
        width = max(map(len, rows))
        ids = torch.tensor([r + [0] * (width - len(r)) for r in rows], device=device)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=device)
        start = torch.tensor([len(p) for p in prompts[i : i + batch]], device=device)
        length = max(len(a) for a in answers[i : i + batch])
        logp, _ = response_log_softmax(model, ids, mask, start, length)
        choice = logp.argmax(-1).tolist()  # (B, T)
        for row, answer in zip(choice, answers[i : i + batch], strict=True):
            j = next((k for k, t in enumerate(answer) if row[k] != t), None)
            out.append(None if j is None else (j, row[j]))
    return out


def greedy_answers(
    model: Any,
    prompts: list[list[int]],
    max_tokens: int,
    eos: list[int],
    previous: list[list[int]] | None = None,
    batch: int = 16,
) -> tuple[list[list[int]], int]:
    """The model's greedy answers to ``prompts`` (at most ``max_tokens`` tokens, cut after the
    end-of-turn token, which is kept) and how many were written again.

    With ``previous`` (the answers of weights a step ago): those the model still chooses token
    for token are kept; the others continue from their first changed token. An answer that ends
    at its end-of-turn token or at ``max_tokens`` is checked whole, so the result is the greedy
    answer (up to float rounding between a batch and a single row)."""
    if previous is None:
        return _write(model, prompts, [max_tokens] * len(prompts), eos, batch), len(prompts)
    changes = _first_change(model, prompts, previous, max(1, batch // 2))
    out = [list(a) for a in previous]
    redo: list[int] = []
    for k, change in enumerate(changes):
        if change is None:
            continue
        j, token = change
        out[k] = [*previous[k][:j], token]
        if token not in eos and len(out[k]) < max_tokens:
            redo.append(k)
    if redo:
        rows = [prompts[k] + out[k] for k in redo]
        more = _write(model, rows, [max_tokens - len(out[k]) for k in redo], eos, batch)
        for k, tail in zip(redo, more, strict=True):
            out[k] += tail
    return out, sum(c is not None for c in changes)


class LoopGuard:
    """The gate's ability rule (``adapters.loops.general_ability``), asked of the weights being
    trained: ``check()`` after a step says whether it made an answer degenerate that the
    update's starting weights answered soundly (or collapsed the answers); ``accept()`` keeps
    the answers of a step that stays.

    ``prompts`` are token ids (the general prompts and the user's own, as the gate asks them),
    ``max_tokens`` the gate's ``ability_tokens``, ``alpha`` its ``ability_alpha``."""

    def __init__(
        self,
        model: Any,
        prompts: list[list[int]],
        max_tokens: int,
        eos: list[int],
        alpha: float,
    ) -> None:
        from adapters.loops import degeneration

        self.model, self.prompts, self.max_tokens = model, prompts, max_tokens
        self.eos, self.alpha = eos, alpha
        mark = time.monotonic()
        self.answers, _ = greedy_answers(model, prompts, max_tokens, eos)
        self.start = degeneration(self.answers, self.is_end)
        self.pending: list[list[int]] | None = None
        self.checks = self.written = 0
        self.seconds = time.monotonic() - mark

    def is_end(self, token: int) -> bool:
        return token in self.eos

    def check(self) -> dict[str, Any] | None:
        """None when the current weights answer every prompt as soundly as the starting ones;
        else the first new loop: ``prompt`` (its index), ``answer`` (token ids)."""
        from adapters.loops import degeneration, general_ability

        mark = time.monotonic()
        was = self.model.training
        self.model.eval()
        try:
            answers, written = greedy_answers(
                self.model, self.prompts, self.max_tokens, self.eos, self.answers
            )
        finally:
            self.model.train(was)
        self.checks, self.written = self.checks + 1, self.written + written
        self.pending = answers
        ok, new = general_ability(self.start, degeneration(answers, self.is_end), self.alpha)
        self.seconds += time.monotonic() - mark
        if ok:
            return None
        first = new[0] if new else None  # None: no single loop, the answers collapsed
        return {"prompt": first, "answer": answers[first] if first is not None else []}

    def accept(self) -> None:
        """The last checked step stays: its answers are the next check's starting guess."""
        if self.pending is not None:
            self.answers, self.pending = self.pending, None

    def report(self) -> dict[str, Any]:
        """What the guard cost: checks, answers written again, seconds (the start included)."""
        return {
            "prompts": len(self.prompts),
            "checks": self.checks,
            "rewritten": self.written,
            "seconds": round(self.seconds, 1),
        }


def script_model(module: str) -> tuple[Any, Any, list[list[int]], list[int]]:
    """For a module run alone with ``MODEL.gguf [PEFT_DIR]``: the model in eval mode (with the
    adapter, when given), its tokenizer, the gate's general prompts as token ids and the
    end-of-turn ids; exits with a usage line on other arguments."""
    import sys
    from pathlib import Path

    from adapters.gate import general_prompts
    from clawd.chattemplate import ChatTemplate
    from clawd.config import clawd_home
    from clawd.training import torchmodel

    if len(sys.argv) not in (2, 3):
        sys.exit(f"usage: python -m {module} MODEL.gguf [PEFT_DIR]")
    gguf = Path(sys.argv[1])
    model, tok = torchmodel.load(gguf, clawd_home())
    if len(sys.argv) == 3:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, sys.argv[2])
    model.eval()
    render = ChatTemplate.from_gguf(gguf).render
    prompts = general_prompts(lambda s: tok(s, add_special_tokens=False)["input_ids"], render)
    return model, tok, prompts, torchmodel.end_tokens(tok)


def main() -> None:
    from adapters.gate import ABILITY_TOKENS
    from adapters.loops import degeneration

    model, tok, prompts, eos = script_model("clawd.training.loopguard")
    answers, _ = greedy_answers(model, prompts, ABILITY_TOKENS, eos)
    bad = set(degeneration(answers, lambda t: t in eos)["at"])
    for k, a in enumerate(answers):
        mark = "LOOP " if k in bad else ""
        print(f"{k:2d} {mark}{tok.decode(a)!r}")


if __name__ == "__main__":
    main()
