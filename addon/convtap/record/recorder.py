"""The recording pipeline: `handle(event)` for every event of every flow, live or offline.

Requests, response bytes and WebSocket frames go in; redacted rows go to a sink (the store's
writer), one line per tool call and tool return goes to `echo`, and what happened goes to the
auditor (`audit`: the same happenings `convtap audit` reads back from a capture), whose findings
go to both. The protocol sides (`ConversationSide`, `ResponsesSide`) hold what each protocol
needs across flows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from convtap.contract.auditor import Auditor
from convtap.contract.happenings import (
    ConversationRequest,
    Happening,
    Prepared,
    RequestRefused,
    SessionEnded,
    is_refusal,
)
from convtap.journal.events import (
    BodyChunk,
    OwnFailure,
    RecorderEvent,
    RequestSeen,
    ResponseEnded,
    ResponseStarted,
    WebSocketEnded,
    WebSocketMessage,
)
from convtap.journal.events import is_event_stream as is_event_stream  # the export's too
from convtap.record.conversation import ConversationSide, Turn
from convtap.record.output import Echo, Output, RowSink, Sink
from convtap.record.responses import ResponsesSide
from convtap.redact.frames import FrameRedaction
from convtap.redact.redactor import Redactor
from convtap.store.rows import FlowRow
from convtap.vocab import Outcome, RawKind
from convtap.wire.jsonvalue import dumps
from convtap.wire.session import (
    SOCKETS,
    STREAMED,
    Endpoint,
    endpoint_kind,
    parse_json,
    read_turn_request,
)


@dataclass
class FlowState:
    kind: Endpoint
    turn: Turn | None = None
    tapped: bool = False
    frames: FrameRedaction | None = None  # a WebSocket's server frames


LIVE_LIMIT = 4096  # calls, turns and conversations the live audit remembers


class Recorder:
    """`auditor` is the live audit (a new one unless given: a restarted recorder's, rebuilt
    from the capture); with `audit` off there is none, as for an import, whose findings are
    made from the whole capture once it is in."""

    def __init__(
        self,
        sink: Sink,
        redactor: Redactor,
        echo: Callable[[str], None] | None = None,
        auditor: Auditor | None = None,
        *,
        audit: bool = True,
    ) -> None:
        self.rows, self.echo = RowSink(sink, redactor), Echo(echo)
        self.auditor = (auditor or Auditor(LIVE_LIMIT)) if audit else None
        self.out = Output(self.rows, self.echo, self.audit)
        self.flows: dict[str, FlowState] = {}
        self.conversation = ConversationSide(self.out)
        self.responses = ResponsesSide(self.out)

    def handle(self, event: RecorderEvent) -> None:
        match event:
            case RequestSeen():
                self._request(event)
            case ResponseStarted():
                self._started(event)
            case BodyChunk():
                self._chunk(event)
            case ResponseEnded():
                self._ended(event)
            case WebSocketMessage():
                self._ws_message(event)
            case WebSocketEnded():
                self._ws_end(event)
            case OwnFailure():
                self.rows.failure(event.flow_id, event.detail)

    def audit(self, happening: Happening) -> None:
        """The one way into the auditor: its findings are stored and said."""
        if self.auditor is not None:
            findings = self.auditor.handle(happening)
            self.rows.findings(findings)
            self.echo.findings(findings)

    def handle_safely(self, event: RecorderEvent) -> None:
        """`handle`, with a failure of our own kept on its flow: one bad flow must not end the
        recording."""
        try:
            self.handle(event)
        except Exception as exc:
            self.handle(OwnFailure(event.flow_id, f"{type(exc).__name__}: {exc}"))

    def close(self) -> None:
        """Shutdown or end of import: the last findings, and what every open turn and socket
        holds."""
        self.audit(SessionEnded())
        self.conversation.close()
        for state in self.flows.values():
            if state.frames is not None:
                state.frames.flush()

    # -- HTTP ------------------------------------------------------------------------------------

    def _request(self, ev: RequestSeen) -> None:
        kind = endpoint_kind(ev.method, ev.path)
        if kind is None:
            return
        state = self.flows[ev.flow_id] = FlowState(kind)
        body = parse_json(ev.body)
        agent = next((v for k, v in ev.headers if k.lower() == "user-agent"), None)
        client = None if agent is None else self.out.redact.scrub(agent)  # as its header is
        conversation_id = body.get("conversation_id") if isinstance(body, dict) else None
        conversation_id = conversation_id if isinstance(conversation_id, str) else None
        out = self.out
        if kind == Endpoint.CONVERSATION:
            # Read once, redacted (its challenge a placeholder): the turn and the audit share it.
            redacted = out.redact.json(body)
            request = read_turn_request(redacted)
            state.turn = self.conversation.start_turn(ev.flow_id, request, client, ev.at)
            self.audit(ConversationRequest(ev.flow_id, redacted, request, ev.at))
        elif kind == Endpoint.PREPARE:
            self.audit(Prepared(conversation_id, ev.at))
        elif kind == Endpoint.RESPONSES:
            self.responses.request(ev.flow_id, body, ev.at)
        elif kind == Endpoint.RESPONSES_SOCKET:
            self.responses.socket_open(ev.flow_id, ev.url, ev.host, ev.path, client)
        elif kind == Endpoint.RESUME:
            state.turn = self.conversation.resume_turn(ev.flow_id, conversation_id, ev.at)
        out.put(FlowRow(
            ev.flow_id, kind=kind, method=ev.method, url=out.redact.url(ev.url), host=ev.host,
            path=out.redact.url(ev.path.split("?", 1)[0]), client=client,
            request_headers=dumps(out.redact.headers(ev.headers)),
            request_body=self._body_text(kind, ev.body, body), conversation_id=conversation_id,
            turn_id=state.turn.id if state.turn else None, started_at=ev.at, source=ev.source,
        ))  # fmt: skip

    def _started(self, ev: ResponseStarted) -> None:
        state = self.flows.get(ev.flow_id)
        if state is None or state.kind not in STREAMED or not is_event_stream(ev.headers):
            return
        if state.kind == Endpoint.RESPONSES:
            self.responses.start(ev.flow_id)
        state.tapped = True

    def _chunk(self, ev: BodyChunk) -> None:
        state = self.flows.get(ev.flow_id)
        if state is None or not state.tapped:
            return
        if state.kind == Endpoint.RESPONSES:
            self.responses.chunk(ev.flow_id, ev.data, ev.at)
        elif state.turn is not None:
            self.conversation.chunk(ev.flow_id, state.turn, ev.data, ev.at)

    def _ended(self, ev: ResponseEnded) -> None:
        state = self.flows.get(ev.flow_id)
        if state is None:
            return
        body, outcome, streamed = ev.body, ev.outcome, is_event_stream(ev.headers)
        if streamed and body is not None and not state.tapped:  # a whole stream, read back
            self._started(ResponseStarted(ev.flow_id, ev.status, ev.headers))
            self._chunk(BodyChunk(ev.flow_id, body, ev.at))
            body = None
        truncated = False
        if state.kind == Endpoint.RESPONSES:
            truncated = self.responses.end(ev.flow_id, None if state.tapped else body, ev.at)
        elif state.turn is not None and state.tapped:
            truncated = self.conversation.end_leg(ev.flow_id, state.turn, ev.at)
        if truncated and outcome == Outcome.COMPLETE:
            outcome = Outcome.TRUNCATED
        parsed = None if streamed else parse_json(body)
        if state.kind == Endpoint.CONVERSATION and is_refusal(ev.status):
            self.audit(RequestRefused(ev.flow_id))
        if state.kind == Endpoint.CONVERSATION_GET:
            self.conversation.nodes(ev.flow_id, parsed, ev.at)
        out = self.out
        out.put(FlowRow(
            ev.flow_id, status=ev.status, response_headers=dumps(out.redact.headers(ev.headers)),
            response_body=None if streamed else self._body_text(state.kind, body, parsed),
            ended_at=ev.at, outcome=outcome,
        ))  # fmt: skip
        if state.kind not in SOCKETS or ev.status != 101:  # a socket's frames follow its 101
            del self.flows[ev.flow_id]
            self.rows.forget(ev.flow_id)

    # -- WebSocket -------------------------------------------------------------------------------

    def _ws_message(self, ev: WebSocketMessage) -> None:
        state = self.flows.get(ev.flow_id)
        if state is None:
            return
        if state.kind == Endpoint.RESPONSES_SOCKET:
            self.responses.socket_frame(ev.flow_id, ev.from_client, ev.text, ev.at)
            return
        if ev.from_client:
            self.out.raw(ev.flow_id, ev.at, RawKind.WS_CLIENT, 1, self.out.redact.text(ev.text))
            return
        if state.frames is None:
            state.frames = FrameRedaction(self.out.redact)

        seq = self.out.reserve(ev.flow_id)

        def keep(when: float, text: str) -> None:
            self.out.raw(ev.flow_id, when, RawKind.WS_SERVER, 1, text, seq)

        state.frames.frame(ev.at, ev.text, keep)
        self.conversation.ws_frame(ev.text, ev.at)

    def _ws_end(self, ev: WebSocketEnded) -> None:
        if (state := self.flows.pop(ev.flow_id, None)) is not None:
            if state.kind == Endpoint.RESPONSES_SOCKET:
                self.responses.socket_end(ev.flow_id, ev.at or time.time())
            if state.frames is not None:
                state.frames.flush()
            self.rows.forget(ev.flow_id)
            self.conversation.ws_end(ev.at or time.time())

    def _body_text(self, kind: Endpoint, raw: bytes | None, parsed: object) -> str | None:
        if not raw:
            return None
        if parsed is None:
            return f"<{len(raw)} bytes, not JSON>"
        redact = self.out.redact
        return (
            dumps(redact.every_string(parsed))
            if kind == Endpoint.SENTINEL
            else redact.dumps(parsed)
        )
