"""Offline input: mitmproxy flow files, HAR files and raw .sse bodies, turned into the same
recorder events as live traffic (`convtap.journal.flows`), so that an import and a live capture
give the same rows; and other capture databases, whose flows and raw events are merged in.

A raw body `X.sse` may come with sidecars (`convtap.ingest.raw_sse`). Re-importing a file adds
nothing twice: HAR and .sse flows get an id derived from their content, .mitm flows keep theirs.

Memory does not grow with the file: its flows are read one at a time (a HAR incrementally, with
ijson), first for their ids and start times (to import them in time order), then again, one at a
time, for their events; a raw body is fed in pieces. One flow of a HAR or a flow file is whole in
memory while it is read (those formats hold a body as one value).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, cast

import ijson  # type: ignore[import-untyped]
from mitmproxy import http, io
from mitmproxy.io.har import request_to_flow
from mitmproxy.websocket import WebSocketData, WebSocketMessage
from wsproto.frame_protocol import Opcode

from convtap.ingest.raw_sse import NoEvents, sse_legs
from convtap.ingest.replay import replay_db
from convtap.journal.events import RecorderEvent
from convtap.journal.flows import flow_events
from convtap.record.local import LocalRecorder
from convtap.wire.session import endpoint_kind

DATABASES = (".db", ".sqlite", ".sqlite3")


class CaptureError(Exception):
    """An input file that cannot be read."""


class TruncatedFile(CaptureError):
    """A flow file cut short: the flows before the cut are read (and imported), then this."""

    imported = skipped = 0


class CycleBound:
    """mitmproxy's readers leave every flow they read in a reference cycle (its type checks keep
    a caught exception, whose traceback holds the values checked), which only a full garbage
    collection frees: bodies would pile up by the dozen. A full collection runs whenever flows
    holding `limit` bytes have been read since the last."""

    def __init__(self, limit: int = 4 << 20) -> None:
        self.limit = limit
        self.read = 0

    def add(self, flow: http.HTTPFlow) -> None:
        response = flow.response
        self.read += len(flow.request.raw_content or b"")
        self.read += len(response.raw_content or b"") if response is not None else 0
        if flow.websocket is not None:
            self.read += sum(len(message.content) for message in flow.websocket.messages)
        if self.read >= self.limit:
            gc.collect()
            self.read = 0


_cycles = CycleBound()


@dataclass(frozen=True, slots=True)
class FileFlow:
    """One flow of a file, read twice: first its id and start (every flow of the file, in little
    memory, to put them in time order), then its events when it is imported (one at a time)."""

    id: str
    at: float  # when its request started
    position: int  # how far into the file the reader got
    events: Callable[[], Iterator[RecorderEvent]]


def file_flows(path: Path, spool: BinaryIO) -> Iterator[FileFlow]:
    """The flows of one file that are conversation traffic. A HAR's entries are written to
    `spool` as they are read (a HAR is read once, and cannot be read again from the middle)."""
    if path.suffix == ".sse":
        try:
            for leg in sse_legs(path):
                digest = hashlib.sha256()
                for part in leg.digest_parts():
                    digest.update(part)
                flow_id = "import-" + digest.hexdigest()[:32]
                size = path.stat().st_size  # the file given: its legs count as done with it
                yield FileFlow(flow_id, leg.at, size, partial(leg.events, flow_id))
        except NoEvents as exc:
            raise CaptureError(str(exc)) from None
        return
    if not _is_har(path):
        for flow, position, offset in _flow_file(path):
            if endpoint_kind(flow.request.method, flow.request.path) is not None:
                events = partial(_events_at, path, offset)
                yield FileFlow(flow.id, flow.request.timestamp_start, position, events)
        return
    for n, (entry, position) in enumerate(_har_entries(path)):
        flow = har_flow(path, n, entry)
        if endpoint_kind(flow.request.method, flow.request.path) is not None:
            offset = spool.seek(0, os.SEEK_END)
            try:
                spool.write(json.dumps(entry).encode() + b"\n")
            except RecursionError:
                raise CaptureError(f"{path}: entry {n} is nested too deep to read") from None
            events = partial(_spooled_events, spool, offset, path, n)
            yield FileFlow(flow.id, flow.request.timestamp_start, position, events)


def _is_har(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(1) == b"{"


def read_flows(path: Path) -> Iterator[tuple[http.HTTPFlow, int]]:
    """The HTTP flows of a mitmproxy flow file or a HAR, each with how far into the file the
    reader got."""
    if _is_har(path):
        yield from har_flows(path)
        return
    for flow, position, _ in _flow_file(path):
        yield flow, position


def _flow_file(path: Path) -> Iterator[tuple[http.HTTPFlow, int, int]]:
    """A mitmproxy flow file's HTTP flows, each with where it ends and where it starts. A file
    that ends inside a flow raises `TruncatedFile` after the flows before the cut."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        start = 0  # where the flow being read starts: the end of the last whole one
        try:
            for flow in io.FlowReader(_within_file(handle, size)).stream():
                end = handle.tell()
                if isinstance(flow, http.HTTPFlow):
                    _cycles.add(flow)
                    if path.suffix != ".mitm":
                        flow.id = content_id(flow)
                    yield flow, end, start
                start = end
        except Exception as exc:  # mitmproxy's reader raises anything on a damaged file
            if start and handle.tell() >= size:  # the file ends inside a flow: its tail was cut
                raise TruncatedFile(
                    f"{path}: cut short: its last {size - start} bytes are not a whole flow (the "
                    "flows before them were read)"
                ) from exc
            why = str(exc) or type(exc).__name__
            raise CaptureError(f"{path}: not a mitmproxy flow file or HAR ({why})") from exc


def _within_file(handle: BinaryIO, size: int) -> BinaryIO:
    return cast(BinaryIO, _WithinFile(handle, size))  # what FlowReader uses of a file: read, tell


class _WithinFile:
    """A flow file read no further than its end: a length prefix past it (a damaged file) asks
    for no more memory than the file holds."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        self.handle, self.size = handle, size

    def read(self, n: int = -1) -> bytes:
        left = max(self.size - self.handle.tell(), 0)
        return self.handle.read(left if n < 0 else min(n, left))

    def tell(self) -> int:
        return self.handle.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.handle.seek(offset, whence)


def _events_at(path: Path, offset: int) -> Iterator[RecorderEvent]:
    """The events of the flow that starts at `offset` of a flow file (read again)."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        handle.seek(offset)
        try:
            flow = next(iter(io.FlowReader(_within_file(handle, size)).stream()), None)
        except Exception:  # as in _flow_file
            flow = None
    if not isinstance(flow, http.HTTPFlow):
        raise CaptureError(f"{path}: it changed while it was imported")
    _cycles.add(flow)
    if path.suffix != ".mitm":
        flow.id = content_id(flow)
    yield from flow_events(flow)


def _why(exc: Exception) -> str:
    """What a reader's exception says, for people: a KeyError is a missing field."""
    if isinstance(exc, KeyError) and exc.args:
        return f"no {exc.args[0]!r} in it"
    return str(exc)


def har_flows(path: Path) -> Iterator[tuple[http.HTTPFlow, int]]:
    """A HAR file's flows, one at a time, each with how far into the file the reader got."""
    for n, (entry, position) in enumerate(_har_entries(path)):
        yield har_flow(path, n, entry), position


def _har_entries(path: Path) -> Iterator[tuple[dict[str, Any], int]]:
    """A HAR's entries, read incrementally (a HAR is one JSON document, as large as the traffic
    it holds: only one entry of it is ever in memory)."""
    found = False
    try:
        with path.open("rb") as handle:
            for entry in _entries(ijson.basic_parse(handle)):
                if not isinstance(entry, dict):
                    raise ValueError("an entry of log.entries is not an object")
                found = True
                yield _with_floats(entry), handle.tell()
    except (ijson.JSONError, ValueError) as exc:
        raise CaptureError(f"{path}: not a HAR file ({_line(_why(exc))})") from exc
    if not found:
        _check_har(path)


MAX_DEPTH = 512  # deeper than any HAR: refused before anything is built
_ENTRIES = ["", "log", "entries"]


def _entries(events: Iterator[tuple[str, Any]]) -> Iterator[Any]:
    """The items of `log.entries`, built from ijson's basic events. Not `ijson.items`: its
    events carry their path, which costs memory as the square of the depth (100,000 levels took
    the machine's memory); here JSON nested past MAX_DEPTH is refused as it is read."""
    trail: list[str] = []  # the open containers, named as ijson's prefixes name them
    arrays: list[bool] = []  # whether each open container is an array
    key = ""
    builder: Any = None
    for event, value in events:
        if builder is not None:
            builder.event(event, value)
        if event == "map_key":
            key = value
        elif event in ("start_map", "start_array"):
            if len(trail) >= MAX_DEPTH:
                raise ValueError("JSON nested too deep to read")
            trail.append("" if not trail else "item" if arrays[-1] else key)
            arrays.append(event == "start_array")
            if builder is None and len(trail) == 4 and arrays[2] and trail[:3] == _ENTRIES:
                builder = ijson.ObjectBuilder()
                builder.event(event, value)
        elif event in ("end_map", "end_array"):
            trail.pop()
            arrays.pop()
            if builder is not None and len(trail) == 3:
                yield builder.value
                builder = None
        elif builder is None and trail == _ENTRIES and arrays[2]:
            raise ValueError("an entry of log.entries is not an object")


def _with_floats(entry: dict[str, Any]) -> dict[str, Any]:
    """ijson's Decimals as floats, as `json.loads` reads them (ijson's `use_float` refuses an
    integer past 64 bits); walked without recursion, however deep the entry."""
    stack: list[dict[Any, Any] | list[Any]] = [entry]
    while stack:
        node = stack.pop()
        for key, value in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(value, Decimal):
                node[key] = float(value)
            elif isinstance(value, dict | list):
                stack.append(value)
    return entry


def _line(text: str) -> str:
    """The first line of what a parser said (yajl adds the text and a caret below it)."""
    return text.strip().partition("\n")[0][:200]


def _check_har(path: Path) -> None:
    """A HAR in which no entry was found: say why, unless `log.entries` is an empty list."""
    log = False
    with path.open("rb") as handle:
        try:
            for prefix, event, value in ijson.parse(handle):
                log = log or (prefix == "" and event == "map_key" and value == "log")
                if prefix == "log.entries":
                    if event == "start_array":
                        return
                    raise CaptureError(f"{path}: not a HAR file (log.entries is not a list)")
        except ijson.JSONError as exc:
            raise CaptureError(f"{path}: not a HAR file ({_line(str(exc))})") from exc
    raise CaptureError(f"{path}: not a HAR file (no {'entries' if log else 'log'!r} in it)")


def har_flow(path: Path, n: int, entry: dict[str, Any]) -> http.HTTPFlow:
    """Entry `n` of a HAR, read as mitmproxy reads it, with two things it leaves out: an event
    stream is UTF-8 whatever its content type says (mitmproxy takes latin-1 when no charset is
    named), and a WebSocket's frames come from Chrome's `_webSocketMessages`."""
    try:
        flow = request_to_flow(entry)
    except Exception as exc:  # mitmproxy's reader raises anything on a bad entry
        raise CaptureError(f"{path}: entry {n} is not a HAR entry ({_why(exc)})") from exc
    content = entry.get("response", {}).get("content", {})
    text = content.get("text")
    if (
        flow.response is not None and isinstance(text, str)
        and content.get("encoding") != "base64"
        and flow.response.headers.get("content-type", "").startswith("text/event-stream")
    ):  # fmt: skip
        flow.response.set_content(text.encode("utf-8", "surrogateescape"))
    frames = entry.get("_webSocketMessages")
    if isinstance(frames, list) and frames:
        flow.websocket = WebSocketData()
        try:
            flow.websocket.messages = [_frame(f) for f in frames if isinstance(f, dict)]
        except (ValueError, TypeError, OverflowError) as exc:
            raise CaptureError(f"{path}: entry {n} has a WebSocket frame that is not one "
                               f"({_why(exc)[:120]})") from exc  # fmt: skip
    flow.id = content_id(flow)
    _cycles.add(flow)
    return flow


def _spooled_events(spool: BinaryIO, offset: int, path: Path, n: int) -> Iterator[RecorderEvent]:
    """The events of HAR entry `n`, read back from where `file_flows` spooled it."""
    spool.seek(offset)
    yield from flow_events(har_flow(path, n, json.loads(spool.readline())))


def _frame(frame: dict[str, Any]) -> WebSocketMessage:
    """One of Chrome's `_webSocketMessages`: {type: send | receive, time, opcode, data}."""
    kind = Opcode.TEXT if frame.get("opcode", 1) == 1 else Opcode.BINARY
    data = str(frame.get("data", "")).encode()
    return WebSocketMessage(kind, frame.get("type") == "send", data, float(frame.get("time") or 0))


def content_id(flow: http.HTTPFlow) -> str:
    digest = hashlib.sha256()
    request = flow.request
    for part in (request.method, request.pretty_url, repr(request.timestamp_start)):
        digest.update(part.encode() + b"\0")
    digest.update(request.raw_content or b"")
    digest.update(b"\0")
    if flow.response is not None:
        digest.update(flow.response.raw_content or b"")
    if flow.websocket is not None:
        for message in flow.websocket.messages:
            digest.update(message.content)
    return "import-" + digest.hexdigest()[:32]


def import_file(
    path: Path, local: LocalRecorder, seen: set[str], progress: Callable[[int], None] | None = None
) -> tuple[int, int]:
    """Import the flows of one file that are not in the database yet (their ids are in `seen`,
    which learns the new ones). Returns (imported, already there). Each flow's rows are
    committed together, so a re-import completes what a killed one left. A file that cannot be
    read, or holds no conversation traffic, is refused."""
    if not path.is_file() or not os.access(path, os.R_OK):
        raise CaptureError(f"cannot read {path}")
    if path.suffix in DATABASES:  # another capture: merge its flows
        if os.path.samefile(path, local.writer.path):  # one file by device and inode: a link too
            raise CaptureError(f"{path} is the database it would be imported into")
        imported, skipped = replay_db(path, local.handle, seen, local.writer.whole)
        local.writer.flush()
        if progress is not None:
            progress(path.stat().st_size)
        if imported + skipped == 0:
            raise CaptureError(f"{path}: a capture with no flows in it (nothing to import)")
        return imported, skipped
    imported = skipped = done = 0
    cut: TruncatedFile | None = None
    with tempfile.TemporaryFile(prefix="convtap-import-") as spool:
        # In time order: every flow's id and start first (one at a time), then each flow's
        # events, read again. A flow file cut short: the flows before the cut.
        read: list[FileFlow] = []
        try:
            read.extend(file_flows(path, spool))
        except TruncatedFile as exc:
            cut = exc
        for flow in sorted(read, key=lambda flow: flow.at):
            if flow.id in seen:
                skipped += 1
                continue
            with local.writer.whole():  # a flow is in the database with all its events, or not
                for event in flow.events():
                    local.handle(event)
            seen.add(flow.id)
            imported += 1
            if progress is not None and flow.position > done:
                progress(flow.position - done)
                done = flow.position
    local.writer.flush()
    if cut is not None:
        cut.imported, cut.skipped = imported, skipped
        raise cut
    if imported + skipped == 0:
        raise CaptureError(f"{path}: no conversation traffic in it (nothing to import)")
    return imported, skipped
