"""A capture's findings, made from what it holds: the same whoever asks (`convtap audit`, the
end of an import, a merge or a reprocess), so that they never depend on how the capture arrived
(in one import or several, in one run or after one killed midway).

The capture is read back as the happenings the recorder fed its live audit
(`store.database.audit_timeline`) and fed to a fresh auditor, unbounded, through its one entry.
"""

from __future__ import annotations

import time
from dataclasses import replace

import sqlite_utils

from convtap.contract.audit import audit
from convtap.contract.registry import Finding
from convtap.store.database import audit_timeline, replace_findings, turn_conversations
from convtap.store.rows import FindingRow
from convtap.wire.jsonvalue import dumps


def from_content(read: sqlite_utils.Database) -> tuple[list[Finding], int]:
    """Every finding of the capture, and how many returns and outputs were checked. A first
    turn's request is audited before its conversation is named: the conversation is the one
    the server assigned to that turn."""
    findings, answers = audit(audit_timeline(read))
    unnamed = {f.flow_id for f in findings if f.conversation_id is None and f.flow_id}
    assigned = turn_conversations(read, unnamed)
    named = [
        replace(f, where=replace(f.where, conversation_id=assigned[f.flow_id]))
        if f.conversation_id is None and f.flow_id in assigned else f
        for f in findings
    ]  # fmt: skip
    return named, answers


def store(write: sqlite_utils.Database, findings: list[Finding]) -> None:
    """The capture's findings table replaced by `findings` (one transaction)."""
    now = time.time()
    replace_findings(write, [finding_row(f, now) for f in findings])


def rebuild(write: sqlite_utils.Database, read: sqlite_utils.Database | None = None) -> None:
    """The findings table made from the capture's content (`read`: another connection to it,
    for a capture much larger than memory; else `write` reads too)."""
    store(write, from_content(read or write)[0])


def finding_row(finding: Finding, at: float) -> FindingRow:
    return FindingRow.of(finding, dumps(finding.evidence), at)
