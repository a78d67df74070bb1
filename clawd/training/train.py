"""The trainer: OPD + binary RL on a LoRA adapter, exported for llama.cpp.

One run: take the approved samples (every fifth, from five on, is held out for the promotion
gate, each sample at most once) plus a bounded replay of earlier trained ones (what was learned
is kept while new samples add to it), load the served GGUF into torch (cached, see
``torchmodel``), put a LoRA on every projection (warm-started from the active adapter;
``clawd.training.ppo``), add the memories' distillation (``clawd.training.consolidate``),
compute ``old_lp`` (plain context) and ``teacher_lp`` (the hint in context) with the pre-update
weights, ``A_t = w_opd (teacher_lp - old_lp) + w_rl (r - mean r)``, and take PPO steps on the
clipped loss with a constant normaliser, a KL-to-base penalty with an adaptive coefficient and a
trust region (``clawd.training.losses``), then train the tokens a memory forced. That update is a
pure function of its inputs (``clawd.training.update``); ``train_backend = ray`` runs it on a Ray
cluster instead of in this process (``clawd.training.remote``). The result is written as a PEFT
folder plus a GGUF LoRA into a temporary folder, judged by the gate (``clawd.adapters.gate``),
and renamed to ``CLAWD_HOME/adapters/<version>/`` as a ``candidate`` (or ``rejected``, kept for
inspection; when the whole update fails only for drift or ability, an earlier point of it that
passes serves instead: ``clawd.training.earlier``); only then are the samples settled: a
candidate's are used, a rejected run's wait again. A non-finite loss or gradient, too little
memory, a lost Ray worker, a cancel (Ctrl+C, SIGTERM) or any error fails the run with its reason
recorded, writes no adapter and leaves every sample waiting.

Run alone (what ``clawd train --now`` and the daemon's nightly job run)::

    python -m clawd.training.train
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from clawd import trainlock
from clawd.adapters import registry
from clawd.config import Settings, clawd_home, load_settings, private_state
from clawd.models import resolve, sha256_file
from clawd.signals.waiting import next_run
from clawd.store.db import Store
from clawd.training import consolidate, ppo
from clawd.training.config import TrainConfig
from clawd.training.report import step_line
from clawd.training.update import Cancelled, TooLong, TrainingError, UpdateInputs, update
from clawd.training.verdict import verdict_on

log = logging.getLogger("clawd.train")
Progress = Callable[[int, int, dict[str, float]], None]


class NothingToTrain(TrainingError):
    """Nothing a run could learn from waits (``clawd.signals.waiting``): not a failure, nothing
    is recorded and every sample keeps waiting."""


@contextlib.contextmanager
def run_lock(home: Path, trigger: str) -> Iterator[None]:
    """The training lock (``clawd.trainlock``); a held one is a TrainingError naming its holder."""
    try:
        with trainlock.hold(home, trigger):
            yield
    except trainlock.Held as exc:
        raise TrainingError(str(exc)) from None


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
    with run_lock(home, trigger), Store.open(home) as store:
        _clean_up_after_crashes(store, home)
        # only samples the method can learn from, and a refusal when they teach it nothing
        # samples answered by another base model wait for it: their token ids are its words
        digest = sha256_file(model_path)
        samples, replay, why = next_run(
            store, cfg.train_method, cfg.train_replay, cfg.max_samples, digest, settings.memory
        )
        if why:
            raise NothingToTrain(why)
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
                store,
                home,
                model_path,
                digest,
                samples,
                replay,
                cfg,
                run_id,
                tmp,
                steps,
                progress,
                settings,
            )
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(exc, TooLong):  # they would fail every run from now on
                _drop_too_long(store, exc.sample_ids, exc.max_seq_len, run_id)
            known = isinstance(exc, TrainingError | ppo.NonFinite)
            reason = str(exc) if known else f"{type(exc).__name__}: {exc}"
            if isinstance(exc, torch.OutOfMemoryError | MemoryError):
                reason = f"out of memory: {exc}"
            elif isinstance(exc, KeyboardInterrupt | Cancelled):
                reason = "cancelled"
            store.db["training_runs"].update(
                run_id, {"status": "failed", "reason": reason, "finished_at": time.time()}
            )
            store.event("train", f"run {run_id} failed: {reason}", run_id=run_id)
            if isinstance(exc, TrainingError):
                raise
            raise TrainingError(reason) from exc
        registry.retain(store, settings.adapters_keep)
        return summary


def _drop_too_long(store: Store, sample_ids: list[int], max_seq_len: int, run_id: int) -> None:
    """Settle samples that can never train (empty, or longer than ``max_seq_len`` tokens with
    their prompt): ``dropped``, with the reason in the events, never taken first again."""
    if not sample_ids:
        return
    with store.db.conn:
        store.db.conn.executemany(
            "UPDATE samples SET status = 'dropped', run_id = ? "
            "WHERE id = ? AND status = 'approved'",
            [(run_id, i) for i in sample_ids],
        )
    store.event(
        "train",
        f"dropped {len(sample_ids)} samples longer than {max_seq_len} tokens (or empty): "
        "they can never train",
        run_id=run_id,
        samples=sample_ids,
    )


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
    digest: str,
    samples: list[dict[str, Any]],
    replay: list[dict[str, Any]],
    cfg: TrainConfig,
    run_id: int,
    tmp: Path,
    steps: list[dict[str, float]],
    progress: Progress | None,
    settings: Settings,
) -> dict[str, Any]:
    from clawd.training.report import phase_times, write_report

    current = registry.active(store)
    inputs = UpdateInputs(
        samples=samples,
        replay=replay,
        cfg=cfg,
        kl_coef=_inherited_kl_coef(current, cfg),
        model_path=model_path,
        digest=digest,
        parent_peft=Path(current["path"]) / "peft" if current else None,
        memory=consolidate.memory_inputs(store) if settings.memory else None,
    )

    def on_step(m: dict[str, float]) -> None:
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
            progress(int(m["step"]), int(m["total_steps"]), m)

    result = _updated(store, inputs, tmp, home, settings, run_id, on_step)
    ended, trained_ids = result["ended"], result["trained"]
    version = time.strftime("%Y%m%d-%H%M%S") + f"-r{run_id}"
    gate_started = time.monotonic()
    verdict, point = verdict_on(store, home, inputs, result, current, tmp)
    if point is not None:  # an earlier point of the update serves: its steps, rate, penalty
        keys = ("steps", "undone", "lr", "kl_coef", "stopped_early")
        m = point.get("memory_steps", 0)  # the memory steps it keeps, if any
        memory = {**ended["memory"], "steps": m, "ended": "walked_back"} if m else None
        ended = {
            **ended,
            **{k: point[k] for k in keys},
            "memory": memory or {"steps": 0, "ended": "none"},
        }
    report = {"run_id": run_id, "version": version, **result["report"]}
    if "walked_back" in verdict:  # the report says which point of its steps serves, if any
        report["walked_back"] = verdict["walked_back"]
    write_report(tmp, report)
    seconds = {
        **result["report"].get("seconds", {}),
        "gate": round(time.monotonic() - gate_started, 1),
    }
    manifest = _manifest(inputs, current, version, run_id, settings, result, verdict, ended)
    manifest["metrics"]["final_loss"] = steps[-1]["loss"]  # the whole update's last step
    manifest["seconds"] = seconds
    final = registry.add_candidate(store, home, tmp, manifest, trained_ids, result["heldout_ids"])
    _drop_too_long(store, result["skipped"], cfg.n_ctx, run_id)
    with store.db.conn:
        store.db.conn.execute(
            "UPDATE training_runs SET status = 'succeeded', adapter_version = ?, report_path = ?,"
            " finished_at = ? WHERE id = ?",
            (version, str(final / "report.json"), time.time(), run_id),
        )
    store.event(
        "train",
        f"run {run_id} made adapter {version} ({phase_times(seconds)})",
        run_id=run_id,
        version=version,
    )
    return {
        "run_id": run_id,
        "version": version,
        "path": str(final),
        "steps": ended["steps"],
        "samples": len(trained_ids),
        "replayed": len(result["replayed"]),
        "stopped_early": ended["stopped_early"],
        "skipped": len(result["skipped"]),
        "final_loss": steps[-1]["loss"],
        "gate": verdict,
    }


def _updated(
    store: Store,
    inputs: UpdateInputs,
    tmp: Path,
    home: Path,
    settings: Settings,
    run_id: int,
    on_step: Callable[[dict[str, float]], None],
) -> dict[str, Any]:
    """The update itself, here or on the Ray cluster (``settings.train_backend``)."""
    if settings.train_backend != "ray":
        return update(inputs, tmp, home, on_step)
    from clawd.training import remote

    def said(text: str) -> None:
        store.event("train", f"run {run_id}: {text}", run_id=run_id)

    submitted = time.monotonic()
    result = remote.run_update(inputs, tmp, settings, on_step, said)
    worker = result["report"].setdefault("seconds", {})
    # connecting, shipping the model, waiting for a worker and bringing the files back
    worker["ray"] = round(max(0.0, time.monotonic() - submitted - sum(worker.values())), 1)
    return result


def _manifest(
    inputs: UpdateInputs,
    current: dict[str, Any] | None,
    version: str,
    run_id: int,
    settings: Settings,
    result: dict[str, Any],
    verdict: dict[str, Any],
    ended: dict[str, Any],
) -> dict[str, Any]:
    """The new version's ``manifest.json`` (without its last loss and its phases' seconds)."""
    return {
        "version": version,
        "parent": current["version"] if current else None,
        "base_model": inputs.model_path.name,
        "base_sha256": inputs.digest,
        "created_at": time.time(),
        "run_id": run_id,
        "backend": settings.train_backend,
        "samples": result["trained"],
        "replayed": result["replayed"],
        "heldout": result["heldout_ids"],
        "status": "candidate" if verdict["passed"] else "rejected",
        "gate": verdict,
        "metrics": {
            "steps": ended["steps"],  # kept; ``undone`` more were taken back (trust region)
            **{k: ended[k] for k in ("undone", "lr", "stopped_early", "kl_coef")},
            # consolidate.learn_forced after them: its steps and why it ended
            "memory": ended.get("memory", {"steps": 0, "ended": "none"}),
        },
        # seconds: load, memories, score, repeats, train, export (the worker), ray,
        # gate (the gate's time includes judging earlier points of the update, when it did)
        "files": {"gguf": "adapter.gguf", "peft": "peft", "report": "report.json"},
    }


def _inherited_kl_coef(current: dict[str, Any] | None, cfg: TrainConfig) -> float:
    """The KL penalty's coefficient where the parent's run left it (the setting for a first)."""
    if cfg.train_kl_coef <= 0 or not current:
        return cfg.train_kl_coef
    value = (current.get("metrics") or {}).get("kl_coef")
    return float(value) if isinstance(value, int | float) and value > 0 else cfg.train_kl_coef


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    private_state()
    home = clawd_home()
    settings = load_settings(home)  # the daemon that starts this has checked them
    with contextlib.suppress(OSError):  # not raising it is no reason to refuse the run
        os.nice(settings.train_niceness)  # the user's foreground work comes first
    trigger = sys.argv[1] if len(sys.argv) > 1 else "manual"

    def cancel(signum: int, frame: Any) -> None:
        raise Cancelled()

    signal.signal(signal.SIGTERM, cancel)  # recorded as cancelled; a Ray run is cancelled too
    try:
        summary = run(
            home,
            settings,
            trigger=trigger,
            progress=lambda s, n, m: log.info("step %d/%d %s", s, n, step_line(m)),
        )
    except NothingToTrain as exc:
        log.info("%s", exc)
        return
    except (TrainingError, Cancelled) as exc:
        log.error("training failed: %s", exc or "cancelled")
        sys.exit(1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
