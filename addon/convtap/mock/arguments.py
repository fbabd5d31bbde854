"""Arguments for a tool the mock has never seen, made from its declared parameters.

A JSON Schema in (a Responses API function's `parameters`, or the `params` of a local function
signature, read as one), a value that fits it out: every required property, valid
types, enum members, nested objects and arrays, bounds kept. Deterministic: the same schema and
seed give the same value.

What a schema can make the mock generate is capped (docs/commands.md, "Generated arguments"):
`MAX_ITEMS` items an array, `MAX_LENGTH` characters a string, `MAX_PROPERTIES` properties an
object, `MAX_DEPTH` levels, and `MAX_SIZE` characters of JSON in all. A schema that asks for more
(`minItems: 5000000`) gets a value within the caps, which then does not fit it, and the mock says
so in one line on stderr: it never spends more than the caps' worth of time or memory on a call.
"""

from __future__ import annotations

import json
import logging
import math
import random
import string
from dataclasses import dataclass, field
from typing import Any

JSON = Any
MAX_DEPTH = 8  # levels of nesting (schemas that refer to themselves stop here)
MAX_ITEMS = 64  # items of one array
MAX_LENGTH = 4096  # characters of one string
MAX_PROPERTIES = 64  # properties of one object
MAX_SIZE = 64 * 1024  # characters of the whole value as JSON, about

log = logging.getLogger(__name__)


def arguments_for(schema: JSON, seed: int, tool: str) -> JSON:
    """A value for `schema`, the same for the same (seed, tool); within the caps, said on stderr
    when the schema asked for more."""
    maker = _Maker(random.Random(f"{seed}:{tool}"))
    value = maker.value(schema if isinstance(schema, dict) else {}, 0)
    if maker.capped:
        said = ", ".join(maker.capped[:3])
        log.warning("convtap mock: the arguments made for %s are capped (%s): its schema asks "
                    "for more than the mock generates", tool, said)  # fmt: skip
    return value


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


@dataclass
class _Maker:
    """One value's making: its random numbers, the characters left of `MAX_SIZE`, and which
    caps the schema ran into."""

    rng: random.Random
    left: int = MAX_SIZE
    capped: list[str] = field(default_factory=list)

    def cap(self, what: str) -> None:
        if what not in self.capped:
            self.capped.append(what)

    def value(self, schema: dict[str, JSON], depth: int) -> JSON:
        if "const" in schema:
            return self.given(schema["const"])
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return self.given(self.rng.choice(enum))
        kind = schema.get("type")
        if isinstance(kind, list):  # ["string", "null"]: the first that is not null
            kind = next((k for k in kind if k != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in schema else "string"
        if depth >= MAX_DEPTH:
            self.cap(f"depth {MAX_DEPTH}")
            return None if kind not in ("object", "array") else ({} if kind == "object" else [])
        for key in ("anyOf", "oneOf", "allOf"):
            options = schema.get(key)
            if isinstance(options, list) and options and isinstance(options[0], dict):
                return self.value(options[0], depth + 1)
        self.left -= 8  # a number, a boolean, or the punctuation around the value
        if kind == "object":
            return self.object(schema, depth)
        if kind == "array":
            return self.array(schema, depth)
        if kind == "integer":
            lowest, highest = _bounds(schema, 0, 100)
            return self.rng.randint(int(lowest), int(highest))
        if kind == "number":  # a whole number: clients often read "number" as an integer type
            lowest, highest = _bounds(schema, 0, 100)
            return self.rng.randint(math.ceil(lowest), max(math.ceil(lowest), math.floor(highest)))
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        return self.text(schema)

    def given(self, value: JSON) -> JSON:
        """A value the schema names (as large as the request that carried it)."""
        self.left -= len(json.dumps(value))
        return value

    def object(self, schema: dict[str, JSON], depth: int) -> dict[str, JSON]:
        found = schema.get("properties")
        properties: dict[str, JSON] = found if isinstance(found, dict) else {}
        listed = schema.get("required")
        required = [r for r in listed if isinstance(r, str)] if isinstance(listed, list) else []
        # Every required property, and the optional ones too (a strict schema lists them all),
        # as many as the caps allow.
        names = list(dict.fromkeys([*required[: MAX_PROPERTIES + 1], *properties]))
        out: dict[str, JSON] = {}
        for name in names:
            if len(out) >= MAX_PROPERTIES or self.left < len(name):
                if name in required:
                    self.cap(f"{MAX_PROPERTIES} properties" if len(out) >= MAX_PROPERTIES
                             else f"{MAX_SIZE} characters")  # fmt: skip
                break
            self.left -= len(name) + 4
            child = properties.get(name)
            out[name] = self.value(child if isinstance(child, dict) else {}, depth + 1)
        return out

    def array(self, schema: dict[str, JSON], depth: int) -> list[JSON]:
        found = schema.get("items")
        items: dict[str, JSON] = found if isinstance(found, dict) else {}
        low = max(0, int(_number(schema.get("minItems"), 1)))
        if low > MAX_ITEMS:
            self.cap(f"{MAX_ITEMS} items")
            low = MAX_ITEMS
        high = max(low, min(int(_number(schema.get("maxItems"), low + 1)), low + 2, MAX_ITEMS))
        out: list[JSON] = []
        for _ in range(self.rng.randint(low, high)):
            if self.left <= 0:
                if len(out) < low:
                    self.cap(f"{MAX_SIZE} characters")
                break
            out.append(self.value(items, depth + 1))
        return out

    def text(self, schema: dict[str, JSON]) -> str:
        rng = self.rng
        fmt = schema.get("format")
        if fmt == "date":
            return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        if fmt == "date-time":
            return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T12:00:00Z"
        if fmt == "email":
            return f"user{rng.randint(1, 999)}@example.com"
        if fmt in ("uri", "url"):
            return f"https://example.com/{rng.randint(1, 999)}"
        low = max(0, int(_number(schema.get("minLength"), 3)))
        high = max(low, min(int(_number(schema.get("maxLength"), low + 12)), low + 12))
        length = rng.randint(low, high)
        room = min(MAX_LENGTH, max(0, self.left))
        if length > room:
            self.cap(f"{MAX_LENGTH} characters a string" if room == MAX_LENGTH
                     else f"{MAX_SIZE} characters")  # fmt: skip
            length = room
        self.left -= length
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(length))


def _bounds(schema: dict[str, JSON], low: float, high: float) -> tuple[float, float]:
    lowest = _number(schema.get("minimum", schema.get("exclusiveMinimum")), low)
    highest = _number(schema.get("maximum", schema.get("exclusiveMaximum")), max(high, lowest + 1))
    return lowest, max(lowest, highest)


def _number(value: object, default: float) -> float:
    """A schema's number, or `default` for anything else (a string, NaN, 1e400)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    try:
        number = float(value)
    except OverflowError:
        return default
    return number if math.isfinite(number) else default
