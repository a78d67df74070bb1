"""REST routes of the adapter store: list, show, activate, roll back, go to the base model.

Mounted by ``clawd.serving.app`` behind the token. Activation verifies and hot-loads on a worker
thread (the event loop keeps serving) and answers with the serving pause it caused.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from clawd.adapters import registry
from clawd.adapters.registry import AdapterError, AdapterNotFound
from clawd.serving import promote
from clawd.serving.protocol import ApiError
from clawd.store.db import Store

router = APIRouter()


class ActivateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    force: bool = Field(False, description="Activate even if the promotion gate rejected it.")


def _error(exc: AdapterError, status: int = 409) -> Exception:
    missing = isinstance(exc, AdapterNotFound)
    return ApiError(
        404 if missing else status,
        str(exc),
        "not_found_error" if missing else "invalid_request_error",
        "unknown_id" if missing else "adapter_refused",
    )


async def _in_thread(request: Request, fn: Any) -> Any:
    """Run ``fn(daemon, store)`` on a worker thread with its own database connection."""
    daemon = request.app.state.daemon
    daemon.require_ready()

    def call() -> Any:
        with Store.open(daemon.home) as store:
            return fn(daemon, store)

    try:
        return await run_in_threadpool(call)
    except AdapterError as exc:
        raise _error(exc) from None


@router.get("/v1/adapters", summary="Adapter versions, newest first")
async def list_adapters(request: Request) -> dict:
    store = request.app.state.daemon.store
    current = registry.active(store)
    return {
        "object": "list",
        "active": current["version"] if current else None,
        "data": registry.list_adapters(store),
    }


@router.get("/v1/adapters/{version}", summary="An adapter: manifest, gate figures, samples")
async def show(version: str, request: Request) -> dict:
    try:
        return registry.show(request.app.state.daemon.store, version)
    except AdapterError as exc:
        raise _error(exc) from None


@router.get("/v1/adapters/{version}/report", summary="The training report: steps and why-view")
def report(version: str, request: Request) -> dict:
    """The run's report.json: every step's metrics and, per sample, tokens and OPD advantage
    (read in a worker thread: a long run's report is megabytes)."""
    try:
        return registry.report(request.app.state.daemon.store, version)
    except AdapterError as exc:
        raise _error(exc) from None


@router.post("/v1/adapters/rollback", summary="Go back to the active adapter's parent")
async def rollback(request: Request) -> dict:
    def fn(d: Any, store: Store) -> dict:
        return {"active": promote.rollback(d.engine, store, d.model_sha256)}

    return await _in_thread(request, fn)


@router.post("/v1/adapters/base", summary="Serve the base model without any adapter")
async def base(request: Request) -> dict:
    def fn(d: Any, store: Store) -> dict:
        return {"active": None, "pause_ms": promote.to_base(d.engine, store)}

    return await _in_thread(request, fn)


@router.post("/v1/adapters/{version}/activate", summary="Hot-load this adapter now")
async def activate(version: str, request: Request, body: ActivateRequest | None = None) -> dict:
    force = bool(body and body.force)

    def fn(d: Any, store: Store) -> dict:
        pause = promote.activate(d.engine, store, version, d.model_sha256, force=force)
        return {"active": version, "pause_ms": pause}

    return await _in_thread(request, fn)


@router.delete("/v1/adapters/{version}", summary="Delete an adapter version")
def delete(version: str, request: Request) -> dict:
    # under the switch lock: an activation of this version in flight finishes first (and then
    # the delete refuses the active one), never serves files deleted under it
    try:
        with promote.SWITCH:
            registry.delete(request.app.state.daemon.store, version)
    except AdapterError as exc:
        raise _error(exc) from None
    return {"id": version, "object": "adapter.deleted", "deleted": True}
