"""The TUI's only way to the daemon: an async REST client with errors a person can act on.

Every call maps transport and HTTP failures to ``DaemonError`` whose message says what happened
and what to do (start the daemon, fix the token). ``stream_chat`` parses the OpenAI SSE stream
into ``ChatEvent`` values; the ``done`` event carries clawd's own ``clawd`` field of the last
chunk whole (``ChatEvent.clawd``: the memories the answer used, those a reply made, ...).

Run alone to check a daemon (reads the token from CLAWD_HOME)::

    python -m clawd.ui.client [URL]
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx


def seg(value: str) -> str:
    """An id as one URL path segment: '/' and '..' can never reach another route."""
    return quote(value, safe="")


class DaemonError(Exception):
    """A failed call, in words for the user: what went wrong and what to do about it."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ChatEvent:
    """One piece of a streamed answer: ``reasoning`` or ``content`` text, or the final ``done``.

    ``clawd`` is the daemon's extra object of the final chunk, as sent: ``memories`` (ids in the
    answer's context), ``memories_left_out`` (ids over the token budget) and ``remembered``
    (``{"id", "text", "replaced"}`` for each memory this request's reply made)."""

    kind: str
    text: str = ""
    id: str | None = None
    conversation_id: str | None = None
    adapter_version: str | None = None
    finish_reason: str | None = None
    clawd: dict[str, Any] = field(default_factory=dict)

    @property
    def memories(self) -> list[int]:
        return list(self.clawd.get("memories") or [])

    @property
    def memories_left_out(self) -> list[int]:
        return list(self.clawd.get("memories_left_out") or [])

    @property
    def remembered(self) -> list[dict[str, Any]]:
        return list(self.clawd.get("remembered") or [])


class Client:
    """Async client for one daemon. ``transport`` replaces the network (fixtures, tests)."""

    def __init__(
        self, url: str, token: str, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(120, connect=5),
            transport=transport,
        )

    async def close(self) -> None:
        await self._http.aclose()

    def _unreachable(self, exc: Exception) -> DaemonError:
        return DaemonError(
            f"cannot reach the daemon at {self.url} ({type(exc).__name__}). "
            "Start it with `clawd serve`, or run `clawd chat` without --url to start one."
        )

    @staticmethod
    def _refused(resp: httpx.Response) -> DaemonError:
        try:
            message = resp.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = resp.text[:300] or resp.reason_phrase
        if resp.status_code == 401:
            message = (
                "the daemon refused the token. Make sure the TUI and the daemon share "
                "CLAWD_HOME, or pass the token printed by `clawd token`."
            )
        elif resp.status_code == 503:
            message = f"the daemon is not ready: {message}. Wait a moment and try again."
        return DaemonError(message, resp.status_code)

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One JSON call; raises ``DaemonError`` on any failure."""
        try:
            resp = await self._http.request(method, path, json=body)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        if resp.status_code >= 400:
            raise self._refused(resp)
        return resp.json()

    # -- health and conversations ---------------------------------------------------------
    async def health(self) -> dict[str, Any]:
        try:
            resp = await self._http.get("/health")
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        return resp.json()

    async def conversations(self) -> list[dict[str, Any]]:
        return (await self.request("GET", "/v1/conversations"))["data"]

    async def conversation(self, cid: str) -> dict[str, Any]:
        return await self.request("GET", f"/v1/conversations/{seg(cid)}")

    async def update_conversation(
        self, cid: str, *, title: str | None = None, learn: bool | None = None
    ) -> dict[str, Any]:
        body = {k: v for k, v in (("title", title), ("learn", learn)) if v is not None}
        return await self.request("PATCH", f"/v1/conversations/{seg(cid)}", body)

    async def delete_conversation(self, cid: str) -> None:
        await self.request("DELETE", f"/v1/conversations/{seg(cid)}")

    async def feedback(
        self, response_id: str, rating: int, comment: str | None = None
    ) -> dict[str, Any]:
        """Rate an answer; the reply's ``remembered`` lists memories its comment made."""
        body = {"id": response_id, "rating": rating, "comment": comment or None}
        return await self.request("POST", "/v1/feedback", body)

    async def stream_chat(
        self,
        messages: list[dict[str, Any]],
        *,
        conversation_id: str | None = None,
        learn: bool = True,
        thinking: bool | None = None,
        max_tokens: int = 1024,
    ) -> AsyncIterator[ChatEvent]:
        """Stream an answer. Closing the iterator early hangs up, which cancels it in the daemon."""
        headers = {"X-Clawd-Learn": "1" if learn else "0"}
        if conversation_id:
            headers["X-Clawd-Conversation"] = conversation_id
        body: dict[str, Any] = {
            "model": "clawd",
            "messages": messages,
            "stream": True,
            "max_tokens": max_tokens,
        }
        if thinking is not None:
            body["chat_template_kwargs"] = {"enable_thinking": thinking}
        try:
            async with self._http.stream(
                "POST", "/v1/chat/completions", json=body, headers=headers
            ) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    raise self._refused(resp)
                async for event in _parse_sse(resp.aiter_lines()):
                    yield event
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None

    # -- learning ---------------------------------------------------------------------------
    async def signals(self, status: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        query = f"?limit={limit}" + (f"&status={status}" if status else "")
        return (await self.request("GET", f"/v1/signals{query}"))["data"]

    async def signal(self, sid: int) -> dict[str, Any]:
        return await self.request("GET", f"/v1/signals/{sid}")

    async def review(self, sid: int, verdict: str) -> dict[str, Any]:
        """``verdict`` is ``approve`` or ``veto``."""
        return await self.request("POST", f"/v1/signals/{sid}/{verdict}")

    async def training(self) -> dict[str, Any]:
        return await self.request("GET", "/v1/train")

    async def train_now(self) -> dict[str, Any]:
        return await self.request("POST", "/v1/train")

    # -- memories ---------------------------------------------------------------------------
    async def memories(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every memory (or those of one status: active, learned, off, replaced), newest first."""
        query = f"?status={quote(status)}" if status else ""
        return (await self.request("GET", f"/v1/memories{query}"))["data"]

    async def add_memory(self, text: str, kind: str = "other") -> dict[str, Any]:
        """The new memory, with ``replaced``: the memory it replaced, or None."""
        return await self.request("POST", "/v1/memories", {"text": text, "kind": kind})

    async def edit_memory(
        self, memory_id: int, *, text: str | None = None, status: str | None = None
    ) -> dict[str, Any]:
        """A new text, or ``status`` "off" / "active"."""
        body = {k: v for k, v in (("text", text), ("status", status)) if v is not None}
        return await self.request("PATCH", f"/v1/memories/{int(memory_id)}", body)

    async def delete_memory(self, memory_id: int) -> dict[str, Any]:
        """Forget a memory; ``restored`` lists the ids of memories it had replaced."""
        return await self.request("DELETE", f"/v1/memories/{int(memory_id)}")

    # -- adapters ---------------------------------------------------------------------------
    async def adapters(self) -> dict[str, Any]:
        return await self.request("GET", "/v1/adapters")

    async def adapter(self, version: str) -> dict[str, Any]:
        return await self.request("GET", f"/v1/adapters/{seg(version)}")

    async def report(self, version: str) -> dict[str, Any]:
        return await self.request("GET", f"/v1/adapters/{seg(version)}/report")

    async def activate(self, version: str, force: bool = False) -> dict[str, Any]:
        return await self.request("POST", f"/v1/adapters/{seg(version)}/activate", {"force": force})

    async def rollback(self) -> dict[str, Any]:
        return await self.request("POST", "/v1/adapters/rollback")

    async def to_base(self) -> dict[str, Any]:
        return await self.request("POST", "/v1/adapters/base")


async def _parse_sse(lines: AsyncIterator[str]) -> AsyncIterator[ChatEvent]:
    async for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        chunk = json.loads(data)
        if "error" in chunk:
            raise DaemonError(f"the daemon failed while answering: {chunk['error']['message']}")
        for choice in chunk.get("choices", []):
            delta = choice.get("delta") or {}
            if delta.get("reasoning_content"):
                yield ChatEvent("reasoning", delta["reasoning_content"], id=chunk["id"])
            if delta.get("content"):
                yield ChatEvent("content", delta["content"], id=chunk["id"])
            if choice.get("finish_reason"):
                extra = chunk.get("clawd") or {}
                yield ChatEvent(
                    "done",
                    id=chunk["id"],
                    conversation_id=extra.get("conversation_id"),
                    adapter_version=extra.get("adapter_version"),
                    finish_reason=choice["finish_reason"],
                    clawd=extra,
                )


if __name__ == "__main__":
    import asyncio
    import sys

    from clawd.config import clawd_home, ensure_token, load_settings

    async def main() -> None:
        home = clawd_home()
        s = load_settings(home)
        client = Client(
            sys.argv[1] if len(sys.argv) > 1 else f"http://{s.host}:{s.port}", ensure_token(home)
        )
        try:
            print(json.dumps(await client.health(), indent=1))
        finally:
            await client.close()

    asyncio.run(main())
