"""The mitmproxy addon: `mitmdump -s addon/mitm.py [--set convtap_db=PATH]` (or mitmweb).

It recognises the conversation endpoints, taps their event streams without holding a byte, and hands
what happens to the recorder as events. Rules it keeps (docs/architecture.md, "The proxy and
mitmproxy"): the stream callable is sync, never raises and returns its input unchanged; finishing
happens in `response` / `error`, never on an empty chunk; nothing slow runs on mitmproxy's event
loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from mitmproxy import ctx, http
from mitmproxy.addonmanager import Loader
from mitmproxy.exceptions import OptionsError

from convtap.journal import DEFAULT_DB
from convtap.journal.backend import JournalBackend, RecorderRefused
from convtap.journal.events import (
    OwnFailure,
    RecorderEvent,
    ResponseStarted,
    WebSocketEnded,
    WebSocketMessage,
)
from convtap.journal.flows import headers_of, request_seen, response_events
from convtap.journal.segments import JournalError
from convtap.proxy import contentview
from convtap.proxy.tap import Tap
from convtap.vocab import Endpoint, Source
from convtap.wire.session import SOCKETS, STREAMED, endpoint_kind

log = logging.getLogger("convtap")
KEEP_BODY = 16 << 20  # bytes of a streamed body kept on its flow for mitmproxy's views
STOPPING = b"convtap is stopping: this request was not forwarded (nothing would record it)\n"
LAG_REPORT = 64_000_000  # bytes of journal behind which the lag is reported (then at each 2x)


class Backend(Protocol):
    """Where the addon hands what happens: the journal (`JournalBackend`), or a recorder in this
    process."""

    def handle(self, event: RecorderEvent) -> None: ...
    def chunks(self, flow_id: str) -> Callable[[bytes, float], None]: ...
    def close(self) -> None: ...


# A recorder in mitmproxy's own process (`convtap_worker=false`), made for a database: given by
# whoever assembles the addon (`proxy.script`), so that this module loads no recorder. It
# raises `RecorderRefused` for a database it may not record into.
InProcess = Callable[[str, bool, str], Backend]


class ConvtapAddon:
    name = "convtap"  # how mitmproxy's addon manager names it (`master.addons.get`)

    def __init__(self, in_process: InProcess | None = None) -> None:
        self.in_process = in_process
        self.backend: Backend | None = None  # opened by configure() (or open(), embedded)
        self.failed: str | None = None  # why recording stopped, if it did
        self._watch: asyncio.Task[None] | None = None
        self.kinds: dict[str, Endpoint] = {}  # flow id -> endpoint kind, for the flows we record
        self.tapped: set[str] = set()
        self.ws_trim = False
        self.started = False  # mitmproxy is running (its startup is over)
        # mitmproxy is shutting down and the journal is closed: nothing more of ours is
        # forwarded, since nothing would record it (connections live on a moment after `done`)
        self.stopping = False

    # -- lifecycle -------------------------------------------------------------------------------

    def load(self, loader: Loader) -> None:
        contentview.register()
        loader.add_option("convtap_db", str, str(DEFAULT_DB), "convtap: the capture database.")
        loader.add_option(
            "convtap_redact", bool, True, "convtap: redact secrets before they are stored."
        )
        loader.add_option(
            "convtap_echo", str, "log", "convtap: where the call and return lines go.",
            choices=["log", "stdout", "off"],
        )  # fmt: skip
        loader.add_option(
            "convtap_ws_trim", bool, False,
            "convtap: drop WebSocket messages from mitmproxy's memory once recorded.",
        )  # fmt: skip
        loader.add_option(
            "convtap_keep_body", int, KEEP_BODY,
            "convtap: keep a copy of each streamed conversation body up to this many bytes, so"
            " mitmweb, the console and saved flows show it (0: never).",
        )  # fmt: skip
        loader.add_option(
            "convtap_worker", bool, True,
            "convtap: decode and store in a separate process (off: in mitmproxy's own).",
        )  # fmt: skip

    def configure(self, updated: set[str]) -> None:
        self.ws_trim = ctx.options.convtap_ws_trim
        options = {"convtap_db", "convtap_redact", "convtap_echo", "convtap_worker"}
        if self.backend is None or updated & options:
            o = ctx.options
            if _viewing(o):  # `mitmdump -nr FLOWS`: the views, and no database made
                self.close()
                return
            try:
                self.open(o.convtap_db, o.convtap_redact, o.convtap_echo, worker=o.convtap_worker)
            except (RecorderRefused, JournalError) as exc:
                if not self.started:  # mitmproxy would print a traceback around it: one line,
                    log.error("convtap: convtap_db: %s", exc)  # and an error at startup ends it
                    return
                raise OptionsError(f"convtap_db: {exc}") from None  # the change is refused

    def open(self, db: str, redact: bool = True, echo: str = "log", worker: bool = True) -> None:
        """Start recording into `db`: through the journal and a recorder process, or in this
        process (`in_process`)."""
        self.close()
        if not redact:
            log.warning("convtap: redaction is OFF: secrets are stored in clear in %s", db)
        if worker:
            self.backend = JournalBackend(db, redact=redact, echo=echo)
        elif self.in_process is not None:
            self.backend = self.in_process(db, redact, echo)
        else:
            raise RecorderRefused("convtap_worker=false: this addon has no recorder of its own")

    def running(self) -> None:
        self.started = True
        if ctx.options.convtap_echo == "stdout":
            print(banner(), flush=True)
        if isinstance(self.backend, JournalBackend):
            self._watch = asyncio.get_running_loop().create_task(self.watch(self.backend))

    async def watch(self, backend: JournalBackend) -> None:
        """Say loudly when recording stops, and how far behind the recorder is when it lags."""
        said = LAG_REPORT
        while True:
            await asyncio.sleep(1)
            if backend.error is not None:
                self.failed = backend.error  # `convtap record` says it last, and exits 1
                log.error("convtap: %s", backend.error)
                if backend.fatal:  # nothing records: stop, say so (a full disk never stops it)
                    ctx.master.shutdown()
                return
            lag = backend.lag()
            if lag >= said:
                log.warning("convtap: the recorder is %.0f MB behind (kept on disk in %s)",
                            lag / 1e6, backend.journal.directory)  # fmt: skip
                said = lag * 2
            elif lag < LAG_REPORT:
                said = LAG_REPORT

    def done(self) -> None:
        contentview.unregister()
        # The whole proxy stopping (not this script reloaded: its streams go on, unrecorded)
        self.stopping = _exiting()
        self.close()

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if isinstance(self.backend, JournalBackend):
            self.backend.close(progress=lambda line: log.warning("convtap: %s", line))
        elif self.backend is not None:
            self.backend.close()
        self.backend = None

    def send(self, event: RecorderEvent) -> None:
        if self.backend is not None:
            self.backend.handle(event)

    # -- HTTP ------------------------------------------------------------------------------------

    def request(self, flow: http.HTTPFlow) -> None:
        try:
            kind = endpoint_kind(flow.request.method, flow.request.path)
            if kind is None:
                return  # not ours: it passes untouched and unrecorded
            if self.stopping:
                flow.response = http.Response.make(503, STOPPING, {"content-type": "text/plain"})
                return
            self.kinds[flow.id] = kind
            self.send(request_seen(flow, Source.LIVE if flow.live else Source.IMPORT))
        except Exception as exc:
            self.failure(flow.id, exc)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        try:
            assert flow.response is not None
            if self.kinds.get(flow.id) not in STREAMED or not flow.live:
                return  # a flow read from a file is never streamed: `response` has it whole
            if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
                headers = headers_of(flow.response)
                self.send(ResponseStarted(flow.id, flow.response.status_code, headers))
                encoding = flow.response.headers.get("content-encoding", "")
                keep = ctx.options.convtap_keep_body
                sink = self.backend.chunks(flow.id) if self.backend is not None else _nowhere
                flow.response.stream = Tap(flow.id, encoding, sink, self.failure, keep,
                                           stopped=lambda: self.stopping)  # fmt: skip
                self.tapped.add(flow.id)
        except Exception as exc:
            self.failure(flow.id, exc)

    def response(self, flow: http.HTTPFlow) -> None:
        try:
            upgraded = flow.response is not None and flow.response.status_code == 101
            if self.kinds.get(flow.id) in SOCKETS and upgraded:
                return  # the 101 answer: the socket's messages follow
            self._end(flow)
        except Exception as exc:
            self.failure(flow.id, exc)

    def error(self, flow: http.HTTPFlow) -> None:
        try:
            self._end(flow)
        except Exception as exc:
            self.failure(flow.id, exc)

    def _end(self, flow: http.HTTPFlow) -> None:
        if self.kinds.pop(flow.id, None) is None:
            return
        streamed = flow.id in self.tapped
        self.tapped.discard(flow.id)
        for event in response_events(flow, streamed=streamed):
            self.send(event)
        response = flow.response
        if response is not None and isinstance(response.stream, Tap):
            kept = response.stream.body()
            if kept is not None and response.raw_content is None:
                response.raw_content = kept  # for the views: the client has had it all

    # -- WebSocket -------------------------------------------------------------------------------

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        try:
            if self.kinds.get(flow.id) not in SOCKETS:
                return
            assert flow.websocket is not None
            message = flow.websocket.messages[-1]
            text = message.content.decode("utf-8", "replace")
            self.send(WebSocketMessage(flow.id, message.from_client, text, message.timestamp))
            if self.ws_trim:
                del flow.websocket.messages[:-1]  # never clear(): later addons read [-1]
        except Exception as exc:
            self.failure(flow.id, exc)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        try:
            if self.kinds.pop(flow.id, None) in SOCKETS:
                self.send(WebSocketEnded(flow.id, time.time()))
        except Exception as exc:
            self.failure(flow.id, exc)

    def failure(self, flow_id: str, exc: BaseException) -> None:
        """Our own failure: logged and recorded on the flow; the traffic goes on."""
        text = f"{type(exc).__name__}: {exc}"
        log.warning("convtap: failed on flow %s: %s", flow_id, text)
        with contextlib.suppress(Exception):
            self.send(OwnFailure(flow_id, text))


def _viewing(options: Any) -> bool:
    """Flows read from a file (`-r` / `-nr`) with no `convtap_db` named: someone looking at
    saved flows, whom the content view serves; recording them is asked for by naming one."""
    return bool(getattr(options, "rfile", None)) and not options.has_changed("convtap_db")


def _exiting() -> bool:
    """mitmproxy is shutting down (`Master.shutdown` was called)."""
    exit_event = getattr(getattr(ctx, "master", None), "should_exit", None)
    return isinstance(exit_event, asyncio.Event) and exit_event.is_set()


def _nowhere(data: bytes, at: float) -> None:
    """A tap's sink once recording has stopped."""


def banner() -> str:
    """What `convtap record` prints once the proxy listens: where, and how to use it."""
    addresses = ctx.master.addons.get("proxyserver").listen_addrs()
    host, port = (
        addresses[0][:2] if addresses else (ctx.options.listen_host, ctx.options.listen_port)
    )
    where = f"{host or '127.0.0.1'}:{port}"
    modes = list(ctx.options.mode)
    redacted = "secrets redacted" if ctx.options.convtap_redact else "REDACTION OFF"
    lines = [
        f"convtap recording into {ctx.options.convtap_db} ({redacted})",
        f"  proxy listening at {where}, mode {', '.join(modes)}",
    ]
    if any(m.startswith("reverse:") for m in modes):
        lines.append(f"  point your client's base URL at http://{where}")
    else:
        lines.append(
            f"  point your client at it: HTTPS_PROXY=http://{where} HTTP_PROXY=http://{where}"
        )
    confdir = Path(ctx.options.confdir).expanduser()
    lines.append(
        f"  trust the CA for HTTPS: {confdir / 'mitmproxy-ca-cert.pem'}"
        " (or open http://mitm.it through the proxy)"
    )
    lines.append("  one line per tool call and tool return follows; Ctrl-C stops and flushes")
    return "\n".join(lines)
