"""What is secret on this wire, and how it is replaced (docs/protocol.md, "Secrets on this wire").

A secret is found two ways, and replaced by `<redacted:HASH>`, HASH a short keyed hash of it, so
that reuse (a replayed challenge, one token in two flows) stays visible while the secret does not:

- by where it sits: a JSON key (in any case, with `-` or `_`, after JSON unescaping: `Token`,
  `Access_Token`, `x-api-key`, `authoriz\\u0061tion`), a delta whose path names such a key (and
  the bare frames that go on appending to it), a header outside an allow-list, a URL's query
  parameter;
- by what it looks like, anywhere in stored text: API keys (OpenAI, Anthropic, AWS, GitHub,
  GitLab, Slack, Stripe, SendGrid, PyPI, Square: the token-shaped detectors of detect-secrets,
  plus current OpenAI and Anthropic key formats), JWTs, `Bearer` / `Basic` credentials,
  credentials in URLs, and PEM private keys.

Text is first looked at cheaply: lowercased, JSON-unescaped, searched once for every hint of a
key or a value (Aho-Corasick). Only text with a hint is parsed and walked.

The key is random per installation (`~/.config/convtap/redaction.key`, made 0600 on first use,
`$XDG_CONFIG_HOME` respected), so nobody can test a guess against a placeholder without it;
`CONVTAP_REDACT_KEY` sets one key for a team whose captures must compare.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import ahocorasick_rs
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector

from convtap.wire.jsonvalue import dumps, loads
from convtap.wire.sse import UNREAD_LINE, SSEEvent, format_event

PLACEHOLDER_PREFIX = "<redacted:"
_PLACEHOLDER = re.compile(r"<redacted:[0-9a-f]{12}>")

# -- keys ------------------------------------------------------------------------------------------

# A key is secret when, lowercased with `-` as `_`, it contains one of these (a token, not a
# count of tokens), or is one of EXACT_KEYS; its value is secret when it is a string, an object
# or an array (a number or a boolean never is).
KEY_PARTS = (
    "token", "secret", "passw", "authoriz", "cookie", "credential", "apikey", "api_key",
    "private_key", "access_key", "session", "challenge",
)  # fmt: skip
_KEY = re.compile("|".join(part if part != "token" else "token(?!s)" for part in KEY_PARTS))
EXACT_KEYS = frozenset({"verify", "auth", "pwd"})

# Headers kept in clear (their values still scanned); every other header's value is replaced.
HEADER_ALLOW_LIST = frozenset(
    {
        "accept", "accept-encoding", "accept-language", "cache-control", "connection",
        "content-encoding", "content-length", "content-type", "date", "host", "origin",
        "pragma", "referer", "server", "transfer-encoding", "user-agent", "vary", "x-request-id",
        "openai-processing-ms", "openai-version", "sec-websocket-version",
        "sec-websocket-extensions", "upgrade", "oai-language", "x-openai-target-path",
        "x-openai-target-route", "cf-ray",
    }
)  # fmt: skip


def is_secret_key(key: object) -> bool:
    return isinstance(key, str) and _is_secret_name(key)


@functools.lru_cache(maxsize=4096)  # a message's keys are the same few names again and again
def _is_secret_name(key: str) -> bool:
    name = key.strip().lower().replace("-", "_")
    return name in EXACT_KEYS or _KEY.search(name) is not None


def _path_is_secret(path: str) -> bool:
    """A JSON Pointer that names a secret key somewhere along it."""
    return any(is_secret_key(segment) for segment in path.split("/") if segment)


# -- values ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValuePattern:
    name: str
    hints: tuple[str, ...]  # lowercase text that any match contains
    regex: re.Pattern[str]
    group: int = 0  # the part of a match that is the secret


def _denylist(detector: Any, *indexes: int) -> list[re.Pattern[str]]:
    patterns = list(detector.denylist)
    return [patterns[i] for i in indexes] if indexes else patterns


VALUE_PATTERNS: tuple[ValuePattern, ...] = (
    # detect-secrets' token-shaped detectors (a maintained list of formats)
    *(ValuePattern("aws", ("akia", "asia", "abia", "acca", "a3t"), p)
      for p in _denylist(AWSKeyDetector, 0)),
    *(ValuePattern("github", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), p)
      for p in _denylist(GitHubTokenDetector)),
    *(ValuePattern("gitlab", ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941",
                              "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-"), p)
      for p in _denylist(GitLabTokenDetector)),
    *(ValuePattern("slack", ("xox", "hooks.slack.com"), p) for p in _denylist(SlackDetector)),
    *(ValuePattern("stripe", ("k_live_",), p) for p in _denylist(StripeDetector)),
    *(ValuePattern("sendgrid", ("sg.",), p) for p in _denylist(SendGridDetector)),
    *(ValuePattern("pypi", ("pypi-",), p) for p in _denylist(PypiTokenDetector)),
    *(ValuePattern("square", ("sq0csp-",), p) for p in _denylist(SquareOAuthDetector)),
    *(ValuePattern("openai-legacy", ("t3blbkfj",), p) for p in _denylist(OpenAIDetector)),
    # formats those do not cover
    ValuePattern("openai-anthropic", ("sk-",),
                 re.compile(r"\bsk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ValuePattern("github-fine-grained", ("github_pat_",),
                 re.compile(r"github_pat_[A-Za-z0-9_]{22,}")),
    ValuePattern("jwt", ("eyj",),
                 re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{4,}(?:\.[A-Za-z0-9_-]*)?")),
    ValuePattern("bearer-basic", ("bearer", "basic"),
                 re.compile(r"(?i)\b(?:bearer|basic)\s+([A-Za-z0-9._~+/=-]{8,})"), 1),
    ValuePattern("url-credentials", ("://",),
                 re.compile(r"://[^\s/@:\"'<>]+:([^\s/@\"'<>]+)@"), 1),
    ValuePattern("private-key", ("-----begin",),
                 re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
                            r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
                            r"|[A-Za-z0-9+/=\s\\]*)", re.S)),
)  # fmt: skip

# Text that names a key without being one: markers the server sends as values.
_HARMLESS = ('"cot_token"', '"user_visible_token"', '"final_channel_token"', '"last_token"',
             '"resume_conversation_token"')  # fmt: skip


_KEY_HINTS = [*KEY_PARTS, *(f'"{exact}"' for exact in EXACT_KEYS)]
_KEY_WORDS = list(dict.fromkeys(hint.replace("-", "_") for hint in _KEY_HINTS))  # as text is folded
_VALUE_WORDS = [w for w in dict.fromkeys(
    hint.replace("-", "_") for pattern in VALUE_PATTERNS for hint in pattern.hints
) if w not in _KEY_WORDS]  # fmt: skip
# What makes bytes unlike the text they encode, for this search: a JSON escape (`\\uXXXX`,
# `\\/`) and the only characters outside ASCII whose lowercase is ASCII (İ, the Kelvin sign),
# in UTF-8. Text holding one is folded as text (unescaped, then str.lower, as `is_secret_key`).
_UNLIKE = ["\\u", "\\/", "\u0130", "\u212a"]
_HARMLESS_FOLDED = [h.replace("-", "_") for h in _HARMLESS]
# One pass of one automaton (Rust, on UTF-8 bytes: several times faster than on text) finds
# them all; a match's index says what it is. Once one kind of hint is found, an automaton
# without it looks for the other: text full of "token" is not matched word by word.
_WORDS = [*_KEY_WORDS, *_VALUE_WORDS, *_UNLIKE, *_HARMLESS_FOLDED]
_VALUES_FROM = len(_KEY_WORDS)
_UNLIKE_FROM = _VALUES_FROM + len(_VALUE_WORDS)
_HARMLESS_FROM = _UNLIKE_FROM + len(_UNLIKE)
_KEY_IDS = frozenset(range(_VALUES_FROM))
_VALUE_IDS = frozenset(range(_VALUES_FROM, _UNLIKE_FROM))
_UNLIKE_IDS = frozenset(range(_UNLIKE_FROM, _HARMLESS_FROM))
_HARMLESS_IDS = frozenset(range(_HARMLESS_FROM, len(_WORDS)))


class _Finder:
    """An automaton over some of `_WORDS`, which answers with their indexes in `_WORDS`."""

    def __init__(self, ids: frozenset[int]) -> None:
        self.ids = sorted(ids)
        self.automaton = ahocorasick_rs.BytesAhoCorasick([_WORDS[i].encode() for i in self.ids])

    def find(self, data: bytes) -> list[tuple[int, int, int]]:
        """(index in `_WORDS`, start, end) of every match."""
        ids = self.ids
        return [(ids[i], a, b) for i, a, b in self.automaton.find_matches_as_indexes(
            data, overlapping=True)]  # fmt: skip


_FINDERS = {  # by (keys wanted, values wanted)
    (True, True): _Finder(_KEY_IDS | _VALUE_IDS | _UNLIKE_IDS | _HARMLESS_IDS),
    (True, False): _Finder(_KEY_IDS | _UNLIKE_IDS | _HARMLESS_IDS),
    (False, True): _Finder(_VALUE_IDS | _UNLIKE_IDS),
}
_HARMLESS_BYTES = [h.encode() for h in _HARMLESS_FOLDED]
_LONGEST = max(len(w.encode()) for w in _WORDS)
_WINDOW = 1 << 16  # bytes searched at once
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(/)")


def _unescaped(text: str) -> str:
    """JSON's `\\uXXXX` and `\\/` decoded, so that an escape hides neither a key nor a value."""
    if "\\u" not in text and "\\/" not in text:
        return text
    return _ESCAPE.sub(lambda m: m.group(2) or chr(int(m.group(1), 16)), text)


def hints(text: str) -> tuple[bool, bool]:
    """(a secret key may be named, a secret value may be there) in this text."""
    return _found(text, want_keys=True)


def value_hints(text: str) -> bool:
    """A secret value may be there in this text."""
    return _found(text, want_keys=False)[1]


def _found(text: str, *, want_keys: bool, exact: bool = False) -> tuple[bool, bool]:
    """(keys, values): the hints in the text, folded as keys are (JSON-unescaped, lowercased,
    `-` as `_`), none counted inside a harmless marker (blanked out). Searched a window at a
    time (they overlap by a hint's length), so that text full of hints holds few matches at
    once, and only until the answer is known."""
    folded = text.encode("utf-8", "surrogatepass").lower().replace(b"-", b"_")
    keys = values = False
    for start in range(0, len(folded), _WINDOW):
        wanted = (want_keys and not keys, not values)
        if wanted == (False, False):
            break
        window = folded[start : start + _WINDOW + _LONGEST - 1]
        matches = _FINDERS[wanted].find(window)
        found = {index for index, _, _ in matches}
        if not exact and not found.isdisjoint(_UNLIKE_IDS):
            return _found(_unescaped(text).lower(), want_keys=want_keys, exact=True)
        if not found.isdisjoint(_HARMLESS_IDS):  # a marker's own words do not count
            found = _outside_markers(window, matches, _FINDERS[wanted])
        keys = keys or not found.isdisjoint(_KEY_IDS)
        values = values or not found.isdisjoint(_VALUE_IDS)
    return keys and want_keys, values


def _outside_markers(
    window: bytes, matches: list[tuple[int, int, int]], finder: _Finder
) -> set[int]:
    """The hints of `matches` that are not inside a harmless marker: a few are checked one by
    one; many (text made of markers) by blanking the markers out and searching again."""
    if len(matches) > 64:
        for marker in _HARMLESS_BYTES:
            window = window.replace(marker, b" ")
        return {index for index, _, _ in finder.find(window)}
    spans = [(a, b) for index, a, b in matches if index in _HARMLESS_IDS]
    return {
        index
        for index, a, b in matches
        if index not in _HARMLESS_IDS and not any(x <= a and b <= y for x, y in spans)
    }


# A JSON string, in JSON text that may be cut short (a call's arguments as they stream): it runs
# to its closing quote, else to the line's or the text's end. Read one after the other, strings
# are never begun inside another (at an escaped quote): one pass, whatever the text.
_JSON_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"?')
_COLON = re.compile(r"\s*:\s*")


def keyed_secrets(text: str) -> list[tuple[int, int, str]]:
    """Where the string values of secret keys sit in JSON text, whole or cut short, as JSON text
    (escapes kept): (start, end, secret), in order. Look for `hints` first."""
    found = []
    key: re.Match[str] | None = None  # the string before, if a colon follows it
    for string in _JSON_STRING.finditer(text):
        value = string.group(1)
        if (
            key is not None and _COLON.fullmatch(text, key.end(), string.start())
            and value and is_secret_key(_unescaped(key.group(1))) and not _is_placeholder(value)
        ):  # fmt: skip
            found.append((*string.span(1), value))
        key = string
    return found


def find_secrets(text: str, *, keyed: bool = False) -> list[tuple[int, int, str]]:
    """Where secret-shaped values sit in plain text: (start, end, secret), in order, apart.
    `keyed`: the text may be JSON text, and the values of its secret keys count too."""
    low = text.lower()
    found: list[tuple[int, int, str]] = keyed_secrets(text) if keyed else []
    for pattern in VALUE_PATTERNS:
        if not any(hint in low for hint in pattern.hints):
            continue
        for match in pattern.regex.finditer(text):
            secret = match.group(pattern.group)
            if secret and _PLACEHOLDER.fullmatch(secret) is None:
                found.append((*match.span(pattern.group), secret))
    found.sort()
    spans: list[tuple[int, int, str]] = []
    for start, end, secret in found:  # one secret found by two patterns counts once
        if spans and start < spans[-1][1]:
            if end > spans[-1][1]:
                spans[-1] = (spans[-1][0], end, text[spans[-1][0] : end])
            continue
        spans.append((start, end, secret))
    return spans


# -- the key ---------------------------------------------------------------------------------------


def key_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "convtap" / "redaction.key"


def redaction_key() -> bytes:
    """CONVTAP_REDACT_KEY, else this installation's own random key (made on first use)."""
    shared = os.environ.get("CONVTAP_REDACT_KEY")
    if shared:
        return shared.encode()
    path = key_file()
    with contextlib.suppress(FileNotFoundError):
        return _read_key(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # made by another convtap process a moment ago
        return _read_key(path)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32) + "\n")
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    key = path.read_text().strip()
    if not key:
        raise OSError(f"{path} is empty")
    return key.encode()


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
        raw = secret.encode() if isinstance(secret, str) else secret
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
        """A copy of a JSON value with every secret replaced (the input is not changed)."""
        return self._walk(value, True)

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
                if is_secret_key(key) and _holds_secret(item):
                    out[key] = self.placeholder(_secret_text(item))
                elif key == "encoded_item" and isinstance(item, str):
                    out[key] = self.sse_text(item)  # SSE text carried by a WebSocket frame
                else:
                    out[key] = self._walk(item, scrub)
            path = value.get("p")
            item = value.get("v")
            if _holds_secret(item):
                # A delta whose path names a secret key, or a frame that goes on appending to
                # one (rule 2: no p, the sticky one): its value is the secret.
                secret = _path_is_secret(path) if isinstance(path, str) else (
                    state is not None and state.secret_path
                )  # fmt: skip
                if secret:
                    out["v"] = self.placeholder(_secret_text(item))
            if state is not None and isinstance(path, str):
                state.secret_path = _path_is_secret(path)  # rule 2: the sticky path moves
            return out
        if isinstance(value, list):
            return [self._walk(item, scrub) for item in value]
        if isinstance(value, str):
            if value[:1] == "{":  # JSON in a string: a call's arguments (maybe cut short)
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
        self,
        message: dict[str, Any],
        text: str,
        values_clean: bool = False,
        keys_clean: bool = False,
    ) -> tuple[str, str]:
        """A message as stored: its JSON and its text, redacted. `values_clean`: the stream it
        came in had no hint of a secret value, so only its keys are looked at (a walk of its
        structure, not of its text); `keys_clean` too: no hint of a secret key either, so the
        message is not looked at again (a JSON text in it still is)."""
        raw = dumps(message) or ""
        if values_clean:  # its keys alone may be secret: walked when the stream named any
            keys, scrub = not keys_clean, False
        else:
            keys, scrub = hints(raw)
        stored = self._walk(message, scrub) if keys or scrub else message
        if text[:1] == "{":
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
        if isinstance(value, str) and not _is_placeholder(value):
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
            format_event(e._replace(data=self.event_text(e.data, values, state))) for e in events
        )

    def unread(self, text: str) -> str:
        """SSE text whose lines that the decoder never reads (comments `: …`, such as the
        server's pings; fields other than data and event; lines of no field) hold a hint of a
        secret, with each such line replaced by a comment holding a placeholder."""
        starts = [m.end() for m in UNREAD_LINE.finditer(text)]
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
                lines.append(line)
            out.append("\n".join(lines))
        return "".join(out)

    def headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        return [
            (
                name,
                self.scrub(value)
                if name.lower() in HEADER_ALLOW_LIST or _is_placeholder(value)
                else self.placeholder(value),
            )
            for name, value in headers
        ]

    def url(self, url: str) -> str:
        """A URL whose secret query parameters (the WebSocket `verify` token) are replaced and
        whose text holds no secret-shaped value."""
        parts = urlsplit(url)
        if parts.query:
            query = [
                (k, self.placeholder(v) if is_secret_key(k) and _holds_secret(v) else self.scrub(v))
                for k, v in parse_qsl(parts.query, keep_blank_values=True)
            ]
            url = urlunsplit(parts._replace(query=urlencode(query, safe="<>:")))
        return self.scrub(url)


class ClearText(Redactor):
    """--no-redact: everything is kept as it came."""

    def message(
        self,
        message: dict[str, Any],
        text: str,
        values_clean: bool = False,
        keys_clean: bool = False,
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

    def unread(self, text: str) -> str:
        return text

    def headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        return list(headers)

    def url(self, url: str) -> str:
        return url


def _holds_secret(value: object) -> bool:
    """A value that can be a secret: a string (not already a placeholder), an object, an
    array; never null, a number or a boolean."""
    if isinstance(value, str):
        return bool(value) and _PLACEHOLDER.fullmatch(value) is None
    return isinstance(value, dict | list) and bool(value)


def _is_placeholder(value: object) -> bool:
    return isinstance(value, str) and _PLACEHOLDER.fullmatch(value) is not None


def _secret_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return dumps(value) or ""
