"""The capture database's schema: its tables, views, indexes and full-text index, and the
migrations that bring a database made by an earlier convtap up to date (`store` runs them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlite_utils

from convtap.store.compact import event_columns, message_without_text
from convtap.vocab import Outcome, WireProtocol, sql
from convtap.wire.jsonvalue import dumps, loads_or_none
from convtap.wire.turn import message_text

SCHEMA_VERSION = 6

# -- tables --------------------------------------------------------------------------------------

TABLES: dict[str, tuple[dict[str, type], str | tuple[str, ...]]] = {
    "flows": (
        {
            "id": str,
            "kind": str,
            "method": str,
            "url": str,
            "host": str,
            "path": str,
            "status": int,
            "client": str,
            "request_headers": str,
            "request_body": str,
            "response_headers": str,
            "response_body": str,
            "conversation_id": str,
            "turn_id": str,
            "started_at": float,
            "ended_at": float,
            "outcome": str,
            "source": str,
            "failure": str,
        },
        "id",
    ),
    "events": (
        {
            "flow_id": str,
            "seq": int,
            "at": float,
            "event": str,
            "count": int,
            "data": str,
            "raw": bytes,
        },
        ("flow_id", "seq"),
    ),
    "turns": (
        {
            "id": str,
            "conversation_id": str,
            "parent_message_id": str,
            "model": str,
            "client": str,
            "challenge": str,
            "execution_target": str,
            "message_ids": str,
            "encoding": str,
            "done": int,
            "stream_complete": int,
            "truncated": int,
            "event_count": int,
            "legs": int,
            "ws_topic": str,
            "errors": str,
            "started_at": float,
            "ended_at": float,
        },
        "id",
    ),
    "tool_signatures": ({"turn_id": str, "name": str, "signature": str}, ("turn_id", "name")),
    "messages": (
        {
            "id": str,
            "conversation_id": str,
            "turn_id": str,
            "role": str,
            "name": str,
            "recipient": str,
            "channel": str,
            "content_type": str,
            "status": str,
            "text": str,
            "json": str,
            "first_seen_at": float,
            "updated_at": float,
            "json_without_text": int,  # schema 5: 1 when `text` was taken out of `json`
        },
        "id",
    ),
    "tool_calls": (
        {
            "call_id": str,
            "protocol": str,
            "turn_id": str,
            "conversation_id": str,
            "recipient": str,
            "kind": str,
            "tool": str,
            "arguments": str,
            "arguments_text": str,
            "complete": int,
            "called_at": float,
            "item_id": str,  # Responses API: the call item's own id (fc_...)
            "namespace": str,  # Responses API: the namespace tool the called function is in
        },
        "call_id",
    ),
    "tool_returns": (
        {
            "id": str,
            "protocol": str,
            "flow_id": str,
            "conversation_id": str,
            "parent_message_id": str,
            "message_id": str,
            "tool": str,
            "body_call_id": str,
            "body_tool": str,
            "message": str,
            "returned_at": float,
            "call_id": str,
        },
        "id",
    ),
    "conversation_nodes": (
        {
            "conversation_id": str,
            "node_id": str,
            "message_id": str,
            "role": str,
            "flow_id": str,
            "seen_at": float,
        },
        ("conversation_id", "node_id"),
    ),
    "findings": (
        {
            "id": int,
            "rule": str,
            "severity": str,
            "conversation_id": str,
            "call_id": str,
            "return_id": str,
            "flow_id": str,
            "message": str,
            "evidence": str,
            "created_at": float,
        },
        "id",
    ),
    # schema 6: what each Responses API answer used and cost (`convtap.telemetry.cost`)
    "usage": (
        {
            "flow_id": str,
            "response_id": str,
            "model": str,
            "service_tier": str,
            "finish_reason": str,
            "input_tokens": int,
            "cached_tokens": int,
            "output_tokens": int,
            "reasoning_tokens": int,
            "cost_usd": float,
            "pricing": str,
            "answered_at": float,
        },
        "flow_id",
    ),
}

# Tables a later schema added, by the schema that did: a capture of an earlier one is read
# without them (`store.check`).
ADDED_IN = {"usage": 6}

# Columns an upsert never overwrites: where and when a thing was first seen.
KEEP_ON_UPDATE = {
    "messages": {"turn_id", "first_seen_at"},
    "tool_calls": {"turn_id", "called_at"},
    "flows": {"started_at"},
    "turns": {"started_at"},
}

_RESPONSES, _COMPLETE = sql(WireProtocol.RESPONSES), sql(Outcome.COMPLETE)
CALL_LEDGER = f"""
CREATE VIEW IF NOT EXISTS call_ledger AS
SELECT c.call_id, c.protocol, c.tool, c.namespace, c.kind, c.recipient, c.conversation_id,
       c.turn_id, c.called_at, c.complete, coalesce(r.message_id, r.id) AS return_id, r.returned_at,
       r.id IS NOT NULL AS answered,
       r.id IS NOT NULL AND (t.stream_complete = 1 OR EXISTS (
           SELECT 1 FROM conversation_nodes n
           WHERE n.conversation_id = r.conversation_id AND n.node_id = r.message_id)
           OR (r.protocol = {_RESPONSES} AND a.status = 200 AND a.outcome = {_COMPLETE}))
           AS accepted,
       r.id IS NOT NULL AND (EXISTS (
           SELECT 1 FROM messages m WHERE m.turn_id = r.flow_id AND m.role = 'assistant')
           OR (r.protocol = {_RESPONSES} AND a.status = 200 AND a.outcome = {_COMPLETE}))
           AS continued,
       (SELECT count(*) FROM findings f WHERE f.call_id = c.call_id) AS findings
FROM tool_calls c
LEFT JOIN tool_returns r ON r.id = (
    SELECT id FROM tool_returns WHERE call_id = c.call_id ORDER BY returned_at, id LIMIT 1)
LEFT JOIN turns t ON t.id = r.flow_id
LEFT JOIN flows a ON a.id = r.flow_id AND r.protocol = {_RESPONSES}
"""

INDEXES = [
    ("tool_returns", ["call_id"]),
    ("tool_returns", ["parent_message_id"]),
    ("tool_returns", ["body_call_id"]),
    ("messages", ["turn_id"]),
    ("messages", ["conversation_id"]),
    ("findings", ["call_id"]),
    ("findings", ["rule"]),
    ("flows", ["conversation_id"]),
]

# Pair returns with calls: by the request's parent_message_id first, else by the call_id the
# return's body names: `convtap.wire.session.answered_call` in SQL (a test holds them equal).
# A finding on a first turn's request is made before the server names the conversation (in the
# stream that answers it): it goes to the conversation the server assigned to that turn.
FINDING_CONVERSATION = """UPDATE findings SET conversation_id =
    (SELECT t.conversation_id FROM turns t WHERE t.id = findings.flow_id)
    WHERE conversation_id IS NULL AND EXISTS
    (SELECT 1 FROM turns t WHERE t.id = findings.flow_id AND t.conversation_id IS NOT NULL)"""
LINK = [
    FINDING_CONVERSATION,
    """UPDATE tool_returns SET call_id = parent_message_id
       WHERE call_id IS NULL AND parent_message_id IN (SELECT call_id FROM tool_calls)""",
    """UPDATE tool_returns SET call_id = body_call_id
       WHERE call_id IS NULL AND body_call_id IN (SELECT call_id FROM tool_calls)""",
]


# Full-text search on message text (what sqlite-utils' enable_fts makes), as plain statements so
# that the whole schema is made in one transaction.
FTS = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS [messages_fts] USING FTS5 ([text], content=[messages])",
    """CREATE TRIGGER IF NOT EXISTS [messages_ai] AFTER INSERT ON [messages] BEGIN
       INSERT INTO [messages_fts] (rowid, [text]) VALUES (new.rowid, new.[text]); END""",
    """CREATE TRIGGER IF NOT EXISTS [messages_ad] AFTER DELETE ON [messages] BEGIN
       INSERT INTO [messages_fts] ([messages_fts], rowid, [text])
       VALUES ('delete', old.rowid, old.[text]); END""",
    """CREATE TRIGGER IF NOT EXISTS [messages_au] AFTER UPDATE ON [messages] BEGIN
       INSERT INTO [messages_fts] ([messages_fts], rowid, [text])
       VALUES ('delete', old.rowid, old.[text]);
       INSERT INTO [messages_fts] (rowid, [text]) VALUES (new.rowid, new.[text]); END""",
]


def _migrate_to_1(db: sqlite_utils.Database) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
    for name, (columns, pk) in TABLES.items():
        db[name].create(columns, pk=pk, if_not_exists=True)  # type: ignore[union-attr]
    for table, indexed in INDEXES:
        db[table].create_index(indexed, if_not_exists=True)  # type: ignore[union-attr]
    for statement in FTS:
        db.execute(statement)
    db.execute(CALL_LEDGER)


# The full-text index catches up later (schema 2): tokenizing every message as it is written
# took 40 % of the recorder's time, and a streamed message is written several times. The
# triggers only note which rows changed (with the text the index holds for them, which a
# `'delete'` needs; the first note of a row since the last catch-up is the one kept, and it is
# kept with NOT EXISTS, since an upsert's conflict handling overrides a trigger's OR IGNORE);
# `index_text` brings the index up to date when a writer closes, and, a slice at a time, when the
# recorder has had nothing to record for a while (`record.consumer`): never during a burst.
FTS_PENDING = [
    "DROP TRIGGER IF EXISTS [messages_ai]",
    "DROP TRIGGER IF EXISTS [messages_ad]",
    "DROP TRIGGER IF EXISTS [messages_au]",
    """CREATE TABLE IF NOT EXISTS [messages_fts_pending] (
       rowid INTEGER PRIMARY KEY, indexed INTEGER NOT NULL, old_text TEXT)""",
    """CREATE TRIGGER IF NOT EXISTS [messages_fts_ai] AFTER INSERT ON [messages] BEGIN
       INSERT INTO [messages_fts_pending] SELECT new.rowid, 0, NULL
       WHERE NOT EXISTS (SELECT 1 FROM [messages_fts_pending] WHERE rowid = new.rowid); END""",
    """CREATE TRIGGER IF NOT EXISTS [messages_fts_au] AFTER UPDATE OF [text] ON [messages]
       WHEN old.[text] IS NOT new.[text] BEGIN
       INSERT INTO [messages_fts_pending] SELECT old.rowid, 1, old.[text]
       WHERE NOT EXISTS (SELECT 1 FROM [messages_fts_pending] WHERE rowid = old.rowid); END""",
    """CREATE TRIGGER IF NOT EXISTS [messages_fts_ad] AFTER DELETE ON [messages] BEGIN
       INSERT INTO [messages_fts_pending] SELECT old.rowid, 1, old.[text]
       WHERE NOT EXISTS (SELECT 1 FROM [messages_fts_pending] WHERE rowid = old.rowid); END""",
]
INDEX_TEXT = [
    """INSERT INTO [messages_fts] ([messages_fts], rowid, [text])
       SELECT 'delete', rowid, old_text FROM [messages_fts_pending] WHERE indexed""",
    """INSERT INTO [messages_fts] (rowid, [text]) SELECT m.rowid, m.[text]
       FROM [messages_fts_pending] p JOIN [messages] m ON m.rowid = p.rowid""",
    "DELETE FROM [messages_fts_pending]",
]
# The same for the first `?` rows noted (by rowid, below the bound `?`): a slice of the catch-up,
# so that a recorder that has been idle a while indexes a step at a time and takes a new burst
# of the journal between steps.
INDEX_BELOW = "SELECT rowid FROM [messages_fts_pending] ORDER BY rowid LIMIT 1 OFFSET ?"
INDEX_SLICE = [
    """INSERT INTO [messages_fts] ([messages_fts], rowid, [text])
       SELECT 'delete', rowid, old_text FROM [messages_fts_pending] WHERE indexed AND rowid < ?""",
    """INSERT INTO [messages_fts] (rowid, [text]) SELECT m.rowid, m.[text]
       FROM [messages_fts_pending] p JOIN [messages] m ON m.rowid = p.rowid WHERE p.rowid < ?""",
    "DELETE FROM [messages_fts_pending] WHERE rowid < ?",
]


def _migrate_to_2(db: sqlite_utils.Database) -> None:
    for statement in FTS_PENDING:
        db.execute(statement)


def _migrate_to_3(db: sqlite_utils.Database) -> None:
    """A call's namespace (Responses API namespace tools), in its row and in the ledger; the
    findings still to be placed in a conversation, indexed (`FINDING_CONVERSATION` runs with
    every commit, and must not read every finding)."""
    if not db["tool_calls"].exists():
        return  # not made by migration 1 (a test's bare database): nothing to add to
    db.execute("""CREATE INDEX IF NOT EXISTS findings_unplaced ON findings (flow_id)
                  WHERE conversation_id IS NULL""")
    if "namespace" not in db["tool_calls"].columns_dict:
        db.execute("ALTER TABLE tool_calls ADD COLUMN namespace TEXT")
    db.execute("DROP VIEW IF EXISTS call_ledger")
    db.execute(CALL_LEDGER)


def _migrate_to_4(db: sqlite_utils.Database) -> None:
    """A raw event's bytes when they are not UTF-8 (`data` holds them as U+FFFD): raw events
    byte for byte."""
    if db["events"].exists() and "raw" not in db["events"].columns_dict:
        db.execute("ALTER TABLE events ADD COLUMN raw BLOB")


def _migrate_to_5(db: sqlite_utils.Database) -> None:
    """Each text once, raw events compressed (`store.compact`): the messages' and the events'
    rows an earlier convtap wrote are rewritten so, a thousand at a time; what each reads as
    through the accessors is what it read as before."""
    if db["messages"].exists() and "json_without_text" not in db["messages"].columns_dict:
        db.execute("ALTER TABLE messages ADD COLUMN json_without_text INTEGER")
    if db["messages"].exists():
        _rewrite(db, "messages", "json, text", _message_once)
    if db["events"].exists():
        _rewrite(db, "events", "data, raw", _event_compressed)


def _rewrite(
    db: sqlite_utils.Database,
    table: str,
    columns: str,
    rewrite: Callable[[tuple[Any, ...]], tuple[str, tuple[Any, ...]] | None],
) -> None:
    last = 0
    while rows := db.execute(f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? "
                             "ORDER BY rowid LIMIT 1000", [last]).fetchall():  # fmt: skip
        for rowid, *values in rows:
            change = rewrite(tuple(values))
            if change is not None:
                db.execute(f"UPDATE {table} SET {change[0]} WHERE rowid = ?", [*change[1], rowid])
        last = rows[-1][0]


def _message_once(values: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]] | None:
    json_text, text = values
    message = loads_or_none(json_text)
    if not isinstance(message, dict) or message_text(message) != text:
        return None  # its text was redacted apart from its JSON: kept whole
    without = message_without_text(message)
    if without is None:
        return None
    return "json = ?, json_without_text = 1", (dumps(without),)


def _event_compressed(values: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]] | None:
    data, raw = values
    if data is None:
        return None
    exact = raw if isinstance(raw, bytes) else str(data).encode("utf-8", "surrogateescape")
    new_data, new_raw = event_columns(exact.decode("utf-8", "surrogateescape"))
    if new_data is not None:
        return None  # as it is
    return "data = NULL, raw = ?", (new_raw,)


def _migrate_to_6(db: sqlite_utils.Database) -> None:
    """What each Responses API answer used and cost (`usage`; a capture made before has none
    until `convtap reprocess` decodes it again), and the findings indexed by flow."""
    columns, pk = TABLES["usage"]
    db["usage"].create(columns, pk=pk, if_not_exists=True)  # type: ignore[union-attr]
    db["usage"].create_index(["response_id"], if_not_exists=True)  # type: ignore[union-attr]
    if db["findings"].exists():  # the traces read a flow's findings
        db["findings"].create_index(["flow_id"], if_not_exists=True)  # type: ignore[union-attr]


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [
    _migrate_to_1,
    _migrate_to_2,
    _migrate_to_3,
    _migrate_to_4,
    _migrate_to_5,
    _migrate_to_6,
]
