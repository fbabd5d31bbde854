"""Arguments for a tool the mock has never seen, made from its declared parameters.

A JSON Schema in (a Responses API function's `parameters`, or the `params` of a local function
signature, read as one), a value that fits it out: every required property, valid
types, enum members, nested objects and arrays, bounds kept. Deterministic: the same schema and
seed give the same value.
"""

from __future__ import annotations

import math
import random
import string
from typing import Any

JSON = Any
MAX_DEPTH = 8  # schemas that refer to themselves stop here


def arguments_for(schema: JSON, seed: int, tool: str) -> JSON:
    """A value for `schema`, the same for the same (seed, tool)."""
    return _value(schema if isinstance(schema, dict) else {}, random.Random(f"{seed}:{tool}"), 0)


def signature_schema(signature: dict[str, JSON]) -> dict[str, JSON]:
    """A local function signature's `params: [{name, required, type: {type, description}}]` as
    JSON Schema (docs/protocol.md, "Local tool calls")."""
    properties: dict[str, JSON] = {}
    required: list[str] = []
    for param in signature.get("params") or []:
        if not isinstance(param, dict) or not isinstance(param.get("name"), str):
            continue
        kind = param.get("type")
        properties[param["name"]] = kind if isinstance(kind, dict) else {"type": "string"}
        if param.get("required"):
            required.append(param["name"])
    return {"type": "object", "properties": properties, "required": required}


def _value(schema: dict[str, JSON], rng: random.Random, depth: int) -> JSON:
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return rng.choice(enum)
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key) or [] if isinstance(o, dict)]
        if options:
            return _value(options[0], rng, depth)
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the first that is not null
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if depth >= MAX_DEPTH:
        return None if kind not in ("object", "array") else ({} if kind == "object" else [])
    if kind == "object":
        return _object(schema, rng, depth)
    if kind == "array":
        found = schema.get("items")
        items: dict[str, JSON] = found if isinstance(found, dict) else {}
        low = int(_number(schema.get("minItems"), 1))
        high = max(low, min(int(_number(schema.get("maxItems"), low + 1)), low + 2))
        return [_value(items, rng, depth + 1) for _ in range(rng.randint(low, high))]
    if kind == "integer":
        lowest, highest = _bounds(schema, 0, 100)
        return rng.randint(int(lowest), int(highest))
    if kind == "number":  # a whole number: clients often read "number" as an integer type
        lowest, highest = _bounds(schema, 0, 100)
        return rng.randint(math.ceil(lowest), max(math.ceil(lowest), math.floor(highest)))
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _text(schema, rng)


def _object(schema: dict[str, JSON], rng: random.Random, depth: int) -> dict[str, JSON]:
    found = schema.get("properties")
    properties: dict[str, JSON] = found if isinstance(found, dict) else {}
    listed = schema.get("required")
    required = [r for r in listed if isinstance(r, str)] if isinstance(listed, list) else []
    # Every required property, and the optional ones too (a strict schema lists them all).
    names = list(dict.fromkeys([*required, *properties]))
    out: dict[str, JSON] = {}
    for name in names:
        child = properties.get(name)
        out[name] = _value(child if isinstance(child, dict) else {}, rng, depth + 1)
    return out


def _bounds(schema: dict[str, JSON], low: float, high: float) -> tuple[float, float]:
    lowest = _number(schema.get("minimum", schema.get("exclusiveMinimum")), low)
    highest = _number(schema.get("maximum", schema.get("exclusiveMaximum")), max(high, lowest + 1))
    return lowest, max(lowest, highest)


def _number(value: object, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return default


def _text(schema: dict[str, JSON], rng: random.Random) -> str:
    fmt = schema.get("format")
    if fmt == "date":
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if fmt == "date-time":
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T12:00:00Z"
    if fmt == "email":
        return f"user{rng.randint(1, 999)}@example.com"
    if fmt in ("uri", "url"):
        return f"https://example.com/{rng.randint(1, 999)}"
    low = int(_number(schema.get("minLength"), 3))
    high = max(low, min(int(_number(schema.get("maxLength"), low + 12)), low + 12))
    word = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(low, high)))
    return word
