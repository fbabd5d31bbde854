"""A capture's findings are a function of its content: after any import, re-import, merge,
reprocess or killed import, the findings table is what `convtap audit` makes from scratch, and
`calls` shows the same set."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from tests.runner import convtap
from tests.test_adversarial import calls_har

RULES = Path(__file__).resolve().parents[2] / "captures" / "examples" / "rules"
FINDING = "rule, severity, message, conversation_id, call_id, return_id, flow_id, evidence"


def stored(db: Path) -> Counter[tuple[object, ...]]:
    with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        return Counter(conn.execute(f"SELECT {FINDING} FROM findings").fetchall())


def from_scratch(db: Path, tmp_path: Path) -> Counter[tuple[object, ...]]:
    """What `convtap audit` stores for the same content (run on a copy of the `.db` alone)."""
    copy = tmp_path / "scratch" / db.name
    copy.parent.mkdir(exist_ok=True)
    shutil.copy(db, copy)
    assert convtap("audit", "--db", str(copy)).returncode in (0, 1)
    return stored(copy)


def assert_as_audited(db: Path, tmp_path: Path) -> None:
    found = stored(db)
    assert found == from_scratch(db, tmp_path)
    ledger = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    per_call = Counter(key[4] for key in found.elements() if key[4] is not None)
    assert {row["call_id"]: row["findings"] for row in ledger} == {
        row["call_id"]: per_call[row["call_id"]] for row in ledger
    }


def split(har: Path, at: int, folder: Path) -> tuple[Path, Path]:
    """A HAR cut in two files: its first `at` entries, and the rest."""
    whole = json.loads(har.read_text())
    entries = whole["log"]["entries"]
    parts = []
    for name, part in (("a", entries[:at]), ("b", entries[at:])):
        path = folder / f"{name}.har"
        path.write_text(json.dumps({**whole, "log": {**whole["log"], "entries": part}}))
        parts.append(path)
    return parts[0], parts[1]


def test_a_call_and_its_return_imported_in_two_runs_are_one_session(tmp_path: Path) -> None:
    call, answer = split(RULES / "return-call-id" / "pass.har", 3, tmp_path)
    db = tmp_path / "two.db"
    for part in (call, answer):
        assert convtap("import", str(part), "--db", str(db)).returncode == 0
    rules = {key[0] for key in stored(db)}
    assert "return-orphan" not in rules and "call-unanswered" not in rules
    assert_as_audited(db, tmp_path)
    once = tmp_path / "once.db"
    assert convtap("import", str(call), str(answer), "--db", str(once)).returncode == 0
    assert stored(db) == stored(once)


def test_the_return_imported_before_its_call_is_answered_once_the_call_is_in(
    tmp_path: Path,
) -> None:
    call, answer = split(RULES / "return-call-id" / "pass.har", 3, tmp_path)
    db = tmp_path / "capture.db"
    assert convtap("import", str(answer), "--db", str(db)).returncode == 0
    assert "return-orphan" in {key[0] for key in stored(db)}  # no call yet: it answers none
    assert convtap("import", str(call), "--db", str(db)).returncode == 0
    assert "return-orphan" not in {key[0] for key in stored(db)}
    assert_as_audited(db, tmp_path)


def test_a_merge_of_two_captures_is_audited_as_one(tmp_path: Path) -> None:
    call, answer = split(RULES / "return-call-id" / "pass.har", 3, tmp_path)
    first, second, team = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "team.db"
    assert convtap("import", str(call), "--db", str(first)).returncode == 0
    assert convtap("import", str(answer), "--db", str(second)).returncode == 0
    assert "call-unanswered" in {key[0] for key in stored(first)}
    assert convtap("import", str(first), str(second), "--db", str(team)).returncode == 0
    assert "call-unanswered" not in {key[0] for key in stored(team)}
    assert_as_audited(team, tmp_path)


def test_a_re_import_and_a_reprocess_keep_the_findings_of_the_content(tmp_path: Path) -> None:
    db = tmp_path / "capture.db"
    hars = sorted(RULES.glob("*/fail.har"))
    assert convtap("import", *map(str, hars), "--db", str(db)).returncode == 0
    assert_as_audited(db, tmp_path)
    before = stored(db)
    assert convtap("import", *map(str, hars), "--db", str(db)).returncode == 0
    assert stored(db) == before
    assert convtap("reprocess", "--db", str(db)).returncode == 0
    assert stored(db) == before
    assert_as_audited(db, tmp_path)


def flows(db: Path) -> int:
    try:
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM flows").fetchone()[0])
    except sqlite3.Error:
        return 0  # not made yet


@pytest.mark.process
def test_an_import_killed_midway_and_run_again_has_the_findings_of_one(tmp_path: Path) -> None:
    har = tmp_path / "calls.har"
    har.write_text(json.dumps(calls_har(200)))  # 400 flows: 200 calls, each with its return
    whole = tmp_path / "whole.db"
    assert convtap("import", str(har), "--db", str(whole)).returncode == 0
    assert flows(whole) == 400 and sum(stored(whole).values()) > 0
    db = tmp_path / "killed.db"
    command = [sys.executable, "-m", "convtap.cli", "import", str(har), "--db", str(db)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while flows(db) < 100:  # killed with a quarter of its flows in
        assert proc.poll() is None and time.monotonic() < deadline, "it ended first"
        time.sleep(0.005)
    proc.kill()
    proc.wait(30)
    assert flows(db) < 400, "killed too late to prove anything"
    ran = convtap("import", str(har), "--db", str(db))  # as the docs say: run it again
    assert ran.returncode == 0, ran.stderr
    assert flows(db) == 400
    assert_as_audited(db, tmp_path)
    assert Counter(key[:2] for key in stored(db).elements()) == Counter(
        key[:2] for key in stored(whole).elements()
    )
