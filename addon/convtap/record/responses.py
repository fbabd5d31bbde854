"""Recording the Responses API (`POST …/responses`): the calls a response asks the client to
run, and the outputs the next request's `input` carries back, in the same `tool_calls` and
`tool_returns` tables as f/conversation, with `protocol = "responses"`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from convtap.record.output import Output
from convtap.redact.stream import StreamRedaction
from convtap.store.rows import ToolCallRow, ToolReturnRow
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.responses import OUTPUTS, ResponsesStream


@dataclass
class ResponsesFlow:
    redaction: StreamRedaction  # what is stored of its stream, secrets cut out
    stream: ResponsesStream = field(default_factory=ResponsesStream)


class ResponsesSide:
    def __init__(self, out: Output) -> None:
        self.out = out
        self.flows: dict[str, ResponsesFlow] = {}

    def request(self, flow_id: str, body: Any, at: float) -> None:
        out = self.out
        if not isinstance(body, dict):
            return
        previous = body.get("previous_response_id")
        items = body.get("input")
        for n, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict) or item.get("type") not in OUTPUTS:
                continue
            out.put(ToolReturnRow(
                id=f"{flow_id}:{n}", protocol="responses", flow_id=flow_id,
                conversation_id=previous if isinstance(previous, str) else None,
                message_id=item.get("id"), tool=item.get("type"),
                body_call_id=item.get("call_id"), message=out.redact.dumps(item), returned_at=at,
            ))  # fmt: skip
            out.say(f"output  {item.get('type')}  call_id {item.get('call_id')}")
        out.report(out.auditor.responses.request(flow_id, out.redact.json(body), at))

    def start(self, flow_id: str) -> None:
        self.flows[flow_id] = ResponsesFlow(StreamRedaction(self.out.redact))

    def chunk(self, flow_id: str, data: bytes, at: float) -> None:
        flow = self.flows.get(flow_id)
        if flow is None:
            self.start(flow_id)
            flow = self.flows[flow_id]
        decoded = flow.stream.feed(data)
        if decoded.text:  # the events, and the lines around them: kept raw too
            flow.redaction.chunk(at, decoded.text, decoded.sse, self._raw(flow_id),
                                 decoded.appended, decoded.unread_lines)  # fmt: skip

    def _raw(self, flow_id: str) -> Callable[[float, int, str], None]:
        return lambda at, count, text: self.out.raw(flow_id, at, "sse", count, text)

    def flush_older(self, than: float) -> None:
        for flow in self.flows.values():
            flow.redaction.flush_older(than)

    def end(self, flow_id: str, body: bytes | None, at: float) -> bool:
        """The response is over: record its calls. `body` is a JSON answer (not streamed).
        True when the stream was cut inside an event."""
        flow = self.flows.pop(flow_id, None) or ResponsesFlow(StreamRedaction(self.out.redact))
        flow.redaction.flush()
        decoder = flow.stream.decoder
        value = loads_or_none(body.lstrip()) if body else None
        if isinstance(value, dict):
            decoder.response(value)
        truncated = flow.stream.end_leg()
        out = self.out
        response = flow.stream.summary()
        calls = response.tool_calls()
        for call in calls:
            call_id = call["call_id"] or call["item_id"]
            if not call_id:
                continue
            out.put(ToolCallRow(
                call_id=call_id, protocol="responses", turn_id=flow_id,
                conversation_id=response.response_id, recipient=call["type"], kind="client",
                tool=call["name"] or call["type"], arguments=out.redact.dumps(call["arguments"]),
                arguments_text=out.redact.text(call["arguments_text"]), complete=1,
                called_at=at, item_id=call["item_id"], namespace=call["namespace"],
            ))  # fmt: skip
            name = ".".join(filter(None, (call["namespace"], call["name"]))) or "-"
            out.say(f"call    {call['type']}  {name}  call_id {call['call_id']}  "
                    f"item {call['item_id']}")  # fmt: skip
        out.report(out.auditor.responses.response(flow_id, response.response_id, calls, at))
        return truncated
