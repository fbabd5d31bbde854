"""Builds the Responses API examples: `python captures/examples/responses/build.py`.

`function_call.sse` is a streamed response that asks the client for a `function_call` (its
arguments streamed in deltas) and a client `tool_search_call`; `answer_ok.json` and
`answer_item_id.json` are the next request's bodies, answered correctly and with the item id in
place of the call id. `session(...)` also builds the HAR sessions of the responses-* rules.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESPONSE_ID = "resp_68a1c0ffee"
FC_ITEM, FC_CALL = "fc_68a1b2c3", "call_Qx7RkP2m"
TS_ITEM, TS_CALL = "tsc_68a1d4e5", "call_S1kq9Wz"
URL = "https://api.openai.com/v1/responses"
ARGS = '{"city": "São Paulo", "unit": "celsius"}'


def event(obj: dict[str, Any]) -> str:
    return f"event: {obj['type']}\ndata: {json.dumps(obj, ensure_ascii=False)}\n\n"


def function_call(arguments: str = "") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": FC_ITEM,
        "call_id": FC_CALL,
        "name": "get_weather",
        "arguments": arguments,
        "status": "completed" if arguments else "in_progress",
    }


def tool_search_call() -> dict[str, Any]:
    return {
        "type": "tool_search_call",
        "id": TS_ITEM,
        "call_id": TS_CALL,
        "execution": "client",
        "arguments": {"query": "calendar tools"},
        "status": "completed",
    }


def stream(response_id: str = RESPONSE_ID) -> str:
    base = {"id": response_id, "object": "response", "status": "in_progress", "output": []}
    done = {**base, "status": "completed", "output": [function_call(ARGS), tool_search_call()]}
    out = [
        event({"type": "response.created", "response": base}),
        event({"type": "response.in_progress", "response": base}),
        event({"type": "response.output_item.added", "output_index": 0, "item": function_call()}),
    ]
    for n in range(0, len(ARGS), 6):
        out.append(
            event(
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": 0,
                    "item_id": FC_ITEM,
                    "delta": ARGS[n : n + 6],
                }
            )
        )
    out += [
        event(
            {
                "type": "response.function_call_arguments.done",
                "output_index": 0,
                "item_id": FC_ITEM,
                "arguments": ARGS,
            }
        ),
        event(
            {"type": "response.output_item.done", "output_index": 0, "item": function_call(ARGS)}
        ),
        event(
            {"type": "response.output_item.added", "output_index": 1, "item": tool_search_call()}
        ),
        event({"type": "response.output_item.done", "output_index": 1, "item": tool_search_call()}),
        event({"type": "response.completed", "response": done}),
    ]
    return "".join(numbered(out))


def numbered(events: list[str]) -> list[str]:
    """Every event with its sequence_number, as the real API sends them."""
    out = []
    for n, text in enumerate(events):
        _, data = text.split("\ndata: ", 1)
        obj = json.loads(data)
        out.append(event({"type": obj.pop("type"), "sequence_number": n, **obj}))
    return out


def request(tools: list[Any] | None = None) -> dict[str, Any]:
    return {
        "model": "gpt-5.1",
        "stream": True,
        "input": [
            {
                "role": "user",
                "content": "Como está o tempo em São Paulo? E procure ferramentas de calendário.",
            }
        ],
        "tools": tools
        if tools is not None
        else [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "strict": False,
            },
            {"type": "tool_search", "execution": "client"},
        ],
    }


def answer(
    *,
    fc_call_id: str = FC_CALL,
    output: Any = '{"temp_c": 21}',
    search: dict[str, Any] | None = None,
    include_search: bool = True,
    extra: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"type": "function_call_output", "call_id": fc_call_id, "output": output},
        *extra,
    ]
    if include_search:
        items.append(
            search
            or {
                "type": "tool_search_output",
                "call_id": TS_CALL,
                "execution": "client",
                "status": "completed",
                "tools": [
                    {
                        "type": "function",
                        "name": "create_event",
                        "parameters": {"type": "object"},
                        "strict": True,
                    }
                ],
            }
        )
    return {"model": "gpt-5.1", "stream": True, "previous_response_id": RESPONSE_ID, "input": items}


def entry(body: dict[str, Any], response: str, at: str, content_type: str) -> dict[str, Any]:
    text = json.dumps(body, ensure_ascii=False)
    return {
        "startedDateTime": at,
        "time": 300,
        "request": {
            "method": "POST",
            "url": URL,
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "cookies": [],
            "queryString": [],
            "headersSize": -1,
            "bodySize": len(text),
            "postData": {"mimeType": "application/json", "text": text},
        },
        "response": {
            "status": 200,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": content_type}],
            "cookies": [],
            "content": {"size": len(response), "mimeType": content_type, "text": response},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": len(response),
        },
        "cache": {},
        "timings": {"send": 1, "wait": 298, "receive": 1},
    }


def text_response(
    response_id: str, previous: str | None, text: str, message_id: str = "msg_1"
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "status": "completed",
        "previous_response_id": previous,
        "output": [
            {
                "type": "message",
                "id": message_id,
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
        ],
    }


def session(
    first: dict[str, Any], second: dict[str, Any] | None, third: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A HAR: the request that gets the calls, then (if any) the one that answers them, then
    (if any) one more that continues the answer."""
    final = json.dumps(text_response("resp_68a1beef", RESPONSE_ID, "21 °C."))
    entries = [entry(first, stream(), "2026-09-01T10:00:00.000Z", "text/event-stream")]
    if second is not None:
        entries.append(entry(second, final, "2026-09-01T10:00:05.000Z", "application/json"))
    if third is not None:
        last = json.dumps(text_response("resp_68a1cafe", "resp_68a1beef", "Ok.", "msg_2"))
        entries.append(entry(third, last, "2026-09-01T10:00:09.000Z", "application/json"))
    return har(entries)


def har(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "convtap example", "version": "1"},
            "entries": entries,
        }
    }


def socket_session(*, overlap: bool = False) -> dict[str, Any]:
    """A HAR of one WebSocket-mode socket and two turns: the second create sent after the first
    response completed, or (`overlap`) while it still streams, refused by the server."""
    t0 = 1788256800.0  # 2026-09-01T10:00:00Z
    first = {"type": "response.create", "model": "gpt-5.1", "input": "one"}
    second = {"type": "response.create", "model": "gpt-5.1", "input": "two"}

    def events(response_id: str, text: str) -> list[dict[str, Any]]:
        done = text_response(response_id, None, text)
        started = {**done, "status": "in_progress", "output": []}
        return [{"type": "response.created", "sequence_number": 0, "response": started},
                {"type": "response.completed", "sequence_number": 1, "response": done}]  # fmt: skip

    refused = {"type": "error", "status": 400, "error": {
        "type": "invalid_request_error", "code": "response_in_progress", "param": None,
        "message": "A response is already in progress on this connection."}}  # fmt: skip
    frames: list[tuple[str, dict[str, Any]]] = [("send", first)]
    one, two = events("resp_68a1s001", "one"), events("resp_68a1s002", "two")
    if overlap:
        frames += [("send", second), ("receive", one[0]), ("receive", refused), ("receive", one[1])]
    else:
        frames += [("receive", one[0]), ("receive", one[1]), ("send", second)]
        frames += [("receive", two[0]), ("receive", two[1])]
    messages = [{"type": kind, "time": t0 + n, "opcode": 1, "data": json.dumps(frame)}
                for n, (kind, frame) in enumerate(frames)]  # fmt: skip
    upgrade = {
        "startedDateTime": "2026-09-01T10:00:00.000Z",
        "time": 10,
        "request": {
            "method": "GET", "url": "wss://api.openai.com/v1/responses", "httpVersion": "HTTP/1.1",
            "headers": [{"name": "upgrade", "value": "websocket"},
                        {"name": "connection", "value": "Upgrade"}],
            "cookies": [], "queryString": [], "headersSize": -1, "bodySize": 0,
        },
        "response": {
            "status": 101, "statusText": "Switching Protocols", "httpVersion": "HTTP/1.1",
            "headers": [{"name": "upgrade", "value": "websocket"},
                        {"name": "connection", "value": "Upgrade"}],
            "cookies": [], "content": {"size": 0, "mimeType": "x-unknown", "text": ""},
            "redirectURL": "", "headersSize": -1, "bodySize": 0,
        },
        "cache": {}, "timings": {"send": 1, "wait": 8, "receive": 1},
        "_resourceType": "websocket", "_webSocketMessages": messages,
    }  # fmt: skip
    return har([upgrade])


def main() -> None:
    (HERE / "function_call.sse").write_text(stream())
    (HERE / "answer_ok.json").write_text(json.dumps(answer(), indent=1) + "\n")
    (HERE / "answer_item_id.json").write_text(
        json.dumps(answer(fc_call_id=FC_ITEM), indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
