"""The daemon's error shapes and its request-body limit, for ``clawd.serving.app``.

``install_errors`` turns every exception a route can raise into OpenAI-shaped JSON (400 naming
the field, 404 for an unknown id, a 500 only for our own faults, logged, and the daemon stays
up). ``Guard``, before any route runs, refuses in this order: a request whose ``Host`` names
another machine (403: a web page reaching the daemon through DNS rebinding), a request with a
body but without the right token (401, before a byte of the body is read), a body over 8 MiB
(413, before any of it is parsed) and a JSON body whose text holds a lone UTF-16 surrogate
(``"\\ud800"``: valid JSON, but no text can hold it, so nothing could store or tokenize it;
400 naming the field).

Run alone: nothing to run; ``tests/test_serve.py`` and ``tests/test_fuzz.py`` exercise both
through the real daemon.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from clawd.serving.protocol import ApiError, error_body
from clawd.store import record

log = logging.getLogger("clawd")


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc if p != "body")


def install_errors(app: FastAPI) -> None:
    """OpenAI-shaped JSON for every error: ours (``ApiError``), unknown ids (404), invalid
    bodies (400 naming the field), HTTP errors, and anything else (500, logged, daemon up)."""

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body, status_code=exc.status)

    @app.exception_handler(record.NotFound)
    async def not_found(_: Request, exc: record.NotFound) -> JSONResponse:
        return JSONResponse(error_body(str(exc), "not_found_error", "unknown_id"), 404)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0]
        if err.get("type") == "json_invalid":
            msg = f"the body is not valid JSON: {err.get('ctx', {}).get('error', err['msg'])}"
            return JSONResponse(error_body(msg, "invalid_request_error", "invalid_json"), 400)
        name = _field(err["loc"]) or "body"
        msg = f"{name}: {err['msg']}"
        if name == "body":
            msg = "the body must be a JSON object (with Content-Type: application/json)"
        return JSONResponse(error_body(msg, "invalid_request_error", "invalid_value", name), 400)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return JSONResponse(
            error_body(str(exc.detail), kind),
            exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Exception)
    async def internal(_: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error")
        return JSONResponse(error_body(f"internal error: {exc}", "server_error"), 500)


MAX_BODY_BYTES = 8 * 2**20  # a request body larger than this is refused with 413


def unauthorized() -> ApiError:
    """The 401 of a request without the right token (routes raise it; ``Guard`` sends it)."""
    return ApiError(
        401,
        "missing or wrong API key: send 'Authorization: Bearer <token>' with the token "
        "printed by `clawd token`",
        "invalid_request_error",
        "invalid_api_key",
    )


def bearer_ok(header: str, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` as its bearer (constant time)."""
    given = header[7:].strip() if header.lower().startswith("bearer ") else ""
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
PUBLIC_PATHS = {"/health", "/docs", "/redoc", "/openapi.json"}


def host_of(header: bytes) -> str:
    """The host of a ``Host`` header, without its port (``[::1]:8765`` -> ``::1``)."""
    text = header.decode("latin-1").strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


class Guard:
    """ASGI middleware: the checks that must come before any of a body is read or parsed.

    ``hosts``: the host names a request may name (None: any, when the daemon listens beyond
    this machine on purpose); ``token``: the bearer token requests with a body must carry
    (None: not checked here; the routes still check it); ``limit``: the most body bytes,
    declared or streamed."""

    def __init__(
        self,
        app: Any,
        hosts: set[str] | None = None,
        token: str | None = None,
        limit: int = MAX_BODY_BYTES,
    ) -> None:
        self.app, self.hosts, self.token, self.limit = app, hosts, token, limit

    async def _refuse(self, scope: Any, receive: Any, send: Any) -> None:
        body = error_body(
            f"the request body is larger than {self.limit // 2**20} MiB",
            "invalid_request_error",
            "body_too_large",
        )
        await JSONResponse(body, status_code=413)(scope, receive, send)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # the request's arrival, where its timeline (``clawd.timings_ms``) starts
        scope.setdefault("state", {})["arrived"] = time.perf_counter()
        headers = dict(scope["headers"])
        host = host_of(headers.get(b"host", b"localhost"))
        if self.hosts is not None and host not in self.hosts:
            err = error_body(
                f"Host {host!r} is not this machine: clawd answers requests to localhost or "
                "127.0.0.1 only (serve with --allow-remote to be reached by other names)",
                "invalid_request_error",
                "forbidden_host",
            )
            await JSONResponse(err, status_code=403)(scope, receive, send)
            return
        if scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        given = headers.get(b"authorization", b"").decode("latin-1")
        if self.token and scope["path"] not in PUBLIC_PATHS and not bearer_ok(given, self.token):
            err = unauthorized().body
            await JSONResponse(err, status_code=401)(scope, receive, send)
            return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(scope, receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        where = lone_surrogate(body)
        if where is not None:
            msg = f"{where}: holds a lone UTF-16 surrogate, which is not text"
            err = error_body(msg, "invalid_request_error", "invalid_value", where)
            await JSONResponse(err, status_code=400)(scope, receive, send)
            return
        replay = [{"type": "http.request", "body": body, "more_body": False}]

        async def replayed() -> Any:  # the body once, then the real stream (disconnects)
            return replay.pop() if replay else await receive()

        await self.app(scope, replayed, send)


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def lone_surrogate(body: bytes) -> str | None:
    """The field (``messages.0.tool_call_id``; ``body`` for a key) of the first string in the
    JSON ``body`` that holds a lone surrogate, or None (also for a body that is not JSON: the
    route's parser names that). Parses only when the raw bytes hold a surrogate escape."""
    if not _SURROGATE_ESCAPE.search(body):
        return None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return path or "body"
        elif isinstance(value, dict):
            for key, item in value.items():
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    return path or "body"
                stack.append((item, f"{path}.{key}" if path else key))
        elif isinstance(value, list):
            stack.extend((item, f"{path}.{i}" if path else str(i)) for i, item in enumerate(value))
    return None
