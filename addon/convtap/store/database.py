"""The capture database: opening it (migrated to `store_schema`), one batching writer, and the
reads commands share. With `store_schema` and `report_queries` (what the report reads), the
only modules that speak SQL.

One SQLite file per capture, WAL mode, mode 0600. Rows arrive already redacted. Writes go through
one `Writer` that commits in batches, each with the journal position the rows derive from, so a
process killed at any moment leaves a database holding every committed batch and knowing where
to go on from. Commands that only read a capture open it read-only (`open_readonly`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import os
import re
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlite_utils

from convtap.contract.happenings import (
    Call,
    CallMade,
    ClientCallsMade,
    ConversationRequest,
    Happening,
    MessagesShown,
    Prepared,
    RequestRefused,
    ResponsesRequest,
    SocketTurn,
    is_refusal,
)
from convtap.store.canned import APPLICATION_ID, is_capture
from convtap.store.check import check_capture
from convtap.store.compact import (
    add_sql_functions,
    event_columns,
    message_with_text,
)
from convtap.store.compact import event_bytes as event_bytes  # the readers' accessors
from convtap.store.compact import event_is_utf8 as event_is_utf8
from convtap.store.compact import event_text as event_text
from convtap.store.errors import DamagedCapture as DamagedCapture
from convtap.store.errors import StoreError as StoreError
from convtap.store.rows import UNSET, EventRow, FindingRow, MessageRow, Row
from convtap.store.schema import (
    FINDING_CONVERSATION,
    INDEX_BELOW,
    INDEX_SLICE,
    INDEX_TEXT,
    KEEP_ON_UPDATE,
    LINK,
    MIGRATIONS,
    SCHEMA_VERSION,
    TABLES,
)
from convtap.wire.jsonvalue import LONE_SURROGATE, dumps, loads_exact, loads_or_none
from convtap.wire.session import Endpoint, read_turn_request


class StoreFull(StoreError):
    """The disk (or the file's size limit) is full: nothing more can be written."""


# -- opening ---------------------------------------------------------------------------------------


def index_text(db: sqlite_utils.Database, limit: int | None = None) -> bool:
    """Bring the full-text index of message text up to date (one transaction), or only its
    first `limit` rows waiting: whether any are still waiting afterwards."""
    conn = db.conn
    if conn.execute("SELECT 1 FROM [messages_fts_pending] LIMIT 1").fetchone() is None:
        return False
    with _write_lock(conn):
        below = None if limit is None else conn.execute(INDEX_BELOW, (limit,)).fetchone()
        if below is None:
            for statement in INDEX_TEXT:
                conn.execute(statement)
            return False
        for statement in INDEX_SLICE:
            conn.execute(statement, below)
    return True


BUSY_TIMEOUT = 30.0  # seconds another convtap process may hold the write lock
PAGE_SIZE = 4096  # bytes, for a new database


def connect(path: Path | str, *, create: bool = True) -> sqlite_utils.Database:
    """Open a capture database to write into it, migrated to the current schema.

    convtap writes only into a database it made: one carrying its schema marker, or a new file
    (`create`), created mode 0600. Anything else, and a file it may not write, is refused
    with a `StoreError`, before a byte of it changes. Several convtap processes may open the
    same new database at once: the schema is made under SQLite's write lock.
    """
    path = Path(path)
    _refuse_what_is_no_file(path)
    if not path.exists():
        if not create:
            raise StoreError(f"no database at {path}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Made 0600 before SQLite touches it; SQLite gives -wal and -shm the same mode.
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            pass  # another convtap process made it a moment ago: its lock orders us
        except OSError as exc:
            raise StoreError(f"cannot create {path}: {exc.strerror or exc}") from exc
    if not writable(path):
        raise StoreError(f"{path} is read-only: convtap needs to write into it (and beside it)")
    _check_is_ours(path, allow_empty=create)
    # A SQLite file without tables is another's too, unless it is still empty: a convtap
    # process that made it a moment ago writes the schema in its first transaction.
    was_empty = path.stat().st_size == 0
    try:
        conn = sqlite3.connect(path, check_same_thread=False, timeout=BUSY_TIMEOUT)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a usable SQLite database ({exc})") from exc
    try:
        return _made_ready(conn, path, was_empty)
    except BaseException:
        conn.close()  # refused: SQLite's files beside it go with the connection
        raise


def _made_ready(conn: sqlite3.Connection, path: Path, was_empty: bool) -> sqlite_utils.Database:
    """The capture checked and migrated under the write lock, then in WAL mode."""
    try:
        # 4 KiB pages, SQLite's own. Schema 2-4 made 8 KiB ones, for raw event rows of a 16 KiB
        # network chunk each; compressed (schema 5) they are 2-3 KB, and a row's last overflow
        # page is half empty on average: the database is 17 % smaller at 4 KiB for the same CPU
        # (bench/recorder_bench.py). An existing database keeps its own page size.
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        add_sql_functions(conn)
        db = sqlite_utils.Database(conn)
        with _write_lock(conn):
            version = _version(db)
            if version == 0 and not (was_empty and not db.table_names()):
                raise StoreError(f"{path} is not a convtap capture")
            if version and not is_capture(db.conn):
                raise StoreError(f"{path} is not a convtap capture")
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path} has schema {version}; this convtap knows up to {SCHEMA_VERSION}"
                )
            if version:  # before a byte changes: one convtap did not leave as it is, refused
                check_capture(conn, path, version)
            for migrate in MIGRATIONS[version:]:
                migrate(db)
            if version < SCHEMA_VERSION:
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                             ("schema_version", str(SCHEMA_VERSION)))  # fmt: skip
            if _application_id(db) != APPLICATION_ID:  # new, or made by an earlier convtap
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        # WAL only once the file is known to be ours (it rewrites the header); a pending
        # statement would make every later query of sqlite-utils fetch all its rows at once.
        _switch_to_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint=10000")  # fewer, larger checkpoints
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc):
            raise StoreError(
                f"{path} is locked by another process (waited {BUSY_TIMEOUT:.0f} s): try again "
                "once it is done"
            ) from exc
        if "full" in str(exc) or _no_space(path):  # SQLite says "disk I/O error" for its -shm
            raise StoreFull(f"cannot write into {path}: the disk is full ({exc})") from exc
        raise StoreError(f"{path} is not a usable SQLite database ({exc})") from exc
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a usable SQLite database ({exc})") from exc
    return db


def _switch_to_wal(conn: sqlite3.Connection) -> None:
    """WAL mode, waiting as for any write: switching needs the database to itself a moment, and
    SQLite's busy timeout does not wait for that (another convtap process opening it too)."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _refuse_what_is_no_file(path: Path) -> None:
    """A directory, FIFO or device is no database (opening a FIFO would wait for a writer), and
    a symlink to nothing or in a loop is not made into one."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise StoreError(f"{path} is a symlink to nothing, not a database") from None
        return
    except OSError as exc:
        raise StoreError(f"cannot open {path}: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(mode):
        raise StoreError(f"{path} is a directory, not a database")
    if not stat.S_ISREG(mode):
        raise StoreError(f"{path} is not a regular file (a FIFO, device or socket), not a database")


def writable(path: Path) -> bool:
    """The file and its folder may be written, and the file is not marked read-only (its
    owner's write bit is off: respected even by root, who could write anyway)."""
    try:
        owner_writes = bool(path.stat().st_mode & stat.S_IWUSR)
    except OSError:
        return False
    return owner_writes and os.access(path, os.R_OK | os.W_OK) and os.access(path.parent, os.W_OK)


def check_database(path: Path | str) -> None:
    """Refuse, before anything listens, a database convtap may not record into (made if new)."""
    close(connect(path))


def close(db: sqlite_utils.Database) -> None:
    """Close a connection that wrote into a capture, what it wrote checkpointed into the
    database file first: the `.db` alone then holds the capture (a copy of it, a CI artifact),
    whoever still has it open. SQLite checkpoints only when the last connection closes, so a
    reader open meanwhile (the live page, Datasette) would leave the rows in the `-wal` beside
    it. The checkpoint waits for readers in a transaction (up to `BUSY_TIMEOUT`); one that
    cannot be made leaves the rows in the `-wal`, where SQLite reads them as ever."""
    try:
        if not db.conn.in_transaction:
            db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error:
        pass
    finally:
        db.conn.close()


def open_readonly(path: Path | str) -> sqlite_utils.Database:
    """Open a capture only to read it: nothing in or beside the file is changed."""
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"no database at {path}")
    _check_is_ours(path, allow_empty=False)
    # Nobody writing it (no WAL beside it): immutable, so that SQLite makes no side file either.
    quiet = "" if Path(f"{path}-wal").exists() else "&immutable=1"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro{quiet}", uri=True,
                               check_same_thread=False, timeout=BUSY_TIMEOUT)  # fmt: skip
        add_sql_functions(conn)
        db = sqlite_utils.Database(conn)
        version = _version(db)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a usable SQLite database ({exc})") from exc
    if version == 0 or not is_capture(db.conn):
        conn.close()
        raise StoreError(f"{path} is not a convtap capture")
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(f"{path} has schema {version}; this convtap knows up to {SCHEMA_VERSION}")
    try:
        check_capture(conn, path, version)
    except (StoreError, sqlite3.DatabaseError) as exc:
        conn.close()
        if isinstance(exc, StoreError):
            raise
        raise StoreError(f"{path} is not a usable SQLite database ({exc})") from exc
    return db


def journal_position(db: sqlite_utils.Database) -> str | None:
    """Where the recorder has committed its journal up to (`committed;low`), if it has."""
    row = db.execute("SELECT value FROM meta WHERE key = 'journal'").fetchone()
    return str(row[0]) if row else None


def reader_beside(writer: Writer) -> sqlite_utils.Database:
    """Another connection to the database `writer` writes, for a query that reads much: its sorts
    spill to temporary files as SQLite's do, where the writer's connection would hold them in
    memory (its temp_store). Opened by SQLite alone, which keeps the writer's locks (a file this
    process opened and closed itself would drop them)."""
    conn = sqlite3.connect(writer.path, check_same_thread=False, timeout=BUSY_TIMEOUT)
    add_sql_functions(conn)
    return sqlite_utils.Database(conn)


def _check_is_ours(path: Path, *, allow_empty: bool) -> None:
    """Refuse what is not SQLite at all by its first bytes, before SQLite opens it."""
    with path.open("rb") as handle:
        header = handle.read(16)
    if not header:
        if allow_empty:
            return
        raise StoreError(f"{path} is empty, not a convtap capture")
    if header != b"SQLite format 3\x00":
        raise StoreError(f"{path} is not a SQLite database")


@contextlib.contextmanager
def _write_lock(conn: sqlite3.Connection) -> Iterator[None]:
    """An immediate transaction: the write lock is taken before anything is read. Inside a
    transaction already open (`Writer.whole`), a savepoint of it."""
    if conn.in_transaction:
        conn.execute("SAVEPOINT part")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK TO part")
            conn.execute("RELEASE part")
            raise
        conn.execute("RELEASE part")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def remove_if_empty(path: Path) -> bool:
    """Remove a capture (and its -wal, -shm) that holds no flow, checked under SQLite's
    exclusive lock so that no other process's committed rows can go with it; True when it was
    removed. For a new capture a command made and then had nothing to put in."""
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        conn.execute("BEGIN EXCLUSIVE")
        empty = bool(conn.execute("SELECT count(*) FROM flows").fetchone()[0] == 0)
        if empty:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return empty


def _application_id(db: sqlite_utils.Database) -> int:
    return int(db.execute("PRAGMA application_id").fetchone()[0])


def _version(db: sqlite_utils.Database) -> int:
    if "meta" not in db.table_names():
        return 0
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row and str(row[0]).isdigit() else 0


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
            with _write_lock(conn):
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
                    with _write_lock(conn):
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
            with _write_lock(self.db.conn):
                self._write(row)
        except (sqlite3.Error, OverflowError) as exc:
            if isinstance(exc, sqlite3.Error):
                _raise_if_full(exc, self.path)
            detail = f"a {row.TABLE} row could not be stored: {type(exc).__name__}: {exc}"
            self.failures.append(detail)
            flow = row.flow()
            if flow is None:
                return
            with contextlib.suppress(sqlite3.Error), _write_lock(self.db.conn):
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


def message_value(row: dict[str, Any]) -> Any:
    """A message row's JSON value as recorded, its text in it (schema 5 stores the text once:
    `compact.message_without_text`). Every reader of a message's JSON reads it so."""
    try:
        value = loads_exact(row["json"]) if row["json"] else None
    except (ValueError, RecursionError):
        value = None
    return message_with_text(value, row.get("text")) if row.get("json_without_text") else value


def _writable(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """The values with each lone surrogate in their text as U+FFFD, as invalid UTF-8 is read."""
    return tuple(LONE_SURROGATE.sub("\ufffd", v) if isinstance(v, str) else v for v in values)


def _no_space(path: Path) -> bool:
    try:
        return os.statvfs(path.parent).f_bavail == 0
    except OSError:
        return False


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


# -- reading ---------------------------------------------------------------------------------------


def call_ledger(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    return list(db.query("SELECT * FROM call_ledger ORDER BY called_at, call_id"))


def flow_ids(db: sqlite_utils.Database) -> set[str]:
    """The ids of the flows a database holds (an import skips them). Read through the
    connection the process writes with: opening the file again and closing it would drop
    that connection's POSIX locks, and another process could then delete the WAL under it."""
    return {row[0] for row in db.execute("SELECT id FROM flows")}


# `flows.source` of a Responses API turn made over a WebSocket (one `response.create` and the
# response that answers it): derived from the socket flow's frames, never replayed or exported
# by itself.
SOCKET_TURN = "socket"


def iter_flows(db: sqlite_utils.Database) -> Iterator[dict[str, Any]]:
    """The flows that came over the wire, in time order (not the turns derived from a socket)."""
    yield from db.query(
        "SELECT * FROM flows WHERE source IS NOT ? ORDER BY started_at, rowid", [SOCKET_TURN]
    )


def iter_events(db: sqlite_utils.Database, flow_id: str) -> Iterator[dict[str, Any]]:
    yield from db.query("SELECT * FROM events WHERE flow_id = ? ORDER BY seq", [flow_id])


def audit_timeline(db: sqlite_utils.Database) -> Iterator[Happening]:
    """What `convtap audit` feeds the auditor: the happenings the recorder fed it live, read back
    from the capture, streamed in time order. At the same instant (an imported `.sse` body's
    request, calls and messages share one), flows come in the order they were stored, and within
    a flow its prepare or request comes first, then its calls, then the message ids its stream
    showed (the order of `_TIMELINE`)."""

    def stream(order: int, sql: str) -> Iterator[tuple[float, int, int, dict[str, Any]]]:
        for row in db.query(f"{sql} ORDER BY at, rank"):
            yield row["at"] or 0.0, row["rank"], order, row

    sources = [stream(order, sql) for order, (sql, _) in enumerate(_TIMELINE)]
    for at, _, order, row in heapq.merge(*sources, key=lambda r: r[:3]):
        yield from _TIMELINE[order][1](db, at, row)


def _prepared(db: sqlite_utils.Database, at: float, row: dict[str, Any]) -> Iterator[Happening]:
    body = loads_or_none(_request_body(db, row["rank"]))
    conversation = body.get("conversation_id") if isinstance(body, dict) else None
    yield Prepared(conversation if isinstance(conversation, str) else None, at)


def _requested(db: sqlite_utils.Database, at: float, row: dict[str, Any]) -> Iterator[Happening]:
    body = loads_or_none(_request_body(db, row["rank"]))
    if row["kind"] != Endpoint.CONVERSATION:
        if row["source"] == SOCKET_TURN:  # a socket's turn: its flow names the socket
            yield SocketTurn(row["id"], row["turn_id"], body, at, row["ended_at"])
        yield ResponsesRequest(row["id"], body, at)
        if row["conversation_id"] is not None:  # the response that answered it, known before
            yield ClientCallsMade(row["id"], row["conversation_id"], (), at)  # its calls come
        return
    yield ConversationRequest(row["id"], body, read_turn_request(body), at)
    if is_refusal(row["status"]):
        yield RequestRefused(row["id"])


def _called(db: sqlite_utils.Database, at: float, row: dict[str, Any]) -> Iterator[Happening]:
    if row["protocol"] == "responses":
        call = {"type": row["recipient"], "item_id": row["item_id"], "call_id": row["call_id"],
                "name": row["tool"], "execution": "client"}  # fmt: skip
        yield ClientCallsMade(row["turn_id"], row["conversation_id"], (call,), at)
    else:
        yield CallMade(call_from_row(row))


def _shown(db: sqlite_utils.Database, at: float, row: dict[str, Any]) -> Iterator[Happening]:
    yield MessagesShown(row["conversation_id"], (row["id"],))


def _request_body(db: sqlite_utils.Database, rowid: int) -> Any:
    """A flow's request body, read once its turn comes (sorted with them, they filled memory)."""
    return db.execute("SELECT request_body FROM flows WHERE rowid = ?", (rowid,)).fetchone()[0]


# The timeline's sources, in the order happenings of one instant and one flow come: each query
# (its time `at` and the `rank` of the flow it belongs to) and what its rows stand for.
_TIMELINE: list[
    tuple[str, Callable[[sqlite_utils.Database, float, dict[str, Any]], Iterator[Happening]]]
] = [
    ("SELECT started_at AS at, rowid AS rank FROM flows WHERE kind = 'prepare'", _prepared),
    ("SELECT started_at AS at, rowid AS rank, id, kind, status, conversation_id, turn_id, "
     "source, ended_at FROM flows WHERE kind IN ('conversation', 'responses')", _requested),
    ("SELECT c.called_at AS at, coalesce(f.rowid, 0) AS rank, c.* FROM tool_calls c "
     "LEFT JOIN flows f ON f.id = c.turn_id", _called),
    ("SELECT m.first_seen_at AS at, coalesce(f.rowid, 0) AS rank, m.id, m.conversation_id "
     "FROM messages m LEFT JOIN flows f ON f.id = m.turn_id", _shown),
]  # fmt: skip


def call_from_row(row: dict[str, Any]) -> Call:
    arguments = loads_or_none(row["arguments"])
    return Call(
        call_id=row["call_id"], recipient=row["recipient"] or "", kind=row["kind"] or "builtin",
        tool=row["tool"] or "", arguments=arguments if isinstance(arguments, dict) else None,
        arguments_text=row["arguments_text"] or "", conversation_id=row["conversation_id"],
        turn_id=row["turn_id"], at=row["called_at"] or 0.0,
    )  # fmt: skip


def iter_shape_rows(db: sqlite_utils.Database) -> Iterator[tuple[str, dict[str, Any]]]:
    """What shape inference reads, streamed: request bodies, Responses answers sent as JSON,
    final messages, raw events (in order within each flow, with the flow's kind); messages in
    order of their turn."""
    for row in db.query("SELECT kind, request_body, started_at FROM flows "
                        "WHERE request_body IS NOT NULL"):  # fmt: skip
        yield "request", row
    for row in db.query("SELECT kind, response_body FROM flows "
                        "WHERE response_body IS NOT NULL AND kind = 'responses'"):  # fmt: skip
        yield "response", row  # a Responses answer not streamed: its JSON body
    # every column: what `message_value` and `event_text` read differs by schema
    for row in db.query("SELECT * FROM messages ORDER BY turn_id"):
        yield "message", row
    for row in db.query("SELECT e.*, f.kind AS flow_kind "
                        "FROM events e LEFT JOIN flows f ON f.id = e.flow_id "
                        "ORDER BY e.flow_id, e.seq"):  # fmt: skip
        yield "event", row


def count_calls(db: sqlite_utils.Database) -> int:
    return int(db.execute("SELECT count(*) FROM tool_calls").fetchone()[0])


# What a finding is, for `replace_findings`: every column but its row id and when it was made.
_FINDING_KEY = ("rule", "severity", "message", "conversation_id", "call_id", "return_id",
                "flow_id", "evidence")  # fmt: skip


def replace_findings(db: sqlite_utils.Database, rows: list[FindingRow]) -> None:
    """The findings table made `rows` (one transaction, or a part of the one open): it is what
    the capture holds, so a mark that it was not is gone too. A finding already there stays as
    it is (its id, its time): only what changed is deleted or added, so that a reader that
    follows the table (the live page) sees only the change."""
    keep: dict[tuple[Any, ...], list[int]] = {}
    with _write_lock(db.conn):
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
    with _write_lock(db.conn):
        if behind:
            sql = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')"
        else:
            sql = "DELETE FROM meta WHERE key = ?"
        db.execute(sql, [_FINDINGS_BEHIND])


def turn_conversations(db: sqlite_utils.Database, turn_ids: set[str]) -> dict[str, str]:
    """The conversation the server assigned to each of these turns (those it named one)."""
    found: dict[str, str] = {}
    for turn_id in turn_ids:
        row = db.execute("SELECT conversation_id FROM turns WHERE id = ?", [turn_id]).fetchone()
        if row is not None and row[0] is not None:
            found[turn_id] = row[0]
    return found


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
    with _write_lock(db.conn):
        for table in DERIVED:
            db.execute(f'DELETE FROM "{table}"')
        db.execute("DELETE FROM [messages_fts_pending]")
        db.execute("INSERT INTO [messages_fts] ([messages_fts]) VALUES ('delete-all')")
