"""The command line, run as a user runs it: `convtap ...` in a subprocess."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.goldens import EXAMPLES
from tests.runner import convtap

ROOT = Path(__file__).resolve().parent.parent
CONTRACT_KEYS = {
    "protocol",
    "encoding",
    "conversation_id",
    "done",
    "stream_complete",
    "truncated",
    "event_count",
    "messages",
    "events",
    "other_events",
    "errors",
    "tool_calls",
}


@dataclass
class RanBytes:
    returncode: int
    stdout: bytes
    stderr: bytes


def run(*args: str, stdin: bytes = b"") -> RanBytes:
    ran = convtap(*args, stdin=stdin)
    return RanBytes(ran.returncode, ran.stdout_bytes, ran.stderr.encode())


def test_decode_json_has_the_contract_shape() -> None:
    proc = run("decode", "--format", "json", str(EXAMPLES / "alefita_way_call.sse"))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == CONTRACT_KEYS
    assert out["protocol"] == "f-conversation" and out["encoding"] == "v1"
    assert out["tool_calls"][0]["tool"] == "alefita_way"
    assert set(out["tool_calls"][0]) == {
        "call_id",
        "recipient",
        "kind",
        "tool",
        "arguments",
        "arguments_text",
        "complete",
    }
    assert all(set(e) == {"event_index", "kind", "detail"} for e in out["errors"])


def test_decode_stdin_resume_legs_and_ws() -> None:
    body = (EXAMPLES / "resume_cut.sse").read_bytes()
    proc = run(
        "decode", "--format", "json", "-", str(EXAMPLES / "resume_cut.resume.sse"), stdin=body
    )
    out = json.loads(proc.stdout)
    assert (out["done"], out["truncated"], out["errors"]) == (True, False, [])
    proc = run(
        "decode",
        "--format",
        "json",
        "--ws",
        str(EXAMPLES / "handoff_ws.frames.jsonl"),
        str(EXAMPLES / "handoff_ws.sse"),
    )
    assert [c["tool"] for c in json.loads(proc.stdout)["tool_calls"]] == ["handoff"]


def test_decode_redacts_unless_told_not_to() -> None:
    token = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LWNvbmR1aXQtdG9rZW4.x1y2z3"
    path = str(EXAMPLES / "alefita_way_call.sse")
    for fmt in ("json", "text"):
        assert token.encode() not in run("decode", "--format", fmt, path).stdout
    proc = run("decode", "--format", "json", "--no-redact", path)
    assert token.encode() in proc.stdout and b"--no-redact" in proc.stderr


def test_decode_text_marks_calls_and_lists_errors() -> None:
    text = run("decode", str(EXAMPLES / "alefita_way_call.sse")).stdout.decode()
    assert "local tool call: alefita_way (complete)" in text
    text = run("decode", str(EXAMPLES / "malformed.sse")).stdout.decode()
    assert "5 decode error(s)" in text and "malformed-json" in text


def test_decode_errors_in_input_still_exit_0() -> None:
    proc = run("decode", "--format", "json", "-", stdin=b"event: delta\ndata: {nope\n\n\xff")
    assert proc.returncode == 0
    out = json.loads(proc.stdout)
    assert out["errors"][0]["kind"] == "malformed-json" and out["truncated"] is True


@pytest.mark.parametrize(
    "args",
    [
        ("decode", "/nonexistent/body.sse"),
        ("decode",),
        ("decode", "--format", "xml", "-"),
        ("decode", "--ws", "/nonexistent.jsonl", "-"),
    ],
)
def test_decode_bad_usage_or_unreadable_input_exits_2(args: tuple[str, ...]) -> None:
    proc = run(*args)
    assert proc.returncode == 2
    assert proc.stderr.strip() and len(proc.stderr.decode().strip().splitlines()) <= 4


def test_schemas_are_current() -> None:
    proc = run("schemas", "--check")
    assert proc.returncode == 0, proc.stderr.decode()


def test_schemas_check_fails_when_stale(tmp_path: Path) -> None:
    stale = tmp_path / "schemas"
    shutil.copytree(ROOT / "schemas", stale)
    first = sorted(stale.glob("*.json"))[0]
    first.write_text(first.read_text().replace('"title"', '"titel"', 1))
    (stale / "Gone.json").write_text("{}")
    proc = run("schemas", "--check", "--dir", str(stale))
    assert proc.returncode == 1
    assert first.name in proc.stderr.decode() and "Gone.json" in proc.stderr.decode()
    assert run("schemas", "--dir", str(stale)).returncode == 0
    assert run("schemas", "--check", "--dir", str(stale)).returncode == 0


def test_every_command_is_documented_in_the_readme() -> None:
    from convtap.cli.common import COMMANDS  # every command (tests/test_cli_loading.py)

    readme = (ROOT / "README.md").read_text()
    missing = [name for name in COMMANDS if f"convtap {name}" not in readme]
    assert missing == []
    assert {"diff", "shapes"} <= set(COMMANDS)
    assert readme.startswith("# convtap\n\n```sh\nmake demo")
    assert "make test" in readme.split("```")[1]


LONE_SURROGATES = (
    'event: delta_encoding\ndata: "v1"\n\n'
    'event: delta\ndata: {"p": "", "o": "add", "v": {"message": {"id": "m", "author": {"role": '
    '"assistant"}, "content": {"parts": [""]}}}}\n\n'
    'event: delta\ndata: {"p": "/message/content/parts/0", "o": "append", "v": "a\\udc00"}\n\n'
    'event: delta\ndata: {"v": "\\ud800b"}\n\ndata: [DONE]\n\n'
)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_decode_writes_a_lone_surrogate_as_its_escape(fmt: str, tmp_path: Path) -> None:
    """JSON text may carry a lone surrogate (`\\ud800`), UTF-8 cannot: it is written as its
    escape (it raised at the write, with a traceback)."""
    body = tmp_path / "lone.sse"
    body.write_text(LONE_SURROGATES)
    proc = run("decode", "--format", fmt, str(body))
    assert proc.returncode == 0, proc.stderr
    if fmt == "json":
        assert json.loads(proc.stdout)["messages"][0]["content"]["parts"] == ["a\udc00\ud800b"]
    else:
        assert b"a\\udc00\\ud800b" in proc.stdout


def test_traffic_left_in_the_journal_is_said_and_caught_up(tmp_path: Path) -> None:
    """A recording that stopped before its recorder had taken everything leaves the rest in the
    journal: the commands that read the capture say so, and `record --catch-up` records it."""
    import os

    from convtap.journal.segments import hold, journal_dir

    from tests.journal.test_journal import consume, interleaved, snapshot, write_journal

    whole, db = tmp_path / "whole.db", tmp_path / "c.db"
    for path in (whole, db):
        write_journal(path, interleaved(3))
    consume(whole)
    consume(db, crash_after=9)  # the recorder died: part recorded, the rest in the journal
    lock = hold(journal_dir(db))  # as if a recording held it, catching up
    try:
        ran = convtap("calls", "--db", str(db))
        assert ran.returncode == 0
        assert "of traffic is still being recorded into" in ran.stderr
        refused = convtap("record", "--catch-up", "--db", str(db))
        assert refused.returncode == 2 and "another convtap is recording into" in refused.stderr
    finally:
        os.close(lock)
    for command in ("calls", "audit", "report"):
        ran = convtap(command, "--db", str(db))
        assert ran.stderr.count("\n") == 1, ran.stderr
        assert "was not recorded into it (its recording stopped first): `convtap record" in (
            ran.stderr
        )
    refused = convtap("reprocess", "--db", str(db))  # it would rebuild without that traffic
    assert refused.returncode == 2 and f"convtap record --catch-up --db {db}" in refused.stderr
    caught = convtap("record", "--catch-up", "--db", str(db))
    assert caught.returncode == 0, caught.stderr
    assert f"recorded what the journal beside {db} held" in caught.stdout
    assert not journal_dir(db).exists()
    assert snapshot(db) == snapshot(whole)  # nothing lost, nothing twice
    assert convtap("calls", "--db", str(db)).stderr == ""
    assert convtap("reprocess", "--db", str(db)).returncode == 0
    again = convtap("record", "--catch-up", "--db", str(db))
    assert again.returncode == 0 and "nothing to catch up" in again.stdout
    fresh = tmp_path / "fresh.db"
    assert "nothing to catch up" in convtap("record", "--catch-up", "--db", str(fresh)).stdout
    assert not fresh.exists()  # no database made for nothing


@pytest.mark.process
def test_calls_and_audit_text_fit_120_columns_unless_wide(tmp_path: Path) -> None:
    """The demo's capture (UUIDs, long Responses ids, the longest rule ids): every line of
    `calls` and `audit` fits 120 columns; `--wide` gives ids whole."""
    db = tmp_path / "demo.db"
    assert convtap("demo", "--db", str(db)).returncode == 0
    for command in (["calls"], ["audit", "--fail-on", "never"]):
        text = convtap(*command, "--db", str(db)).stdout
        assert max(map(len, text.splitlines())) <= 120, text
        wide = convtap(*command, "--db", str(db), "--wide").stdout
        assert max(map(len, wide.splitlines())) > 120
    calls = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    wide = convtap("calls", "--db", str(db), "--wide").stdout
    assert all(c["call_id"] in wide for c in calls)
    narrow = convtap("calls", "--db", str(db)).stdout
    assert all(c["call_id"][:13] + "…" in narrow for c in calls if len(c["call_id"]) > 14)
    with sqlite3.connect(db) as conn:  # the demo's client says who it is (the report shows it)
        clients = {c for (c,) in conn.execute("SELECT DISTINCT client FROM flows")}
    assert any(c and c.startswith("convtap-refclient/") for c in clients), clients
    audit = convtap("audit", "--db", str(db), "--fail-on", "never").stdout.splitlines()
    rules = [line for line in audit if line.startswith(("    error", "    warning"))]
    starts = {re.match(r" +\S+ +\S+ +", line).end() for line in rules}  # type: ignore[union-attr]
    assert len(starts) == 1  # every message starts in one column, whatever its rule id
