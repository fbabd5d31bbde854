"""What `convtap mock --replay CAPTURE` answers with: the server's side of a capture, and the
rules that match a request to a recorded one (docs/commands.md, "convtap mock --replay").

A capture's flows become exchanges: an HTTP request with its recorded answer (status, headers,
the body in the pieces it came in, each with the gap before it), or a socket's client frame
with the server frames that followed it up to the next one. A request is matched by method,
path (its query left out) and content, leaving out what a client mints per run (`VOLATILE`:
message ids, times, challenges and tokens; headers are not compared at all) and taking a
redacted secret's placeholder for whatever the client sent there. Each exchange answers once,
the first one left that matches (or the next one left, when the request differs from it only in
what the client's tools returned: a command's timing, an id a tool made up), so that a session
replays in order (once every exchange has answered, the next request that matches one starts
the session over); a request no exchange left matches is a `Miss`, which names the nearest
recorded request and the paths where it differs (paths as `convtap diff` writes them: never a
value, user data named only by its root).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convtap.diff.shapes import differences
from convtap.store.database import (
    event_bytes,
    event_text,
    iter_events,
    iter_flows,
    open_readonly,
)
from convtap.store.rows import EventRow, FlowRow
from convtap.vocab import REPLAY_MISS, RawKind
from convtap.wire.bounded import Bounded
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.session import SOCKETS, STREAMED, Endpoint

# Keys whose values a client mints per run, left out wherever they are: f/conversation's
# message times, its one-time challenges and proof of work, tokens, the socket's request ids,
# the Codex CLI's per-session cache key and client metadata (thread, turn and window ids). The id
# of a message the client writes is one too: see `_without_volatile`.
VOLATILE = frozenset({
    "create_time", "update_time", "timestamp", "app_attest_challenge", "proofofwork",
    "websocket_request_id", "prompt_cache_key", "conduit_token", "proof_token", "turnstile_token",
    "client_metadata",
})  # fmt: skip
# The roles whose Responses input messages the client writes, and may give ids of its own.
CLIENT_ROLES = frozenset({"user", "developer", "system"})
PLACEHOLDER = re.compile(r"<redacted:[0-9a-f]+>")
# Response headers not replayed: the transport's own (the body is sent as it was decoded).
DROPPED = frozenset({"content-length", "transfer-encoding", "content-encoding", "connection",
                     "keep-alive", "date", "server"})  # fmt: skip
SHOWN_PATHS = 8  # differing paths a miss names (then how many more)
IDS_KEPT = 1000  # client ids remembered, to put back into what the server echoes


@dataclass(frozen=True)
class Piece:
    """Bytes (or a frame's text) sent after `gap` seconds, as recorded."""

    gap: float
    data: bytes | str


@dataclass
class Exchange:
    """One recorded request (an HTTP request, or a socket's client frame) and its answer."""

    number: int  # its place among the capture's requests, from 1
    flow_id: str
    method: str  # `WS` for a socket's frame
    path: str
    kind: str
    body: Any
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    pieces: list[Piece] = field(default_factory=list)
    used: bool = False


@dataclass
class Socket:
    """A recorded socket: what the server sent before the client's first frame."""

    path: str
    kind: str
    greeting: list[Piece]
    opened: bool = False


@dataclass(frozen=True)
class Miss:
    message: str


class ReplayError(Exception):
    """The capture cannot be replayed (not a capture, or nothing in it to answer with)."""


def request_path(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/") or "/"


class Recording:
    """A capture's exchanges, answered once each in the order they are asked for."""

    def __init__(self, exchanges: list[Exchange], sockets: list[Socket]) -> None:
        self.exchanges = exchanges
        self.sockets = sockets
        self.ids: Bounded[str, str] = Bounded(IDS_KEPT)  # a recorded client id -> this run's
        self._pattern: re.Pattern[str] | None = None  # the ids as one pattern, made on use

    def translate(self, data: bytes | str) -> bytes | str:
        """What the server sent, the ids the client minted in the recording replaced by those
        it minted this time (the server echoes a message's id in its stream and its tree)."""
        if not self.ids:
            return data
        if self._pattern is None:
            ids = sorted(self.ids, key=len, reverse=True)  # the longest first
            self._pattern = re.compile("|".join(map(re.escape, ids)))
        pattern = self._pattern
        if isinstance(data, bytes):
            text = data.decode("utf-8", "surrogateescape")
            return pattern.sub(lambda m: self.ids[m.group(0)], text).encode(
                "utf-8", "surrogateescape"
            )
        return pattern.sub(lambda m: self.ids[m.group(0)], data)

    def answer(self, method: str, path: str, body: Any) -> Exchange | Miss:
        """The first exchange left that `method path body` matches (now used), or a miss."""
        where = request_path(path)
        candidates = [e for e in self.exchanges if e.method == method and e.path == where]
        found = next((e for e in candidates if not e.used and not _differing(e, body)), None)
        following = next((e for e in candidates if not e.used), None)
        if found is None and following is not None and not _differing(following, body, loose=True):
            found = following  # the next one, but for what the client's tools returned
        if found is not None:
            found.used = True
            learned = dict(_client_ids(found.body, body))
            if learned:
                self.ids.update(learned)
                self._pattern = None
            return found
        if all(e.used for e in self.exchanges) and any(not _differing(e, body) for e in candidates):
            for exchange in self.exchanges:  # the whole session was replayed: play it again
                exchange.used = False
            return self.answer(method, path, body)
        return Miss(_miss_message(method, where, body, candidates, self.exchanges))

    def greeting(self, path: str) -> list[Piece]:
        """What the server sent first on a socket at `path`: the first recorded one not opened
        yet (the last one again when all were)."""
        where = [s for s in self.sockets if s.path == request_path(path)]
        for socket in where:
            if not socket.opened:
                socket.opened = True
                return socket.greeting
        return where[-1].greeting if where else []

    def user_socket(self) -> str | None:
        """The path of the first recorded user socket (f/conversation's WebSocket handoff)."""
        return next((s.path for s in self.sockets if s.kind == Endpoint.WEBSOCKET), None)


def load(path: Path) -> Recording:
    """Every exchange of a capture, in the order it was recorded."""
    db = open_readonly(path)
    exchanges: list[Exchange] = []
    sockets: list[Socket] = []
    try:
        for flow in iter_flows(db):
            events = list(iter_events(db, flow.id))
            if flow.kind in SOCKETS:
                sockets.append(_socket(flow, events, exchanges))
            else:
                exchanges.append(_exchange(flow, events, len(exchanges) + 1))
    finally:
        db.conn.close()
    if not exchanges and not sockets:
        raise ReplayError(f"{path} holds no request to replay")
    return Recording(exchanges, sockets)


def _exchange(flow: FlowRow, events: list[EventRow], number: int) -> Exchange:
    headers = [(str(k), str(v)) for k, v in loads_or_none(flow.response_headers) or []]
    kept = [(k, v) for k, v in headers if k.lower() not in DROPPED]
    started = flow.started_at or 0.0
    pieces: list[Piece] = []
    if flow.kind in STREAMED and events:
        previous = started
        for event in events:
            pieces.append(Piece(max(0.0, event.at - previous), event_bytes(event)))
            previous = event.at
    elif flow.response_body:
        gap = max(0.0, (flow.ended_at or started) - started)
        pieces.append(Piece(gap, str(flow.response_body).encode()))
    return Exchange(number, flow.id, flow.method or "GET", request_path(flow.path or "/"),
                    flow.kind or "", _json(flow.request_body), flow.status or 200, kept,
                    pieces)  # fmt: skip


def _socket(flow: FlowRow, events: list[EventRow], into: list[Exchange]) -> Socket:
    """A socket's frames: its greeting, and an exchange per client frame."""
    path = request_path(flow.path or "/")
    socket = Socket(path, flow.kind or "", [])
    current: Exchange | None = None
    previous = flow.started_at or 0.0
    for event in events:
        text = event_text(event)
        if event.event == RawKind.WS_CLIENT:
            kind = flow.kind or ""
            current = Exchange(len(into) + 1, flow.id, "WS", path, kind, _json(text))
            into.append(current)
        else:
            piece = Piece(max(0.0, event.at - previous), text)
            (current.pieces if current is not None else socket.greeting).append(piece)
        previous = event.at
    return socket


def _json(text: str | None) -> Any:
    if text is None or text == "":
        return None
    parsed = loads_or_none(text)
    return text if parsed is None and text.strip() != "null" else parsed


def _without_volatile(value: Any) -> Any:
    """A request's content with what a client mints per run left out (`VOLATILE`)."""
    if isinstance(value, dict):
        # the client's own message: on f/conversation (it has an author), a Responses input
        # message of the client's roles, or an output item it sends
        message = isinstance(value.get("author"), dict) or value.get("role") in CLIENT_ROLES
        message = message or str(value.get("type", "")).endswith("_output")  # its output item
        return {k: _without_volatile(v) for k, v in value.items()
                if k not in VOLATILE and not (message and k == "id")}  # fmt: skip
    if isinstance(value, list):
        return [_without_volatile(v) for v in value]
    return value


def _client_ids(recorded: Any, live: Any) -> Iterator[tuple[str, str]]:
    """The ids the client minted (`_without_volatile` leaves them out), recorded and live, in
    two requests that matched: so at the same places."""
    if isinstance(recorded, dict) and isinstance(live, dict):
        mine = isinstance(recorded.get("author"), dict) or recorded.get("role") in CLIENT_ROLES
        mine = mine or str(recorded.get("type", "")).endswith("_output")
        old, new = recorded.get("id"), live.get("id")
        if mine and isinstance(old, str) and isinstance(new, str) and old != new and len(old) >= 8:
            yield old, new
        for key in recorded.keys() & live.keys():
            yield from _client_ids(recorded[key], live[key])
    elif isinstance(recorded, list) and isinstance(live, list):
        for x, y in zip(recorded, live, strict=False):
            yield from _client_ids(x, y)


def same_scalar(recorded: Any, live: Any) -> bool:
    """A recorded value and a live one alike: a placeholder stands for any text (a whole value
    redacted, for any value)."""
    if isinstance(recorded, str) and PLACEHOLDER.fullmatch(recorded):
        return True
    if isinstance(recorded, str) and isinstance(live, str) and "<redacted:" in recorded:
        pattern = ".+?".join(re.escape(part) for part in PLACEHOLDER.split(recorded))
        return re.fullmatch(pattern, live, re.DOTALL) is not None
    if isinstance(recorded, bool) or isinstance(live, bool):
        return recorded is live
    if isinstance(recorded, int | float) and isinstance(live, int | float):
        return recorded == live
    return type(recorded) is type(live) and bool(recorded == live)


def _without_outputs(value: Any) -> Any:
    """A request without what the client's tools returned: the `output` of its output items,
    the content of its f/conversation tool messages."""
    if isinstance(value, dict):
        tool = isinstance(value.get("author"), dict) and value["author"].get("role") == "tool"
        output = str(value.get("type", "")).endswith("_output")
        return {k: None if (output and k == "output") or (tool and k == "content")
                else _without_outputs(v) for k, v in value.items()}  # fmt: skip
    if isinstance(value, list):
        return [_without_outputs(v) for v in value]
    return value


def _differing(exchange: Exchange, body: Any, *, loose: bool = False) -> list[str]:
    """The paths where `body` differs from what `exchange` recorded (`loose`: but for what the
    client's tools returned)."""
    protocol = "responses" if exchange.kind.startswith("responses") else exchange.kind
    recorded, live = _without_volatile(exchange.body), _without_volatile(body)
    if loose:
        recorded, live = _without_outputs(recorded), _without_outputs(live)
    return list(dict.fromkeys(differences(f"request:{protocol}", recorded, live, same_scalar)))


def _miss_message(
    method: str, path: str, body: Any, candidates: list[Exchange], every: list[Exchange]
) -> str:
    what = f"{REPLAY_MISS}: {method} {path}"
    pool = candidates or [e for e in every if e.method == method]
    if not pool:
        return f"{what}: the capture holds no {method} request to answer it with"
    answered = next((e for e in pool if e.used and not _differing(e, body)), None)
    if answered is not None:
        return (f"{what}: the recorded request it matches, {_name(answered)}, has answered "
                "already (each recorded request answers once)")  # fmt: skip
    left = [e for e in pool if not e.used] or pool  # the nearest of those that may still answer
    scored = [(len(d), e.number, e, d) for e in left for d in [_differing(e, body)]]
    _, _, nearest, paths = min(scored, key=lambda s: (s[0], s[1]))
    name = _name(nearest)
    shown = ", ".join(paths[:SHOWN_PATHS])
    more = f" and {len(paths) - SHOWN_PATHS} more" if len(paths) > SHOWN_PATHS else ""
    differs = f"differs at {shown}{more}" if paths else "differs only in its path"
    return f"{what} matches no recorded request left; the nearest, {name}, {differs}"


def _name(exchange: Exchange) -> str:
    return f"#{exchange.number} ({exchange.method} {exchange.path}, flow {exchange.flow_id})"
