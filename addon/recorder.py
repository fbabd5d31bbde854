"""The recording pipeline, fed plain values by the mitmproxy addon (live) and by import (offline).

Requests, response bytes and WebSocket frames go in; redacted rows go to a sink (the store's
writer) and one line per tool call and tool return goes to `echo`. Turns are stitched here: a
resume leg continues the open turn of its conversation, and a WebSocket turn topic continues the
turn whose stream handed off to it (PROTOCOL.md "Resume", "WebSocket handoff").
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from addon.delta import Update
from addon.redact import Redactor
from addon.responses_recorder import ResponsesSide
from addon.rules import Auditor, Call, Finding
from addon.session import (
    TurnRequest,
    conversation_nodes,
    endpoint_kind,
    parse_json,
    read_turn_request,
)
from addon.sse import SSEEvent
from addon.store import dumps
from addon.turn import TurnDecoder, handoff_topic, message_text, tool_call

WS_BACKLOG = 2000  # frames kept per socket until a turn claims their topic
WRITTEN_MEMORY = 100_000  # message rows remembered, so that unchanged echoes are not rewritten


class Sink(Protocol):
    def put(self, kind: str, table: str, row: dict[str, Any]) -> None: ...


@dataclass
class Exchange:
    """What the recorder needs of an HTTP request."""

    id: str
    method: str
    url: str
    host: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes | None
    started_at: float
    source: str = "live"


@dataclass
class Turn:
    id: str
    request: TurnRequest
    client: str | None
    started_at: float
    decoder: TurnDecoder = field(default_factory=TurnDecoder)
    ws_topic: str | None = None


@dataclass
class FlowState:
    kind: str
    turn: Turn | None = None
    seq: int = 0
    tapped: bool = False
    backlog: deque[str] = field(default_factory=lambda: deque(maxlen=WS_BACKLOG))


class Recorder:
    def __init__(
        self, sink: Sink, redactor: Redactor, echo: Callable[[str], None] | None = None
    ) -> None:
        self.sink, self.redact = sink, redactor
        self.echo = echo or (lambda line: None)
        self.flows: dict[str, FlowState] = {}
        self.open_turns: dict[str, Turn] = {}  # conversation id -> its turn still streaming
        self.topics: dict[str, Turn] = {}  # WebSocket turn topic -> the turn it continues
        self.known_calls: dict[str, str] = {}  # call id -> recipient, for the live lines
        self.echoed: set[str] = set()  # calls already printed (history echoes repeat them)
        self.written: dict[str, tuple[Any, ...]] = {}  # message id -> what its row holds
        self.auditor = Auditor()  # the contract rules, checked as the session happens
        self.responses = ResponsesSide(self)  # the Responses API flows

    # -- HTTP ------------------------------------------------------------------------------------

    def request(self, ex: Exchange) -> bool:
        """A request; True when it is one of ours (its response will be recorded)."""
        kind = endpoint_kind(ex.method, ex.path)
        if kind is None:
            return False
        state = self.flows[ex.id] = FlowState(kind)
        body = parse_json(ex.body)
        client = next((v for k, v in ex.headers if k.lower() == "user-agent"), None)
        conversation_id = body.get("conversation_id") if isinstance(body, dict) else None
        if kind == "conversation":
            state.turn = self._start_turn(ex, read_turn_request(body), client)
            self._report(self.auditor.request(ex.id, self.redact.json(body), ex.started_at))
        elif kind == "prepare" and isinstance(conversation_id, str):
            self.auditor.prepare(conversation_id, ex.started_at)
        elif kind == "responses":
            self.responses.request(ex.id, body, ex.started_at)
        elif kind == "resume" and isinstance(conversation_id, str):
            state.turn = self.open_turns.get(conversation_id)
        self.sink.put(
            "upsert",
            "flows",
            {
                "id": ex.id,
                "kind": kind,
                "method": ex.method,
                "url": self.redact.url(ex.url),
                "host": ex.host,
                "path": ex.path.split("?", 1)[0],
                "client": client,
                "request_headers": dumps(self.redact.headers(ex.headers)),
                "request_body": self._body_text(kind, ex.body, body),
                "conversation_id": conversation_id if isinstance(conversation_id, str) else None,
                "turn_id": state.turn.id if state.turn else None,
                "started_at": ex.started_at,
                "source": ex.source,
            },
        )
        return True

    def response_headers(self, flow_id: str, headers: Iterable[tuple[str, str]]) -> bool:
        """True when the response is a stream to tap: feed its bytes to `response_chunk`."""
        state = self.flows.get(flow_id)
        content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
        if state is None or not content_type.startswith("text/event-stream"):
            return False
        if state.kind == "responses":
            self.responses.start(flow_id)
        elif state.turn is None:
            return False
        state.tapped = True
        return True

    def response_chunk(self, flow_id: str, data: bytes, at: float | None = None) -> None:
        state = self.flows.get(flow_id)
        turn = state.turn if state is not None else None
        if state is not None and state.kind == "responses" and state.tapped:
            self.responses.chunk(flow_id, data, time.time() if at is None else at)
            return
        if state is None or turn is None or not state.tapped:
            return
        at = time.time() if at is None else at

        def keep(text: bytes, events: list[SSEEvent]) -> None:
            self.keep_raw(flow_id, at, "sse", len(events), self.redact.sse(text, events))

        updates = turn.decoder.feed(data, keep)
        self._updates(turn, updates, at)

    def response_end(
        self,
        flow_id: str,
        status: int | None,
        headers: list[tuple[str, str]],
        body: bytes | None,
        outcome: str,
        at: float | None = None,
    ) -> None:
        """The response is over (complete, or `outcome` says why not). `body` is the whole body
        when it was not tapped (JSON answers, or an SSE body read back from a file)."""
        state = self.flows.get(flow_id)
        if state is None:
            return
        at = time.time() if at is None else at
        turn = state.turn
        is_sse = any(
            k.lower() == "content-type" and v.startswith("text/event-stream") for k, v in headers
        )
        if state.kind == "responses":
            cut = self.responses.end(flow_id, None if state.tapped else body, at)
            if cut and outcome == "complete":
                outcome = cut
        if turn is not None and not state.tapped and is_sse and body is not None:
            state.tapped = True
            self.response_chunk(flow_id, body, at)
        parsed = None if is_sse else parse_json(body)
        if turn is not None and state.tapped:
            turn.decoder.end_leg()
            if turn.decoder.truncated and outcome == "complete":
                outcome = "truncated"
            self._persist(turn, at)
        if state.kind == "conversation-get":
            self._nodes(flow_id, parsed, at)
        self.sink.put(
            "upsert",
            "flows",
            {
                "id": flow_id,
                "status": status,
                "response_headers": dumps(self.redact.headers(headers)),
                "response_body": None if is_sse else self._body_text(state.kind, body, parsed),
                "ended_at": at,
                "outcome": outcome,
            },
        )
        if state.kind != "websocket":
            del self.flows[flow_id]

    def keep_raw(self, flow_id: str, at: float, event: str, count: int, data: str) -> None:
        """One row of raw events, in the flow's order: an SSE chunk's completed events (as the
        SSE text that `reprocess` feeds to the decoder again) or a WebSocket frame, redacted."""
        state = self.flows[flow_id]
        self.sink.put("insert", "events", {
            "flow_id": flow_id, "seq": state.seq, "at": at, "event": event, "count": count,
            "data": data,
        })  # fmt: skip
        state.seq += 1

    def lost(self, flow_id: str, size: int) -> None:
        """The proxy could not hand over `size` bytes of this flow's body (the recorder was too
        far behind): say so on the flow and in the turn's decode errors."""
        detail = f"the recorder fell behind: {size} bytes of this body were not recorded"
        self.failure(flow_id, detail)
        state = self.flows.get(flow_id)
        if state is not None and state.turn is not None:
            state.turn.decoder.decoder.record_error(-1, "recorder-overload", detail)

    def failure(self, flow_id: str, detail: str) -> None:
        """Our own failure on a flow, kept with it (the traffic went on)."""
        self.sink.put("upsert", "flows", {"id": flow_id, "failure": detail[:2000]})

    # -- WebSocket -------------------------------------------------------------------------------

    def ws_message(self, flow_id: str, from_client: bool, text: str, at: float | None) -> None:
        state = self.flows.get(flow_id)
        if state is None:
            return
        at = time.time() if at is None else at
        event = "ws:client" if from_client else "ws:server"
        self.keep_raw(flow_id, at, event, 1, self.redact.text(text))
        if from_client:
            return
        state.backlog.append(text)
        for turn in list(self.topics.values()):
            self._updates(turn, turn.decoder.feed_ws_frame(text), at)

    def ws_end(self, flow_id: str) -> None:
        self.flows.pop(flow_id, None)
        for topic, turn in list(self.topics.items()):
            turn.decoder.close()
            self._persist(turn, time.time())
            del self.topics[topic]

    def close(self) -> None:
        """Shutdown or end of import: write what every unfinished turn holds."""
        self._report(self.auditor.finish())
        for turn in {id(t): t for t in [*self.open_turns.values(), *self.topics.values()]}.values():
            turn.decoder.close()
            self._persist(turn, time.time())
        self.open_turns.clear()
        self.topics.clear()

    # -- turns -----------------------------------------------------------------------------------

    def _start_turn(self, ex: Exchange, request: TurnRequest, client: str | None) -> Turn:
        turn = Turn(ex.id, request, client, ex.started_at)
        if request.conversation_id:
            self.open_turns[request.conversation_id] = turn
        for signature in request.signatures:
            self.sink.put(
                "upsert",
                "tool_signatures",
                {
                    "turn_id": turn.id,
                    "name": str(signature.get("name")),
                    "signature": dumps(signature),
                },
            )
        for n, ret in enumerate(request.returns):
            self.sink.put(
                "upsert",
                "tool_returns",
                {
                    "id": f"{ex.id}:{n}",
                    "protocol": "f-conversation",
                    "flow_id": ex.id,
                    "conversation_id": request.conversation_id,
                    "parent_message_id": request.parent_message_id,
                    "message_id": ret.message_id,
                    "tool": ret.tool,
                    "body_call_id": ret.call_id,
                    "body_tool": ret.body_tool,
                    "message": dumps(self.redact.json(ret.message)),
                    "returned_at": ex.started_at,
                },
            )
            target = request.parent_message_id or ret.call_id or "?"
            answers = self.known_calls.get(target) or self.known_calls.get(ret.call_id or "")
            paired = f"answers {answers} call {target}" if answers else "answers no recorded call"
            self.echo(f"return  {ret.tool or '?'}  {ret.message_id or '-'}  {paired}")
        self._persist(turn, ex.started_at)
        return turn

    def _updates(self, turn: Turn, updates: list[Update], at: float) -> None:
        for update in updates:
            if update.kind == "message":
                self._message(turn, turn.decoder.decoder.messages[update.value], at)
            elif update.kind == "event" and update.value.get("type") == "stream_handoff":
                self._claim_topic(turn, at)
        self._track_open(turn)

    def _claim_topic(self, turn: Turn, at: float) -> None:
        topic = handoff_topic(turn.decoder.decoder.events)
        if topic is None or topic in self.topics:
            return
        turn.ws_topic = topic
        self.topics[topic] = turn
        for state in self.flows.values():  # frames that came before the handoff was seen
            for frame in state.backlog:
                self._updates(turn, turn.decoder.feed_ws_frame(frame), at)

    def _track_open(self, turn: Turn) -> None:
        """A turn stays open to resume legs until its stream completes or says [DONE]; a first
        turn learns its conversation id from the stream."""
        d = turn.decoder.decoder
        conversation_id = d.conversation_id or turn.request.conversation_id
        if conversation_id is None:
            return
        if d.done or d.stream_complete:
            if self.open_turns.get(conversation_id) is turn:
                del self.open_turns[conversation_id]
        else:
            self.open_turns[conversation_id] = turn

    def _write_message(self, turn: Turn, message: dict[str, Any], at: float) -> None:
        """A message's row, written when its turn (or leg) ends, and only when it changed since
        it was last written: history echoes repeat every earlier message on every turn."""
        text = message_text(message)
        metadata = message.get("metadata")
        fingerprint = (
            message.get("status"),
            message.get("end_turn"),
            message.get("recipient"),
            len(text),
            len(metadata) if isinstance(metadata, dict) else -1,
        )
        if self.written.get(message["id"]) == fingerprint:
            return
        if len(self.written) >= WRITTEN_MEMORY:  # forget the oldest half
            for key in list(self.written)[: WRITTEN_MEMORY // 2]:
                del self.written[key]
        self.written[message["id"]] = fingerprint
        author = message.get("author") or {}
        content = message.get("content") or {}
        conversation_id = turn.decoder.decoder.conversation_id or turn.request.conversation_id
        redacted = self.redact.json(message)
        self.sink.put(
            "upsert",
            "messages",
            {
                "id": message["id"],
                "conversation_id": conversation_id,
                "turn_id": turn.id,
                "role": author.get("role"),
                "name": author.get("name"),
                "recipient": message.get("recipient"),
                "channel": message.get("channel"),
                "content_type": content.get("content_type") if isinstance(content, dict) else None,
                "status": message.get("status"),
                "text": message_text(redacted),
                "json": dumps(redacted),
                "first_seen_at": at,
                "updated_at": at,
            },
        )

    def _message(self, turn: Turn, message: dict[str, Any], at: float) -> None:
        """A message appeared or changed status: the rules learn its id, and a call is recorded
        (and printed, and checked) as soon as it is complete."""
        conversation_id = turn.decoder.decoder.conversation_id or turn.request.conversation_id
        self.auditor.seen(conversation_id, [message["id"]])
        call = tool_call(message)
        if call is None:
            return
        self.known_calls[call.call_id] = call.recipient
        self.sink.put(
            "upsert",
            "tool_calls",
            {
                "call_id": call.call_id,
                "protocol": "f-conversation",
                "turn_id": turn.id,
                "conversation_id": conversation_id,
                "recipient": call.recipient,
                "kind": call.kind,
                "tool": call.tool,
                "arguments": dumps(self.redact.json(call.arguments)),
                "arguments_text": call.arguments_text,
                "complete": int(call.complete),
                "called_at": at,
            },
        )
        if call.complete and call.call_id not in self.echoed:
            self.echoed.add(call.call_id)
            self.echo(f"call    {call.recipient}  {call.call_id}  {call.arguments_text}")
            self._report(
                self.auditor.call(
                    Call(
                        call.call_id,
                        call.recipient,
                        call.kind,
                        call.tool,
                        call.arguments,
                        call.arguments_text,
                        conversation_id,
                        turn.id,
                        at,
                    )
                )
            )

    def _report(self, findings: list[Finding]) -> None:
        for finding in findings:
            row = asdict(finding)
            row["evidence"] = dumps(row["evidence"])
            row["created_at"] = time.time()
            self.sink.put("insert", "findings", row)
            where = finding.call_id or finding.return_id or finding.flow_id
            self.echo(f"finding {finding.severity:<7} {finding.rule}  {finding.message}  ({where})")

    def _persist(self, turn: Turn, at: float) -> None:
        d = turn.decoder.decoder
        for message in d.messages.values():
            self._message(turn, message, at)
            self._write_message(turn, message, at)
        req = turn.request
        self.sink.put(
            "upsert",
            "turns",
            {
                "id": turn.id,
                "conversation_id": d.conversation_id or req.conversation_id,
                "parent_message_id": req.parent_message_id,
                "model": req.model,
                "client": turn.client,
                "challenge": self.redact.placeholder(req.challenge) if req.challenge else None,
                "execution_target": dumps(self.redact.json(req.execution_target)),
                "message_ids": dumps(req.message_ids),
                "encoding": d.encoding,
                "done": int(d.done),
                "stream_complete": int(d.stream_complete),
                "truncated": int(turn.decoder.truncated),
                "event_count": d.event_count,
                "legs": turn.decoder.legs,
                "ws_topic": turn.ws_topic,
                "errors": dumps([e._asdict() for e in d.errors]),
                "started_at": turn.started_at,
                "ended_at": at,
            },
        )

    def _nodes(self, flow_id: str, body: Any, at: float) -> None:
        conversation_id, nodes = conversation_nodes(body)
        for node in nodes:
            self.sink.put(
                "upsert",
                "conversation_nodes",
                {
                    "conversation_id": conversation_id,
                    "node_id": node["node_id"],
                    "message_id": node.get("id"),
                    "role": (node.get("author") or {}).get("role"),
                    "flow_id": flow_id,
                    "seen_at": at,
                },
            )

    def _body_text(self, kind: str, raw: bytes | None, parsed: Any) -> str | None:
        if not raw:
            return None
        if parsed is None:
            return f"<{len(raw)} bytes, not JSON>"
        value = self.redact.every_string(parsed) if kind == "sentinel" else self.redact.json(parsed)
        return dumps(value)
