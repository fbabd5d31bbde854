"""The bytes of an event stream as they came, beside the SSE parser's buffer (`wire.sse`), for a
stream with CR line ends: a block's text then keeps them, and the raw events are stored byte
for byte."""

from __future__ import annotations

import re

_LONE_CR = re.compile(rb"\r(?=[^\n])")  # a CR line end that no LF follows (in the chunk)


class RawBytes:
    """The bytes of a stream that has CRs in it, as they came, beside the parser's buffer (LF
    line ends): cut where the buffer is cut, so that a block's text keeps each CRLF (and the
    recorder stores the raw events byte for byte). A lone CR is kept as LF: the redaction of
    lines the decoder does not read finds lines by their LF. A CR that ends a chunk is a line
    end at once (WHATWG); the LF that may follow it is kept after it, in the next `read`'s text
    if the block went out with the CR."""

    __slots__ = ("buf",)

    def __init__(self, start: bytes | bytearray) -> None:
        self.buf = bytearray(start)

    def add(self, chunk: bytes, cr_before: bool) -> None:
        """A chunk as it came; `cr_before`: the one before ended with a CR."""
        if cr_before and chunk[:1] != b"\n" and self.buf[-1:] == b"\r":
            self.buf[-1:] = b"\n"  # that CR was a line end of its own
        self.buf += _LONE_CR.sub(b"\n", chunk)

    def cut(self, lines_after: int) -> bytes:
        """The bytes up to the line end that `lines_after` line ends follow, taken out."""
        buf = self.buf
        ends, at = lines_after + 1, len(buf)
        if buf[-1:] == b"\r":  # a CR whose LF may come next: a line end already
            ends -= 1
        for _ in range(ends):
            at = buf.rfind(b"\n", 0, at)
        cut = at + 1 if ends else len(buf)
        taken = bytes(buf[:cut])
        del buf[:cut]
        return taken

    def keep_last_line_end(self, keep: bool) -> None:
        """All but the last line end dropped (an oversized event skipped), or all."""
        buf = self.buf
        del buf[: len(buf) - (0 if not keep else 2 if buf.endswith(b"\r\n") else 1)]


def decoded(block: bytes) -> str:
    """A block's text: bytes that are not UTF-8 as lone surrogates (`surrogateescape`)."""
    try:
        return block.decode("utf-8")
    except UnicodeDecodeError:
        return block.decode("utf-8", "surrogateescape")
