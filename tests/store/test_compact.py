"""convtap.store.compact: each message text stored once and put back exactly, raw events
compressed where it pays and read back byte for byte; SQL's functions read as the accessors do;
a schema 4 capture read unchanged by the commands that only read, and migrated in place."""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from convtap.store.compact import (
    SMALLEST,
    ZSTD_MAGIC,
    add_sql_functions,
    event_bytes,
    event_columns,
    event_is_utf8,
    event_text,
    message_json_text,
    message_with_text,
    message_without_text,
    zstd,
)
from convtap.store.database import (
    Writer,
    connect,
    iter_events,
    iter_shape_rows,
    message_value,
    open_readonly,
)
from convtap.store.errors import DamagedRow
from convtap.store.rows import EventRow, MessageRow
from convtap.store.schema import MIGRATIONS, SCHEMA_VERSION
from convtap.wire.jsonvalue import dumps
from convtap.wire.turn import message_text
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runner import convtap

# -- each text once --------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=20))  # fmt: skip
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8)  # fmt: skip
parts = st.lists(st.one_of(st.text(max_size=30), values), max_size=5)
contents = st.one_of(
    values,  # no content, or one of an odd type
    st.fixed_dictionaries({"content_type": st.just("text"), "parts": parts}),
    st.fixed_dictionaries({"content_type": st.just("code"), "text": st.text(max_size=30)}),
    st.fixed_dictionaries({"text": values, "parts": st.one_of(parts, values)}),
)
messages = st.builds(
    lambda content, extra, present: {
        **extra, "id": "m", "author": {"role": "assistant"}, **({"content": content} if present
                                                                 else {})},
    contents, st.dictionaries(st.sampled_from(["status", "metadata", "recipient"]), values),
    st.booleans(),
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(messages)
def test_a_message_with_its_text_taken_out_and_put_back_is_the_message(
    message: dict[str, Any],
) -> None:
    text = message_text(message)
    without = message_without_text(message)
    if without is None:  # no text, or several string parts: stored whole
        assert not text or _string_parts(message) > 1
        return
    assert text and message_text(without) == ""
    assert message_with_text(without, text) == message
    whole = message_json_text(dumps(without), text, 1)
    assert whole is not None and json.loads(whole) == json.loads(dumps(message) or "")
    row = {"json": dumps(without), "text": text, "json_without_text": 1}
    assert message_value(MessageRow.read(row)) == json.loads(dumps(message) or "")


def _string_parts(message: dict[str, Any]) -> int:
    content = message.get("content")
    found = content.get("parts") if isinstance(content, dict) else None
    return sum(isinstance(p, str) for p in found) if isinstance(found, list) else 0


def test_the_text_is_taken_out_where_message_text_finds_it() -> None:
    code = {"content": {"content_type": "code", "text": "print(1)", "parts": ["x"]}}
    assert message_without_text(code) == {
        "content": {"content_type": "code", "text": "", "parts": ["x"]}
    }
    mixed = {"content": {"parts": [{"image": 1}, "caption", 7]}}
    assert message_without_text(mixed) == {"content": {"parts": [{"image": 1}, "", 7]}}
    assert message_without_text({"content": {"parts": ["a", "b"]}}) is None  # "ab": where?
    assert message_without_text({"content": {"parts": [""]}}) is None
    assert message_without_text({"content": "text"}) is None


# -- raw events ------------------------------------------------------------------------------


def stored(text: str) -> dict[str, Any]:
    data, raw = event_columns(text)
    return {"data": data, "raw": raw}


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=2000), st.text(max_size=2000).map(str.encode),
                 st.binary(max_size=40).map(lambda b: b * 50)))  # fmt: skip
def test_a_raw_event_reads_back_byte_for_byte(sent: bytes) -> None:
    row = stored(sent.decode("utf-8", "surrogateescape"))
    assert event_bytes(row) == sent
    assert event_text(row) == sent.decode("utf-8", "replace")
    utf8 = sent.decode("utf-8", "replace").encode() == sent
    assert event_is_utf8(row) == utf8
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        add_sql_functions(conn)
        (read,) = conn.execute("SELECT convtap_event(?, ?)", (row["data"], row["raw"])).fetchone()
    assert read == event_text(row)


def test_a_row_is_compressed_where_it_saves_space_and_plain_where_not() -> None:
    chunk = 'event: delta\ndata: {"v": "word"}\n\n' * 40
    assert stored(chunk)["data"] is None
    packed = stored(chunk)["raw"]
    assert packed.startswith(ZSTD_MAGIC) and zstd() is not None  # mitmproxy brings a module
    assert zstd()[1](packed) == chunk.encode()  # type: ignore[index]
    assert stored("data: [DONE]\n\n") == {"data": "data: [DONE]\n\n", "raw": None}
    short = "ab" * (SMALLEST // 2 - 1)  # compressible, but short
    assert stored(short) == {"data": short, "raw": None}
    noise = random.Random(1).randbytes(4000)  # long, but compression saves nothing
    assert stored(noise.decode("utf-8", "surrogateescape"))["raw"] == noise
    bad = b"data: caf\xe9\n\n"
    assert stored(bad.decode("utf-8", "surrogateescape")) == {
        "data": "data: caf\ufffd\n\n",
        "raw": bad,
    }


def test_rows_written_with_zlib_still_read_and_a_damaged_frame_is_told() -> None:
    """Captures convtap wrote before zstd (and without a zstd module) hold zlib streams: they
    read as ever, told apart by their first bytes. A zstd frame cut short, or with more after
    it, is a damaged row: one line, never a traceback."""
    chunk = ('event: delta\ndata: {"v": "caf\xe9 \U0001f33f"}\n\n' * 40).encode()
    old = {"data": None, "raw": zlib.compress(chunk, 1), "flow_id": "f"}
    assert event_bytes(old) == chunk and event_is_utf8(old)
    packed = stored(chunk.decode())["raw"]
    for bad in (packed[:-4], packed + b"\0", ZSTD_MAGIC + b"\0\0"):
        with pytest.raises(DamagedRow, match=r"^a raw event row of flow f is damaged"):
            event_bytes({"data": None, "raw": bad, "flow_id": "f"})
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        add_sql_functions(conn)
        (read,) = conn.execute("SELECT convtap_event(NULL, ?)", (old["raw"],)).fetchone()
    assert read == chunk.decode()


def test_the_writer_stores_compressed_plain_and_not_utf8_rows(tmp_path: Path) -> None:
    chunk = 'event: delta\ndata: {"v": "caf\xe9"}\n\n' * 40
    bad = b"data: \xff\xfe\n\n" * 40
    writer = Writer(tmp_path / "c.db")
    writer.put(EventRow("f", 0, 1.0, "sse", 40, chunk))
    writer.put(EventRow("f", 1, 1.0, "sse", 1, "data: [DONE]\n\n"))
    writer.put(EventRow("f", 2, 1.0, "sse", 40, bad.decode("utf-8", "surrogateescape")))
    writer.close()
    db = open_readonly(tmp_path / "c.db")
    rows = list(iter_events(db, "f"))
    assert [event_bytes(r) for r in rows] == [chunk.encode(), b"data: [DONE]\n\n", bad]
    assert [r.data is None for r in rows] == [True, False, True]
    assert [event_is_utf8(r) for r in rows] == [True, True, False]
    texts = db.execute("SELECT convtap_event(data, raw) FROM events ORDER BY seq").fetchall()
    assert [t for (t,) in texts] == [event_text(r) for r in rows]
    db.conn.close()


def test_a_message_row_is_stored_without_its_text_and_read_whole(tmp_path: Path) -> None:
    message = {"id": "m1", "author": {"role": "assistant"},
               "content": {"content_type": "text", "parts": ["hello there"]}}  # fmt: skip
    without = message_without_text(message)
    writer = Writer(tmp_path / "c.db")
    writer.put(MessageRow("m1", "c", "t", "assistant", None, "all", None, "text", None,
                          "hello there", dumps(without), 1.0, 1.0, 1))  # fmt: skip
    writer.close()
    db = open_readonly(tmp_path / "c.db")
    (row,) = [r for source, r in iter_shape_rows(db) if source == "message"]
    assert "hello" not in row["json"] and message_value(MessageRow.read(row)) == message
    (whole,) = db.execute("SELECT convtap_message(json, text, json_without_text) FROM messages")
    assert json.loads(whole[0]) == message
    hits = db.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'hello'")
    assert len(hits.fetchall()) == 1  # the full-text index reads `text`
    db.conn.close()


def test_sql_reads_a_message_row_changed_by_hand_as_it_is() -> None:
    """A row whose JSON is no JSON any more: SQL's `convtap_message` gives it as it is, so that
    one bad row does not fail a whole query (it raised ValueError)."""
    assert message_json_text("{not json", "text", 1) == "{not json"
    assert json.loads(message_json_text("[1, 2]", "text", 1) or "") == [1, 2]


def test_sql_reads_a_message_holding_an_escaped_lone_surrogate() -> None:
    """JSON may escape a lone surrogate, UTF-8 cannot carry one: it stays an escape (SQLite
    refused the text and the whole query failed)."""
    row = '{"content": {"parts": [""]}, "x": "\\ud800"}'
    whole = message_json_text(row, "hi", 1)
    assert whole is not None and "\\ud800" in whole
    conn = sqlite3.connect(":memory:")
    add_sql_functions(conn)
    (got,) = conn.execute("SELECT convtap_message(?, 'hi', 1)", (row,)).fetchone()
    assert json.loads(got) == {"content": {"parts": ["hi"]}, "x": "\ud800"}


def test_a_recorded_message_keeps_its_text_once(tmp_path: Path) -> None:
    """Recorded from a stream: the row's JSON holds no text, and reads back as decoded."""
    from tests.redact.test_canary import record_stream
    from tests.seeds import SSE

    body = (SSE / "plain_answer.sse").read_bytes()
    db = tmp_path / "r.db"
    record_stream(db, "/backend-api/f/conversation", b"{}", body, 512)
    capture = open_readonly(db)
    rows = [r for source, r in iter_shape_rows(capture) if source == "message"]
    capture.conn.close()
    assert rows and any(r["json_without_text"] == 1 for r in rows)
    for row in rows:
        value = message_value(MessageRow.read(row))
        assert message_text(value) == row["text"]
        if row["json_without_text"]:
            assert message_text(json.loads(row["json"])) == ""


# -- schema 4 ---------------------------------------------------------------------------------

BIG = 'event: delta\ndata: {"v": " and on"}\n\n' * 50
NOT_UTF8 = b"data: caf\xe9 \xff\n\n"
MESSAGES = [
    ("m1", {"id": "m1", "content": {"content_type": "text", "parts": ["one text"]}}, "one text"),
    ("m2", {"id": "m2", "content": {"content_type": "code", "text": "x = 1"}}, "x = 1"),
    ("m3", {"id": "m3", "content": {"parts": ["a", "b"]}}, "ab"),  # several parts: whole
    ("m4", {"id": "m4", "content": {"parts": ["sk-<redacted>"]}}, "<redacted:x>"),  # apart
]


def schema4_capture(path: Path) -> Path:
    """A capture as convtap of schema 4 wrote it: each text in `text` and in `json`, raw events
    as text, bytes that are not UTF-8 in `raw` beside their U+FFFD text."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size=8192")
    db = sqlite_utils.Database(conn)
    for migrate in MIGRATIONS[:4]:
        migrate(db)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '4')")
    conn.execute("PRAGMA application_id=1668247158")
    conn.execute("INSERT INTO flows (id, kind, method, url, status, response_headers, "
                 "started_at, ended_at, outcome) VALUES ('f', 'conversation', 'POST', "
                 "'https://x/backend-api/f/conversation', 200, ?, 1.0, 2.0, 'complete')",
                 [json.dumps([["content-type", "text/event-stream"]])])  # fmt: skip
    events = [(0, BIG, None), (1, "data: [DONE]\n\n", None),
              (2, NOT_UTF8.decode("utf-8", "replace"), NOT_UTF8)]  # fmt: skip
    conn.executemany("INSERT INTO events (flow_id, seq, at, event, count, data, raw) "
                     "VALUES ('f', ?, 1.0, 'sse', 1, ?, ?)", events)  # fmt: skip
    conn.executemany("INSERT INTO messages (id, turn_id, json, text, first_seen_at) "
                     "VALUES (?, 'f', ?, ?, 1.0)",
                     [(i, dumps(m), text) for i, m, text in MESSAGES])  # fmt: skip
    conn.commit()
    conn.close()
    return path


def reads(path: Path, db: sqlite_utils.Database) -> tuple[list[bytes], list[str], list[Any]]:
    events = list(iter_events(db, "f"))
    messages = sorted((r for s, r in iter_shape_rows(db) if s == "message"), key=lambda r: r["id"])
    return ([event_bytes(e) for e in events], [event_text(e) for e in events],
            [message_value(MessageRow.read(m)) for m in messages])  # fmt: skip


def test_a_schema_4_capture_is_read_as_it_is_and_migrated_in_place(tmp_path: Path) -> None:
    path = schema4_capture(tmp_path / "old.db")
    before = path.read_bytes()
    expected = (
        [BIG.encode(), b"data: [DONE]\n\n", NOT_UTF8],
        [BIG, "data: [DONE]\n\n", NOT_UTF8.decode("utf-8", "replace")],
        [m for _, m, _ in MESSAGES],
    )
    old = open_readonly(path)
    assert reads(path, old) == expected
    old.conn.close()
    for command in (
        ["calls", "--db"],
        ["export", "--output", str(tmp_path / "x.har"), "--db"],
        ["report", "--output", str(tmp_path / "r.html"), "--db"],
        ["diff", "--against-schemas"],
    ):
        ran = convtap(*command, str(path))
        assert ran.returncode == 0, ran.stderr
    assert path.read_bytes() == before  # read-only commands leave it as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.db", "r.html", "x.har"]
    har = json.loads((tmp_path / "x.har").read_text())["log"]["entries"][0]["response"]
    assert har["content"]["encoding"] == "base64"  # the bytes that are not UTF-8, as they came

    migrated = connect(path, create=False)
    assert migrated.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    assert reads(path, migrated) == expected
    stored_as = migrated.execute("SELECT seq, data IS NULL FROM events ORDER BY seq").fetchall()
    assert stored_as == [
        (0, 1),
        (1, 0),
        (2, 0),
    ]  # the large row compressed, the others as they were
    once = dict(migrated.execute("SELECT id, json_without_text FROM messages").fetchall())
    assert once == {"m1": 1, "m2": 1, "m3": None, "m4": None}
    migrated.conn.close()


def test_a_capture_older_than_schema_4_is_reported_as_it_is(tmp_path: Path) -> None:
    """Its events have no `raw` column: the report's SQL reads their `data` as the text."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    db = sqlite_utils.Database(conn)
    for migrate in MIGRATIONS[:2]:
        migrate(db)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    conn.execute("INSERT INTO flows (id, kind, started_at, ended_at) "
                 "VALUES ('r', 'responses', 1.0, 2.0)")  # fmt: skip
    usage = {"type": "response.completed", "response": {"usage": {"input_tokens": 1234}}}
    event = f"data: {json.dumps(usage)}\n\n"
    conn.execute("INSERT INTO events (flow_id, seq, at, event, count, data) "
                 "VALUES ('r', 0, 1.5, 'sse', 1, ?)", [event])  # fmt: skip
    conn.commit()
    conn.close()
    before = path.read_bytes()
    ran = convtap("report", "--db", str(path), "--output", str(tmp_path / "r.html"))
    assert ran.returncode == 0, ran.stderr
    assert "1,234 input tokens" in (tmp_path / "r.html").read_text()
    assert path.read_bytes() == before


def test_an_integer_past_64_bits_in_a_stored_message_reads_back_exact() -> None:
    """orjson reads such an integer as a float; a message read back from the store keeps it."""
    message = {"id": "m", "author": {"role": "assistant"}, "metadata": {"n": 2**70 + 1},
               "content": {"content_type": "text", "parts": ["hi"]}}  # fmt: skip
    without = message_without_text(message)
    assert without is not None
    row = {"json": dumps(without), "text": "hi", "json_without_text": 1}
    assert message_value(MessageRow.read(row))["metadata"]["n"] == 2**70 + 1
