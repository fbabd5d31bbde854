"""How a secret is replaced (docs/protocol.md, "Secrets on this wire"): by `<redacted:HASH>`,
HASH a short keyed hash of it (`keyfile`), so that reuse (a replayed challenge, one token in two
flows) stays visible while the secret does not. What is secret is `patterns`' to say.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from convtap.redact.keyfile import key_file, redaction_key
from convtap.redact.patterns import (
    HEADER_ALLOW_LIST,
    PLACEHOLDER_PREFIX,
    find_secrets,
    hints,
    is_placeholder,
    is_secret_key,
    is_secret_query_key,
    may_hold_secret,
    path_is_secret,
    value_hints,
)
from convtap.wire.jsonvalue import dumps, loads
from convtap.wire.sse import SSEEvent, format_event, unread_line_starts

# -- redaction -------------------------------------------------------------------------------------


class StreamState:
    """What a stream's redaction remembers between events: whether the sticky delta path (the
    one bare `{"v": ...}` frames append to) names a secret key."""

    __slots__ = ("secret_path",)

    def __init__(self) -> None:
        self.secret_path = False


class Redactor:
    """Replaces secrets by `<redacted:HASH>`; the same secret always gets the same HASH."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = redaction_key() if key is None else key

    def placeholder(self, secret: str | bytes) -> str:
        # (a lone surrogate: a `\\ud83d` escape decoded on its own)
        import hashlib  # (loaded with the first secret: most output holds none)
        import hmac

        raw = secret.encode("utf-8", "surrogatepass") if isinstance(secret, str) else secret
        digest = hmac.new(self._key, raw, hashlib.sha256).hexdigest()[:12]
        return f"{PLACEHOLDER_PREFIX}{digest}>"

    # -- values ----------------------------------------------------------------------------------

    def scrub(self, text: str, *, keyed: bool = False) -> str:
        """Plain text with every secret-shaped value replaced (`keyed`: and, in JSON text that
        may be cut short, every secret key's string value)."""
        spans = find_secrets(text, keyed=keyed)
        if not spans:
            return text
        out, cursor = [], 0
        for start, end, secret in spans:
            out += [text[cursor:start], self.placeholder(secret)]
            cursor = end
        out.append(text[cursor:])
        return "".join(out)

    def json(self, value: Any) -> Any:
        """A JSON value with every secret replaced: a copy, or the value itself when the cheap
        look (`may_hold_secret` of its text) shows that none can be there. The input is never
        changed."""
        text = dumps(value)
        if text is not None and not may_hold_secret(text):
            return value
        return self._walk(value, True)

    def may_hold_secret(self, text: str | bytes) -> bool:
        """Whether `json` of the values of this JSON text (one or many, or its UTF-8) may change
        them: when not, they need not be walked."""
        return may_hold_secret(text)

    def dumps(self, value: Any) -> str | None:
        """`value` as stored (JSON text), redacted; unchanged values are not walked."""
        text = dumps(value)
        if text is None:
            return None
        keys, values = hints(text)
        if not keys and not values:
            return text
        return dumps(self._walk(value, values))

    def _walk(self, value: Any, scrub: bool, state: StreamState | None = None) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                name = self.scrub(key) if scrub and not _clean_name(key) else key  # a key too
                if is_secret_key(key) and _holds_secret(item):
                    out[name] = self.placeholder(_secret_text(item))
                elif key == "headers" and isinstance(item, dict):  # HTTP headers (an MCP tool's)
                    out[name] = self._header_object(item, scrub)
                elif key == "encoded_item" and isinstance(item, str):
                    out[name] = self.sse_text(item)  # SSE text carried by a WebSocket frame
                else:
                    out[name] = self._walk(item, scrub)
            path = value.get("p")
            item = value.get("v")
            if _holds_secret(item):
                # A delta whose path names a secret key, or a frame that goes on appending to
                # one (rule 2: no p, the sticky one): its value is the secret.
                secret = path_is_secret(path) if isinstance(path, str) else (
                    state is not None and state.secret_path
                )  # fmt: skip
                if secret:
                    out["v"] = self.placeholder(_secret_text(item))
            if state is not None and isinstance(path, str):
                state.secret_path = path_is_secret(path)  # rule 2: the sticky path moves
            return out
        if isinstance(value, list):
            return [self._walk(item, scrub) for item in value]
        if isinstance(value, str):
            if _may_be_json(value):  # JSON in a string: a call's arguments (maybe cut short)
                return self._json_text(value, scrub)
            if scrub:
                return self.scrub(value)
        return value

    def _json_text(self, text: str, scrub: bool) -> str:
        """JSON text inside a string, redacted as JSON (its keys count) when it parses; when it
        does not (a call's arguments cut short), its secret keys' values are found by their
        look."""
        try:
            value = loads(text)
        except (ValueError, RecursionError):
            keyed = hints(text)[0]
            return self.scrub(text, keyed=keyed) if scrub or keyed else text
        redacted = self._walk(value, scrub)
        return text if redacted == value else dumps(redacted) or text

    def message(
        self, message: dict[str, Any], text: str, text_hints: tuple[bool, bool] | None = None
    ) -> tuple[str, str]:
        """A message as stored: its JSON and its text, redacted, each by what it holds
        (`text_hints`: `hints(text)`, when the caller has it already)."""
        raw = dumps(message) or ""
        keys, scrub = hints(raw)
        if not scrub and text:
            scrub = (hints(text) if text_hints is None else text_hints)[1]
        stored = self._walk(message, scrub) if keys or scrub else message
        if _may_be_json(text):
            text = self._json_text(text, scrub)
        elif scrub:
            text = self.scrub(text)
        return raw if stored is message or stored == message else dumps(stored) or "", text

    def every_string(self, value: Any) -> Any:
        """For bodies that are secret through and through (the sentinel exchange): every string
        value becomes a placeholder; the structure, numbers and booleans stay."""
        if isinstance(value, dict):
            return {key: self.every_string(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.every_string(item) for item in value]
        if isinstance(value, str) and not is_placeholder(value):
            return self.placeholder(value)
        return value

    # -- text on the wire --------------------------------------------------------------------------

    def text(self, data: str, state: StreamState | None = None) -> str:
        """JSON text (an SSE event's data, a WebSocket frame) with its secrets replaced; the text
        is returned as it was when it holds none, so raw events stay byte for byte."""
        keys, values = hints(data)
        if not keys and not values and not (state is not None and state.secret_path):
            return data
        return self.event_text(data, values, state)

    def event_text(self, data: str, scrub: bool, state: StreamState | None) -> str:
        """One event's JSON text redacted (keys, delta paths, and values when `scrub`)."""
        try:
            value = loads(data)
        except (ValueError, RecursionError):
            # Not JSON: a key cannot be told from its value, so text that names a secret key is
            # kept whole as a placeholder (the decoder cannot read it either).
            return self.placeholder(data) if hints(data)[0] else self.scrub(data)
        redacted = self._walk(value, scrub, state)
        return data if redacted == value else dumps(redacted) or data

    def sse(self, text: str, events: list[SSEEvent], state: StreamState | None = None) -> str:
        """The SSE text of `events` as stored: as it came when it holds no secret, else the
        events written again with their data redacted."""
        keys, values = hints(text)
        if not keys and not values and not (state is not None and state.secret_path):
            return text
        return "".join(
            format_event(
                e._replace(event=self.event_name(e.event),
                           data=self.event_text(e.data, values, state))
            )
            for e in events
        )  # fmt: skip

    def event_name(self, name: str) -> str:
        """An SSE event's name, searched as a value is (a server may put anything there)."""
        return self.scrub(name) if name and value_hints(name) else name

    def unread(self, text: str, known: str | None = None) -> str:
        """SSE text whose lines that the decoder never reads (comments `: …`, such as the
        server's pings; fields other than data and event; lines of no field) hold a hint of a
        secret, with each such line replaced by a comment holding a placeholder. `known`: those
        lines' text, when the parser has it (no hint in it: nothing to look for)."""
        if known is not None and not any(hints(known)):
            return text
        starts = unread_line_starts(text)
        lines = [(start, len(text) if (end := text.find("\n", start)) < 0 else end)
                 for start in starts]  # fmt: skip
        if not any(hints("\n".join(text[a:b] for a, b in lines))):  # all at once: mostly pings
            return text
        out: list[str] = []
        done = 0  # the text before this is in `out`
        for start, end in lines:
            if any(hints(text[start:end])):
                out += [text[done:start], f": {self.placeholder(text[start:end])}"]
                done = end
        return "".join([*out, text[done:]]) if out else text

    def sse_text(self, text: str) -> str:
        """A slice of SSE text (a WebSocket stream item) redacted event by event."""
        keys, values = hints(text)
        if not keys and not values:
            return text
        text = self.unread(text)
        out = []
        for block in re.split(r"(\n\n)", text):
            if not block.strip("\n"):
                out.append(block)
                continue
            lines = []
            for line in block.split("\n"):
                if line.startswith("data:"):
                    data = line[5:].removeprefix(" ")
                    line = "data: " + self.event_text(data, values, None).replace("\n", " ")
                elif line.startswith("event:"):
                    line = "event:" + self.event_name(line[6:])
                lines.append(line)
            out.append("\n".join(lines))
        return "".join(out)

    def headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(name, self._header(name, value)) for name, value in headers]

    def _header_object(self, headers: dict[str, Any], scrub: bool) -> dict[str, Any]:
        return {
            name: self._header(name, value) if isinstance(value, str) else self._walk(value, scrub)
            for name, value in headers.items()
        }

    def _header(self, name: str, value: str) -> str:
        """A header's value as kept: scrubbed when the allow-list keeps it, else replaced."""
        if name.lower() in HEADER_ALLOW_LIST or is_placeholder(value):
            return self.scrub(value)
        return self.placeholder(value)

    def url(self, url: str) -> str:
        """A URL whose secret query parameters (the WebSocket `verify` token) are replaced and
        whose text holds no secret-shaped value."""
        parts = urlsplit(url)
        if parts.query:
            query = [(k, self._query_value(k, v))
                     for k, v in parse_qsl(parts.query, keep_blank_values=True)]  # fmt: skip
            url = urlunsplit(parts._replace(query=urlencode(query, safe="<>:")))
        return self.scrub(url)

    def _query_value(self, key: str, value: str) -> str:
        if is_secret_query_key(key) and _holds_secret(value):
            return self.placeholder(value)
        return self.scrub(value)


class ClearText(Redactor):
    """--no-redact: everything is kept as it came."""

    def message(
        self, message: dict[str, Any], text: str, text_hints: tuple[bool, bool] | None = None
    ) -> tuple[str, str]:
        return dumps(message) or "", text

    def __init__(self, key: bytes | None = None) -> None:
        self._key = b""

    def placeholder(self, secret: str | bytes) -> str:
        return secret if isinstance(secret, str) else secret.decode("utf-8", "replace")

    def scrub(self, text: str, *, keyed: bool = False) -> str:
        return text

    def json(self, value: Any) -> Any:
        return value

    def may_hold_secret(self, text: str | bytes) -> bool:
        return False

    def dumps(self, value: Any) -> str | None:
        return dumps(value)

    def every_string(self, value: Any) -> Any:
        return value

    def text(self, data: str, state: StreamState | None = None) -> str:
        return data

    def sse(self, text: str, events: list[SSEEvent], state: StreamState | None = None) -> str:
        return text

    def sse_text(self, text: str) -> str:
        return text

    def event_name(self, name: str) -> str:
        return name

    def unread(self, text: str, known: str | None = None) -> str:
        return text

    def headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        return list(headers)

    def url(self, url: str) -> str:
        return url


class UnusableKey(Exception):
    """The redaction key cannot be read or made: nothing may be recorded or printed."""


def chosen(redact: bool = True) -> Redactor:
    """The redactor a command uses, its key read now: before anything is made, so that an
    unusable key (an empty file, a folder, a config folder that cannot be one) leaves nothing."""
    if not redact:
        return ClearText()
    try:
        return Redactor()
    except (OSError, UnicodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise UnusableKey(f"cannot use the redaction key {key_file()}: {why}") from None


def _may_be_json(text: str) -> bool:
    """Whether a string may hold JSON text (an object, an array, or a string holding more JSON
    text: a tool's result encoded twice), to be read as such."""
    return text[:1] in _JSON_STARTS or (text[:1].isspace() and text.lstrip()[:1] in _JSON_STARTS)


_JSON_STARTS = frozenset('{["')


@functools.lru_cache(maxsize=4096)  # a message's keys are the same few names again and again
def _clean_name(key: str) -> bool:
    """A key that is no secret itself (a server may put one there)."""
    return not find_secrets(key)


def _holds_secret(value: object) -> bool:
    """A value that can be a secret: a string (not already a placeholder), an object, an
    array; never null, a number or a boolean."""
    if isinstance(value, str):
        return bool(value) and not is_placeholder(value)
    return isinstance(value, dict | list) and bool(value)


def _secret_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return dumps(value) or ""
