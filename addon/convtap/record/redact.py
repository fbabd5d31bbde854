"""What is secret on this wire, and how it is replaced (PROTOCOL.md "Secrets on this wire").

Redaction is structural: a secret is recognised by where it sits (a JSON key, a header name, a
query parameter), never by pattern-matching text. It is replaced by a placeholder that carries a
short keyed hash of the secret, so that reuse (a replayed challenge, one token across flows) stays
detectable while the secret does not. The key comes from CONVTAP_REDACT_KEY when set.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from convtap.wire.sse import SSEEvent, format_event

PLACEHOLDER_PREFIX = "<redacted:"
DEFAULT_KEY = b"convtap redaction v1"

# JSON object keys whose string (or object) values are secret wherever they appear.
SECRET_KEYS = frozenset(
    {
        "token",
        "access_token",
        "refresh_token",
        "session_token",
        "conduit_token",
        "app_attest_challenge",
        "authorization",
        "cookie",
        "set-cookie",
        "x-conduit-token",
    }
)


# Headers kept in clear; every other header's value becomes a placeholder.
HEADER_ALLOW_LIST = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "cache-control",
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "date",
        "host",
        "origin",
        "pragma",
        "referer",
        "server",
        "transfer-encoding",
        "user-agent",
        "vary",
        "x-request-id",
        "openai-processing-ms",
        "openai-version",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "upgrade",
        "oai-language",
        "x-openai-target-path",
        "x-openai-target-route",
        "cf-ray",
    }
)
SECRET_QUERY_PARAMS = frozenset({"verify", "token", "access_token"})
# Cheap test before parsing: JSON text without any of these holds no secret key (a key is
# followed by its colon; "cot_token" as a marker's value is not).
_SECRET_HINTS = ('token":', 'challenge":', 'authorization":', 'cookie":')


def redaction_key() -> bytes:
    env = os.environ.get("CONVTAP_REDACT_KEY")
    return env.encode() if env else DEFAULT_KEY


class Redactor:
    """Replaces secrets by `<redacted:HASH>`; the same secret always gets the same HASH."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = redaction_key() if key is None else key

    def placeholder(self, secret: str | bytes) -> str:
        raw = secret.encode() if isinstance(secret, str) else secret
        digest = hmac.new(self._key, raw, hashlib.sha256).hexdigest()[:12]
        return f"{PLACEHOLDER_PREFIX}{digest}>"

    def json(self, value: Any) -> Any:
        """A copy of a JSON value with every secret replaced (the input is not changed)."""
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if _is_secret_key(key) and item is not None and not _is_placeholder(item):
                    out[key] = self.placeholder(_secret_text(item))
                else:
                    out[key] = self.json(item)
            return out
        if isinstance(value, list):
            return [self.json(item) for item in value]
        return value

    def every_string(self, value: Any) -> Any:
        """For bodies that are secret through and through (the sentinel exchange): every string
        value becomes a placeholder; the structure, numbers and booleans stay."""
        if isinstance(value, dict):
            return {key: self.every_string(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.every_string(item) for item in value]
        if isinstance(value, str) and not _is_placeholder(value):
            return self.placeholder(value)
        return value

    def text(self, data: str) -> str:
        """JSON text (an SSE event's data, a WebSocket frame) with its secrets replaced; the text
        is returned as it was when it holds none, so raw events stay byte for byte."""
        if not any(hint in data for hint in _SECRET_HINTS):
            return data
        try:
            value = json.loads(data)
        except ValueError:
            return data
        redacted = self.json(value)
        return data if redacted == value else json.dumps(redacted, ensure_ascii=False)

    def sse(self, text: bytes, events: list[SSEEvent]) -> str:
        """The SSE text of `events` as stored: as it came when it holds no secret, else the
        events written again with their data redacted."""
        raw = text.decode("utf-8", "replace")
        if not any(hint in raw for hint in _SECRET_HINTS):
            return raw
        return "".join(format_event(e._replace(data=self.text(e.data))) for e in events)

    def headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        return [
            (
                name,
                value
                if name.lower() in HEADER_ALLOW_LIST or _is_placeholder(value)
                else self.placeholder(value),
            )
            for name, value in headers
        ]

    def url(self, url: str) -> str:
        """A URL whose secret query parameters (the WebSocket `verify` token) are replaced."""
        parts = urlsplit(url)
        if not parts.query:
            return url
        query = [
            (
                k,
                self.placeholder(v)
                if k.lower() in SECRET_QUERY_PARAMS and not _is_placeholder(v)
                else v,
            )
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ]
        return urlunsplit(parts._replace(query=urlencode(query, safe="<>:")))


class ClearText(Redactor):
    """--no-redact: everything is kept as it came."""

    def placeholder(self, secret: str | bytes) -> str:
        return secret if isinstance(secret, str) else secret.decode("utf-8", "replace")

    def json(self, value: Any) -> Any:
        return value

    def every_string(self, value: Any) -> Any:
        return value

    def text(self, data: str) -> str:
        return data

    def sse(self, text: bytes, events: list[SSEEvent]) -> str:
        return text.decode("utf-8", "replace")

    def headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        return list(headers)

    def url(self, url: str) -> str:
        return url


def _is_secret_key(key: object) -> bool:
    if not isinstance(key, str):
        return False
    lowered = key.lower()
    return lowered in SECRET_KEYS or lowered.endswith("_token")


def _is_placeholder(value: object) -> bool:
    return isinstance(value, str) and value.startswith(PLACEHOLDER_PREFIX)


def _secret_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
