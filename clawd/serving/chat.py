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
limit, a closing question: ``clawd.signals.shaping``) it keeps, for a model that does not
follow its system message. ``X-Clawd-Memory: 0`` leaves the memories out of one request and
makes none.

Mounted by ``clawd.serving.app``; not meant to run alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from clawd.serving import structured
from clawd.serving.engine import Delta, GenParams, PromptTooLong, Result
from clawd.serving.memories import InContext, capture, memory_header, with_memories
from clawd.serving.protocol import ApiError, CreateChatCompletionRequest
from clawd.signals.memory import notices
from clawd.store import record

router = APIRouter()
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
    used: InContext,
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


def _api_error(status: int, message: str, code: str, param: str | None = None) -> Exception:
    return ApiError(status, message, "invalid_request_error", code, param)


def _learn_header(request: Request) -> bool:
    value = request.headers.get("x-clawd-learn", "1").strip().lower()
    if value not in ("0", "1", "true", "false", "yes", "no"):
        raise _api_error(400, "X-Clawd-Learn must be 0 or 1", "invalid_header", "X-Clawd-Learn")
    return value in ("1", "true", "yes")


@router.post("/v1/chat/completions", summary="Chat completion (OpenAI schema, SSE streaming)")
async def chat_completions(body: CreateChatCompletionRequest, request: Request) -> Any:
    turn = _Turn(body, request)
    await turn.start()
    return await turn.answer() if not body.stream else turn.streamed()


class _Turn:
    """One request's answer, phase by phase: the request checked (``__init__``), the prompt
    built and the generation queued (``start``), then the answer waited for whole (``answer``)
    or streamed (``streamed``), and stored before the client hears its end."""

    def __init__(self, body: CreateChatCompletionRequest, request: Request) -> None:
        now = time.perf_counter()
        self.marks = {"arrived": getattr(request.state, "arrived", now), "handler": now}
        self.body, self.request = body, request
        self.daemon = request.app.state.daemon
        self.engine = self.daemon.require_ready()
        self.conv_header = request.headers.get("x-clawd-conversation")
        if self.conv_header is not None and not record.CONVERSATION_ID_RE.match(self.conv_header):
            raise _api_error(
                400,
                'X-Clawd-Conversation must be 1-128 letters, digits or ._:- (no "..")',
                "invalid_header",
                "X-Clawd-Conversation",
            )
        self.learn = _learn_header(request)
        self.use_memory = self.daemon.settings.memory and memory_header(request)
        self.form = structured.from_request(body.tools, body.tool_choice, body.response_format)
        self.messages = body.plain_messages()
        self.kwargs = dict(body.chat_template_kwargs or {})
        self.params = _params(body)
        self.used = InContext([], [])
        if self.form.grammar:  # the grammar holds from the first token: no thinking before it
            self.params.grammar = self.form.grammar
            self.kwargs.setdefault("enable_thinking", False)
        self.turn_id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.events: asyncio.Queue[Delta | _Done] = asyncio.Queue()
        self.cancel = threading.Event()
        self.captured: asyncio.Future | None = None
        self.stored = False

    def _prompt(self) -> list[int]:
        """The prompt's tokens: memories in the system message, tools in the template."""
        seen, form, engine = self.messages, self.form, self.engine
        if self.use_memory:
            seen, self.used = with_memories(self.daemon, engine, self.messages)
            # decoding's shape would break JSON or a call: the system message still holds them
            self.params.shape = None if (form.grammar or form.tools) else self.used.shape or None
        if form.tools:
            if structured.renders_tools(engine.render, seen, form.tools):
                self.kwargs["tools"] = form.tools
            else:
                seen = structured.with_tools_message(seen, form.tools)
        prompt = engine.tokenize(engine.render(seen, **self.kwargs))
        engine.check_fits(prompt, self.params.max_tokens)
        return prompt

    async def start(self) -> None:
        """Build the prompt, queue the generation, then find the conversation."""
        # Rendering, tokenizing and hashing a long history take a while: never on the event
        # loop, which keeps answering other clients meanwhile.
        try:
            prompt = await asyncio.to_thread(self._prompt)
        except PromptTooLong as exc:
            raise _api_error(400, str(exc), "context_length_exceeded", "messages") from None
        except Exception as exc:  # a template that rejects these messages is the client's input
            raise _api_error(400, str(exc), "invalid_messages", "messages") from None
        self.marks["prepared"] = time.perf_counter()
        loop, events = asyncio.get_running_loop(), self.events
        self.engine.submit(
            prompt,
            self.params,
            on_delta=lambda d: loop.call_soon_threadsafe(events.put_nowait, d),
            cancel=self.cancel,
            done=lambda r: loop.call_soon_threadsafe(events.put_nowait, _Done(r)),
        )
        self.marks["submitted"] = time.perf_counter()
        # The conversation is found and the reply linked while the engine already works: the
        # answer needs neither before it is stored.
        store = self.daemon.store
        try:
            self.ctx = await asyncio.to_thread(
                record.begin, store, self.messages, self.conv_header, self.learn
            )
        except BaseException:
            self.cancel.set()
            raise
        if self.use_memory and self.ctx.learn and self.ctx.previous_turn_id:
            # The reply this request carries may state a preference: captured beside the answer.
            self.captured = asyncio.ensure_future(
                asyncio.to_thread(capture, store, self.ctx.previous_turn_id)
            )

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Clawd-Conversation": self.ctx.conversation_id}

    def _abandoned(self) -> None:
        """No answer was stored: the reply this request carried is no next state."""
        if not self.stored:
            record.abandon(self.daemon.store, self.ctx)

    def _calls_of(self, result: Result) -> list[dict[str, Any]] | None:
        result.content = structured.fitted(result.content, self.form)
        calls = structured.parse_calls(result.content, self.form)
        if calls:
            result.finish_reason = "tool_calls"
        return calls

    def _store(self, result: Result, calls: list[dict[str, Any]] | None) -> None:
        params, form = self.params, self.form
        record.record_turn(
            self.daemon.store,
            self.ctx,
            id=self.turn_id,
            prompt_token_ids=result.prompt_token_ids,
            response_text=result.content,
            reasoning_text=result.reasoning,
            response_token_ids=result.response_token_ids,
            finish_reason=result.finish_reason,
            tool_calls=calls,
            model=self.daemon.model_name,
            model_sha256=self.daemon.model_sha256,
            adapter_version=result.adapter_version,
            params={
                "temperature": params.temperature,
                "top_p": params.top_p,
                "max_tokens": params.max_tokens,
                "stop": params.stop,
                "seed": params.seed,
                "chat_template_kwargs": {k: v for k, v in self.kwargs.items() if k != "tools"},
                "shaped": self.used.shape.describe() if params.shape else {},
                "forced": result.forced,  # the token positions the shape forced
                "tools": form.names,
                "tool_choice": form.choice,
                "json": form.json_answer,
            },
            prompt_tokens=len(result.prompt_token_ids),
            completion_tokens=len(result.response_token_ids),
            ttft_ms=result.ttft_ms,
            total_ms=result.total_ms,
            memory_ids=self.used.ids,
        )
        self.stored = True

    def _extra(self, result: Result) -> dict[str, Any]:
        return _clawd_extra(self.ctx.conversation_id, result, self.used, self.captured, self.marks)

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
        return self._event(choices=choices, **extra)

    def _event(self, **fields: Any) -> str:
        data = {
            "id": self.turn_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.daemon.model_name,
            **fields,
        }
        return f"data: {json.dumps(data)}\n\n"

    async def answer(self) -> JSONResponse:
        """The whole answer at once (``stream`` false)."""
        watcher = asyncio.create_task(_watch_disconnect(self.request, self.cancel))
        try:
            item = await self.events.get()
            while not isinstance(item, _Done):  # deltas are not needed: wait for the result
                item = await self.events.get()
            result = _outcome(item)
            if result.finish_reason == "cancelled":
                return JSONResponse({}, status_code=499)
            calls = self._calls_of(result)
            await asyncio.to_thread(self._store, result, calls)
        finally:
            watcher.cancel()
            self.cancel.set()  # a no-op when finished; stops the worker if this was cancelled
            self._abandoned()
        message: dict[str, Any] = {"role": "assistant", "content": result.content}
        if calls:
            message = {"role": "assistant", "content": None, "tool_calls": calls}
        if result.reasoning:
            message["reasoning_content"] = result.reasoning
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": result.finish_reason,
            "logprobs": None,
        }
        return JSONResponse(
            {
                "id": self.turn_id,
                "object": "chat.completion",
                "created": self.created,
                "model": self.daemon.model_name,
                "choices": [choice],
                "usage": _usage(result),
                "clawd": self._extra(result),
            },
            headers=self.headers,
        )

    def streamed(self) -> StreamingResponse:
        """The answer as server-sent events (``stream`` true)."""
        return StreamingResponse(
            self._stream(),
            media_type="text/event-stream",
            headers={**self.headers, "Cache-Control": "no-cache"},
        )

    async def _stream(self) -> AsyncIterator[str]:
        form, options = self.form, self.body.stream_options
        try:
            yield self._chunk({"role": "assistant", "content": ""})
            # content that may turn out to be a tool call is held back until it is known
            held, holding = "", bool(form.tools)
            while not isinstance(item := await self.events.get(), _Done):
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
                    self.marks.setdefault("first_sent", time.perf_counter())
                if delta:
                    yield self._chunk(delta)
            try:
                result = _outcome(item)
            except Exception as exc:
                err = getattr(exc, "body", {"error": {"message": str(exc), "type": "server_error"}})
                yield f"data: {json.dumps(err)}\n\n"
                yield "data: [DONE]\n\n"
                return
            if result.finish_reason == "cancelled":
                return
            calls = self._calls_of(result)
            await asyncio.to_thread(self._store, result, calls)  # before the client hears it
            if calls:
                yield self._chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(calls)]})
            elif held:
                yield self._chunk({"content": held})
            yield self._chunk({}, result.finish_reason, clawd=self._extra(result))
            if options and options.include_usage:
                yield self._event(choices=[], usage=_usage(result))
            yield "data: [DONE]\n\n"
        finally:
            self.cancel.set()  # the client went away (or we finished): free the engine
            self._abandoned()


def _outcome(done: _Done) -> Result:
    """The engine's result, or its error as the client should see it."""
    if isinstance(done.outcome, BaseException):
        if isinstance(done.outcome, PromptTooLong):
            raise _api_error(400, str(done.outcome), "context_length_exceeded", "messages")
        raise done.outcome
    return done.outcome


async def _watch_disconnect(request: Request, cancel: threading.Event) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        while not cancel.is_set():
            if await request.is_disconnected():
                cancel.set()
                return
            await asyncio.sleep(0.2)
