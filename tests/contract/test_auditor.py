"""convtap.contract.auditor has one way in (`Auditor.handle`): the recorder feeds it live and the
store feeds it a capture read back, the same happenings, with the same findings; a happening it
was fed already (a restarted recorder's) is not audited twice."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from convtap.contract.audit import audit, feed
from convtap.contract.auditor import Auditor
from convtap.contract.happenings import SessionEnded
from convtap.contract.registry import Finding
from convtap.ingest.readers import import_file
from convtap.record.local import LocalRecorder
from convtap.store.database import audit_timeline, open_readonly

RULES = Path(__file__).resolve().parents[2] / "captures" / "examples" / "rules"
EXAMPLES = sorted(RULES.glob("*/*.har"))


def key(finding: Finding | dict[str, object]) -> tuple[object, ...]:
    get = finding.get if isinstance(finding, dict) else finding.__getattribute__
    return tuple(get(name) for name in ("rule", "severity", "call_id", "return_id", "flow_id"))


def recorded_live(har: Path, db: Path) -> list[dict[str, object]]:
    """The example through a recorder auditing as it goes (as `convtap record` does): the
    findings it stored."""
    local = LocalRecorder(str(db))
    try:
        import_file(har, local, set())
    finally:
        local.close()
    capture = open_readonly(db)
    try:
        return list(capture.query("SELECT * FROM findings"))
    finally:
        capture.conn.close()


@pytest.mark.parametrize("har", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_live_and_from_the_capture_the_auditor_finds_the_same(har: Path, tmp_path: Path) -> None:
    db = tmp_path / "capture.db"
    live = Counter(map(key, recorded_live(har, db)))
    capture = open_readonly(db)
    try:
        found, _ = audit(audit_timeline(capture))
    finally:
        capture.conn.close()
    assert Counter(map(key, found)) == live
    if har.stem == "fail":  # the example breaks its rule, both ways
        assert har.parent.name in {rule for rule, *_ in live}


@pytest.mark.parametrize("har", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_session_fed_twice_is_audited_once(har: Path, tmp_path: Path) -> None:
    db = tmp_path / "capture.db"
    recorded_live(har, db)
    capture = open_readonly(db)
    try:
        once, _ = audit(audit_timeline(capture))
        auditor = Auditor()
        twice = feed(auditor, audit_timeline(capture))
        again = feed(auditor, audit_timeline(capture))  # as a restarted recorder feeds it
        twice += auditor.handle(SessionEnded())
    finally:
        capture.conn.close()
    assert again == []
    assert Counter(map(key, twice)) == Counter(map(key, once))
