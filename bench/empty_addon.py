"""An addon with convtap's hooks that does nothing but stream event streams through a callable,
as convtap's tap does: what any such addon costs mitmproxy (`bench/proxy_bench.py` runs it).

With `--set bench_write_chunks=PATH`, the callable also appends each chunk to the file PATH in
one `writev`, as convtap's journal does before the chunk is forwarded: the least that any tap
costs which never loses a byte that reached the client, even when the proxy is killed."""

from __future__ import annotations

import os

from mitmproxy import ctx, http
from mitmproxy.addonmanager import Loader


def passthrough(data: bytes) -> bytes:
    return data


class Hooks:
    def __init__(self) -> None:
        self.fd = -1

    def load(self, loader: Loader) -> None:
        loader.add_option("bench_write_chunks", str, "", "append each chunk to this file")

    def configure(self, updated: set[str]) -> None:
        if "bench_write_chunks" in updated and ctx.options.bench_write_chunks:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
            self.fd = os.open(ctx.options.bench_write_chunks, flags, 0o600)

    def write(self, data: bytes) -> bytes:
        os.writev(self.fd, (b"head", b"flow-id", data))
        return data

    def request(self, flow: http.HTTPFlow) -> None:
        pass

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        assert flow.response is not None
        if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
            flow.response.stream = self.write if self.fd >= 0 else passthrough

    def response(self, flow: http.HTTPFlow) -> None:
        pass

    def error(self, flow: http.HTTPFlow) -> None:
        pass

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        pass

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        pass


addons = [Hooks()]
