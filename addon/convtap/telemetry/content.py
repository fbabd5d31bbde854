"""Message content on spans, when asked for (`--otel-content`, the conventions' opt-in): the
instructions, input and output messages of a chat span and the arguments and result of a tool
span, in the shapes the GenAI conventions give them (`gen_ai.input.messages` and
`gen_ai.output.messages`: a role and its parts, `text`, `tool_call`, `tool_call_response`, or
a part of the item's own type), as JSON text (spans carry no structured attributes yet).

Only what the capture stores is read: request bodies, messages, raw events and calls as they
were redacted before they were written. Nothing unredacted exists to read.
"""

from __future__ import annotations

import json
from typing import Any

import sqlite_utils

from convtap.store.trace_queries import request_body, response_text, turn_messages
from convtap.store.views import AnsweredCall, ModelTurn
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.responses import decode_responses

Parts = list[dict[str, Any]]


def of_call(row: AnsweredCall) -> dict[str, str]:
    """A tool span's arguments and result, as stored."""
    found = {"gen_ai.tool.call.arguments": row.arguments}
    result = loads_or_none(row.result) if row.result else None
    if isinstance(result, dict) and "output" in result:  # a Responses output item: its output
        result = result["output"]
    found["gen_ai.tool.call.result"] = row.result if result is None else _text(result)
    return {key: value for key, value in found.items() if value is not None}


def of_turn(capture: sqlite_utils.Database, row: ModelTurn) -> dict[str, str]:
    """A chat span's instructions, input and output messages, as stored."""
    body = loads_or_none(request_body(capture, row.id) or "")
    body = body if isinstance(body, dict) else {}
    found: dict[str, Any] = {}
    if row.protocol == "f/conversation":
        found["gen_ai.input.messages"] = [_conversation_message(m) for m in _list(body, "messages")]
        found["gen_ai.output.messages"] = [
            {"role": m.role, "parts": [{"type": "text", "content": m.text or ""}]}
            for m in turn_messages(capture, row.id) if m.role == "assistant"
        ]  # fmt: skip
    else:
        if isinstance(body.get("instructions"), str):
            found["gen_ai.system_instructions"] = [
                {"type": "text", "content": body["instructions"]}
            ]
        given = body.get("input")
        items = (
            [{"role": "user", "content": given}] if isinstance(given, str) else _list(body, "input")
        )
        found["gen_ai.input.messages"] = [_item_message(item) for item in items]
        output = _output_items(capture, row)
        if output:
            message = {"role": "assistant", "parts": [p for i in output for p in _parts(i)]}
            if row.finish_reason:
                message["finish_reason"] = row.finish_reason
            found["gen_ai.output.messages"] = [message]
    return {key: json.dumps(value, ensure_ascii=False) for key, value in found.items() if value}


def _list(body: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = body.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _conversation_message(message: dict[str, Any]) -> dict[str, Any]:
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    content = message.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    texts = (
        [p if isinstance(p, str) else _text(p) for p in parts] if isinstance(parts, list) else []
    )
    return {"role": role or "user", "parts": [{"type": "text", "content": t} for t in texts]}


def _item_message(item: dict[str, Any]) -> dict[str, Any]:
    """A Responses input item as a message of the conventions."""
    kind = item.get("type")
    if kind in ("function_call_output", "custom_tool_call_output", "tool_search_output"):
        result = item.get("output", item.get("tools"))
        return {"role": "tool", "parts": [{"type": "tool_call_response",
                "id": item.get("call_id"), "result": result}]}  # fmt: skip
    role = item.get("role") if isinstance(item.get("role"), str) else "assistant"
    return {"role": role, "parts": _parts(item)}


def _parts(item: dict[str, Any]) -> Parts:
    """An item's parts: its text, a call, or the item itself under its own type."""
    kind = item.get("type")
    if kind in ("function_call", "custom_tool_call"):
        arguments = item.get("arguments", item.get("input"))
        if isinstance(arguments, str):
            arguments = loads_or_none(arguments) or arguments
        return [{"type": "tool_call", "id": item.get("call_id"), "name": item.get("name"),
                 "arguments": arguments}]  # fmt: skip
    content = item.get("content")
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list):
        return [{"type": "text", "content": c["text"]} if isinstance(c.get("text"), str)
                else {**c, "type": str(c.get("type"))}
                for c in content if isinstance(c, dict)]  # fmt: skip
    if kind == "reasoning":
        summary = item.get("summary")
        texts = (
            [s.get("text") for s in summary if isinstance(s, dict)]
            if isinstance(summary, list)
            else []
        )
        return [{"type": "reasoning", "content": "\n".join(t for t in texts if isinstance(t, str))}]
    return [{**item, "type": str(kind)}]


def _output_items(capture: sqlite_utils.Database, row: ModelTurn) -> list[dict[str, Any]]:
    """What a Responses turn answered: its stored answer's `output`, else its events decoded."""
    text = response_text(capture, row.id)
    if not text:
        return []
    answer = loads_or_none(text) if text.lstrip().startswith("{") else None
    if isinstance(answer, dict) and isinstance(answer.get("output"), list):
        return [i for i in answer["output"] if isinstance(i, dict)]
    return decode_responses([text.encode("utf-8", "surrogateescape")]).output_items
