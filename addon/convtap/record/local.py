"""The recorder and its writer in this process (import, reprocess, tests), and where a recorder
says each call, return and finding."""

from __future__ import annotations

import sys
from collections.abc import Callable

from convtap.journal.events import BodyChunk, RecorderEvent
from convtap.record.recorder import Recorder
from convtap.redact.redactor import ClearText, Redactor
from convtap.store.database import Writer


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
        self.recorder.handle_safely(event)
        self.writer.tick()

    def chunks(self, flow_id: str) -> Callable[[bytes, float], None]:
        """Where a tap hands one flow's chunks (data, time)."""
        return lambda data, at: self.handle(BodyChunk(flow_id, data, at))

    def close(self) -> None:
        try:
            self.recorder.close()
        finally:
            self.writer.close()
