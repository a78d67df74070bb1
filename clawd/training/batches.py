"""From stored samples to padded tensors: the student and teacher views of each response.

The *student* sequence is the prompt exactly as served (``prompt_token_ids``; rendered again
from the client's messages when the user's memories were in it, so that the student learns
without them) followed by the response tokens as served. The *teacher* sequence is the same
prompt messages with the hint put in (``chattemplate.teacher_messages``), rendered with the
model's own template and tokenized, followed by the same response tokens. Both views score the
same response tokens.

Run alone to show how the stored samples would be batched::

    python -m clawd.training.batches
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from clawd.chattemplate import ChatTemplate, teacher_messages
from clawd.signals.shaping import shape_of
from clawd.training.repeats import repeated_ngrams


@dataclass
class Example:
    sample_id: int
    kind: str
    hint: str | None
    reward: float
    prompt_ids: list[int]
    teacher_prompt_ids: list[int]
    response_ids: list[int]
    device: Any = "cpu"
    old_lp: list[float] = field(default_factory=list)
    teacher_lp: list[float] = field(default_factory=list)
    ref_lp: list[float] = field(default_factory=list)
    # With cfg.train_opd_baseline, on the student's own answers: what the OPD term is worth at
    # each position in expectation over the student's next token, -KL(student_t || teacher_t);
    # the OPD advantage is taken relative to it (losses.token_advantages). Empty: no baseline.
    opd_base: list[float] = field(default_factory=list)
    # 1.0 on the response tokens that decoding forced for a memory (the name that opens the
    # answer, the end a length limit set: ``greedy.shaped_answer``), left out of the PPO steps
    # and trained by likelihood after them (``consolidate.learn_forced``). Empty: none.
    forced: list[float] = field(default_factory=list)

    @property
    def teaches(self) -> bool:
        """Whether the hinted view trains this example (the OPD term): it has a hint."""
        return bool(self.hint)

    @property
    def has_reward(self) -> bool:
        return "rl" in self.kind.split("+")

    def report(self, tok: Any) -> dict[str, Any]:
        """Per-token view for reports and the TUI: tokens, their OPD advantage and which were
        forced."""
        pieces = [tok.decode([t]) for t in self.response_ids]
        base = self.opd_base or [0.0] * len(self.old_lp)
        opd = [t - o - b for t, o, b in zip(self.teacher_lp, self.old_lp, base, strict=True)]
        return {
            "sample_id": self.sample_id,
            "kind": self.kind,
            "hint": self.hint,
            "reward": self.reward,
            "tokens": pieces,
            "opd_advantage": [round(a, 4) for a in opd] if self.teaches else None,
            # the positions decoding forced for a memory, trained by likelihood
            "forced": [i for i, f in enumerate(self.forced) if f],
        }


def build_examples(
    samples: list[dict[str, Any]],
    tok: Any,
    template: ChatTemplate,
    cfg: Any,
    device: Any = "cpu",
    memories: Mapping[int, str] | None = None,
) -> tuple[list[Example], list[int]]:
    """Examples for the samples that fit ``cfg.n_ctx``; returns them and the ids of the
    samples that do not (empty or too long: they can never train). The tokens decoding forced
    for the memories' shape (the turn's ``params["forced"]``) are marked ``forced`` while the
    memories the answer was served with, as they read now in ``memories`` (id -> text, active
    or learned), still ask for the shape it was served with: a name the user has since
    changed, edited or deleted is not taught."""
    out: list[Example] = []
    skipped: list[int] = []
    for s in samples:
        prompt = json.loads(s["prompt_token_ids"])
        response = json.loads(s["response_token_ids"])
        teacher = prompt
        params = json.loads(s.get("params") or "{}")
        served_with = json.loads(s.get("memory_ids") or "[]")
        forced = []
        if served_with and params.get("forced") and _same_shape(params, served_with, memories):
            at = set(params["forced"])
            forced = [1.0 if i in at else 0.0 for i in range(len(response))]
        if served_with:
            # Served with the user's memories in context: the student learns without them
            # (consolidation teaches what they say; clawd.training.consolidate).
            text = template.render(
                json.loads(s["prompt_messages"]), **(params.get("chat_template_kwargs") or {})
            )
            prompt = teacher = tok(text, add_special_tokens=False)["input_ids"]
        if s["hint"]:
            msgs = teacher_messages(json.loads(s["prompt_messages"]), s["hint"], cfg.hint_placement)
            text = template.render(msgs, **(params.get("chat_template_kwargs") or {}))
            teacher = tok(text, add_special_tokens=False)["input_ids"]
        longest = max(len(prompt), len(teacher)) + len(response)
        if not response or not prompt or longest > cfg.n_ctx:
            skipped.append(s["id"])
            continue
        out.append(
            Example(
                s["id"],
                s["kind"],
                s["hint"],
                float(s["reward"] or 0.0),
                prompt,
                teacher,
                response,
                device,
                forced=forced,
            )
        )
    return out, skipped


def _same_shape(
    params: dict[str, Any], served_with: list[int], memories: Mapping[int, str] | None
) -> bool:
    """Whether the memories an answer was served with (those still in ``memories``) ask now
    for every part of the shape it was served with (``params["shaped"]``)."""
    texts = [memories[i] for i in served_with if i in memories] if memories else []
    now = shape_of(texts, first_answer=True).describe()
    was = params.get("shaped") or {}
    return bool(was) and all(now.get(k) == v for k, v in was.items())


def pad(rows: list[list[int]], value: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows right-padded with ``value``: ids (B, L) and their attention mask (B, L)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), value, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        attn[i, : len(r)] = 1
    return ids, attn


def collate(examples: list[Example]) -> dict[str, torch.Tensor]:
    """Right-padded tensors: ids/attn (B, L), starts (B,), per-token values and mask (B, T),
    ``repeated`` (B, T) 1.0 on response tokens that repeat an earlier 4-gram of their answer
    (``repeats.repeated_ngrams``), ``forced`` (B, T) 1.0 on tokens decoding forced and
    ``sampled`` (B, T) the mask without them."""
    device = examples[0].device
    t = max(len(e.response_ids) for e in examples)
    s_ids, s_attn = pad([e.prompt_ids + e.response_ids for e in examples])
    t_ids, t_attn = pad([e.teacher_prompt_ids + e.response_ids for e in examples])
    mask = torch.zeros(len(examples), t)

    def per_token(attr: str) -> torch.Tensor:
        out = torch.zeros(len(examples), t)
        for i, e in enumerate(examples):
            values = getattr(e, attr)
            if values:
                out[i, : len(values)] = torch.tensor(values)
        return out

    repeated = torch.zeros(len(examples), t)
    for i, e in enumerate(examples):
        mask[i, : len(e.response_ids)] = 1.0
        repeated[i, : len(e.response_ids)] = torch.tensor(repeated_ngrams(e.response_ids))
    forced = per_token("forced")  # 0 on padding, as the mask
    batch = {
        "student_ids": s_ids,
        "student_attn": s_attn,
        "student_start": torch.tensor([len(e.prompt_ids) for e in examples]),
        "teacher_ids": t_ids,
        "teacher_attn": t_attn,
        "teacher_start": torch.tensor([len(e.teacher_prompt_ids) for e in examples]),
        "mask": mask,
        "repeated": repeated,
        "old_lp": per_token("old_lp"),
        "teacher_lp": per_token("teacher_lp"),
        "opd_base": per_token("opd_base"),
        "ref_lp": per_token("ref_lp"),
        "forced": forced,
        "sampled": mask - forced,
        "reward": torch.tensor([e.reward for e in examples]),
        "has_hint": torch.tensor([1.0 if e.teaches else 0.0 for e in examples]),
        "has_reward": torch.tensor([1.0 if e.has_reward else 0.0 for e in examples]),
    }
    return {name: v.to(device) for name, v in batch.items()}


if __name__ == "__main__":
    from clawd.store.db import Store

    with Store.open() as store:
        for row in store.db["samples"].rows_where("status = 'approved'", limit=20):
            n = len(json.loads(row["response_token_ids"]))
            print(f"sample {row['id']}: {row['kind']:7} {n:4} response tokens hint={row['hint']!r}")
