"""The proxy's half of the journal: every event appended (one write, no decoding), and the
recorder process (`python -m convtap.record.worker`) started beside it and waited for at the end.
Imports nothing of the recorder: the proxy's process never loads decoding, redaction or SQLite
for this. The recorder opens the database, and says whether it could (`READY`, or `REFUSED`
and why) before the proxy goes on: one it may not record into is refused at the start."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from convtap.journal.events import RecorderEvent
from convtap.journal.segments import (
    JournalWriter,
    disk_usage,
    hold,
    journal_dir,
    remove_journal,
)

DISK_FULL = 3  # the recorder process's exit status when the disk is full (the proxy goes on)
READY, REFUSED = b"ready", b"refused: "  # what the recorder says once it opened the database
STARTING = 300.0  # seconds the recorder may take to open the database (a loaded machine)


class RecorderRefused(Exception):
    """The recorder cannot record into the database (said why), or ended before it could say."""


class JournalBackend:
    """The proxy's side: events into the journal, and the recorder process that reads it."""

    def __init__(self, db: str, *, redact: bool = True, echo: str = "log") -> None:
        self.db = Path(db)
        self.new = not journal_dir(self.db).exists()  # removed again if the database is refused
        self.lock = hold(journal_dir(self.db))  # this run's alone, until it and its recorder end
        said, ready = os.pipe()
        try:
            self.journal = JournalWriter(journal_dir(self.db))
            args = [sys.executable, "-m", "convtap.record.worker", db, "--echo", echo,
                    "--ready-fd", str(ready)]  # fmt: skip
            if not redact:
                args.append("--no-redact")
            # The package's own folder first: mitmproxy may have loaded it from a checkout.
            source = str(Path(__file__).resolve().parents[2])
            path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)
            # stdin stays open while the proxy lives: its end tells the recorder the proxy is
            # gone. The lock's descriptor goes with it: a recorder still catching up after the
            # proxy died keeps the journal from a new run. A process group of its own: the
            # terminal's Ctrl-C goes to the whole foreground group, and the recorder, however
            # far its start has got, must not die of it; the proxy asks it to finish (`close`).
            self.process = subprocess.Popen(args, stdin=subprocess.PIPE,
                                            pass_fds=(self.lock, ready),
                                            env={**os.environ, "PYTHONPATH": path},
                                            process_group=0)  # fmt: skip
            os.close(ready)
            ready = -1
            self._opened(said)
        except BaseException:
            if ready >= 0:
                os.close(ready)
            os.close(self.lock)
            raise
        finally:
            os.close(said)

    def _opened(self, said: int) -> None:
        """Wait for the recorder to say it opened the database; `RecorderRefused` if not."""
        answer = b""
        deadline = time.monotonic() + STARTING
        while not answer.endswith(b"\n") and time.monotonic() < deadline:
            if select.select([said], [], [], 1.0)[0]:
                piece = os.read(said, 4096)
                if not piece:
                    break  # it ended without a word
                answer += piece
        if answer.startswith(READY):
            return
        self.journal.close()
        self._stop()
        if self.new:  # it never journaled a thing: nothing is left beside the database
            remove_journal(self.journal.directory)
        if answer.startswith(REFUSED):
            raise RecorderRefused(answer[len(REFUSED) :].decode("utf-8", "replace").strip())
        code = self.process.poll()
        raise RecorderRefused(f"the recorder process ended at its start (exit status {code})")

    def _stop(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

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
