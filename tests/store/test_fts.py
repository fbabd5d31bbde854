"""The full-text index of message text catches up when the writer is idle or closes: it then
matches the messages exactly (FTS5's own integrity check against the table), through inserts,
updates, deletes, `convtap reprocess` and the migration of a schema-1 capture."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from convtap.store.database import Writer, connect
from convtap.store.rows import MessageRow
from convtap.store.schema import SCHEMA_VERSION

from tests.runner import convtap
from tests.seeds import call_and_return_har


def matches(db: Path, word: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute(
            "SELECT m.id FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid "
            "WHERE messages_fts MATCH ? ORDER BY m.id", (word,))]  # fmt: skip


def consistent(db: Path) -> bool:
    """FTS5's integrity check, comparing the index with the messages table (rank 1)."""
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
        pending = conn.execute("SELECT count(*) FROM messages_fts_pending").fetchone()[0]
    return pending == 0


def message(id: str, text: str) -> MessageRow:
    return MessageRow(id=id, conversation_id="c", turn_id="t", role="assistant", name=None,
                      recipient=None, channel=None, content_type=None, status=None, text=text,
                      json="{}", first_seen_at=1.0, updated_at=1.0)  # fmt: skip


def test_the_index_follows_inserts_updates_and_deletes(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    writer = Writer(db)
    writer.put(message("m1", "alpha streaming"))
    writer.put(message("m2", "gamma"))
    writer.flush()
    assert matches(db, "alpha") == []  # written, not indexed yet: the recorder was busy
    writer.index()
    assert matches(db, "alpha") == ["m1"] and consistent(db)

    # updated twice (and one row inserted and updated) before the next catch-up
    writer.put(message("m1", "beta partial"))
    writer.put(message("m1", "beta final"))
    writer.put(message("m3", "delta"))
    writer.put(message("m3", "epsilon"))
    writer.flush()
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM messages WHERE id = 'm2'")
    writer.close()  # closing catches up too
    assert matches(db, "alpha") == [] and matches(db, "partial") == []
    assert matches(db, "final") == ["m1"] and matches(db, "epsilon") == ["m3"]
    assert matches(db, "gamma") == [] and matches(db, "delta") == []
    assert consistent(db)


def test_imports_and_reprocess_leave_the_index_complete(tmp_path: Path) -> None:
    har, db = tmp_path / "s.har", tmp_path / "c.db"
    har.write_text(json.dumps(call_and_return_har()))
    assert convtap("import", str(har), "--db", str(db)).returncode == 0
    found = matches(db, "ferramenta")
    assert found and consistent(db)
    assert convtap("reprocess", "--db", str(db)).returncode == 0
    assert matches(db, "ferramenta") == found and consistent(db)


def test_a_schema_1_capture_is_migrated_with_its_index(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    writer = Writer(db)
    writer.put(message("m1", "kept from before"))
    writer.close()
    with sqlite3.connect(db) as conn:  # back to schema 1: index kept by triggers, no queue
        conn.executescript("""
            DROP TRIGGER messages_fts_ai; DROP TRIGGER messages_fts_au;
            DROP TRIGGER messages_fts_ad;
            DROP TABLE messages_fts_pending;
            CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
              INSERT INTO messages_fts (rowid, text) VALUES (new.rowid, new.text); END;
            UPDATE meta SET value = '1' WHERE key = 'schema_version';
        """)
    connect(db).conn.close()
    with sqlite3.connect(db) as conn:
        triggers = {
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        }
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert (
        "messages_ai" not in triggers
        and "messages_fts_ai" in triggers
        and version == (str(SCHEMA_VERSION),)
    )
    writer = Writer(db)
    writer.put(message("m2", "added after"))
    writer.close()
    assert matches(db, "kept") == ["m1"] and matches(db, "added") == ["m2"] and consistent(db)


def test_the_index_catches_up_a_slice_at_a_time(tmp_path: Path) -> None:
    """A slice indexes the first rows waiting and leaves the rest waiting (the recorder takes
    the journal between slices); the slices together make the whole index."""
    db = tmp_path / "c.db"
    writer = Writer(db)
    for n in range(5):
        writer.put(message(f"m{n}", f"word{n} common"))
    writer.flush()
    assert writer.index(limit=2) is True
    assert matches(db, "common") == ["m0", "m1"]
    writer.put(message("m0", "changed common"))  # noted again once indexed: its old text goes
    writer.flush()
    assert writer.index(limit=2) is True
    assert writer.index(limit=2) is False
    assert matches(db, "common") == [f"m{n}" for n in range(5)] and matches(db, "word0") == []
    assert writer.index(limit=2) is False and consistent(db)
    writer.close()


def test_the_recorder_indexes_only_once_it_has_been_idle(tmp_path: Path) -> None:
    """During a recording the index waits for the journal to have been empty a while (never
    during a burst), then catches up, a slice at a time; stopping catches up the rest."""
    from convtap.journal.segments import JournalWriter, journal_dir
    from convtap.record import consumer as recording

    db = tmp_path / "c.db"
    journal = JournalWriter(journal_dir(db))  # open: the proxy is there
    writer = Writer(db)
    for n in range(5):
        writer.put(message(f"m{n}", "quiet"))
    writer.flush()
    seen: list[list[str]] = []  # what a search found at each look at the proxy

    def proxy_gone(timeout: float) -> bool:
        seen.append(matches(db, "quiet"))
        time.sleep(timeout)
        return len(seen) >= 30  # 30 looks of 20 ms or more: past INDEX_AFTER

    consumer = recording.JournalConsumer(str(db), redact=True, echo="off", writer=writer)
    original = recording.INDEX_AFTER, recording.INDEX_SLICE
    recording.INDEX_AFTER, recording.INDEX_SLICE = 0.3, 2
    try:
        consumer.run(proxy_gone)
    finally:
        recording.INDEX_AFTER, recording.INDEX_SLICE = original
    assert seen[0] == [] and seen[-1] == [f"m{n}" for n in range(5)] and consistent(db)
    journal.close()
    consumer.close()
