"""The typed messages on the data path: each finished message checked once against its model.

The decoders work on plain dicts (fast, and whatever the server sends survives). Once a message
is finished (an f/conversation message whose `status` is no longer `in_progress` when a leg of
its turn ends, a Responses item of `response.output_item.done`), it is validated once against
its pydantic model (`convtap.models`), in strict mode: a known field holding a value of another
JSON type (a number where the model has a string, an object where it has a list, ...) is a
decode error of kind `wrong-type`, whose detail starts with the field's path in the model
(`content.parts.0: a string expected, got an integer`), and decoding goes on with the value as
it came.

The models (and pydantic) are loaded when the first finished message or item is checked, not
when the decoders are: `convtap decode` of a stream that finishes none starts without them.

What is not a wrong type is left to `convtap diff --against-schemas`, which shows drift from
the models: an unknown field (the models keep them, `extra="allow"`), a missing one, a string
outside a model's set of values (a new status, a new `content_type`), and everything under an
object whose kind (`content_type`, `type`) the model does not know (a `multimodal_text`
content's parts are not the text content's).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

# The Responses items a model describes, by `type`, and the model's name in `convtap.models`
# (the others are kept as they came).
ITEM_MODELS = {
    "function_call": "FunctionCall",
    "custom_tool_call": "CustomToolCall",
    "tool_search_call": "ToolSearchCall",
}
# pydantic's error types that say "a value of another type" (its `*_type` errors and these).
_OTHER_TYPE = frozenset({"none_required", "is_instance_of"})
_KIND_KEYS = frozenset({"content_type", "type"})  # a value that says what its object is
# What each of pydantic's `<name>_type` errors expected, in JSON's words.
_EXPECTED = {"string_type": "a string", "int_type": "an integer", "float_type": "a number",
             "bool_type": "a boolean", "dict_type": "an object", "model_type": "an object",
             "model_attributes_type": "an object", "list_type": "an array",
             "none_required": "null"}  # fmt: skip
MAX_REPORTED = 8  # wrong types reported per message (the first ones, in the model's order)


def wrong_types(model: type[BaseModel], value: dict[str, Any]) -> list[str]:
    """Each known field of `value` holding a value of the wrong type for `model`: its path, what
    the model expects and what it holds (`content.parts.0: a string expected, got an integer`);
    none when it validates (unknown fields and the rest of drift are not errors here)."""
    from pydantic import ValidationError

    try:
        model.model_validate(value, strict=True)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
    else:
        return []
    unknown_kinds = [
        e["loc"][:-1] for e in errors if e["type"] == "literal_error" and e["loc"][-1] in _KIND_KEYS
    ]
    found: dict[str, list[str]] = {}
    for error in errors:
        kind, loc = error["type"], error["loc"]
        if not (kind.endswith("_type") or kind in _OTHER_TYPE):
            continue
        if any(loc[: len(prefix)] == prefix for prefix in unknown_kinds):
            continue
        expected = found.setdefault(_path(value, loc), [])
        word = _EXPECTED.get(kind, kind)
        if word not in expected:
            expected.append(word)
    return [f"{path}: {' or '.join(expected)} expected, got {_json_type(value, path)}"
            for path, expected in list(found.items())[:MAX_REPORTED]]  # fmt: skip


def _path(value: Any, loc: tuple[int | str, ...]) -> str:
    """The path of `loc` in the value itself: the keys and indexes it goes through, without
    the names pydantic gives a union's members (`create_time.int` is `create_time`)."""
    steps: list[str] = []
    for step in loc:
        if isinstance(value, dict):
            if step not in value:
                continue  # a union member's name: the value is the same one
            value = value[step]
        elif isinstance(value, list) and isinstance(step, int) and step < len(value):
            value = value[step]
        else:
            break
        steps.append(str(step))
    return ".".join(steps) or "(the value)"


def _json_type(value: Any, path: str) -> str:
    """The JSON type of the value at `path` (as `_path` writes it)."""
    for step in path.split(".") if path != "(the value)" else ():
        value = value[int(step)] if isinstance(value, list) else value[step]
    if value is None or isinstance(value, bool):
        return "null" if value is None else "a boolean"
    for kind, word in ((str, "a string"), (int, "an integer"), (float, "a number"),
                       (dict, "an object"), (list, "an array")):  # fmt: skip
        if isinstance(value, kind):
            return word
    return type(value).__name__


def message_errors(message: dict[str, Any]) -> list[str]:
    """`wrong_types` of a finished f/conversation message, each naming the message."""
    return [f"{detail} (message {message.get('id')})"
            for detail in wrong_types(_model("ConversationMessage"), message)]  # fmt: skip


def item_errors(item: dict[str, Any]) -> list[str]:
    """`wrong_types` of a finished Responses item of a type a model describes, each naming
    the item."""
    name = ITEM_MODELS.get(str(item.get("type")))
    if name is None:
        return []
    model = _model(name)
    return [
        f"{detail} ({item.get('type')} {item.get('id')})" for detail in wrong_types(model, item)
    ]


@functools.cache
def _model(name: str) -> type[BaseModel]:
    """The model `name` of `convtap.models`, loaded (with pydantic) on first use."""
    import convtap.models

    model: type[BaseModel] = getattr(convtap.models, name)
    return model
