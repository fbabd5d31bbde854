"""`convtap audit`: a session fed to a fresh auditor, in time order, gives the findings.

The timeline is plain data (what a capture recorded, read back by `convtap.store` as the
happenings the recorder fed live); this module never opens a database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from convtap.contract.auditor import Auditor
from convtap.contract.happenings import Happening, SessionEnded
from convtap.contract.registry import SEVERITIES, Finding


@dataclass
class AuditResult:
    calls: int
    returns: int
    findings: list[Finding]
    stored: bool = True  # the findings went into the capture's findings table

    def summary(self) -> dict[str, Any]:
        counts = {severity: 0 for severity in SEVERITIES}
        for finding in self.findings:
            counts[finding.severity] += 1
        return {"calls": self.calls, "returns": self.returns, "findings": counts}

    def to_json(self) -> dict[str, Any]:
        """`convtap audit --format json` (a contract)."""
        return {"summary": self.summary(), "findings": [f.to_json() for f in self.findings]}


def audit(timeline: Iterable[Happening]) -> tuple[list[Finding], int]:
    """Every finding of a session, and how many returns and outputs were checked."""
    auditor = Auditor()
    findings = feed(auditor, timeline)
    findings += auditor.handle(SessionEnded())
    return findings, auditor.answers


def feed(auditor: Auditor, timeline: Iterable[Happening]) -> list[Finding]:
    """Feed a session to an auditor (which then knows it); the findings on the way."""
    findings: list[Finding] = []
    for happening in timeline:
        findings += auditor.handle(happening)
    return findings
