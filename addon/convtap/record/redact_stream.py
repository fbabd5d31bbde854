"""Redaction of an event stream as it is stored: raw SSE chunks, in order, one held back.

A model streams its text in bare frames (`{"v": " to"}`, `{"v": "ken"}`): a secret in its output
(an API key the user pasted and the model repeats) arrives cut into pieces, across events and
across network chunks, so no single event holds it. So the text that bare frames append to one
string is put back together (with the end of the previous chunk's), searched, and a secret found
in it is replaced piece by piece: the piece where it starts carries the placeholder, the others
lose their part of it, and the stream still decodes (to the redacted text). The last chunk of a
stream is held back until the next one (or the end) has been looked at, in case a secret runs
across the boundary; memory holds at most one chunk per stream.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from convtap.record.redact import Redactor, StreamState, find_secrets, hints, value_hints
from convtap.wire.jsonvalue import dumps, loads
from convtap.wire.sse import SSEEvent, format_event

# A delta ending in a string `v` (a bare frame, an append, ...) as the server writes it; the
# string's JSON text (escapes kept) in group 1: what is appended, put back together.
_STRING_DELTA = re.compile(
    r'event: delta\ndata: \{(?:"p": ?("[^"\\\n]*"), ?"o": ?"append", ?)?'
    r'"v": ?"([^"\\\n]*(?:\\.[^"\\\n]*)*)"\}\n\n'
)
TAIL = 400  # characters of appended text kept to find a secret cut at a chunk boundary

Keep = Callable[[float, int, str], None]  # (time, events, text): one raw row


@dataclass
class Held:
    at: float
    text: str
    events: list[SSEEvent]
    keep: Keep  # where it goes when it goes (its flow's raw rows)


@dataclass
class StreamRedaction:
    """One stream's redaction (a turn's legs, or a Responses stream) and its held chunk."""

    redactor: Redactor
    state: StreamState = field(default_factory=StreamState)
    held: Held | None = None
    tail: str = ""  # the end of the appended text so far, as JSON string text
    values_clean: bool = True  # no hint of a secret value in the stream so far
    keys_clean: bool = True  # no hint of a secret key (or path) in the stream so far

    def hinted(self, keys: bool, values: bool) -> None:
        """What `hints` found in the stream's text: its messages are looked at as closely."""
        self.keys_clean = self.keys_clean and not keys
        self.values_clean = self.values_clean and not values

    def chunk(self, at: float, text: str, events: list[SSEEvent], keep: Keep) -> None:
        """A chunk's complete events: the held one goes out (redacted), this one is held."""
        # the rest, an append's path (or None for a bare frame), its string, the rest, ...
        parts = _STRING_DELTA.split(text)
        window = self.tail + "".join(parts[2::3])
        paths = [p for p in parts[1::3] if p]
        keys, values = hints("".join(parts[0::3]) + "".join(paths))
        values = values or value_hints(window)
        self.tail = window[-TAIL:]
        self.hinted(keys, values)
        if not (keys or values or self.state.secret_path):
            self.flush()
            self.held = Held(at, text, events, keep)
            return
        # A secret may run from the held chunk into this one: look at both together.
        merged = [*(self.held.events if self.held else []), *events]
        redacted = self._redact(merged, values)
        if self.held is not None:
            held, count = self.held, len(self.held.events)
            held.keep(held.at, count, self._text(held.text, held.events, redacted[:count]))
            redacted = redacted[count:]
        self.held = Held(at, self._text(text, events, redacted), redacted, keep)

    def flush_older(self, than: float) -> None:
        """A held chunk that waited since before `than` goes out (the stream paused)."""
        if self.held is not None and self.held.at < than:
            self.flush()

    def flush(self) -> None:
        """The stream (or its leg) ended, or the next chunk is clean: the held one goes out."""
        if self.held is not None:
            self.held.keep(self.held.at, len(self.held.events), self.held.text)
        self.held = None

    @staticmethod
    def _text(original: str, before: list[SSEEvent], after: list[SSEEvent]) -> str:
        if before == after:
            return original
        return "".join(format_event(e) for e in after)

    def _redact(self, events: list[SSEEvent], scrub: bool) -> list[SSEEvent]:
        """Every event redacted on its own (keys, paths, values), then the text that runs of
        bare frames append, put back together and redacted across them."""
        out: list[SSEEvent] = []
        run: list[tuple[int, str]] = []  # (position in out, decoded piece)
        for event in events:
            value = _parsed(event.data)
            piece = value.get("v") if isinstance(value, dict) and len(value) == 1 else None
            if event.event == "delta" and isinstance(piece, str) and not self.state.secret_path:
                run.append((len(out), piece))
                out.append(event)
                continue
            if event.event == "delta" and isinstance(value, dict) and "p" in value:
                self._close_run(out, run)  # an explicit path: a new string, maybe
                run = []
                if value.get("o") == "append" and isinstance(value.get("v"), str):
                    redacted = self.redactor.event_text(event.data, scrub, self.state)
                    if redacted == event.data:
                        run.append((len(out), value["v"]))
                        out.append(event)
                        continue
                    out.append(event._replace(data=redacted))
                    continue
            redacted = self.redactor.event_text(event.data, scrub, self.state)
            out.append(event if redacted == event.data else event._replace(data=redacted))
        self._close_run(out, run)
        return out

    def _close_run(self, out: list[SSEEvent], run: list[tuple[int, str]]) -> None:
        """Find secrets in the text a run of pieces makes, and cut them out of the pieces."""
        if not run:
            return
        whole = "".join(piece for _, piece in run)
        spans = find_secrets(whole)
        if not spans:
            return
        start = 0
        for position, piece in run:
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
                out[position] = event._replace(data=dumps({"v": text}) or event.data)
            start = end


def _parsed(data: str) -> object:
    try:
        return loads(data)
    except (ValueError, RecursionError):
        return None
