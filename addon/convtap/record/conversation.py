"""Recording f/conversation: turns, their resume legs and WebSocket continuation, messages,
tool calls and tool returns (docs/protocol.md, "Resume", "WebSocket handoff", "Local tool calls").

A resume leg continues the open turn of its conversation (or, when that turn was never seen,
starts one of its own so that nothing it carries is lost); a WebSocket turn topic continues the
turn whose stream handed off to it.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from convtap.contract.happenings import CallMade, MadeCall, MessagesShown
from convtap.contract.registry import Where
from convtap.record.output import Output
from convtap.redact.stream import Carrier, StreamRedaction
from convtap.store.compact import message_without_text
from convtap.store.rows import (
    ConversationNodeRow,
    MessageRow,
    ToolCallRow,
    ToolReturnRow,
    ToolSignatureRow,
    TurnRow,
)
from convtap.vocab import MESSAGE_STREAM_COMPLETE, STREAM_HANDOFF, RawKind, WireProtocol
from convtap.wire.bounded import Bounded
from convtap.wire.events import (
    ControlEvent,
    ConversationSeen,
    DecoderEvent,
    MessageChanged,
    StreamDone,
)
from convtap.wire.jsonvalue import dumps
from convtap.wire.session import TurnRequest, answered_call, conversation_nodes
from convtap.wire.turn import TurnDecoder, handoff_topic, message_text, tool_call

WRITTEN_MEMORY = 20_000  # message rows remembered, so that unchanged echoes are not rewritten
KNOWN_CALLS = 4096  # call ids remembered for the live `return` lines
OPEN_TURNS = 1024  # turns that may still get a resume leg or a WebSocket continuation
WS_BACKLOG = 2000  # server frames kept until a turn claims their topic


@dataclass
class Turn:
    id: str
    request: TurnRequest
    client: str | None
    started_at: float
    redaction: StreamRedaction  # what is stored of its stream, secrets cut out
    decoder: TurnDecoder = field(default_factory=lambda: TurnDecoder(sources=True))
    ws_topic: str | None = None
    streamed_conversation: str | None = None  # the conversation the stream named
    handoff: dict[str, Any] | None = None  # the stream's last `stream_handoff` event
    finished: bool = False  # the stream completed or said [DONE]

    @property
    def conversation_id(self) -> str | None:
        return self.streamed_conversation or self.request.conversation_id


class ConversationSide:
    def __init__(self, out: Output) -> None:
        self.out = out
        self.open_turns: Bounded[str, Turn] = Bounded(OPEN_TURNS)  # conversation -> its turn
        self.topics: Bounded[str, Turn] = Bounded(OPEN_TURNS)  # WebSocket turn topic -> turn
        # call id -> (call id, recipient), for the live `return` lines
        self.known_calls: Bounded[str, tuple[str, str]] = Bounded(KNOWN_CALLS)
        self.echoed: Bounded[str, bool] = Bounded(KNOWN_CALLS)  # calls already printed
        self.written: Bounded[str, tuple[Any, ...]] = Bounded(WRITTEN_MEMORY)  # message rows
        self.ws_backlog: deque[str] = deque(maxlen=WS_BACKLOG)  # frames before their handoff

    # -- requests --------------------------------------------------------------------------------

    def start_turn(self, flow_id: str, request: TurnRequest, client: str | None, at: float) -> Turn:
        """A conversation request: a new turn, its declarations and the returns it carries."""
        turn = Turn(flow_id, request, client, at, StreamRedaction(self.out.redact))
        if request.conversation_id:
            self._open(request.conversation_id, turn)
        for signature in request.signatures:
            name, text = str(signature.get("name")), self.out.redact.dumps(signature)
            self.out.put(ToolSignatureRow(turn.id, name, text))
        for n, ret in enumerate(request.returns):
            where = Where(flow_id=flow_id, conversation_id=request.conversation_id)
            message = self.out.redact.dumps(ret.message)
            self.out.put(ToolReturnRow.of(ret, WireProtocol.CONVERSATION, where, n, message, at,
                                          request.parent_message_id))  # fmt: skip
            call = answered_call(request.parent_message_id, ret.call_id, self.known_calls)
            paired = f"answers {call[1]} call {call[0]}" if call else "answers no recorded call"
            self.out.say(f"return  {ret.tool or '?'}  {ret.message_id or '-'}  {paired}")
        self.persist(turn, at)
        return turn

    def resume_turn(self, flow_id: str, conversation_id: str | None, at: float) -> Turn:
        """A resume leg: the turn it continues, or a turn of its own when that was not seen."""
        turn = self.open_turns.get(conversation_id or "")
        if turn is None:
            request = TurnRequest(conversation_id=conversation_id)
            turn = Turn(flow_id, request, None, at, StreamRedaction(self.out.redact))
        return turn

    # -- streams ---------------------------------------------------------------------------------

    def chunk(self, flow_id: str, turn: Turn, data: bytes, at: float) -> None:
        decoded = turn.decoder.feed(data)
        if decoded.text:  # the events, and the lines around them: kept raw too
            seq = self.out.reserve(flow_id)
            text = decoded.text
            if decoded.unread_lines:
                text = self.out.redact.unread(text, decoded.unread_text)
            utf8 = decoded.utf8 if text is decoded.text else None  # the bytes as they came

            def raw(when: float, count: int, stored: str) -> None:
                # stored as it came (the very text): from its bytes, not encoded again
                self.out.raw(flow_id, when, RawKind.SSE, count, stored, seq,
                             utf8 if stored is text else None)  # fmt: skip

            carrier = Carrier(at, text, decoded.sse, decoded.first, raw, utf8=utf8)
            turn.redaction.chunk(carrier, decoded.strings)
            for event in decoded.events:  # a text echoed whole is searched with its row's
                if type(event) is MessageChanged:
                    self._vouch(turn, carrier, event.message)
        self._updates(turn, decoded.events, at)

    def end_leg(self, flow_id: str, turn: Turn, at: float) -> bool:
        """The leg's body is over; True when it was cut inside an event. A stream that did not
        finish may go on in a resume leg: what its redaction holds waits for it (a secret may
        be cut across the two)."""
        truncated = turn.decoder.end_leg()
        if turn.finished or self.open_turns.get(turn.conversation_id or "") is not turn:
            turn.redaction.flush()  # no resume leg can continue it
        self.persist(turn, at)
        return truncated

    def ws_frame(self, text: str, at: float) -> None:
        """A server frame of the user socket: every claimed turn topic may continue with it, and
        a turn that hands off later takes the frames that came before (the backlog)."""
        self.ws_backlog.append(text)
        for turn in list(self.topics.values()):
            self._updates(turn, turn.decoder.feed_ws_frame(text).events, at)

    def ws_end(self, at: float) -> None:
        for topic, turn in list(self.topics.items()):
            self._updates(turn, turn.decoder.close(), at)
            self.persist(turn, at)
            del self.topics[topic]

    def _claim_topic(self, turn: Turn, at: float) -> None:
        """The turn handed off to a WebSocket topic: it takes the frames already seen."""
        topic = handoff_topic(turn.handoff)
        if topic is None or topic in self.topics:
            return
        turn.ws_topic = topic
        self.topics[topic] = turn
        for frame in list(self.ws_backlog):
            self._updates(turn, turn.decoder.feed_ws_frame(frame).events, at)

    def close(self) -> None:
        """Shutdown or end of import: write what every unfinished turn holds."""
        now = time.time()
        for turn in {id(t): t for t in [*self.open_turns.values(), *self.topics.values()]}.values():
            turn.redaction.flush()
            self._updates(turn, turn.decoder.close(), now)
            self.persist(turn, now)
        self.open_turns.clear()
        self.topics.clear()

    def nodes(self, flow_id: str, body: Any, at: float) -> None:
        """`GET conversation/<id>`: the tree's nodes (how acceptance of a return is seen)."""
        conversation_id, nodes = conversation_nodes(body)
        for node in nodes:
            self.out.put(ConversationNodeRow(
                conversation_id=conversation_id, node_id=node["node_id"],
                message_id=node["id"], role=node["role"],
                flow_id=flow_id, seen_at=at,
            ))  # fmt: skip

    # -- what the stream says --------------------------------------------------------------------

    def _updates(self, turn: Turn, events: list[DecoderEvent], at: float) -> None:
        for event in events:
            if type(event) is MessageChanged:
                self._message(turn, event.message, at)
            elif type(event) is ControlEvent:
                if event.type == STREAM_HANDOFF:
                    turn.handoff = event.payload
                    self._claim_topic(turn, at)
                elif event.type == MESSAGE_STREAM_COMPLETE:
                    turn.finished = True
            elif type(event) is ConversationSeen:
                turn.streamed_conversation = event.conversation_id
            elif type(event) is StreamDone:
                turn.finished = True
        self._track_open(turn)

    def _track_open(self, turn: Turn) -> None:
        """A turn stays open to resume legs until its stream completes or says [DONE]; a first
        turn learns its conversation id from the stream."""
        conversation_id = turn.conversation_id
        if conversation_id is None:
            return
        if turn.finished:
            if self.open_turns.get(conversation_id) is turn:
                del self.open_turns[conversation_id]
        else:
            self._open(conversation_id, turn)

    def _open(self, conversation_id: str, turn: Turn) -> None:
        """`turn` is the one of its conversation that a resume leg continues. The turn it
        takes the place of (or the oldest, past the bound) will not go on: what its
        redaction holds goes out."""
        turns = self.open_turns
        other = turns.get(conversation_id)
        if other is None and len(turns) >= OPEN_TURNS:
            other = next(iter(turns.values()))
        if other is not None and other is not turn:
            other.redaction.flush()
        turns[conversation_id] = turn

    def _message(self, turn: Turn, message: dict[str, Any], at: float) -> None:
        """A message appeared or changed status: the rules learn its id, and a call is recorded
        (and printed, and checked) as soon as it is complete."""
        conversation_id = turn.conversation_id
        self.out.audit(MessagesShown(conversation_id, (message["id"],)))
        call = tool_call(message)
        if call is None:
            return
        call_id = message["id"]  # the call's id (`ToolCall.call_id`)
        self.known_calls[call_id] = (call_id, call.recipient)
        arguments_text = self.out.redact.text(call.arguments_text)  # stored and printed so
        made = MadeCall(call, Where(conversation_id, call_id, None, turn.id), at)
        self.out.put(ToolCallRow.of(made, self.out.redact.dumps(call.arguments), arguments_text))
        if call.complete and call_id not in self.echoed:
            self.echoed[call_id] = True
            self.out.say(f"call    {call.recipient}  {call_id}  {arguments_text}")
            self.out.audit(CallMade(made))

    def _vouch(self, turn: Turn, carrier: Carrier, message: dict[str, Any]) -> None:
        """The message's text, in the raw row that brought it, is searched with that row: when
        its row is to be written (an unchanged echo is not), `_write_message` need not search
        it again (`StreamRedaction.vouch`)."""
        text = message_text(message)
        if self.written.get(message["id"]) != _fingerprint(message, text):
            turn.redaction.vouch(carrier, message["id"], text)

    def _write_message(self, turn: Turn, message: dict[str, Any], at: float) -> None:
        """A message's row, written when its turn (or leg) ends, and only when it changed since
        it was last written: history echoes repeat every earlier message on every turn."""
        text = message_text(message)
        fingerprint = _fingerprint(message, text)
        if self.written.get(message["id"]) == fingerprint:
            return
        self.written[message["id"]] = fingerprint
        author = message.get("author") or {}
        content = message.get("content") or {}
        # The text is stored once, in `text` (`compact.message_without_text`); a text with a
        # hint of a secret stays in the message, redacted with it as before. Each message is
        # looked at by its own value: what the stream held elsewhere does not matter.
        without = message_without_text(message)
        text_hints = turn.redaction.text_hints(message["id"], text)  # the redaction is given it
        if without is not None and any(text_hints):
            without = None
        stored, stored_text = self.out.redact.message(
            message if without is None else without, text, text_hints
        )
        self.out.put(MessageRow(
            id=message["id"], conversation_id=turn.conversation_id, turn_id=turn.id,
            role=author.get("role"), name=author.get("name"),
            recipient=message.get("recipient"), channel=message.get("channel"),
            content_type=content.get("content_type") if isinstance(content, dict) else None,
            status=message.get("status"), text=stored_text, json=stored,
            first_seen_at=at, updated_at=at, json_without_text=int(without is not None),
        ))  # fmt: skip

    def persist(self, turn: Turn, at: float) -> None:
        d = turn.decoder.summary()
        for message in d.messages:
            self._message(turn, message, at)
            self._write_message(turn, message, at)
        req = turn.request
        redact = self.out.redact
        self.out.put(TurnRow(
            id=turn.id, conversation_id=turn.conversation_id,
            parent_message_id=req.parent_message_id, model=req.model, client=turn.client,
            challenge=req.challenge,  # read from the redacted body: a placeholder
            execution_target=redact.dumps(req.execution_target),
            message_ids=dumps(req.message_ids), encoding=d.encoding, done=int(d.done),
            stream_complete=int(d.stream_complete), truncated=int(d.truncated),
            event_count=d.event_count, legs=d.legs, ws_topic=turn.ws_topic,
            # a decode error may quote the value it could not read
            errors=redact.dumps([e._asdict() for e in d.errors]),
            started_at=turn.started_at, ended_at=at,
        ))  # fmt: skip


def _fingerprint(message: dict[str, Any], text: str) -> tuple[Any, ...]:
    """What tells that a message changed since its row was written."""
    metadata = message.get("metadata")
    return (
        message.get("status"),
        message.get("end_turn"),
        message.get("recipient"),
        len(text),
        len(metadata) if isinstance(metadata, dict) else -1,
    )
