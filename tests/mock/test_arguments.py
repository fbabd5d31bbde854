"""convtap.mock.arguments: values that fit the schema they were made from."""

from __future__ import annotations

import json
from typing import Any

import pytest
from convtap.mock.arguments import MAX_ITEMS, MAX_LENGTH, MAX_SIZE, arguments_for
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    {"type": "object", "additionalProperties": False, "required": ["unit", "days", "exact"],
     "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 14},
                    "exact": {"type": "boolean"}, "ratio": {"type": "number", "maximum": 1}}},
    {"type": "object", "required": ["items"], "properties": {"items": {"type": "array",
     "minItems": 2, "items": {"type": "object", "required": ["sku", "qty"], "properties": {
         "sku": {"type": "string", "minLength": 5, "maxLength": 8},
         "qty": {"type": ["integer", "null"], "minimum": 1},
         "tags": {"type": "array", "items": {"type": "string"}}}}}}},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
     "mode": {"const": "fast"}, "choice": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
     "nested": {"type": "object", "properties": {"deep": {"type": "object", "properties": {
         "x": {"type": "number", "minimum": -5, "maximum": 5}}}}}}},
]  # fmt: skip


@pytest.mark.parametrize("schema", SCHEMAS)
@given(seed=st.integers(0, 10_000))
def test_every_value_fits_its_schema(schema: dict[str, Any], seed: int) -> None:
    value = arguments_for(schema, seed, "tool")
    Draft202012Validator(schema).validate(value)
    assert arguments_for(schema, seed, "tool") == value  # the same seed, the same value


HUGE: list[dict[str, Any]] = [
    {"type": "array", "minItems": 5_000_000, "items": {"type": "string", "minLength": 100}},
    {"type": "string", "minLength": 20_000_000},
    {"type": "object", "required": [f"p{n}" for n in range(10_000)],
     "properties": {f"p{n}": {"type": "string", "minLength": 4000} for n in range(10_000)}},
    {"type": "array", "minItems": 64, "items": {"type": "array", "minItems": 64, "items": {
        "type": "array", "minItems": 64, "items": {"type": "array", "minItems": 64}}}},
    {"type": "array", "minItems": 64, "items": {"const": "x" * 100_000}},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": float("nan")},
                                      "m": {"type": "number", "maximum": 10**400}}},
]  # fmt: skip


@pytest.mark.parametrize("schema", HUGE)
def test_what_a_schema_asks_for_is_capped(schema: dict[str, Any]) -> None:
    value = arguments_for(schema, 1, "tool")
    assert len(json.dumps(value)) <= MAX_SIZE + 100_000  # one value the schema itself names


def test_a_schema_within_the_caps_is_met_exactly() -> None:
    schema = {"type": "array", "minItems": MAX_ITEMS, "items": {"type": "string",
              "minLength": MAX_LENGTH // 8, "maxLength": MAX_LENGTH // 8}}  # fmt: skip
    value = arguments_for(schema, 1, "tool")
    Draft202012Validator(schema).validate(value)
