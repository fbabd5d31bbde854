"""Opening a capture: made, migrated to `store_schema` and checked (`connect`), read-only
(`open_readonly`), closed with its WAL moved in (`close`); the write lock every writer takes
(`write_lock`). `store.database` gives these names too."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import sqlite_utils

from convtap.store.canned import APPLICATION_ID, is_capture
from convtap.store.check import check_capture
from convtap.store.compact import add_sql_functions
from convtap.store.errors import StoreError, StoreFull
from convtap.store.schema import INDEX_BELOW, INDEX_SLICE, INDEX_TEXT, MIGRATIONS, SCHEMA_VERSION


def index_text(db: sqlite_utils.Database, limit: int | None = None) -> bool:
    """Bring the full-text index of message text up to date (one transaction), or only its
    first `limit` rows waiting: whether any are still waiting afterwards."""
    conn = db.conn
    if conn.execute("SELECT 1 FROM [messages_fts_pending] LIMIT 1").fetchone() is None:
        return False
    with write_lock(conn):
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


def capture_database(conn: sqlite3.Connection) -> sqlite_utils.Database:
    """`conn` as sqlite-utils' Database, with convtap's SQL functions. No sqlite-utils plugin
    runs on it: what a capture's connection holds is convtap's alone (and scanning every
    installed package for plugins cost each process 30 ms)."""
    add_sql_functions(conn)
    return sqlite_utils.Database(conn, execute_plugins=False)


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
        db = capture_database(conn)
        with write_lock(conn):
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
        if "full" in str(exc) or no_space(path):  # SQLite says "disk I/O error" for its -shm
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
        db = capture_database(conn)
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
def write_lock(conn: sqlite3.Connection) -> Iterator[None]:
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


def no_space(path: Path) -> bool:
    """The file system that holds `path` has no block left."""
    try:
        return os.statvfs(path.parent).f_bavail == 0
    except OSError:
        return False
