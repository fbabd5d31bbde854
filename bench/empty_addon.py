"""An addon with convtap's hooks that does nothing but stream event streams through a callable,
as convtap's tap does: what any such addon costs mitmproxy (`bench/proxy_bench.py` runs it)."""

from __future__ import annotations

from mitmproxy import http


def passthrough(data: bytes) -> bytes:
    return data


class Hooks:
    def request(self, flow: http.HTTPFlow) -> None:
        pass

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        assert flow.response is not None
        if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
            flow.response.stream = passthrough

    def response(self, flow: http.HTTPFlow) -> None:
        pass

    def error(self, flow: http.HTTPFlow) -> None:
        pass

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        pass

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        pass


addons = [Hooks()]
