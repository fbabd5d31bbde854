"""The reference client's HTTP plumbing: one request per connection, direct or through a proxy.

Standard library HTTP (`http.client`) only. `HttpClient` connects to a base URL directly, through a
plain HTTP proxy (absolute-form request targets) or through a CONNECT tunnel for HTTPS, asks for
gzip, and hands back the response body decoded, chunk by chunk as it arrives: a body the server
cuts short simply ends, as a resumable stream does. The f/conversation client (`refclient`) and
the Responses client (`refresponses`) build on it.
"""

from __future__ import annotations

import http.client
import json
import ssl
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from convtap.wire.jsonvalue import loads


class ClientError(RuntimeError):
    """The server answered with an error status or something that is not the protocol."""


class HttpClient:
    """Requests to `base_url` (e.g. `http://127.0.0.1:8765`), each on a connection of its own."""

    def __init__(
        self,
        base_url: str,
        *,
        proxy: str | None = None,
        cafile: str | Path | None = None,
        timeout: float = 10.0,
    ) -> None:
        parts = urlsplit(base_url)
        self.scheme = parts.scheme
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.scheme == "https" else 80)
        self.proxy = urlsplit(proxy) if proxy else None
        self.timeout = timeout
        self.ssl_context = ssl.create_default_context(cafile=str(cafile) if cafile else None)

    def _connect(self) -> tuple[http.client.HTTPConnection, str]:
        """A connection and the request-target prefix (absolute-form through a plain proxy)."""
        origin = f"{self.scheme}://{self.host}:{self.port}"
        if self.proxy is None:
            if self.scheme == "https":
                conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout, context=self.ssl_context
                )
            else:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            return conn, ""
        proxy_host, proxy_port = self.proxy.hostname or "127.0.0.1", self.proxy.port or 8080
        if self.scheme == "https":  # a CONNECT tunnel, then TLS to the origin inside it
            conn = http.client.HTTPSConnection(
                proxy_host, proxy_port, timeout=self.timeout, context=self.ssl_context
            )
            conn.set_tunnel(self.host, self.port)
            return conn, ""
        return http.client.HTTPConnection(proxy_host, proxy_port, timeout=self.timeout), origin

    def _send(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Iterator[bytes]:
        """Send a request; its response body, decoded, chunk by chunk as it arrives."""
        conn, prefix = self._connect()
        all_headers = {
            "Authorization": "Bearer convtap-refclient",
            "User-Agent": "convtap-refclient/1 (the reference client of convtap mock)",
            "Accept-Encoding": "gzip",
            "oai-device-id": "convtap-refclient",
            **(headers or {}),
        }
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode()
            all_headers["Content-Type"] = "application/json"
        try:
            conn.request(method, prefix + path, body=data, headers=all_headers)
            response = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        if response.status >= 400:
            detail = b"".join(_body_chunks(conn, response)).decode("utf-8", "replace")
            raise ClientError(f"{method} {path}: HTTP {response.status}: {detail[:200]}")
        return _body_chunks(conn, response)

    def request_json(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Any:
        return loads(b"".join(self._send(method, path, body, headers)).decode("utf-8"))

    def open_stream(
        self, path: str, body: Any, headers: dict[str, str] | None = None
    ) -> Iterator[bytes]:
        """The decoded (gunzipped) body of a streaming POST, chunk by chunk as it arrives; it
        ends early, without error, when the server closes the connection mid-body."""
        return self._send("POST", path, body, {"Accept": "text/event-stream", **(headers or {})})


def _body_chunks(
    conn: http.client.HTTPConnection, response: http.client.HTTPResponse
) -> Iterator[bytes]:
    gzipped = response.getheader("Content-Encoding", "") == "gzip"
    inflater = zlib.decompressobj(wbits=31) if gzipped else None
    try:
        while True:
            try:
                chunk = response.read1(65536)
            except (http.client.IncompleteRead, ConnectionError):
                return  # the server closed mid-body: the caller sees a cut stream
            if not chunk:
                break
            yield inflater.decompress(chunk) if inflater is not None else chunk
        if inflater is not None:
            yield inflater.flush()
    finally:
        response.close()
        conn.close()
