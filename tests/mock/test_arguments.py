"""convtap.mock.arguments: values that fit the schema they were made from."""

from __future__ import annotations

from typing import Any

import pytest
from convtap.mock.arguments import arguments_for
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
