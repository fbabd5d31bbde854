"""Import (convtap.ingest.readers) and reprocess: HAR, .mitm and .sse through the live hooks."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from convtap.ingest.readers import read_flows
from mitmproxy import io

from tests.runner import convtap
from tests.seeds import CALL_ID, CONV, SSE, call_and_return_har

ROOT = Path(__file__).resolve().parents[2]


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_har_import_yields_the_call_the_return_and_the_pairing(tmp_path: Path) -> None:
    har = tmp_path / "session.har"
    har.write_text(json.dumps(call_and_return_har()))
    db = tmp_path / "capture.db"
    proc = convtap("import", str(har), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert "imported 2 flows" in proc.stdout
    assert rows(db, "SELECT call_id, tool, kind, complete, conversation_id FROM tool_calls") == [
        (CALL_ID, "alefita_way", "local", 1, CONV)
    ]
    assert rows(db, "SELECT call_id, tool, body_tool, parent_message_id FROM tool_returns") == [
        (CALL_ID, "alefita_way", "alefita_way", CALL_ID)
    ]
    ledger = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert [(r["call_id"], r["answered"], r["accepted"], r["continued"]) for r in ledger] == [
        (CALL_ID, True, True, True)
    ]
    # importing the same file again adds nothing
    again = convtap("import", str(har), "--db", str(db))
    assert "imported 0 flows" in again.stdout and "2 already there" in again.stdout
    assert rows(db, "SELECT count(*) FROM flows") == [(2,)]
    assert rows(db, "SELECT count(*) FROM tool_returns") == [(1,)]


def test_import_sse_with_resume_leg_and_mitm_file(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    proc = convtap("import", str(SSE / "resume_cut.sse"), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert rows(db, "SELECT legs, done, truncated FROM turns") == [(2, 1, 0)]
    # the same flows written as a .mitm file import like the live ones
    mitm = tmp_path / "flows.mitm"
    har = tmp_path / "s.har"
    har.write_text(json.dumps(call_and_return_har()))
    with mitm.open("wb") as handle:
        writer = io.FlowWriter(handle)
        for flow, _ in read_flows(har):
            writer.add(flow)
    db2 = tmp_path / "m.db"
    assert convtap("import", str(mitm), "--db", str(db2)).returncode == 0
    assert rows(db2, "SELECT call_id FROM tool_returns") == [(CALL_ID,)]


def test_a_raw_responses_stream_is_imported_as_one(tmp_path: Path) -> None:
    """An `.sse` body of the Responses API (here without `event:` lines, in compact JSON) is
    recorded as a Responses flow with its client calls, not as an f/conversation turn."""
    example = (ROOT / "captures/examples/responses/function_call.sse").read_text()
    events = [json.loads(line[6:]) for line in example.splitlines() if line.startswith("data: ")]
    body = tmp_path / "bare.sse"
    body.write_text("".join(f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events))
    db = tmp_path / "r.db"
    for stream in (ROOT / "captures/examples/responses/function_call.sse", body):
        proc = convtap("import", str(stream), "--db", str(db))
        assert proc.returncode == 0, proc.stderr
    assert rows(db, "SELECT DISTINCT kind, path FROM flows") == [("responses", "/v1/responses")]
    assert rows(db, "SELECT DISTINCT recipient, call_id FROM tool_calls ORDER BY 1") == [
        ("function_call", "call_Qx7RkP2m"), ("tool_search_call", "call_S1kq9Wz")]  # fmt: skip
    decoded = convtap("decode", "--format", "json", str(body))
    assert json.loads(decoded.stdout)["protocol"] == "responses"


def test_reprocess_rebuilds_the_same_rows(tmp_path: Path) -> None:
    har = tmp_path / "session.har"
    har.write_text(json.dumps(call_and_return_har()))
    db = tmp_path / "capture.db"
    convtap("import", str(har), str(SSE / "resume_cut.sse"), "--db", str(db))
    query = (
        "SELECT id, conversation_id, done, stream_complete, truncated, event_count, legs "
        "FROM turns ORDER BY id"
    )
    before = (
        rows(db, query),
        rows(db, "SELECT * FROM messages ORDER BY id"),
        rows(db, "SELECT * FROM tool_calls"),
        rows(db, "SELECT * FROM tool_returns"),
    )
    proc = convtap("reprocess", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    after = (
        rows(db, query),
        rows(db, "SELECT * FROM messages ORDER BY id"),
        rows(db, "SELECT * FROM tool_calls"),
        rows(db, "SELECT * FROM tool_returns"),
    )
    assert before[0] == after[0] and len(before[1]) == len(after[1]) > 0
    assert [r[:9] for r in before[2]] == [r[:9] for r in after[2]]
    assert [r[:11] for r in before[3]] == [r[:11] for r in after[3]]


def test_bad_inputs_exit_2(tmp_path: Path) -> None:
    junk = tmp_path / "junk.har"
    junk.write_text('{"log": {"entries": [{"nope": 1}]}}')
    assert convtap("import", str(junk), "--db", str(tmp_path / "x.db")).returncode == 2
    assert (
        convtap("import", str(tmp_path / "missing.mitm"), "--db", str(tmp_path / "x.db")).returncode
        == 2
    )
    not_db = tmp_path / "not.db"
    not_db.write_text("hello")
    assert convtap("calls", "--db", str(not_db)).returncode == 2
    assert convtap("calls", "--db", str(tmp_path / "absent.db")).returncode == 2


def test_captures_merge_by_importing_one_database_into_another(tmp_path: Path) -> None:
    har = tmp_path / "session.har"
    har.write_text(json.dumps(call_and_return_har()))
    team_a, team_b = tmp_path / "a.db", tmp_path / "b.db"
    assert convtap("import", str(har), "--db", str(team_a)).returncode == 0
    assert convtap("import", str(SSE / "resume_cut.sse"), "--db", str(team_b)).returncode == 0
    before = rows(team_a, "SELECT * FROM tool_returns")
    proc = convtap("import", str(team_a), "--db", str(team_b))
    assert proc.returncode == 0, proc.stderr
    assert "imported 2 flows" in proc.stdout
    assert rows(team_b, "SELECT count(*) FROM flows") == [(4,)]
    assert rows(team_b, "SELECT call_id, tool FROM tool_returns") == [(CALL_ID, "alefita_way")]
    assert rows(
        team_b, "SELECT request_headers FROM flows WHERE id IN (SELECT flow_id FROM tool_returns)"
    ) == rows(
        team_a, "SELECT request_headers FROM flows WHERE id IN (SELECT flow_id FROM tool_returns)"
    )  # placeholders are not hashed twice
    assert len(before) == 1
    again = convtap("import", str(team_a), "--db", str(team_b))
    assert "imported 0 flows" in again.stdout
    assert rows(team_b, "SELECT count(*) FROM flows") == [(4,)]
    itself = convtap("import", str(team_b), "--db", str(team_b))  # refused, in one line
    assert itself.returncode == 2
    assert itself.stderr.strip().splitlines() == [
        f"convtap: {team_b} is the database it would be imported into"
    ]


def test_no_recording_starts_into_a_capture_being_reprocessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from convtap.ingest import replay
    from convtap.journal.segments import JournalError, check_free, journal_dir

    har = tmp_path / "session.har"
    har.write_text(json.dumps(call_and_return_har()))
    db = tmp_path / "capture.db"
    convtap("import", str(har), "--db", str(db))
    refused: list[str] = []
    rebuild = replay.replay_db

    def meanwhile(*args: Any, **kwargs: Any) -> tuple[int, int]:
        try:  # what `convtap record` checks before it listens
            check_free(journal_dir(db))
        except JournalError as exc:
            refused.append(str(exc))
        return rebuild(*args, **kwargs)

    monkeypatch.setattr(replay, "replay_db", meanwhile)
    assert convtap("reprocess", "--db", str(db)).returncode == 0
    assert refused and "another convtap is recording into" in refused[0]
    assert not journal_dir(db).exists()  # and nothing is left beside it


@pytest.mark.process
def test_an_import_with_nothing_of_its_own_keeps_what_another_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two imports into one new database at once: the one with nothing to import (no
    conversation traffic) ended after the other and deleted the database with the other's
    flows in it. It now removes a database only when no flow is in it, checked under SQLite's
    exclusive lock; alone, it still leaves nothing behind."""
    from convtap.ingest.capture import import_into

    nothing = tmp_path / "nothing.har"
    nothing.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "t",
                                   "version": "1"}, "entries": []}}))  # fmt: skip
    alone = tmp_path / "alone.db"
    import_into(alone, [nothing])
    assert not alone.exists()
    from convtap.ingest import capture

    db = tmp_path / "shared.db"
    har = tmp_path / "session.har"
    har.write_text(json.dumps(call_and_return_har()))
    real = capture.import_file

    def meanwhile(path: Path, *args: Any) -> tuple[int, int]:
        other = subprocess.run([sys.executable, "-m", "convtap", "import", str(har), "--db",
                                str(db)], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert other.returncode == 0, other.stderr  # another process's import, done first
        return real(path, *args)

    monkeypatch.setattr(capture, "import_file", meanwhile)
    capture.import_into(db, [nothing])  # new when it began; nothing of its own
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM flows").fetchone()[0] > 0
    from convtap.store.database import remove_if_empty

    assert remove_if_empty(db) is False and db.exists()  # a capture with flows stays


@pytest.mark.parametrize("kind", ["har", "mitm"])
def test_flows_written_out_of_order_are_imported_in_time_order(tmp_path: Path, kind: str) -> None:
    """The return written before its call (and a flow that is not ours between them): each flow
    is read again, one at a time, in time order, and the pairing is as if they came in order."""
    session = call_and_return_har()
    call, answer = session["log"]["entries"]
    other = {**call, "request": {**call["request"], "url": "https://example.com/x"}}
    session["log"]["entries"] = [answer, other, call]
    har = tmp_path / "s.har"
    har.write_text(json.dumps(session))
    source = har
    if kind == "mitm":
        source = tmp_path / "s.mitm"
        with source.open("wb") as handle:
            writer = io.FlowWriter(handle)
            for flow, _ in read_flows(har):
                writer.add(flow)
    db = tmp_path / "c.db"
    proc = convtap("import", str(source), "--db", str(db))
    assert "imported 2 flows" in proc.stdout, proc.stderr
    assert rows(db, "SELECT call_id, parent_message_id FROM tool_returns") == [(CALL_ID, CALL_ID)]
    ledger = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert [(r["answered"], r["accepted"]) for r in ledger] == [(True, True)]
