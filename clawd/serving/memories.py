"""``/v1/memories``: list, add, edit, switch off and delete what clawd remembers of the user.

A memory is a standing preference or fact (``clawd.store.memories``); the chat route puts the
active ones in every answer's system message (``with_memories``: within the ``memory_tokens``
budget, with what decoding keeps of them) and captures the ones a reply states (``capture``).
A body that is not a short non-empty text, an unknown status or an unknown id is a 4xx naming
the field.

Mounted by ``clawd.serving.app``; not meant to run alone.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from clawd.serving.protocol import ApiError
from clawd.signals.memory import remember_next_state
from clawd.signals.shaping import Shape, shape_of
from clawd.store import memories

router = APIRouter()
log = logging.getLogger("clawd")
MemoryId = Path(ge=1, le=2**62, description="The memory's id.")


@dataclass
class InContext:
    """The memories in an answer's context: those used, those left out (no room), and what
    decoding keeps of them."""

    ids: list[int]
    left_out: list[int]
    shape: Shape = field(default_factory=Shape)


def memory_header(request: Request) -> bool:
    value = request.headers.get("x-clawd-memory", "1").strip().lower()
    if value not in ("0", "1", "true", "false", "yes", "no"):
        raise ApiError(
            400,
            "X-Clawd-Memory must be 0 or 1",
            "invalid_request_error",
            "invalid_header",
            "X-Clawd-Memory",
        )
    return value in ("1", "true", "yes")


def with_memories(
    daemon: Any, engine: Any, messages: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], InContext]:
    """The messages the model answers (the client's, with the memories in the system block)
    and what decoding keeps of the memories there."""
    s = daemon.settings
    rows = memories.in_prompt(daemon.store, s.memory_keep_learned)
    block, ids, left = memories.system_block(
        rows, lambda text: len(engine.tokenize(text)), s.memory_tokens
    )
    first = not any(m.get("role") == "assistant" for m in messages)
    shape = shape_of([r["text"] for r in rows if r["id"] in ids], first_answer=first)
    return memories.with_memories(messages, block), InContext(ids, left, shape)


def capture(store: Any, turn_id: str) -> list[dict[str, Any]]:
    """Memories from the reply to ``turn_id``; a failure is logged, never the answer's."""
    try:
        return remember_next_state(store, turn_id)
    except Exception:
        log.exception("capturing memories from the reply to %s failed", turn_id)
        return []


class MemoryCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(
        description="The memory, one short statement (e.g. 'Address the user as Ana.')."
    )
    kind: Literal["name", "length", "language", "format", "tone", "fact", "other"] = Field(
        "other",
        description="What it is about; a newer name, length or language replaces the older one.",
    )


class MemoryUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str | None = Field(None, description="A new text.")
    status: Literal["active", "off"] | None = Field(
        None, description="'off' keeps it out of every prompt; 'active' puts it back."
    )


def _bad(exc: ValueError) -> ApiError:
    field = str(exc).split(":", 1)[0]
    return ApiError(400, str(exc), "invalid_request_error", "invalid_value", field)


def public(memory: dict[str, Any]) -> dict[str, Any]:
    """A memory as the API shows it."""
    return {"object": "memory", **memory}


@router.get("/v1/memories", summary="What clawd remembers of you, newest first")
async def list_memories(request: Request, status: str | None = None) -> dict[str, Any]:
    if status is not None and status not in memories.STATUSES:
        raise ApiError(
            400,
            f"status: one of {', '.join(memories.STATUSES)}",
            "invalid_request_error",
            "invalid_value",
            "status",
        )
    store = request.app.state.daemon.store
    rows = await asyncio.to_thread(memories.list_memories, store, status)
    return {"object": "list", "data": [public(m) for m in rows]}


@router.post("/v1/memories", summary="Add a memory", status_code=201)
async def add_memory(body: MemoryCreate, request: Request) -> dict[str, Any]:
    store = request.app.state.daemon.store
    try:
        memory, replaced = await asyncio.to_thread(
            memories.add, store, body.text, body.kind, source="user"
        )
    except ValueError as exc:
        raise _bad(exc) from None
    store.event("memory", f"added: {memory['text']}", memory_id=memory["id"])
    return {**public(memory), "replaced": replaced and public(replaced)}


@router.get("/v1/memories/{memory_id}", summary="One memory")
async def get_memory(request: Request, memory_id: int = MemoryId) -> dict[str, Any]:
    return public(memories.get(request.app.state.daemon.store, memory_id))


@router.patch("/v1/memories/{memory_id}", summary="Edit a memory, or switch it off or on")
async def edit_memory(
    body: MemoryUpdate, request: Request, memory_id: int = MemoryId
) -> dict[str, Any]:
    if body.text is None and body.status is None:
        raise ApiError(
            400,
            "text or status: give at least one",
            "invalid_request_error",
            "invalid_value",
            "text",
        )
    try:
        memory = await asyncio.to_thread(
            memories.edit, request.app.state.daemon.store, memory_id, body.text, body.status
        )
    except ValueError as exc:
        raise _bad(exc) from None
    return public(memory)


@router.delete("/v1/memories/{memory_id}", summary="Forget a memory")
async def delete_memory(request: Request, memory_id: int = MemoryId) -> dict[str, Any]:
    store = request.app.state.daemon.store
    restored = await asyncio.to_thread(memories.delete, store, [memory_id])
    store.event("memory", f"deleted memory {memory_id}", memory_id=memory_id, restored=restored)
    return {"id": memory_id, "object": "memory.deleted", "deleted": True, "restored": restored}
