"""Where the recorder's sides write: rows (redacted before they leave), raw events in each
flow's order, the echo lines `convtap record` prints, and the findings of the live audit."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from convtap.contract.auditor import Auditor
from convtap.contract.registry import Finding
from convtap.redact.redactor import Redactor
from convtap.store.database import FAILURE_KEPT
from convtap.store.rows import EventRow, FindingRow, FlowRow, Row

LIVE_LIMIT = 4096  # calls, turns and conversations the live audit remembers
FAILURE_READ = 20_000  # characters of it searched for secrets (more than any kept one spans)


class Sink(Protocol):
    """Where rows go: the store's `Writer`, or a test's list."""

    def put(self, row: Row) -> None: ...


class Output:
    def __init__(
        self, sink: Sink, redactor: Redactor, echo: Callable[[str], None] | None = None
    ) -> None:
        self.sink, self.redact = sink, redactor
        self.echo: Callable[[str], None] = echo or (lambda line: None)
        self.auditor = Auditor(LIVE_LIMIT)  # the contract rules, checked as the session happens
        self.quiet = False  # rebuilding state after a crash: what it derives is already stored
        self._seq: dict[str, int] = {}  # flow id -> the next raw event row's number

    def put(self, row: Row) -> None:
        if not self.quiet:
            self.sink.put(row)

    def say(self, line: str) -> None:
        if not self.quiet:
            self.echo(line)

    def reserve(self, flow_id: str) -> int:
        """The number of the flow's next raw event row, taken now: a row held back by the
        redaction is written later, in its place."""
        seq = self._seq.get(flow_id, 0)
        self._seq[flow_id] = seq + 1
        return seq

    def raw(
        self, flow_id: str, at: float, event: str, count: int, data: str, seq: int | None = None
    ) -> None:
        """One row of raw events, in the flow's order (at `seq` when it was reserved): an SSE
        chunk's completed events (as the SSE text that `reprocess` feeds to the decoder again)
        or a WebSocket frame, redacted."""
        if seq is None:
            seq = self.reserve(flow_id)
        self.put(EventRow(flow_id, seq, at, event, count, data))

    def forget(self, flow_id: str) -> None:
        self._seq.pop(flow_id, None)

    def report(self, findings: list[Finding]) -> None:
        for finding in findings:
            self.put(FindingRow(
                rule=finding.rule, severity=finding.severity, message=finding.message,
                conversation_id=finding.conversation_id, call_id=finding.call_id,
                return_id=finding.return_id, flow_id=finding.flow_id,
                evidence=self.redact.dumps(finding.evidence), created_at=time.time(),
            ))  # fmt: skip
            where = finding.call_id or finding.return_id or finding.flow_id
            self.say(f"finding {finding.severity:<7} {finding.rule}  {finding.message}  ({where})")

    def failure(self, flow_id: str, detail: str) -> None:
        """Our own failure on a flow, kept with it (the traffic went on). An exception's message
        may quote what it failed on: it is redacted as plain text is."""
        text = self.redact.scrub(detail[:FAILURE_READ])[:FAILURE_KEPT]
        self.put(FlowRow(flow_id, failure=text))
