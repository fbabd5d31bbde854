"""convtap.record.store: schema, migrations, file mode, the writer, the shipped canned queries."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from convtap.record.store import (
    DATASETTE,
    PAGE_SIZE,
    SCHEMA_VERSION,
    StoreError,
    Writer,
    connect,
)

from tests.harness import small_tmpfs

ROOT = Path(__file__).resolve().parents[2]


def test_new_database_is_private_versioned_and_in_wal(tmp_path: Path) -> None:
    db = connect(tmp_path / "sub" / "c.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(
        SCHEMA_VERSION
    )
    assert (tmp_path / "sub" / "c.db").stat().st_mode & 0o777 == 0o600
    assert {"flows", "events", "turns", "messages", "tool_calls", "tool_returns", "findings",
            "tool_signatures", "conversation_nodes", "call_ledger"} <= set(
        db.table_names() + db.view_names())  # fmt: skip
    db.conn.close()
    connect(tmp_path / "sub" / "c.db").conn.close()  # opening again migrates nothing


def test_newer_schema_and_foreign_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    db = connect(path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    db.conn.commit()
    db.conn.close()
    with pytest.raises(StoreError, match="schema"):
        connect(path)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE x (a)")
    with pytest.raises(StoreError, match="not a convtap capture"):
        connect(other, create=False)
    text = tmp_path / "text.db"
    text.write_text("not sqlite at all, long enough to be read as a header" * 10)
    with pytest.raises(StoreError):
        connect(text, create=False)


def test_writer_upserts_keep_first_seen_columns_and_pairs_returns(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "c.db")
    writer.put("upsert", "tool_returns", {"id": "r1", "parent_message_id": "call-1",
                                          "returned_at": 2.0})  # fmt: skip
    writer.put("upsert", "tool_calls", {"call_id": "call-1", "turn_id": "t1", "called_at": 1.0,
                                        "complete": 0})  # fmt: skip
    writer.put("upsert", "tool_calls", {"call_id": "call-1", "turn_id": "t2", "called_at": 5.0,
                                        "complete": 1})  # fmt: skip
    writer.put("insert", "events", {"flow_id": "f", "seq": 0, "data": "a"})
    writer.put("insert", "events", {"flow_id": "f", "seq": 0, "data": "b"})
    writer.flush()
    db = writer.db
    assert db.execute("SELECT turn_id, called_at, complete FROM tool_calls").fetchall() == [
        ("t1", 1.0, 1)
    ]
    assert db.execute("SELECT call_id FROM tool_returns").fetchall() == [("call-1",)]
    assert db.execute("SELECT data FROM events").fetchall() == [("a",)]
    writer.close()


def test_a_bad_row_loses_only_itself(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "c.db")
    writer.put("insert", "events", {"flow_id": "f", "seq": 0, "data": "kept"})
    writer.put("insert", "events", {"flow_id": "f", "no_such_column": 1})
    writer.put("insert", "events", {"flow_id": "f", "seq": 1, "data": "kept too"})
    writer.flush()
    assert writer.db.execute("SELECT count(*) FROM events").fetchone()[0] == 2
    assert writer.failures
    writer.close()


def test_canned_queries_run_on_a_capture(tmp_path: Path) -> None:
    metadata = json.loads(DATASETTE.read_text())
    queries = metadata["databases"]["capture"]["queries"]
    assert {"open_calls", "returns_per_client", "findings_by_rule"} <= set(queries)
    db = connect(tmp_path / "capture.db")
    for query in queries.values():
        params = {"q": "alefita"} if ":q" in query["sql"] else {}
        db.execute(query["sql"], params).fetchall()  # raises on a broken query
    db.conn.close()


def test_a_new_capture_has_large_pages_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    new = connect(tmp_path / "new.db")
    assert new.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE == 16384
    new.conn.close()
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.execute("PRAGMA page_size=4096")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    conn.commit()
    conn.close()
    db = connect(old)
    assert db.execute("PRAGMA page_size").fetchone()[0] == 4096
    db.conn.close()


def test_a_full_temporary_directory_does_not_stop_the_writer(tmp_path: Path) -> None:
    """SQLite puts a statement journal in its temporary directory; the writer keeps it in
    memory, so a full /var/tmp (here SQLITE_TMPDIR on a full 1 MB tmpfs) loses nothing."""
    with small_tmpfs(tmp_path / "full", "1m") as full:
        with contextlib.suppress(OSError), (full / "fill").open("wb") as fill:
            while True:
                fill.write(b"\0" * 65536)
        script = (
            "import sys; from convtap.record.store import Writer\n"
            "w = Writer(sys.argv[1])\n"
            "for n in range(40):\n"
            "    w.put('upsert', 'messages', {'id': f'm{n}', 'text': 'x' * 100_000,"
            " 'json': '{}', 'first_seen_at': 1.0, 'updated_at': 1.0})\n"
            "w.flush()\n"
            "w.close()\n"
        )
        db = tmp_path / "c.db"
        env = {**os.environ, "SQLITE_TMPDIR": str(full)}
        done = subprocess.run([sys.executable, "-c", script, str(db)], env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        with contextlib.closing(sqlite3.connect(db)) as conn:
            stored = conn.execute("SELECT count(*), sum(length(text)) FROM messages").fetchone()
        assert stored == (40, 4_000_000)
