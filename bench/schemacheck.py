"""A small JSON-schema validator, apart from the daemon's grammar: what ``bench.tools`` holds
the daemon's tool arguments and JSON answers to. It knows the features the benchmark's data
use (type, properties, required, enum, items, minimum, maximum, description); any other keyword
in a schema is an error in the data.

Run alone to check the benchmark's data files::

    .venv/bin/python -m bench.schemacheck
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

KEYWORDS = {"type", "properties", "required", "enum", "items", "description", "minimum", "maximum"}


def _is(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "number":
        return number
    if kind == "integer":
        return number and float(value).is_integer()
    raise ValueError(f"schema type not supported here: {kind!r}")


def schema_errors(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """Where ``value`` breaks ``schema`` (empty: it fits); a keyword outside ``KEYWORDS`` raises."""
    unknown = set(schema) - KEYWORDS
    if unknown:
        raise ValueError(f"{where}: schema keywords not supported here: {sorted(unknown)}")
    kind = schema.get("type")
    if kind is not None and not _is(value, kind):
        return [f"{where}: expected {kind}, got {type(value).__name__}"]
    errors = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: {value} > maximum {schema['maximum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{where}: missing {k!r}" for k in schema.get("required", []) if k not in value]
        for key, item in value.items():
            if key in props:
                errors += schema_errors(item, props[key], f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{where}[{i}]")
    return errors


def extra_keys(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """Object keys the schema does not name (allowed by JSON Schema, but made up)."""
    out = []
    if isinstance(value, dict) and "properties" in schema:
        props = schema["properties"]
        for key, item in value.items():
            if key not in props:
                out.append(f"{where}.{key}")
            else:
                out += extra_keys(item, props[key], f"{where}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out += extra_keys(item, schema["items"], f"{where}[{i}]")
    return out


def check_schemas(tool_requests: list[dict], json_requests: list[dict]) -> None:
    """Fail early on a schema keyword the validator does not know (a defect in the data)."""
    for r in tool_requests:
        for t in r["tools"]:
            _walk(t["function"]["parameters"], f"{r['id']}:{t['function']['name']}")
    for r in json_requests:
        if r["response_format"]["type"] == "json_schema":
            _walk(r["response_format"]["json_schema"]["schema"], r["id"])


def _walk(schema: dict[str, Any], where: str) -> None:
    unknown = set(schema) - KEYWORDS
    if unknown:
        raise ValueError(f"{where}: schema keywords not supported here: {sorted(unknown)}")
    if "type" in schema:
        _is(None, schema["type"])  # raises for an unknown type
    for key, sub in schema.get("properties", {}).items():
        _walk(sub, f"{where}.{key}")
    if "items" in schema:
        _walk(schema["items"], f"{where}[]")


# --- requests ----------------------------------------------------------------------------


if __name__ == "__main__":
    data = Path(__file__).parent / "data"

    def rows(name: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (data / name).read_text().splitlines() if line]

    check_schemas(rows("tool_requests.jsonl"), rows("json_requests.jsonl"))
    print("the schemas of the tool and JSON requests use only the known keywords")
