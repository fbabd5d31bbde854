"""What the stream decoders give back: frozen events, h11-style, and one chunk's result.

A decoder is fed bytes (or SSE events) and returns what they did, as values; nothing is read
from a decoder's attributes after a feed. Both protocols' stream decoders (`TurnDecoder` for
f/conversation, `ResponsesStream` for the Responses API) have the same entry, `StreamDecoder`:
`feed(chunk) -> Decoded` for each network chunk, `end_leg() -> bool` when a body ends.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from convtap.vocab import DecodeErrorKind
from convtap.wire.provenance import StringEvent
from convtap.wire.sse import SSEEvent


class DecodeError(NamedTuple):
    """A recorded decoding problem: which dispatched event (0-based), what kind, and why."""

    event_index: int
    kind: DecodeErrorKind
    detail: str


@dataclass(frozen=True, slots=True)
class MessageChanged:
    """A message appeared or changed status. `message` is its state at the end of the feed
    that returned this event: read it then (the decoder goes on changing it in place)."""

    message: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.message["id"])


class ControlEvent(NamedTuple):
    """An event with a `type` that is not a delta (`stream_handoff`, `message_marker`, a
    Responses API event, ...): its parsed data. A tuple, as `DecodeError`: made once per event
    of a stream of them, it costs a third of a frozen dataclass."""

    payload: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.payload.get("type"))


@dataclass(frozen=True, slots=True)
class OtherEvent:
    """An object event of no type and no message (an error envelope, a legacy trailer)."""

    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ConversationSeen:
    """The stream named its conversation (or a new one)."""

    conversation_id: str


@dataclass(frozen=True, slots=True)
class StreamDone:
    """`data: [DONE]`: the server ended the stream."""


DecoderEvent = (
    MessageChanged | ControlEvent | OtherEvent | ConversationSeen | StreamDone | DecodeError
)


_LAST_WORD = re.compile(r"[^\s\"'`,;:<>()\[\]{}]*\Z")


def excerpt(text: str, size: int) -> str:
    """The start of `text` (at most `size` characters) that a decode error quotes, cut before
    the word the bound falls in: a secret cut short there would no longer look like one to the
    redaction of the error, and stay in clear (a secret quoted whole is redacted)."""
    if len(text) <= size:
        return text
    head = text[:size]
    cut = _LAST_WORD.search(head)
    return head[: cut.start() if cut else size] + "…"


@dataclass(frozen=True, slots=True)
class Decoded:
    """What one chunk of a stream did: the decoder's events, and for the recorder, the SSE text
    of the complete events it held (comment lines included: stored raw), those events and the
    stream's index of the first, what they did to strings (`wire.provenance`: where each
    character of a string came from; empty unless the decoder follows strings), and whether the
    text holds lines the decoder does not read."""

    events: list[DecoderEvent]
    text: str
    sse: Sequence[SSEEvent]
    first: int
    strings: list[StringEvent]
    unread_lines: bool
    unread_text: str | None = None  # those lines' text, when the parser knows it (comments)
    utf8: bytes | None = None  # the bytes `text` decodes, when it is exactly them


class StreamDecoder(Protocol):
    """The one decoder entry of both protocols, over any transport that carries SSE bytes."""

    def feed(self, chunk: bytes) -> Decoded: ...

    def end_leg(self) -> bool:
        """The body is over; True when it ended inside an event (the stream was cut)."""
        ...
