"""The tap on a streamed response: each chunk goes to the client unchanged, and a decoded copy to
the recorder's sink, the journal (docs/architecture.md, "The proxy and mitmproxy": the callable is
sync, never raises, returns its input)."""

from __future__ import annotations

import importlib
import time
import zlib
from collections.abc import Callable
from typing import Any


def decompressor(encoding: str) -> Callable[[bytes], bytes] | None:
    """Incremental decoding of a Content-Encoding, for the recorder's copy only (None: the
    bytes are the body as they are)."""
    steps = [e.strip().lower() for e in encoding.split(",") if e.strip()]
    funcs = [_one_decompressor(e) for e in reversed(steps) if e != "identity"]
    if not funcs:
        return None

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
    """`flow.response.stream`: returns each chunk unchanged, hands a decoded copy on."""

    def __init__(
        self,
        flow_id: str,
        encoding: str,
        sink: Callable[[bytes, float], None],
        fail: Callable[[str, BaseException], None],
        keep: int = 0,
        stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        self.flow_id, self.sink, self.on_failure = flow_id, sink, fail
        self.stopped = stopped  # the proxy is stopping: what comes now could not be journaled
        self.failed = False
        self.keep = keep
        # the body as it went to the client, for mitmproxy's views and saved flows: its chunks
        # (held, not copied: joined once at the end), dropped (None) once past `keep` bytes
        self.kept: list[bytes] | None = [] if keep > 0 else None
        self.kept_size = 0
        self.decode: Callable[[bytes], bytes] | None = None
        try:
            self.decode = decompressor(encoding)
        except Exception as exc:
            self.fail(exc)

    def __call__(self, data: bytes) -> bytes | list[bytes]:
        if self.stopped():  # the client never gets what the journal cannot have: no chunk at
            return []  # all (an empty one is the end of a chunked body, a clean end it is not)
        if self.kept is not None:
            self.kept_size += len(data)
            if self.kept_size > self.keep:
                self.kept = None
            else:
                self.kept.append(data)
        if data and not self.failed:
            try:
                plain = data if self.decode is None else self.decode(data)
                if plain:
                    self.sink(plain, time.time())
            except Exception as exc:  # never break the client's stream
                self.fail(exc)
        return data

    def body(self) -> bytes | None:
        """What was kept, whole; None when the body was longer than `keep`."""
        return None if self.kept is None else b"".join(self.kept)

    def fail(self, exc: BaseException) -> None:
        self.failed = True
        self.on_failure(self.flow_id, exc)
