"""A user WebSocket's server frames as stored. A turn continued on the socket streams its text in
the stream items of many frames (SSE text in each item's `encoded_item`, delta encoding v1
included), so a secret may be cut across frames as across network chunks. Each turn topic's
items are decoded here by a delta decoder that follows strings (`wire.provenance`), in the order
they came, each item once; every frame is one row of the socket's `StreamRedaction`, whose events
are the SSE events of its items, so that a secret found in a string is cut out of the items that
brought its characters, and a frame is held back while a string it brought text to is not
settled (as a chunk is). A frame is then redacted whole as a frame (keys, values)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from convtap.redact.redactor import Redactor
from convtap.redact.stream import Carrier, StreamRedaction, format_events
from convtap.wire.bounded import Bounded
from convtap.wire.delta import DeltaDecoder
from convtap.wire.jsonvalue import dumps, loads_or_none
from convtap.wire.provenance import Piece, Pieces, StringEvent
from convtap.wire.sse import SSEEvent, SSEParser
from convtap.wire.wsturn import TURN_TOPIC_PREFIX, TurnTopicAssembler, frame_messages

KeepFrame = Callable[[float, str], None]  # (time, frame text): one raw row
TOPICS = 64  # turn topics followed at once per socket (the least recently used forgotten)
ITEMS = 100_000  # stream items remembered (a catch-up repeats them)


class _Topic:
    """One turn topic of the socket: its items put in chain order, decoded once each."""

    def __init__(self, topic: str) -> None:
        self.assembler = TurnTopicAssembler(topic)
        self.decoder = DeltaDecoder(sources=True)
        # items taken, not in order yet: their frame's row, and the index of their first event
        self.parsed: Bounded[str, tuple[Carrier, int, list[SSEEvent]]] = Bounded(ITEMS)
        self.index_of: Bounded[int, int] = Bounded(ITEMS)  # decoder's event -> the socket's


class FrameRedaction:
    """A WebSocket's server frames as stored, in order, each held back as a chunk is."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.stream = StreamRedaction(redactor)
        self._topics: Bounded[str, _Topic] = Bounded(TOPICS)
        self._stored: Bounded[str, str | None] = Bounded(ITEMS)  # item id -> its stored text
        self._events = 0  # the socket's SSE events so far: the index of the next

    def frame(self, at: float, text: str, keep: KeepFrame) -> None:
        value = loads_or_none(text)
        events: list[SSEEvent] = []
        slots: list[tuple[dict[str, Any], int, int, str]] = []  # item, its events, its tail
        first = self._events

        rendered = False

        def render(redacted: Sequence[SSEEvent]) -> str:
            nonlocal rendered
            rendered = True
            return self._frame_text(value, slots, events, redacted)

        def write(when: float, count: int, stored: str) -> None:
            if not rendered and any(start < 0 for _, start, _, _ in slots):
                stored = render(events)  # its repeated items as their first time was stored
            keep(when, stored)

        topics: dict[str, _Topic] = {}
        taken: list[tuple[_Topic, str, int, list[SSEEvent]]] = []
        for name, item in _stream_items(value):
            topic = topics[name] = self._topic(name)
            item_id = item.get("stream_item_id")
            if not isinstance(item_id, str) or topic.assembler.seen(item_id) or any(
                item_id == other and topic is mine for mine, other, _, _ in taken
            ):  # fmt: skip
                slots.append((item, -1, -1, ""))  # a catch-up: stored as it was the first time
                continue
            block_events, tail = _events_of(item["encoded_item"])
            slots.append((item, len(events), len(events) + len(block_events), tail))
            taken.append((topic, item_id, first + len(events), block_events))
            events += block_events
        self._events += len(events)
        whole = self.redactor.text(text)  # as stored when no string of it holds a secret
        carrier = Carrier(at, whole, events, first, write, render, waiting=len(taken))
        for topic, item_id, index, block_events in taken:
            topic.parsed[item_id] = (carrier, index, block_events)
        strings: list[StringEvent] = []
        for name, topic in topics.items():
            for item_id, _ in topic.assembler.feed_items(text):
                strings += self._decoded(name, topic, item_id)
        self.stream.chunk(carrier, strings)

    def _topic(self, name: str) -> _Topic:
        topic = self._topics.get(name)
        if topic is None:
            topic = self._topics[name] = _Topic(name)
        return topic

    def _decoded(self, name: str, topic: _Topic, item_id: str) -> list[StringEvent]:
        """An item now in order, fed to its topic's decoder: what it did to strings, its pieces
        at the socket's indices of the events that brought them."""
        taken = topic.parsed.pop(item_id, None)
        if taken is None:
            return []
        carrier, index, events = taken
        carrier.waiting -= 1
        decoder = topic.decoder
        base = decoder.event_index
        decoder.feed_all(events)
        for n in range(decoder.event_index - base):
            topic.index_of[base + n] = index + n
        return [e._replace(string=(name, e.string), event=topic.index_of.get(e.event, -1))
                if isinstance(e, Piece | Pieces) else e._replace(string=(name, e.string))
                for e in decoder.strings()]  # fmt: skip

    def _frame_text(
        self, value: Any, slots: list[tuple[dict[str, Any], int, int, str]],
        events: Sequence[SSEEvent], redacted: Sequence[SSEEvent],
    ) -> str:  # fmt: skip
        """The frame with its items' SSE text as stored, redacted as a frame."""
        for item, start, end, tail in slots:
            item_id = item.get("stream_item_id")
            if start < 0:
                earlier = self._stored.get(item_id) if isinstance(item_id, str) else None
                if earlier is not None:
                    item["encoded_item"] = earlier
                continue
            if any(a is not b for a, b in zip(redacted[start:end], events[start:end],
                                               strict=True)):  # fmt: skip
                item["encoded_item"] = stored = format_events(redacted[start:end]) + tail
                if isinstance(item_id, str):
                    self._stored[item_id] = stored
        return self.redactor.text(dumps(value) or "")

    def flush(self) -> None:
        """The socket closed: items still waiting for their parent are decoded (in envelope
        order), and everything held goes out."""
        strings: list[StringEvent] = []
        for name, topic in self._topics.items():
            for item_id, _ in topic.assembler.close_items():
                strings += self._decoded(name, topic, item_id)
        for topic in self._topics.values():
            for carrier, _, _ in topic.parsed.values():
                carrier.waiting = 0
        if strings:
            self.stream.strings_only(strings)
        self.stream.flush()


def _events_of(sse: str) -> tuple[list[SSEEvent], str]:
    """An item's SSE text as events, and what follows the last complete one."""
    block = SSEParser().read(sse.encode("utf-8", "surrogatepass"))
    events = list(block.events)
    return events, sse[len(block.text) :] if sse.startswith(block.text) else ""


def _stream_items(frame: object) -> list[tuple[str, dict[str, Any]]]:
    """The stream items (turn topics' SSE slices) a frame carries, with their topics, in frame
    order."""
    found = []
    for message, topic in frame_messages(frame if isinstance(frame, list) else []):
        topic = message.get("topic_id", topic)
        payload = message.get("payload")
        inner = payload.get("payload") if isinstance(payload, dict) else None
        if (
            isinstance(topic, str) and topic.startswith(TURN_TOPIC_PREFIX)
            and isinstance(inner, dict) and isinstance(inner.get("encoded_item"), str)
        ):  # fmt: skip
            found.append((topic, inner))
    return found
