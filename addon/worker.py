"""The recorder in its own process, so the proxy only forwards bytes.

Decoding, redaction, the rules and SQLite all cost CPU, and mitmproxy runs every hook and every
stream callable on one event loop under one GIL. So the addon hands each hook's values to a
`RecorderClient`, which queues them for a sender thread that writes them, pickled and framed, to
the stdin of `python -m addon.worker`; that process runs the `Recorder` and its writer. The
proxy's own work per chunk is an append to a deque.

Nothing ever waits on the worker: when it falls more than `MAX_BACKLOG` bytes behind, the
chunks of the flows that overflow are counted instead of queued, and the worker records on those
flows how many bytes it never saw (the client's traffic is untouched either way).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

MAX_BACKLOG = 32 * 1024 * 1024
F_SETPIPE_SZ = 1031  # Linux fcntl
BATCH = 256  # messages the sender takes at a time
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
    """The proxy side: the Recorder's methods, as messages to the worker process."""

    def __init__(self, db: str, *, redact: bool, echo: str) -> None:
        root = str(Path(__file__).resolve().parent.parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH")) if p)}  # fmt: skip
        args = [sys.executable, "-m", "addon.worker", db, "--echo", echo]
        if not redact:
            args.append("--no-redact")
        self.process = subprocess.Popen(args, stdin=subprocess.PIPE, env=env)
        with contextlib.suppress(OSError, AttributeError):  # a larger pipe: fewer blocked writes
            assert self.process.stdin is not None
            fcntl.fcntl(self.process.stdin.fileno(), F_SETPIPE_SZ, 1 << 20)
        self._items: deque[tuple[str, tuple[Any, ...]]] = deque()
        self._ready = threading.Condition()
        self._backlog = 0  # bytes of chunks queued and not yet sent
        self._lossy: dict[str, int] = {}  # flow id -> bytes not recorded
        self.broken = False
        self._closing = False
        self._thread = threading.Thread(target=self._send_loop, name="convtap-sender", daemon=True)
        self._thread.start()

    def call(self, method: str, *args: Any) -> None:
        with self._ready:
            self._append((method, args))

    def _append(self, item: tuple[str, tuple[Any, ...]]) -> None:
        """Queue an item (the lock is held). The sender only sleeps on an empty queue, so only
        the first item wakes it: no thread switch per chunk."""
        wake = not self._items
        self._items.append(item)
        if wake:
            self._ready.notify()

    def chunk(self, flow_id: str, data: bytes, at: float) -> None:
        """A piece of a tapped body: queued, or counted as lost when the worker is too far
        behind (a flow that lost a piece stays lost: its events can no longer be framed)."""
        with self._ready:
            if flow_id in self._lossy or self._backlog + len(data) > MAX_BACKLOG:
                self._lossy[flow_id] = self._lossy.get(flow_id, 0) + len(data)
                return
            self._backlog += len(data)
            self._append(("response_chunk", (flow_id, data, at)))

    def end_flow(self, flow_id: str) -> None:
        lost = self._lossy.pop(flow_id, 0)
        if lost:
            self.call("lost", flow_id, lost)

    def close(self, timeout: float = 60.0) -> None:
        """Everything queued goes out, then the worker flushes its database and exits."""
        with self._ready:
            self._closing = True
            self._ready.notify()
        self._thread.join(timeout)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def _send_loop(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        while True:
            with self._ready:
                while not self._items and not self._closing:
                    self._ready.wait()
                batch = [self._items.popleft() for _ in range(min(BATCH, len(self._items)))]
                closing = self._closing
            if not self.broken:
                try:
                    for method, args in batch:
                        frame = pickle.dumps((method, args), protocol=pickle.HIGHEST_PROTOCOL)
                        stdin.write(_HEADER.pack(len(frame)) + frame)
                        if method == "response_chunk":
                            with self._ready:
                                self._backlog -= len(args[1])
                    stdin.flush()
                except (BrokenPipeError, OSError, ValueError):
                    self.broken = True  # the worker died: recording stops, traffic goes on
            if closing:
                with self._ready:
                    if self._items:
                        continue
                with contextlib.suppress(OSError):
                    stdin.close()
                return


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
        for method, call_args in read_frames(sys.stdin.buffer):
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
