"""``POST /v1/chat/completions``: OpenAI's chat API, streamed or not, recorded turn by turn.

A request finds its conversation (``X-Clawd-Conversation`` or the stored history it extends),
links its new user/tool message as the *next state* of the turn it answers, queues the
generation on the engine, and stores the finished turn *before* the last chunk is sent, so an
acknowledged answer is never lost. A client that hangs up cancels its generation and nothing is
stored. ``X-Clawd-Learn: 0`` records the turn but keeps it out of training.

Memories (``clawd.store.memories``): the active ones are appended to the system message the
model sees (the stored messages stay the client's), within the ``memory_tokens`` budget, and
the turn records which were there. A reply that states a standing preference is captured in
a worker thread beside the answer (``clawd.signals.memory``), so it applies from the next
request on. What decoding can keep of them (the user's name to open a conversation, a length
limit, a closing question: ``clawd.serving.shaping``) it keeps, for a model that does not
follow its system message. ``X-Clawd-Memory: 0`` leaves the memories out of one request and
makes none.

Mounted by ``clawd.serving.app``; not meant to run alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from clawd.serving import structured
from clawd.serving.engine import Delta, GenParams, PromptTooLong, Result
from clawd.serving.protocol import ApiError, CreateChatCompletionRequest
from clawd.serving.shaping import Shape, shape_of
from clawd.signals.memory import notices, remember_next_state
from clawd.store import memories, record

router = APIRouter()
log = logging.getLogger("clawd")
DEFAULT_TEMPERATURE = 0.7


@dataclass
class _Done:
    outcome: Result | BaseException


def _params(body: CreateChatCompletionRequest) -> GenParams:
    return GenParams(
        temperature=DEFAULT_TEMPERATURE if body.temperature is None else body.temperature,
        top_p=body.top_p or 1.0,
        max_tokens=body.max_completion_tokens or body.max_tokens,
        stop=list(body.stop or []),
        seed=body.seed,
    )


def _usage(result: Result) -> dict[str, Any]:
    n_prompt, n_out = len(result.prompt_token_ids), len(result.response_token_ids)
    return {
        "prompt_tokens": n_prompt,
        "completion_tokens": n_out,
        "total_tokens": n_prompt + n_out,
        "prompt_tokens_details": {"cached_tokens": result.cached_tokens},
    }


def _timeline(marks: dict[str, float], result: Result) -> dict[str, float]:
    """Milliseconds from the request's arrival to each step that came before its first
    content reached the client: ``handler`` (body read and validated), ``prepared`` (prompt
    rendered and tokenized), ``submitted`` (queued on the engine), ``started`` (the engine took
    it), ``first_token`` (sampled), ``first_content`` (released by the text pipeline),
    ``first_sent`` (handed to the server, streamed answers only). A step that never came is
    left out."""
    at = {
        **marks,
        "started": result.started_at,
        "first_token": result.first_token_at,
        "first_content": result.first_content_at,
    }
    t0 = at.pop("arrived")
    steps = ("handler", "prepared", "submitted", "started", "first_token", "first_content")
    return {k: round((at[k] - t0) * 1000, 2) for k in (*steps, "first_sent") if at.get(k)}


def _clawd_extra(
    conversation_id: str,
    result: Result,
    used: _Memories,
    captured: asyncio.Future | None,
    marks: dict[str, float],
) -> dict[str, Any]:
    """clawd's own fields on a response: where it was stored, what produced it, the memories
    in its context and those its request's reply made (if captured by now), and where the
    time to its first content went."""
    remembered: list[dict[str, Any]] = []
    if captured is not None and captured.done() and not captured.exception():
        remembered = notices(captured.result())
    return {
        "conversation_id": conversation_id,
        "adapter_version": result.adapter_version,
        "ttft_ms": round(result.ttft_ms, 2),
        "total_ms": round(result.total_ms, 2),
        "memories": used.ids,
        "memories_left_out": used.left_out,
        "shaped": used.shape.describe(),
        "remembered": remembered,
        "timings_ms": _timeline(marks, result),
    }


@dataclass
class _Memories:
    ids: list[int]
    left_out: list[int]
    shape: Shape = field(default_factory=Shape)


def _memory_header(request: Request) -> bool:
    value = request.headers.get("x-clawd-memory", "1").strip().lower()
    if value not in ("0", "1", "true", "false", "yes", "no"):
        raise _api_error(400, "X-Clawd-Memory must be 0 or 1", "invalid_header", "X-Clawd-Memory")
    return value in ("1", "true", "yes")


def _with_memories(
    daemon: Any, engine: Any, messages: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], _Memories]:
    """The messages the model answers (the client's, with the memories in the system block)
    and what decoding keeps of the memories there."""
    s = daemon.settings
    rows = memories.in_prompt(daemon.store, s.memory_keep_learned)
    block, ids, left = memories.system_block(
        rows, lambda text: len(engine.tokenize(text)), s.memory_tokens
    )
    first = not any(m.get("role") == "assistant" for m in messages)
    shape = shape_of([r["text"] for r in rows if r["id"] in ids], first_answer=first)
    return memories.with_memories(messages, block), _Memories(ids, left, shape)


def _api_error(status: int, message: str, code: str, param: str | None = None) -> Exception:
    return ApiError(status, message, "invalid_request_error", code, param)


def _learn_header(request: Request) -> bool:
    value = request.headers.get("x-clawd-learn", "1").strip().lower()
    if value not in ("0", "1", "true", "false", "yes", "no"):
        raise _api_error(400, "X-Clawd-Learn must be 0 or 1", "invalid_header", "X-Clawd-Learn")
    return value in ("1", "true", "yes")


@router.post("/v1/chat/completions", summary="Chat completion (OpenAI schema, SSE streaming)")
async def chat_completions(body: CreateChatCompletionRequest, request: Request) -> Any:
    now = time.perf_counter()
    marks = {"arrived": getattr(request.state, "arrived", now), "handler": now}
    daemon = request.app.state.daemon
    engine = daemon.require_ready()
    conv_header = request.headers.get("x-clawd-conversation")
    if conv_header is not None and not record.CONVERSATION_ID_RE.match(conv_header):
        raise _api_error(
            400,
            'X-Clawd-Conversation must be 1-128 letters, digits or ._:- (no "..")',
            "invalid_header",
            "X-Clawd-Conversation",
        )
    learn = _learn_header(request)
    use_memory = daemon.settings.memory and _memory_header(request)
    form = structured.from_request(body.tools, body.tool_choice, body.response_format)
    messages = body.plain_messages()
    kwargs = dict(body.chat_template_kwargs or {})
    params = _params(body)
    used = _Memories([], [])
    if form.grammar:  # the grammar holds from the first token: no thinking before it
        params.grammar = form.grammar
        kwargs.setdefault("enable_thinking", False)

    def prepare() -> list[int]:
        nonlocal used
        seen = messages
        if use_memory:
            seen, used = _with_memories(daemon, engine, messages)
            # decoding's shape would break JSON or a call: the system message still holds them
            params.shape = None if (form.grammar or form.tools) else used.shape or None
        if form.tools:
            if structured.renders_tools(engine.render, seen, form.tools):
                kwargs["tools"] = form.tools
            else:
                seen = structured.with_tools_message(seen, form.tools)
        prompt = engine.tokenize(engine.render(seen, **kwargs))
        engine.check_fits(prompt, params.max_tokens)
        return prompt

    # Rendering, tokenizing and hashing a long history take a while: never on the event loop,
    # which keeps answering other clients meanwhile.
    try:
        prompt = await asyncio.to_thread(prepare)
    except PromptTooLong as exc:
        raise _api_error(400, str(exc), "context_length_exceeded", "messages") from None
    except Exception as exc:  # a template that rejects these messages is the client's input
        raise _api_error(400, str(exc), "invalid_messages", "messages") from None
    marks["prepared"] = time.perf_counter()
    turn_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[Delta | _Done] = asyncio.Queue()
    cancel = threading.Event()
    engine.submit(
        prompt,
        params,
        on_delta=lambda d: loop.call_soon_threadsafe(events.put_nowait, d),
        cancel=cancel,
        done=lambda r: loop.call_soon_threadsafe(events.put_nowait, _Done(r)),
    )
    marks["submitted"] = time.perf_counter()
    # The conversation is found and the reply linked while the engine already works: the
    # answer needs neither before it is stored.
    try:
        ctx = await asyncio.to_thread(record.begin, daemon.store, messages, conv_header, learn)
    except BaseException:
        cancel.set()
        raise
    captured = None
    if use_memory and ctx.learn and ctx.previous_turn_id:
        # The reply this request carries may state a preference: captured beside the answer.
        captured = asyncio.ensure_future(
            asyncio.to_thread(_capture, daemon.store, ctx.previous_turn_id)
        )
    headers = {"X-Clawd-Conversation": ctx.conversation_id}
    stored = False

    def abandoned() -> None:
        """No answer was stored: the reply this request carried is no next state."""
        if not stored:
            record.abandon(daemon.store, ctx)

    def calls_of(result: Result) -> list[dict[str, Any]] | None:
        result.content = structured.fitted(result.content, form)
        calls = structured.parse_calls(result.content, form)
        if calls:
            result.finish_reason = "tool_calls"
        return calls

    def store(result: Result, calls: list[dict[str, Any]] | None) -> None:
        nonlocal stored
        record.record_turn(
            daemon.store,
            ctx,
            id=turn_id,
            prompt_token_ids=result.prompt_token_ids,
            response_text=result.content,
            reasoning_text=result.reasoning,
            response_token_ids=result.response_token_ids,
            finish_reason=result.finish_reason,
            tool_calls=calls,
            model=daemon.model_name,
            model_sha256=daemon.model_sha256,
            adapter_version=result.adapter_version,
            params={
                "temperature": params.temperature,
                "top_p": params.top_p,
                "max_tokens": params.max_tokens,
                "stop": params.stop,
                "seed": params.seed,
                "chat_template_kwargs": {k: v for k, v in kwargs.items() if k != "tools"},
                "shaped": used.shape.describe() if params.shape else {},
                "tools": form.names,
                "tool_choice": form.choice,
                "json": form.json_answer,
            },
            prompt_tokens=len(result.prompt_token_ids),
            completion_tokens=len(result.response_token_ids),
            ttft_ms=result.ttft_ms,
            total_ms=result.total_ms,
            memory_ids=used.ids,
        )
        stored = True

    def outcome(done: _Done) -> Result:
        if isinstance(done.outcome, BaseException):
            if isinstance(done.outcome, PromptTooLong):
                raise _api_error(400, str(done.outcome), "context_length_exceeded", "messages")
            raise done.outcome
        return done.outcome

    if not body.stream:
        watcher = asyncio.create_task(_watch_disconnect(request, cancel))
        try:
            item = await events.get()
            while not isinstance(item, _Done):  # deltas are not needed: wait for the result
                item = await events.get()
            result = outcome(item)
            if result.finish_reason == "cancelled":
                return JSONResponse({}, status_code=499)
            calls = calls_of(result)
            await asyncio.to_thread(store, result, calls)
        finally:
            watcher.cancel()
            cancel.set()  # a no-op when finished; stops the worker if this task was cancelled
            abandoned()
        message: dict[str, Any] = {"role": "assistant", "content": result.content}
        if calls:
            message = {"role": "assistant", "content": None, "tool_calls": calls}
        if result.reasoning:
            message["reasoning_content"] = result.reasoning
        return JSONResponse(
            {
                "id": turn_id,
                "object": "chat.completion",
                "created": created,
                "model": daemon.model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": result.finish_reason,
                        "logprobs": None,
                    }
                ],
                "usage": _usage(result),
                "clawd": _clawd_extra(ctx.conversation_id, result, used, captured, marks),
            },
            headers=headers,
        )

    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        data = {
            "id": turn_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": daemon.model_name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
            **extra,
        }
        return f"data: {json.dumps(data)}\n\n"

    async def stream() -> AsyncIterator[str]:
        try:
            yield chunk({"role": "assistant", "content": ""})
            # content that may turn out to be a tool call is held back until it is known
            held, holding = "", bool(form.tools)
            while not isinstance(item := await events.get(), _Done):
                delta = {}
                if item.reasoning:
                    delta["reasoning_content"] = item.reasoning
                text = item.content
                if holding and text:
                    held += text
                    holding = form.choice == "required" or structured.may_be_call(held)
                    text, held = ("", held) if holding else (held, "")
                if text:
                    delta["content"] = text
                    marks.setdefault("first_sent", time.perf_counter())
                if delta:
                    yield chunk(delta)
            try:
                result = outcome(item)
            except Exception as exc:
                body = getattr(
                    exc, "body", {"error": {"message": str(exc), "type": "server_error"}}
                )
                yield f"data: {json.dumps(body)}\n\n"
                yield "data: [DONE]\n\n"
                return
            if result.finish_reason == "cancelled":
                return
            calls = calls_of(result)
            await asyncio.to_thread(store, result, calls)  # stored before the client hears it
            if calls:
                yield chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(calls)]})
            elif held:
                yield chunk({"content": held})
            yield chunk(
                {},
                result.finish_reason,
                clawd=_clawd_extra(ctx.conversation_id, result, used, captured, marks),
            )
            if include_usage:
                data = {
                    "id": turn_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": daemon.model_name,
                    "choices": [],
                    "usage": _usage(result),
                }
                yield f"data: {json.dumps(data)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            cancel.set()  # the client went away (or we finished): free the engine
            abandoned()

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={**headers, "Cache-Control": "no-cache"}
    )


def _capture(store: Any, turn_id: str) -> list[dict[str, Any]]:
    """Memories from the reply to ``turn_id``; a failure is logged, never the answer's."""
    try:
        return remember_next_state(store, turn_id)
    except Exception:
        log.exception("capturing memories from the reply to %s failed", turn_id)
        return []


async def _watch_disconnect(request: Request, cancel: threading.Event) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        while not cancel.is_set():
            if await request.is_disconnected():
                cancel.set()
                return
            await asyncio.sleep(0.2)
