"""Replaying a capture database: `convtap reprocess` (decode it again, in place) and
`convtap import other.db` (merge it into another capture).

The stored rows are already redacted (redaction leaves placeholders alone, so nothing is hashed
twice); every SSE leg is rebuilt from its raw events and every WebSocket frame is replayed in
order. Flows are streamed one at a time, never loaded whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from addon.recorder import Exchange, Recorder
from addon.redact import ClearText
from addon.store import Writer, clear_derived, connect, iter_events, iter_flows


def reprocess_db(path: Path) -> int:
    db = connect(path, create=False)
    clear_derived(db)
    db.conn.close()
    writer = Writer(path)
    recorder = Recorder(writer, ClearText())
    try:
        count = replay_db(path, recorder)
        recorder.close()
    finally:
        writer.close()
    return count


def replay_db(source: Path, recorder: Recorder, skip: set[str] | None = None) -> int:
    """Feed every flow of a capture database to a recorder, in time order; returns how many."""
    db = connect(source, create=False)
    count = 0
    try:
        for flow in iter_flows(db):
            if skip is not None and flow["id"] in skip:
                continue
            replay_flow(recorder, flow, list(iter_events(db, flow["id"])))
            count += 1
    finally:
        db.conn.close()
    return count


def replay_flow(recorder: Recorder, flow: dict[str, Any], events: list[dict[str, Any]]) -> None:
    headers = [tuple(h) for h in json.loads(flow["request_headers"] or "[]")]
    body = flow["request_body"]
    exchange = Exchange(
        id=flow["id"], method=flow["method"] or "GET", url=flow["url"] or "",
        host=flow["host"] or "", path=flow["path"] or "", headers=headers,
        body=body.encode() if body and not body.startswith("<") else None,
        started_at=flow["started_at"] or 0.0, source=flow["source"] or "reprocess",
    )  # fmt: skip
    if not recorder.request(exchange):
        return
    response_headers = [tuple(h) for h in json.loads(flow["response_headers"] or "[]")]
    if flow["kind"] == "websocket":
        for event in events:
            recorder.ws_message(flow["id"], event["event"] == "ws:client", event["data"],
                                event["at"])  # fmt: skip
        recorder.ws_end(flow["id"])
        return
    if recorder.response_headers(flow["id"], response_headers):
        for event in events:
            recorder.response_chunk(flow["id"], event["data"].encode(), event["at"])
        if flow["outcome"] == "truncated":  # the cut event was never kept: end inside one again
            recorder.response_chunk(flow["id"], b"data: ", flow["ended_at"])
        response_body = None
    else:
        text = flow["response_body"]
        response_body = text.encode() if text and not text.startswith("<") else None
    outcome = flow["outcome"] or "complete"
    recorder.response_end(
        flow["id"], flow["status"], response_headers,
        response_body, outcome, flow["ended_at"],
    )  # fmt: skip
