"""convtap.store.database: schema, migrations, file mode, the writer, the shipped canned queries."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from convtap.store.canned import QUERIES
from convtap.store.database import (
    PAGE_SIZE,
    SCHEMA_VERSION,
    StoreError,
    Writer,
    connect,
)
from convtap.store.rows import EventRow, FlowRow, ToolCallRow, ToolReturnRow
from convtap.wire.session import answered_call
from hypothesis import given, settings
from hypothesis import strategies as st

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
    writer.put(ToolReturnRow(
        id="r1", protocol="f-conversation", flow_id="f", conversation_id=None, message_id=None,
        tool=None, body_call_id=None, message=None, returned_at=2.0, parent_message_id="call-1",
    ))  # fmt: skip
    writer.put(call_row("call-1", turn_id="t1", called_at=1.0, complete=0))
    writer.put(call_row("call-1", turn_id="t2", called_at=5.0, complete=1))
    writer.put(EventRow("f", 0, 1.0, "sse", 1, "a"))
    writer.put(EventRow("f", 0, 1.0, "sse", 1, "b"))
    writer.flush()
    db = writer.db
    assert db.execute("SELECT turn_id, called_at, complete FROM tool_calls").fetchall() == [
        ("t1", 1.0, 1)
    ]
    assert db.execute("SELECT call_id FROM tool_returns").fetchall() == [("call-1",)]
    assert db.execute("SELECT data FROM events").fetchall() == [("a",)]
    writer.close()


def test_canned_queries_run_on_a_capture(tmp_path: Path) -> None:
    queries = QUERIES
    assert {"open_calls", "returns_per_client", "findings_by_rule"} <= set(queries)
    db = connect(tmp_path / "capture.db")
    for query in queries.values():
        params = {"q": "alefita"} if ":q" in query["sql"] else {}
        db.execute(query["sql"], params).fetchall()  # raises on a broken query
    db.conn.close()


def test_a_new_capture_has_its_page_size_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    new = connect(tmp_path / "new.db")
    assert new.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE == 4096
    new.conn.close()
    db = connect(old_capture(tmp_path / "old.db", page_size=8192))
    assert db.execute("PRAGMA page_size").fetchone()[0] == 8192
    db.conn.close()


def old_capture(path: Path, page_size: int = 4096) -> Path:
    """A capture as a convtap of schema 2 made it: no application id."""
    import sqlite_utils
    from convtap.store.schema import MIGRATIONS

    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size={page_size}")
    db = sqlite_utils.Database(conn)
    for migrate in MIGRATIONS[:2]:
        migrate(db)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    conn.commit()
    conn.close()
    return path


def test_captures_are_marked_and_another_applications_file_is_refused(tmp_path: Path) -> None:
    """A capture carries convtap's `PRAGMA application_id`, set on a new one and on one an
    earlier convtap made; another application's SQLite file with a `meta` table and a
    `schema_version` in it is refused by every command, and not a byte of it changes."""
    from convtap.store.database import APPLICATION_ID

    from tests.runner import convtap

    def application_id(path: Path) -> int:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            return int(conn.execute("PRAGMA application_id").fetchone()[0])

    new = connect(tmp_path / "new.db")
    new.conn.close()
    assert application_id(tmp_path / "new.db") == APPLICATION_ID
    old = old_capture(tmp_path / "old.db")
    assert application_id(old) == 0
    connect(old).conn.close()
    assert application_id(old) == APPLICATION_ID
    foreign = tmp_path / "notes.db"
    with contextlib.closing(sqlite3.connect(foreign)) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.commit()
    before = foreign.read_bytes()
    har = Path(__file__).resolve().parents[2] / "captures/examples/rules/handoff-missing/fail.har"
    for command in (["import", str(har)], ["audit"], ["reprocess"], ["calls"], ["report"],
                    ["export", "--output", str(tmp_path / "x.har")]):  # fmt: skip
        ran = convtap(*command, "--db", str(foreign))
        assert ran.returncode == 2 and "not a convtap capture" in ran.stderr, (command, ran.stderr)
        assert len(ran.stderr.strip().splitlines()) == 1
    assert foreign.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.db", "notes.db", "old.db"]


@pytest.mark.process
def test_a_full_temporary_directory_does_not_stop_the_writer(tmp_path: Path) -> None:
    """SQLite puts a statement journal in its temporary directory; the writer keeps it in
    memory, so a full /var/tmp (here SQLITE_TMPDIR on a full 1 MB tmpfs) loses nothing."""
    with small_tmpfs(tmp_path / "full", "1m") as full:
        with contextlib.suppress(OSError), (full / "fill").open("wb") as fill:
            while True:
                fill.write(b"\0" * 65536)
        script = (
            "import sys; from convtap.store.database import Writer\n"
            "from tests.store.test_fts import message\n"
            "w = Writer(sys.argv[1])\n"
            "for n in range(40):\n"
            "    w.put(message(f'm{n}', 'x' * 100_000))\n"
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


def call_row(call_id: str, *, turn_id: str, called_at: float, complete: int) -> ToolCallRow:
    return ToolCallRow(call_id=call_id, protocol="f-conversation", turn_id=turn_id,
                       conversation_id=None, recipient=None, kind=None, tool=None, arguments=None,
                       arguments_text=None, complete=complete, called_at=called_at)  # fmt: skip


def test_a_row_the_store_cannot_write_is_a_failure_on_its_flow(tmp_path: Path) -> None:
    """A row SQLite refuses (here an integer past 64 bits, as a hostile status line would
    give) is told on the flow it came from; the rows around it are written."""
    writer = Writer(tmp_path / "c.db")
    writer.put(FlowRow("f1", kind="conversation", started_at=1.0))
    writer.put(FlowRow("f1", status=10**30))
    writer.put(EventRow("f1", 0, 1.0, "sse", 1, "kept"))
    writer.put(call_row("call-1", turn_id="f2", called_at=1.0, complete={"not": "bindable"}))  # type: ignore[arg-type]
    writer.flush()
    rows = writer.db.execute("SELECT id, kind, status, failure FROM flows ORDER BY id").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [("f1", "conversation", None), ("f2", None, None)]
    assert "a flows row could not be stored: OverflowError" in rows[0][3]
    assert "a tool_calls row could not be stored" in rows[1][3]
    assert writer.db.execute("SELECT data FROM events").fetchall() == [("kept",)]
    assert len(writer.failures) == 2


def test_every_table_has_one_row_type_that_matches_it() -> None:
    from dataclasses import dataclass

    from convtap.store.rows import ROW_TYPES, Row, check_against_schema
    from convtap.store.schema import TABLES

    assert sorted(t.TABLE for t in ROW_TYPES) == sorted(TABLES)

    @dataclass(frozen=True, slots=True)
    class Misspelt(Row):
        TABLE = "events"
        flow_id: str
        seq: int
        at: float
        evnet: str
        count: int
        data: str
        raw: bytes | None

    with pytest.raises(TypeError, match="missing \\['event'\\], unknown \\['evnet'\\]"):
        check_against_schema(Misspelt)


ids = st.sampled_from(["c1", "c2", "c3"]) | st.none()


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from(["c1", "c2", "c3"])), st.lists(st.tuples(ids, ids), max_size=6))
def test_the_store_pairs_a_return_as_the_pairing_function_does(
    calls: set[str], returns: list[tuple[str | None, str | None]]
) -> None:
    """The store's SQL (`LINK`) and `answered_call` are one rule: whatever calls are recorded
    and whatever a return's parent and body name, they pick the same call."""
    with tempfile.TemporaryDirectory() as folder:
        writer = Writer(Path(folder) / "c.db")
        for call_id in sorted(calls):
            writer.put(call_row(call_id, turn_id="t", called_at=1.0, complete=1))
        for n, (parent, body_call_id) in enumerate(returns):
            writer.put(ToolReturnRow(
                id=f"r{n}", protocol="f-conversation", flow_id="f", conversation_id=None,
                message_id=None, tool=None, body_call_id=body_call_id, message=None,
                returned_at=2.0, parent_message_id=parent,
            ))  # fmt: skip
        writer.flush()
        stored = dict(writer.db.execute("SELECT id, call_id FROM tool_returns").fetchall())
        writer.close()
    known = {call_id: call_id for call_id in calls}
    assert stored == {
        f"r{n}": answered_call(parent, body, known) for n, (parent, body) in enumerate(returns)
    }


@pytest.mark.process
def test_the_canned_queries_cover_both_protocols(tmp_path: Path) -> None:
    """`open_calls` lists an unanswered Responses call too (it counted local calls only), and
    `returns_per_client` names the client of Responses outputs (it said "(unknown)")."""
    from tests.runner import convtap

    db = tmp_path / "demo.db"
    assert convtap("demo", "--db", str(db)).returncode == 0
    queries = QUERIES
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        open_calls = [dict(r) for r in conn.execute(queries["open_calls"]["sql"])]
        per_client = [dict(r) for r in conn.execute(queries["returns_per_client"]["sql"])]
    assert [(c["protocol"], c["tool"]) for c in open_calls] == [("responses", "get_weather")]
    assert {(r["client"].split("/")[0], r["protocol"]) for r in per_client} == {
        ("convtap-refclient", "f-conversation"), ("convtap-refclient", "responses")}  # fmt: skip
