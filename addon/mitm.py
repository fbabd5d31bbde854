"""The mitmproxy addon: `mitmdump -s addon/mitm.py [--set convtap_db=PATH]` (or mitmweb).

It recognises the conversation endpoints, taps their event streams without holding a byte, and
hands everything to the recorder. Rules it keeps (../shared/research/mitmproxy-notes.md): the
stream callable is sync, never raises and returns its input unchanged; finalising happens in
`response` / `error`, never on an empty chunk; SQLite is written by the store's writer thread.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:  # loaded as a script (mitmdump -s) from a checkout that is not installed
    import addon  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mitmproxy import ctx, http
from mitmproxy.addonmanager import Loader

from addon.recorder import Exchange, Recorder
from addon.session import endpoint_kind
from addon.store import DEFAULT_DB, Writer
from addon.worker import LocalRecorder, RecorderClient

log = logging.getLogger("convtap")


def decompressor(encoding: str) -> Callable[[bytes], bytes]:
    """Incremental decoding of a Content-Encoding, for the decoder's copy only."""
    steps = [e.strip().lower() for e in encoding.split(",") if e.strip()]
    funcs = [_one_decompressor(e) for e in reversed(steps) if e != "identity"]

    def run(data: bytes) -> bytes:
        for func in funcs:
            data = func(data)
        return data

    return run


def _one_decompressor(encoding: str) -> Callable[[bytes], bytes]:
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(wbits=zlib.MAX_WBITS | 16).decompress
    if encoding == "deflate":
        state: dict[str, Any] = {}

        def inflate(data: bytes) -> bytes:  # zlib-wrapped or raw, told by the first byte
            if "d" not in state:
                raw = bool(data) and (data[0] & 0x0F) != 8
                state["d"] = zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
            return bytes(state["d"].decompress(data))

        return inflate
    if encoding == "br":
        import brotli

        return brotli.Decompressor().process  # type: ignore[no-any-return]
    if encoding == "zstd":
        # mitmproxy 12 brings backports.zstd (compression.zstd from Python 3.14), 11 zstandard.
        for name in ("compression.zstd", "backports.zstd"):
            try:
                module: Any = importlib.import_module(name)
            except ImportError:
                continue
            return module.ZstdDecompressor().decompress  # type: ignore[no-any-return]
        module = importlib.import_module("zstandard")
        return module.ZstdDecompressor().decompressobj().decompress  # type: ignore[no-any-return]
    raise ValueError(f"unsupported content-encoding {encoding!r}")


class Tap:
    """`flow.response.stream`: returns each chunk unchanged, hands a copy to the recorder."""

    def __init__(self, addon: ConvtapAddon, flow: http.HTTPFlow) -> None:
        self.addon, self.flow_id = addon, flow.id
        self.failed = False
        assert flow.response is not None
        try:
            self.decode = decompressor(flow.response.headers.get("content-encoding", ""))
        except Exception as exc:
            self.fail(exc)

    def __call__(self, data: bytes) -> bytes:
        if data and not self.failed:
            try:
                plain = self.decode(data)
                if plain:
                    self.addon.backend.chunk(self.flow_id, plain, time.time())
            except Exception as exc:  # never break the client's stream
                self.fail(exc)
        return data

    def fail(self, exc: Exception) -> None:
        self.failed = True
        self.addon.failure(self.flow_id, exc)


Backend = LocalRecorder | RecorderClient


class ConvtapAddon:
    def __init__(self) -> None:
        self._backend: Backend | None = None
        self.kinds: dict[str, str] = {}  # flow id -> endpoint kind, for the flows we record
        self.tapped: set[str] = set()
        self.ws_trim = False

    # -- lifecycle -------------------------------------------------------------------------------

    def load(self, loader: Loader) -> None:
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
            "convtap_worker", bool, True,
            "convtap: decode and store in a separate process (off: in mitmproxy's own).",
        )  # fmt: skip

    def configure(self, updated: set[str]) -> None:
        self.ws_trim = ctx.options.convtap_ws_trim
        options = {"convtap_db", "convtap_redact", "convtap_echo", "convtap_worker"}
        if self._backend is None or updated & options:
            o = ctx.options
            self.open(o.convtap_db, o.convtap_redact, o.convtap_echo, worker=o.convtap_worker)

    def open(self, db: str, redact: bool = True, echo: str = "log", worker: bool = False) -> None:
        """Start recording into `db`: in a worker process, or in this one (import, tests)."""
        self.done()
        if not redact:
            log.warning("convtap: redaction is OFF: secrets are stored in clear in %s", db)
        backend = RecorderClient if worker else LocalRecorder
        self._backend = backend(db, redact=redact, echo=echo)

    @property
    def backend(self) -> Backend:
        if self._backend is None:  # added without options (embedding): use the defaults
            self.open(str(DEFAULT_DB))
        assert self._backend is not None
        return self._backend

    @property
    def writer(self) -> Writer | None:
        """The in-process writer (import uses it to know the database)."""
        return self._backend.writer if isinstance(self._backend, LocalRecorder) else None

    @property
    def recorder(self) -> Recorder:
        backend = self.backend
        assert isinstance(backend, LocalRecorder), "the recorder runs in the worker process"
        return backend.recorder

    def running(self) -> None:
        if ctx.options.convtap_echo == "stdout":
            print(banner(), flush=True)

    def done(self) -> None:
        if self._backend is not None:
            self._backend.close()
        self._backend = None

    # -- HTTP ------------------------------------------------------------------------------------

    def request(self, flow: http.HTTPFlow) -> None:
        try:
            req = flow.request
            kind = endpoint_kind(req.method, req.path)
            if kind is None:
                return  # not ours: it passes untouched and unrecorded
            self.kinds[flow.id] = kind
            exchange = Exchange(
                id=flow.id, method=req.method, url=req.pretty_url, host=req.pretty_host,
                path=req.path, headers=list(req.headers.items(multi=True)),
                body=req.get_content(strict=False), started_at=req.timestamp_start,
                source="live" if flow.live else "import",
            )  # fmt: skip
            self.backend.call("request", exchange)
        except Exception as exc:
            self.failure(flow.id, exc)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        try:
            assert flow.response is not None
            if self.kinds.get(flow.id) not in ("conversation", "resume", "responses"):
                return
            if not flow.live:
                return
            headers = list(flow.response.headers.items(multi=True))
            if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
                self.backend.call("response_headers", flow.id, headers)
                flow.response.stream = Tap(self, flow)
                self.tapped.add(flow.id)
        except Exception as exc:
            self.failure(flow.id, exc)

    def response(self, flow: http.HTTPFlow) -> None:
        try:
            assert flow.response is not None
            if self.kinds.get(flow.id) == "websocket":
                return  # the 101 answer: the socket's messages follow
            if self.kinds.pop(flow.id, None) is None:
                return
            streamed = flow.id in self.tapped
            self.tapped.discard(flow.id)
            self.backend.end_flow(flow.id)
            self.backend.call(
                "response_end", flow.id, flow.response.status_code,
                list(flow.response.headers.items(multi=True)),
                None if streamed else flow.response.get_content(strict=False),
                "complete", flow.response.timestamp_end,
            )  # fmt: skip
        except Exception as exc:
            self.failure(flow.id, exc)

    def error(self, flow: http.HTTPFlow) -> None:
        try:
            if self.kinds.pop(flow.id, None) is None:
                return
            self.tapped.discard(flow.id)
            self.backend.end_flow(flow.id)
            response = flow.response
            message = flow.error.msg if flow.error else "error"
            headers = list(response.headers.items(multi=True)) if response else []
            status = response.status_code if response else None
            self.backend.call("response_end", flow.id, status, headers, None, message, time.time())
        except Exception as exc:
            self.failure(flow.id, exc)

    # -- WebSocket -------------------------------------------------------------------------------

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        try:
            if self.kinds.get(flow.id) != "websocket":
                return
            assert flow.websocket is not None
            message = flow.websocket.messages[-1]
            text = message.content.decode("utf-8", "replace")
            self.backend.call("ws_message", flow.id, message.from_client, text, message.timestamp)
            if self.ws_trim:
                del flow.websocket.messages[:-1]  # never clear(): later addons read [-1]
        except Exception as exc:
            self.failure(flow.id, exc)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        try:
            if self.kinds.pop(flow.id, None) == "websocket":
                self.backend.call("ws_end", flow.id)
        except Exception as exc:
            self.failure(flow.id, exc)

    def failure(self, flow_id: str, exc: BaseException) -> None:
        """Our own failure: logged and recorded on the flow; the traffic goes on."""
        text = f"{type(exc).__name__}: {exc}"
        log.warning("convtap: failed on flow %s: %s", flow_id, text)
        with contextlib.suppress(Exception):
            self.backend.call("failure", flow_id, text)


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


addons = [ConvtapAddon()]
