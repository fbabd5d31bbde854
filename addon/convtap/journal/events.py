"""What the recorder is fed: frozen records of what happened on a flow.

The proxy makes them from mitmproxy's hooks (live), the readers from files (offline), and the
replay from a capture database; `Recorder.handle` consumes them, in this process or across the
process boundary (through the journal). The type checker sees both sides.
"""

from __future__ import annotations

from dataclasses import dataclass

from convtap.vocab import Outcome, Source

Headers = tuple[tuple[str, str], ...]


def is_event_stream(headers: Headers) -> bool:
    """The response's body is an event stream (`content-type: text/event-stream`)."""
    return any(
        k.lower() == "content-type" and v.startswith("text/event-stream") for k, v in headers
    )


@dataclass(frozen=True, slots=True)
class RequestSeen:
    """A request the proxy recognised as one of ours (its body whole)."""

    flow_id: str
    method: str
    url: str
    host: str
    path: str
    headers: Headers
    body: bytes | None
    at: float
    source: Source = Source.LIVE


@dataclass(frozen=True, slots=True)
class ResponseStarted:
    """A response whose body is an event stream: its bytes follow as `BodyChunk`s."""

    flow_id: str
    status: int | None
    headers: Headers


@dataclass(frozen=True, slots=True)
class BodyChunk:
    """A piece of an event stream, as it came (content-decoded), at any byte boundary."""

    flow_id: str
    data: bytes
    at: float


@dataclass(frozen=True, slots=True)
class ResponseEnded:
    """The response is over: `outcome` is `Outcome.COMPLETE` or why not. `body` is the whole body
    when it was not streamed (a JSON answer)."""

    flow_id: str
    status: int | None
    headers: Headers
    body: bytes | None
    outcome: Outcome | str  # else mitmproxy's message
    at: float


@dataclass(frozen=True, slots=True)
class WebSocketMessage:
    flow_id: str
    from_client: bool
    text: str
    at: float


@dataclass(frozen=True, slots=True)
class WebSocketEnded:
    flow_id: str
    at: float


@dataclass(frozen=True, slots=True)
class OwnFailure:
    """convtap's own code failed on a flow (the traffic went on)."""

    flow_id: str
    detail: str


RecorderEvent = (
    RequestSeen
    | ResponseStarted
    | BodyChunk
    | ResponseEnded
    | WebSocketMessage
    | WebSocketEnded
    | OwnFailure
)
