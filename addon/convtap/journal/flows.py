"""mitmproxy flows as recorder events: what the proxy hands over live, and what the readers
produce from a flow file, so that an import and a live capture give the same rows. Imports
nothing of the recorder: the proxy's process builds its events with it."""

from __future__ import annotations

from collections.abc import Iterator

from mitmproxy import http

from convtap.journal.events import (
    BodyChunk,
    Headers,
    RecorderEvent,
    RequestSeen,
    ResponseEnded,
    ResponseStarted,
    WebSocketEnded,
    WebSocketMessage,
    is_event_stream,
)
from convtap.vocab import Outcome, Source
from convtap.wire.session import endpoint_kind

PIECE = 16 * 1024  # bytes of a whole event stream fed at a time: about what mitmproxy hands the
# tap of a live one, so that its raw events are stored as a live stream's are


def headers_of(message: http.Message) -> Headers:
    return tuple(message.headers.items(multi=True))


def request_seen(flow: http.HTTPFlow, source: Source) -> RequestSeen:
    req = flow.request
    return RequestSeen(
        flow_id=flow.id, method=req.method, url=req.pretty_url, host=req.pretty_host,
        path=req.path, headers=headers_of(req), body=req.get_content(strict=False),
        at=req.timestamp_start, source=source,
    )  # fmt: skip


def response_events(flow: http.HTTPFlow, *, streamed: bool) -> Iterator[RecorderEvent]:
    """The end of a flow's response. A body that was not `streamed` (tapped chunk by chunk)
    comes whole: an event stream in pieces of `PIECE` bytes, anything else with the end."""
    response = flow.response
    if response is None:
        message = flow.error.msg if flow.error else Outcome.ERROR
        yield ResponseEnded(flow.id, None, (), None, message, flow.request.timestamp_end or 0.0)
        return
    headers = headers_of(response)
    at = response.timestamp_end or response.timestamp_start or 0.0
    body = None if streamed else response.get_content(strict=False)
    if body is not None and is_event_stream(headers):
        yield ResponseStarted(flow.id, response.status_code, headers)
        for start in range(0, len(body), PIECE):
            yield BodyChunk(flow.id, body[start : start + PIECE], at)
        body = None
    outcome = Outcome.COMPLETE if flow.error is None else flow.error.msg
    yield ResponseEnded(flow.id, response.status_code, headers, body, outcome, at)


def flow_events(flow: http.HTTPFlow, source: Source = Source.IMPORT) -> Iterator[RecorderEvent]:
    """Every event of a finished flow read from a file, in the order they happened (nothing
    for a flow that is not one of ours)."""
    if endpoint_kind(flow.request.method, flow.request.path) is None:
        return
    yield request_seen(flow, source)
    if flow.websocket is not None:
        for message in flow.websocket.messages:
            text = message.content.decode("utf-8", "replace")
            yield WebSocketMessage(flow.id, message.from_client, text, message.timestamp)
        at = flow.websocket.timestamp_end or 0.0
        yield WebSocketEnded(flow.id, at)
        return
    yield from response_events(flow, streamed=False)
