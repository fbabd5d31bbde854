"""How a raw event's bytes and a message's JSON are kept small in the capture, and read back.

Schema 5. A raw event row (`events`) holds its text in `data` when that is the smaller way; when
`data` is NULL, `raw` holds its bytes compressed: a zstd frame (its first four bytes zstd's magic
number) or, as convtap wrote them before and does where no zstd module is there, a zlib stream
(whose first two bytes can never be zstd's). A row whose bytes are not all UTF-8 and are not
compressed keeps them in `raw` as they came, with `data` reading them as U+FFFD (as schema 4
did). A message row (`messages`) whose `json_without_text` is 1 has its text taken out of `json`
where `message_text` found it (`content.text`, or its one string part), an empty string left in
its place: the text is in `text` once, and put back on read.

The standard library only, and a zstd module where there is one (mitmproxy brings one: 11
`zstandard`, 12 `backports.zstd`, which is `compression.zstd` from Python 3.14 on): Datasette's
plugin imports this module to give SQL the same reads (`convtap_event`, `convtap_message`), and
a test holds them equal to the accessors.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import sqlite3
import zlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from convtap.store.errors import DamagedRow

# zstd's level 1 (or, without a zstd module, zlib's): on the benchmark's 16 KiB pieces zstd keeps
# 0.133 of the stream at 1.9 ms per MB, zlib level 1 0.140 at 4.0, level 6 0.11 at 9.9
# (docs/benchmarks.md).
LEVEL = 1
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
SMALLEST = 256  # bytes: a row shorter is stored as it is (a codec's header and tables cost more)
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # a zstd frame's first bytes (a zlib header never is: % 31)

Codec = tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]  # (compress, decompress)


@functools.cache
def zstd() -> Codec | None:
    """zstd's level 1 and its decompression, from the first module there is; None if none."""
    for name in ("compression.zstd", "backports.zstd"):
        try:
            module: Any = importlib.import_module(name)
        except ImportError:
            continue
        return functools.partial(module.compress, level=LEVEL), module.decompress
    try:
        zstandard: Any = importlib.import_module("zstandard")
    except ImportError:
        return None
    compressor = zstandard.ZstdCompressor(level=LEVEL)

    def decompress(data: bytes) -> bytes:  # (a frame may not say its size: streamed)
        stream = zstandard.ZstdDecompressor().decompressobj()
        out = bytes(stream.decompress(data))
        if not stream.eof or stream.unused_data:
            raise ValueError("not one whole zstd frame")
        return out

    return compressor.compress, decompress


CODEC = "zstd level 1" if zstd() is not None else "zlib level 1"  # what `pack` does


def pack(raw: bytes) -> bytes:
    """A raw event row's bytes compressed, as stored."""
    codec = zstd()
    return zlib.compress(raw, LEVEL) if codec is None else codec[0](raw)


def event_columns(text: str, encoded: bytes | None = None) -> tuple[str | None, bytes | None]:
    """A raw event's (`data`, `raw`) as stored, from its text (bytes that are not UTF-8 as
    `surrogateescape` surrogates), or from `encoded`, the UTF-8 bytes the text decodes (the
    bytes as they came: not encoded again). Raises UnicodeEncodeError for a surrogate that
    stands for no byte."""
    utf8 = True
    if encoded is not None:
        raw = encoded
    else:
        try:
            raw = text.encode()
        except UnicodeEncodeError:
            raw = text.encode("utf-8", "surrogateescape")
            utf8 = False
    if len(raw) >= SMALLEST:
        packed = pack(raw)
        if len(packed) < len(raw) - len(raw) // 8:  # saves an eighth at least
            return None, packed
    if utf8:
        return text, None
    return raw.decode("utf-8", "replace"), raw


class StoredEvent(Protocol):
    """A raw event row as the store's reads give it (`store.rows.EventRow`)."""

    @property
    def flow_id(self) -> str: ...
    @property
    def data(self) -> str | None: ...
    @property
    def raw(self) -> bytes | None: ...


# A raw event row: the row type, or a query's row (SQL that selects `data` and `raw`).
Event = StoredEvent | Mapping[str, Any]


def _columns(row: Event) -> tuple[Any, Any, Any]:
    """A row's data, raw and flow_id."""
    if isinstance(row, Mapping):
        return row["data"], row.get("raw"), row.get("flow_id")
    return row.data, row.raw, row.flow_id


def event_bytes(row: Event) -> bytes:
    """A raw event row's bytes, exactly as they came."""
    data, raw, flow_id = _columns(row)
    if data is None:
        return _unpacked(raw, flow_id)
    return raw if isinstance(raw, bytes) else str(data).encode()


def event_text(row: Event) -> str:
    """A raw event row's text: its bytes as UTF-8, any that are not read as U+FFFD."""
    data, raw, flow_id = _columns(row)
    if data is None:
        return _unpacked(raw, flow_id).decode("utf-8", "replace")
    return str(data)


def event_is_utf8(row: Event) -> bool:
    """Whether a raw event row's bytes are all UTF-8 (its text is then its bytes exactly)."""
    data, raw, flow_id = _columns(row)
    if data is None:
        try:
            _unpacked(raw, flow_id).decode()
        except UnicodeDecodeError:
            return False
        return True
    return raw is None


def _unpacked(raw: Any, flow_id: Any) -> bytes:
    """A compressed row's bytes; DamagedRow when they cannot be (a capture changed by hand, a
    damaged disk): one line, never a traceback."""
    where = f" of flow {flow_id}" if flow_id else ""
    if isinstance(raw, bytes) and raw.startswith(ZSTD_MAGIC):
        codec = zstd()
        if codec is None:
            raise DamagedRow(f"a raw event row{where} is zstd-compressed, and this Python has no "
                             "zstd module to read it: install zstandard")  # fmt: skip
        try:
            return codec[1](raw)
        except Exception as exc:  # each module has its own error: any is a damaged row
            why = f"a raw event row{where} is damaged and cannot be read: {exc}"
            raise DamagedRow(why) from None
    try:
        return zlib.decompress(raw)
    except (zlib.error, TypeError) as exc:
        raise DamagedRow(f"a raw event row{where} is damaged and cannot be read: {exc}") from None


def message_without_text(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """The message with its text taken out (an empty string in its place), or None when there is
    no text to take out, or several string parts hold it (their joint cannot be told apart)."""
    content = message.get("content")
    if not isinstance(content, dict):
        return None
    if isinstance(content.get("text"), str):
        if not content["text"]:
            return None
        return {**message, "content": {**content, "text": ""}}
    parts = content.get("parts")
    if not isinstance(parts, list):
        return None
    where = [n for n, part in enumerate(parts) if isinstance(part, str)]
    if len(where) != 1 or not parts[where[0]]:
        return None
    kept = list(parts)
    kept[where[0]] = ""
    return {**message, "content": {**content, "parts": kept}}


def message_with_text(message: Any, text: str | None) -> Any:
    """A message `message_without_text` took the text out of, with `text` put back where it was."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, dict) or text is None:
        return message
    if isinstance(content.get("text"), str):
        return {**message, "content": {**content, "text": text}}
    parts = content.get("parts")
    if isinstance(parts, list):
        put = [text if isinstance(part, str) else part for part in parts]
        return {**message, "content": {**content, "parts": put}}
    return message


def message_json_text(json_text: str | None, text: str | None, without_text: Any) -> str | None:
    """A message row's JSON as recorded (its text in it), from its `json`, `text` and
    `json_without_text` columns; what SQL's `convtap_message` returns."""
    if not without_text or json_text is None:
        return json_text
    try:
        value = json.loads(json_text)
    except (ValueError, RecursionError):  # not JSON (a row changed by hand): as it is
        return json_text
    whole = message_with_text(value, text)
    dumped = json.dumps(whole, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    # a lone surrogate (JSON may escape one; UTF-8 cannot carry it) stays an escape
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", dumped)


def _sql_event(data: str | None, raw: bytes | None) -> str | None:
    if data is None and raw is None:
        return None
    return event_text({"data": data, "raw": raw})


def add_sql_functions(conn: sqlite3.Connection) -> None:
    """`convtap_event(data, raw)`: an events row's text; `convtap_message(json, text,
    json_without_text)`: a messages row's whole JSON. Deterministic, so that SQLite may use
    them in indexes and views."""
    conn.create_function("convtap_event", 2, _sql_event, deterministic=True)
    conn.create_function("convtap_message", 3, message_json_text, deterministic=True)
