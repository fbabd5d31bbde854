"""The recorder in its own process, so the proxy only forwards bytes.

Decoding, redaction, the rules and SQLite all cost CPU, and mitmproxy runs every hook and every
stream callable on one event loop under one GIL. So the addon hands each hook's values to a
`RecorderClient`, which writes them, pickled and framed, to the non-blocking stdin of
`python -m addon.worker`; that process runs the `Recorder` and its writer. The proxy's own work
per chunk is one write to a pipe.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

MAX_BACKLOG = 32 * 1024 * 1024
F_SETPIPE_SZ = 1031  # Linux fcntl
_HEADER = struct.Struct("!I")


class LocalRecorder:
    """The same interface run in this process (import, reprocess, tests that embed the addon)."""

    def __init__(self, db: str, *, redact: bool, echo: str) -> None:
        from addon.recorder import Recorder
        from addon.redact import ClearText, Redactor
        from addon.store import Writer

        self.writer = Writer(db)
        self.recorder = Recorder(self.writer, Redactor() if redact else ClearText(), _echo(echo))

    def call(self, method: str, *args: Any) -> None:
        getattr(self.recorder, method)(*args)

    def chunk(self, flow_id: str, data: bytes, at: float) -> None:
        self.recorder.response_chunk(flow_id, data, at)

    def end_flow(self, flow_id: str) -> None:
        pass

    def close(self) -> None:
        self.recorder.close()
        self.writer.close()


def _echo(where: str) -> Callable[[str], None] | None:
    if where == "stdout":
        return lambda line: print(line, flush=True)
    if where == "log":
        return lambda line: print(f"convtap: {line}", file=sys.stderr, flush=True)
    return None


class RecorderClient:
    """The proxy side: the Recorder's methods, as framed messages on the worker's stdin.

    Writes never block the event loop: the pipe is non-blocking, what does not fit waits in a
    buffer that the loop drains when the pipe is writable again (`add_writer`), and no thread
    competes with the loop for the GIL.
    """

    def __init__(self, db: str, *, redact: bool, echo: str) -> None:
        root = str(Path(__file__).resolve().parent.parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH")) if p)}  # fmt: skip
        args = [sys.executable, "-m", "addon.worker", db, "--echo", echo]
        if not redact:
            args.append("--no-redact")
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

    def call(self, method: str, *args: Any) -> None:
        frame = pickle.dumps((method, args), protocol=pickle.HIGHEST_PROTOCOL)
        self._send(_HEADER.pack(len(frame)) + frame)

    def chunk(self, flow_id: str, data: bytes, at: float) -> None:
        """A piece of a tapped body: sent, or counted as lost when the worker is too far
        behind (a flow that lost a piece stays lost: its events can no longer be framed)."""
        if flow_id in self._lossy or self._backlog + len(data) > MAX_BACKLOG:
            self._lossy[flow_id] = self._lossy.get(flow_id, 0) + len(data)
            return
        self.call("response_chunk", flow_id, data, at)

    def end_flow(self, flow_id: str) -> None:
        lost = self._lossy.pop(flow_id, 0)
        if lost:
            self.call("lost", flow_id, lost)

    def _send(self, frame: bytes) -> None:
        if self.broken:
            return
        view = memoryview(frame)
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
        except RuntimeError:  # no event loop (import, tests that call hooks): write it now
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


def read_frames(stream: BinaryIO) -> Any:
    while header := stream.read(_HEADER.size):
        if len(header) < _HEADER.size:
            return
        frame = stream.read(_HEADER.unpack(header)[0])
        yield pickle.loads(frame)


def main(argv: list[str] | None = None) -> int:
    """`python -m addon.worker DB`: run the recorder on what the proxy sends over stdin."""
    from addon.recorder import Recorder
    from addon.redact import ClearText, Redactor
    from addon.store import Writer

    parser = argparse.ArgumentParser(prog="addon.worker")
    parser.add_argument("db")
    parser.add_argument("--echo", default="stdout", choices=["stdout", "log", "off"])
    parser.add_argument("--no-redact", action="store_true")
    args = parser.parse_args(argv)
    # Ctrl-C reaches the whole process group; the worker ends when the proxy closes its stdin
    # (at shutdown, or when the proxy dies), after flushing everything it was sent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    writer = Writer(args.db)
    recorder = Recorder(writer, ClearText() if args.no_redact else Redactor(), _echo(args.echo))
    try:
        # Large reads: the pipe empties in big gulps, so the proxy's writer wakes up less often.
        stdin = open(sys.stdin.fileno(), "rb", buffering=1 << 20, closefd=False)  # noqa: SIM115
        for method, call_args in read_frames(stdin):
            try:
                getattr(recorder, method)(*call_args)
            except Exception as exc:  # one bad flow must not end the recording
                if call_args and isinstance(call_args[0], str):
                    recorder.failure(call_args[0], f"{type(exc).__name__}: {exc}")
    finally:
        recorder.close()
        writer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
