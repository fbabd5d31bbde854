"""Recording the Responses API (`POST …/responses`): the calls a response asks the client to
run, and the outputs the next request's `input` carries back, in the same `tool_calls` and
`tool_returns` tables as f/conversation, with `protocol = "responses"`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from addon.responses import OUTPUTS, ResponsesDecoder, client_calls
from addon.sse import SSEParser
from addon.store import dumps

if TYPE_CHECKING:
    from addon.recorder import Recorder


@dataclass
class ResponsesFlow:
    decoder: ResponsesDecoder = field(default_factory=ResponsesDecoder)
    parser: SSEParser = field(default_factory=SSEParser)


class ResponsesSide:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.flows: dict[str, ResponsesFlow] = {}

    def request(self, flow_id: str, body: Any, at: float) -> None:
        rec = self.recorder
        if not isinstance(body, dict):
            return
        redacted = rec.redact.json(body)
        previous = body.get("previous_response_id")
        items = body.get("input")
        for n, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict) or item.get("type") not in OUTPUTS:
                continue
            rec.sink.put("upsert", "tool_returns", {
                "id": f"{flow_id}:{n}", "protocol": "responses", "flow_id": flow_id,
                "conversation_id": previous if isinstance(previous, str) else None,
                "message_id": item.get("id"), "tool": item.get("type"),
                "body_call_id": item.get("call_id"), "message": dumps(rec.redact.json(item)),
                "returned_at": at,
            })  # fmt: skip
            rec.echo(f"output  {item.get('type')}  call_id {item.get('call_id')}")
        rec._report(rec.auditor.responses.request(flow_id, redacted, at))

    def start(self, flow_id: str) -> None:
        self.flows[flow_id] = ResponsesFlow()

    def chunk(self, flow_id: str, data: bytes, at: float) -> None:
        flow = self.flows[flow_id]
        events = flow.parser.feed(data)
        if not events:
            return
        rec = self.recorder
        rec.keep_raw(flow_id, at, "sse", len(events), rec.redact.sse(flow.parser.consumed, events))
        for event in events:
            flow.decoder.feed(event)

    def end(self, flow_id: str, body: bytes | None, at: float) -> str | None:
        """The response is over: record its calls. Returns "truncated" if cut inside an event."""
        flow = self.flows.pop(flow_id, None) or ResponsesFlow()
        if body:  # not streamed: a JSON response, or an event stream read back from a file
            stripped = body.lstrip()
            if stripped.startswith(b"{"):
                from addon.delta import loads

                try:
                    value = loads(stripped.decode("utf-8", "replace"))
                except ValueError:
                    value = None
                if isinstance(value, dict):
                    flow.decoder.response(value)
            else:
                self.start(flow_id)
                self.flows[flow_id] = flow
                self.chunk(flow_id, body, at)
                self.flows.pop(flow_id, None)
        truncated = flow.parser.close()
        rec = self.recorder
        decoder = flow.decoder
        calls = client_calls(decoder.output_items)
        for call in calls:
            call_id = call["call_id"] or call["item_id"]
            if not call_id:
                continue
            arguments = call["arguments"]
            rec.sink.put("upsert", "tool_calls", {
                "call_id": call_id, "protocol": "responses", "turn_id": flow_id,
                "conversation_id": decoder.response_id, "recipient": call["type"],
                "kind": "client", "tool": call["name"] or call["type"],
                "arguments": dumps(rec.redact.json(arguments)) if not isinstance(arguments, str)
                else None,
                "arguments_text": arguments if isinstance(arguments, str) else dumps(arguments),
                "complete": 1, "called_at": at, "item_id": call["item_id"],
            })  # fmt: skip
            rec.echo(f"call    {call['type']}  {call['name'] or '-'}  call_id {call['call_id']}  "
                     f"item {call['item_id']}")  # fmt: skip
        rec._report(rec.auditor.responses.response(flow_id, decoder.response_id, calls, at))
        return "truncated" if truncated else None
