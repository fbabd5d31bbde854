"""Run in the SDK clients' virtualenv (it holds the pinned `openai` package): reads a JSON list
of `{"kind", "value"}` (kind `event`, `response`, `compaction` or `deleted`) on stdin, validates
each with the SDK's own model, and prints `{"errors": [...], "missing": [...]}`: the objects the
SDK refuses, and every field of a model the SDK knows that the object does not carry (a path),
for the objects, their output items and their content, not the client's own tool definitions.
A compaction's user messages are left out: the API lists them there (its reference: "all user
messages, followed by a single compaction item"), and the SDK types them as assistant messages."""

from __future__ import annotations

import json
import sys
from typing import Any

import openai.types.responses as responses
from pydantic import BaseModel, TypeAdapter

MODELS: dict[str, Any] = {
    "event": TypeAdapter(responses.ResponseStreamEvent),
    "response": TypeAdapter(responses.Response),
    "compaction": TypeAdapter(responses.CompactedResponse),
    "deleted": None,
}
NOT_WALKED = {"tools", "metadata", "arguments", "parameters"}  # what the client itself chose


def missing(model: Any, raw: Any, path: str) -> list[str]:
    """The fields of `model` (a validated SDK object) that `raw` lacks, all the way down."""
    found: list[str] = []
    if isinstance(model, BaseModel) and isinstance(raw, dict):
        for name, info in type(model).model_fields.items():
            key = info.alias or name
            if key not in raw:
                found.append(f"{path}.{key}")
            elif key not in NOT_WALKED:
                found += missing(getattr(model, name), raw[key], f"{path}.{key}")
    elif isinstance(model, list) and isinstance(raw, list):
        for n, (item, value) in enumerate(zip(model, raw, strict=False)):
            found += missing(item, value, f"{path}[{n}]")
    return found


def main() -> None:
    errors: list[str] = []
    gaps: set[str] = set()
    for n, entry in enumerate(json.load(sys.stdin)):
        adapter, value = MODELS[entry["kind"]], entry["value"]
        if adapter is None:
            continue
        if entry["kind"] == "compaction":  # the SDK types its user messages as the assistant's
            value = {**value, "output": [i for i in value["output"] if i["type"] != "message"]}
        try:
            model = adapter.validate_python(value)
        except Exception as exc:  # the SDK refuses it: said, with where
            errors.append(f"{n} {entry['kind']} {value.get('type')}: {exc}"[:600])
            continue
        where = value.get("type") or value.get("object") or entry["kind"]
        gaps.update(missing(model, value, str(where)))
    print(json.dumps({"errors": errors, "missing": sorted(gaps)}))


if __name__ == "__main__":
    main()
