"""Where the recorder's sides write: rows (redacted before they leave), raw events in each
flow's order, the echo lines `convtap record` prints, and the findings of the live audit."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Protocol

from convtap.contract.auditor import Auditor
from convtap.contract.registry import Finding
from convtap.record.redact import Redactor

LIVE_LIMIT = 4096  # calls, turns and conversations the live audit remembers
FAILURE_KEPT = 2000  # characters of a failure's message stored with its flow
FAILURE_READ = 20_000  # characters of it searched for secrets (more than any kept one spans)


class Sink(Protocol):
    def put(self, kind: str, table: str, row: dict[str, Any]) -> None: ...


class Output:
    def __init__(
        self, sink: Sink, redactor: Redactor, echo: Callable[[str], None] | None = None
    ) -> None:
        self.sink, self.redact = sink, redactor
        self.echo: Callable[[str], None] = echo or (lambda line: None)
        self.auditor = Auditor(LIVE_LIMIT)  # the contract rules, checked as the session happens
        self.quiet = False  # rebuilding state after a crash: what it derives is already stored
        self._seq: dict[str, int] = {}  # flow id -> the next raw event row's number

    def upsert(self, table: str, row: dict[str, Any]) -> None:
        if not self.quiet:
            self.sink.put("upsert", table, row)

    def insert(self, table: str, row: dict[str, Any]) -> None:
        if not self.quiet:
            self.sink.put("insert", table, row)

    def say(self, line: str) -> None:
        if not self.quiet:
            self.echo(line)

    def raw(self, flow_id: str, at: float, event: str, count: int, data: str) -> None:
        """One row of raw events, in the flow's order: an SSE chunk's completed events (as the
        SSE text that `reprocess` feeds to the decoder again) or a WebSocket frame, redacted."""
        seq = self._seq.get(flow_id, 0)
        self._seq[flow_id] = seq + 1
        self.insert("events", {"flow_id": flow_id, "seq": seq, "at": at, "event": event,
                               "count": count, "data": data})  # fmt: skip

    def forget(self, flow_id: str) -> None:
        self._seq.pop(flow_id, None)

    def report(self, findings: list[Finding]) -> None:
        for finding in findings:
            row = asdict(finding)
            row["evidence"] = self.redact.dumps(row["evidence"])
            row["created_at"] = time.time()
            self.insert("findings", row)
            where = finding.call_id or finding.return_id or finding.flow_id
            self.say(f"finding {finding.severity:<7} {finding.rule}  {finding.message}  ({where})")

    def failure(self, flow_id: str, detail: str) -> None:
        """Our own failure on a flow, kept with it (the traffic went on). An exception's message
        may quote what it failed on: it is redacted as plain text is."""
        text = self.redact.scrub(detail[:FAILURE_READ])[:FAILURE_KEPT]
        self.upsert("flows", {"id": flow_id, "failure": text})
