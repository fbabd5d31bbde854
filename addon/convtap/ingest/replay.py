"""Replaying a capture database: `convtap reprocess` (decode it again, in place) and
`convtap import other.db` (merge it into another capture).

The stored rows are already redacted (redaction leaves placeholders alone, so nothing is hashed
twice); every SSE leg is rebuilt from its raw events and every WebSocket frame is replayed in
order. Flows are streamed one at a time, never loaded whole.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from convtap.ingest import findings
from convtap.journal.events import (
    BodyChunk,
    RecorderEvent,
    RequestSeen,
    ResponseEnded,
    ResponseStarted,
    WebSocketEnded,
    WebSocketMessage,
    is_event_stream,
)
from convtap.journal.segments import JournalError, hold, journal_dir, segments
from convtap.record.recorder import Recorder
from convtap.redact.redactor import ClearText
from convtap.store.database import (
    StoreError,
    Writer,
    clear_derived,
    close,
    connect,
    event_bytes,
    event_text,
    iter_events,
    iter_flows,
    open_readonly,
)
from convtap.store.rows import EventRow, FlowRow
from convtap.vocab import Outcome, RawKind, Source, stored
from convtap.wire.session import SOCKETS, STREAMED


def reprocess_db(path: Path) -> int:
    """Decode a capture again in place, in one transaction: a reader sees the previous result
    until the new one is whole, and a reprocess killed midway leaves the previous result. Its
    findings are made from what was decoded, as `convtap audit` makes them.
    Refused while a recorder writes into it, or its journal holds traffic not recorded yet."""
    journal = journal_dir(path)
    if segments(journal):
        raise StoreError(f"a recorder is writing into {path}, or left its journal {journal} to "
                         f"finish (`convtap record --catch-up --db {path}` records it): stop it "
                         "first")  # fmt: skip
    close(connect(path, create=False))
    try:
        lock = hold(journal)  # no recording starts into it meanwhile (an empty one is left over)
    except JournalError as exc:
        raise StoreError(str(exc)) from None
    try:
        writer = Writer(path)
        recorder = Recorder(writer, ClearText(), audit=False)
        try:
            with writer.whole():
                clear_derived(writer.db)
                count, _ = replay_db(path, recorder.handle)
                recorder.close()
                writer.flush()
                findings.rebuild(writer.db)  # from what was decoded, in the same transaction
                writer.index()
        finally:
            writer.close()
    finally:
        with contextlib.suppress(OSError):
            journal.rmdir()  # made empty by `hold`
        os.close(lock)
    return count


def replay_db(
    source: Path,
    handle: Callable[[RecorderEvent], None],
    skip: set[str] | None = None,
    whole: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
) -> tuple[int, int]:
    """Feed every flow of a capture database to a recorder, in time order, except those in
    `skip` (which learns the new ones); each flow inside `whole()` (its rows committed together).
    Returns (fed, skipped)."""
    db = open_readonly(source)
    count = skipped = 0
    try:
        for flow in iter_flows(db):
            if skip is not None:
                if flow.id in skip:
                    skipped += 1
                    continue
                skip.add(flow.id)
            with whole():
                for event in stored_flow_events(flow, iter_events(db, flow.id)):
                    handle(event)
            count += 1
    finally:
        db.conn.close()
    return count, skipped


def _headers(text: str | None) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in json.loads(text or "[]"))


def stored_flow_events(flow: FlowRow, events: Iterator[EventRow]) -> Iterator[RecorderEvent]:
    """The recorder events a stored flow and its raw events stand for."""
    flow_id = flow.id
    body = flow.request_body
    yield RequestSeen(
        flow_id=flow_id, method=flow.method or "GET", url=flow.url or "",
        host=flow.host or "", path=flow.path or "", headers=_headers(flow.request_headers),
        body=body.encode() if body and not body.startswith("<") else None,
        at=flow.started_at or 0.0, source=stored(Source, flow.source, Source.REPROCESS),
    )  # fmt: skip
    if flow.kind in SOCKETS:
        for event in events:
            from_client = event.event == RawKind.WS_CLIENT
            yield WebSocketMessage(flow_id, from_client, event_text(event), event.at)
        yield WebSocketEnded(flow_id, flow.ended_at or 0.0)
        return
    headers = _headers(flow.response_headers)
    response_body = None
    if flow.kind in STREAMED and is_event_stream(headers):
        yield ResponseStarted(flow_id, flow.status, headers)
        for event in events:
            yield BodyChunk(flow_id, event_bytes(event), event.at)
        if flow.outcome == Outcome.TRUNCATED:  # the cut event was never kept: end inside one again
            yield BodyChunk(flow_id, b"data: ", flow.ended_at or 0.0)
    else:
        text = flow.response_body
        response_body = text.encode() if text and not text.startswith("<") else None
    yield ResponseEnded(
        flow_id, flow.status, headers, response_body, flow.outcome or Outcome.COMPLETE,
        flow.ended_at or 0.0,
    )  # fmt: skip
