"""The recorder in its own process, so the proxy only forwards bytes.

Decoding, redaction, the rules and SQLite all cost CPU, and mitmproxy runs every hook and every
stream callable on one event loop under one GIL. So the proxy hands each event to a
`RecorderClient`, which writes it, pickled and framed, to the non-blocking stdin of
`python -m convtap.record.worker`; that process runs the `Recorder` and its writer. The proxy's
own work per chunk is one write to a pipe.

Nothing ever waits on the worker: when it falls more than `MAX_BACKLOG` bytes behind, the
chunks of the flows that overflow are counted instead of sent, and the worker records on those
flows how many bytes it never saw (the client's traffic is untouched either way).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import os
import pickle
import signal
import struct
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from convtap.record.events import BodyChunk, BytesLost, OwnFailure, RecorderEvent
from convtap.record.recorder import Recorder
from convtap.record.redact import ClearText, Redactor
from convtap.record.store import Writer

MAX_BACKLOG = 32 * 1024 * 1024
F_SETPIPE_SZ = 1031  # Linux fcntl
_HEADER = struct.Struct("!I")


def echo_to(where: str) -> Callable[[str], None] | None:
    if where == "stdout":
        return lambda line: print(line, flush=True)
    if where == "log":
        return lambda line: print(f"convtap: {line}", file=sys.stderr, flush=True)
    return None


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

    def close(self) -> None:
        try:
            self.recorder.close()
        finally:
            self.writer.close()


class RecorderClient:
    """The proxy side: events, as framed messages on the worker's stdin.

    Writes never block the event loop: the pipe is non-blocking, what does not fit waits in a
    buffer that the loop drains when the pipe is writable again (`add_writer`), and no thread
    competes with the loop for the GIL.
    """

    def __init__(self, db: str, *, redact: bool = True, echo: str = "log") -> None:
        args = [sys.executable, "-m", "convtap.record.worker", db, "--echo", echo]
        if not redact:
            args.append("--no-redact")
        # The package's own folder first: mitmproxy may have loaded it from a checkout.
        source = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path}
        self.process = subprocess.Popen(args, stdin=subprocess.PIPE, env=env)
        assert self.process.stdin is not None
        self._fd = self.process.stdin.fileno()
        with contextlib.suppress(OSError):  # a larger pipe: fewer writes that do not fit
            fcntl.fcntl(self._fd, F_SETPIPE_SZ, 1 << 20)
        os.set_blocking(self._fd, False)
        self._pending: deque[memoryview] = deque()
        self._backlog = 0  # bytes written by us and not yet taken by the pipe
        self._lossy: dict[str, int] = {}  # flow id -> bytes not recorded
        self._loop: asyncio.AbstractEventLoop | None = None  # draining on this loop
        self.broken = False

    def handle(self, event: RecorderEvent) -> None:
        if isinstance(event, BodyChunk):
            # A flow that lost a piece stays lost: its events can no longer be framed.
            if event.flow_id in self._lossy or self._backlog + len(event.data) > MAX_BACKLOG:
                self._lossy[event.flow_id] = self._lossy.get(event.flow_id, 0) + len(event.data)
                return
        else:
            lost = self._lossy.pop(event.flow_id, 0)
            if lost:
                self._send(BytesLost(event.flow_id, lost))
        self._send(event)

    def _send(self, event: RecorderEvent) -> None:
        if self.broken:
            return
        frame = pickle.dumps(event, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_HEADER.pack(len(frame)) + frame)
        if not self._pending:
            view = view[self._write(view) :]
        if view:
            self._pending.append(view)
            self._backlog += len(view)
            self._watch()

    def _write(self, view: memoryview) -> int:
        try:
            return os.write(self._fd, view)
        except BlockingIOError:
            return 0
        except OSError:  # the worker died: recording stops, the traffic goes on
            self.broken = True
            self._pending.clear()
            return len(view)

    def _watch(self) -> None:
        if self._loop is not None:
            return
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (tests that call hooks): write it now
            self._flush_blocking()
            return
        self._loop.add_writer(self._fd, self._drain)

    def _drain(self) -> None:
        while self._pending and not self.broken:
            view = self._pending[0]
            written = self._write(view)
            self._backlog -= written
            if written < len(view):
                self._pending[0] = view[written:]
                return
            self._pending.popleft()
        if self._loop is not None:
            self._loop.remove_writer(self._fd)
            self._loop = None

    def _flush_blocking(self) -> None:
        os.set_blocking(self._fd, True)
        try:
            while self._pending and not self.broken:
                view = self._pending.popleft()
                self._backlog -= len(view)
                self._write(view)
        finally:
            os.set_blocking(self._fd, False)

    def close(self, timeout: float = 60.0) -> None:
        """Everything pending goes out, then the worker flushes its database and exits."""
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_writer(self._fd)
            self._loop = None
        self._flush_blocking()
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def read_events(stream: BinaryIO) -> Iterator[RecorderEvent]:
    while header := stream.read(_HEADER.size):
        if len(header) < _HEADER.size:
            return
        event: RecorderEvent = pickle.loads(stream.read(_HEADER.unpack(header)[0]))
        yield event


def main(argv: list[str] | None = None) -> int:
    """`python -m convtap.record.worker DB`: record what the proxy sends over stdin."""
    parser = argparse.ArgumentParser(prog="convtap.record.worker")
    parser.add_argument("db")
    parser.add_argument("--echo", default="stdout", choices=["stdout", "log", "off"])
    parser.add_argument("--no-redact", action="store_true")
    args = parser.parse_args(argv)
    # Ctrl-C reaches the whole process group; the worker ends when the proxy closes its stdin
    # (at shutdown, or when the proxy dies), after recording everything it was sent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    local = LocalRecorder(args.db, redact=not args.no_redact, echo=args.echo)
    try:
        # Large reads: the pipe empties in big gulps, so the proxy's writer wakes up less often.
        stdin = open(sys.stdin.fileno(), "rb", buffering=1 << 20, closefd=False)  # noqa: SIM115
        for event in read_events(stdin):
            local.handle(event)
    finally:
        local.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
