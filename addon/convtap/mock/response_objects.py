"""The Responses API's objects as the mock sends them: the response, its output items and the
event sequence that streams it, each with every field the real API sends (null when unset), so
that a client sees what production sends (docs/protocol.md, "What the mock sends").

Two oracles pin the fields (`tests/mock/test_oracles.py`): the official `openai` package's
models (every field of `Response`, of each output item and of each event present, not only
parseable) and the Open Responses spec's (`openresponses-types`, whose `ResponseResource`
requires its fields). Where the two differ the mock sends the union.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from convtap.wire.sse import SSEEvent, format_event

JSON = Any


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def sse_event(obj: dict[str, JSON]) -> str:
    return format_event(SSEEvent(str(obj["type"]), json.dumps(obj, ensure_ascii=False)))


def function_call(name: str, arguments: str, namespace: str | None = None) -> dict[str, JSON]:
    return {"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"),
            "name": name, "namespace": namespace, "arguments": arguments,
            "status": "completed", "caller": None, "async": None}  # fmt: skip


def custom_tool_call(name: str, text: str, namespace: str | None = None) -> dict[str, JSON]:
    return {"type": "custom_tool_call", "id": new_id("ctc_"), "call_id": new_id("call_"),
            "name": name, "namespace": namespace, "input": text, "status": "completed",
            "caller": None, "async": None}  # fmt: skip


def tool_search_call(arguments: dict[str, JSON]) -> dict[str, JSON]:
    return {"type": "tool_search_call", "id": new_id("tsc_"), "call_id": new_id("call_"),
            "execution": "client", "arguments": arguments, "status": "completed",
            "created_by": None}  # fmt: skip


def message(text: str) -> dict[str, JSON]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "message", "id": new_id("msg_"), "role": "assistant",
            "status": "completed", "content": [part], "phase": None}  # fmt: skip


def normalised_tools(tools: JSON) -> list[JSON]:
    """The request's tools as the server echoes them: a function tool says `strict` (the API
    defaults it to true) and `parameters` (null when the client gave none), a function inside a
    namespace likewise."""
    if not isinstance(tools, list):
        return []
    return [_normalised(tool) for tool in tools]


def _normalised(tool: JSON) -> JSON:
    if not isinstance(tool, dict):
        return tool
    if tool.get("type") == "function":
        return {"description": None, "parameters": None, "strict": True, **tool}
    if tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
        return {**tool, "tools": [_normalised(inner) for inner in tool["tools"]]}
    return tool


def _given(body: dict[str, JSON], key: str, kind: type | tuple[type, ...], default: JSON) -> JSON:
    """A request field echoed when it has the type the response field has, else the default
    (a value of the wrong type is refused before an answer is made)."""
    value = body.get(key)
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        return default
    return value if isinstance(value, kind) else default


def response_object(
    response_id: str, body: dict[str, JSON], output: list[dict[str, JSON]], previous: JSON
) -> dict[str, JSON]:
    """A completed response object with every field the real API sends."""
    words = sum(len(json.dumps(item)) for item in output) // 4
    conversation = body.get("conversation")
    if isinstance(conversation, str):
        conversation = {"id": conversation}
    now = int(time.time())
    return {
        "id": response_id, "object": "response", "created_at": now, "completed_at": now,
        "status": "completed", "background": _given(body, "background", bool, False),
        "error": None, "incomplete_details": None,
        "instructions": _given(body, "instructions", (str, list), None),
        "max_output_tokens": _given(body, "max_output_tokens", int, None),
        "max_tool_calls": _given(body, "max_tool_calls", int, None),
        "model": _given(body, "model", str, "gpt-5.1"), "output": output,
        "parallel_tool_calls": _given(body, "parallel_tool_calls", bool, True),
        "previous_response_id": previous if isinstance(previous, str) else None,
        "conversation": conversation if isinstance(conversation, dict) else None,
        "prompt": _given(body, "prompt", dict, None),
        "prompt_cache_key": _given(body, "prompt_cache_key", str, None),
        "prompt_cache_retention": _given(body, "prompt_cache_retention", str, None),
        "prompt_cache_options": None, "prompt_cache_diagnostics": None,
        "reasoning": {"context": None, "effort": None, "generate_summary": None, "mode": None,
                      "summary": None, **_given(body, "reasoning", dict, {})},
        "safety_identifier": _given(body, "safety_identifier", str, None),
        "service_tier": _given(body, "service_tier", str, "default"),
        "store": _given(body, "store", bool, True),
        "temperature": _given(body, "temperature", (int, float), 1.0),
        "top_p": _given(body, "top_p", (int, float), 1.0),
        "presence_penalty": _given(body, "presence_penalty", (int, float), 0.0),
        "frequency_penalty": _given(body, "frequency_penalty", (int, float), 0.0),
        "text": {"format": {"type": "text"}, "verbosity": "medium",
                 **_given(body, "text", dict, {})},
        "tool_choice": _given(body, "tool_choice", (str, dict), "auto"),
        "tools": normalised_tools(body.get("tools")),
        "top_logprobs": _given(body, "top_logprobs", int, 0),
        "truncation": _given(body, "truncation", str, "disabled"),
        "usage": {"input_tokens": 40,
                  "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0,
                                           "cache_write_tokens_details": None},
                  "output_tokens": words, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 40 + words},
        "user": _given(body, "user", str, None),
        "metadata": _given(body, "metadata", dict, {}),
        "tool_usage": None, "moderation": None, "access_programs": None, "image": None,
        "input_transformations": None,
    }  # fmt: skip


def events(response: dict[str, JSON]) -> list[dict[str, JSON]]:
    """The real API's event sequence for a response, each with its sequence_number."""
    found: list[dict[str, JSON]] = []

    def add(kind: str, **fields: JSON) -> None:
        found.append({"type": kind, "sequence_number": len(found), **fields})

    start = {**response, "status": "in_progress", "completed_at": None, "output": [],
             "usage": None}  # fmt: skip
    add("response.created", response=start)
    add("response.in_progress", response=start)
    for index, item in enumerate(response["output"]):
        _item_events(add, index, item)
    add("response.completed", response=response)
    return found


def _item_events(add: Any, index: int, item: dict[str, JSON]) -> None:
    where = {"output_index": index, "item_id": item["id"]}
    kind = item["type"]
    if kind == "function_call":
        add("response.output_item.added", output_index=index,
            item={**item, "arguments": "", "status": "in_progress"})  # fmt: skip
        text = item["arguments"]
        for n in range(0, len(text), 7):
            add("response.function_call_arguments.delta", **where, delta=text[n : n + 7])
        add("response.function_call_arguments.done", **where, arguments=text)
    elif kind == "custom_tool_call":
        add("response.output_item.added", output_index=index,
            item={**item, "input": "", "status": "in_progress"})  # fmt: skip
        add("response.custom_tool_call_input.delta", **where, delta=item["input"])
        add("response.custom_tool_call_input.done", **where, input=item["input"])
    elif kind == "message":
        add("response.output_item.added", output_index=index,
            item={**item, "status": "in_progress", "content": []})  # fmt: skip
        part = item["content"][0]
        place = {**where, "content_index": 0}
        add("response.content_part.added", **place, part={**part, "text": ""})
        text = part["text"]
        for n in range(0, len(text), 8):
            add("response.output_text.delta", **place, delta=text[n : n + 8], logprobs=[])
        add("response.output_text.done", **place, text=text, logprobs=[])
        add("response.content_part.done", **place, part=part)
    else:
        add("response.output_item.added", output_index=index, item=item)
    add("response.output_item.done", output_index=index, item=item)


def _as_output(item: dict[str, JSON]) -> dict[str, JSON]:
    """A user message of an input as the server lists it back: an item with an id, a status and
    its content as parts (a string becomes one `input_text`)."""
    content = item.get("content")
    parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
    return {"type": "message", "id": item.get("id") or new_id("msg_"), "status": "completed",
            "role": "user", "content": parts if isinstance(parts, list) else []}  # fmt: skip


def compacted(response_id: str, output: list[dict[str, JSON]]) -> dict[str, JSON]:
    """`POST /v1/responses/compact`'s answer: the window compacted into one compaction item
    (its `encrypted_content` opaque, as the server's is) after the user's own messages."""
    kept = [_as_output(i) for i in output if i.get("role") == "user" and i.get("type", "message")
            == "message"]  # fmt: skip
    # no `created_by`: the spec's schema takes a string or nothing, never null
    summary = {"type": "compaction", "id": new_id("cmp_"),
               "encrypted_content": "gAAAAA" + secrets.token_urlsafe(32)}  # fmt: skip
    words = sum(len(json.dumps(item)) for item in output) // 4
    return {
        "id": response_id, "object": "response.compaction", "created_at": int(time.time()),
        "output": [*kept, summary], "image": None,
        "usage": {"input_tokens": words, "input_tokens_details": {"cached_tokens": 0,
                  "cache_write_tokens": 0, "cache_write_tokens_details": None},
                  "output_tokens": 16, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": words + 16},
    }  # fmt: skip
