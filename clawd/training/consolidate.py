"""Consolidation: each training run distils the user's memories into the adapter.

The memories (``clawd.store.memories``) shape every answer from the system message; a training
run teaches the model to answer as it does with them without them (context distillation:
Askell et al. 2021, Snell et al. 2022). On the user's recent prompts, the *teacher* is the
model with the memories in the system message and the *student* the same prompt without them;
the teacher writes its answer (greedy, ``ANSWER_TOKENS`` at most, with the update's starting
weights) and the existing token-level OPD term, ``teacher_lp - old_lp`` on each of its tokens,
moves the student toward it inside the same clipping, trust region and KL budget as every
other sample.

The teacher answers as the daemon serves them: under the memories' shape
(``clawd.signals.shaping``: the name opening the answer, the end where a length limit falls, a
closing question), which a small model's system message alone does not give (SmolLM2-135M
wrote "Address the user as Noor." into 1 answer of 32). The tokens decoding forced are marked,
and after the update's PPO steps ``learn_forced`` trains them by likelihood
(``losses.likelihood_loss``), outside the clipping and the trust region that a token at
probability 1e-5 could never leave: the memory says what they are, no sample has to find
them. It goes on until the forced tokens are likely (``LEARNED_NLL``) or ``FORCED_STEPS`` are
taken, with the other tokens of the same answers held where the PPO steps left them (a k3 KL
term), and stops where its drift on general prompts would take the update past the gate's
limit: what is left, the next updates learn. Distilling the unshaped teacher taught nothing in
4 updates; a likelihood term inside the PPO steps, which the trust region ended after 2 or 3,
not the name either (docs/experiments.md, "2026-12-06: consolidation toward the answers as
served", "2026-12-06: the forced tokens learned after the PPO steps").

The teacher is the weights being trained, so what they already serve badly would teach the
next update its own fault: an answer that repeats a phrase, or keeps the shape with nothing
of its own to say ("Sam," and the end), is not distilled (``_worth_teaching``). A memory leaves
the prompt alone (``clawd.adapters.memgap``), so with two memories or more every second prompt
also trains with the others staying (``staying``).

The prompts come from the store (``memory_inputs``): the user's newest distinct prompts of
conversations that may be learned from; every third is held out, never trained on, for the
gate's gap measurement (``clawd.adapters.memgap``). Memories already learned are distilled too, so
that a later update keeps them.

Run alone to see what the next run would distil::

    python -m clawd.training.consolidate
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch

from clawd.signals.kept import broken
from clawd.signals.shaping import Shape, shape_of
from clawd.store import memories
from clawd.store.db import Store
from clawd.training.batches import Example, pad
from clawd.training.config import TrainConfig
from clawd.training.greedy import greedy_answers, shaped_answer
from clawd.training.losses import k3_kl, likelihood_loss, mean_k3_kl, opd_kl_baseline
from clawd.training.ppo import NonFinite, forward
from clawd.training.repeats import repeated_ngrams
from clawd.training.torchmodel import response_log_softmax

# The teacher's answer per prompt: room for a length limit of three sentences to end it.
ANSWER_TOKENS = 96
PROMPTS = 12  # the user's newest distinct prompts a run reads
HELD_OUT_EVERY = 3  # every third is kept for the gap measurement
# learn_forced stops once a batch's forced tokens cost less than this (nats per token: the name
# is then about 3 times as likely as anything else), or after FORCED_STEPS. On `sam`'s memories
# (SmolLM2, 8 prompts, lr 1e-4) the name opened 10 of 10 held-out answers after 16 steps, at
# 0.6 nats; 32 steps went on to 0.01 and to answers about "Sam" (docs/experiments.md).
LEARNED_NLL = 0.5
FORCED_STEPS = 24
# The drift check of learn_forced: every CHECK_EVERY steps, on PROBE_PROMPTS of the gate's
# general prompts and their greedy answers (PROBE_TOKENS) before its steps.
CHECK_EVERY = 4
PROBE_PROMPTS = 8
PROBE_TOKENS = 48


def memory_inputs(store: Store, prompts: int = PROMPTS) -> dict[str, Any] | None:
    """What a run distils: the memories (active and learned: ``{"id", "text"}``), the user's
    prompts to train on and those held out (each a list of chat messages, the client's own,
    without memories). None when there is no memory or no prompt."""
    mems = [
        {"id": m["id"], "text": m["text"]} for m in memories.in_prompt(store, include_learned=True)
    ]
    if not mems:
        return None
    seen: set[str] = set()
    picked: list[list[dict[str, Any]]] = []
    rows = store.db.execute(
        "SELECT t.prompt_messages FROM turns t JOIN conversations c ON c.id = t.conversation_id "
        "WHERE t.learn = 1 AND c.learn = 1 ORDER BY t.created_at DESC LIMIT ?",
        [prompts * 8],
    )
    for (raw,) in rows.fetchall():
        messages = [m for m in json.loads(raw or "[]") if m.get("role") != "system"]
        last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        if last is None:
            continue
        key = json.dumps(last.get("content"))
        if key in seen:
            continue
        seen.add(key)
        picked.append([last])  # the question alone: the memory, not the conversation, teaches
        if len(picked) >= prompts:
            break
    if not picked:
        return None
    heldout = picked[HELD_OUT_EVERY - 1 :: HELD_OUT_EVERY]
    train = [p for i, p in enumerate(picked) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1]
    return {"memories": mems, "train": train, "heldout": heldout}


def memory_examples(
    model: Any,
    tok: Any,
    template: Any,
    memory: dict[str, Any] | None,
    eos: list[int],
    max_seq_len: int,
    device: Any = "cpu",
) -> tuple[list[Example], dict[str, Any]]:
    """One OPD example per training prompt of ``memory`` (``memory_inputs``): student view
    without the memories, teacher view with them, the teacher's greedy answer under the
    memories' shape as the response, its forced tokens marked. With two memories or more,
    every second prompt has a second student view with all of them but one (a different one
    in turn): a memory leaves the prompt alone (``clawd.adapters.memgap``), and the answers
    with the others still there must keep it too. Sample ids are negative (-1, -2, ...):
    these are no stored samples. Returns the examples and what the report says of them."""
    if not memory or not memory["train"]:
        return [], {}
    block, _, _ = memories.system_block(memory["memories"], len, 1 << 30)

    def ids(messages: list[dict[str, Any]]) -> list[int]:
        return tok(template.render(messages), add_special_tokens=False)["input_ids"]

    mems = memory["memories"]
    students = [ids(p) for p in memory["train"]]
    teachers = [ids(memories.with_all(p, mems)) for p in memory["train"]]
    model.eval()
    # one-question prompts: the first answer of a conversation, which opens with the name
    shape = shape_of([m["text"] for m in mems], first_answer=True)
    if shape:
        shaped = [shaped_answer(model, t, shape, tok, ANSWER_TOKENS, eos) for t in teachers]
    else:
        shaped = [(a, []) for a in greedy_answers(model, teachers, ANSWER_TOKENS, eos)]
    out, dropped, forced_tokens = [], 0, 0
    for i, (s, t, (a, forced)) in enumerate(zip(students, teachers, shaped, strict=True)):
        if not a:
            continue
        if not _worth_teaching(a, shape, tok, eos):
            dropped += 1
            continue
        views = [s, *[ids(p) for p in staying(i, memory["train"][i], mems)]]
        fit = [v for v in views if max(len(v), len(t)) + len(a) <= max_seq_len]
        forced_tokens += int(sum(forced)) if fit else 0
        for v in fit:
            out.append(Example(-(len(out) + 1), "opd", block, 0.0, v, t, a, device, forced=forced))
    answers = [a for a, _ in shaped]
    report = {
        "memories": [m["id"] for m in mems],
        "prompts": len(memory["train"]),
        "heldout_prompts": len(memory["heldout"]),
        "examples": len(out),
        "dropped": dropped,
        "shape": shape.describe(),
        "forced_tokens": forced_tokens,  # of the answers distilled
        "answers": [tok.decode(a, skip_special_tokens=True)[:200] for a in answers[:3]],
    }
    return out, report


def staying(
    i: int, prompt: list[dict[str, Any]], mems: list[dict[str, Any]]
) -> list[list[dict[str, Any]]]:
    """The second student view of training prompt ``i`` (``memory_examples``), as chat
    messages: with two memories or more, on every second prompt, ``prompt`` with all of them
    but one (the ``i // 2``-th in turn); otherwise none."""
    if len(mems) < 2 or i % 2 == 0:
        return []
    return [memories.with_all(prompt, [m for j, m in enumerate(mems) if j != (i // 2) % len(mems)])]


def _worth_teaching(answer: list[int], shape: Shape, tok: Any, eos: list[int]) -> bool:
    """Whether the teacher's answer is one to distil: it says a phrase once (no repeated
    ``repeats.NGRAM``-token phrase) and keeps the memories' shape with words of its own
    (``clawd.signals.kept.broken``). The teacher is the weights being trained: an adapter that
    began to answer "Sam," and stop, or "Sam,\n\nHere's a revised version of your answer:" and
    again, would otherwise teach its own fault to the next update."""
    if any(repeated_ngrams(answer)):
        return False
    if not shape:
        return True
    ended = answer[-1] in eos
    text = tok.decode(answer[:-1] if ended else answer, skip_special_tokens=True)
    return not broken(shape, text, ended)


def learn_forced(
    model: Any,
    examples: list[Example],
    cfg: TrainConfig,
    on_step: Callable[[dict[str, Any]], None],
    probes: list[list[int]] | None = None,
    eos: list[int] | None = None,
    on_check: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Train the tokens decoding forced for a memory (``Example.forced``) by likelihood, after
    the PPO steps: batches of ``cfg.batch_size`` of the examples that have any, in turn, until
    a batch's forced tokens cost less than ``LEARNED_NLL`` nats a token (before its step) or
    ``FORCED_STEPS`` are taken. The loss (constant normaliser ``batch_size x norm_tokens``):

        likelihood_loss(forced) + k3_kl(sampled tokens, their log-probs before these steps)

    so that the rest of each answer stays as the PPO steps left it.

    A name that opens every answer is a change the gate's drift measure sees on every general
    prompt (on `sam`, 22 steps to a learned name took an update to a KL of 0.27 from its
    parent, past ``gate_step_kl``, and the gate served an earlier point without them). So every
    ``CHECK_EVERY`` steps the drift is read on ``probes`` (general prompts, token ids; their
    greedy answers before these steps, ``PROBE_TOKENS``), as the gate reads it (mean per-token
    KL of the full distributions), and past half of ``gate_step_kl`` (the other half is the PPO
    steps') the weights go back to the last check that was inside and the steps end: what is
    left is learned by the next updates (without ``probes`` and ``eos``, or when every probe's
    answer is empty, nothing bounds it but the gate). ``on_step`` gets each step's metrics
    (``phase`` "memory"); ``on_check`` the step count at each check found inside, with the
    weights of that moment in the model. Returns ``steps`` (kept), ``forced_nll`` (the last
    batch's, before its step), ``general_kl`` (the last check's) and ``ended``: "learned",
    "drift", "steps" or "none" (no example has forced tokens)."""
    marked = [e for e in examples if any(e.forced)]
    if not marked:
        return {"steps": 0, "ended": "none"}
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.train_lr, weight_decay=0.0)
    normalizer = float(cfg.batch_size * cfg.norm_tokens)
    batches = [marked[i : i + cfg.batch_size] for i in range(0, len(marked), cfg.batch_size)]

    model.eval()
    with torch.no_grad():  # where the PPO steps left every answer
        start = [forward(model, b)[1] for b in batches]
    probe = _Probe.of(model, probes or [], eos or [])
    out: dict[str, Any] = {"steps": 0, "ended": "steps"}
    for step in range(FORCED_STEPS):
        model.train()
        k = step % len(batches)
        batch, logp = forward(model, batches[k])
        forced, sampled = batch["forced"], batch["sampled"]
        nll = (-(logp.detach() * forced).sum() / forced.sum()).item()
        out["forced_nll"] = nll
        if nll < LEARNED_NLL:
            out["ended"] = "learned"
            break
        loss = likelihood_loss(logp, forced, normalizer)
        loss = loss + k3_kl(logp, start[k], sampled, normalizer)
        if not torch.isfinite(loss):
            raise NonFinite(f"non-finite loss at memory step {step + 1}")
        opt.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        if not torch.isfinite(grad_norm):
            raise NonFinite(f"non-finite gradient at memory step {step + 1}")
        opt.step()
        metrics = {"phase": "memory", "step": step + 1, "loss": loss.item(), "forced_nll": nll}
        metrics["kl_step"] = mean_k3_kl(logp.detach(), start[k], sampled).item()
        metrics["grad_norm"] = grad_norm.item()
        on_step(metrics)
        out["steps"] = step + 1
        if probe is not None and out["steps"] % CHECK_EVERY == 0:
            if not probe.inside(out, cfg):
                break
            if on_check:
                on_check(out["steps"])
    if probe is not None and out["steps"] % CHECK_EVERY and out["ended"] != "drift":
        probe.inside(out, cfg)  # the steps since the last check
    model.eval()
    return out


class _Probe:
    """The drift of the weights being trained from where they were made, on general prompts
    and their greedy answers then, read as the gate reads it."""

    @classmethod
    def of(cls, model: Any, prompts: list[list[int]], eos: list[int]) -> _Probe | None:
        """The probe on the first ``PROBE_PROMPTS`` of ``prompts``; None without prompts or
        when every greedy answer is empty (nothing to read the drift along)."""
        if not prompts or not eos:
            return None
        prompts = prompts[:PROBE_PROMPTS]
        answers = greedy_answers(model, prompts, PROBE_TOKENS, eos)
        rows = [(p + a, len(p), len(a)) for p, a in zip(prompts, answers, strict=True) if a]
        return cls(model, rows, eos) if rows else None

    def __init__(self, model: Any, rows: list[tuple[list[int], int, int]], eos: list[int]) -> None:
        """``rows``: (prompt and answer, where the answer starts, its length) per prompt."""
        self.model = model
        self.length = max(n for _, _, n in rows)
        device = next(model.parameters()).device
        self.ids, self.attn = pad([r for r, _, _ in rows], eos[0])
        self.start = torch.tensor([s for _, s, _ in rows])
        self.ids, self.attn, self.start = (t.to(device) for t in (self.ids, self.attn, self.start))
        self.mask = torch.tensor([[1.0] * n + [0.0] * (self.length - n) for _, _, n in rows])
        self.ref = self._logp()
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.kept = ([p.detach().clone() for p in self.params], 0)  # weights inside, steps

    @torch.no_grad()
    def _logp(self) -> torch.Tensor:
        self.model.eval()
        logp, _ = response_log_softmax(self.model, self.ids, self.attn, self.start, self.length)
        return logp

    def inside(self, out: dict[str, Any], cfg: TrainConfig) -> bool:
        """Whether the weights are inside half of ``gate_step_kl`` now (``out["general_kl"]``);
        if not, back to the last weights that were (``out["steps"]`` with them, ``ended``
        "drift")."""
        out["general_kl"] = self.drift()
        if out["general_kl"] <= cfg.gate_step_kl / 2:
            self.kept = ([p.detach().clone() for p in self.params], out["steps"])
            return True
        with torch.no_grad():
            for p, v in zip(self.params, self.kept[0], strict=True):
                p.copy_(v)
        out["steps"], out["ended"] = self.kept[1], "drift"
        return False

    def drift(self) -> float:
        """Mean over prompts of the mean per-token KL(now || then) along their answers."""
        per_token = -opd_kl_baseline(self._logp(), self.ref).cpu() * self.mask  # (B, T)
        return float((per_token.sum(1) / self.mask.sum(1)).mean())


if __name__ == "__main__":
    with Store.open() as store:
        print(json.dumps(memory_inputs(store), indent=1))
