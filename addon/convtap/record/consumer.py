"""The recorder fed by the journal: `JournalConsumer` reads it, feeds the recorder and commits its
position with the rows (see `convtap.journal.segments`), in the recorder process
(`record.worker`) or, for `convtap record --catch-up`, in the command's own.

After a crash of the recorder, the next one starts from the committed position. Its audit is
rebuilt from the database first (what `convtap audit` reads), then the flows that were still open
there are decoded again from the start of the oldest (the low-water mark, also committed), so
that their state is whole again: what that derives up to the committed position the database
holds already, and is written again as it was (every row is keyed), and the auditor knows what
it was told already (`contract.happenings`). Nothing is lost and nothing is recorded twice.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from convtap.contract.audit import feed
from convtap.contract.auditor import Auditor
from convtap.journal.events import (
    RecorderEvent,
    RequestSeen,
    ResponseEnded,
    WebSocketEnded,
)
from convtap.journal.segments import (
    JournalReader,
    Position,
    committed_positions,
    hold,
    journal_dir,
    journal_id,
    position_text,
    remove_journal,
    segment_path,
    segments,
)
from convtap.record.local import echo_to, redactor
from convtap.record.recorder import LIVE_LIMIT, Recorder
from convtap.store.database import Writer, audit_timeline, reader_beside
from convtap.vocab import Outcome
from convtap.wire.session import SOCKETS, endpoint_kind

IDLE = 0.02  # seconds the recorder waits for more journal when it has caught up
# The full-text index catches up only once the journal has been empty this long (never during a
# burst, where the recorder needs every cycle), a slice of rows at a time, the journal looked at
# again between slices (`store.database.index_text`); and whole when the recorder stops.
INDEX_AFTER = 1.0  # seconds
INDEX_SLICE = 2000  # message rows
INTERRUPTED = Outcome.PROXY_STOPPED


class JournalConsumer:
    """The recorder process: reads the journal, feeds the recorder, commits with positions."""

    def __init__(self, db: str, *, redact: bool, echo: str, writer: Writer | None = None) -> None:
        self.writer = writer or Writer(db)
        self.directory = journal_dir(db)
        self.journal_id = journal_id(self.directory)
        committed, low = self._positions()
        midway = committed > Position(0, 0)  # a recorder stopped midway: its audit state too
        auditor = self._audit_so_far() if midway else None
        self.recorder = Recorder(self.writer, redactor(redact), echo_to(echo), auditor)
        self.reader = JournalReader(self.directory, committed)
        self.position = committed  # the end of the last record taken
        self.open: dict[str, Position] = {}  # HTTP flow -> where its first record starts
        self.sockets: set[str] = set()  # WebSocket flows still open
        if midway:
            self._reopen(low, committed)

    # -- running -----------------------------------------------------------------------------

    def run(self, proxy_gone: Callable[[float], bool]) -> None:
        """Until the journal is closed, or the proxy is gone and its journal read to the end."""
        gone = False
        idle_since: float | None = None  # since when the journal has had nothing new
        while True:
            count = self.catch_up(writer_gone=gone)
            if self.reader.closed:
                return
            if count:
                idle_since = None
                continue
            if gone:
                return
            now = time.monotonic()
            idle_since = now if idle_since is None else idle_since
            if now - idle_since < INDEX_AFTER or not self.writer.index(INDEX_SLICE):
                gone = proxy_gone(IDLE)  # (a slice indexed: the journal is looked at at once)

    def catch_up(self, *, writer_gone: bool = False) -> int:
        """Record what the journal holds now; how many records that was."""
        count = 0
        for event, position in self.reader.read(limit=512, writer_gone=writer_gone):
            count += 1
            self._take(event, position)
        self.writer.tick()
        self._drop_consumed()
        return count

    def close(self) -> None:
        """Every flow still open was cut; the last findings; the journal removed if done."""
        self._interrupt()
        self.recorder.close()
        self.writer.mark(self._text(self.position, self.position))
        self.writer.close()
        self.reader.release()
        if self.reader.damaged:
            print(f"convtap: {self.reader.damaged} damaged record(s) of the journal"
                  f" {self.directory} were skipped", file=sys.stderr, flush=True)  # fmt: skip
        if self.reader.closed or not segments(self.directory):
            remove_journal(self.directory)
        else:  # the writer is closed: its last mark was committed, both positions at ours
            self._drop_consumed(keep=self.position.segment)

    def _take(self, event: RecorderEvent | None, position: Position) -> None:
        """One journal record, which ends at `position`."""
        if event is None:  # a new proxy run: what the last one left open is over
            self._interrupt()
        else:
            if isinstance(event, RequestSeen):
                if endpoint_kind(event.method, event.path) in SOCKETS:
                    self.sockets.add(event.flow_id)
                else:
                    self.open.setdefault(event.flow_id, self.position)
            elif isinstance(event, ResponseEnded):
                self.open.pop(event.flow_id, None)
            elif isinstance(event, WebSocketEnded):
                self.sockets.discard(event.flow_id)
            self.recorder.handle_safely(event)
        self.position = position
        self.writer.mark(self._text(position, min(self.open.values(), default=position)))

    def _interrupt(self) -> None:
        """The proxy stopped: every flow it left open is over."""
        at = time.time()
        for flow_id in list(self.open):
            self.recorder.handle_safely(ResponseEnded(flow_id, None, (), None, INTERRUPTED, at))
        for flow_id in list(self.sockets):
            self.recorder.handle_safely(WebSocketEnded(flow_id, at))
        self.open.clear()
        self.sockets.clear()

    def _drop_consumed(self, keep: int | None = None) -> None:
        """Segments before both committed positions (or `keep`) are consumed: delete them."""
        if keep is None:
            committed, low = self._positions()
            keep = min(committed.segment, low.segment)
        for number in segments(self.directory):
            if number >= keep:
                break
            with contextlib.suppress(OSError):
                segment_path(self.directory, number).unlink()

    def _positions(self) -> tuple[Position, Position]:
        return committed_positions(self.directory, self.writer.journal_position())

    def _text(self, position: Position, low: Position) -> str:
        return position_text(position, low, self.journal_id)

    # -- after a crash ---------------------------------------------------------------------------

    def _audit_so_far(self) -> Auditor:
        """The live audit's state, rebuilt from what the database holds (as `convtap audit`
        reads it): its findings are stored already."""
        auditor = Auditor(LIVE_LIMIT)
        reader = reader_beside(self.writer)
        try:
            feed(auditor, audit_timeline(reader))
        finally:
            reader.conn.close()
        return auditor

    def _reopen(self, low: Position, committed: Position) -> None:
        """The flows still open at `committed` decoded again from their start (`low`), so that
        their state is whole again (see the module's docstring)."""
        scan = JournalReader(self.directory, low)
        records: list[tuple[RecorderEvent | None, Position]] = []
        last = low
        while last < committed:
            batch = list(scan.read(limit=4096, writer_gone=True))
            if not batch:
                break
            for event, position in batch:
                if position > committed:
                    break
                records.append((event, position))
                last = position
        scan.release()
        starts: dict[str, Position] = {}
        before = low
        for event, position in records:  # which flows were still open at `committed`
            if isinstance(event, RequestSeen) and event.flow_id not in starts:
                if endpoint_kind(event.method, event.path) not in SOCKETS:
                    starts[event.flow_id] = before
            elif isinstance(event, ResponseEnded) or event is None:
                if event is None:
                    starts.clear()
                else:
                    starts.pop(event.flow_id, None)
            before = position
        for event, _ in records:
            if event is not None and event.flow_id in starts:
                self.recorder.handle_safely(event)
        self.open = starts


def catch_up(db: Path, *, redact: bool, echo: str) -> bool:
    """Record what a stopped recording left in the journal beside `db` (its proxy and recorder
    gone), then remove the journal; False when there was none. Refused with a `JournalError`
    while a recording holds it."""
    directory = journal_dir(db)
    if not directory.is_dir():
        return False
    lock = hold(directory)
    try:
        consumer = JournalConsumer(str(db), redact=redact, echo=echo)
        try:
            consumer.run(lambda timeout: True)  # no proxy: read to the end, torn tail and all
        finally:
            consumer.close()
    finally:
        os.close(lock)
    return True
