"""One update as a pure function of its inputs: samples, parent adapter, settings, base model.

``update(inputs, out, cache_home, on_step)`` loads the base GGUF into torch (cached under
``cache_home``, see ``torchmodel``), puts a LoRA on it (warm-started from the parent's PEFT
folder), builds the examples, holds every fifth new one out for the gate, adds the memories'
distillation (``clawd.training.consolidate``), scores them with the pre-update weights, takes
the PPO steps (``clawd.training.ppo``) and then trains the tokens a memory forced. It writes
``peft/`` and ``adapter.gguf`` into ``out`` and returns the report and what the gate needs, as
plain data (token ids, numbers, strings). It reads no store and knows no CLAWD_HOME: the same
call runs in the trainer process (``train_backend = local``) and on a Ray worker
(``clawd.training.remote``); the caller records steps, runs the gate and settles the samples.

Run alone: see ``clawd.training.train``, which builds the inputs from the store.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from clawd.training import consolidate, earlier, ppo, repeats
from clawd.training.batches import Example, build_examples
from clawd.training.config import TrainConfig

OnStep = Callable[[dict[str, float]], None]


class TrainingError(Exception):
    """The run was aborted; the message says why in words (it is also recorded)."""


class TooLong(TrainingError):
    """No sample fits in ``max_seq_len`` tokens (the ``n_ctx`` setting); ``sample_ids`` can
    never train (the run drops them)."""

    def __init__(self, max_seq_len: int, sample_ids: list[int]) -> None:
        super().__init__(f"every sample was longer than {max_seq_len} tokens")
        self.max_seq_len, self.sample_ids = max_seq_len, sample_ids

    def __reduce__(self) -> tuple[Any, ...]:  # comes back whole from a Ray worker
        return (TooLong, (self.max_seq_len, self.sample_ids))


class Cancelled(BaseException):
    """The run was asked to stop (SIGTERM to the trainer, Ctrl+C); raised where it was."""


@dataclass
class UpdateInputs:
    """Everything one update depends on. ``samples`` and ``replay`` are store rows (samples
    joined with their turn's prompt messages, params and model hash), JSON-serialisable."""

    samples: list[dict[str, Any]]
    replay: list[dict[str, Any]]
    cfg: TrainConfig
    kl_coef: float  # the KL penalty's coefficient where the parent's run left it
    model_path: Path
    digest: str  # sha256 of the base GGUF
    parent_peft: Path | None = None  # the active adapter's PEFT folder, warm start
    # The user's memories and prompts to distil them on (clawd.training.consolidate), or None.
    memory: dict[str, Any] | None = None


def check_memory(model_path: Path) -> None:
    import psutil

    # fp32 weights (~4x a 4-bit file, the worst case), activations and the optimizer's copies.
    need = model_path.stat().st_size * 4 * 2.5
    have = psutil.virtual_memory().available
    if have < need:
        raise TrainingError(
            f"not enough memory: about {need / 1e9:.1f} GB needed, {have / 1e9:.1f} GB available"
        )


def update(
    inputs: UpdateInputs, out: Path, cache_home: Path, on_step: OnStep | None = None
) -> dict[str, Any]:
    """Train one adapter into ``out``; returns ``report`` (for report.json, without the
    version), ``trained``/``replayed``/``heldout_ids`` (sample ids), ``heldout`` and
    ``general`` (the gate's held-out examples and general prompts, as token ids),
    ``own_prompts`` (the user's prompts the gate also asks, ``own_prompts``), ``earlier``
    (points of the update the gate may fall back on, latest first: ``clawd.training.earlier``),
    ``ended`` and ``steps``; the report's ``seconds`` says how long each phase took. Raises
    TrainingError (or ppo.NonFinite) and leaves ``out`` incomplete."""
    from clawd.adapters.gate import ABILITY_TOKENS, general_prompts
    from clawd.chattemplate import ChatTemplate
    from clawd.training import torchmodel

    cfg, model_path = inputs.cfg, inputs.model_path
    seconds: dict[str, float] = {}  # where the run's time went, phase by phase
    mark = time.monotonic()

    def lap(phase: str) -> None:
        nonlocal mark
        now = time.monotonic()
        seconds[phase] = round(now - mark, 1)
        mark = now

    model, tok = _load(inputs, cache_home)
    template = ChatTemplate.from_gguf(model_path)
    device = next(model.parameters()).device
    examples, heldout, replayed, skipped = _split(inputs, tok, template, device)
    trained_ids = [e.sample_id for e in examples]
    own = own_prompts([*examples, *heldout, *replayed], cfg.gate_own_prompts)
    examples += replayed

    general = general_prompts(
        lambda text: tok(text, add_special_tokens=False)["input_ids"], template.render
    )[: cfg.gate_prompts]
    lap("load")
    eos = torchmodel.end_tokens(tok)
    distilled, memory_report = consolidate.memory_examples(
        model, tok, template, inputs.memory, eos, cfg.n_ctx, device
    )
    if distilled:  # the memories' distillation: answers the starting weights write
        examples += distilled
        lap("memories")
    ppo.score_examples(model, examples, cfg)
    lap("score")
    found: list[repeats.Repeat] = []
    repeats_written = 0
    # The starting weights' own loops on the user's prompts (not the gate's general ones, which
    # it measures drift on: docs/experiments.md, "Unlikelihood on the user's own prompts only").
    if cfg.train_unlikelihood > 0 and own:
        found, repeats_written = repeats.own_repeats(model, own, ABILITY_TOKENS, eos)
        lap("repeats")
    ended, steps, kept, trainable = _steps(
        model, examples, cfg, inputs.kl_coef, found, on_step, (general, eos)
    )
    lap("train")
    if not steps:
        raise TrainingError(
            f"the first step was already past the trust region (KL {ended.get('kl_step', 0):.3f} "
            f"> train_target_kl {cfg.train_target_kl}): nothing was learned"
        )
    points = _export(model, model_path, out, ended, kept, trainable, cfg.gate_retries)
    lap("export")
    report = {
        "status": "succeeded",
        "n_samples": len(examples),
        "new_samples": len(trained_ids),
        "replayed": len(replayed),
        "memories": memory_report,  # the memories distilled, on how many prompts
        # with train_unlikelihood: the starting weights' greedy answers that repeat a phrase
        "repeating_answers": [
            {"answer": tok.decode(r.answer_ids), "repeated": sum(r.marked)} for r in found
        ],
        "repeats_asked": repeats_written,  # greedy answers written
        "skipped": skipped,
        "config": asdict(cfg),
        "steps": steps,
        "ended": ended,
        "earlier": [{k: v for k, v in p.items() if k != "peft"} for p in points],
        "seconds": seconds,
        "samples": [e.report(tok) for e in examples],
    }
    return {
        "report": report,
        "trained": trained_ids,
        "replayed": [e.sample_id for e in replayed],
        "heldout_ids": [e.sample_id for e in heldout],
        "heldout": [_held_out(e) for e in heldout],
        "general": general,
        "own_prompts": own,
        "earlier": points,
        "steps": steps,
        "ended": ended,
        "skipped": skipped,
    }


def _load(inputs: UpdateInputs, cache_home: Path) -> tuple[Any, Any]:
    """The model to train (the parent's adapter on the base, or a new one) and its tokenizer,
    on the GPU in 4 bits when there is one; threads and seed as configured."""
    from clawd.training import torchmodel

    cfg = inputs.cfg
    check_memory(inputs.model_path)
    if cfg.train_threads:
        torch.set_num_threads(cfg.train_threads)
    torch.manual_seed(cfg.seed)
    cuda = torch.cuda.is_available()
    base, tok = torchmodel.load(
        inputs.model_path,
        cache_home,
        device="cuda" if cuda else "cpu",
        qlora=cuda,
        digest=inputs.digest,
    )
    return ppo.peft_model(base, cfg, inputs.parent_peft), tok


def _held_out(e: Example) -> dict[str, Any]:
    """A held-out sample as the gate takes it (``HeldOut``, as a dict)."""
    from clawd.adapters.gate import HeldOut

    hinted = bool(e.hint)
    return asdict(
        HeldOut(e.prompt_ids, e.teacher_prompt_ids, e.response_ids, e.reward, hinted, e.has_reward)
    )


def _steps(
    model: Any,
    examples: list[Example],
    cfg: TrainConfig,
    kl_coef: float | None,
    found: list[repeats.Repeat],
    on_step: OnStep | None,
    probes: tuple[list[list[int]], list[int]],
) -> tuple[dict[str, Any], list[dict[str, float]], dict[int, Any], list[torch.Tensor]]:
    """The update's steps (``ppo.train_steps``, then ``consolidate.learn_forced`` on the tokens
    a memory forced: ``ended["memory"]``): how it ended, every step's metrics (each also to
    ``on_step``, with the run's ``total_steps``), the earlier points kept for the gate (their
    weights, by step count, before any memory step) and the trainable parameters they are
    values of. ``probes``: general prompts and the end-of-turn ids, which bound the memory
    steps' drift."""
    total = cfg.train_epochs * math.ceil(len(examples) / cfg.batch_size)
    total += cfg.max_halvings if cfg.train_target_kl > 0 else 0  # steps the trust region may retake
    total += consolidate.FORCED_STEPS if any(any(e.forced) for e in examples) else 0
    steps: list[dict[str, float]] = []

    def step(m: dict[str, float]) -> None:
        m = {**m, "total_steps": total}  # lets a progress bar know how far the run is
        steps.append(m)
        if on_step:
            on_step(m)

    trainable = [p for p in model.parameters() if p.requires_grad]
    kept: dict[int, tuple[dict[str, Any], list[torch.Tensor]]] = {}

    def keep(state: dict[str, Any]) -> None:  # earlier points, for the gate to fall back on
        # after an undone step the same count comes again, same weights, halved rate: the
        # first is the state those weights were reached in
        n = state["steps"]
        if cfg.gate_retries and earlier.on_grid(n) and n not in kept:
            kept[n] = (state, [p.detach().to("cpu", copy=True) for p in trainable])

    ended = ppo.train_steps(
        model,
        examples,
        cfg,
        step,
        kl_coef=kl_coef,
        on_kept=keep,
        repeats=found,
    )
    taken, checked = len(steps), {}

    def check(n: int) -> None:  # the memory steps' checks: an earlier point that keeps some
        if cfg.gate_retries:
            checked[n] = [p.detach().to("cpu", copy=True) for p in trainable]

    memory = consolidate.learn_forced(
        model, examples, cfg, lambda m: step({**m, "step": taken + m["step"]}), *probes, check
    )
    memory["checked"] = checked
    return {**ended, "memory": memory}, steps, kept, trainable


def _split(
    inputs: UpdateInputs, tok: Any, template: Any, device: Any
) -> tuple[list[Example], list[Example], list[Example], list[int]]:
    """The run's samples as examples: (to train, held out for the gate, replayed, skipped as
    too long). Raises TooLong when no new sample fits."""
    cfg = inputs.cfg
    replay = [r for r in inputs.replay if r["model_sha256"] in (None, inputs.digest)]
    live = {m["id"]: m["text"] for m in (inputs.memory or {}).get("memories", [])}
    examples, skipped = build_examples(inputs.samples, tok, template, cfg, device, live)
    replayed, _ = build_examples(replay, tok, template, cfg, device, live)
    if not examples:
        raise TooLong(cfg.n_ctx, skipped)
    # Every fifth new sample (from five on) is held out for the promotion gate; a sample that
    # was held out before trains now instead, so every sample trains eventually.
    fresh = [e for e, s in zip(examples, _fitting(inputs.samples, examples), strict=True) if not s]
    heldout = fresh[4::5] if len(examples) >= 5 else []
    held_ids = {e.sample_id for e in heldout}
    return [e for e in examples if e.sample_id not in held_ids], heldout, replayed, skipped


def _export(
    model: Any,
    model_path: Path,
    out: Path,
    ended: dict[str, Any],
    kept: dict[int, tuple[dict[str, Any], list[torch.Tensor]]],
    trainable: list[torch.Tensor],
    retries: int,
) -> list[dict[str, Any]]:
    """Write the update (PEFT and GGUF) and the earlier points the gate may fall back on (PEFT
    only: the run exports one if the gate asks for it); returns those points, latest first.
    The first, when the memory steps were checked inside before their end, is every PPO step
    with about half the memory steps (``memory_steps``): a name half learned is kept when the
    whole update goes too far (``noor`` lost two updates' memory steps without it); then the
    PPO steps' own points, without memory steps."""
    from clawd.adapters.export import export_gguf

    model.save_pretrained(out / "peft")
    export_gguf(out / "peft", model_path, out / "adapter.gguf")
    memory = ended["memory"]
    checked = memory.pop("checked", {})
    kinds: list[tuple[str, dict[str, Any], list[torch.Tensor]]] = []
    half = [n for n in checked if n <= memory["steps"] / 2]
    if retries and half:
        m = max(half)
        state = {k: ended[k] for k in ("steps", "undone", "lr", "kl_coef", "stopped_early")}
        kinds.append((f"memory-{m}", {**state, "memory_steps": m}, checked[m]))
    for n in earlier.points_to_try(ended["steps"], sorted(kept), retries):
        kinds.append((f"step-{n}", *kept[n]))
    points = []
    for name, state, values in kinds:
        with torch.no_grad():
            for p, v in zip(trainable, values, strict=True):
                p.copy_(v)
        folder = Path("earlier") / name / "peft"
        model.save_pretrained(out / folder)
        points.append({**state, "peft": str(folder)})
    return points


def own_prompts(examples: list[Example], limit: int, max_tokens: int = 1024) -> list[list[int]]:
    """The distinct prompts of ``examples`` (without the hint), newest sample first, at most
    ``limit``: the user's own questions, which the gate's ability check also asks. Prompts of
    more than ``max_tokens`` (a long conversation's history) are left out: the gate keeps every
    logit of its context, so its memory grows with the longest prompt it asks."""
    out: list[list[int]] = []
    for e in sorted(examples, key=lambda e: -e.sample_id):
        fits = len(e.prompt_ids) <= max_tokens
        if len(out) < limit and fits and e.prompt_ids not in out:
            out.append(e.prompt_ids)
    return out


def _fitting(samples: list[dict[str, Any]], examples: list[Example]) -> list[bool]:
    """For each example: was its sample held out by an earlier run?"""
    held = {s["id"]: bool(s.get("heldout_runs")) for s in samples}
    return [held.get(e.sample_id, False) for e in examples]
