"""`convtap export`: a capture database as a HAR 1.2 file, written as it is read.

One entry per flow, in time order: the request (method, URL, headers, the stored JSON body as
`postData`), the response (status, headers, and `content.text`: an event stream's raw events as
recorded, cut again when the stream was cut, or the stored JSON answer), its start and duration.
A WebSocket's frames go in `_webSocketMessages`, as Chrome writes them. What is stored is what is
exported: secrets stay redacted; `blank_words` also replaces the words (`convtap.export.blank`).

The database is read read-only, one flow and one raw event row at a time; each body is written
into its entry's JSON as it is read, so no flow is ever whole in memory. The file appears only
once it is complete.

mitmproxy's HAR reader encodes `content.text` with the charset of the response's content type,
latin-1 when it names none: a body that is not ASCII under such a type is written in base64
(`content.encoding`), and a request body under one as ASCII JSON, so that it reads back as sent.
An event stream whose bytes were not all UTF-8 is written in base64 too, byte for byte.
"""

from __future__ import annotations

import base64
import json
import secrets
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from http import HTTPStatus
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlsplit

import sqlite_utils

from convtap.export.blank import dump, shape_value
from convtap.export.blank_stream import FrameShaper, SseShaper, StreamShaper
from convtap.export.files import is_part_of, write_output
from convtap.record.recorder import is_event_stream
from convtap.store.database import (
    StoreError,
    event_bytes,
    event_is_utf8,
    event_text,
    iter_events,
    iter_flows,
    open_readonly,
)
from convtap.store.rows import FlowRow
from convtap.vocab import RawKind
from convtap.wire.bounded import Bounded
from convtap.wire.delta import DeltaDecoder
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.session import SOCKETS, STREAMED, Endpoint

OPEN_TURNS = 1024  # turns whose stream may still go on in a resume leg
SHAPE_COMMENT = (
    "convtap export --shape-only: every natural-language string is replaced by a placeholder "
    "of the same length (letters x, digits 0); ids, enumerations, numbers and structure kept"
)

Headers = list[tuple[str, str]]


def export_har(db_path: Path, output: Path, *, blank_words: bool = False) -> int:
    """Write the capture at `db_path` into the HAR file `output`; returns the flows written."""
    if is_part_of(output, db_path):
        raise StoreError(f"{output} is the capture itself: choose another file")
    db = open_readonly(db_path)
    try:
        return write_output(output, lambda handle: write_har(db, handle, blank_words=blank_words))
    except sqlite3.DatabaseError as exc:  # a damaged page: nothing is written
        raise StoreError(f"{db_path} cannot be read: {exc}") from exc
    finally:
        db.conn.close()


def write_har(db: sqlite_utils.Database, handle: TextIO, *, blank_words: bool = False) -> int:
    """Every flow of an open capture as a HAR document into `handle`, entry by entry."""
    log: dict[str, Any] = {
        "version": "1.2",
        "creator": {"name": "convtap", "version": _version()},
        "pages": [],
    }
    if blank_words:
        log["comment"] = SHAPE_COMMENT
    handle.write('{"log": ' + json.dumps(log)[:-1] + ', "entries": [')
    shaping = _Shaping() if blank_words else None
    count = 0
    for flow in iter_flows(db):
        handle.write(",\n" if count else "\n")
        _write_entry(handle, db, flow, shaping)
        count += 1
    handle.write("\n]}}\n")
    return count


def _version() -> str:
    try:
        return metadata.version("convtap")
    except metadata.PackageNotFoundError:
        return "unknown"


class _Shaping:
    """What --shape-only carries from flow to flow: each turn's stream state, which its resume
    legs continue (docs/protocol.md, "Resume": the same decoder state)."""

    def __init__(self) -> None:
        self.turns: Bounded[str, SseShaper] = Bounded(OPEN_TURNS)

    def stream(self, flow: FlowRow) -> SseShaper:
        if flow.kind not in (Endpoint.CONVERSATION, Endpoint.RESUME):
            return SseShaper(StreamShaper())  # a Responses stream stands alone
        turn = flow.turn_id or flow.id
        shaper = self.turns.get(turn)
        if shaper is None:
            shaper = self.turns[turn] = SseShaper(StreamShaper(DeltaDecoder()))
        return shaper

    def ended(self, flow: FlowRow, shaper: SseShaper) -> None:
        """A turn that ended with [DONE] gets no resume leg: forget it (rule 8)."""
        if shaper.stream.done:
            self.turns.pop(flow.turn_id or flow.id, None)


# -- one entry -----------------------------------------------------------------------------------


def _write_entry(
    handle: TextIO, db: sqlite_utils.Database, flow: FlowRow, shaping: _Shaping | None
) -> None:
    """An entry's JSON around a marker where its body (or its frames) is streamed in."""
    marker = f"\x00{secrets.token_hex(8)}\x00"
    request_headers = _headers(flow.request_headers)
    response_headers = _headers(flow.response_headers)
    entry: dict[str, Any] = {
        "startedDateTime": _iso(flow.started_at),
        "time": _duration(flow),
        "request": _request(flow, request_headers, shaping is not None),
        "response": {
            "status": flow.status or (101 if flow.kind in SOCKETS else 0),
            "statusText": _status_text(flow.status),
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": _har_headers(response_headers),
            "content": {},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
        },
        "cache": {},
        "timings": _timings(_duration(flow)),
    }
    content_type = _header(response_headers, "content-type")
    if flow.kind in SOCKETS:
        entry["response"]["content"] = {"size": 0, "mimeType": content_type or "x-unknown"}
        entry["_resourceType"] = "websocket"
        entry["_webSocketMessages"] = marker
        before, after = _split(entry, marker)
        handle.write(before)
        _write_frames(handle, _frames(db, flow, FrameShaper() if shaping is not None else None))
        handle.write(after)
    else:
        _write_with_body(handle, entry, marker, _body(db, flow, response_headers, shaping))


def _body(
    db: sqlite_utils.Database, flow: FlowRow, headers: Headers, shaping: _Shaping | None
) -> tuple[dict[str, Any], Iterator[str] | None]:
    """A response's `content` (but its text and size) and the pieces of its text, if any."""
    content_type = _header(headers, "content-type")
    content: dict[str, Any] = {"mimeType": content_type or "x-unknown"}
    if flow.kind in STREAMED and is_event_stream(tuple(headers)):
        ascii_only = utf8 = True
        for row in iter_events(db, flow.id):
            if not event_is_utf8(row):  # bytes that are not UTF-8: base64, byte for byte
                utf8 = False
                break
            ascii_only = ascii_only and event_text(row).isascii()
        if not utf8 or (not ascii_only and not _reads_as_utf8(content_type)):
            content["encoding"] = "base64"
        return content, _stream(db, flow, shaping)
    body = _response_body(flow.response_body, shaping is not None)
    if body is None:
        return content, None
    if not body.isascii() and not _reads_as_utf8(content_type):
        content["encoding"] = "base64"
    return content, iter([body])


def _write_with_body(
    handle: TextIO,
    entry: dict[str, Any],
    marker: str,
    body: tuple[dict[str, Any], Iterator[str] | None],
) -> None:
    """The entry, its body streamed in where the marker is, its size after it."""
    content, pieces = body
    entry["response"]["content"] = content
    if pieces is None:
        content["size"] = 0
        handle.write(json.dumps(entry, ensure_ascii=False))
        return
    size_marker = marker + "size"
    content["text"], content["size"] = marker, size_marker
    before, after = _split(entry, marker)
    handle.write(before)
    encoded = content.get("encoding") == "base64"
    size = _write_base64(handle, pieces) if encoded else _write_text(handle, pieces)
    handle.write(after.replace(json.dumps(size_marker), str(size), 1))


def _split(entry: dict[str, Any], marker: str) -> tuple[str, str]:
    before, after = json.dumps(entry, ensure_ascii=False).split(json.dumps(marker), 1)
    return before, after


def _request(flow: FlowRow, headers: Headers, blank_words: bool) -> dict[str, Any]:
    url = flow.url or ""
    request: dict[str, Any] = {
        "method": flow.method or "GET",
        "url": url,
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": _har_headers(headers),
        "queryString": [
            {"name": k, "value": v}
            for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)
        ],
        "headersSize": -1,
        "bodySize": 0,
    }
    body = flow.request_body
    if body and not body.startswith("<"):  # "<N bytes, not JSON>": no body was kept
        content_type = _header(headers, "content-type")
        if blank_words:
            body = dump(shape_value(loads_or_none(body)))
        elif not body.isascii() and not _reads_as_utf8(content_type):
            body = json.dumps(loads_or_none(body), separators=(",", ":"))
        request["postData"] = {"mimeType": content_type or "application/json", "text": body}
        request["bodySize"] = len(body.encode())
    return request


def _response_body(text: str | None, blank_words: bool) -> str | None:
    if not text or text.startswith("<"):
        return None
    return dump(shape_value(loads_or_none(text))) if blank_words else text


def _stream(db: sqlite_utils.Database, flow: FlowRow, shaping: _Shaping | None) -> Iterator[str]:
    """The raw events of a stream, as recorded (or shaped)."""
    shaper = shaping.stream(flow) if shaping is not None else None
    for row in iter_events(db, flow.id):
        if shaper is not None:
            yield shaper.feed(event_text(row))
        else:  # bytes that are not UTF-8 as surrogates: base64, as they came
            yield event_bytes(row).decode("utf-8", "surrogateescape")
    if flow.outcome == "truncated":  # as replay.py: the cut event was never kept
        yield "data: "
    if shaping is not None and shaper is not None:
        shaping.ended(flow, shaper)


def _frames(
    db: sqlite_utils.Database, flow: FlowRow, shaper: FrameShaper | None
) -> Iterator[dict[str, Any]]:
    """A WebSocket's frames as Chrome writes them (shaped: after a first pass that orders its
    turn topics' stream items)."""
    if shaper is not None:
        for row in iter_events(db, flow.id):
            shaper.learn(event_text(row))
        shaper.finish()
    for row in iter_events(db, flow.id):
        data = event_text(row) if shaper is None else shaper.frame(event_text(row))
        kind = "send" if row.event == RawKind.WS_CLIENT else "receive"
        yield {"type": kind, "time": row.at or 0.0, "opcode": 1, "data": data}


def _write_text(handle: TextIO, pieces: Iterator[str]) -> int:
    """A JSON string, piece by piece; returns its size in UTF-8 bytes."""
    size = 0
    handle.write('"')
    for piece in pieces:
        size += len(piece.encode())
        handle.write(json.dumps(piece, ensure_ascii=False)[1:-1])
    handle.write('"')
    return size


def _write_base64(handle: TextIO, pieces: Iterator[str]) -> int:
    """The UTF-8 bytes of the pieces as one base64 JSON string; returns their size."""
    size, carry = 0, b""
    handle.write('"')
    for piece in pieces:
        data = carry + piece.encode("utf-8", "surrogateescape")
        size += len(data) - len(carry)
        whole = len(data) - len(data) % 3
        handle.write(base64.b64encode(data[:whole]).decode())
        carry = data[whole:]
    handle.write(base64.b64encode(carry).decode() + '"')
    return size


def _write_frames(handle: TextIO, frames: Iterator[dict[str, Any]]) -> None:
    handle.write("[")
    for n, frame in enumerate(frames):
        handle.write((", " if n else "") + json.dumps(frame, ensure_ascii=False))
    handle.write("]")


# -- fields --------------------------------------------------------------------------------------


def _headers(text: str | None) -> Headers:
    pairs = loads_or_none(text)
    return [(str(k), str(v)) for k, v in pairs] if isinstance(pairs, list) else []


def _har_headers(headers: Headers) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in headers]


def _header(headers: Headers, name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


def _reads_as_utf8(content_type: str | None) -> bool:
    """Whether mitmproxy's HAR reader encodes text of this type as UTF-8 (a charset named
    utf-8, or JSON without a charset)."""
    if not content_type:
        return False
    media, _, params = content_type.lower().partition(";")
    charset = next(
        (
            p.split("=", 1)[1].strip(' "')
            for p in params.split(";")
            if p.strip().startswith("charset=")
        ),
        None,
    )
    if charset is not None:
        return charset.replace("_", "-") in ("utf-8", "utf8")
    return "json" in media


def _iso(at: float | None) -> str:
    moment = datetime.fromtimestamp(at or 0.0, UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _duration(flow: FlowRow) -> float:
    """Milliseconds from the request to the end of the response."""
    started, ended = flow.started_at, flow.ended_at
    if started is None or ended is None:
        return 0.0
    return max(0.0, (float(ended) - float(started)) * 1000.0)


def _timings(wait: float) -> dict[str, float]:
    """Only the whole duration is known: all of it waiting for the response."""
    return {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": wait,
            "receive": 0}  # fmt: skip


def _status_text(status: int | None) -> str:
    try:
        return HTTPStatus(status).phrase if status else ""
    except ValueError:
        return ""
