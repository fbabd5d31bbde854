"""A WebSocket's server frames as stored: the stream items a turn continued on the user socket
carries are SSE text no decoder reads here, so what their events append is read from them (as
`StreamRedaction` reads events), and a secret cut across frames is put back together as one cut
across network chunks (`stream`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from convtap.redact.redactor import Redactor
from convtap.redact.stream import StreamRedaction
from convtap.wire.events import Appended
from convtap.wire.jsonvalue import dumps, loads_or_none
from convtap.wire.sse import SSEEvent, SSEParser
from convtap.wire.wsturn import frame_messages

KeepFrame = Callable[[float, str], None]  # (time, frame text): one raw row


@dataclass
class FrameRedaction:
    """A WebSocket's server frames as stored. A turn continued there streams its text in the
    stream items of many frames, so a secret may be cut across frames as across chunks: the
    items' SSE text goes through one `StreamRedaction` (one frame held back), and each frame is
    written with its items' text as redacted there (then redacted as a frame: keys, values)."""

    redactor: Redactor
    stream: StreamRedaction = field(init=False)

    def __post_init__(self) -> None:
        self.stream = StreamRedaction(self.redactor)

    def frame(self, at: float, text: str, keep: KeepFrame) -> None:
        value = loads_or_none(text)
        items = _stream_items(value)
        if not items:  # another topic, a heartbeat: the turn's held frames wait on
            keep(at, self.redactor.text(text))
            return
        sse = "".join(item["encoded_item"] for item in items)

        def write(when: float, count: int, redacted: str) -> None:
            if redacted == sse:
                keep(when, self.redactor.text(text))
                return
            items[0]["encoded_item"] = redacted  # the items chain in order: one carries it all
            for item in items[1:]:
                item["encoded_item"] = ""
            keep(when, self.redactor.text(dumps(value) or text))

        events = SSEParser().feed(sse.encode())
        self.stream.chunk(at, sse, events, write, appended(events))

    def flush(self) -> None:
        self.stream.flush()


def _stream_items(frame: object) -> list[dict[str, Any]]:
    """The stream items (turn topics' SSE slices) a frame carries, in frame order."""
    found = []
    for message, _ in frame_messages(frame if isinstance(frame, list) else []):
        payload = message.get("payload")
        inner = payload.get("payload") if isinstance(payload, dict) else None
        if isinstance(inner, dict) and isinstance(inner.get("encoded_item"), str):
            found.append(inner)
    return found


def appended(events: Sequence[SSEEvent]) -> Appended:
    """What events no decoder read append (bare frames, appends: their strings and paths), and
    the data of the others."""
    found = Appended([], [], [])
    for event in events:
        value = loads_or_none(event.data) if event.event == "delta" else None
        value = value if isinstance(value, dict) else {}
        piece, path = value.get("v"), value.get("p")
        if isinstance(piece, str) and len(value) == 1:
            found.pieces.append(piece)
        elif isinstance(piece, str) and isinstance(path, str) and value.get("o") == "append":
            found.pieces.append(piece)
            found.paths.append(dumps(path) or "")
        else:
            found.others.append(event.data)
    return found
