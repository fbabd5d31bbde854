"""`convtap serve` (and `convtap record --web`, which runs it beside the proxy): the report of a
capture served on 127.0.0.1, behind a random token in its URL, kept current as the capture grows.

One tornado application on its own event loop, in a process of its own: reading never takes the
proxy's CPU time or its GIL. Every 200 ms the capture is asked whether anything was committed
(`PRAGMA data_version`, no table read); when it was, the steps it changed are read again
(`model.LiveModel`: a reading costs what changed), and each page is sent, as a server-sent event,
the steps that changed since what it shows (their latest JSON) and the summary and the pictures
when they differ (those are read whole, in a thread, at most once a second and no more than a
tenth of the time: see `Live._parts`). A page
that reads slowly is only ever one message behind: it is sent the latest state of what changed
when it has taken the last message, never a queue. The capture is only read (`open_readonly`).

The page itself is a shell (the markup, the summary, the pictures, the scripts: what the first
screen needs); its script fetches the data (`data`: every block of the latest reading, one a
line, the reading in a header), reads it as it comes, and only then asks for the events since
that reading (`events?v=<reading>&p=<the parts' tag>`).
"""

from __future__ import annotations

import asyncio
import hmac
import os
import secrets
import signal
import sqlite3
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from tornado.httpserver import HTTPServer
from tornado.ioloop import PeriodicCallback
from tornado.iostream import StreamClosedError
from tornado.locks import Condition
from tornado.netutil import bind_sockets
from tornado.web import Application, HTTPError, RequestHandler

from convtap.report.parts import SCRIPT_SRC, LiveCapture, LivePage, Parts
from convtap.store.database import StoreError, open_readonly

HOST = "127.0.0.1"  # never any other interface: the page shows what the capture holds
NAMES = (HOST, "localhost")  # the only names a request may give as its Host
POLL_MS = 200
PING = timedelta(seconds=15)  # a comment line that finds a client gone
MAX_CLIENTS = 16
PARTS_EVERY = 1.0  # seconds between two readings of the summary and the pictures, at least
CSP = ("default-src 'none'; connect-src 'self'; style-src 'unsafe-inline'; "
       f"script-src {SCRIPT_SRC}; img-src data:")  # fmt: skip


class ListenError(Exception):
    """The page cannot be served on the port asked for."""


class Live:
    """The capture served, the page's data kept current, and the clients waiting for the next."""

    def __init__(self, db: Path, token: str) -> None:
        self.token = token
        self.capture = LiveCapture(db)
        self.page = LivePage(db, f"/{token}/")
        self.page.read_whole(self.capture.capture)
        self.parts: Parts = self.page.parts(self.capture.capture)
        self.renewed = Condition()
        self.clients = 0
        self.readers = 0  # pages being sent their data now
        self.trouble = ""  # what made the last look at the capture fail
        self.rest_until = 0.0
        self.parts_due = 0.0  # when the summary and the pictures may be read again
        self.parts_stale = False
        self.parts_reading = False  # in a thread now

    def poll(self) -> None:
        now = time.monotonic()
        if now < self.rest_until:
            return
        started = now
        try:
            renewed = self._read()
        except (OSError, sqlite3.DatabaseError, StoreError) as exc:
            if str(exc) != self.trouble:  # said once, not every 200 ms
                print(f"convtap: cannot read {self.capture.db} ({exc}): the page shows what it"
                      " read last", file=sys.stderr)  # fmt: skip
            self.trouble = str(exc)
        else:
            self.trouble = ""
            if renewed:
                self.renewed.notify_all()
        # A reading that took long (a whole capture read again): rest as long, so that the
        # server takes at most half a CPU however fast the capture grows.
        self.rest_until = 2 * time.monotonic() - started

    def _read(self) -> bool:
        renewed = False
        if self.capture.changed():
            reading = self.page.read(self.capture.capture, reopened=self.capture.reopened())
            renewed = bool(reading.changed or reading.gone)
            self.parts_stale = self.parts_stale or renewed
        if self.parts_stale and not self.parts_reading and time.monotonic() >= self.parts_due:
            self.parts_stale, self.parts_reading = False, True
            reading_parts = asyncio.get_running_loop().run_in_executor(None, self._parts)
            reading_parts.add_done_callback(self._parts_read)
        return renewed

    def _parts(self) -> tuple[Parts, float]:
        """The summary and the pictures read whole, on a connection of their own, in a thread:
        the steps' readings and the pages go on meanwhile (SQLite lets go of the GIL)."""
        started = time.monotonic()
        capture = open_readonly(self.capture.db)
        try:
            return self.page.parts(capture), time.monotonic() - started
        finally:
            capture.conn.close()

    def _parts_read(self, done: asyncio.Future[tuple[Parts, float]]) -> None:
        self.parts_reading = False
        try:
            parts, took = done.result()
        except (OSError, sqlite3.DatabaseError, StoreError):
            self.parts_stale = True  # tried again at the next look
            return
        # At most a tenth of the time on them, and no more than once a second.
        self.parts_due = time.monotonic() + max(PARTS_EVERY, 9 * took)
        if parts.digests != self.parts.digests:
            self.parts = parts
            self.renewed.notify_all()

    def whole(self) -> str:
        self.poll()  # the page is of the latest reading
        return self.page.whole(self.capture.capture, self.parts)

    def allows(self, token: str) -> bool:
        return hmac.compare_digest(token.encode(), self.token.encode())


class Guarded(RequestHandler):
    """Answers only with the token; says nothing of itself (no server name, no log line)."""

    live: Live

    def initialize(self, live: Live | None = None) -> None:
        if live is not None:
            self.live = live

    def set_default_headers(self) -> None:
        self.clear_header("Server")
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("Referrer-Policy", "no-referrer")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-store")

    def prepare(self) -> None:
        if self.request.host_name not in NAMES:  # DNS rebinding: another site's name for us
            raise HTTPError(403)
        token = self.path_args[0] if self.path_args else ""
        if not hasattr(self, "live") or not self.live.allows(token):
            raise HTTPError(404)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(f"{status_code}\n")


class PageHandler(Guarded):
    def get(self, token: str) -> None:
        try:
            page = self.live.whole()
        except (OSError, sqlite3.DatabaseError, StoreError) as exc:
            raise HTTPError(503) from exc  # said on stderr by the poll
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(page)


class DataHandler(Guarded):
    """The page's data at the latest reading: its blocks, one a line (base64 of gzip, as the
    report holds them), the reading in `X-Convtap-Reading`. The first block is sent at once, so
    that the page draws its first screen while the rest comes."""

    def compute_etag(self) -> None:
        return None  # never cached (no-store): no digest of megabytes for nothing

    async def get(self, token: str) -> None:
        if self.live.readers >= MAX_CLIENTS:  # each holds the blocks of its reading until sent
            raise HTTPError(503)
        try:
            self.live.poll()
        except (OSError, sqlite3.DatabaseError, StoreError) as exc:
            raise HTTPError(503) from exc
        version, blocks = self.live.page.data()
        self.set_header("Content-Type", "text/plain; charset=us-ascii")
        self.set_header("X-Convtap-Reading", str(version))
        self.live.readers += 1
        try:
            for n, block in enumerate(blocks):
                self.write(block)
                if n % 8 == 0:
                    await self.flush()  # the first at once; a slow page holds a few more here
            self.finish()
        except StreamClosedError:
            pass  # the page went away
        finally:
            self.live.readers -= 1


class EventsHandler(Guarded):
    """What changed since the page was rendered, as server-sent events (`update`, JSON: the
    steps changed, the steps gone, the parts that differ; `reload` when the page is too far
    behind to be told what changed)."""

    _gone = False

    def on_connection_close(self) -> None:
        self._gone = True
        self.live.renewed.notify_all()

    async def get(self, token: str) -> None:
        if self.live.clients >= MAX_CLIENTS:
            raise HTTPError(503)
        self.live.clients += 1
        try:
            await self._stream()
        except StreamClosedError:
            pass
        finally:
            self.live.clients -= 1

    async def _stream(self) -> None:
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.write("retry: 1000\n\n")
        version = int(self.get_query_argument("v", "-1") or -1)
        shows = self.get_query_argument("p", "")  # the tag of the parts the page shows
        digests = dict(self.live.parts.digests) if shows == self.live.parts.tag else {}
        while not self._gone:
            model = self.live.page.model
            message = self.live.page.update(version, digests, self.live.parts)
            if message is not None:
                self.write(f"event: {message[0]}\ndata: {message[1]}\n\n")
            version = model.version
            await self.flush()  # waits while a slow client takes it: never a queue
            if model.version == version and self.live.parts.digests == digests and not self._gone:
                woken = await self.live.renewed.wait(timeout=PING)
                if not woken:
                    self.write(": ping\n\n")


def application(live: Live) -> Application:
    return Application(
        [(r"/([A-Za-z0-9_-]+)/", PageHandler, {"live": live}),
         (r"/([A-Za-z0-9_-]+)/data", DataHandler, {"live": live}),
         (r"/([A-Za-z0-9_-]+)/events", EventsHandler, {"live": live})],
        default_handler_class=Guarded,
        log_function=lambda handler: None,  # a wrong URL leaves no line on the terminal
    )  # fmt: skip


def serve(db: Path, port: int, ready: Callable[[str], None]) -> None:
    """Serve the live page of `db` on 127.0.0.1:`port` (0: a free one) until SIGINT or SIGTERM,
    or until the process that started this one is gone. `ready(url)` is called once it listens.
    Raises `StoreError` for what is not a readable capture, `ListenError` when it cannot listen."""
    asyncio.run(_serve(db, port, ready))


async def _serve(db: Path, port: int, ready: Callable[[str], None]) -> None:
    token = secrets.token_urlsafe(24)
    try:
        live = Live(db, token)
    except sqlite3.DatabaseError as exc:  # a damaged page, a damaged compressed row
        raise StoreError(f"{db} cannot be read: {exc}") from exc
    try:
        sockets = bind_sockets(port, HOST)
    except OSError as exc:
        raise ListenError(f"cannot listen on {HOST}:{port} ({exc.strerror or exc})") from exc
    server = HTTPServer(application(live))
    server.add_sockets(sockets)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    parent = os.getppid()

    def poll() -> None:
        if os.getppid() != parent:  # orphaned: whoever started it is gone
            stop.set()
        live.poll()

    poller = PeriodicCallback(poll, POLL_MS)
    poller.start()
    ready(f"http://{HOST}:{sockets[0].getsockname()[1]}/{token}/")
    try:
        await stop.wait()
    finally:
        poller.stop()
        server.stop()
        await server.close_all_connections()
        live.capture.close()
