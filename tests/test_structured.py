"""Tools and structured output through the real daemon on SmolLM2 (its template shows no
tools: the fallback format) and on the tiny Qwen3 (a Qwen3-style template that renders tools,
calls and results) with the official OpenAI client: required and named calls parse
and fit their schema, stream as tool_calls deltas, a tool's result becomes the turn's next
state; JSON mode and JSON schemas parse; what clawd cannot honour is a 400 naming the field.
Were these fields dropped, the client would get prose and believe it was understood."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from clawd.serving import structured
from fixtures.daemon import RunningDaemon, start_daemon

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}},
    },
}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]


@pytest.fixture(scope="module")
def daemon(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    d = start_daemon(smollm2_gguf, tmp_path_factory.mktemp("structured-home"))
    yield d
    d.stop()


def test_a_required_call_parses_fits_its_schema_and_its_result_is_the_next_state(
    daemon: RunningDaemon, client: openai.OpenAI
) -> None:
    for seed in (1, 2, 3):
        r = client.chat.completions.create(
            model="clawd",
            messages=ASK,
            tools=[WEATHER, TIME],
            tool_choice="required",
            max_tokens=80,
            seed=seed,
        )
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        [call] = choice.message.tool_calls
        args = json.loads(call.function.arguments)
        if call.function.name == "get_weather":
            assert isinstance(args["city"], str) and args["unit"] in ("celsius", "fahrenheit")
        else:
            assert call.function.name == "get_time"
    follow = [
        *ASK,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "18 C and sunny"},
    ]
    after = client.chat.completions.create(model="clawd", messages=follow, max_tokens=8)
    with daemon.client() as c:
        cid = c.get("/v1/conversations").json()["data"][0]["id"]
        turns = c.get(f"/v1/conversations/{cid}").json()["turns"]
    assert [t["id"] for t in turns][-2:] == [r.id, after.id]
    assert turns[-2]["tool_calls"][0]["function"]["name"] == call.function.name
    from clawd.ui.messages import calls_title  # how the TUI shows a stored call

    assert calls_title(turns[-2]["tool_calls"]) == f"called {call.function.name}"
    assert turns[-2]["next_state"] == {"role": "tool", "content": "18 C and sunny"} | {
        k: v for k, v in turns[-2]["next_state"].items() if k not in ("role", "content")
    }


def test_a_named_call_streams_as_tool_call_deltas(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="clawd",
        messages=ASK,
        tools=[WEATHER, TIME],
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        max_tokens=160,  # room for the whole call: a cut one is not a call
        seed=1,
        stream=True,
    )
    chunks = [c for c in stream if c.choices]
    calls = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert [c.function.name for c in calls] == ["get_time"]
    assert isinstance(json.loads(calls[0].function.arguments), dict)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert not any(c.choices[0].delta.content for c in chunks)


def test_json_mode_and_a_json_schema_answer_parse(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    for seed in (1, 2):
        r = client.chat.completions.create(
            model="clawd",
            messages=[{"role": "user", "content": "Invent a person."}],
            response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
            max_tokens=120,
            seed=seed,
        )
        person = json.loads(r.choices[0].message.content)
        assert isinstance(person["name"], str) and isinstance(person["age"], int)
        any_json = client.chat.completions.create(
            model="clawd",
            messages=[{"role": "user", "content": "Three colours as JSON."}],
            response_format={"type": "json_object"},
            max_tokens=300,
            seed=seed,
        )
        text, finish = any_json.choices[0].message.content, any_json.choices[0].finish_reason
        if finish != "length":  # only a cut answer may be unfinished JSON (as OpenAI's)
            assert isinstance(json.loads(text), dict | list), text


def test_an_auto_answer_in_prose_stays_prose(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model="clawd", messages=ASK, tools=[WEATHER], max_tokens=30, seed=1
    )
    message = r.choices[0].message
    if message.tool_calls:  # the model may call; then the call parses
        assert json.loads(message.tool_calls[0].function.arguments) is not None
    else:
        assert message.content and r.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": [{"type": "retrieval"}]}, "tools.0.type"),
        ({"tools": [{"type": "function", "function": {}}]}, "tools.0.function.name"),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "x"}}},
            "tool_choice",
        ),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": "always"}, "tool_choice"),
        ({"response_format": {"type": "xml"}}, "response_format"),
        ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": 1}}}},
            "response_format.json_schema.schema",
        ),
    ],
)
def test_what_cannot_be_honoured_is_a_400_naming_the_field(
    daemon: RunningDaemon, extra: dict, param: str
) -> None:
    with daemon.client() as c:
        r = c.post("/v1/chat/completions", json={"messages": ASK, "max_tokens": 4, **extra})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_calls_parse_only_whole_and_named() -> None:
    form = structured.from_request([WEATHER], None, None)
    ok = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    [call] = structured.parse_calls(ok, form) or []
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    assert structured.parse_calls("It is sunny in Oslo.", form) is None
    assert structured.parse_calls('<tool_call>{"name": "get_weather", "argu', form) is None
    assert structured.parse_calls('<tool_call>{"name": "rm_rf", "arguments": {}}', form) is None
    assert structured.may_be_call("  <tool") and not structured.may_be_call("Sunny")
    assert structured.from_request([WEATHER], "none", None).tools == []


def test_bounds_and_strings_the_grammar_builder_lets_through_are_kept() -> None:
    """Seen in bench/tools.py: a confidence of 101 with maximum 1, a raw newline in a string."""
    schema = {
        "type": "object",
        "properties": {
            "stars": {"type": "integer", "minimum": 1, "maximum": 5},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "notes": {"type": "array", "items": {"type": "number", "minimum": 0}},
            "comment": {"type": "string"},
        },
    }
    form = structured.from_request(
        None, None, {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}
    )
    assert 'stars ::= "1" | "2" | "3" | "4" | "5"' in form.grammar  # a small range: an enum
    assert "\\x00-\\x1F" in form.grammar  # no raw control character inside a string
    fixed = structured.fitted('{"stars": 4, "confidence": 101, "notes": [-2.5, 3]}', form)
    assert json.loads(fixed) == {"stars": 4, "confidence": 1, "notes": [0.0, 3]}
    assert structured.fitted('{"stars": 4, "confi', form) == '{"stars": 4, "confi'  # cut


MODE = {
    "type": "function",
    "function": {
        "name": "set_mode",
        "description": "Switch the editor's mode",
        "parameters": {
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["insert", "normal"]},
                "count": {"type": "integer", "minimum": 0, "maximum": 9},
            },
            "required": ["mode", "count"],
        },
    },
}
READ = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
AGENT = [  # an editor agent's request: its system prompt, a call it made, the tool's result
    {"role": "system", "content": "You are a coding agent inside an editor."},
    {"role": "user", "content": "Open main.py, then switch to insert mode."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "main.py"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "print('hello')"},
]


@pytest.fixture(scope="module")
def qwen3(
    tiny_qwen3_gguf: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[openai.OpenAI]:
    d = start_daemon(tiny_qwen3_gguf, tmp_path_factory.mktemp("structured-qwen3-home"))
    yield openai.OpenAI(base_url=f"{d.url}/v1", api_key=d.token, max_retries=0)
    d.stop()


def test_a_qwen3_template_shows_the_tools_and_an_editor_agent_gets_its_call(
    qwen3: openai.OpenAI, tiny_qwen3_gguf: Path
) -> None:
    """On a model whose template renders tools (Qwen3's way), they go through the template, not
    the fallback; an agent's history with its earlier call and the tool's result renders; a
    named call comes back whole, streamed or not."""
    from clawd.chattemplate import ChatTemplate

    template = ChatTemplate.from_gguf(tiny_qwen3_gguf)
    tools = [READ, MODE, WEATHER]
    assert structured.renders_tools(template.render, AGENT, tools)
    shown = template.render(AGENT, tools=tools)
    assert '"name": "set_mode"' in shown and structured.FALLBACK not in shown
    assert "<tool_response>\nprint('hello')\n</tool_response>" in shown
    named = {"type": "function", "function": {"name": "set_mode"}}
    r = qwen3.chat.completions.create(
        model="clawd", messages=AGENT, tools=tools, tool_choice=named, max_tokens=120, seed=3
    )
    [call] = r.choices[0].message.tool_calls
    args = json.loads(call.function.arguments)
    assert call.function.name == "set_mode" and r.choices[0].finish_reason == "tool_calls"
    assert args["mode"] in ("insert", "normal") and 0 <= args["count"] <= 9
    stream = qwen3.chat.completions.create(
        model="clawd",
        messages=AGENT,
        tools=tools,
        tool_choice=named,
        max_tokens=120,
        seed=4,
        stream=True,
    )
    chunks = [c for c in stream if c.choices]
    calls = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert [c.function.name for c in calls] == ["set_mode"]
    assert set(json.loads(calls[0].function.arguments)) == {"mode", "count"}
    follow = [
        *AGENT,
        r.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "mode: insert"},
    ]
    after = qwen3.chat.completions.create(model="clawd", messages=follow, max_tokens=4)
    assert after.choices[0].finish_reason in ("stop", "length")


def test_a_template_s_tojson_writes_json_as_the_model_was_trained_on() -> None:
    """Keys in their order and `<` as itself, as transformers renders chat templates (Jinja's
    own filter sorts keys and writes \\u003c)."""
    from clawd.chattemplate import ChatTemplate

    shown = ChatTemplate("{{ tool | tojson }}").render([], tool={"name": "f", "about": "<b>"})
    assert shown == '{"name": "f", "about": "<b>"}'
