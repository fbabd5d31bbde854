"""What `convtap record`'s two processes print, where nothing may wait on a reader: the proxy's
log lines (mitmproxy writes them from its event loop, so a line that cannot be written would
hold up or end every client's traffic) and the recorder's call lines (a line that waits holds
up the recording: the journal grows, nothing new reaches the database).

Lines go through a bounded queue to a thread that writes them: a reader that stops reading (a
paused terminal, a full pipe) holds up only that thread, and lines beyond the queue are dropped
and counted; a reader that goes away (`convtap record | head`), where mitmproxy would exit the
process, sends the rest to /dev/null.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import threading
import time
from typing import Any

QUEUED = 2000  # writes waiting for a slow reader, at most (a print makes two)
AT_EXIT = 2.0  # seconds the lines still queued may take to go out when the process ends


class QueuedOutput:
    def __init__(self, stream: Any) -> None:
        # None when the process was started with that descriptor closed (`convtap record >&-`)
        self.stream = stream if stream is not None else open(os.devnull, "w")  # noqa: SIM115
        self.dropped = 0  # lines (their ends) a reader too slow for QUEUED writes never got
        self._lines: queue.Queue[str] = queue.Queue(QUEUED)
        threading.Thread(target=self._write_lines, name="convtap-output", daemon=True).start()
        atexit.register(self.drain, AT_EXIT)

    def write(self, text: str) -> int:
        try:
            self._lines.put_nowait(text)
        except queue.Full:
            self.dropped += text.count("\n")
        return len(text)

    def flush(self) -> None:
        """Nothing to wait for: the thread flushes each line."""

    def drain(self, timeout: float) -> None:
        """Wait up to `timeout` for the queued lines to go out."""
        deadline = time.monotonic() + timeout
        while self._lines.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno, ...
        return getattr(self.stream, name)

    def _write_lines(self) -> None:
        while True:
            text = self._lines.get()
            try:
                self.stream.write(text)
                self.stream.flush()
            except OSError:
                self._gone()
            finally:
                self._lines.task_done()

    def _gone(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # no descriptor: each write fails alike
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.stream.fileno())  # what is still buffered goes there too
            os.close(null)
