"""`convtap mock --replay CAPTURE`: the server's side of a capture, played back.

Every path and method is one handler: the request is matched to a recorded one
(`mock.recorded`), whose answer goes back as stored (status, headers but the transport's own,
the body's bytes, an event stream in the pieces it came in); a socket's frames are matched one
by one, each answered with the server frames that followed it. `timing="recorded"` waits the
recorded gap before each piece, `"fast"` sends at once. A request nothing matches is a 400 with
the protocol's error body (an error frame on a socket), its message a *replay miss*.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path
from typing import Any

from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from tornado.web import Application
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from convtap.mock.app import JsonErrors, parse_body
from convtap.mock.recorded import Exchange, Miss, Piece, Recording, load
from convtap.mock.responses_http import error_frame
from convtap.vocab import REPLAY_MISS_CODE

TIMINGS = ("fast", "recorded")
USER_SOCKET_URL = "/backend-api/celsius/ws/user"


def is_conversation_path(path: str) -> bool:
    """ChatGPT's backend (its errors are `{"detail": ...}`), not the Responses API."""
    return path.startswith("/backend-api/") and not path.startswith("/backend-api/codex/")


def miss_body(path: str, miss: Miss) -> dict[str, Any]:
    """A miss as the protocol says an invalid request: f/conversation's `detail`, or the
    Responses API's error object with the code `replay_miss`."""
    if is_conversation_path(path):
        return {"detail": miss.message}
    return {"error": {"message": miss.message, "type": "invalid_request_error", "param": None,
                      "code": REPLAY_MISS_CODE}}  # fmt: skip


class ReplayHandler(WebSocketHandler, JsonErrors):
    """Any request: its recorded answer, or a miss; upgraded, a recorded socket."""

    def initialize(self, recording: Recording, timing: str) -> None:
        self.recording = recording
        self.timing = timing
        self._lock = asyncio.Lock()

    def check_origin(self, origin: str) -> bool:
        return True

    async def get(self, *args: Any, **kwargs: Any) -> None:
        if self.request.headers.get("Upgrade", "").lower() == "websocket":
            await super().get(*args, **kwargs)
        else:
            await self._answer()

    async def post(self, *args: Any) -> None:
        await self._answer()

    async def put(self, *args: Any) -> None:
        await self._answer()

    async def patch(self, *args: Any) -> None:
        await self._answer()

    async def delete(self, *args: Any) -> None:
        await self._answer()

    async def _answer(self) -> None:
        method = self.request.method or "GET"
        found = self.recording.answer(method, self.request.path, parse_body(self.request.body))
        if isinstance(found, Miss) and (url := self._user_socket_url()) is not None:
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"websocket_url": url}))
            return
        if isinstance(found, Miss):
            self.set_status(400)
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(miss_body(self.request.path, found), ensure_ascii=False))
            return
        await self._send(found)

    def _user_socket_url(self) -> str | None:
        """`GET celsius/ws/user`, which a capture does not record: where the recorded user
        socket is, on this server (its `verify` token is not checked)."""
        if self.request.method != "GET" or self.request.path != USER_SOCKET_URL:
            return None
        path = self.recording.user_socket()
        if path is None:
            return None
        scheme = "wss" if self.request.protocol == "https" else "ws"
        return f"{scheme}://{self.request.host}{path}?verify=replay"

    async def _send(self, exchange: Exchange) -> None:
        self.set_status(exchange.status, None if exchange.status in _REASONS else "Recorded")
        self.clear_header("Content-Type")  # tornado's own default: only what was recorded
        seen: set[str] = set()
        for name, value in exchange.headers:
            (self.add_header if name.lower() in seen else self.set_header)(name, value)
            seen.add(name.lower())
        for piece in exchange.pieces:
            await self._wait(piece)
            data = self.recording.translate(piece.data)
            self.write(data if isinstance(data, bytes) else data.encode())
            if len(exchange.pieces) > 1:
                await self.flush()
        self.finish()

    async def _wait(self, piece: Piece) -> None:
        if self.timing == "recorded" and piece.gap > 0:
            await asyncio.sleep(piece.gap)

    def open(self, *args: Any, **kwargs: Any) -> None:
        greeting = self.recording.greeting(self.request.path)
        if greeting:
            asyncio.get_running_loop().create_task(self._frames(greeting))

    async def on_message(self, message: str | bytes) -> None:
        frame = parse_body(message.encode() if isinstance(message, str) else message)
        found = self.recording.answer("WS", self.request.path, frame)
        if isinstance(found, Miss):
            body = miss_body(self.request.path, found)
            error = body if "detail" in body else error_frame(body)
            await self._frames([Piece(0.0, json.dumps(error, ensure_ascii=False))])
            return
        await self._frames(found.pieces)

    async def _frames(self, pieces: list[Piece]) -> None:
        async with self._lock:  # a greeting and the first answer keep their order
            for piece in pieces:
                await self._wait(piece)
                with contextlib.suppress(WebSocketClosedError):
                    await self.write_message(self.recording.translate(piece.data))


_REASONS = frozenset({200, 201, 202, 204, 301, 302, 304, 400, 401, 403, 404, 405, 409, 413,
                      422, 429, 500, 502, 503, 504})  # fmt: skip


def make_app(recording: Recording, timing: str) -> Application:
    args = {"recording": recording, "timing": timing}
    return Application([(r"/.*", ReplayHandler, args)], log_function=lambda handler: None)


def run(
    host: str, port: int, capture: Path, timing: str, *, tls: bool, cert_file: Path | None
) -> None:
    """Serve the capture (a database, or anything `convtap import` reads) until SIGINT or
    SIGTERM; prints `convtap mock listening at <url>` once listening. A capture that cannot be
    replayed raises before anything listens."""
    from convtap.ingest.capture import as_database

    with as_database(capture) as db:
        recording = load(db)
    asyncio.run(_serve(recording, timing, host, port, tls, cert_file))


async def _serve(
    recording: Recording, timing: str, host: str, port: int, tls: bool, cert_file: Path | None
) -> None:
    context = None
    if tls:
        from convtap.mock.server import tls_context

        assert cert_file is not None
        context = tls_context(cert_file)
    sockets = bind_sockets(port, address=host)
    server = HTTPServer(make_app(recording, timing), ssl_options=context)
    server.add_sockets(sockets)
    scheme = "https" if tls else "http"
    bound = sockets[0].getsockname()[1]
    print(f"convtap mock listening at {scheme}://{host}:{bound} (replaying "
          f"{len(recording.exchanges)} recorded requests)", flush=True)  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.stop()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(server.close_all_connections(), timeout=2)
