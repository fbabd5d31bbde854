"""`convtap decode`: files of raw bodies decoded, redacted and written out, in bounded memory
(`ingest.rendering` writes them; this module chooses the redaction)."""

from __future__ import annotations

import sys
from typing import BinaryIO, TextIO

from convtap.ingest.rendering import DecodeInputError, open_input, render
from convtap.redact.redactor import chosen

__all__ = ["DecodeInputError", "decode", "decode_streams"]


def decode(
    names: list[str],
    out: TextIO,
    *,
    fmt: str = "text",
    protocol: str = "auto",
    ws_path: str | None = None,
    redact: bool = True,
) -> None:
    handles = [open_input(name) for name in names]
    try:
        decode_streams(handles, out, fmt=fmt, protocol=protocol, ws_path=ws_path, redact=redact)
    except OSError as exc:
        raise DecodeInputError(f"cannot read the input: {exc.strerror or exc}") from exc
    finally:
        for handle in handles:
            if handle is not sys.stdin.buffer:
                handle.close()


def decode_streams(
    handles: list[BinaryIO],
    out: TextIO,
    *,
    fmt: str = "text",
    protocol: str = "auto",
    ws_path: str | None = None,
    redact: bool = True,
) -> None:
    """Bodies (the first, then its resume legs) read from open binary files."""
    render(handles, out, chosen(redact), fmt=fmt, protocol=protocol, ws_path=ws_path)
