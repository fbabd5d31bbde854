"""What the Responses API's tool models share: a field that may be omitted but never be null
(`Omittable`), a URI kept as sent (`UriString`), the enums several tools use, and the base of a
model with a field named like a Python keyword."""

from __future__ import annotations

import functools
import operator
from typing import Annotated, Any, Literal, TypeAlias, TypeVar, get_args

from pydantic import (
    AfterValidator,
    AnyUrl,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    TypeAdapter,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from convtap.models.conversation import WireModel

_T = TypeVar("_T")


def _not_null(value: Any) -> Any:
    if value is None:
        raise ValueError("may be omitted, but not null")
    return value


class _NotNull:
    """Validate `T | None` as `T`, rejecting an explicit null; absent stays absent.

    The None member stays in the serializer (an unset field is None on the model) but not in the
    validator's errors or in the JSON Schema, which both describe `T` alone.
    """

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        members = [arg for arg in get_args(source) if arg is not type(None)]
        inner = handler.generate_schema(functools.reduce(operator.or_, members))
        return core_schema.no_info_before_validator_function(
            _not_null, core_schema.nullable_schema(inner)
        )

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        generated = handler(schema)
        if "anyOf" not in generated:
            return generated
        branches = [b for b in generated["anyOf"] if b != {"type": "null"}]
        rest = {key: value for key, value in generated.items() if key != "anyOf"}
        return rest | branches[0] if len(branches) == 1 else rest | {"anyOf": branches}


# `field?: T` (no `| null`) in the API reference: may be omitted, never null.
Omittable: TypeAlias = Annotated[_T | None, _NotNull()]

_URL_ADAPTER: TypeAdapter[AnyUrl] = TypeAdapter(AnyUrl)


def _check_uri(value: str) -> str:
    _URL_ADAPTER.validate_python(value)
    return value  # checked, not normalised: the wire string is kept as sent


# "formaturi": an absolute URI, kept verbatim.
UriString: TypeAlias = Annotated[
    str, AfterValidator(_check_uri), Field(json_schema_extra={"format": "uri"})
]

# ── shared enums ─────────────────────────────────────────────────────────────

# "allowed_callers?: Array<"direct" | "programmatic"> | null": the tool invocation context(s).
ToolCaller: TypeAlias = Literal["direct", "programmatic"]
# "memory_limit?: "1g" | "4g" | "16g" | "64g" | null".
MemoryLimit: TypeAlias = Literal["1g", "4g", "16g", "64g"]
# "search_context_size?: "low" | "medium" | "high"".
SearchContextSize: TypeAlias = Literal["low", "medium", "high"]
# "execution: "server" | "client"".
ToolSearchExecution: TypeAlias = Literal["server", "client"]


class _AliasedWire(WireModel):
    """A wire model with a field named like a Python keyword (`async`): dump by alias."""

    model_config = ConfigDict(serialize_by_alias=True)
