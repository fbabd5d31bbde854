"""One turn: the f/conversation body, its resume legs and its WebSocket continuation.

Each leg is framed on its own (an event cut at the end of one body is dropped, never joined to
the next), while the delta state and the event count carry over (docs/protocol.md, "Resume"). The
WebSocket leg starts a fresh delta state ("WebSocket handoff"). Tool calls are read off the
decoded messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from convtap.vocab import CallKind, DecodeErrorKind, WireProtocol
from convtap.wire.calls import ToolCall
from convtap.wire.delta import DeltaDecoder
from convtap.wire.events import Decoded, DecodeError, DecoderEvent
from convtap.wire.jsonvalue import JSON, loads
from convtap.wire.sse import SSEParser
from convtap.wire.typed import message_errors
from convtap.wire.wsturn import TurnTopicAssembler

PROTOCOL = WireProtocol.CONVERSATION


def tool_call(message: dict[str, Any]) -> ToolCall | None:
    """The call a message makes, if it is an assistant message whose recipient is not `all`."""
    recipient = message.get("recipient")
    author = message.get("author")
    if not isinstance(recipient, str) or recipient in ("", "all"):
        return None
    if not isinstance(author, dict) or author.get("role") != "assistant":
        return None
    kind, tool = CallKind.BUILTIN, recipient
    for prefix, name in (("local.", CallKind.LOCAL), ("functions.", CallKind.FUNCTIONS)):
        if recipient.startswith(prefix):
            kind, tool = name, recipient[len(prefix) :]
    text = message_text(message)
    try:
        parsed = loads(text)
    except ValueError:
        parsed = None
    status = message.get("status")
    return ToolCall(
        protocol=PROTOCOL,
        call_id=message["id"],
        item_id=None,
        namespace=None,
        recipient=recipient,
        kind=kind,
        tool=tool,
        arguments=parsed if isinstance(parsed, dict) else None,
        arguments_text=text,
        complete=isinstance(status, str) and status != "in_progress",
    )


def message_text(message: dict[str, Any]) -> str:
    """The text of a message: `content.text` (code), else its string parts joined."""
    content = message.get("content")
    if not isinstance(content, dict):
        return ""
    if isinstance(content.get("text"), str):
        return str(content["text"])
    parts = content.get("parts")
    if isinstance(parts, list):
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def tool_calls(messages: Iterable[dict[str, Any]]) -> list[ToolCall]:
    return [call for m in messages if (call := tool_call(m)) is not None]


def handoff_topic(event: dict[str, Any] | None) -> str | None:
    """The WebSocket topic a `stream_handoff` event subscribes to, if any."""
    options = event.get("options") if event is not None else None
    for option in options if isinstance(options, list) else ():
        if isinstance(option, dict) and option.get("type") == "subscribe_ws_topic":
            topic = option.get("topic_id")
            if isinstance(topic, str):
                return topic
    return None


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """What a turn's stream said so far, as one value (read when a leg or the turn ends)."""

    encoding: str | None
    conversation_id: str | None
    done: bool
    stream_complete: bool
    truncated: bool
    event_count: int
    dispatched: int  # events dispatched, [DONE] included
    legs: int
    messages: list[dict[str, Any]]  # in order of first appearance, latest state
    events: list[dict[str, JSON]]  # typed events kept (up to the decoder's bound)
    other_events: list[dict[str, JSON]]
    errors: list[DecodeError]

    def tool_calls(self) -> list[ToolCall]:
        return tool_calls(self.messages)

    def result(self) -> dict[str, Any]:
        """The decoded turn, in `convtap decode --format json`'s shape (a contract)."""
        return {
            "protocol": PROTOCOL,
            "encoding": self.encoding,
            "conversation_id": self.conversation_id,
            "done": self.done,
            "stream_complete": self.stream_complete,
            "truncated": self.truncated,
            "event_count": self.event_count,
            "messages": self.messages,
            "events": self.events,
            "other_events": self.other_events,
            "errors": [e._asdict() for e in self.errors],
            "tool_calls": [c.as_json() for c in self.tool_calls()],
        }


class TurnDecoder:
    """Feed legs of one turn, chunk by chunk; each `feed` says what the chunk did (`Decoded`),
    and `summary()` what the turn's stream said so far."""

    def __init__(self, sources: bool = False) -> None:
        self._decoder = DeltaDecoder(sources)  # `sources`: strings followed (`Decoded.strings`)
        self._truncated = False
        self._legs = 0
        self._parser: SSEParser | None = None
        self._ws: TurnTopicAssembler | None = None
        self._checked: set[str] = set()  # finished messages validated (bounded as messages are)

    def feed(self, chunk: bytes) -> Decoded:
        """Bytes of the current HTTP leg (a new leg starts after `end_leg`)."""
        if self._parser is None:
            self._parser = SSEParser()
            self._legs += 1
        decoder = self._decoder
        block = self._parser.read(chunk, runs=True)
        first = decoder.event_index
        found = decoder.feed_all(block.events)
        for position in block.bad_utf8:  # WHATWG decodes them with U+FFFD; we say so too
            found += decoder.record_error(
                first + position,
                DecodeErrorKind.INVALID_UTF8,
                "bytes that are not UTF-8 (read as U+FFFD)",
            )
        return Decoded(found, block.text, block.events, first, decoder.strings(),
                       block.unread_lines, block.unread_text, block.utf8)  # fmt: skip

    def end_leg(self) -> bool:
        """The current HTTP leg's body is over; True when it was cut inside an event. The
        messages finished by then are validated (`_check_finished`)."""
        if self._parser is not None:
            self._truncated = self._parser.close()
            self._parser = None
        self._check_finished()
        return self._truncated

    def _check_finished(self) -> None:
        """Each finished message (its `status` set, and no longer `in_progress`) validated once
        against its model (`wire.typed`): a wrong type is a decode error at the last event so
        far. Done where a leg ends, never per chunk: what a message holds then does not depend
        on how the network cut its stream."""
        decoder = self._decoder
        for mid, message in decoder.messages.items():
            status = message.get("status")
            if mid in self._checked or status is None or status == "in_progress":
                continue
            self._checked.add(mid)
            for detail in message_errors(message):
                decoder.record_error(decoder.event_index - 1, DecodeErrorKind.WRONG_TYPE, detail)

    def feed_ws_frame(self, frame: str | bytes) -> Decoded:
        """One WebSocket frame; the turn topic continues the turn as its last leg."""
        if self._ws is None:
            self.end_leg()
            self._ws = TurnTopicAssembler(handoff_topic(self._decoder.handoff))
            self._decoder.reset_state()  # docs/protocol.md: decoded "with a fresh decoder"
        decoded = self.feed(self._ws.feed(frame).encode())
        for detail in self._ws.errors:
            decoded.events.extend(self._decoder.record_error(-1, DecodeErrorKind.WS_FRAME, detail))
        self._ws.errors.clear()  # told: the decoder keeps (and bounds) them
        return decoded

    def close(self) -> list[DecoderEvent]:
        """The turn is over: what its last, unended pieces did."""
        found: list[DecoderEvent] = []
        if self._ws is not None:
            found += self.feed(self._ws.close().encode()).events
        self.end_leg()
        return found

    def summary(self) -> TurnSummary:
        d = self._decoder
        return TurnSummary(
            encoding=d.encoding,
            conversation_id=d.conversation_id,
            done=d.done,
            stream_complete=d.stream_complete,
            truncated=self._truncated,
            event_count=d.event_count,
            dispatched=d.event_index,
            legs=self._legs,
            messages=list(d.messages.values()),
            events=list(d.events),
            other_events=list(d.other_events),
            errors=list(d.errors),
        )


def decode_turn(bodies: Sequence[bytes], ws_frames: Iterable[str] = ()) -> TurnSummary:
    """Decode whole bodies (the first, then its resume legs) and WebSocket frames."""
    turn = TurnDecoder()
    for body in bodies:
        turn.feed(body)
        turn.end_leg()
    for frame in ws_frames:
        turn.feed_ws_frame(frame)
    turn.close()
    return turn.summary()
