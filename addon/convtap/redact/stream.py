"""Redaction of an event stream as it is stored: raw SSE chunks, in order, one held back.

A model streams its text in bare frames (`{"v": " to"}`, `{"v": "ken"}`): a secret in its output
(an API key the user pasted and the model repeats) arrives cut into pieces, across events and
across network chunks, so no single event holds it. So the text that bare frames append to one
string is put back together (with the end of the previous chunk's), searched, and a secret found
in it is replaced piece by piece: the piece where it starts carries the placeholder, the others
lose their part of it, and the stream still decodes (to the redacted text). The last chunks of
a stream are held back until the ones after them have appended `TAIL` characters (more than a
secret is long), or the stream pauses or ends, in case a secret runs across them: one chunk
mostly (a network chunk appends far more), more when they are small (a WebSocket frame carries
one stream item); at most `MAX_HELD` chunks and `MAX_HELD_TEXT` characters per stream.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from convtap.redact.patterns import find_secrets, hints, keyed_secrets
from convtap.redact.redactor import Redactor, StreamState
from convtap.wire.events import Appended
from convtap.wire.jsonvalue import dumps, loads, loads_or_none
from convtap.wire.responses import delta_text
from convtap.wire.sse import SSEEvent, SSEParser, format_event
from convtap.wire.wsturn import frame_messages

# A delta ending in a string `v` (a bare frame, an append, ...) as the server writes it; the
# string's JSON text (escapes kept) in group 1: what is appended, put back together.
_STRING_DELTA = re.compile(
    r'event: delta\ndata: \{(?:"p": ?("[^"\\\n]*"), ?"o": ?"append", ?)?'
    r'"v": ?"([^"\\\n]*(?:\\.[^"\\\n]*)*)"\}\n\n'
)
TAIL = 400  # characters of appended text kept to find a secret cut at a chunk boundary
MAX_HELD = 64  # chunks held back per stream, at most
MAX_HELD_TEXT = 1 << 20  # characters of them, at most (beyond, the oldest go out)

Keep = Callable[[float, int, str], None]  # (time, events, text): one raw row
Piece = tuple[int, str, str]  # (position among the events, its text, the field that holds it)
KeepFrame = Callable[[float, str], None]  # (time, frame text): one raw row


@dataclass
class Held:
    at: float
    text: str
    events: Sequence[SSEEvent]
    keep: Keep  # where it goes when it goes (its flow's raw rows)
    appended: int  # characters of text its bare frames and appends add

    def out(self) -> None:
        self.keep(self.at, len(self.events), self.text)


@dataclass
class StreamRedaction:
    """One stream's redaction (a turn's legs, or a Responses stream) and its held chunk."""

    redactor: Redactor
    state: StreamState = field(default_factory=StreamState)
    held: list[Held] = field(default_factory=list)  # oldest first
    tail: str = ""  # the end of the appended text so far, as JSON string text
    values_clean: bool = True  # no hint of a secret value in the stream so far
    keys_clean: bool = True  # no hint of a secret key (or path) in the stream so far

    def hinted(self, keys: bool, values: bool) -> None:
        """What `hints` found in the stream's text: its messages are looked at as closely."""
        self.keys_clean = self.keys_clean and not keys
        self.values_clean = self.values_clean and not values

    def chunk(
        self,
        at: float,
        text: str,
        events: Sequence[SSEEvent],
        keep: Keep,
        appended: Appended | None = None,
        unread: bool = True,
    ) -> None:
        """A chunk's complete events: held back, and what was held long enough goes out.
        `appended` is what the decoder saw them append (else the text is searched for it);
        `unread` is False when the text is known to hold no line the decoder does not read
        (a comment, another field)."""
        if unread:
            text = self.redactor.unread(text)
        if appended is None:
            # the rest, an append's path (or None for a bare frame), its string, the rest, ...
            parts = _STRING_DELTA.split(text)
            pieces = "".join(parts[2::3])
            rest = "".join(parts[0::3]) + "".join(filter(None, parts[1::3]))
        else:
            pieces = "".join(appended.pieces)
            # each path as the JSON string it came in: its last segment is a key there
            rest = "".join(appended.others) + "".join(f'"{path}"' for path in appended.paths)
        window = self.tail + pieces
        keys, values = hints(rest)
        # The appended text may be JSON text (a call's arguments): a secret key named there
        # counts, once its look is confirmed (prose says "token" often).
        appended_keys, appended_values = hints(window)
        values = values or appended_values
        keys = keys or (appended_keys and bool(keyed_secrets(window)))
        self.tail = window[-TAIL:]
        self.hinted(keys, values)
        if keys or values or self.state.secret_path:
            # A secret may run from the held chunks into this one: look at them all together.
            redacted = self._redact([*(e for h in self.held for e in h.events), *events], values)
            for held in self.held:
                count = len(held.events)
                held.text = self._text(held.text, held.events, redacted[:count])
                held.events, redacted = redacted[:count], redacted[count:]
            text, events = self._text(text, events, redacted), redacted
        self.held.append(Held(at, text, events, keep, len(pieces)))
        self._release()

    def _release(self) -> None:
        """The oldest held chunks go out while the ones after them append TAIL characters (a
        secret that starts in them has been seen whole), or when none ever appended any."""
        after = sum(held.appended for held in self.held[1:])
        size = sum(len(held.text) for held in self.held)
        while len(self.held) > 1 and (
            after >= TAIL or not self.tail or len(self.held) > MAX_HELD or size > MAX_HELD_TEXT
        ):
            first = self.held.pop(0)
            first.out()
            after -= self.held[0].appended
            size -= len(first.text)

    def flush_older(self, than: float) -> None:
        """Chunks held since before `than` go out (the stream paused)."""
        if self.held and self.held[-1].at < than:
            self.flush()

    def flush(self) -> None:
        """The stream (or its leg) ended: what is held goes out."""
        for held in self.held:
            held.out()
        self.held = []

    @staticmethod
    def _text(original: str, before: Sequence[SSEEvent], after: list[SSEEvent]) -> str:
        if list(before) == after:
            return original
        return "".join(format_event(e) for e in after)

    def _redact(self, events: list[SSEEvent], scrub: bool) -> list[SSEEvent]:
        """Every event redacted on its own (keys, paths, values), then the text that runs of
        bare frames append (or of a Responses API item's `*.delta` events), put back together
        and redacted across them."""
        out: list[SSEEvent] = []
        run: list[Piece] = []
        item: object = None  # the Responses item (and part) the run of deltas continues
        for event in events:
            value = _parsed(event.data)
            piece = value.get("v") if isinstance(value, dict) and len(value) == 1 else None
            if event.event == "delta" and isinstance(piece, str) and not self.state.secret_path:
                run.append((len(out), piece, "v"))
                out.append(event)
                continue
            if event.event == "delta" and isinstance(value, dict) and "p" in value:
                self._close_run(out, run)  # an explicit path: a new string, maybe
                run = []
                if value.get("o") == "append" and isinstance(value.get("v"), str):
                    redacted = self.redactor.event_text(event.data, scrub, self.state)
                    if redacted == event.data:
                        run.append((len(out), value["v"], "v"))
                        out.append(event)
                        continue
                    out.append(event._replace(data=redacted))
                    continue
            redacted = self.redactor.event_text(event.data, scrub, self.state)
            if redacted != event.data:
                event, value = event._replace(data=redacted), _parsed(redacted)
            delta = delta_text(value)
            if delta is not None:
                if delta[0] != item:
                    self._close_run(out, run)
                    run, item = [], delta[0]
                run.append((len(out), delta[1], "delta"))
            out.append(event)
        self._close_run(out, run)
        return out

    def _close_run(self, out: list[SSEEvent], run: list[Piece]) -> None:
        """Find secrets in the text a run of pieces makes, and cut them out of the pieces."""
        if not run:
            return
        whole = "".join(piece for _, piece, _ in run)
        spans = find_secrets(whole, keyed=hints(whole)[0])
        if not spans:
            return
        start = 0
        for position, piece, holder in run:
            end = start + len(piece)
            new = []
            cursor = start
            for a, b, secret in spans:
                if b <= start or a >= end:
                    continue
                new.append(whole[cursor : max(a, cursor)])
                if start <= a < end:
                    new.append(self.redactor.placeholder(secret))
                cursor = max(cursor, min(b, end))
            new.append(whole[cursor:end])
            text = "".join(new)
            if text != piece:
                event = out[position]
                value = _parsed(event.data)
                if isinstance(value, dict):
                    value[holder] = text
                    out[position] = event._replace(data=dumps(value) or event.data)
            start = end


def _parsed(data: str) -> object:
    try:
        return loads(data)
    except (ValueError, RecursionError):
        return None


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

        self.stream.chunk(at, sse, SSEParser().feed(sse.encode()), write)

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
