"""``/v1/feedback``, ``/v1/conversations``, ``/v1/signals`` and ``/v1/train``: what the user
rates, keeps or forgets, reviews of the learning signals, and training on demand.

Mounted by ``clawd.serving.app`` behind the token check; not meant to run alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from starlette.concurrency import run_in_threadpool

from clawd import trainlock
from clawd.adapters import forget
from clawd.serving.protocol import ApiError, ConversationUpdate, FeedbackRequest
from clawd.serving.scheduler import TrainerNotStarted, training_status
from clawd.signals import review
from clawd.signals.job import feedback_signal
from clawd.signals.memory import notices, remember
from clawd.signals.waiting import why_no_run
from clawd.store import memories, record

router = APIRouter()
# Ids are SQLite integers: larger ones are refused at the edge (400 naming the field, never 500).
SignalId = PathParam(..., ge=1, le=2**63 - 1, description="A signal id (see GET /v1/signals).")


def daemon_of(request: Request) -> Any:
    """The running ``clawd.serving.app.Daemon``."""
    return request.app.state.daemon


def _remember_comment(d: Any, turn_id: str, comment: str) -> list[dict]:
    """Memories from a feedback comment on ``turn_id``, unless its conversation is opted out
    of learning; each as ``{"id", "text", "replaced"}``."""
    turn = d.store.db["turns"].get(turn_id)
    if not turn["learn"]:
        return []
    made = remember(
        d.store,
        comment,
        source="feedback",
        answer=turn["response_text"] or "",
        turn_id=turn_id,
        conversation_id=turn["conversation_id"],
    )
    return notices(made)


@router.post("/v1/feedback", summary="Rate a response (+1/-1) with an optional comment")
async def feedback(body: FeedbackRequest, d: Any = Depends(daemon_of)) -> dict:
    try:
        fid = record.add_feedback(d.store, body.id, body.rating, body.comment)
    except record.NotFound as exc:
        raise ApiError(404, str(exc), "not_found_error", "unknown_id", "id") from None
    # Explicit feedback needs no judge: its signal and sample are written now.
    made = feedback_signal(d.store, d.settings, body.id)
    remembered = []
    if body.comment and d.settings.memory:
        remembered = await asyncio.to_thread(_remember_comment, d, body.id, body.comment)
    sample = d.store.db.execute(
        "SELECT x.id, x.kind, x.status FROM samples x JOIN signals s ON s.id = x.signal_id "
        "WHERE s.turn_id = ?",
        [body.id],
    ).fetchone()
    return {
        "id": fid,
        "object": "feedback",
        "response_id": body.id,
        "signal": bool(made),
        "sample": dict(zip(("id", "kind", "status"), sample, strict=True)) if sample else None,
        "remembered": remembered,
    }


@router.get("/v1/conversations", summary="Stored conversations, newest first")
async def conversations(d: Any = Depends(daemon_of)) -> dict:
    return {"object": "list", "data": record.list_conversations(d.store)}


@router.get("/v1/conversations/{cid}", summary="A conversation with its turns")
async def conversation(cid: str, d: Any = Depends(daemon_of)) -> dict:
    return record.get_conversation(d.store, cid)


@router.patch("/v1/conversations/{cid}", summary="Rename, or switch learning off or on")
async def patch_conversation(
    cid: str, body: ConversationUpdate, d: Any = Depends(daemon_of)
) -> dict:
    record.update_conversation(d.store, cid, learn=body.learn, title=body.title)
    return record.get_conversation(d.store, cid)


@router.delete("/v1/conversations/{cid}", summary="Forget a conversation")
def delete(cid: str, d: Any = Depends(daemon_of)) -> dict:
    # a plain def: FastAPI runs it in a worker thread, so rewriting reports and the WAL
    # checkpoint (up to seconds) never stall the streams on the event loop
    made = memories.of_conversation(d.store, cid)
    removed = record.delete_conversation(d.store, cid)
    memories.delete(d.store, made)
    removed["memories"] = len(made)
    sample_ids = removed.pop("sample_ids")
    # the event before the scrub: a run publishing meanwhile sees one or the other
    d.store.event("forget", f"deleted conversation {cid}", removed=removed)
    removed["reports"] = forget.scrub_reports(d.store, d.home, sample_ids)
    return {"id": cid, "object": "conversation.deleted", "deleted": True, "removed": removed}


@router.get("/v1/signals", summary="Learning signals, newest first")
async def signals(
    status: str | None = None,
    limit: int = Query(50, ge=1, le=1000),
    d: Any = Depends(daemon_of),
) -> dict:
    if status not in (None, "pending", "approved", "vetoed", "used", "dropped"):
        raise ApiError(
            400,
            "status must be pending, approved, vetoed, used or dropped",
            "invalid_request_error",
            "invalid_value",
            "status",
        )
    return {"object": "list", "data": review.list_signals(d.store, status, limit)}


@router.get("/v1/signals/{sid}", summary="A signal with its votes and sample")
async def signal(sid: int = SignalId, d: Any = Depends(daemon_of)) -> dict:
    return review.show_signal(d.store, sid)


async def _set(sid: int, status: str, d: Any) -> dict:
    try:
        return review.set_status(d.store, sid, status)
    except review.ReviewError as exc:
        raise ApiError(409, str(exc), "invalid_request_error", "not_applicable") from None


@router.post("/v1/signals/{sid}/approve", summary="Let this signal's sample train")
async def approve(sid: int = SignalId, d: Any = Depends(daemon_of)) -> dict:
    return await _set(sid, "approved", d)


@router.post("/v1/signals/{sid}/veto", summary="Never train on this signal's sample")
async def veto(sid: int = SignalId, d: Any = Depends(daemon_of)) -> dict:
    return await _set(sid, "vetoed", d)


@router.get("/v1/train", summary="Training runs, the latest run's steps, the schedule")
async def train_status(d: Any = Depends(daemon_of)) -> dict:
    return training_status(d.store, d.jobs, d.settings.train_method)


@router.post("/v1/train", summary="Start a training run now", status_code=202)
async def train_now(d: Any = Depends(daemon_of)) -> dict:
    d.require_ready()
    if d.jobs is None:
        why = d.jobs_error or "the daemon's jobs are not running"
        raise ApiError(503, why, "service_unavailable", "jobs_not_running")
    method = d.settings.train_method
    job = d.jobs.signal_job
    if job is not None:  # "reply, then train now" trains on that reply
        await run_in_threadpool(job.run_once, 1000, True)
    why = why_no_run(d.store, method, d.settings.train_replay, d.model_sha256, d.settings.memory)
    if why:
        raise ApiError(409, why, "invalid_request_error", "nothing_to_train")
    try:
        pid = d.jobs.start_training("api")
    except TrainerNotStarted as exc:
        raise ApiError(503, str(exc), "service_unavailable", "trainer_not_started") from None
    if pid is None:
        who = trainlock.holder(d.home)
        raise ApiError(
            409,
            "a training run is already in progress" + (f" ({who})" if who else ""),
            "invalid_request_error",
            "already_running",
        )
    return {"status": "started", "pid": pid}
