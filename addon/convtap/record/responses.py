"""Recording the Responses API (`POST …/responses`, and its WebSocket mode on `GET …/responses`):
the calls a response asks the client to run, and the outputs the next request's `input` carries
back, in the same `tool_calls` and `tool_returns` tables as f/conversation, with `protocol =
"responses"`.

Over a WebSocket (docs/protocol.md, "Responses API"), each `response.create` frame is a request
and the server's events that follow are its response, one after another on each `stream_id`
lane (lanes run side by side; on one lane, responses answer creates in order). Each such turn is
recorded as a flow of its own (kind `responses`, `source` "socket", named `SOCKET#n`), so that
pairing, acceptance and every rule work as for HTTP, across a chain that mixes both; the frames
themselves stay raw on the socket's flow.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from convtap.contract.happenings import (
    ClientCallsMade,
    ReplayMissed,
    ResponsesRequest,
    SocketCreate,
    replay_miss,
)
from convtap.contract.registry import Where
from convtap.record.output import Output
from convtap.redact.stream import Carrier, Keep, StreamRedaction
from convtap.store.rows import FlowRow, ToolCallRow, ToolReturnRow
from convtap.telemetry.cost import usage_row
from convtap.vocab import RESPONSE_CREATE, Outcome, RawKind, Source, WireProtocol
from convtap.wire.bounded import Bounded
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.provenance import Piece, Pieces, StringEvent
from convtap.wire.responses import (
    OUTPUTS,
    ResponsesDecoder,
    ResponsesStream,
    ResponseSummary,
    qualified_name,
)
from convtap.wire.session import Endpoint, ToolReturn
from convtap.wire.sse import SSEEvent, format_event

MAX_WAITING = 1000  # creates on one lane waiting for their response (the oldest forgotten)
MAX_SOCKETS = 1024  # sockets open at once
MAX_LANES = 1024  # `stream_id` lanes one socket holds (the least recently used forgotten)
STEERING = ("response.steer", "response.steer.accepted", "response.steer.pending",
            "response.steer.failed")  # fmt: skip
ENDS = {"response.completed": Outcome.COMPLETE, "response.failed": Outcome.FAILED,
        "response.incomplete": Outcome.INCOMPLETE}  # fmt: skip


@dataclass
class ResponsesFlow:
    redaction: StreamRedaction  # what is stored of its stream, secrets cut out
    stream: ResponsesStream = field(default_factory=lambda: ResponsesStream(follow=True))


@dataclass
class Socket:
    """A Responses API WebSocket: its turns so far, what each lane waits for, and what of the
    server's frames is held back by their redaction."""

    flow_id: str
    url: str
    host: str
    path: str
    redaction: StreamRedaction
    client: str | None
    turns: int = 0
    frames: int = 0  # frames seen: the index of the next one among them (its redaction's)
    # lane -> its creates waiting for their response, and the response it streams
    waiting: Bounded[str | None, deque[str]] = field(default_factory=lambda: Bounded(MAX_LANES))
    streaming: Bounded[str | None, tuple[str, ResponsesDecoder]] = field(
        default_factory=lambda: Bounded(MAX_LANES)
    )

    def turn(self) -> str:
        self.turns += 1
        return f"{self.flow_id}#{self.turns}"


class ResponsesSide:
    def __init__(self, out: Output) -> None:
        self.out = out
        self.flows: dict[str, ResponsesFlow] = {}
        self.sockets: Bounded[str, Socket] = Bounded(MAX_SOCKETS)

    def request(self, flow_id: str, body: Any, at: float) -> None:
        out = self.out
        if not isinstance(body, dict):
            return
        previous = body.get("previous_response_id")
        items = body.get("input")
        for n, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict) or item.get("type") not in OUTPUTS:
                continue
            where = Where(flow_id=flow_id, conversation_id=_text(previous))
            message = out.redact.dumps(item)
            out.put(ToolReturnRow.of(_output(item), WireProtocol.RESPONSES, where, n, message, at))
            out.say(f"output  {item.get('type')}  call_id {item.get('call_id') or '-'}")
        out.audit(ResponsesRequest(flow_id, out.redact.json(body), at))

    def start(self, flow_id: str) -> None:
        self.flows[flow_id] = ResponsesFlow(StreamRedaction(self.out.redact))

    def chunk(self, flow_id: str, data: bytes, at: float) -> None:
        flow = self.flows.get(flow_id)
        if flow is None:
            self.start(flow_id)
            flow = self.flows[flow_id]
        decoded = flow.stream.feed(data)
        if decoded.text:  # the events, and the lines around them: kept raw too
            text = decoded.text
            if decoded.unread_lines:
                text = self.out.redact.unread(text, decoded.unread_text)
            carrier = Carrier(at, text, decoded.sse, decoded.first, self._raw(flow_id))
            flow.redaction.chunk(carrier, decoded.strings)

    def _raw(self, flow_id: str) -> Keep:
        """Where a chunk's row goes, its place in the flow taken now."""
        seq = self.out.reserve(flow_id)
        return lambda at, count, text: self.out.raw(flow_id, at, RawKind.SSE, count, text, seq)

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
        self._calls(flow_id, flow.stream.summary(), at)
        return truncated

    def _calls(self, flow_id: str, response: ResponseSummary, at: float) -> None:
        """A response is over: its client calls are recorded, printed and audited; what it
        used and cost too."""
        out = self.out
        if (usage := usage_row(flow_id, response, at)) is not None:
            out.put(usage)
        calls = response.tool_calls()
        if response.response_id is not None:  # which response answered: the chain runs through it
            out.put(FlowRow(flow_id, conversation_id=response.response_id))
        made = ClientCallsMade(flow_id, response.response_id, tuple(calls), at)
        for each in made.made():
            call = each.call
            if not call.key:
                continue
            redacted = out.redact.dumps(call.arguments), out.redact.text(call.arguments_text)
            out.put(ToolCallRow.of(each, *redacted))
            name = qualified_name(call.namespace, call.name) or "-"
            out.say(f"call    {call.recipient}  {name}  call_id {call.call_id or '-'}  "
                    f"item {call.item_id or '-'}")  # fmt: skip
        out.audit(made)

    # -- WebSocket mode ----------------------------------------------------------------------

    def socket_open(self, flow_id: str, url: str, host: str, path: str, client: str | None) -> None:
        """A socket opened; `client` is who opened it (its user agent, redacted)."""
        redaction = StreamRedaction(self.out.redact)
        self.sockets[flow_id] = Socket(flow_id, url, host, path, redaction, client)

    def socket_frame(self, flow_id: str, from_client: bool, text: str, at: float) -> None:
        """One frame: kept raw (redacted) on the socket's flow, then read. Every frame goes
        through the socket's stream redaction, in order (a secret the model streams in
        `*.delta` frames is cut across them): a frame is held back while one before it is."""
        socket = self.sockets.get(flow_id)
        event = loads_or_none(text)
        if socket is None:  # not a socket of this protocol
            self.out.raw(flow_id, at, RawKind.frame(from_client), 1,
                         self.out.redact.text(text))  # fmt: skip
            return
        if not isinstance(event, dict):  # not a frame of this protocol: kept in its place
            self._keep_frame(socket, from_client, text, at)
            return
        lane = event.get("stream_id") if isinstance(event.get("stream_id"), str) else None
        kind = str(event.get("type"))
        if kind in STEERING:  # kept raw; said as it happens
            self._steering(event, kind)
        if from_client:
            self._client_frame(socket, event, lane, kind, text, at)
        else:
            self._server_frame(socket, event, lane, kind, text, at)

    def _keep_frame(
        self, socket: Socket, from_client: bool, text: str, at: float,
        strings: list[StringEvent] | None = None,
    ) -> None:  # fmt: skip
        """A frame as one raw row of the socket, through its stream redaction (the frame as one
        event; `strings`: what it did to the strings of its response)."""
        kind = RawKind.frame(from_client)
        out, flow_id, index = self.out, socket.flow_id, socket.frames
        socket.frames += 1
        seq = out.reserve(flow_id)

        def keep(when: float, count: int, redacted: str) -> None:
            out.raw(flow_id, when, kind, 1, _frame_of(redacted), seq)

        sse = SSEEvent("message", text)  # its type is in its data
        socket.redaction.chunk(Carrier(at, format_event(sse), [sse], index, keep),
                               _at_frame(strings or [], index))  # fmt: skip

    def _client_frame(
        self, socket: Socket, event: dict[str, Any], lane: str | None, kind: str, text: str,
        at: float,
    ) -> None:  # fmt: skip
        self._keep_frame(socket, True, text, at)
        if kind == RESPONSE_CREATE:  # a request: the fields of a POST body
            turn = socket.turn()
            streaming, waiting = socket.streaming.get(lane), socket.waiting.get(lane)
            busy = streaming[0] if streaming is not None else (waiting[-1] if waiting else None)
            socket.waiting.setdefault(lane, deque(maxlen=MAX_WAITING)).append(turn)
            self._turn(socket, turn, at, event)
            previous = event.get("previous_response_id")
            previous = previous if isinstance(previous, str) else None
            self.out.audit(SocketCreate(turn, previous, lane, busy))
            self.request(turn, event, at)

    def _server_frame(
        self, socket: Socket, event: dict[str, Any], lane: str | None, kind: str, text: str,
        at: float,
    ) -> None:  # fmt: skip
        if kind == "response.created":
            if lane in socket.streaming:  # never ended: over, with what it said
                self._socket_turn_over(socket, lane, None, Outcome.NEW_RESPONSE, at)
            if socket.waiting.get(lane):
                turn = socket.waiting[lane].popleft()
            else:  # a response no create asked for: the successor of a steered one
                turn = socket.turn()
                self._turn(socket, turn, at, None)
            socket.streaming[lane] = (turn, ResponsesDecoder(follow=True))
        streaming = socket.streaming.get(lane)
        strings: list[StringEvent] = []
        if streaming is not None:  # its strings are its turn's (lanes stream side by side)
            turn, decoder = streaming
            decoder.feed_all([SSEEvent("message", text)])
            strings = [_of_turn(turn, e) for e in decoder.strings()]
        self._keep_frame(socket, False, text, at, strings)
        out = self.out
        if kind in ENDS and streaming is not None:
            self._socket_turn_over(socket, lane, 200, ENDS[kind], at)
        elif kind == "error":
            status = event.get("status") if isinstance(event.get("status"), int) else None
            waiting = socket.waiting.get(lane)
            if waiting:  # a create was refused: while one streams, the newest (refused at once)
                turn = waiting.pop() if streaming is not None else waiting.popleft()
                out.put(FlowRow(turn, status=status, response_body=out.redact.dumps(event),
                                ended_at=at, outcome=Outcome.ERROR))  # fmt: skip
                if (miss := replay_miss(status, event)) is not None:
                    out.audit(ReplayMissed(turn, miss))
            elif streaming is not None:
                self._socket_turn_over(socket, lane, status, Outcome.ERROR, at, event)

    def _steering(self, event: dict[str, Any], kind: str) -> None:
        """Mid-turn steering: the client's `response.steer` and the server's answer to it."""
        target = event.get("previous_response_id") or event.get("response_id") or "-"
        items = event.get("input")
        detail = f"{len(items)} input item(s)" if isinstance(items, list) else ""
        error = event.get("error")
        if isinstance(error, dict):
            detail = str(error.get("message") or error.get("code") or "")
        self.out.say(f"steer   {kind.removeprefix('response.')}  {target}  {detail}".rstrip())

    def socket_end(self, flow_id: str, at: float) -> None:
        """The socket closed: a response still streaming is cut (its calls so far are
        recorded), a create still waiting was never answered."""
        socket = self.sockets.pop(flow_id, None)
        if socket is None:
            return
        socket.redaction.flush()
        for lane in list(socket.streaming):
            self._socket_turn_over(socket, lane, None, Outcome.SOCKET_CUT, at)
        for waiting in socket.waiting.values():
            for turn in waiting:
                self.out.put(FlowRow(turn, ended_at=at, outcome=Outcome.UNANSWERED))

    def _turn(self, socket: Socket, turn: str, at: float, create: dict[str, Any] | None) -> None:
        """A socket's turn as a flow of its own (see the module's docstring)."""
        self.out.put(FlowRow(
            turn, kind=Endpoint.RESPONSES, method="WS", url=self.out.redact.url(socket.url),
            host=socket.host, path=self.out.redact.url(socket.path.split("?", 1)[0]),
            client=socket.client,
            request_body=None if create is None else self.out.redact.dumps(create),
            turn_id=socket.flow_id, started_at=at,
            source=Source.SOCKET,
        ))  # fmt: skip

    def _socket_turn_over(
        self, socket: Socket, lane: str | None, status: int | None, outcome: Outcome, at: float,
        error: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        turn, decoder = socket.streaming.pop(lane)
        response = decoder.summary()
        # The turn's answer as one object (its frames are the socket's, among the others): what
        # the report reads; an error frame when there was one.
        answer = error if error is not None else {
            "id": response.response_id, "status": response.status,
            "output": response.output_items,
        }  # fmt: skip
        self.out.put(FlowRow(turn, status=status, response_body=self.out.redact.dumps(answer),
                             ended_at=at, outcome=outcome))  # fmt: skip
        self._calls(turn, response, at)


def _of_turn(turn: str, event: StringEvent) -> StringEvent:
    """A string event of a socket turn's decoder, its string named by the turn too (the
    socket's redaction holds the strings of every lane's response)."""
    return event._replace(string=(turn, event.string))


def _at_frame(strings: list[StringEvent], index: int) -> list[StringEvent]:
    """A frame's string events, their pieces at its index among the socket's frames."""
    return [e._replace(event=index) if isinstance(e, Piece | Pieces) else e for e in strings]


def _frame_of(sse_text: str) -> str:
    """A frame back from the SSE text `format_event` made of it (its data lines joined), however
    large: the redaction works on SSE text, the socket keeps frames."""
    return "\n".join(line[6:] for line in sse_text.split("\n") if line.startswith("data: "))


def _output(item: dict[str, Any]) -> ToolReturn:
    """A Responses input item that answers a call, as a return: named by its type."""
    return ToolReturn(message_id=_text(item.get("id")), tool=item.get("type"),
                      call_id=_text(item.get("call_id")), body_tool=None, body=None,
                      message=item)  # fmt: skip


def _text(value: Any) -> str | None:
    """A client's id as stored: a string, or nothing (what it sent stays in the item's JSON)."""
    return value if isinstance(value, str) else None
