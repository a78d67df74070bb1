"""Request and response types of the REST API, in OpenAI's names and shapes.

Every field has a description that feeds the OpenAPI page (``/docs`` on a running daemon).
Unknown top-level fields of a chat request are ignored, as editors send many; the fields we
read are checked strictly and a bad one is a 400 that names it.

Run alone to print the JSON schema of a chat request::

    python -m clawd.serving.protocol
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str = Field(description="Part type; only 'text' parts reach the model.")
    text: str | None = Field(None, description="The text of a 'text' part.")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"] = Field(
        description="Who wrote the message."
    )
    content: str | list[ContentPart] | None = Field(None, description="The message text.")
    name: str | None = Field(None, description="Optional author name.")
    tool_calls: list[dict[str, Any]] | None = Field(None, description="Assistant tool calls.")
    tool_call_id: str | None = Field(None, description="The call a tool message answers.")


class StreamOptions(BaseModel):
    include_usage: bool = Field(False, description="Send a last chunk with token usage.")


class CreateChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str | None = Field(None, description="Ignored: clawd serves one model.")
    messages: list[ChatMessage] = Field(
        min_length=1, max_length=4096, description="The conversation so far (at most 4096)."
    )
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="Sampling temperature.")
    top_p: float | None = Field(None, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_tokens: int | None = Field(None, ge=1, description="Most tokens to generate.")
    max_completion_tokens: int | None = Field(
        None, ge=1, description="Most tokens to generate (newer name of max_tokens)."
    )
    stop: str | list[str] | None = Field(None, description="Up to 4 strings that end the answer.")
    seed: int | None = Field(None, ge=0, le=2**31 - 1, description="Seed for reproducible runs.")
    n: int = Field(1, ge=1, le=1, description="Number of answers; clawd gives exactly one.")
    stream: bool = Field(False, description="Stream the answer as server-sent events.")
    stream_options: StreamOptions | None = Field(None, description="Streaming options.")
    chat_template_kwargs: dict[str, Any] | None = Field(
        None, description="Extra chat-template variables, e.g. {'enable_thinking': false}."
    )
    tools: list[Any] | None = Field(
        None, description="Functions the model may call (type 'function', name, parameters)."
    )
    tool_choice: str | dict[str, Any] | None = Field(
        None, description="'none', 'auto', 'required' or {'type': 'function', 'function': ...}."
    )
    parallel_tool_calls: bool | None = Field(
        None, description="Accepted; a required call is one call, an 'auto' answer may make more."
    )
    response_format: dict[str, Any] | None = Field(
        None, description="{'type': 'text' | 'json_object' | 'json_schema', 'json_schema': ...}."
    )

    @field_validator("stop")
    @classmethod
    def _stops(cls, v: str | list[str] | None) -> list[str]:
        stops = [v] if isinstance(v, str) else list(v or [])
        if len(stops) > 4:
            raise ValueError("at most 4 stop strings")
        if any(len(x) > 256 for x in stops):
            raise ValueError("a stop string may have at most 256 characters")
        return stops

    def plain_messages(self) -> list[dict[str, Any]]:
        """Messages as the chat template and the store see them (text content only)."""
        out = []
        for m in self.messages:
            d: dict[str, Any] = {"role": "system" if m.role == "developer" else m.role}
            if isinstance(m.content, list):
                d["content"] = "".join(p.text or "" for p in m.content if p.type == "text")
            else:
                d["content"] = m.content or ""
            for key in ("name", "tool_calls", "tool_call_id"):
                if getattr(m, key):
                    d[key] = getattr(m, key)
            out.append(d)
        return out


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=200, description="The response id to rate.")
    rating: Literal[1, -1] = Field(description="+1 good, -1 bad.")
    comment: str | None = Field(
        None, max_length=8000, description="What should have been different."
    )


class ConversationUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    learn: bool | None = Field(None, description="false: never learn from this conversation.")
    title: str | None = Field(None, max_length=200, description="A new title.")


def error_body(message: str, type_: str, code: str | None = None, param: str | None = None) -> dict:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": type_, "code": code, "param": param}}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        type_: str,
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.body = status, error_body(message, type_, code, param)


if __name__ == "__main__":
    print(json.dumps(CreateChatCompletionRequest.model_json_schema(), indent=2))
