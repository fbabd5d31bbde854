"""JSON text in and out, the same way everywhere: strict parsing (orjson first, the stdlib for
what orjson refuses but JSON allows) and one canonical dump for stored values."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import orjson

JSON = Any
MAX_DEPTH = 1024  # orjson's own limit; convtap's walks are made to reach it (RECURSION)
RECURSION = 10_000  # the interpreter's recursion limit convtap's processes run with
# How a value convtap.redact replaced is stored: `<redacted:` and twelve hex digits of a keyed
# hash of what it replaced (so equal secrets stay equal).
REDACTED = re.compile(r"<redacted:[0-9a-f]{12}>")
# A surrogate on its own: JSON text may carry one (`\ud800`), UTF-8 cannot.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def allow_deep_json() -> None:
    """Let recursive walks (redaction, shapes, copies) reach MAX_DEPTH levels."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION))


def loads(text: str | bytes) -> JSON:
    """Parse JSON strictly: orjson first (fast), the stdlib for what orjson refuses but JSON
    allows (integers beyond 64 bits, lone surrogate escapes). NaN and Infinity are refused."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc) or "recursion" in str(exc):  # deeper than 1024: refused
            raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
        try:
            return json.loads(text, parse_constant=_refuse_constant)
        except RecursionError:
            raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from None


_LONG_NUMBER = re.compile(r"\d{19}")  # an integer orjson may read as a float (past 64 bits)


def loads_exact(text: str) -> JSON:
    """`loads`, integers past 64 bits kept exact (orjson reads them as floats, as JavaScript
    does: right for the wire, not for a value read back from the store)."""
    if _LONG_NUMBER.search(text) is None:
        return loads(text)
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from None


def loads_or_none(text: str | bytes | None) -> JSON:
    """JSON text as a value, or None when there is no text or it is not JSON."""
    if not text:
        return None
    try:
        return loads(text)
    except (ValueError, RecursionError):
        return None


def dumps(value: Any) -> str | None:
    """A value as stored: sorted keys, non-ASCII kept; None stays None (SQL NULL)."""
    if value is None:
        return None
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # what orjson refuses (big integers, lone surrogates): the stdlib writes
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return escape_lone_surrogates(text)


def escape_lone_surrogates(text: str) -> str:
    """Each lone surrogate as its JSON escape (`\\ud800`): text that UTF-8 can carry."""
    return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")
