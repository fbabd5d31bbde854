"""The recorder in its own process, fed by the journal, so the proxy only forwards bytes.

Decoding, redaction, the rules and SQLite all cost CPU, and mitmproxy runs every hook and every
stream callable on one event loop under one GIL. So the proxy appends each event to the journal
(`JournalBackend`, one write) and `python -m convtap.record.worker` records it at its own pace,
committing its journal position with the rows (see `convtap.journal.segments`).

After a crash of the recorder, the next one starts from the committed position. The flows that
were still open there are decoded again from the start of the oldest (the low-water mark, also
committed) with nothing written, so that their state is whole again, and the audit's state is
rebuilt from the database: nothing is lost and nothing is recorded twice.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from convtap.contract.audit import replay
from convtap.contract.auditor import Auditor
from convtap.journal.backend import DISK_FULL
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
from convtap.record.queued_output import QueuedOutput
from convtap.record.recorder import Recorder
from convtap.store.database import StoreError, StoreFull, Writer, audit_timeline, reader_beside
from convtap.telemetry.live import from_environment as live_traces
from convtap.wire.jsonvalue import allow_deep_json
from convtap.wire.session import SOCKETS, endpoint_kind

IDLE = 0.02  # seconds the recorder waits for more journal when it has caught up
NICE = 10  # the recorder process's priority below the proxy's (bench/proxy_bench.py)
INTERRUPTED = "interrupted: the proxy stopped before the response ended"


class JournalConsumer:
    """The recorder process: reads the journal, feeds the recorder, commits with positions."""

    def __init__(self, db: str, *, redact: bool, echo: str) -> None:
        self.writer = Writer(db)
        self.directory = journal_dir(db)
        self.journal_id = journal_id(self.directory)
        self.recorder = Recorder(self.writer, redactor(redact), echo_to(echo))
        committed, low = self._positions()
        self.reader = JournalReader(self.directory, committed)
        self.position = committed  # the end of the last record taken
        self.open: dict[str, Position] = {}  # HTTP flow -> where its first record starts
        self.sockets: set[str] = set()  # WebSocket flows still open
        if committed > Position(0, 0):  # a recorder stopped midway: its audit state too
            self._recover(low, committed)

    # -- running -----------------------------------------------------------------------------

    def run(self, proxy_gone: Callable[[float], bool]) -> None:
        """Until the journal is closed, or the proxy is gone and its journal read to the end."""
        gone = False
        while True:
            count = self.catch_up(writer_gone=gone)
            if self.reader.closed:
                return
            if count == 0:
                if gone:
                    return
                self.writer.index()
                gone = proxy_gone(IDLE)

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

    def _recover(self, low: Position, committed: Position) -> None:
        """Rebuild what the recorder knew at `committed`: the audit's state from the database,
        the open flows' decoding state from the journal, writing nothing twice."""
        auditor = Auditor()
        reader = reader_beside(self.writer)
        try:
            replay(auditor, audit_timeline(reader))
        finally:
            reader.conn.close()
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
        self.recorder.rebuild(
            (e for e, _ in records if e is not None and e.flow_id in starts), auditor
        )
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


def _stdin_closed(timeout: float) -> bool:
    """Wait up to `timeout` for the proxy's pipe; True once it has closed (the proxy is gone)."""
    ready, _, _ = select.select([sys.stdin.fileno()], [], [], timeout)
    if not ready:
        return False
    return os.read(sys.stdin.fileno(), 4096) == b""


def main(argv: list[str] | None = None) -> int:
    """`python -m convtap.record.worker DB`: record what the proxy journals beside DB."""
    parser = argparse.ArgumentParser(prog="convtap.record.worker")
    parser.add_argument("db")
    parser.add_argument("--echo", default="stdout", choices=["stdout", "log", "off"])
    parser.add_argument("--no-redact", action="store_true")
    args = parser.parse_args(argv)
    # Ctrl-C reaches the whole process group; the recorder ends when the journal is closed, or
    # when the proxy is gone (its pipe closes) and the journal is read to its end.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The client's traffic first: the proxy forwards at full speed while the recorder takes
    # what CPU is left (what it has not recorded yet waits in the journal, and is reported).
    os.nice(NICE)
    allow_deep_json()
    # What it prints waits apart: a reader who stops reading (a paused terminal) holds up no
    # recording, and lines past the queue are dropped (the database has every call).
    sys.stdout = stdout = QueuedOutput(sys.stdout)
    sys.stderr = stderr = QueuedOutput(sys.stderr)
    try:
        consumer = JournalConsumer(args.db, redact=not args.no_redact, echo=args.echo)
        # `record --otlp-endpoint`: each turn's spans, from a thread that only reads the capture
        traces = live_traces(lambda: reader_beside(consumer.writer))
        try:
            consumer.run(_stdin_closed)
        finally:
            consumer.close()
            if traces is not None:
                traces.close()
    except StoreFull as exc:  # the journal keeps what it can; a restart records it
        print(f"convtap: recording stopped: {exc}", file=sys.stderr, flush=True)
        return DISK_FULL
    except StoreError as exc:  # the database cannot be written (locked, damaged): say so
        print(f"convtap: recording stopped: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        if dropped := stdout.dropped + stderr.dropped:
            print(f"convtap: {dropped} lines of the recorder's output were dropped: their"
                  " reader was too slow (`convtap calls` lists every call)",
                  file=sys.__stderr__)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
