"""The trainer: hindsight OPD + binary RL on a LoRA adapter, exported for llama.cpp.

One run: take the approved samples (every fifth, from five on, is held out for the promotion
gate, each sample at most once) plus a bounded replay of earlier trained ones (what was learned
is kept while new samples add to it), load the served GGUF into torch (cached, see
``torchmodel``), put a LoRA on every projection (warm-started from the active adapter;
``clawd.training.ppo``); with ``train_method = hindsight`` add, for each hinted sample, the
answer the model writes with the hint in context; compute ``old_lp`` (plain context) and
``teacher_lp`` (the hint in context) with the pre-update weights,
``A_t = w_opd (teacher_lp - old_lp) + w_rl (r - mean r)``, and take PPO steps on the clipped loss
with a constant normaliser, a KL-to-base penalty with an adaptive coefficient and a trust region
(``clawd.training.losses``). The result is written as a PEFT folder plus a GGUF LoRA into a
temporary folder, judged by the gate (``adapters.gate``), and renamed to
``CLAWD_HOME/adapters/<version>/`` as a ``candidate`` (or ``rejected``, kept for inspection);
only then are the samples settled: a candidate's are used, a rejected run's wait again. A
non-finite loss or gradient, too little memory, or any error fails the run with its reason
recorded, writes no adapter and leaves every sample waiting.

Run alone (what ``clawd train --now`` and the daemon's nightly job run)::

    python -m clawd.training.run
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from adapters import registry
from clawd.config import Settings, clawd_home, load_settings, private_state
from clawd.models import resolve, sha256_file
from clawd.signals.rules import LEARNABLE_KINDS, nothing_to_learn
from clawd.store.db import Store
from clawd.training import ppo
from clawd.training.batches import Example, build_examples
from clawd.training.config import TrainConfig

log = logging.getLogger("clawd.train")
Progress = Callable[[int, int, dict[str, float]], None]


class TrainingError(Exception):
    """The run was aborted; the message says why in words (it is also recorded)."""


class NothingToTrain(TrainingError):
    """No approved sample waits: not a failure, nothing is recorded."""


@contextlib.contextmanager
def run_lock(home: Path) -> Iterator[None]:
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "train.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TrainingError("another training run is in progress") from None
        yield


def _check_memory(model_path: Path) -> None:
    import psutil

    # fp32 weights (~4x a 4-bit file, the worst case), activations and the optimizer's copies.
    need = model_path.stat().st_size * 4 * 2.5
    have = psutil.virtual_memory().available
    if have < need:
        raise TrainingError(
            f"not enough memory: about {need / 1e9:.1f} GB needed, {have / 1e9:.1f} GB available"
        )


def run(
    home: Path | None = None,
    settings: Settings | None = None,
    *,
    model: str | None = None,
    cfg: TrainConfig | None = None,
    progress: Progress | None = None,
    trigger: str = "manual",
) -> dict[str, Any]:
    """One training run; returns its summary. Raises NothingToTrain or TrainingError."""
    home = home or clawd_home()
    settings = settings or load_settings(home)
    cfg = cfg or TrainConfig.from_settings(settings)
    model_name = model or settings.model
    model_path = resolve(model_name, home)
    with run_lock(home), Store.open(home) as store:
        _clean_up_after_crashes(store, home)
        kinds = LEARNABLE_KINDS[cfg.method]  # a sample of another kind would teach nothing
        why = nothing_to_learn(*store.waiting_samples(kinds), cfg.method)
        if why:
            raise NothingToTrain(why)
        samples = _select(store, kinds, "x.status = 'approved'", cfg.max_samples)
        replay = _replay(store, kinds, len(samples), cfg)
        run_id = (
            store.db["training_runs"]
            .insert(
                {
                    "status": "running",
                    "config": json.dumps({**asdict(cfg), "trigger": trigger}),
                    "n_samples": len(samples) + len(replay),
                    "started_at": time.time(),
                }
            )
            .last_pk
        )
        tmp = Path(tempfile.mkdtemp(dir=registry.adapters_dir(home), prefix=".tmp-"))
        steps: list[dict[str, float]] = []
        try:
            summary = _train(
                store, home, model_path, samples, replay, cfg, run_id, tmp, steps, progress
            )
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            known = isinstance(exc, TrainingError | ppo.NonFinite)
            reason = str(exc) if known else f"{type(exc).__name__}: {exc}"
            if isinstance(exc, torch.OutOfMemoryError | MemoryError):
                reason = f"out of memory: {exc}"
            store.db["training_runs"].update(
                run_id, {"status": "failed", "reason": reason, "finished_at": time.time()}
            )
            store.event("train", f"run {run_id} failed: {reason}", run_id=run_id)
            if isinstance(exc, TrainingError):
                raise
            raise TrainingError(reason) from exc
        registry.retain(store, settings.adapters_keep)
        return summary


def _select(store: Store, kinds: tuple[str, ...], where: str, limit: int) -> list[dict[str, Any]]:
    return list(
        store.db.query(
            "SELECT x.*, t.prompt_messages, t.params, t.model_sha256 FROM samples x JOIN turns t "
            f"ON t.id = x.turn_id WHERE {where} AND t.learn = 1 "
            f"AND x.kind IN ({', '.join('?' * len(kinds))}) ORDER BY x.id LIMIT ?",
            [*kinds, limit],
        )
    )


def _replay(
    store: Store, kinds: tuple[str, ...], n_new: int, cfg: TrainConfig
) -> list[dict[str, Any]]:
    """Earlier trained samples to train on again: at most ``cfg.replay`` and at most as many
    as the new ones, the newest first (what the lineage learned last is the likeliest to be
    overwritten by the next update)."""
    limit = min(cfg.replay, n_new)
    if limit <= 0:
        return []
    rows = _select(store, kinds, "x.status = 'used'", 1_000_000)
    return sorted(rows, key=lambda r: r["id"], reverse=True)[:limit]


def _clean_up_after_crashes(store: Store, home: Path) -> None:
    """Under the run lock nothing else trains: a 'running' run or a temp folder is a corpse."""
    with store.db.conn:
        store.db.conn.execute(
            "UPDATE training_runs SET status = 'failed', finished_at = ?, reason = "
            "'interrupted: the trainer process died' WHERE status = 'running'",
            (time.time(),),
        )
    for stale in registry.adapters_dir(home).glob(".tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)


def _train(
    store: Store,
    home: Path,
    model_path: Path,
    samples: list[dict[str, Any]],
    replay: list[dict[str, Any]],
    cfg: TrainConfig,
    run_id: int,
    tmp: Path,
    steps: list[dict[str, float]],
    progress: Progress | None,
) -> dict[str, Any]:
    from adapters.export import export_gguf
    from clawd.chattemplate import ChatTemplate
    from clawd.training import torchmodel
    from clawd.training.report import write_report

    _check_memory(model_path)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    digest = sha256_file(model_path)
    cuda = torch.cuda.is_available()
    base, tok = torchmodel.load(
        model_path, home, device="cuda" if cuda else "cpu", qlora=cuda, digest=digest
    )
    current = registry.active(store)
    parent = current["version"] if current else None
    warm = Path(current["path"]) / "peft" if current else None
    model = ppo.peft_model(base, cfg, warm)
    template = ChatTemplate.from_gguf(model_path)
    device = next(model.parameters()).device
    replay = [r for r in replay if r["model_sha256"] in (None, digest)]  # same tokenizer only
    examples, skipped = build_examples(samples, tok, template, cfg, device=device)
    replayed, _ = build_examples(replay, tok, template, cfg, device=device)
    if not examples:
        raise TrainingError(f"every sample was longer than {cfg.max_seq_len} tokens")
    # Every fifth new sample (from five on) is held out for the promotion gate; a sample that
    # was held out before trains now instead, so every sample trains eventually.
    fresh = [e for e, s in zip(examples, _fitting(samples, examples), strict=True) if not s]
    heldout = fresh[4::5] if len(examples) >= 5 else []
    held_ids = {e.sample_id for e in heldout}
    examples = [e for e in examples if e.sample_id not in held_ids]
    trained_ids = [e.sample_id for e in examples]
    examples += replayed
    if cfg.hindsight:
        eos = [t for t in {tok.eos_token_id, *_end_tokens(tok)} if t is not None]
        examples += ppo.hindsight_examples(model, examples[: len(trained_ids)], cfg, eos)
    ppo.score_examples(model, examples, cfg)
    total = cfg.epochs * math.ceil(len(examples) / cfg.batch_size)
    kl_coef = _inherited_kl_coef(current, cfg)

    def on_step(m: dict[str, float]) -> None:
        m = {**m, "total_steps": total}  # lets a progress bar know how far the run is
        steps.append(m)
        store.db["training_steps"].insert(
            {
                "run_id": run_id,
                "step": int(m["step"]),
                "metrics": json.dumps(m),
                "created_at": time.time(),
            }
        )
        if progress:
            progress(int(m["step"]), total, m)

    ended = ppo.train_steps(model, examples, cfg, on_step, kl_coef=kl_coef)
    if not steps:
        raise TrainingError(
            f"the first step was already past the trust region (KL {ended.get('kl_step', 0):.3f} "
            f"> train_target_kl {cfg.target_kl}): nothing was learned"
        )
    version = time.strftime("%Y%m%d-%H%M%S") + f"-r{run_id}"
    model.save_pretrained(tmp / "peft")
    export_gguf(tmp / "peft", model_path, tmp / "adapter.gguf")
    report = {
        "run_id": run_id,
        "version": version,
        "status": "succeeded",
        "n_samples": len(examples),
        "new_samples": len(trained_ids),
        "replayed": len(replayed),
        "hindsight": sum(e.hindsight for e in examples),
        "skipped": skipped,
        "config": asdict(cfg),
        "steps": steps,
        "ended": ended,
        "samples": [e.report(tok) for e in examples],
    }
    write_report(tmp, report)
    gate = _gate(store, home, model_path, digest, tmp / "adapter.gguf", heldout, tok, cfg)
    manifest = {
        "version": version,
        "parent": parent,
        "base_model": model_path.name,
        "base_sha256": digest,
        "created_at": time.time(),
        "run_id": run_id,
        "samples": trained_ids,
        "replayed": [e.sample_id for e in replayed],
        "heldout": [e.sample_id for e in heldout],
        "status": "candidate" if gate["passed"] else "rejected",
        "gate": gate,
        "metrics": {
            "final_loss": steps[-1]["loss"],
            "steps": len(steps),
            "stopped_early": ended["stopped_early"],
            "kl_coef": ended["kl_coef"],
        },
        "files": {"gguf": "adapter.gguf", "peft": "peft", "report": "report.json"},
    }
    final = registry.add_candidate(
        store, home, tmp, manifest, trained_ids, [e.sample_id for e in heldout]
    )
    with store.db.conn:
        store.db.conn.execute(
            "UPDATE training_runs SET status = 'succeeded', adapter_version = ?, report_path = ?,"
            " finished_at = ? WHERE id = ?",
            (version, str(final / "report.json"), time.time(), run_id),
        )
    store.event("train", f"run {run_id} made adapter {version}", run_id=run_id, version=version)
    return {
        "run_id": run_id,
        "version": version,
        "path": str(final),
        "steps": len(steps),
        "samples": len(trained_ids),
        "replayed": len(replayed),
        "stopped_early": ended["stopped_early"],
        "skipped": skipped,
        "final_loss": steps[-1]["loss"],
        "gate": gate,
    }


def _fitting(samples: list[dict[str, Any]], examples: list[Example]) -> list[bool]:
    """For each example: was its sample held out by an earlier run?"""
    held = {s["id"]: bool(s.get("heldout_runs")) for s in samples}
    return [held.get(e.sample_id, False) for e in examples]


def _end_tokens(tok: Any) -> list[int | None]:
    """End-of-turn tokens a chat template may use besides the tokenizer's eos."""
    ids = [tok.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|eot_id|>", "<|endoftext|>")]
    return [i for i in ids if isinstance(i, int) and i != tok.unk_token_id]


def _inherited_kl_coef(current: dict[str, Any] | None, cfg: TrainConfig) -> float:
    """The KL penalty's coefficient where the parent's run left it (the setting for a first)."""
    if cfg.kl_coef <= 0 or not current:
        return cfg.kl_coef
    value = (current.get("metrics") or {}).get("kl_coef")
    return float(value) if isinstance(value, int | float) and value > 0 else cfg.kl_coef


def _gate(
    store: Store,
    home: Path,
    model_path: Path,
    digest: str,
    candidate: Path,
    heldout: list[Example],
    tok: Any,
    cfg: TrainConfig,
) -> dict[str, Any]:
    """Run the promotion gate against the active adapter (or the base model)."""
    from adapters import gate
    from clawd.chattemplate import ChatTemplate

    current = registry.active(store)
    current_gguf = Path(current["path"]) / "adapter.gguf" if current else None
    template = ChatTemplate.from_gguf(model_path)

    def tokenize(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    held = [
        gate.HeldOut(
            e.prompt_ids, e.teacher_prompt_ids, e.response_ids, e.reward, bool(e.hint), e.has_reward
        )
        for e in heldout
    ]
    return gate.evaluate(
        model_path,
        candidate,
        current_gguf,
        held,
        gate.general_prompts(tokenize, template.render)[: cfg.gate_prompts],
        max_kl=cfg.gate_max_kl,
        step_kl=cfg.gate_step_kl,
        cache=home / "cache" / f"gate-{digest[:16]}.json",
    )


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    private_state()
    with contextlib.suppress(OSError):
        os.nice(10)  # the user's foreground work comes first
    trigger = sys.argv[1] if len(sys.argv) > 1 else "manual"
    try:
        summary = run(
            trigger=trigger,
            progress=lambda s, n, m: log.info(
                "step %d/%d loss %.4f adv %.4f clip %.2f",
                s,
                n,
                m["loss"],
                m["adv_mean"],
                m["clip_fraction"],
            ),
        )
    except NothingToTrain as exc:
        log.info("%s", exc)
        return
    except TrainingError as exc:
        log.error("training failed: %s", exc)
        sys.exit(1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
