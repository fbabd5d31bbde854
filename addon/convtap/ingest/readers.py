"""Offline input: mitmproxy flow files, HAR files and raw .sse bodies, turned into the same
recorder events as live traffic (`convtap.record.flows`), so that an import and a live capture
give the same rows; and other capture databases, whose flows and raw events are merged in.

A raw body `X.sse` may come with sidecars: `X.request.json` (the f/conversation request body)
and `X.resume.sse`, `X.resume2.sse`, ... (its resume legs). Re-importing a file adds nothing
twice: HAR and .sse flows get an id derived from their content, .mitm flows keep theirs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mitmproxy import connection, http, io
from mitmproxy.exceptions import FlowReadException
from mitmproxy.io.har import request_to_flow
from mitmproxy.websocket import WebSocketData, WebSocketMessage
from wsproto.frame_protocol import Opcode

from convtap.ingest.replay import replay_db
from convtap.record.flows import flow_events
from convtap.record.local import LocalRecorder
from convtap.wire.sse import SSEParser
from convtap.wire.turn import decode_turn

DATABASES = (".db", ".sqlite", ".sqlite3")
SSE_URL = "https://chatgpt.com/backend-api/f/conversation"
RESUME_URL = "https://chatgpt.com/backend-api/f/conversation/resume"


class CaptureError(Exception):
    """An input file that cannot be read."""


class TruncatedFile(CaptureError):
    """A flow file cut short: the flows before the cut are read (and imported), then this."""

    imported = skipped = 0


def read_flows(path: Path) -> Iterator[tuple[http.HTTPFlow, int]]:
    """The HTTP flows of one file, each with how far into the file the reader got."""
    if path.suffix == ".sse":
        yield from ((flow, 0) for flow in sse_flows(path))
        return
    with path.open("rb") as handle:
        if handle.read(1) == b"{":
            yield from har_flows(path)
            return
    size, whole = path.stat().st_size, 0  # where the last whole flow ends
    with path.open("rb") as handle:
        try:
            for flow in io.FlowReader(handle).stream():
                whole = handle.tell()
                if isinstance(flow, http.HTTPFlow):
                    if path.suffix != ".mitm":
                        flow.id = content_id(flow)
                    yield flow, whole
        except (FlowReadException, ValueError, KeyError) as exc:
            if whole and handle.tell() >= size:  # the file ends inside a flow: its tail was cut
                raise TruncatedFile(
                    f"{path}: cut short: its last {size - whole} bytes are not a whole flow (the "
                    "flows before them were read)"
                ) from exc
            raise CaptureError(f"{path}: not a mitmproxy flow file or HAR ({exc})") from exc


def _why(exc: Exception) -> str:
    """What a reader's exception says, for people: a KeyError is a missing field."""
    if isinstance(exc, KeyError) and exc.args:
        return f"no {exc.args[0]!r} in it"
    return str(exc)


def har_flows(path: Path) -> Iterator[tuple[http.HTTPFlow, int]]:
    """A HAR file's flows, read as mitmproxy reads them, with two things it leaves out: an
    event stream is UTF-8 whatever its content type says (mitmproxy takes latin-1 when no
    charset is named), and a WebSocket's frames come from Chrome's `_webSocketMessages`."""
    try:
        entries = json.loads(path.read_bytes())["log"]["entries"]
        if not isinstance(entries, list):
            raise ValueError("log.entries is not a list")
    except RecursionError:
        raise CaptureError(f"{path}: not a HAR file (JSON nested too deep to read)") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CaptureError(f"{path}: not a HAR file ({_why(exc)})") from exc
    size = path.stat().st_size
    for n, entry in enumerate(entries):
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
        yield flow, size * (n + 1) // len(entries)


def _frame(frame: dict[str, Any]) -> WebSocketMessage:
    """One of Chrome's `_webSocketMessages`: {type: send | receive, time, opcode, data}."""
    kind = Opcode.TEXT if frame.get("opcode", 1) == 1 else Opcode.BINARY
    data = str(frame.get("data", "")).encode()
    return WebSocketMessage(kind, frame.get("type") == "send", data, float(frame.get("time") or 0))


def sse_flows(path: Path) -> list[http.HTTPFlow]:
    started = path.stat().st_mtime
    sidecar = path.with_name(path.name.removesuffix(".sse") + ".request.json")
    request_body = sidecar.read_bytes() if sidecar.exists() else b"{}"
    legs = [path, *sorted(path.parent.glob(path.name.removesuffix(".sse") + ".resume*.sse"))]
    flows = []
    for n, leg in enumerate(legs):
        body = leg.read_bytes()
        parser = SSEParser()
        if not parser.feed(body):
            raise CaptureError(f"{leg}: no server-sent events in it (nothing to import)")
        url = SSE_URL if n == 0 else RESUME_URL
        flow = _flow("POST", url, request_body if n == 0 else b"{}", body, started + n)
        flows.append(flow)
    if len(flows) > 1:  # resume legs name the conversation the first leg streamed
        conversation = decode_turn([legs[0].read_bytes()]).conversation_id
        for flow in flows[1:]:
            flow.request.content = json.dumps({"conversation_id": conversation}).encode()
    for flow in flows:
        flow.id = content_id(flow)
    return flows


def _flow(method: str, url: str, request: bytes, response: bytes, at: float) -> http.HTTPFlow:
    client = connection.Client(peername=("127.0.0.1", 0), sockname=("127.0.0.1", 0),
                               timestamp_start=at)  # fmt: skip
    server = connection.Server(address=("chatgpt.com", 443))
    flow = http.HTTPFlow(client, server)
    flow.request = http.Request.make(
        method, url, request, http.Headers(content_type="application/json")
    )
    flow.request.timestamp_start = at
    flow.response = http.Response.make(
        200, response, http.Headers(content_type="text/event-stream")
    )
    flow.response.timestamp_end = at
    flow.live = False
    return flow


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
    read: list[tuple[http.HTTPFlow, int]] = []
    cut: TruncatedFile | None = None
    try:
        read.extend(read_flows(path))
    except TruncatedFile as exc:
        cut = exc
    flows = sorted(read, key=lambda pair: pair[0].request.timestamp_start)
    for flow, position in flows:
        events = list(flow_events(flow))
        if not events:
            continue  # not conversation traffic
        if flow.id in seen:
            skipped += 1
            continue
        seen.add(flow.id)
        with local.writer.whole():  # a flow is in the database with all its events, or not
            for event in events:
                local.handle(event)
        imported += 1
        if progress is not None and position > done:
            progress(position - done)
            done = position
    local.writer.flush()
    if cut is not None:
        cut.imported, cut.skipped = imported, skipped
        raise cut
    if imported + skipped == 0:
        raise CaptureError(f"{path}: no conversation traffic in it (nothing to import)")
    return imported, skipped
