"""Structured output: JSON mode, JSON schemas and function calls, in OpenAI's request shape.

``response_format`` ``{"type": "json_object"}`` or ``{"type": "json_schema", "json_schema":
{"name", "schema"}}`` constrains the answer with a llama.cpp grammar (GBNF) built from the
schema, so even the 135M default returns JSON that parses and fits the schema (unless
``max_tokens`` cuts it: ``finish_reason`` "length").

``tools`` (type ``function``: name, description, JSON-schema parameters) reach the model
through its chat template when the template renders them (Qwen3's does), else as a system
message in one documented format (``FALLBACK``). ``tool_choice``:

- ``"none"``: the tools are not shown and the model answers in prose;
- ``"auto"`` (the default with tools): the model may answer or call; a call is a JSON object
  ``{"name", "arguments"}`` in ``<tool_call>...</tool_call>`` tags (Qwen3's own format), parsed
  into ``message.tool_calls`` only when the name is a given tool and the arguments are a JSON
  object: a call that does not parse stays prose, never a broken call;
- ``"required"`` or ``{"type": "function", "function": {"name"}}``: the answer is constrained
  by a grammar to one call of a given tool (of that one) with arguments that fit its schema.

The grammar keeps the JSON's shape and types; an integer range of up to 1000 values becomes an
enum it keeps too, and any other number outside its ``minimum``/``maximum`` is brought to the
bound after generation (``clamp``). What clawd cannot honour is a 400 naming the field (a tool
type other than ``function``, a named tool that is not among ``tools``, a schema the grammar
builder rejects). A grammar keeps the answer free of thinking and of the memories' shaping
(``clawd.signals.shaping``).

Run alone to print the grammar of a JSON schema::

    python -m clawd.serving.structured '{"type": "object", "required": ["a"]}'
"""

from __future__ import annotations

import json
import math
import re
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any

from clawd.serving.protocol import ApiError

FALLBACK = (
    "You can call these functions. To call one, answer with nothing but\n"
    '<tool_call>\n{"name": "<function name>", "arguments": {<arguments as JSON>}}\n</tool_call>\n'
    "Functions (JSON):\n"
)
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


def _bad(message: str, param: str) -> ApiError:
    return ApiError(400, f"{param}: {message}", "invalid_request_error", "invalid_value", param)


@dataclass
class Structure:
    """What a request asks of the answer's form (nothing: all defaults)."""

    tools: list[dict[str, Any]] = field(default_factory=list)  # OpenAI's tool objects, shown
    choice: str = "none"  # "none", "auto" or "required" (a named tool: required of one)
    grammar: str | None = None  # GBNF the whole answer must match
    json_answer: bool = False  # response_format asks for JSON
    schema: dict[str, Any] | None = None  # response_format's JSON schema, if one was given

    @property
    def names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]


# A JSON string holds no raw control character; llama.cpp's grammar builder allows them.
_CHAR = re.compile(r'\[\^"\\\\\]')
_JSON_CHAR = '[^"\\\\\\x7F\\x00-\\x1F]'
_ENUM_MAX = 1000  # an integer range up to this many values becomes an enum the grammar keeps


def _walk(schema: Any, fn: Any) -> Any:
    """``schema`` with ``fn`` applied to every sub-schema, deepest first."""
    if isinstance(schema, list):
        return [_walk(x, fn) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {k: _walk(v, fn) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not", "anyOf", "oneOf", "allOf"):
            out[key] = _walk(value, fn)
        elif key == "prefixItems":
            out[key] = _walk(value, fn)
        else:
            out[key] = value
    return fn(out)


def _int_ranges_as_enums(schema: dict[str, Any]) -> dict[str, Any]:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if (
        schema.get("type") == "integer"
        and "enum" not in schema
        and isinstance(lo, int | float)
        and isinstance(hi, int | float)
        and 0 <= hi - lo <= _ENUM_MAX
    ):
        return {**schema, "enum": list(range(math.ceil(lo), math.floor(hi) + 1))}
    return schema


def _grammar(schema: dict[str, Any] | None, param: str) -> str:
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar, json_schema_to_gbnf

    try:
        if schema is None:
            text = JSON_GBNF
        else:
            text = json_schema_to_gbnf(json.dumps(_walk(schema, _int_ranges_as_enums)))
        text = _CHAR.sub(lambda _: _JSON_CHAR, text)
        LlamaGrammar.from_string(text, verbose=False)  # it must also load
    except Exception as exc:  # the builder's own words say which feature it cannot express
        raise _bad(f"cannot be turned into a grammar: {exc}", param) from None
    return text


def clamp(value: Any, schema: Any) -> Any:
    """``value`` with every number brought inside its schema's minimum/maximum (the grammar
    keeps the JSON's shape and types, not a number's bounds)."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if isinstance(lo, int | float) and value < lo:
            value = type(value)(lo) if isinstance(value, float) else math.ceil(lo)
        if isinstance(hi, int | float) and value > hi:
            value = type(value)(hi) if isinstance(value, float) else math.floor(hi)
        return value
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        return {
            k: clamp(v, props.get(k, schema.get("additionalProperties"))) for k, v in value.items()
        }
    if isinstance(value, list):
        return [clamp(v, schema.get("items")) for v in value]
    return value


def _tools(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise _bad("must be a non-empty list of tools", "tools")
    out, seen = [], set()
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise _bad('only tools of type "function" are supported', f"tools.{i}.type")
        fn = tool.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise _bad("a function needs a name", f"tools.{i}.function.name")
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", fn["name"]) or fn["name"] in seen:
            raise _bad("1-64 letters, digits, _ . -, each name once", f"tools.{i}.function.name")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict):
            raise _bad("must be a JSON schema (an object)", f"tools.{i}.function.parameters")
        seen.add(fn["name"])
        clean = {"name": fn["name"], "parameters": params}
        if isinstance(fn.get("description"), str):
            clean["description"] = fn["description"]
        out.append({"type": "function", "function": clean})
    return out


def from_request(
    tools: Any = None, tool_choice: Any = None, response_format: Any = None
) -> Structure:
    """The request's form fields, checked; a 400 naming the field for what is not supported."""
    st = Structure()
    if response_format is not None:
        if not isinstance(response_format, dict):
            raise _bad("must be an object", "response_format")
        kind = response_format.get("type")
        if kind == "json_object":
            st.grammar, st.json_answer = _grammar(None, "response_format"), True
        elif kind == "json_schema":
            spec = response_format.get("json_schema")
            if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
                raise _bad("needs an object with a schema", "response_format.json_schema")
            st.grammar = _grammar(spec["schema"], "response_format.json_schema.schema")
            st.json_answer, st.schema = True, spec["schema"]
        elif kind != "text":
            raise _bad('type must be "text", "json_object" or "json_schema"', "response_format")
    if tools is None:
        if tool_choice not in (None, "none"):
            raise _bad("needs tools", "tool_choice")
        return st
    st.tools = _tools(tools)
    named = None
    if tool_choice is None or tool_choice in ("auto", "none", "required"):
        st.choice = tool_choice or "auto"
    elif isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        named = (tool_choice.get("function") or {}).get("name")
        if named not in st.names:
            raise _bad(f"names no tool given in tools ({', '.join(st.names)})", "tool_choice")
        st.choice = "required"
    else:
        raise _bad('must be "none", "auto", "required" or a function', "tool_choice")
    if st.choice == "none":
        st.tools = []
    elif st.choice == "required":
        if st.grammar is not None:
            raise _bad("a required tool call cannot also be a response format", "response_format")
        calls = [t["function"] for t in st.tools if named in (None, t["function"]["name"])]
        schema = {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"name": {"const": f["name"]}, "arguments": f["parameters"]},
                    "required": ["name", "arguments"],
                }
                for f in calls
            ]
        }
        st.grammar = _grammar(schema, "tools")
    return st


def renders_tools(render: Any, messages: list[dict[str, Any]], tools: list[dict]) -> bool:
    """Whether the chat template shows ``tools`` (rendering with them changes the prompt)."""
    try:
        return render(messages, tools=tools) != render(messages)
    except Exception:
        return False


def with_tools_message(messages: list[dict[str, Any]], tools: list[dict]) -> list[dict]:
    """``messages`` with the tools described in the system message (``FALLBACK``)."""
    text = FALLBACK + "\n".join(json.dumps(t["function"]) for t in tools)
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = f"{first.get('content') or ''}\n\n{text}".lstrip()
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def parse_calls(content: str, st: Structure) -> list[dict[str, Any]] | None:
    """The tool calls an answer makes, in OpenAI's shape, or None (a prose answer). With a
    grammar the whole answer is one call; else each ``<tool_call>`` block must parse and
    name a given tool, or the answer stays prose."""
    if not st.tools:
        return None
    texts = [content] if st.choice == "required" else _CALL.findall(content)
    if not texts:
        return None
    calls = []
    for text in texts:
        try:
            call = json.loads(text)
        except ValueError:
            return None
        if (
            not isinstance(call, dict)
            or call.get("name") not in st.names
            or not isinstance(call.get("arguments", {}), dict)
        ):
            return None
        params = next(
            t["function"]["parameters"] for t in st.tools if t["function"]["name"] == call["name"]
        )
        call["arguments"] = clamp(call.get("arguments", {}), params)
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": json.dumps(call.get("arguments", {}), ensure_ascii=False),
                },
            }
        )
    return calls


def fitted(content: str, st: Structure) -> str:
    """A JSON-schema answer with its numbers inside the schema's bounds (unchanged if they
    were, or if it does not parse: a cut answer stays as cut)."""
    if st.schema is None:
        return content
    try:
        value = json.loads(content)
    except ValueError:
        return content
    kept = clamp(value, st.schema)
    return content if kept == value else json.dumps(kept, ensure_ascii=False)


def may_be_call(text: str) -> bool:
    """Whether streamed content so far may still turn out to be a tool call (held back)."""
    head = text.lstrip()
    return head.startswith("<tool_call>") or "<tool_call>".startswith(head)


if __name__ == "__main__":
    print(_grammar(json.loads(sys.argv[1]) if len(sys.argv) > 1 else None, "schema"))
