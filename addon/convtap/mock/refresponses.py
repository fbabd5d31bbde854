"""The reference client's Responses API half: a function call and a client tool search, answered.

`ResponsesClient.run_responses` asks with a function (`get_weather`) and a tool search the client
runs, runs the calls the response makes and answers them in a second request
(`previous_response_id`), as docs/protocol.md, "Responses API" says (or, `faulty`, names the
function call by its item id: the classic bug). Streamed or not, through `HttpClient`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from convtap.mock.refhttp import HttpClient
from convtap.wire.responses import ResponsesDecoder, decode_responses
from convtap.wire.sse import SSEParser

RESPONSES_PATH = "/v1/responses"
RESPONSES_MODEL = "gpt-5.1"


@dataclass(frozen=True)
class ResponsesCall:
    item_id: str | None  # the output item's id (fc_…, tsc_…)
    call_id: str | None  # what the output must name
    type: str  # function_call, custom_tool_call, tool_search_call
    name: str | None


@dataclass(frozen=True)
class ResponsesSummary:
    response_id: str | None  # the response that made the calls
    calls: tuple[ResponsesCall, ...]
    sent: tuple[dict[str, Any], ...]  # the request bodies, in order
    final_response_id: str | None  # the answer's response
    text: str  # the answer's output text
    bodies: tuple[bytes, ...]  # the response bodies as received (gunzipped), in order


def responses_tools() -> list[dict[str, Any]]:
    """The request's tools: a function, and a tool search the client runs."""
    return [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            "strict": False,
        },
        {"type": "tool_search", "execution": "client"},
    ]


def responses_request(*, stream: bool = True) -> dict[str, Any]:
    return {
        "model": RESPONSES_MODEL,
        "stream": stream,
        "input": [
            {
                "role": "user",
                "content": "Como está o tempo em São Paulo? E procure ferramentas de calendário.",
            }
        ],
        "tools": responses_tools(),
    }


def run_responses_call(call: dict[str, Any]) -> Any:
    """The client side: get_weather says 21 °C (a JSON string), the tool search finds one
    function tool; anything else is an error string."""
    if call["type"] == "tool_search_call":
        return [
            {
                "type": "function",
                "name": "create_event",
                "description": "Create a calendar event.",
                "parameters": {
                    "type": "object",
                    "properties": {"title": {"type": "string"}, "start": {"type": "string"}},
                    "required": ["title", "start"],
                    "additionalProperties": False,
                },
                "strict": True,
            }
        ]
    if call["name"] == "get_weather":
        return json.dumps({"temp_c": 21})
    return json.dumps({"error": f"unknown tool {call['name']}"})


def responses_output(call: dict[str, Any], *, faulty: bool = False) -> dict[str, Any]:
    """The input item answering a call (docs/protocol.md, "Responses API"). `faulty` names a
    function call by its item id (fc_…) instead of its call_id: the classic bug."""
    result = run_responses_call(call)
    if call["type"] == "tool_search_call":
        return {
            "type": "tool_search_output",
            "call_id": call["call_id"],
            "execution": "client",
            "status": "completed",
            "tools": result,
        }
    call_id = call["item_id"] if faulty and call["type"] == "function_call" else call["call_id"]
    kind = (
        "custom_tool_call_output" if call["type"] == "custom_tool_call" else "function_call_output"
    )
    return {"type": kind, "call_id": call_id, "output": result}


def output_text(items: list[dict[str, Any]]) -> str:
    """The text of a response's assistant messages."""
    return "".join(
        part.get("text", "")
        for item in items
        if item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, dict) and part.get("type") == "output_text"
    )


class ResponsesClient(HttpClient):
    """A client session of the Responses API against `base_url`."""

    def responses(
        self, body: dict[str, Any], *, path: str = RESPONSES_PATH
    ) -> tuple[ResponsesDecoder, bytes]:
        """One `POST …/responses`: the decoded response (an event stream when the body asks
        for one, else a JSON response object) and the body as received (gunzipped)."""
        if body.get("stream") is True:
            decoder, parser, received = ResponsesDecoder(), SSEParser(), bytearray()
            for chunk in self.open_stream(path, body):
                received += chunk
                for event in parser.feed(chunk):
                    decoder.feed(event)
            parser.close()
            return decoder, bytes(received)
        raw = b"".join(self._send("POST", path, body, {"Accept": "application/json"}))
        return decode_responses([raw]), raw

    def run_responses(
        self, *, faulty: bool = False, stream: bool = True, path: str = RESPONSES_PATH
    ) -> ResponsesSummary:
        """Ask with a function and a client tool search, run the calls the response makes,
        answer them in a second request (`previous_response_id`), read the answer. `faulty`
        answers the function call with its item id instead of its call_id."""
        first_body = responses_request(stream=stream)
        first, first_raw = self.responses(first_body, path=path)
        calls = first.tool_calls()
        outputs = [responses_output(call.as_json(), faulty=faulty) for call in calls]
        bodies, sent = [first_raw], [first_body]
        final: ResponsesDecoder | None = None
        if outputs and first.response_id is not None:
            second_body = {
                "model": RESPONSES_MODEL,
                "stream": stream,
                "previous_response_id": first.response_id,
                "input": outputs,
            }
            final, raw = self.responses(second_body, path=path)
            bodies.append(raw)
            sent.append(second_body)
        return ResponsesSummary(
            response_id=first.response_id,
            calls=tuple(ResponsesCall(c.item_id, c.call_id, c.recipient, c.name) for c in calls),
            sent=tuple(sent),
            final_response_id=final.response_id if final else None,
            text=output_text(final.output_items) if final else "",
            bodies=tuple(bodies),
        )
