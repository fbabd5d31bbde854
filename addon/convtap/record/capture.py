"""What the commands do to a capture database as a whole: import into it, read any capture as
one, audit it, list its call ledger. Each is one call for the CLI."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from convtap.contract.audit import AuditResult, audit
from convtap.contract.registry import Finding
from convtap.record.readers import DATABASES, import_files
from convtap.record.store import audit_timeline, call_ledger, connect, count_calls, replace_findings
from convtap.record.worker import LocalRecorder
from convtap.wire.jsonvalue import dumps


def import_into(
    db: Path,
    paths: list[Path],
    *,
    redact: bool = True,
    progress: Callable[[int], None] | None = None,
) -> tuple[int, int]:
    """Import files into `db` (created when new). Returns (imported, skipped)."""
    local = LocalRecorder(str(db), redact=redact)
    try:
        return import_files(paths, local, progress)
    finally:
        local.close()


@contextmanager
def as_database(path: Path) -> Iterator[Path]:
    """A capture as a database: a database as it is, anything else imported into a temporary
    one for the duration."""
    if path.suffix in DATABASES:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="convtap-") as tmp:
        db = Path(tmp) / "capture.db"
        import_into(db, [path])
        yield db


def audit_capture(path: Path, rules: set[str] | None = None) -> AuditResult:
    """Audit a capture from scratch; its findings table is replaced by what this finds."""
    db = connect(path, create=False)
    try:
        findings, answers = audit(audit_timeline(db))
        now = time.time()
        replace_findings(db, [finding_row(f, now) for f in findings])
        calls = count_calls(db)
    finally:
        db.conn.close()
    if rules is not None:
        findings = [f for f in findings if f.rule in rules]
    return AuditResult(calls, answers, findings)


def finding_row(finding: Finding, at: float) -> dict[str, Any]:
    row = asdict(finding)
    row["evidence"] = dumps(row["evidence"])
    row["created_at"] = at
    return row


def ledger(path: Path) -> list[dict[str, Any]]:
    """The call ledger: one row per call, with its return and what became of it."""
    db = connect(path, create=False)
    try:
        rows = call_ledger(db)
    finally:
        db.conn.close()
    for row in rows:
        for key in ("answered", "accepted", "continued", "complete"):
            row[key] = bool(row[key])
    return rows
