"""The mock server's tornado application: its state and its request handlers.

Serves the endpoints of docs/protocol.md, "Endpoints" (all under `/backend-api/`), the user
WebSocket (`/ws/user/<user id>?verify=<token>`, its URL handed out by `GET celsius/ws/user`) and
two test hooks: `POST /_mock/go` (the go-ahead for `hold_after`) and `GET /_mock/received` (every
request received, as `{method, path, headers, body}`; WebSocket messages have method `WS`). The
Responses API is `mock.responses_http`, the routes `mock.routes`; what the server says is
`mock.scenario` and `mock.responses`: this module only moves bytes. SSE bodies go out chunked, cut
at arbitrary byte positions (once inside a UTF-8 sequence when there is one), optionally gzipped
with a `Z_SYNC_FLUSH` after each event; `hold_after` N parks each stream after N events until a
go-ahead; `die_after` N closes the socket of an `f/conversation` stream after N events (resume
legs are spared). Events count as in docs/protocol.md, "Resume": comments do not count.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import re
import secrets
import threading
import zlib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import orjson
from tornado.http1connection import HTTP1Connection
from tornado.web import RequestHandler
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from convtap.mock.gate import Gate
from convtap.mock.responses import ResponsesServer
from convtap.mock.scenario import (
    Conversation,
    PlayedTurn,
    Scenario,
    ScenarioError,
    UnknownConversation,
    load_scenario,
    ws_frames,
)
from convtap.wire.bounded import Bounded


@dataclass(frozen=True)
class MockOptions:
    scenario: Scenario
    gzip: bool = False
    hold_after: int | None = None
    die_after: int | None = None
    tls: bool = False
    cert_file: Path | None = None  # where the CA certificate (PEM) is written when tls
    delay: float = 0.0  # seconds between chunks
    seed: int | None = None  # chunk splits and made-up arguments; None: a fresh chunk split
    lenient: bool = False  # take Responses requests the real API refuses


KEPT = 1000  # requests and stream bodies the mock keeps for its test hooks (the oldest go)
REMEMBERED = 10_000  # conversations, turns and topics the mock remembers (the oldest go)


def _remembered() -> Bounded[str, Any]:
    return Bounded(REMEMBERED)


@dataclass
class MockState:
    options: MockOptions
    conversations: Bounded[str, Conversation] = field(default_factory=_remembered)
    turns: Bounded[str, PlayedTurn] = field(default_factory=_remembered)  # by conduit token
    topics: Bounded[str, PlayedTurn] = field(default_factory=_remembered)
    subscribers: Bounded[str, set[UserSocket]] = field(default_factory=_remembered)
    gate: Gate = field(default_factory=Gate)
    user_id: str = field(default_factory=lambda: "user-" + secrets.token_hex(8))
    _received: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=KEPT))
    # the stream bodies, as sent; a body grows before each write, so it never lags the wire
    sent: deque[tuple[str, bytearray]] = field(default_factory=lambda: deque(maxlen=KEPT))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    responses: ResponsesServer = field(init=False)

    def __post_init__(self) -> None:
        scenario = self.options.scenario
        script = scenario.responses or load_scenario("weather").responses
        assert script is not None
        self.responses = ResponsesServer(script, self.options.seed or 0, self.options.lenient)

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._received.append(entry)

    def sent_body(self, path: str) -> bytearray:
        """A new stream body in `sent`, for `add_sent` to grow."""
        body = bytearray()
        with self._lock:
            self.sent.append((path, body))
        return body

    def add_sent(self, body: bytearray, data: bytes) -> None:
        with self._lock:
            body += data

    def sent_bodies(self) -> list[tuple[str, bytes]]:
        with self._lock:
            return [(path, bytes(body)) for path, body in self.sent]

    def received(self) -> list[dict[str, Any]]:
        with self._lock:
            copied: list[dict[str, Any]] = json.loads(json.dumps(list(self._received)))
        return copied

    def publish(self, turn: PlayedTurn) -> None:
        """A WebSocket-delivered turn: the topic's items, to whoever already listens."""
        assert turn.topic_id is not None
        self.topics[turn.topic_id] = turn
        for socket in self.subscribers.get(turn.topic_id, set()):
            socket.send_frames(ws_frames(turn))


def token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(24)


def split_chunks(data: bytes, rng: random.Random) -> list[bytes]:
    """Cut a body where the network might: anywhere, and once inside a UTF-8 sequence
    (docs/protocol.md, "SSE framing": chunks split events at any byte)."""
    cuts = {pos for pos in _walk(len(data), rng)}
    lead = _LEAD_BYTE.search(data)  # a scan in C: a body may be tens of megabytes
    if lead is not None:
        cuts.add(lead.start() + 1)  # right after the lead byte of a multi-byte sequence
    edges = [0, *sorted(c for c in cuts if 0 < c < len(data)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


_LEAD_BYTE = re.compile(rb"[\xc0-\xff]")


def _walk(size: int, rng: random.Random) -> list[int]:
    out, pos = [], 0
    while pos < size:
        pos += rng.randint(1, 600)
        out.append(pos)
    return out


class JsonErrors(RequestHandler):
    """Tornado's own errors (an unknown path, a method not served) as the APIs answer them: a
    JSON error, never an HTML page."""

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(
            json.dumps(api_error(f"{self._reason}: {self.request.method} {self.request.path}"))
        )


class Handler(JsonErrors):
    state: MockState

    def initialize(self, state: MockState) -> None:
        self.state = state

    def prepare(self) -> None:
        self._body = parse_body(self.request.body)  # once: a large body takes a while
        if not self.request.path.startswith("/_mock/"):
            self.state.record(
                {
                    "method": self.request.method,
                    "path": self.request.uri,
                    "headers": dict(self.request.headers.get_all()),
                    "body": self._body,
                }
            )

    def send_json(self, value: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(value, ensure_ascii=False))

    def json_body(self) -> Any:
        return self._body


def parse_body(body: bytes) -> Any:
    """A body as JSON, or its text when it is not JSON the mock can answer: JSON's own grammar
    (no NaN or Infinity), numbers a double holds, nesting to orjson's 1024 levels."""
    if not body:
        return None
    text = body.decode("utf-8", "replace")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc) or "infinity" in str(exc):
            return text
    try:  # what orjson refuses but JSON allows (integers past 64 bits, lone surrogates)
        return json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except (ValueError, RecursionError):
        return text


def _not_json(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is past a double's range")
    return number


# What a request can still make the mock's answer fail on (a schema it cannot draw a value
# from): the client's error, answered 400, never a 500 with a traceback.
UNANSWERABLE = (ValueError, TypeError, OverflowError, RecursionError)


class SentinelHandler(Handler):
    """`sentinel/chat-requirements/prepare` and `/finalize`: fake anti-abuse tokens."""

    def post(self, step: str) -> None:
        reply: dict[str, Any] = {"persona": "chatgpt-paid", "token": token("gAAAAAB")}
        if step == "prepare":
            reply["prepare_token"] = token("gAAAAAB")
            reply["proofofwork"] = {
                "required": True,
                "seed": str(random.random()),
                "difficulty": "06a5a0",
            }
            reply["turnstile"] = {"required": False}
        else:
            reply["expire_after"] = 540
        self.send_json(reply)


class PrepareHandler(Handler):
    def post(self) -> None:
        self.send_json({"status": "ok", "conduit_token": token("eyJhbGciOiJIUzI1NiJ9.")})


class StreamHandler(Handler):
    async def stream(self, entries: list[str], *, broken: bool, may_die: bool) -> None:
        """Send SSE entries, holding or dying after N events as the options say; `broken`
        closes the connection after the last entry instead of ending the body."""
        opts = self.state.options
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        compressor = None
        if opts.gzip and "gzip" in self.request.headers.get("Accept-Encoding", ""):
            self.set_header("Content-Encoding", "gzip")
            compressor = zlib.compressobj(wbits=31)  # 16 + 15: the gzip container
        rng = random.Random(opts.seed)
        self._sent = self.state.sent_body(self.request.path)
        await self._stream(entries, compressor, rng, broken=broken, may_die=may_die)

    async def _stream(
        self,
        entries: list[str],
        compressor: Any,
        rng: random.Random,
        *,
        broken: bool,
        may_die: bool,
    ) -> None:
        opts = self.state.options
        segment: list[str] = []
        count = 0
        for text in entries:
            segment.append(text)
            if text.startswith(":"):
                continue  # a comment is not an event
            count += 1
            if count == opts.hold_after:
                await self._send(segment, compressor, rng)
                segment = []
                await self.state.gate.wait()
            if may_die and count == opts.die_after:
                await self._send(segment, compressor, rng)
                self._abort()
                return
        await self._send(segment, compressor, rng)
        if broken:
            self._abort()
            return
        if compressor is not None:
            tail = compressor.flush()
            self.state.add_sent(self._sent, tail)
            self.write(tail)
        self.finish()

    async def _send(self, segment: list[str], compressor: Any, rng: random.Random) -> None:
        if compressor is not None:  # one decodable piece per event
            pieces = [
                compressor.compress(text.encode()) + compressor.flush(zlib.Z_SYNC_FLUSH)
                for text in segment
            ]
        else:
            pieces = split_chunks("".join(segment).encode(), rng)
        for piece in pieces:
            self.state.add_sent(self._sent, piece)
            self.write(piece)
            await self.flush()
            # A flush the socket took at once does not yield: other clients get their turn.
            await asyncio.sleep(self.state.options.delay)

    def _abort(self) -> None:
        """Close the socket mid-body: no terminating chunk, no `[DONE]`."""
        cast(HTTP1Connection, self.request.connection).stream.close()
        self._finished = True  # nothing more may be written for this request


class ConversationHandler(StreamHandler):
    """`POST f/conversation` and the legacy `POST conversation`."""

    async def post(self) -> None:
        body = self.json_body()
        if not isinstance(body, dict):
            return self.send_json({"detail": "the body must be a JSON object"}, 400)
        conduit = self.request.headers.get("x-conduit-token") or token("eyJhbGciOiJIUzI1NiJ9.")
        try:
            turn = self.state.options.scenario.play(
                body, self.state.conversations, conduit_token=conduit,
                seed=self.state.options.seed or 0,
            )  # fmt: skip
        except UnknownConversation as exc:
            return self.send_json({"detail": str(exc)}, 404)
        except ScenarioError as exc:
            return self.send_json({"detail": str(exc)}, 400)
        except UNANSWERABLE as exc:
            return self.send_json({"detail": f"the mock cannot answer this: {exc}"[:300]}, 400)
        self.state.turns[conduit] = turn
        if turn.topic_id is not None:
            self.state.publish(turn)
        await self.stream(turn.first_leg(), broken=turn.cut is not None, may_die=True)


class ResumeHandler(StreamHandler):
    """`POST f/conversation/resume`: `{conversation_id, offset}` + `x-conduit-token`."""

    async def post(self) -> None:
        body = self.json_body()
        turn = self.state.turns.get(self.request.headers.get("x-conduit-token", ""))
        if not isinstance(body, dict) or turn is None:
            return self.send_json({"detail": "unknown conduit token"}, 404)
        offset = body.get("offset")
        if body.get("conversation_id") != turn.conversation_id or type(offset) is not int:
            return self.send_json({"detail": "conversation_id and offset do not match"}, 400)
        try:
            entries = turn.resume_leg(offset)
        except ScenarioError as exc:
            return self.send_json({"detail": str(exc)}, 400)
        await self.stream(entries, broken=False, may_die=False)


class TreeHandler(Handler):
    def get(self, conversation_id: str) -> None:
        conversation = self.state.conversations.get(conversation_id)
        if conversation is None:
            return self.send_json({"detail": "Can't load conversation"}, 404)
        self.send_json(conversation.tree())


class WsUrlHandler(Handler):
    """Where the user socket is, with a fresh `verify` token in its query."""

    def get(self) -> None:
        scheme = "wss" if self.state.options.tls else "ws"
        url = f"{scheme}://{self.request.host}/ws/user/{self.state.user_id}"
        self.send_json({"websocket_url": f"{url}?verify={token('')}"})


class Socket(WebSocketHandler, JsonErrors):
    """A WebSocket endpoint whose plain GET (no upgrade) is a JSON error, as every other."""

    async def get(self, *args: Any, **kwargs: Any) -> None:
        if self.request.headers.get("Upgrade", "").lower() != "websocket":
            self.send_error(400, reason="Can only upgrade to a WebSocket")
            return
        await super().get(*args, **kwargs)


class UserSocket(Socket):
    """The user WebSocket: JSON-array commands in, JSON-array frames out."""

    state: MockState

    def initialize(self, state: MockState) -> None:
        self.state = state
        self._lock = asyncio.Lock()

    def check_origin(self, origin: str) -> bool:
        return True

    def open(self, user_id: str) -> None:  # type: ignore[override]
        headers = dict(self.request.headers.get_all())
        self.state.record(
            {"method": "GET", "path": self.request.uri, "headers": headers, "body": None}
        )
        if not self.get_query_argument("verify", ""):
            self.close(4401, "verify token required")

    def on_message(self, message: str | bytes) -> None:
        commands = parse_body(message.encode() if isinstance(message, str) else message)
        self.state.record(
            {"method": "WS", "path": self.request.uri, "headers": {}, "body": commands}
        )
        for command in commands if isinstance(commands, list) else ():
            if isinstance(command, dict) and command.get("type") == "subscribe":
                self._subscribe(command.get("topic_id"), command.get("id"))

    def _subscribe(self, topic: Any, command_id: Any) -> None:
        if not isinstance(topic, str):
            return
        self.state.subscribers.setdefault(topic, set()).add(self)
        turn = self.state.topics.get(topic)
        if turn is not None and isinstance(command_id, int):
            self.send_frames(ws_frames(turn, subscribe_id=command_id))
            return
        reply = {"type": "subscribe", "topic_id": topic, "recovered": False}
        reply |= {"last_offset": 0, "catchups": []}
        self.send_frames([json.dumps([{"id": command_id, "reply": reply}])])
        if turn is not None:
            self.send_frames(ws_frames(turn))

    def send_frames(self, frames: list[str]) -> None:
        asyncio.get_running_loop().create_task(self._send(frames))

    async def _send(self, frames: list[str]) -> None:
        async with self._lock:  # frames of successive batches keep their order
            for frame in frames:
                try:
                    await self.write_message(frame)
                except WebSocketClosedError:
                    return

    def on_close(self) -> None:
        for topic, sockets in list(self.state.subscribers.items()):
            sockets.discard(self)
            if not sockets:
                del self.state.subscribers[topic]


class NotFound(Handler):
    def prepare(self) -> None:
        super().prepare()
        self.send_error(404)


class GoHandler(Handler):
    def post(self) -> None:
        self.send_json({"released": self.state.gate.go()})


class ReceivedHandler(Handler):
    def get(self) -> None:
        self.send_json(self.state.received())


def api_error(message: str) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }
