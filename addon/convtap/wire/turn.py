"""One turn: the f/conversation body, its resume legs and its WebSocket continuation.

Each leg is framed on its own (an event cut at the end of one body is dropped, never joined to
the next), while the delta state and the event count carry over (PROTOCOL.md "Resume"). The
WebSocket leg starts a fresh delta state ("WebSocket handoff"). Tool calls are read off the
decoded messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from convtap.wire.delta import Appended, DeltaDecoder, Update
from convtap.wire.jsonvalue import loads
from convtap.wire.sse import SSEEvent, SSEParser
from convtap.wire.wsturn import TurnTopicAssembler

PROTOCOL = "f-conversation"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """An assistant message addressed to a tool (PROTOCOL.md "Local tool calls")."""

    call_id: str  # the message id: the stream carries no other
    recipient: str
    kind: str  # local | functions | builtin
    tool: str
    arguments: dict[str, Any] | None
    arguments_text: str
    complete: bool


def tool_call(message: dict[str, Any]) -> ToolCall | None:
    """The call a message makes, if it is an assistant message whose recipient is not `all`."""
    recipient = message.get("recipient")
    author = message.get("author")
    if not isinstance(recipient, str) or recipient in ("", "all"):
        return None
    if not isinstance(author, dict) or author.get("role") != "assistant":
        return None
    kind, tool = "builtin", recipient
    for prefix, name in (("local.", "local"), ("functions.", "functions")):
        if recipient.startswith(prefix):
            kind, tool = name, recipient[len(prefix) :]
    text = message_text(message)
    try:
        parsed = loads(text)
    except ValueError:
        parsed = None
    status = message.get("status")
    return ToolCall(
        call_id=message["id"],
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


def handoff_topic(decoder: DeltaDecoder) -> str | None:
    """The WebSocket topic the turn's `stream_handoff` event subscribes to, if any."""
    event = decoder.handoff
    options = event.get("options") if event is not None else None
    for option in options if isinstance(options, list) else ():
        if isinstance(option, dict) and option.get("type") == "subscribe_ws_topic":
            topic = option.get("topic_id")
            if isinstance(topic, str):
                return topic
    return None


class TurnDecoder:
    """Feed legs of one turn; read the decoded turn with `result()`."""

    def __init__(self) -> None:
        self.decoder = DeltaDecoder()
        self.truncated = False
        self.legs = 0
        self._parser: SSEParser | None = None
        self._ws: TurnTopicAssembler | None = None

    def feed(
        self,
        chunk: bytes,
        on_events: Callable[[str, Sequence[SSEEvent], Appended], object] | None = None,
    ) -> list[Update]:
        """Bytes of the current HTTP leg (a new leg starts after `end_leg`). `on_events` sees
        the events this chunk completed, with the SSE text they came in, comment lines included
        (the recorder keeps it raw), and what they appended to strings, once they are decoded."""
        if self._parser is None:
            self._parser = SSEParser()
            self.legs += 1
        parser = self._parser
        events = parser.feed_runs(chunk)
        first = self.decoder.event_index
        updates = self.decoder.feed_all(events, collect=on_events is not None)
        if on_events is not None and parser.consumed_text and self.decoder.appended is not None:
            on_events(parser.consumed_text, events, self.decoder.appended)
        for position in parser.bad_utf8:  # WHATWG decodes them with U+FFFD; we say so too
            updates += self.decoder.record_error(
                first + position, "invalid-utf8", "bytes that are not UTF-8 (read as U+FFFD)"
            )
        return updates

    @property
    def unread_lines(self) -> bool:
        """Whether the text the last `feed` completed holds lines the decoder does not read
        (comments, other fields)."""
        return self._parser is not None and self._parser.unread_lines

    def end_leg(self) -> None:
        if self._parser is not None:
            self.truncated = self._parser.close()
            self._parser = None

    def feed_ws_frame(self, frame: str | bytes) -> list[Update]:
        """One WebSocket frame; the turn topic continues the turn as its last leg."""
        if self._ws is None:
            self.end_leg()
            self._ws = TurnTopicAssembler(handoff_topic(self.decoder))
            self.decoder.reset_state()  # PROTOCOL.md: decoded "with a fresh decoder"
        updates = self.feed(self._ws.feed(frame).encode())
        for detail in self._ws.errors:
            updates += self.decoder.record_error(-1, "ws-frame", detail)
        self._ws.errors.clear()  # told: the decoder keeps (and bounds) them
        return updates

    def close(self) -> list[Update]:
        updates: list[Update] = []
        if self._ws is not None:
            updates += self.feed(self._ws.close().encode())
        self.end_leg()
        return updates

    def tool_calls(self) -> list[ToolCall]:
        return tool_calls(self.decoder.messages.values())

    def result(self) -> dict[str, Any]:
        """The decoded turn, in `convtap decode --format json`'s shape (a contract)."""
        d = self.decoder
        return {
            "protocol": PROTOCOL,
            "encoding": d.encoding,
            "conversation_id": d.conversation_id,
            "done": d.done,
            "stream_complete": d.stream_complete,
            "truncated": self.truncated,
            "event_count": d.event_count,
            "messages": list(d.messages.values()),
            "events": d.events,
            "other_events": d.other_events,
            "errors": [e._asdict() for e in d.errors],
            "tool_calls": [asdict(c) for c in self.tool_calls()],
        }


def decode_turn(bodies: Sequence[bytes], ws_frames: Iterable[str] = ()) -> TurnDecoder:
    """Decode whole bodies (the first, then its resume legs) and WebSocket frames."""
    turn = TurnDecoder()
    for body in bodies:
        turn.feed(body)
        turn.end_leg()
    for frame in ws_frames:
        turn.feed_ws_frame(frame)
    turn.close()
    return turn
