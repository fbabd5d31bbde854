"""The capture database: one batching writer, the findings table made anew and what a rebuild
clears; opening a capture (`store.opening`) and the reads commands share (`store.reads`) are
given here too. With the other modules of `store/`, the only ones that speak SQL.

One SQLite file per capture, WAL mode, mode 0600. Rows arrive already redacted. Writes go through
one `Writer` that commits in batches, each with the journal position the rows derive from, so a
process killed at any moment leaves a database holding every committed batch and knowing where
to go on from. Commands that only read a capture open it read-only (`open_readonly`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlite_utils

from convtap.store.canned import APPLICATION_ID as APPLICATION_ID
from convtap.store.compact import event_bytes as event_bytes  # the readers' accessors
from convtap.store.compact import (
    event_columns,
    message_with_text,
)
from convtap.store.compact import event_is_utf8 as event_is_utf8
from convtap.store.compact import event_text as event_text
from convtap.store.errors import DamagedCapture as DamagedCapture
from convtap.store.errors import StoreError as StoreError
from convtap.store.errors import StoreFull as StoreFull
from convtap.store.opening import (  # opening a capture, given here too
    BUSY_TIMEOUT as BUSY_TIMEOUT,
)
from convtap.store.opening import (
    PAGE_SIZE as PAGE_SIZE,
)
from convtap.store.opening import capture_database, write_lock
from convtap.store.opening import (
    check_database as check_database,
)
from convtap.store.opening import (
    close as close,
)
from convtap.store.opening import (
    connect as connect,
)
from convtap.store.opening import (
    index_text as index_text,
)
from convtap.store.opening import (
    journal_position as journal_position,
)
from convtap.store.opening import (
    open_readonly as open_readonly,
)
from convtap.store.opening import (
    remove_if_empty as remove_if_empty,
)
from convtap.store.opening import (
    writable as writable,
)
from convtap.store.reads import (
    SOCKET_TURN as SOCKET_TURN,
)
from convtap.store.reads import (
    audit_timeline as audit_timeline,
)
from convtap.store.reads import (
    call_from_row as call_from_row,
)
from convtap.store.reads import (  # the reads, given here too
    call_ledger as call_ledger,
)
from convtap.store.reads import (
    count_calls as count_calls,
)
from convtap.store.reads import (
    flow_ids as flow_ids,
)
from convtap.store.reads import (
    iter_events as iter_events,
)
from convtap.store.reads import (
    iter_flows as iter_flows,
)
from convtap.store.reads import (
    iter_shape_rows as iter_shape_rows,
)
from convtap.store.reads import (
    turn_conversations as turn_conversations,
)
from convtap.store.rows import UNSET, EventRow, FindingRow, MessageRow, Row
from convtap.store.schema import (
    FINDING_CONVERSATION,
    KEEP_ON_UPDATE,
    LINK,
    TABLES,
)
from convtap.store.schema import SCHEMA_VERSION as SCHEMA_VERSION
from convtap.wire.jsonvalue import LONE_SURROGATE, dumps, loads_exact, loads_or_none

# -- writing ---------------------------------------------------------------------------------------


class Writer:
    """Rows into the database in batches: committed when `batch` operations are waiting, when
    the oldest has waited `delay` seconds (`tick`), and on `flush`. A journal position `mark`ed
    after some rows is committed in the same transaction as those rows."""

    def __init__(self, path: Path | str, *, batch: int = 2000, delay: float = 0.05) -> None:
        self.path = Path(path)
        self.db = connect(self.path)
        # A message's upsert (its triggers) needs a statement journal: in a temporary file by
        # default, where it wrote ten times the stream's bytes, and where a full temporary
        # directory (SQLITE_TMPDIR, TMPDIR, /var/tmp) stopped recording as if the capture's own
        # disk were full. In memory it is bounded by one statement's pages.
        self.db.conn.execute("PRAGMA temp_store=MEMORY")
        self._ops: list[Row] = []
        self._position: str | None = None
        self._since = 0.0
        self._batch, self._delay = batch, delay
        self._sql: dict[tuple[str, str, tuple[str, ...]], str] = {}
        self.failures: list[str] = []  # what could not be written, also told on its flow
        self._whole, self._opened = False, 0.0  # inside `whole()`, and when its transaction began

    def put(self, row: Row) -> None:
        if not self._ops:
            self._since = time.monotonic()
        self._ops.append(row)
        if len(self._ops) >= self._batch:
            self.flush()

    def mark(self, position: str) -> None:
        """What has been put so far derives from the journal up to `position`."""
        self._position = position
        if not self._ops:
            self._since = time.monotonic()

    def tick(self) -> None:
        """Commit what has waited long enough."""
        if (self._ops or self._position) and time.monotonic() - self._since >= self._delay:
            self.flush()

    def flush(self) -> None:
        """Commit everything put so far."""
        ops, position = self._ops, self._position
        self._ops, self._position = [], None
        if ops or position is not None:
            self._commit(ops, position)
        if not self._whole and self.db.conn.in_transaction:  # wholes that ended before
            self._end_whole()

    @contextlib.contextmanager
    def whole(self) -> Iterator[None]:
        """What is put inside is committed in one transaction, or not at all: an imported flow
        with its events, a whole reprocess. Batches flushed meanwhile go into the open
        transaction (SQLite keeps them on disk, not in memory). Wholes in a row share it until
        one ends `delay` after it began, as batches do; the write lock is held throughout, so
        other writers wait for it (up to `BUSY_TIMEOUT`)."""
        conn = self.db.conn
        if self._whole:  # inside a larger one
            yield
            return
        if not conn.in_transaction:
            self.flush()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                _raise_if_full(exc, self.path)
                raise StoreError(f"cannot write into {self.path}: {exc}") from exc
            self._opened = time.monotonic()
        self._whole = True
        try:
            yield
            self.flush()
        except BaseException as exc:
            self._ops, self._position = [], None
            if conn.in_transaction:
                conn.rollback()
            if isinstance(exc, sqlite3.Error):
                _raise_if_full(exc, self.path)
                raise StoreError(f"cannot write into {self.path}: {exc}") from exc
            raise
        finally:
            self._whole = False
        if time.monotonic() - self._opened >= self._delay:
            self._end_whole()

    def _end_whole(self) -> None:
        try:
            self.db.conn.commit()
        except sqlite3.Error as exc:
            _raise_if_full(exc, self.path)
            raise StoreError(f"cannot write into {self.path}: {exc}") from exc

    def index(self, limit: int | None = None) -> bool:
        """Commit, then bring the full-text index up to date (the recorder is idle), or only
        `limit` of the rows waiting for it: whether any are still waiting."""
        self.flush()
        try:
            return index_text(self.db, limit)
        except sqlite3.Error as exc:
            _raise_if_full(exc, self.path)
            self.failures.append(f"{type(exc).__name__}: {exc}")
            return False

    def close(self) -> None:
        try:
            self.index()
        finally:
            close(self.db)

    def journal_position(self) -> str | None:
        return journal_position(self.db)

    def _commit(self, rows: list[Row], position: str | None) -> None:
        # BEGIN IMMEDIATE: the write lock is waited for (up to BUSY_TIMEOUT) before anything is
        # read; a deferred transaction that another process's commit overtakes fails at once
        # with "database is locked", however long the timeout.
        conn = self.db.conn
        try:
            with write_lock(conn):
                for row in rows:
                    self._write(row)
                for statement in LINK:
                    conn.execute(statement)
                if position is not None:
                    conn.execute(_POSITION, (position,))
        except (sqlite3.Error, OverflowError, UnicodeEncodeError) as exc:
            # A bad row must not stop the recorder: the rest are written one by one.
            if isinstance(exc, sqlite3.Error):
                _raise_if_full(exc, self.path)
            if isinstance(exc, sqlite3.OperationalError) and _NOT_A_ROW.search(str(exc)):
                raise StoreError(f"cannot write into {self.path}: {exc}") from exc  # lost: say so
            for row in rows:
                self._write_alone(row)
            if position is not None:
                try:
                    with write_lock(conn):
                        conn.execute(_POSITION, (position,))
                except sqlite3.Error as again:
                    _raise_if_full(again, self.path)
                    raise StoreError(f"cannot write into {self.path}: {again}") from again

    def _write(self, row: Row) -> None:
        if type(row) is EventRow and row.raw is UNSET:  # its columns as stored, no copy of it
            columns = _EVENT_COLUMNS
            values: tuple[Any, ...] = (row.flow_id, row.seq, row.at, row.event, row.count,
                                       *stored_event_columns(row.data))  # fmt: skip
        else:
            columns, values = row.columns()
        key = (row.KIND, row.TABLE, columns)
        statement = self._sql.get(key)
        if statement is None:
            statement = self._sql[key] = insert_sql(row.KIND, row.TABLE, columns)
        try:
            self.db.conn.execute(statement, values)
        except UnicodeEncodeError:  # a lone surrogate (JSON text may carry one; UTF-8 cannot)
            if isinstance(row, MessageRow) and row.json_without_text:
                self._write(whole_message(row))  # its JSON keeps the text as escapes
            else:
                self.db.conn.execute(statement, _writable(values))

    def _write_alone(self, row: Row) -> None:
        """One row in a transaction of its own; one that cannot be written is told on its flow
        (and in `failures`), never dropped in silence."""
        try:
            with write_lock(self.db.conn):
                self._write(row)
        except (sqlite3.Error, OverflowError) as exc:
            if isinstance(exc, sqlite3.Error):
                _raise_if_full(exc, self.path)
            detail = f"a {row.TABLE} row could not be stored: {type(exc).__name__}: {exc}"
            self.failures.append(detail)
            flow = row.flow()
            if flow is None:
                return
            with contextlib.suppress(sqlite3.Error), write_lock(self.db.conn):
                self.db.conn.execute(_FAILURE, (flow, detail[:FAILURE_KEPT]))


_EVENT_COLUMNS: tuple[str, ...] = ("flow_id", "seq", "at", "event", "count", "data", "raw")


def stored_event_columns(
    text: str | None, encoded: bytes | None = None
) -> tuple[str | None, bytes | None]:
    """A raw event row's `data` and `raw` as stored (`compact.event_columns`): its text, or its
    bytes compressed, or, when they are not UTF-8, as they came; `encoded`: the UTF-8 bytes the
    text decodes, when known. A surrogate that stands for no byte reads as U+FFFD."""
    text = text or ""
    try:
        return event_columns(text, encoded)
    except UnicodeEncodeError:
        return LONE_SURROGATE.sub("\ufffd", text), None


def whole_message(row: MessageRow) -> MessageRow:
    """A message row with its text in its JSON again."""
    whole = dumps(message_with_text(loads_or_none(row.json), row.text))
    return dataclasses.replace(row, json=whole, json_without_text=0)


def message_value(row: MessageRow) -> Any:
    """A message row's JSON value as recorded, its text in it (schema 5 stores the text once:
    `compact.message_without_text`). Every reader of a message's JSON reads it so (a row read
    from a capture of any schema: `MessageRow.read`)."""
    try:
        value = loads_exact(row.json) if row.json else None
    except (ValueError, RecursionError):
        value = None
    return message_with_text(value, row.text) if row.json_without_text else value


def _writable(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """The values with each lone surrogate in their text as U+FFFD, as invalid UTF-8 is read."""
    return tuple(LONE_SURROGATE.sub("\ufffd", v) if isinstance(v, str) else v for v in values)


def _raise_if_full(exc: sqlite3.Error, path: Path) -> None:
    if isinstance(exc, sqlite3.OperationalError) and "full" in str(exc):
        raise StoreFull(f"cannot write into {path}: the disk is full ({exc})") from exc


_NOT_A_ROW = re.compile(r"locked|busy|I/O error|readonly|read-only")  # the database, not a row
_POSITION = "INSERT OR REPLACE INTO meta (key, value) VALUES ('journal', ?)"
# Our own failure on a flow: its row is made if it is not there yet, and failures add up.
_FAILURE = """INSERT INTO flows (id, failure) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET
failure = coalesce(failure || '; ', '') || excluded.failure"""
FAILURE_KEPT = 2000  # characters of a failure's message stored with its flow


def insert_sql(kind: str, table: str, columns: tuple[str, ...]) -> str:
    names = ", ".join(f'"{c}"' for c in columns)
    marks = ", ".join("?" for _ in columns)
    if kind == "insert":
        return f'INSERT OR IGNORE INTO "{table}" ({names}) VALUES ({marks})'
    pk = TABLES[table][1]
    keys = (pk,) if isinstance(pk, str) else pk
    keep = KEEP_ON_UPDATE.get(table, set()) | set(keys)
    updates = ", ".join(f'"{c}" = excluded."{c}"' for c in columns if c not in keep)
    conflict = ", ".join(f'"{k}"' for k in keys)
    action = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
    return f'INSERT INTO "{table}" ({names}) VALUES ({marks}) ON CONFLICT ({conflict}) {action}'


def reader_beside(writer: Writer) -> sqlite_utils.Database:
    """Another connection to the database `writer` writes, for a query that reads much: its sorts
    spill to temporary files as SQLite's do, where the writer's connection would hold them in
    memory (its temp_store). Opened by SQLite alone, which keeps the writer's locks (a file this
    process opened and closed itself would drop them)."""
    conn = sqlite3.connect(writer.path, check_same_thread=False, timeout=BUSY_TIMEOUT)
    return capture_database(conn)


# -- findings and what is derived ------------------------------------------------------------


# What a finding is, for `replace_findings`: every column but its row id and when it was made.
_FINDING_KEY = ("rule", "severity", "message", "conversation_id", "call_id", "return_id",
                "flow_id", "evidence")  # fmt: skip


def replace_findings(db: sqlite_utils.Database, rows: list[FindingRow]) -> None:
    """The findings table made `rows` (one transaction, or a part of the one open): it is what
    the capture holds, so a mark that it was not is gone too. A finding already there stays as
    it is (its id, its time): only what changed is deleted or added, so that a reader that
    follows the table (the live page) sees only the change."""
    keep: dict[tuple[Any, ...], list[int]] = {}
    with write_lock(db.conn):
        for found in db.execute(f"SELECT id, {', '.join(_FINDING_KEY)} FROM findings"):
            keep.setdefault(tuple(found[1:]), []).append(found[0])
        for row in rows:
            same = keep.get(tuple(getattr(row, name) for name in _FINDING_KEY))
            if same:
                same.pop()
                continue
            columns, values = row.columns()
            db.conn.execute(insert_sql(row.KIND, row.TABLE, columns), values)
        gone = [ident for idents in keep.values() for ident in idents]
        for start in range(0, len(gone), 500):
            part = gone[start : start + 500]
            db.execute(f"DELETE FROM findings WHERE id IN ({', '.join('?' * len(part))})", part)
        db.execute(FINDING_CONVERSATION)
        db.execute("DELETE FROM meta WHERE key = ?", [_FINDINGS_BEHIND])


# `meta` key set while an import adds flows whose findings are not made yet (they are made from
# the whole capture once it is in): an import killed midway leaves it, and the next import, or
# `convtap audit`, makes them.
_FINDINGS_BEHIND = "findings_behind"


def findings_behind(db: sqlite_utils.Database) -> bool:
    """The findings table does not hold what the capture's content gives (an import stopped)."""
    sql = "SELECT 1 FROM meta WHERE key = ?"
    return db.execute(sql, [_FINDINGS_BEHIND]).fetchone() is not None


def mark_findings_behind(db: sqlite_utils.Database, behind: bool = True) -> None:
    with write_lock(db.conn):
        if behind:
            sql = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')"
        else:
            sql = "DELETE FROM meta WHERE key = ?"
        db.execute(sql, [_FINDINGS_BEHIND])


DERIVED = (
    "turns",
    "tool_signatures",
    "messages",
    "tool_calls",
    "tool_returns",
    "conversation_nodes",
    "findings",
    "usage",
)


def clear_derived(db: sqlite_utils.Database) -> None:
    """Before `convtap reprocess`: drop what the decoder derived, keep flows and raw events."""
    with write_lock(db.conn):
        for table in DERIVED:
            db.execute(f'DELETE FROM "{table}"')
        db.execute("DELETE FROM [messages_fts_pending]")
        db.execute("INSERT INTO [messages_fts] ([messages_fts]) VALUES ('delete-all')")
