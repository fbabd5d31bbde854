"""`convtap audit`: replay a capture database into the rule engine, keep and report findings."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from addon.delta import loads_or_none
from addon.rules import SEVERITIES, Auditor, Call, Finding
from addon.store import audit_timeline, connect, count_calls, dumps, replace_findings


@dataclass
class AuditResult:
    calls: int
    returns: int
    findings: list[Finding]

    def summary(self) -> dict[str, Any]:
        counts = {severity: 0 for severity in SEVERITIES}
        for finding in self.findings:
            counts[finding.severity] += 1
        return {"calls": self.calls, "returns": self.returns, "findings": counts}

    def to_json(self) -> dict[str, Any]:
        """`convtap audit --format json` (a contract)."""
        return {"summary": self.summary(), "findings": [asdict(f) for f in self.findings]}


def run_audit(path: Path, rules: set[str] | None = None) -> AuditResult:
    """Audit a capture from scratch; the findings table is replaced by what this finds."""
    db = connect(path, create=False)
    try:
        auditor = Auditor()
        findings: list[Finding] = []
        for at, _, kind, row in audit_timeline(db):
            if kind == "prepare":
                body = loads_or_none(row["request_body"])
                auditor.prepare(body.get("conversation_id") if isinstance(body, dict) else None, at)
            elif kind == "call":
                findings += auditor.call(call_from_row(row))
            elif kind == "request":
                findings += auditor.request(row["id"], loads_or_none(row["request_body"]), at)
            elif kind == "responses-call":
                call = {
                    "type": row["recipient"],
                    "item_id": row["item_id"],
                    "call_id": row["call_id"],
                    "name": row["tool"],
                    "execution": "client",
                }
                findings += auditor.responses.response(
                    row["turn_id"], row["conversation_id"], [call], at
                )
            elif kind == "responses-request":
                findings += auditor.responses.request(
                    row["id"], loads_or_none(row["request_body"]), at
                )
            else:
                auditor.seen(row["conversation_id"], [row["id"]])
        findings += auditor.finish()
        now = time.time()
        replace_findings(db, [finding_row(f, now) for f in findings])
        calls = count_calls(db)
    finally:
        db.conn.close()
    if rules is not None:
        findings = [f for f in findings if f.rule in rules]
    return AuditResult(calls, auditor.answers, findings)


def call_from_row(row: dict[str, Any]) -> Call:
    arguments = loads_or_none(row["arguments"])
    return Call(
        call_id=row["call_id"], recipient=row["recipient"] or "", kind=row["kind"] or "builtin",
        tool=row["tool"] or "", arguments=arguments if isinstance(arguments, dict) else None,
        arguments_text=row["arguments_text"] or "", conversation_id=row["conversation_id"],
        turn_id=row["turn_id"], at=row["called_at"] or 0.0,
    )  # fmt: skip


def finding_row(finding: Finding, at: float) -> dict[str, Any]:
    row = asdict(finding)
    row["evidence"] = dumps(row["evidence"])
    row["created_at"] = at
    return row
