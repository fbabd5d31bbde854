"""The recorder in its own process, fed by the journal, so the proxy only forwards bytes.

Decoding, redaction, the rules and SQLite all cost CPU, and mitmproxy runs every hook and every
stream callable on one event loop under one GIL. So the proxy appends each event to the journal
(`JournalBackend`, one write) and `python -m convtap.record.worker` records it at its own pace,
committing its journal position with the rows (see `convtap.record.journal`).

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
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from convtap.contract.audit import replay
from convtap.contract.auditor import Auditor
from convtap.record.events import (
    BodyChunk,
    OwnFailure,
    RecorderEvent,
    RequestSeen,
    ResponseEnded,
    WebSocketEnded,
)
from convtap.record.journal import (
    JournalReader,
    JournalWriter,
    Position,
    disk_usage,
    hold,
    journal_dir,
    segment_path,
    segments,
)
from convtap.record.queued_output import QueuedOutput
from convtap.record.recorder import Recorder
from convtap.record.redact import ClearText, Redactor
from convtap.record.store import StoreFull, Writer, audit_timeline, reader_beside
from convtap.wire.jsonvalue import allow_deep_json
from convtap.wire.session import endpoint_kind

DISK_FULL = 3  # the recorder's exit status when the disk is full (the proxy goes on)
IDLE = 0.02  # seconds the recorder waits for more journal when it has caught up
NICE = 10  # the recorder process's priority below the proxy's (bench/proxy_bench.py)
INTERRUPTED = "interrupted: the proxy stopped before the response ended"


def echo_to(where: str) -> Callable[[str], None] | None:
    """Where the recorder says each call, return and finding (stdout, the log or nowhere)."""
    if where not in ("stdout", "log"):
        return None
    prefix = "convtap: " if where == "log" else ""
    gone = False

    def echo(line: str) -> None:
        nonlocal gone
        if gone:
            return
        try:
            print(prefix + line, file=sys.stdout if where == "stdout" else sys.stderr, flush=True)
        except OSError:  # nobody reads it any more (`convtap record | head`): recording goes on
            gone = True

    return echo


class LocalRecorder:
    """The recorder and its writer in this process (import, reprocess, tests)."""

    def __init__(self, db: str, *, redact: bool = True, echo: str = "off") -> None:
        self.writer = Writer(db)
        self.recorder = Recorder(self.writer, Redactor() if redact else ClearText(), echo_to(echo))

    def handle(self, event: RecorderEvent) -> None:
        try:
            self.recorder.handle(event)
        except Exception as exc:  # one bad flow must not end the recording
            self.recorder.handle(OwnFailure(event.flow_id, f"{type(exc).__name__}: {exc}"))
        self.writer.tick()

    def chunks(self, flow_id: str) -> Callable[[bytes, float], None]:
        """Where a tap hands one flow's chunks (data, time)."""
        return lambda data, at: self.handle(BodyChunk(flow_id, data, at))

    def close(self) -> None:
        try:
            self.recorder.close()
        finally:
            self.writer.close()


class JournalBackend:
    """The proxy's side: events into the journal, and the recorder process that reads it."""

    def __init__(self, db: str, *, redact: bool = True, echo: str = "log") -> None:
        self.db = Path(db)
        self.lock = hold(journal_dir(self.db))  # this run's alone, until it and its recorder end
        try:
            self.journal = JournalWriter(journal_dir(self.db))
            args = [sys.executable, "-m", "convtap.record.worker", db, "--echo", echo]
            if not redact:
                args.append("--no-redact")
            # The package's own folder first: mitmproxy may have loaded it from a checkout.
            source = str(Path(__file__).resolve().parents[2])
            path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)
            # stdin stays open while the proxy lives: its end tells the recorder the proxy is
            # gone. The lock's descriptor goes with it: a recorder still catching up after the
            # proxy died keeps the journal from a new run.
            self.process = subprocess.Popen(args, stdin=subprocess.PIPE, pass_fds=(self.lock,),
                                            env={**os.environ, "PYTHONPATH": path})  # fmt: skip
        except BaseException:
            os.close(self.lock)
            raise

    def handle(self, event: RecorderEvent) -> None:
        self.journal.append(event)

    def chunks(self, flow_id: str) -> Callable[[bytes, float], None]:
        """Where a tap hands one flow's chunks (data, time): straight into the journal."""
        return self.journal.chunks(flow_id)

    @property
    def error(self) -> str | None:
        """Why recording stopped, if it did (the proxy goes on forwarding either way)."""
        if self.journal.error:
            return f"recording stopped: {self.journal.error}"
        code = self.process.poll()
        if code == DISK_FULL:
            return "recording stopped: the disk is full (the journal keeps what it still can)"
        if code is not None:
            return f"the recorder process ended (exit status {code}); nothing more is recorded"
        return None

    @property
    def fatal(self) -> bool:
        """Recording stopped for a reason other than a full disk: the proxy should stop too,
        rather than forward traffic that nobody records."""
        code = self.process.poll()
        return code is not None and code != DISK_FULL and self.journal.error is None

    def lag(self) -> int:
        """Bytes of journal on disk that the recorder has not consumed yet (roughly)."""
        return disk_usage(self.journal.directory)

    def close(self, progress: Callable[[str], None] | None = None, timeout: float = 3600.0) -> None:
        """A clean end: the journal is closed, the recorder catches up (saying how far it is
        every few seconds) and removes it."""
        self.journal.close()
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        deadline = time.monotonic() + timeout
        said = time.monotonic()
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            if progress is not None and time.monotonic() - said >= 2:
                said = time.monotonic()
                left = self.lag()
                progress(f"waiting for the recorder to catch up: {left / 1e6:.1f} MB of "
                         f"{self.journal.written / 1e6:.1f} MB left to record")  # fmt: skip
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        if self.lock >= 0:  # the journal is free for another run
            os.close(self.lock)
            self.lock = -1


class JournalConsumer:
    """The recorder process: reads the journal, feeds the recorder, commits with positions."""

    def __init__(self, db: str, *, redact: bool, echo: str) -> None:
        self.writer = Writer(db)
        self.directory = journal_dir(db)
        self.recorder = Recorder(self.writer, Redactor() if redact else ClearText(), echo_to(echo))
        committed, low = _positions(self.writer.journal_position())
        self.reader = JournalReader(self.directory, committed)
        self.position = committed  # the end of the last record taken
        self.open: dict[str, Position] = {}  # HTTP flow -> where its first record starts
        self.sockets: set[str] = set()  # WebSocket flows still open
        if low < committed:
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
                self.recorder.idle(time.time())
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
        self.writer.mark(_text(self.position, self.position))
        self.writer.close()
        self.reader.release()
        if self.reader.damaged:
            print(f"convtap: {self.reader.damaged} damaged record(s) of the journal"
                  f" {self.directory} were skipped", file=sys.stderr, flush=True)  # fmt: skip
        if self.reader.closed or not segments(self.directory):
            shutil.rmtree(self.directory, ignore_errors=True)
        else:
            self._drop_consumed()

    def _take(self, event: RecorderEvent | None, position: Position) -> None:
        """One journal record, which ends at `position`."""
        if event is None:  # a new proxy run: what the last one left open is over
            self._interrupt()
        else:
            if isinstance(event, RequestSeen):
                if endpoint_kind(event.method, event.path) == "websocket":
                    self.sockets.add(event.flow_id)
                else:
                    self.open.setdefault(event.flow_id, self.position)
            elif isinstance(event, ResponseEnded):
                self.open.pop(event.flow_id, None)
            elif isinstance(event, WebSocketEnded):
                self.sockets.discard(event.flow_id)
            self._handle(event)
        self.position = position
        self.writer.mark(_text(position, min(self.open.values(), default=position)))

    def _interrupt(self) -> None:
        """The proxy stopped: every flow it left open is over."""
        at = time.time()
        for flow_id in list(self.open):
            self._handle(ResponseEnded(flow_id, None, (), None, INTERRUPTED, at))
        for flow_id in list(self.sockets):
            self._handle(WebSocketEnded(flow_id, at))
        self.open.clear()
        self.sockets.clear()

    def _handle(self, event: RecorderEvent) -> None:
        try:
            self.recorder.handle(event)
        except Exception as exc:  # one bad flow must not end the recording
            self.recorder.handle(OwnFailure(event.flow_id, f"{type(exc).__name__}: {exc}"))

    def _drop_consumed(self) -> None:
        """Segments before both committed positions are consumed: delete them."""
        committed, low = _positions(self.writer.journal_position())
        keep = min(committed.segment, low.segment)
        for number in segments(self.directory):
            if number >= keep:
                break
            with contextlib.suppress(OSError):
                segment_path(self.directory, number).unlink()

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
                if endpoint_kind(event.method, event.path) != "websocket":
                    starts[event.flow_id] = before
            elif isinstance(event, ResponseEnded) or event is None:
                if event is None:
                    starts.clear()
                else:
                    starts.pop(event.flow_id, None)
            before = position
        out = self.recorder.out
        out.quiet = True
        out.auditor = Auditor()  # a scratch one: the real one knows it all already
        for event, _ in records:
            if event is not None and event.flow_id in starts:
                self._handle(event)
        out.quiet = False
        out.auditor = auditor
        self.recorder.conversation.written.clear()
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


def _positions(text: str | None) -> tuple[Position, Position]:
    """(where to read on, the low-water mark) as committed."""
    if not text:
        return Position(0, 0), Position(0, 0)
    committed, _, low = text.partition(";")
    return Position.parse(committed), Position.parse(low or committed)


def _text(position: Position, low: Position) -> str:
    return f"{position.text()};{low.text()}"


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
        try:
            consumer.run(_stdin_closed)
        finally:
            consumer.close()
    except StoreFull as exc:  # the journal keeps what it can; a restart records it
        print(f"convtap: recording stopped: {exc}", file=sys.stderr, flush=True)
        return DISK_FULL
    finally:
        if dropped := stdout.dropped + stderr.dropped:
            print(f"convtap: {dropped} lines of the recorder's output were dropped: their"
                  " reader was too slow (`convtap calls` lists every call)",
                  file=sys.__stderr__)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
