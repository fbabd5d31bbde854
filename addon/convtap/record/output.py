"""Where the recorder's sides write, in two halves: the rows (`RowSink`: redacted before they
leave, raw events numbered in each flow's order, findings, our own failures) and the lines
`convtap record` prints (`Echo`). `Output` is what a side holds: the two halves, and the one way
into the auditor (`audit`, given by the recorder)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from convtap.contract.happenings import Happening
from convtap.contract.registry import Finding
from convtap.redact.redactor import Redactor
from convtap.store.database import FAILURE_KEPT, stored_event_columns
from convtap.store.rows import EventRow, FindingRow, FlowRow, Row
from convtap.vocab import RawKind

FAILURE_READ = 20_000  # characters of it searched for secrets (more than any kept one spans)


class Sink(Protocol):
    """Where rows go: the store's `Writer`, or a test's list."""

    def put(self, row: Row) -> None: ...


class RowSink:
    """The rows a recording derives, redacted, into a sink."""

    def __init__(self, sink: Sink, redactor: Redactor) -> None:
        self.sink, self.redact = sink, redactor
        self._seq: dict[str, int] = {}  # flow id -> the next raw event row's number

    def put(self, row: Row) -> None:
        self.sink.put(row)

    def reserve(self, flow_id: str) -> int:
        """The number of the flow's next raw event row, taken now: a row held back by the
        redaction is written later, in its place."""
        seq = self._seq.get(flow_id, 0)
        self._seq[flow_id] = seq + 1
        return seq

    def raw(
        self, flow_id: str, at: float, event: RawKind, count: int, data: str,
        seq: int | None = None, encoded: bytes | None = None,
    ) -> None:  # fmt: skip
        """One row of raw events, in the flow's order (at `seq` when it was reserved): an SSE
        chunk's completed events (as the SSE text that `reprocess` feeds to the decoder again)
        or a WebSocket frame, redacted. `encoded`: the UTF-8 bytes `data` decodes, when they
        are known (the chunk's bytes as they came): the row is then made as stored from them,
        its text not encoded again."""
        if seq is None:
            seq = self.reserve(flow_id)
        if encoded is None:
            self.sink.put(EventRow(flow_id, seq, at, event, count, data))
        else:
            stored, raw = stored_event_columns(data, encoded)
            self.sink.put(EventRow(flow_id, seq, at, event, count, stored, raw))

    def forget(self, flow_id: str) -> None:
        self._seq.pop(flow_id, None)

    def findings(self, findings: list[Finding]) -> None:
        for finding in findings:
            evidence = self.redact.dumps(finding.evidence)
            self.sink.put(FindingRow.of(finding, evidence, time.time()))

    def failure(self, flow_id: str, detail: str) -> None:
        """Our own failure on a flow, kept with it (the traffic went on). An exception's message
        may quote what it failed on: it is redacted as plain text is."""
        text = self.redact.scrub(detail[:FAILURE_READ])[:FAILURE_KEPT]
        self.sink.put(FlowRow(flow_id, failure=text))


class Echo:
    """The lines `convtap record` prints as the session happens: each call, return, output and
    finding (to `line`, or nowhere)."""

    def __init__(self, line: Callable[[str], None] | None = None) -> None:
        self.say: Callable[[str], None] = line or (lambda text: None)

    def findings(self, findings: list[Finding]) -> None:
        for finding in findings:
            where = finding.call_id or finding.return_id or finding.flow_id
            self.say(f"finding {finding.severity:<7} {finding.rule}  {finding.message}  ({where})")


@dataclass(frozen=True)
class Output:
    """What a protocol side writes through: its rows, its lines, and what it tells the auditor."""

    rows: RowSink
    echo: Echo
    audit: Callable[[Happening], None]

    @property
    def redact(self) -> Redactor:
        return self.rows.redact

    def put(self, row: Row) -> None:
        self.rows.put(row)

    def reserve(self, flow_id: str) -> int:
        return self.rows.reserve(flow_id)

    def raw(
        self, flow_id: str, at: float, event: RawKind, count: int, data: str,
        seq: int | None = None, encoded: bytes | None = None,
    ) -> None:  # fmt: skip
        self.rows.raw(flow_id, at, event, count, data, seq, encoded)

    def say(self, line: str) -> None:
        self.echo.say(line)
