"""What is secret on this wire (docs/protocol.md, "Secrets on this wire"), and the cheap look
that tells which text may hold one.

A secret is found two ways:

- by where it sits: a JSON key (in any case, with `-`, `_` or a space, after JSON unescaping:
  `Token`, `Access_Token`, `x-api-key`, `Api Key`, `authoriz\\u0061tion`), a delta whose path
  names such a key (and the bare frames that go on appending to it), a header outside an
  allow-list, a URL's query parameter (in a URL, a header or prose), a value assigned to a secret
  key's name in prose or code (`AWS_SECRET_ACCESS_KEY=…`);
- by what it looks like, anywhere in stored text: API keys (OpenAI, Anthropic, Google, Hugging
  Face, AWS, GitHub, GitLab, Slack, Stripe, SendGrid, PyPI, Square, Azure storage, npm,
  Mailchimp, Artifactory, Telegram: detect-secrets' detectors as a floor, plus current key
  formats), JWTs, `Bearer` / `Basic` credentials, credentials in URLs, and private keys.

Text is first looked at cheaply (`hints`): lowercased, JSON-unescaped, searched once for every
hint of a key or a value (Aho-Corasick). Only text with a hint is parsed and walked.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass

import ahocorasick_rs

from convtap.redact.escapes import Decoded
from convtap.wire.jsonvalue import REDACTED

PLACEHOLDER_PREFIX = "<redacted:"
PLACEHOLDER = REDACTED

# -- keys ------------------------------------------------------------------------------------------

# A key is secret when, lowercased with `-` as `_`, it contains one of these (a token, not a
# count of tokens), or is one of EXACT_KEYS; its value is secret when it is a string, an object
# or an array (a number or a boolean never is).
KEY_PARTS = (
    "token", "secret", "passw", "passphrase", "authoriz", "cookie", "credential", "apikey",
    "api_key", "private_key", "privatekey", "priv_key", "access_key", "session", "challenge",
    # detect-secrets' keyword list
    "auth_key", "authkey", "service_key", "account_key", "client_key", "db_key",
    "database_key", "db_pass", "database_pass", "key_pass", "contraseña", "contrasena",
)  # fmt: skip
_KEY = re.compile("|".join(part if part != "token" else "token(?!s)" for part in KEY_PARTS))
EXACT_KEYS = frozenset({"verify", "auth", "pwd", "pass"})
# Query parameters that are secret in a URL (an OAuth code, a signed URL's signature) but name
# ordinary things as JSON keys (an error's `code`).
QUERY_KEYS = frozenset({"code", "sig", "signature", "key", "x_amz_signature"})

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
    name = _folded_name(key)
    return name in EXACT_KEYS or _KEY.search(name) is not None


def _folded_name(key: str) -> str:
    """A key as keys are compared: lowercased, `-` and spaces as `_` (`Api Key`, `api-key`)."""
    return key.strip().lower().replace("-", "_").replace(" ", "_")


def is_secret_query_key(key: str) -> bool:
    """A query parameter whose value is secret."""
    return is_secret_key(key) or _folded_name(key) in QUERY_KEYS


def path_is_secret(path: str) -> bool:
    """A JSON Pointer that names a secret key somewhere along it."""
    return any(is_secret_key(segment) for segment in path.split("/") if segment)


# -- values ----------------------------------------------------------------------------------------


def _fold(text: str) -> str:
    """Lowercase text (or a hint) as the search folds it: `-` as `_`."""
    return text.replace("-", "_")


# A secret assigned in prose or code (`AWS_SECRET_ACCESS_KEY=…`, `password: …`, `api_key = "…"`):
# detect-secrets' keyword list, then `=`, `:` or `:=`, then the value (6 characters or more).
_ASSIGNED = (
    "api_key", "apikey", "auth_key", "authkey", "service_key", "account_key", "db_key",
    "database_key", "priv_key", "private_key", "client_key", "db_pass", "database_pass",
    "key_pass", "password", "passwd", "pwd", "secret", "contraseña", "contrasena", "token",
    "passphrase", "access_key", "secret_key", "credential",
)  # fmt: skip
_ASSIGNMENT = re.compile(
    r"(?i)(?:" + "|".join(w.replace("_", "[_ -]?") if w != "token" else "token(?!s)"
                          for w in _ASSIGNED)
    + r")[\w-]*?[\]'\"]{0,2}[ \t]*(?::=|=|:)[ \t]*"
    # quoted, or else not a plain word (prose: "secret: nothing")
    r"(?:(['\"`])|(?=[^\s'\"`,;<>\\&]*[\d_/+=.!@#$%^*-]))([^\s'\"`,;<>\\&]{6,})"
)  # fmt: skip
# A query parameter named like a secret, in any text (a Referer, a URL in prose).
_QUERY = re.compile(
    r"(?i)[?&](?:code|sig|key|pass|[\w.-]*?(?:token|secret|passw|signature|auth|session"
    r"|credential|pwd|verify|api_?key|access_?key|private_?key))=([^&#\s'\"<>\\]+)"
)
# What the cheap search looks for, for those two, besides a secret key's name assigned a value.
_QUERY_WORDS = ("?sig=", "&sig=", "?code=", "&code=", "?key=", "&key=", "signature=", "auth=",
                "verify=")  # fmt: skip


# A secret key's name assigned a value in prose or code (`AWS_SECRET_ACCESS_KEY=`, `password:`,
# `access_token=` in a query): a value may be there.
_ASSIGNING = (  # after a key's name: `=`, `:` or `:=`, and the start of a value
    rb"[a-z0-9_]{0,24}+"
    rb"(?:[\"'\]]{1,2}[ \t]*[:=]=?[ \t]*[\"'`a-z_/+]|[ \t]*[:=]=?[ \t]*[\"'`a-z0-9_/+])"
)  # (quoted as a JSON key: not a number, `true`, an object; no value a pattern looks for)
_ASSIGNED_TO_KEY = re.compile(
    rb"(?:token(?!s)|secret|passw|passphrase|credential|session|[ _]key|apikey|authkey"
    rb"|privatekey|_pass|pwd|contrase)" + _ASSIGNING
)
_ASSIGNED_AFTER = re.compile(_ASSIGNING)  # right after a key hint found by the search


@dataclass(frozen=True)
class ValuePattern:
    name: str
    hints: tuple[str, ...]  # lowercase text that any match contains
    regex: re.Pattern[str] | Detector
    group: int = 0  # the part of a match that is the secret
    words: tuple[str, ...] | None = None  # what the cheap search looks for (None: the hints)
    needs: re.Pattern[bytes] | None = None  # a cheaper look first (lowercase, `-` as `_`)

    @functools.cached_property
    def regexes(self) -> tuple[re.Pattern[str], ...]:
        """Its regular expressions: its own, or its detector's, loaded when first wanted."""
        return self.regex.denylist() if isinstance(self.regex, Detector) else (self.regex,)


@dataclass(frozen=True)
class Detector:
    """One of detect-secrets' detectors, by module and class (`detect_secrets.plugins.<module>`),
    and which of its `denylist` patterns to use (all: none named). It is imported only when text
    holds one of its hints: the package's `__init__` loads its scanner, its filters and
    `requests` (0.15 s of CPU), which a command whose text holds no hint never needs."""

    module: str
    name: str
    indexes: tuple[int, ...] = ()

    def denylist(self) -> tuple[re.Pattern[str], ...]:
        plugin = importlib.import_module(f"detect_secrets.plugins.{self.module}")
        patterns = tuple(getattr(plugin, self.name).denylist)
        return tuple(patterns[i] for i in self.indexes) if self.indexes else patterns


VALUE_PATTERNS: tuple[ValuePattern, ...] = (
    # detect-secrets' token-shaped detectors (a maintained list of formats)
    ValuePattern("aws", ("akia", "asia", "abia", "acca", "a3t"),
                 Detector("aws", "AWSKeyDetector", (0,))),
    ValuePattern("github", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
                 Detector("github_token", "GitHubTokenDetector")),
    ValuePattern("gitlab", ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941",
                            "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-"),
                 Detector("gitlab_token", "GitLabTokenDetector")),
    ValuePattern("slack", ("xox", "hooks.slack.com"), Detector("slack", "SlackDetector")),
    ValuePattern("sendgrid", ("sg.",), Detector("sendgrid", "SendGridDetector")),
    ValuePattern("pypi", ("pypi-",), Detector("pypi_token", "PypiTokenDetector")),
    ValuePattern("square", ("sq0csp-",), Detector("square_oauth", "SquareOAuthDetector")),
    ValuePattern("openai-legacy", ("t3blbkfj",), Detector("openai", "OpenAIDetector")),
    ValuePattern("azure-storage", ("accountkey=",),
                 Detector("azure_storage_key", "AzureStorageKeyDetector")),
    ValuePattern("npm", ("_authtoken",), Detector("npm", "NpmDetector")),
    ValuePattern("mailchimp", tuple(f"-us{n}" for n in range(10)),
                 re.compile(r"\b[0-9a-z]{32}-us[0-9]{1,2}\b")),
    ValuePattern("artifactory", ("akc",), re.compile(r"\bAKC[a-zA-Z0-9]{10,}")),
    # Telegram bot tokens: the secret half begins with "AA" (detect-secrets takes any)
    ValuePattern("telegram", (":aa",), re.compile(r"\b\d{8,10}:AA[0-9A-Za-z_-]{33}")),
    # formats those do not cover
    ValuePattern("openai-anthropic", ("sk-",),
                 re.compile(r"\bsk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ValuePattern("github-fine-grained", ("github_pat_",),
                 re.compile(r"github_pat_[A-Za-z0-9_]{22,}")),
    ValuePattern("stripe", ("k_live_", "k_test_"),
                 re.compile(r"\b[rs]k_(?:live|test)_[0-9a-zA-Z]{24,}")),  # whole, past 24
    ValuePattern("google", ("aiza",), re.compile(r"\bAIza[0-9A-Za-z_-]{30,}")),
    ValuePattern("hugging-face", ("hf_",), re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ValuePattern("assignment", ("token", "secret", "passw", "passphrase", "credential", "key",
                                "pass", "pwd", "contrase"), _ASSIGNMENT, 2, (), _ASSIGNED_TO_KEY),
    ValuePattern("query", ("=",), _QUERY, 1, _QUERY_WORDS),
    ValuePattern("jwt", ("eyj",),
                 re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{2,}(?:\.[A-Za-z0-9_-]*)?")),
    ValuePattern("bearer-basic", ("bearer", "basic"),
                 re.compile(r"(?i)\b(?:bearer|basic)\s+([A-Za-z0-9._~+/=-]{8,})"), 1),
    ValuePattern("url-credentials", ("://",),
                 re.compile(r"://[^\s/@:\"'<>]+:([^\s/@\"'<>]+)@"), 1),
    ValuePattern("private-key", ("-----begin", "---- begin", "putty-user-key-file"),
                 re.compile(r"(?:-----|---- )BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?(?:-----| ----)"
                            r"(?:.*?(?:-----|---- )END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?"
                            r"(?:-----| ----)|[A-Za-z0-9+/=\s\\]*)"
                            r"|PuTTY-User-Key-File-\d:.*?(?:Private-MAC: [0-9a-f]+|$)", re.S)),
)  # fmt: skip

# Which patterns to try on a text: one search for every pattern's hints.
_HINT_WORDS = sorted({_fold(hint) for pattern in VALUE_PATTERNS for hint in pattern.hints})
_PATTERN_HINTS = ahocorasick_rs.BytesAhoCorasick([word.encode() for word in _HINT_WORDS])
_PATTERNS_OF = [
    [n for n, pattern in enumerate(VALUE_PATTERNS) if word in map(_fold, pattern.hints)]
    for word in _HINT_WORDS
]

# Text that names a key without being one: markers the server sends as values.
_HARMLESS = ('"cot_token"', '"user_visible_token"', '"final_channel_token"', '"last_token"',
             '"resume_conversation_token"')  # fmt: skip


# What the search looks for to tell that a secret key may be named: a part of every name in
# KEY_PARTS (spelled with `-`, `_` or a space) and EXACT_KEYS, as a JSON key (`"verify"`,
# `"Api Key"`) or as a segment of a delta's path (`"p": "/message/metadata/verify"`, `…/auth/x`);
# and HTTP headers a body carries (an MCP tool's `headers`), kept as headers are.
_KEY_HINTS = ["token", "secret", "passw", "passphrase", "authoriz", "cookie", "credential",
              "session", "challenge", "_key", 'key"', "apikey", "authkey", "privatekey",
              'pass"', "contrase", "pwd", '"auth"', '/auth"', '/auth/', '"verify"', '/verify',
              '"auth ', ' auth"', '"verify ', ' verify"', '"pass ', '"headers"',
              # and those ending in a quote, in JSON text carried in a string (`pass\\"`)
              'key\\', 'pass\\', '"auth\\', '"verify\\']  # fmt: skip
_KEY_WORDS = list(dict.fromkeys(_fold(hint) for hint in _KEY_HINTS))
_VALUE_WORDS = [w for w in dict.fromkeys(
    _fold(word) for pattern in VALUE_PATTERNS
    for word in (pattern.hints if pattern.words is None else pattern.words)
) if w not in _KEY_WORDS]  # fmt: skip
# What makes bytes unlike the text they encode, for this search: a JSON escape (`\\uXXXX`,
# `\\/`) and the only characters outside ASCII whose lowercase is ASCII (İ, the Kelvin sign),
# in UTF-8. Text holding one is folded as text (unescaped, then str.lower, as `is_secret_key`).
_UNLIKE = ["\\u", "\\/", "\u0130", "\u212a"]
# A marker is blanked out before the search (its quotes and its length kept): its words do not
# count, and a hint beside it is found as it is. Every marker ends so:
_MARKER_END = b'_token"'
_MARKERS = [h.replace("-", "_").encode() for h in _HARMLESS]
_BLANKS = [(m, b'"' + b" " * (len(m) - 2) + b'"') for m in _MARKERS]
_FEW_MARKERS = 4  # blanked where they are found; past that many, by replace
# One pass of one automaton (Rust, on UTF-8 bytes: several times faster than on text) finds
# them all; a match's index says what it is. Once one kind of hint is found, an automaton
# without it looks for the other: text full of "token" is not matched word by word. (Past
# about a hundred words, the automaton runs at half the speed.)
_WORDS = [*_KEY_WORDS, *_VALUE_WORDS, *_UNLIKE]
_VALUES_FROM = len(_KEY_WORDS)
_UNLIKE_FROM = _VALUES_FROM + len(_VALUE_WORDS)
_KEY_IDS = frozenset(range(_VALUES_FROM))
_VALUE_IDS = frozenset(range(_VALUES_FROM, _UNLIKE_FROM))
_UNLIKE_IDS = frozenset(range(_UNLIKE_FROM, len(_WORDS)))


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
    (True, True): _Finder(_KEY_IDS | _VALUE_IDS | _UNLIKE_IDS),
    (True, False): _Finder(_KEY_IDS | _UNLIKE_IDS),
    (False, True): _Finder(_VALUE_IDS | _UNLIKE_IDS),
}
_LONGEST = max(len(w.encode()) for w in _WORDS)
_WINDOW = 1 << 16  # bytes searched at once
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(/)")


def _unescaped(text: str) -> str:
    """JSON's `\\uXXXX` and `\\/` decoded, so that an escape hides neither a key nor a value."""
    if "\\u" not in text and "\\/" not in text:
        return text
    return _ESCAPE.sub(lambda m: m.group(2) or chr(int(m.group(1), 16)), text)


def hints(text: str, utf8: bytes | None = None) -> tuple[bool, bool]:
    """(a secret key may be named, a secret value may be there) in this text; `utf8`, when
    given, is the text's UTF-8 (the bytes it was decoded from), searched without encoding the
    text again."""
    if utf8 is not None:
        return _found(text, want_keys=True, folded=_folded_utf8(utf8))
    return _found(text, want_keys=True)


# EXACT_KEYS searched for in UTF-8 bytes with only ASCII lowercased: each is ASCII, and no other
# character lowercases to a run of their letters (only U+0130 and U+212A lowercase to ASCII, to
# "i" + U+0307 and to "k"), so this finds what a search of the text lowercased whole finds.
_EXACT_KEY_SEARCH = ahocorasick_rs.BytesAhoCorasick([key.encode() for key in sorted(EXACT_KEYS)])


def may_hold_secret(text: str | bytes) -> bool:
    """Whether a secret may be in this JSON text, for a walk of its value (`Redactor.json`):
    a hint, an exact key's word anywhere (`"auth "` and an exact key in a JSON string inside
    a string are keys too, which the hints do not see), or an escape (checked by the walk).
    The text may be given as its UTF-8 (lone surrogates as `surrogatepass` writes them): it is
    searched as it is, not decoded."""
    # (no exact key holds `-` or `_`, or is inside a harmless marker)
    folded = _folded(text)
    if b"\\u" in folded or _EXACT_KEY_SEARCH.find_matches_as_indexes(folded):
        return True  # ("auth" is in every message's "author": the hints need not be searched)
    return any(_found(text, want_keys=True, folded=folded))


def value_hints(text: str) -> bool:
    """A secret value may be there in this text."""
    return _found(text, want_keys=False)[1]


def _folded(text: str | bytes) -> bytes:
    """Text (or its UTF-8) as the hints are searched for in it: UTF-8, lowercased, `-` as `_`,
    the harmless markers blanked out."""
    return _folded_utf8(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))


def _folded_utf8(data: bytes) -> bytes:
    """`_folded` of the text these UTF-8 bytes decode."""
    folded = data.lower().replace(b"-", b"_")
    return _blank_markers(folded) if _MARKER_END in folded else folded


def _found(
    text: str | bytes, *, want_keys: bool, exact: bool = False, folded: bytes | None = None
) -> tuple[bool, bool]:
    """(keys, values): the hints in the text, folded as keys are (JSON-unescaped, lowercased,
    `-` as `_`), none counted inside a harmless marker (blanked out). Searched a window at a
    time (they overlap by a hint's length), so that text full of hints holds few matches at
    once, and only until the answer is known. `folded`: the text `_folded` already (given
    with it, `text` may be its UTF-8, decoded only for a search of its unescaped text)."""
    folded = _folded(text) if folded is None else folded
    keys = values = False
    for start in range(0, len(folded), _WINDOW):
        if values and (keys or not want_keys):
            break
        wanted = (not keys, not values)
        window = folded[start : start + _WINDOW + _LONGEST - 1]
        matches = _FINDERS[wanted].find(window)
        found = {index for index, _, _ in matches}
        if not exact and not found.isdisjoint(_UNLIKE_IDS):
            if isinstance(text, bytes):
                text = text.decode("utf-8", "surrogatepass")
            return _found(_unescaped(text).lower(), want_keys=want_keys, exact=True)
        named = not found.isdisjoint(_KEY_IDS)
        values = (
            values or not found.isdisjoint(_VALUE_IDS) or _assigned(window, matches, named, keys)
        )
        keys = keys or named
    return keys and want_keys, values


def _assigned(window: bytes, matches: list[tuple[int, int, int]], named: bool, known: bool) -> bool:
    """A value assigned to a secret key's name in the window: looked for right after each name
    found in it (`named`), else, when keys were found before (and so not looked for here),
    searched for."""
    if named:
        return any(_ASSIGNED_AFTER.match(window, end) for i, _, end in matches if i in _KEY_IDS)
    return known and _ASSIGNED_TO_KEY.search(window) is not None


def _blank_markers(folded: bytes) -> bytes:
    """The harmless markers in folded text blanked out (spaces between their quotes), found
    where their common end is; text holding many is blanked one replace a marker (C speed)."""
    out: bytearray | None = None
    end = folded.find(_MARKER_END)
    for _ in range(_FEW_MARKERS):
        if end < 0:
            return folded if out is None else bytes(out)
        stop = end + len(_MARKER_END)
        for marker, blank in _BLANKS:
            if folded.startswith(marker, stop - len(marker)):
                out = bytearray(folded) if out is None else out
                out[stop - len(marker) : stop] = blank
                break
        end = folded.find(_MARKER_END, stop)
    del out  # many: all of them replaced (the copy made so far is let go first)
    for marker, blank in _BLANKS:
        folded = folded.replace(marker, blank)
    return folded


# A JSON string, in JSON text that may be cut short (a call's arguments as they stream): it runs
# to its closing quote, else to the line's or the text's end. Read one after the other, strings
# are never begun inside another (at an escaped quote): one pass, whatever the text.
_JSON_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"?')
_COLON = re.compile(r"\s*:\s*")
NESTED = 4  # levels of JSON text in JSON strings (or of escapes) looked into


def is_placeholder(value: object) -> bool:
    """A redaction placeholder: never a secret again (nothing is hashed twice)."""
    return isinstance(value, str) and PLACEHOLDER.fullmatch(value) is not None


def keyed_secrets(text: str, depth: int = 0) -> list[tuple[int, int, str]]:
    """Where the string values of secret keys sit in JSON text, whole or cut short, as JSON text
    (escapes kept): (start, end, secret), in order; in JSON text carried in its strings too (a
    tool's result `"{\\"password\\": …}"`), `NESTED` deep. Look for `hints` first."""
    found: list[tuple[int, int, str]] = []
    key: re.Match[str] | None = None  # the string before, if a colon follows it
    for string in _JSON_STRING.finditer(text):
        value = string.group(1)
        if (
            key is not None and _COLON.fullmatch(text, key.end(), string.start())
            and value and is_secret_key(_unescaped(key.group(1))) and not is_placeholder(value)
        ):  # fmt: skip
            found.append((*string.span(1), value))
        elif '\\"' in value and depth < NESTED:
            inner = Decoded(value)
            found += [(string.start(1) + inner.position(a), string.start(1) + inner.position(b), s)
                      for a, b, s in keyed_secrets(inner.text, depth + 1)]  # fmt: skip
        key = string
    return found


def find_secrets(text: str, *, keyed: bool = False, depth: int = 0) -> list[tuple[int, int, str]]:
    """Where secret-shaped values sit in plain text: (start, end, secret), in order, apart;
    found in the text with its JSON escapes decoded too (`\\u0073k-…`, `\\/`, `\\"`), `NESTED`
    deep. `keyed`: the text may be JSON text, and the values of its secret keys count too."""
    folded = text.lower().encode("utf-8", "surrogatepass").replace(b"-", b"_")
    found: list[tuple[int, int, str]] = keyed_secrets(text) if keyed else []
    if "\\" in text and depth < NESTED:
        inner = Decoded(text)
        if inner.text != text:
            found += [(inner.position(a), inner.position(b), secret)
                      for a, b, secret in find_secrets(inner.text, depth=depth + 1)]  # fmt: skip
    hinted = {n for hint, _, _ in _PATTERN_HINTS.find_matches_as_indexes(folded, overlapping=True)
              for n in _PATTERNS_OF[hint]}  # fmt: skip
    for n in sorted(hinted):
        pattern = VALUE_PATTERNS[n]
        if pattern.needs is not None and pattern.needs.search(folded) is None:
            continue
        for regex in pattern.regexes:
            for match in regex.finditer(text):
                secret = match.group(pattern.group)
                if secret and PLACEHOLDER.fullmatch(secret) is None:
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
