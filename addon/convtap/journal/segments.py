"""The journal: how the proxy hands events to the recorder process without ever losing one.

The proxy appends every event to an append-only segment file (one `write`, no decoding); the
recorder process reads the segments at its own pace and commits its position with the rows it
derived, in the same SQLite transaction (`Writer.mark`). So a crash of either process loses
nothing that was written, the recorder's lag costs disk (bounded by the lag, and reported), never
the proxy's memory, and consumed segments are deleted.

The journal lives beside the capture (`<db>.journal/`, mode 0700, segments 0600: it holds
unredacted bytes) and is removed once a clean shutdown has consumed it.

A segment is a sequence of records `kind (1 byte) | length (4 bytes) | payload`:

- CHUNK: a `BodyChunk` (the hot path: no pickling): flow id length, flow id, time, bytes;
- EVENT: any other recorder event, pickled;
- RUN: the first record a proxy run writes: flows still open from an earlier run are over;
- NEXT: this segment is complete, the next one follows;
- CLOSED: the proxy shut down cleanly; nothing follows.

A segment that ends without NEXT or CLOSED while a newer segment exists was cut by a crash: its
torn tail is skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import secrets
import shutil
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from convtap.journal.events import BodyChunk, RecorderEvent

SEGMENT_BYTES = 64 * 1024 * 1024
SUFFIX = ".seg"
CHUNK, EVENT, RUN, NEXT, CLOSED = 1, 2, 3, 4, 5
_HEAD = struct.Struct("!BI")
_CHUNK = struct.Struct("!Bd")  # flow id length, time
_CHUNK_HEAD = struct.Struct("!BIBd")  # _HEAD then _CHUNK: a chunk record's fixed part


class JournalError(Exception):
    """The journal cannot be written or read."""


def journal_dir(db: Path | str) -> Path:
    """Where the journal of a capture lives: beside it."""
    db = Path(db)
    return db.with_name(db.name + ".journal")


def hold(directory: Path) -> int:
    """Make the journal's folder and lock it for one proxy run: the descriptor that holds the
    lock (an exclusive `flock` of the folder), which the run's recorder process inherits, so
    that the lock lasts until both are gone. Two runs in one journal would each take the
    other's segments for torn tails and lose them: a second run is refused with a
    `JournalError`."""
    for _ in range(3):  # the folder may be removed under us by a recorder that just finished
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(directory, 0o700)
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise JournalError(
                f"cannot make the journal {directory}: {exc.strerror or exc}"
            ) from exc
        try:
            _lock(fd, directory)
        except JournalError:
            os.close(fd)
            raise
        with contextlib.suppress(OSError):
            if os.stat(directory).st_ino == os.fstat(fd).st_ino:
                return fd
        os.close(fd)  # locked a folder that was removed meanwhile: again
    raise JournalError(f"cannot lock the journal {directory}: it keeps being removed")


def check_free(directory: Path) -> None:
    """Refuse, with a `JournalError`, a journal another proxy run holds (changes nothing)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # no journal
    except OSError as exc:  # a file in its place, a folder we may not open
        raise JournalError(f"cannot use the journal {directory}: {exc.strerror or exc}") from None
    try:
        _lock(fd, directory)
    finally:
        os.close(fd)


def _lock(fd: int, directory: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise JournalError(
            f"another convtap is recording into {directory.with_suffix('')} (its journal is in"
            " use): give this one its own database; `convtap import` merges them later"
        ) from None


def unconsumed(directory: Path, position: Position) -> int:
    """Bytes of journal from `position` (what a recorder committed) to its end."""
    total = 0
    for number in segments(directory):
        if number >= position.segment:
            with contextlib.suppress(OSError):
                size = segment_path(directory, number).stat().st_size
                total += max(size - position.offset, 0) if number == position.segment else size
    return total


def segments(directory: Path) -> list[int]:
    """The numbers of the segments present, oldest first."""
    if not directory.is_dir():
        return []
    found = []
    for name in os.listdir(directory):
        if name.endswith(SUFFIX) and name[: -len(SUFFIX)].isdigit():
            found.append(int(name[: -len(SUFFIX)]))
    return sorted(found)


def segment_path(directory: Path, number: int) -> Path:
    return directory / f"{number:010d}{SUFFIX}"


ID_FILE = "id"  # which journal this is: a new one after a clean end numbers its segments anew


def journal_id(directory: Path) -> str:
    """The journal's id ("" for a journal made before journals had one)."""
    try:
        return (directory / ID_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def remove_journal(directory: Path) -> None:
    """A consumed journal removed: its segments first, its id last, so that a crash midway
    leaves what the committed position still matches."""
    for number in segments(directory):
        with contextlib.suppress(FileNotFoundError):
            segment_path(directory, number).unlink()
    with contextlib.suppress(FileNotFoundError):
        (directory / ID_FILE).unlink()
    shutil.rmtree(directory, ignore_errors=True)


def remove_if_unused(directory: Path) -> None:
    """A journal no record was written to (a run that never started) removed, if nothing else
    is in its folder."""
    if not segments(directory):
        with contextlib.suppress(OSError):
            (directory / ID_FILE).unlink()
            directory.rmdir()


def _make_id(directory: Path) -> None:
    """Give a journal that has no segment yet an id of its own (written whole, or not at all:
    without one, it is read from its start)."""
    path = directory / ID_FILE
    if segments(directory) or path.exists():
        return
    partial = directory / f"{ID_FILE}.{os.getpid()}"
    try:
        partial.write_text(secrets.token_hex(8), encoding="ascii")
        os.replace(partial, path)
    except OSError:  # a full disk: the first segment fails too, and says so
        with contextlib.suppress(OSError):
            partial.unlink()


def encode_parts(event: RecorderEvent) -> tuple[bytes, ...]:
    """A record as the pieces written one after the other."""
    if type(event) is BodyChunk:
        flow = event.flow_id.encode()
        meta = _CHUNK.pack(len(flow), event.at) + flow
        return _HEAD.pack(CHUNK, len(meta) + len(event.data)), meta, event.data
    payload = pickle.dumps(event, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(EVENT, len(payload)), payload


def decode(kind: int, payload: bytes) -> RecorderEvent:
    """A record's event; a `JournalError` when its bytes are not one (damaged on disk)."""
    try:
        if kind == CHUNK:
            size, at = _CHUNK.unpack_from(payload)
            start = _CHUNK.size
            flow = payload[start : start + size].decode()
            return BodyChunk(flow, payload[start + size :], at)
        event = pickle.loads(payload)
    except Exception as exc:  # whatever unpickling garbage raises
        raise JournalError(f"a damaged record ({type(exc).__name__}: {exc})") from None
    if not isinstance(event, RecorderEvent):
        raise JournalError(f"a damaged record (a {type(event).__name__}, not an event)")
    return event


def disk_usage(directory: Path) -> int:
    """Bytes the journal holds on disk."""
    total = 0
    for number in segments(directory):
        with contextlib.suppress(OSError):
            total += segment_path(directory, number).stat().st_size
    return total


class JournalWriter:
    """The proxy's side: `append` costs one write to the page cache. A write that fails (a full
    disk) stops the journal: `error` says why, and every later append is dropped at once."""

    def __init__(self, directory: Path, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.error: str | None = None
        self.written = 0  # bytes appended by this run
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(directory, 0o700)
        except OSError as exc:
            raise JournalError(
                f"cannot make the journal {directory}: {exc.strerror or exc}"
            ) from exc
        _make_id(directory)
        present = segments(directory)
        self._number = (present[-1] if present else 0) + 1
        self._fd = -1
        self._size = 0
        self._open()
        self._write(_HEAD.pack(RUN, 0))

    def append(self, event: RecorderEvent) -> None:
        if self._fd < 0:
            return
        parts = encode_parts(event)
        self._roll(sum(map(len, parts)))
        self._write(*parts)

    def chunks(self, flow_id: str) -> Callable[[bytes, float], None]:
        """`append` for one flow's `BodyChunk`s (data, time): the tap's hot path, with the
        flow's part of the record made once."""
        flow = flow_id.encode()
        fixed = _CHUNK.size + len(flow)

        def chunk(data: bytes, at: float) -> None:
            if self._fd >= 0:
                self._roll(_HEAD.size + fixed + len(data))
                self._write(_CHUNK_HEAD.pack(CHUNK, fixed + len(data), len(flow), at), flow, data)

        return chunk

    def _roll(self, size: int) -> None:
        """A record of `size` bytes is next: into a new segment if this one would pass its size."""
        if self._size + size > self.segment_bytes and self._size > _HEAD.size:
            self._write(_HEAD.pack(NEXT, 0))
            self._close_fd()
            self._number += 1
            self._open()

    def close(self) -> None:
        """A clean end: the recorder consumes everything, then removes the journal."""
        if self._fd >= 0:
            self._write(_HEAD.pack(CLOSED, 0))
            self._close_fd()

    def _open(self) -> None:
        path = segment_path(self.directory, self._number)
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except OSError as exc:
            self._fail(f"cannot open {path}: {exc.strerror or exc}")
        self._size = 0

    def _write(self, *parts: bytes) -> None:
        """One record, in one system call (`writev`: the chunk's bytes are not copied)."""
        if self._fd < 0:
            return
        size = sum(map(len, parts))
        try:
            written = os.writev(self._fd, parts)
            if written < size:  # a short write: the rest, however long it takes
                rest = memoryview(b"".join(parts))[written:]
                while rest:
                    step = os.write(self._fd, rest)
                    rest, written = rest[step:], written + step
        except OSError as exc:
            self._fail(f"cannot write the journal {self.directory}: {exc.strerror or exc}")
            return
        self._size += written
        self.written += written

    def _fail(self, why: str) -> None:
        self.error = why
        self._close_fd()

    def _close_fd(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1


@dataclass(frozen=True, order=True)
class Position:
    """Where the journal is read: a segment and the offset of the next record in it."""

    segment: int
    offset: int

    def text(self) -> str:
        return f"{self.segment}:{self.offset}"

    @classmethod
    def parse(cls, text: str | None) -> Position:
        if not text or ":" not in text:
            return cls(0, 0)
        segment, offset = text.split(":", 1)
        return cls(int(segment), int(offset))


def committed_positions(directory: Path, text: str | None) -> tuple[Position, Position]:
    """(where to read on, the low-water mark) as a recorder committed them (`read;low;id`):
    the journal's start when they were committed for another journal (an earlier one beside
    the same capture, consumed and removed)."""
    if not text:
        return Position(0, 0), Position(0, 0)
    committed, _, rest = text.partition(";")
    low, _, ident = rest.partition(";")
    if ident != journal_id(directory):
        return Position(0, 0), Position(0, 0)
    return Position.parse(committed), Position.parse(low or committed)


def position_text(position: Position, low: Position, ident: str) -> str:
    """What `committed_positions` reads back, for the journal whose id is `ident`."""
    return f"{position.text()};{low.text()};{ident}"


class JournalReader:
    """The recorder's side: the records after a position, as far as they have been written.

    `read` yields (event or None for a RUN record, the position after it) and returns when it
    has caught up with the writer; `closed` tells that the writer said CLOSED. With
    `writer_gone`, a segment that ends without NEXT is over (the proxy died).
    """

    def __init__(self, directory: Path, position: Position) -> None:
        self.directory = directory
        self.position = position
        self.closed = False
        self.damaged = 0  # records skipped because their bytes were not an event
        self._handle: tuple[int, BinaryIO] | None = None  # the open segment

    def read(
        self, limit: int = 512, *, writer_gone: bool = False
    ) -> Iterator[tuple[RecorderEvent | None, Position]]:
        produced = 0
        while produced < limit and not self.closed:
            record = self._next_record()
            if record is None:  # nothing more in this segment yet, or no such segment
                present = segments(self.directory)
                later = [n for n in present if n > self.position.segment]
                if self.position.segment not in present:
                    if not later:
                        return
                    self.position = Position(later[0], 0)  # consumed or never there: go on
                    continue
                if not later and not writer_gone:
                    return  # the writer is still at it
                # Read again, now that the writer is known to have moved on (or gone): it may
                # have finished the record between the first read and the listing.
                record = self._next_record()
                if record is None:  # cut by a crash: its torn tail is skipped
                    if not later:
                        self.closed = True
                        return
                    self.position = Position(later[0], 0)
                    continue
            kind, payload, end = record
            if kind == NEXT:
                self.position = Position(self.position.segment + 1, 0)
                continue
            if kind == CLOSED:
                self.position = Position(self.position.segment, end)
                self.closed = True
                return
            self.position = Position(self.position.segment, end)
            try:
                event = None if kind == RUN else decode(kind, payload)
            except JournalError:  # one damaged record costs only itself
                self.damaged += 1
                continue
            produced += 1
            yield event, self.position

    def _next_record(self) -> tuple[int, bytes, int] | None:
        handle = self._file()
        if handle is None:
            return None
        start = self.position.offset
        handle.seek(start)
        head = handle.read(_HEAD.size)
        if len(head) == _HEAD.size:
            kind, length = _HEAD.unpack(head)
            payload = handle.read(length) if length else b""
            if len(payload) == length and kind in (CHUNK, EVENT, RUN, NEXT, CLOSED):
                return kind, payload, start + _HEAD.size + length
        return None  # not written whole yet (or torn by a crash)

    def _file(self) -> BinaryIO | None:
        segment = self.position.segment
        if self._handle is not None and self._handle[0] == segment:
            return self._handle[1]
        self.release()
        path = segment_path(self.directory, segment)
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            return None
        except OSError as exc:  # a folder where a segment goes, one that may not be read
            raise JournalError(f"cannot read the journal's {path}: {exc.strerror or exc}") from exc
        self._handle = (segment, handle)
        return handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle[1].close()
            self._handle = None

    def remaining(self) -> int:
        """Bytes written after the position (what the recorder still has to read)."""
        return unconsumed(self.directory, self.position)
