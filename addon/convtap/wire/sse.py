"""Server-sent events: bytes in, events out, whatever the chunking.

A sans-I/O parser for the WHATWG "event stream interpretation"
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation),
reduced to what convtap needs: the event type and the data. `id:` and `retry:` are read and
ignored. Lines are split on CR, LF and CRLF only (never on U+2028 or U+0085), so the parser works
on bytes: those three are ASCII, and no byte of a multi-byte UTF-8 sequence can be mistaken for
them. A chunk may end anywhere, even inside a UTF-8 sequence or between CR and LF.

Two deliberate limits, each reported rather than hidden: an event larger than `max_event` bytes
is not kept but dispatched as one `OVERSIZED` event carrying its size, and framing resynchronises
at the next blank line (so the buffer is bounded); an event whose bytes are not valid UTF-8 is
decoded with U+FFFD, as the WHATWG decoder does, and its position is listed in the `Block`'s
`bad_utf8`; the `Block`'s text keeps such bytes as they came (each a lone surrogate, Python's
`surrogateescape`), and the line ends as they came (CRLF; a lone CR as LF, `RawBytes`), so
that the raw events can be stored byte for byte. `read` returns a chunk's whole result as one
value; nothing is read off the parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import repeat
from typing import NamedTuple, overload

from convtap.wire.rawbytes import RawBytes, decoded

_BOM = b"\xef\xbb\xbf"
MAX_EVENT = 4 * 1024 * 1024
# The name of the event that stands for one that was too large: no wire event can carry a name
# with a line break in it.
OVERSIZED = "\nevent-too-large"
# The two shapes the server sends, `data: X` and `event: E` + `data: X`, matched a block at a time.
_SIMPLE = re.compile(rb"(?:event: ([^\n]*)\n)?data: ([^\n]*)\n\n")
_SIMPLE_TEXT = re.compile(_SIMPLE.pattern.decode())
# A line the decoder does not read: a comment (`: …`), a field other than data and event (`id`,
# `retry`, unknown ones), a line of no field; its start (the line end before it, or none). In
# text (the recorder redacts such lines) and in bytes (the parser says it took some in).
UNREAD_LINE = re.compile(r"(?:\A|\n)(?!(?:data|event)(?::|\n|\Z)|\n|\Z)")
_UNREAD = re.compile(UNREAD_LINE.pattern.encode())
# The same after a line end: a pattern that starts with a literal is searched for it (fast),
# where one that starts with `(?:\A|\n)` is tried at every position.
_UNREAD_AFTER_LF = re.compile(UNREAD_LINE.pattern.replace("(?:\\A|\\n)", "\\n", 1))
# Most of a streamed answer: blocks made only of bare frames, `event: delta` + `data: {"v": S}`
# with S a JSON string (its grammar exactly: no raw quote, backslash or control character, and
# only JSON's escapes). Runs of them are not split into events (see `BareRun`). Matched in the
# block's bytes, which are valid UTF-8 there: no byte of a multi-byte sequence is a quote, a
# backslash or a control character, so the grammar reads the same on bytes as on text.
_STRING_BODY = rb'[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*'
_BARE_SHAPES = [  # (a run of them, the bytes before each string)
    (re.compile(b"(?:" + re.escape(head) + _STRING_BODY + b'"}\n\n)+'), head)
    for head in (b'event: delta\ndata: {"v": "', b'event: delta\ndata: {"v":"')
]
# Both heads begin so: a block without it (a history echo) is searched once, not once a head.
_BARE_START = b'event: delta\ndata: {"v":'
_name = lru_cache(maxsize=256)(bytes.decode)  # an event's name: a stream repeats a few


def unread_line_starts(text: str) -> list[int]:
    """Where the lines of `text` that match `UNREAD_LINE` start."""
    starts = [m.end() for m in _UNREAD_AFTER_LF.finditer(text)]
    if text[:1] != "\n" and UNREAD_LINE.match(text):
        starts.insert(0, 0)
    return starts


class SSEEvent(NamedTuple):
    """One dispatched event: its type (`message` unless an `event:` field named one) and data."""

    event: str
    data: str


class BareRun(NamedTuple):
    """Consecutive bare frames of a block, `block[start:end]` (its bytes, valid UTF-8): each is
    `head`, a JSON string's text and '"}\\n\\n' (`_BARE_SHAPES`)."""

    block: bytes
    start: int
    end: int
    head: bytes
    frames: int  # how many: one blank line ends each, and only there

    def array(self) -> bytes:
        """The frames' strings as the UTF-8 of one JSON array of them, to parse in one call
        (orjson reads bytes as they are, where text would be encoded for it first)."""
        between = b'"}\n\n' + self.head
        strings = self.block[self.start + len(self.head) : self.end - 4].replace(between, b'","')
        return b'["' + strings + b'"]'

    def events(self) -> list[SSEEvent]:
        parts = _SIMPLE.split(self.block[self.start : self.end])
        return [SSEEvent("delta", data.decode()) for data in parts[2::3]]


class EventRun(NamedTuple):
    """Consecutive events of a block as the split found them, their names (None: all
    `message`) and their data apart, as the UTF-8 that came (valid: the block decoded): a
    reader that parses the data hands orjson these bytes, with no encoding again."""

    names: list[str] | None
    datas: list[bytes]

    @property
    def frames(self) -> int:
        return len(self.datas)

    def events(self) -> list[SSEEvent]:
        names = self.names or ["message"] * len(self.datas)
        texts = map(bytes.decode, self.datas)
        return list(map(tuple.__new__, repeat(SSEEvent), zip(names, texts, strict=True)))


class Frames(Sequence[SSEEvent]):
    """A block's events as the parser found them (`SSEParser.read` with `runs`): a reader that
    knows `BareRun`s and `EventRun`s takes `parts`; the events are made only when asked for."""

    __slots__ = ("_events", "_size", "parts")

    def __init__(self, parts: list[BareRun | EventRun | list[SSEEvent]]) -> None:
        self.parts = parts
        self._size = sum(len(p) if isinstance(p, list) else p.frames for p in parts)
        self._events: list[SSEEvent] | None = None

    @property
    def events(self) -> list[SSEEvent]:
        if self._events is None:
            parts = self.parts
            self._events = [e for p in parts for e in (p if isinstance(p, list) else p.events())]
        return self._events

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[SSEEvent]:
        return iter(self.events)

    @overload
    def __getitem__(self, index: int) -> SSEEvent: ...
    @overload
    def __getitem__(self, index: slice) -> list[SSEEvent]: ...
    def __getitem__(self, index: int | slice) -> SSEEvent | list[SSEEvent]:
        return self.events[index]


class Block(NamedTuple):
    """What one `SSEParser.read` completed: the events (with runs of bare frames kept whole when
    asked for), their text decoded (invalid UTF-8 bytes as `surrogateescape`'s lone surrogates,
    comment lines included), the
    positions among them of events whose bytes were not UTF-8, and whether the text holds lines
    the decoder does not read (comments, `id:`, `retry:`, unknown fields)."""

    events: list[SSEEvent] | Frames
    text: str
    bad_utf8: tuple[int, ...]
    unread_lines: bool
    unread_text: str | None = None  # those lines, when the parser saw them all (comments)
    utf8: bytes | None = None  # the bytes `text` decodes, when it is exactly them (valid UTF-8)


def format_event(event: SSEEvent) -> str:
    """An event as SSE text that parses back to the same event (the inverse of the parser)."""
    lines = "".join(f"data: {line}\n" for line in event.data.split("\n"))
    return lines + "\n" if event.event == "message" else f"event: {event.event}\n{lines}\n"


class SSEParser:
    """Feed bytes with `read` (or `feed`, for the events alone), get what they completed;
    `close` at the end of the body.

    Only whole events leave the parser: bytes after the last blank line wait in a buffer, and
    `close` reports them as a truncated event instead of dispatching them.
    """

    __slots__ = (
        "_bad_utf8",
        "_bom",
        "_buf",
        "_closed",
        "_raw",
        "_skip_lf",
        "_skipping",
        "_started",
        "_text",
        "_unread",
        "_unread_text",
        "_utf8",
        "max_event",
    )

    def __init__(self, max_event: int = MAX_EVENT) -> None:
        self.max_event = max_event
        # What the `read` under way found, returned in its `Block` (never read from outside).
        self._text = ""
        self._bad_utf8: list[int] = []
        self._utf8: bytes | None = None  # the bytes `_text` decodes, when it is exactly them
        self._unread = False
        self._unread_text: list[str] | None = []  # None: some were not seen one by one
        self._buf = bytearray()  # normalised to LF line ends; starts at a line that starts an event
        self._raw: RawBytes | None = None  # the bytes as they came, once a CR came
        self._skip_lf = False  # the previous chunk ended with CR: a leading LF belongs to it
        self._started = False  # the BOM check has been done
        self._bom = ""  # the stream's leading BOM, until the first block's text keeps it
        self._skipping = -1  # bytes of an oversized event dropped so far (-1: not skipping)
        self._closed = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events `chunk` completed (`read` says more about them)."""
        events = self.read(chunk).events
        assert isinstance(events, list)
        return events

    def read(self, chunk: bytes, runs: bool = False) -> Block:
        """What `chunk` completed; with `runs`, its runs of bare frames are kept whole
        (`Frames`) for a delta v1 decoder."""
        self._text = ""
        self._bad_utf8 = []
        self._unread = False
        self._unread_text = []
        self._utf8 = None
        events = self._feed(chunk, runs)
        seen = self._unread_text
        text = None if seen is None else "".join(seen)
        return Block(events, self._text, tuple(self._bad_utf8), self._unread, text, self._utf8)

    def _feed(self, chunk: bytes, runs: bool) -> list[SSEEvent] | Frames:
        if self._closed:
            raise RuntimeError("feed() after close()")
        if not chunk:
            return []
        came, cr_before = chunk, self._skip_lf
        if self._skip_lf:
            # WHATWG: CRLF is one line end, even when the chunk boundary falls between them.
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
                if self._raw is not None and not self._raw.buf:  # its CR went out: so does it
                    self._text, came = "\n", chunk
        if b"\r" in chunk:
            if chunk[-1:] == b"\r":
                self._skip_lf = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if self._raw is None:  # the bytes before came as the buffer holds them
                self._raw = RawBytes(self._buf)
        buf = self._buf
        scan_from = max(len(buf) - 1, 0)
        buf += chunk
        raw = self._raw
        if raw is not None:
            raw.add(came, cr_before)
        if not self._started:
            # WHATWG: one leading U+FEFF is stripped; it may itself arrive split.
            if len(buf) < len(_BOM) and _BOM.startswith(bytes(buf)):
                return []
            self._started = True
            if buf.startswith(_BOM):  # not an event's, but kept in the text, as it came
                del buf[: len(_BOM)]
                self._bom = "\ufeff"
                if raw is not None:
                    del raw.buf[: len(_BOM)]
            scan_from = 0
        events: list[SSEEvent] = []
        if self._skipping >= 0:
            if not self._skip_oversized(events):
                return events
            scan_from = 0
        end = buf.rfind(b"\n\n", scan_from)
        if end < 0:
            if len(buf) > self.max_event:  # an event that never ends: drop it, wait for its end
                self._skipping = 0
                self._skip_oversized(events)
            return events
        block = bytes(buf[: end + 2])
        del buf[: end + 2]
        lead = self._text  # an LF whose CR went out before
        parsed = self._parse_block(block, runs)
        parsed_text = self._text
        if raw is not None:  # the text keeps the line ends as they came
            came = raw.cut(buf.count(b"\n"))
            self._text = lead + decoded(came)
            if _UNREAD.search(came) is not None:
                self._unread, self._unread_text = True, None
        if self._bom:  # the text parses again as the stream did: its BOM stripped once
            self._text, self._bom = self._bom + self._text, ""
        if raw is not None or lead or events or self._text is not parsed_text:
            self._utf8 = None  # the text is not (only) the block's bytes decoded
        if events:  # an oversized event ended first: rare, so the runs are given up
            return events + list(parsed)
        return parsed

    def _skip_oversized(self, events: list[SSEEvent]) -> bool:
        """Drop bytes up to the blank line that ends the oversized event; True once found."""
        buf = self._buf
        end = buf.find(b"\n\n")
        if end < 0:
            keep = 1 if buf[-1:] == b"\n" else 0  # the blank line may start at the chunk's end
            self._skipping += len(buf) - keep
            del buf[: len(buf) - keep]
            if self._raw is not None:
                self._raw.keep_last_line_end(keep == 1)
            return False
        events.append(SSEEvent(OVERSIZED, str(self._skipping + end)))
        del buf[: end + 2]
        if self._raw is not None:
            self._raw.cut(buf.count(b"\n"))
        self._skipping = -1
        return True

    def close(self) -> bool:
        """End of the body. True when it ended inside an event (the stream was cut)."""
        self._closed = True
        pending = bytes(self._buf)
        self._buf.clear()
        self._raw = None
        if self._skipping >= 0:
            return True
        return any(line and line[:1] != b":" for line in pending.split(b"\n"))

    def _parse_block(self, block: bytes, runs: bool) -> list[SSEEvent] | Frames:
        """Complete lines that end with a blank line, so that no event is left open.

        The usual block holds only the two simple shapes and comment lines: one regex split
        finds them all. Anything else (multi-line data, other fields, invalid UTF-8, an event
        over the limit) goes through the WHATWG steps event by event. With `runs`, the runs of
        bare frames in it are found first and kept whole.
        """
        try:
            self._text = block.decode("utf-8")
            self._utf8 = block
        except UnicodeDecodeError:
            self._text = block.decode("utf-8", "surrogateescape")  # the raw events' bytes
            return self._parse_slowly(block)
        # From here the block is valid UTF-8: it is split as bytes (the data handed on as the
        # bytes that came), each piece decoding to the text's piece at the same place.
        if runs and len(block) <= self.max_event and _BARE_START in block:
            for shape, head in _BARE_SHAPES:
                if head in block:
                    return self._parse_runs(block, shape, head)
        if not runs:  # events wanted as text: cut from the text (no data decoded apart)
            plain = _plain_events(self._text, self.max_event)
            return plain if plain is not None else _events(self._parse_text(block))
        parsed = self._parse_text(block)
        return parsed if isinstance(parsed, list) else Frames([parsed])

    def _parse_runs(
        self, block: bytes, shape: re.Pattern[bytes], head: bytes
    ) -> list[SSEEvent] | Frames:
        """The runs of bare frames of `head`'s shape, and the events between them."""
        parts: list[BareRun | EventRun | list[SSEEvent]] = []
        done = 0  # the bytes before are in `parts`
        at = block.find(head)
        while at >= 0:
            # a run starts an event: at the block's start, or after a blank line
            starts = at == 0 or block[at - 2 : at] == b"\n\n" or (at == 1 and block[:1] == b"\n")
            run = shape.match(block, at) if starts else None
            if run is None:
                at = block.find(head, at + 1)
                continue
            if at > done:
                parts.append(self._parse_text(block[done:at]))
            frames = block.count(b"\n\n", at, run.end())
            parts.append(BareRun(block, at, run.end(), head, frames))
            done = run.end()
            at = block.find(head, done)
        if done == 0:
            parts.append(self._parse_text(block))
        elif done < len(block):
            parts.append(self._parse_text(block[done:]))
        return Frames(parts)

    def _parse_text(self, block: bytes) -> list[SSEEvent] | EventRun:
        """A block's (or a part of one's) events, as the split found them when they are all of
        the simple shapes. `block` is valid UTF-8 (a part of one is cut at an event's start)."""
        parts = _SIMPLE.split(block)
        between = parts[0::3]
        rest = b"".join(between)
        if rest.strip(b"\n"):  # comment lines, or lines of other shapes
            # A match must start a line: in `:data: x` the data field is inside a comment.
            if any(piece and piece[-1:] != b"\n" for piece in between[:-1]):
                return self._parse_slowly(block)
            if any(line[:1] != b":" for line in rest.split(b"\n") if line):
                return self._parse_slowly(block)
            self._unread = True  # comment lines only
            if self._unread_text is not None:
                self._unread_text.append(rest.decode())
        datas = parts[2::3]
        if len(block) > self.max_event and max(map(len, datas), default=0) > self.max_event:
            return self._parse_slowly(block)
        named = parts[1::3]
        names: list[str] | None = None  # no event named: all `message`
        if named.count(None) != len(named):
            if None in named or b"" in named:
                names = [_name(name) if name else "message" for name in named]
            else:
                names = list(map(_name, named))
        if b"" in datas:  # an event whose data is empty is not dispatched
            pairs = zip(names or ["message"] * len(datas), datas, strict=True)
            return [SSEEvent(name, data.decode()) for name, data in pairs if data]
        return EventRun(names, datas)

    def _parse_slowly(self, block: bytes) -> list[SSEEvent]:
        if _UNREAD.search(block):
            self._unread, self._unread_text = True, None
        events: list[SSEEvent] = []
        for piece in block.split(b"\n\n"):
            piece = piece.lstrip(b"\n")
            if not piece:
                continue
            if len(piece) > self.max_event:
                events.append(SSEEvent(OVERSIZED, str(len(piece))))
                continue
            parsed = _parse_lines(piece.split(b"\n"))
            if parsed is None:
                continue
            event, invalid = parsed
            if invalid:
                self._bad_utf8.append(len(events))
            events.append(event)
        return events


def _events(parsed: list[SSEEvent] | EventRun) -> list[SSEEvent]:
    return parsed if isinstance(parsed, list) else parsed.events()


def _plain_events(text: str, max_event: int) -> list[SSEEvent] | None:
    """A block's events when they are all of the simple shapes, each with data, and nothing is
    between them (else None: `SSEParser._parse_text` reads it)."""
    parts = _SIMPLE_TEXT.split(text)
    if "".join(parts[0::3]).strip("\n"):
        return None
    names, datas = parts[1::3], parts[2::3]
    if "" in datas or len(text) > max_event:
        return None
    if None in names or "" in names:
        names = [name or "message" for name in names]
    return list(map(tuple.__new__, repeat(SSEEvent), zip(names, datas, strict=True)))


def _parse_lines(lines: list[bytes]) -> tuple[SSEEvent, bool] | None:
    """WHATWG "interpret the line" for each line of one event, then "dispatch the event": the
    event, and whether its bytes were invalid UTF-8 (then decoded with U+FFFD)."""
    data: list[bytes] = []
    event_type = b""
    for line in lines:
        if line[:1] == b":":
            continue  # a comment, such as the server's ": ping - <timestamp>"
        field, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]  # one leading space is stripped from the value
        if field == b"data":
            data.append(value)
        elif field == b"event":
            event_type = value
        # id, retry and unknown fields do not matter here.
    # docs/protocol.md, "SSE framing", item 5, reads "dispatch the event" so: an event whose data is
    # empty (no data line, or one empty `data:` line) is not dispatched.
    joined = b"\n".join(data)
    if not joined:
        return None
    try:
        name = event_type.decode("utf-8") if event_type else "message"
        return SSEEvent(name, joined.decode("utf-8")), False
    except UnicodeDecodeError:
        name = event_type.decode("utf-8", "replace") if event_type else "message"
        return SSEEvent(name, joined.decode("utf-8", "replace")), True
