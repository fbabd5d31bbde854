"""The recorder and its writer in this process (import, reprocess, tests), and where a recorder
says each call, return and finding."""

from __future__ import annotations

import sys
from collections.abc import Callable

from convtap.journal.events import BodyChunk, RecorderEvent
from convtap.record.recorder import Recorder
from convtap.redact.redactor import Redactor, UnusableKey, chosen
from convtap.store.database import StoreError, Writer


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


class RedactionKeyError(StoreError):
    """The redaction key cannot be read or made: nothing may be recorded."""


def redactor(redact: bool = True) -> Redactor:
    """`redact.redactor.chosen`, its failure a `StoreError` as the recorder's others are."""
    try:
        return chosen(redact)
    except UnusableKey as exc:
        raise RedactionKeyError(str(exc)) from None


class LocalRecorder:
    """The recorder and its writer in this process (import, reprocess, tests)."""

    def __init__(
        self, db: str, *, redact: bool = True, echo: str = "off", audit: bool = True
    ) -> None:
        """`audit`: the live audit's findings, as the recorder process stores them (an import
        makes its own from the whole capture once it is in)."""
        chosen = redactor(redact)
        self.writer = Writer(db)
        self.recorder = Recorder(self.writer, chosen, echo_to(echo), audit=audit)

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
