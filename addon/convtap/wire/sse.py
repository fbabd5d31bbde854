"""Server-sent events: bytes in, events out, whatever the chunking.

A sans-I/O parser for the WHATWG "event stream interpretation"
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation),
reduced to what convtap needs: the event type and the data. `id:` and `retry:` are read and
ignored. Lines are split on CR, LF and CRLF only (never on U+2028 or U+0085), so the parser works
on bytes: those three are ASCII, and no byte of a multi-byte UTF-8 sequence can be mistaken for
them. A chunk may end anywhere, even inside a UTF-8 sequence or between CR and LF.
"""

from __future__ import annotations

from typing import NamedTuple

_BOM = b"\xef\xbb\xbf"


class SSEEvent(NamedTuple):
    """One dispatched event: its type (`message` unless an `event:` field named one) and data."""

    event: str
    data: str


def format_event(event: SSEEvent) -> str:
    """An event as SSE text that parses back to the same event (the inverse of the parser)."""
    lines = "".join(f"data: {line}\n" for line in event.data.split("\n"))
    return lines + "\n" if event.event == "message" else f"event: {event.event}\n{lines}\n"


class SSEParser:
    """Feed bytes with `feed`, get the events completed so far; `close` at the end of the body.

    Only whole events leave the parser: bytes after the last blank line wait in a buffer, and
    `close` reports them as a truncated event instead of dispatching them.
    """

    __slots__ = ("_buf", "_closed", "_skip_lf", "_started", "consumed")

    def __init__(self) -> None:
        self.consumed = b""  # what the last `feed` took in: the text of the events it returned
        self._buf = bytearray()  # normalised to LF line ends; starts at a line that starts an event
        self._skip_lf = False  # the previous chunk ended with CR: a leading LF belongs to it
        self._started = False  # the BOM check has been done
        self._closed = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if self._closed:
            raise RuntimeError("feed() after close()")
        if not chunk:
            return []
        if self._skip_lf:
            # WHATWG: CRLF is one line end, even when the chunk boundary falls between them.
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            if chunk[-1:] == b"\r":
                self._skip_lf = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf
        scan_from = max(len(buf) - 1, 0)
        buf += chunk
        if not self._started:
            # WHATWG: one leading U+FEFF is stripped; it may itself arrive split.
            if len(buf) < len(_BOM) and _BOM.startswith(bytes(buf)):
                return []
            self._started = True
            if buf.startswith(_BOM):
                del buf[: len(_BOM)]
            scan_from = 0
        end = buf.rfind(b"\n\n", scan_from)
        if end < 0:
            self.consumed = b""
            return []
        block = self.consumed = bytes(buf[: end + 2])
        del buf[: end + 2]
        return _parse_block(block)

    def close(self) -> bool:
        """End of the body. True when it ended inside an event (the stream was cut)."""
        self._closed = True
        pending = bytes(self._buf)
        self._buf.clear()
        return any(line and line[:1] != b":" for line in pending.split(b"\n"))


def _parse_block(block: bytes) -> list[SSEEvent]:
    """Parse complete lines that end with a blank line, so that no event is left open.

    The block splits at blank lines into the lines of each event. Leading blank lines of a piece
    only dispatch nothing. The two shapes the server sends (`data: X` and `event: E` then
    `data: X`) take a short path; anything else goes through the field-by-field steps.
    """
    events: list[SSEEvent] = []
    for piece in block.split(b"\n\n"):
        piece = piece.lstrip(b"\n")
        if not piece:
            continue
        newline = piece.find(b"\n")
        if newline < 0 and piece.startswith(b"data: "):
            if len(piece) > 6:
                events.append(SSEEvent("message", piece[6:].decode("utf-8", "replace")))
            continue
        if (
            piece.startswith(b"event: ")
            and piece.startswith(b"data: ", newline + 1)
            and piece.find(b"\n", newline + 1) < 0
        ):
            if len(piece) > newline + 7:
                name = piece[7:newline].decode("utf-8", "replace") or "message"
                events.append(SSEEvent(name, piece[newline + 7 :].decode("utf-8", "replace")))
            continue
        event = _parse_lines(piece.split(b"\n"))
        if event is not None:
            events.append(event)
    return events


def _parse_lines(lines: list[bytes]) -> SSEEvent | None:
    """WHATWG "interpret the line" for each line of one event, then "dispatch the event"."""
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
    # PROTOCOL.md's reading of "dispatch the event": an event whose data is empty (no data line,
    # or one empty `data:` line) is not dispatched.
    joined = b"\n".join(data)
    if not joined:
        return None
    name = event_type.decode("utf-8", "replace") if event_type else "message"
    return SSEEvent(name, joined.decode("utf-8", "replace"))
