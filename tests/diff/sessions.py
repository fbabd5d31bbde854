"""Sessions of both protocols that differ in content only (other prompts, tools, arguments,
titles, instructions), written as HAR files for `convtap diff` and `convtap shapes`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from convtap.wire.wsturn import TurnTopicAssembler

from tests.seeds import har_entry

ROOT = Path(__file__).resolve().parents[2]
OLDER = ROOT / "captures" / "examples" / "diff" / "older.har"
HANDOFF = ROOT / "captures" / "examples" / "sse" / "handoff_ws"
RESPONSES = "https://api.openai.com/v1/responses"
AT = "2026-08-27T19:51:00.000Z"


def entry(url: str, request: Any, sse: str, at: str) -> dict[str, Any]:
    return har_entry(url, request, sse.encode(), at)


def har(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}}


def sse(events: list[dict[str, Any]]) -> str:
    return "".join(
        f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events
    )


def responses_session(content: dict[str, Any], drop_tools: bool = False) -> dict[str, Any]:
    """Two Responses turns: a function call, then its output and an answer. `content` holds
    everything a user or a model chooses: prompt, instructions, tool, arguments, output,
    answer, title, metadata."""
    tool = {
        "type": "function",
        "name": content["tool"],
        "description": content["about"],
        "parameters": content["schema"],
        "strict": False,
    }
    call = {
        "type": "function_call",
        "id": "fc_68a1b2c3d4",
        "call_id": "call_Qx7RkP2m9z",
        "name": content["tool"],
        "arguments": content["arguments"],
        "status": "completed",
    }
    prompt = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": content["prompt"]}],
    }
    first = {
        "model": "gpt-5",
        "instructions": content["instructions"],
        "input": [prompt],
        "tools": [tool],
        "stream": True,
        "metadata": content["metadata"],
    }
    output = {
        "type": "function_call_output",
        "call_id": call["call_id"],
        "output": content["output"],
    }
    second = {**first, "input": [prompt, call, output]}
    answer = {
        "type": "message",
        "id": "msg_68a1b2c3d4",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": content["answer"], "annotations": []}],
    }

    def response(n: int, status: str, out: list[Any]) -> dict[str, Any]:
        body = {
            "id": f"resp_68a1c0ffe{n}",
            "object": "response",
            "status": status,
            "instructions": content["instructions"],
            "metadata": content["metadata"],
            "tools": [tool],
            "output": out,
        }
        if drop_tools:
            del body["tools"]
        return body

    def turn(n: int, item: dict[str, Any], middle: list[dict[str, Any]]) -> list[dict[str, Any]]:
        started = {**item, "status": "in_progress"}
        return [
            {"type": "response.created", "response": response(n, "in_progress", [])},
            {"type": "response.in_progress", "response": response(n, "in_progress", [])},
            {"type": "response.output_item.added", "output_index": 0, "item": started},
            *middle,
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": response(n, "completed", [item])},
        ]

    half = len(content["arguments"]) // 2
    calling = [
        {
            "type": "response.function_call_arguments.delta",
            "item_id": call["id"],
            "output_index": 0,
            "delta": part,
        }
        for part in (content["arguments"][:half], content["arguments"][half:])
    ]
    calling.append(
        {
            "type": "response.function_call_arguments.done",
            "item_id": call["id"],
            "output_index": 0,
            "arguments": content["arguments"],
        }
    )
    part = {"type": "output_text", "text": content["answer"], "annotations": []}
    answering = [
        {
            "type": "response.content_part.added",
            "item_id": answer["id"],
            "output_index": 0,
            "content_index": 0,
            "part": {**part, "text": ""},
        },
        {
            "type": "response.output_text.delta",
            "item_id": answer["id"],
            "output_index": 0,
            "content_index": 0,
            "delta": content["answer"],
        },
        {
            "type": "response.output_text.done",
            "item_id": answer["id"],
            "output_index": 0,
            "content_index": 0,
            "text": content["answer"],
        },
        {
            "type": "response.content_part.done",
            "item_id": answer["id"],
            "output_index": 0,
            "content_index": 0,
            "part": part,
        },
    ]
    return har(
        [
            entry(RESPONSES, first, sse(turn(1, call, calling)), "2026-08-27T19:51:00.000Z"),
            entry(RESPONSES, second, sse(turn(2, answer, answering)), "2026-08-27T19:51:30.000Z"),
        ]
    )


WEATHER = {
    "prompt": "What's the weather in São Paulo today?",
    "instructions": "You are a helpful assistant that reports weather updates.",
    "tool": "get_weather",
    "about": "Current weather for a city",
    "schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "arguments": json.dumps({"city": "São Paulo"}),
    "output": json.dumps({"temperature": 21, "sky": "cloudy"}),
    "answer": "It is 21 °C and cloudy in São Paulo.",
    "metadata": {"session": "weather"},
}
CALENDAR = {
    "prompt": "Book lunch with Ana on Friday at noon, please",
    "instructions": "Plan the user's week with the calendar tools. Be brief.",
    "tool": "create_event",
    "about": "Creates a calendar event",
    "schema": {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "when": {"type": "string", "format": "date-time"},
            "guests": {"type": "array", "items": {"type": "string"}},
        },
    },
    "arguments": json.dumps(
        {"title": "Lunch with Ana", "when": "2026-08-28T12:00", "guests": ["ana@example.com"]}
    ),
    "output": "created event evt_42 (calendar tools)",
    "answer": "Done: lunch with Ana is on your calendar for Friday at noon.",
    "metadata": {"team": "calendar", "ticket": "PLAN-7"},
}


def conversation_session(drop_signatures: bool = False) -> dict[str, Any]:
    """older.har with other content: another prompt, other text streamed, other arguments and
    another return body, other tool descriptions and parameter types, another model, and a
    title; the protocol unchanged."""
    log = json.loads(OLDER.read_text())
    swap = {
        "use o alefita way": "Famous People List Request, with dates",
        "segundo eco do caminho": "a much longer echo, with punctuation: done!",
    }
    for e in log["log"]["entries"]:
        request = json.loads(e["request"]["postData"]["text"])
        request["model"] = "gpt-4o-mini"  # the model the user picked
        for signature in request.get("local_function_signatures", []):
            signature["description"] = "Calls another tool, described otherwise."
            signature["params"][0]["type"] = {"description": "How many", "type": "integer"}
        if drop_signatures:
            request.pop("local_function_signatures", None)
        text = json.dumps(request, ensure_ascii=False)
        body = (
            e["response"]["content"]["text"]
            .replace(
                '"o": "append", "v": "Vou cha"', '"o": "append", "v": "Let me look that up for you"'
            )
            .replace('"v": "Execute"', '"v": "Here are the results"')
        )
        body = body.replace('{\\"mes', '{\\"query\\": \\"people\\", \\"mes')
        body += sse(
            [
                {
                    "type": "title_generation",
                    "title": "Famous People List Request",
                    "conversation_id": "6a1c3b2e-0d4f-4c1a-9a55-2f1b7c9e8d10",
                }
            ]
        )
        body = body.replace(
            '"resolved_model_slug": "gpt-5-6-thinking"', '"resolved_model_slug": "gpt-4o-mini"'
        )
        for old, new in swap.items():
            text, body = text.replace(old, new), body.replace(old, new)
        e["request"]["postData"]["text"] = text
        e["response"]["content"]["text"] = body
    return log


def older_with_title() -> dict[str, Any]:
    """older.har as it is, but with a title (as conversation_session has one)."""
    log = json.loads(OLDER.read_text())
    for e in log["log"]["entries"]:
        e["response"]["content"]["text"] += sse(
            [
                {
                    "type": "title_generation",
                    "title": "Um",
                    "conversation_id": "6a1c3b2e-0d4f-4c1a-9a55-2f1b7c9e8d10",
                }
            ]
        )
    return log


def over_socket(log: dict[str, Any]) -> dict[str, Any]:
    """The same Responses session over one WebSocket (WebSocket mode): each request a
    `response.create` frame, each event a frame of its own."""
    frames = []
    for e in log["log"]["entries"]:
        body = json.loads(e["request"]["postData"]["text"])
        body.pop("stream", None)
        create = json.dumps({"type": "response.create", **body})
        frames.append({"type": "send", "time": 1.0, "opcode": 1, "data": create})
        for line in e["response"]["content"]["text"].split("\n"):
            if line.startswith("data: "):
                frames.append({"type": "receive", "time": 1.1, "opcode": 1, "data": line[6:]})
    socket = har_entry(RESPONSES, {}, b"", log["log"]["entries"][0]["startedDateTime"])
    socket["request"].update(method="GET", bodySize=0)
    del socket["request"]["postData"]
    socket["response"].update(status=101, statusText="Switching Protocols")
    socket["_webSocketMessages"] = frames
    return har([socket])


def first_turn_only(log: dict[str, Any]) -> dict[str, Any]:
    """A conversation's first request alone: a prompt, no tool return sent back."""
    return {"log": {**log["log"], "entries": log["log"]["entries"][:1]}}


def shorthand_input(log: dict[str, Any]) -> dict[str, Any]:
    """The same Responses requests with `input` as a client may write it: a lone prompt as a
    string, other messages without `type` and with their text as a string."""
    log = json.loads(json.dumps(log))
    for e in log["log"]["entries"]:
        request = json.loads(e["request"]["postData"]["text"])
        for item in request["input"]:
            if item.get("type") == "message":
                del item["type"]
                item["content"] = item["content"][0]["text"]
        if len(request["input"]) == 1:
            request["input"] = request["input"][0]["content"]
        e["request"]["postData"]["text"] = json.dumps(request)
    return log


def handoff_session(over_socket: bool, swap: tuple[str, str] = ("", "")) -> dict[str, Any]:
    """The handoff example: a turn whose stream goes on over the user socket's turn topic, or
    (not `over_socket`) the same events all in the POST's stream. `swap` edits the frames."""
    body = HANDOFF.with_suffix(".sse").read_text()
    frames = HANDOFF.with_suffix(".frames.jsonl").read_text().replace(*swap).splitlines()
    request = {"action": "next", "messages": [], "model": "gpt-5"}
    url = "https://chatgpt.com/backend-api/f/conversation"
    if not over_socket:
        assembler = TurnTopicAssembler()
        rest = "".join(assembler.feed(f) for f in frames) + assembler.close()
        return har([entry(url, request, body.replace("data: [DONE]\n\n", "") + rest, AT)])
    socket = har_entry("https://chatgpt.com/backend-api/ws/user/u-1", {}, b"", AT)
    socket["request"].update(method="GET", bodySize=0)
    del socket["request"]["postData"]
    socket["response"].update(status=101, statusText="Switching Protocols")
    socket["_webSocketMessages"] = [
        {"type": "receive", "time": 1.0 + n / 100, "opcode": 1, "data": f}
        for n, f in enumerate(frames)
    ]
    return har([entry(url, request, body, AT), socket])


def not_streamed(log: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The same Responses session without `stream`: each answer the final response as JSON
    (with `extra` fields added)."""
    entries = []
    for e in log["log"]["entries"]:
        request = json.loads(e["request"]["postData"]["text"])
        request.pop("stream")
        data = [line[6:] for line in e["response"]["content"]["text"].split("\n")]
        final = [json.loads(d) for d in data if d.startswith("{")][-1]["response"]
        body = json.dumps({**final, **(extra or {})}).encode()
        entries.append(
            har_entry(RESPONSES, request, body, e["startedDateTime"], "application/json")
        )
    return har(entries)


def one_response(log: dict[str, Any], n: int) -> dict[str, Any]:
    """Request `n` of a session alone (0: a function call; 1: a text answer)."""
    return {"log": {**log["log"], "entries": [log["log"]["entries"][n]]}}
