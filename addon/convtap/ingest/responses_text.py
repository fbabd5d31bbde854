"""The Responses API for people: an exchange read as a conversation (`convtap decode`'s text, the
mitmproxy content view). Input items and output items, one line each in order: messages with
their role (and `phase`) and text, instructions folded to their first line, reasoning summaries,
calls with their namespace, name, call_id and arguments, outputs with what they answer. And each
frame of WebSocket mode, one line (a create with its items, an event with what it carries).
Pure: values in, lines out. Text is folded to one line and cut at `WIDTH` characters.
"""

from __future__ import annotations

from typing import Any

from convtap.vocab import RESPONSE_CREATE
from convtap.wire.jsonvalue import dumps
from convtap.wire.responses import CLIENT_CALLS, OUTPUTS, qualified_name

WIDTH = 160  # characters of a text shown on one line


def fold(text: object, width: int = WIDTH) -> str:
    """`text` on one line, cut at `width` characters (with `…`)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _text(content: Any) -> str:
    """A message's text: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text")) for p in parts if isinstance(p, dict) and "text" in p)


def item_line(item: Any) -> str:
    """One input or output item as a line of the conversation."""
    if not isinstance(item, dict):
        return f"── {fold(item)}"
    kind = item.get("type") or ("message" if "role" in item else "?")
    if kind == "message":
        phase = f" ({item['phase']})" if isinstance(item.get("phase"), str) else ""
        return f"── {item.get('role', '?')}{phase}: {fold(_text(item.get('content')))}"
    if kind == "reasoning":
        summary = _text(item.get("summary"))
        return f"── reasoning: {fold(summary) if summary else '(no summary)'}"
    if kind in CLIENT_CALLS:
        name = qualified_name(item.get("namespace"), item.get("name"))
        given = item.get("input") if kind == "custom_tool_call" else item.get("arguments")
        caller = item.get("caller")
        by = f" · by {caller.get('type')}" if isinstance(caller, dict) else ""
        shown = given if isinstance(given, str) else dumps(given)
        return (
            f"── ⚙ {kind} {name or '-'} · call_id {item.get('call_id') or '-'}{by}: {fold(shown)}"
        )
    if kind in OUTPUTS:
        names = qualified_name(item.get("namespace"), item.get("name"))
        answers = (f"call_id {item['call_id']}" if isinstance(item.get("call_id"), str)
                   else f"no call ({names or '-'})")  # fmt: skip
        output = item.get("output", item.get("tools"))
        shown = output if isinstance(output, str) else dumps(output)
        return f"── ↩ {kind} · {answers}: {fold(shown)}"
    return f"── {kind} · id {item.get('id', '-')}"


def request_lines(body: dict[str, Any]) -> list[str]:
    """A request (a POST body, or a WebSocket `response.create`): its head, then its input."""
    head = [f"model {body.get('model', '-')}"]
    if body.get("previous_response_id"):
        head.append(f"after {body['previous_response_id']}")
    if isinstance(body.get("stream_id"), str):
        head.append(f"lane {body['stream_id']}")
    if body.get("generate") is False:
        head.append("warm-up (generates nothing)")
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    if tools:
        names = [str(t.get("name") or t.get("type")) for t in tools if isinstance(t, dict)]
        plural = "s" if len(tools) != 1 else ""
        head.append(f"{len(tools)} tool{plural} ({fold(', '.join(names), 80)})")
    lines = [" · ".join(head)]
    if isinstance(body.get("instructions"), str):
        first = (body["instructions"].strip().splitlines() or [""])[0]
        lines.append(f"── instructions: {fold(first)}")  # folded to its first line
    items = body.get("input")
    for item in [items] if isinstance(items, str) else items if isinstance(items, list) else []:
        lines.append(
            item_line({"role": "user", "content": item} if isinstance(item, str) else item)
        )
    return lines


def frame_line(event: Any) -> list[str]:
    """A WebSocket-mode frame, client or server, as lines."""
    if not isinstance(event, dict):
        return [f"a frame that is not a JSON object: {fold(event)}"]
    kind = str(event.get("type"))
    if kind == RESPONSE_CREATE:
        return ["response.create: " + request_lines(event)[0], *request_lines(event)[1:]]
    lane = f" · lane {event['stream_id']}" if isinstance(event.get("stream_id"), str) else ""
    response = event.get("response")
    if isinstance(response, dict):
        output = response.get("output")
        lines = [f"{kind}{lane} · {response.get('id')} · {response.get('status')}"]
        return lines + [item_line(item) for item in (output if isinstance(output, list) else [])]
    if isinstance(event.get("item"), dict):
        return [f"{kind}{lane} · output {event.get('output_index')}", item_line(event["item"])]
    if isinstance(event.get("error"), dict):
        status = f" · status {event['status']}" if "status" in event else ""
        return [f"{kind}{lane}{status}: {fold(event['error'].get('message'))}"]
    for field in ("delta", "text", "arguments", "input"):
        if isinstance(event.get(field), str):
            return [f"{kind}{lane} · {event.get('item_id', '-')}: {fold(event[field])}"]
    return [f"{kind}{lane}"]
