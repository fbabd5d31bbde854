"""convtap.journal.segments and the recorder that consumes it: order, rotation, torn tails, modes,
and a recorder crash at any point losing nothing and recording nothing twice."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from convtap.journal.events import (
    BodyChunk,
    RecorderEvent,
    RequestSeen,
    ResponseEnded,
    ResponseStarted,
)
from convtap.journal.segments import (
    JournalError,
    JournalReader,
    JournalWriter,
    Position,
    check_free,
    committed_positions,
    hold,
    journal_dir,
    journal_id,
    position_text,
    segment_path,
    segments,
)
from convtap.record.consumer import JournalConsumer

from tests.seeds import SSE, user_turn

STREAM = (("content-type", "text/event-stream"),)
PATH = "/backend-api/f/conversation"
BODY = (SSE / "alefita_way_call.sse").read_bytes()


ROOT = Path(__file__).resolve().parents[2]


def turn_events(flow: str, at: float) -> list[RecorderEvent]:
    """One recorded turn: the request, its stream in 700-byte chunks, the end."""
    body = user_turn()
    body["conversation_id"] = f"conv-{flow}"
    events: list[RecorderEvent] = [
        RequestSeen(flow, "POST", "https://x" + PATH, "x", PATH, (), json.dumps(body).encode(), at),
        ResponseStarted(flow, 200, STREAM),
    ]
    events += [BodyChunk(flow, BODY[i : i + 700], at) for i in range(0, len(BODY), 700)]
    events.append(ResponseEnded(flow, 200, STREAM, None, "complete", at))
    return events


def interleaved(flows: int) -> list[RecorderEvent]:
    """Several turns at once, their events interleaved as concurrent sessions are."""
    per_flow = [turn_events(f"f{n}", float(n)) for n in range(flows)]
    out: list[RecorderEvent] = []
    while any(per_flow):
        for events in per_flow:
            if events:
                out.append(events.pop(0))
    return out


def write_journal(db: Path, events: list[RecorderEvent], segment_bytes: int = 4096) -> None:
    writer = JournalWriter(journal_dir(db), segment_bytes)
    for event in events:
        writer.append(event)
    writer.close()


def test_events_come_back_in_order_across_segments(tmp_path: Path) -> None:
    events = interleaved(3)
    write_journal(tmp_path / "c.db", events)
    directory = journal_dir(tmp_path / "c.db")
    assert len(segments(directory)) > 3  # rotated
    assert directory.stat().st_mode & 0o777 == 0o700
    assert all(
        segment_path(directory, n).stat().st_mode & 0o777 == 0o600 for n in segments(directory)
    )
    reader = JournalReader(directory, Position(0, 0))
    read = [event for event, _ in reader.read(limit=10_000)]
    assert read[0] is None  # the run marker
    assert read[1:] == events and reader.closed


def test_the_taps_chunk_writer_writes_what_append_writes(tmp_path: Path) -> None:
    """`chunks(flow)` (the tap's hot path) and `append(BodyChunk)` make the same records, and a
    chunk writer rotates segments as `append` does."""
    events = interleaved(3)
    write_journal(tmp_path / "a.db", events)
    writer = JournalWriter(journal_dir(tmp_path / "b.db"), 4096)
    sinks = {}
    for event in events:
        if isinstance(event, BodyChunk):
            sink = sinks.setdefault(event.flow_id, writer.chunks(event.flow_id))
            sink(event.data, event.at)
        else:
            writer.append(event)
    writer.close()
    for db in ("a.db", "b.db"):
        directory = journal_dir(tmp_path / db)
        assert len(segments(directory)) > 3
    contents = [
        b"".join(segment_path(journal_dir(tmp_path / db), n).read_bytes() for n in segments(
            journal_dir(tmp_path / db)))
        for db in ("a.db", "b.db")
    ]  # fmt: skip
    assert contents[0] == contents[1]


def test_a_torn_tail_is_skipped_once_a_newer_run_exists(tmp_path: Path) -> None:
    directory = journal_dir(tmp_path / "c.db")
    first = JournalWriter(directory)
    first.append(turn_events("a", 1.0)[0])
    path = segment_path(directory, segments(directory)[-1])
    with path.open("ab") as handle:  # a crash in the middle of a write
        handle.write(b"\x01\x00\x00\x10\x00partial")
    reader = JournalReader(directory, Position(0, 0))
    assert len(list(reader.read())) == 2  # run marker, request; then it waits for the writer
    assert list(reader.read()) == [] and not reader.closed
    second = JournalWriter(directory)  # the next run
    second.append(turn_events("b", 2.0)[0])
    second.close()
    rest = [event for event, _ in reader.read()]
    assert rest[0] is None and isinstance(rest[1], RequestSeen) and rest[1].flow_id == "b"
    assert reader.closed


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


SNAPSHOT = [
    "SELECT flow_id, seq, count, data, raw FROM events ORDER BY flow_id, seq",
    "SELECT id, kind, outcome, failure FROM flows ORDER BY id",
    "SELECT call_id, tool, complete, arguments FROM tool_calls ORDER BY call_id",
    "SELECT id, status, text FROM messages ORDER BY id",
    "SELECT rule, call_id, flow_id FROM findings ORDER BY rule, call_id, flow_id",
]


def snapshot(db: Path) -> list[list[tuple[object, ...]]]:
    return [rows(db, sql) for sql in SNAPSHOT]


def consume(db: Path, crash_after: int | None = None) -> None:
    """The recorder process's loop; with `crash_after`, it dies (kill -9) after taking that many
    records: what it committed stays, what it had not committed is gone."""
    consumer = JournalConsumer(str(db), redact=True, echo="off")
    if crash_after is None:
        consumer.run(lambda timeout: True)
        consumer.close()
        return
    for taken, (event, position) in enumerate(consumer.reader.read(limit=crash_after), 1):
        consumer._take(event, position)
        if taken % 7 == 0:
            consumer.writer.flush()  # commits happen along the way
    consumer.reader.release()
    consumer.writer.db.conn.close()  # dies: the last, uncommitted batch is lost


@pytest.mark.parametrize("crash_after", [1, 3, 9, 17, 40, 61])
def test_a_recorder_crash_loses_nothing_and_records_nothing_twice(
    tmp_path: Path, crash_after: int
) -> None:
    events = interleaved(3)
    whole = tmp_path / "whole" / "c.db"
    whole.parent.mkdir()
    write_journal(whole, events)
    consume(whole)
    assert not journal_dir(whole).exists()  # consumed, then removed
    expected = snapshot(whole)
    assert expected[2] and expected[0]

    crashed = tmp_path / "crashed" / "c.db"
    crashed.parent.mkdir()
    write_journal(crashed, events)
    consume(crashed, crash_after)
    assert journal_dir(crashed).exists()
    consume(crashed)  # the next recorder goes on from what was committed
    assert not journal_dir(crashed).exists()
    assert snapshot(crashed) == expected


RECOVER_BIG_CAPTURE = """
import resource, sys
from pathlib import Path
from convtap.store.database import Writer
from convtap.record.consumer import JournalConsumer
from convtap.store.rows import FlowRow
from tests.journal.test_journal import consume, interleaved, write_journal

db = Path(sys.argv[1])
writer = Writer(db)
body = "x" * 1_000_000
for n in range(80):  # 80 MB of request bodies, which the audit's replay reads in time order
    writer.put(FlowRow(f"old-{n}", kind="conversation", started_at=float(80 - n),
                       request_body=body))
writer.close()
write_journal(db, interleaved(3))
consume(db, crash_after=9)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
consumer = JournalConsumer(str(db), redact=True, echo="off")  # recovers: replays the audit
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


@pytest.mark.process
def test_recovering_after_a_crash_reads_a_big_capture_in_bounded_memory(tmp_path: Path) -> None:
    """The writer's connection keeps SQLite's temporary data in memory (its statement journals);
    the replay after a crash sorts every request body by time, which must not happen there."""
    done = subprocess.run([sys.executable, "-c", RECOVER_BIG_CAPTURE, str(tmp_path / "c.db")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) < 40  # MB the peak grew by; the sort in memory took 80


@pytest.mark.process
def test_one_proxy_run_holds_a_journal_and_its_recorder_keeps_it(tmp_path: Path) -> None:
    """Two runs in one journal lost half their traffic (each took the other's open segment for a
    torn tail): the journal is held by one run, and by its recorder process for as long as it
    lives (it may catch up after the proxy died)."""
    directory = journal_dir(tmp_path / "c.db")
    check_free(directory)  # no journal yet: free, and nothing is made
    assert not directory.exists()
    first = hold(directory)
    with pytest.raises(JournalError, match=r"another convtap is recording into .*c\.db"):
        hold(directory)
    with pytest.raises(JournalError):
        check_free(directory)
    recorder = subprocess.Popen(["sleep", "60"], pass_fds=(first,))  # inherits the lock
    try:
        os.close(first)  # the proxy is gone
        with pytest.raises(JournalError):
            hold(directory)
    finally:
        recorder.kill()
        recorder.wait()
    check_free(directory)  # both gone: the next run may have it
    os.close(hold(directory))
    other = journal_dir(tmp_path / "other.db")
    other.write_text("a file where the journal goes")
    with pytest.raises(JournalError, match="cannot use the journal"):
        check_free(other)  # what `convtap record` says in one line before it starts


def test_a_damaged_record_costs_only_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bytes that are not an event (bit rot, a bad disk) in the middle of a segment: that record
    is skipped and counted, the recorder goes on with every other."""
    events = interleaved(3)
    whole, damaged = tmp_path / "whole.db", tmp_path / "damaged.db"
    write_journal(whole, events, segment_bytes=1 << 20)
    write_journal(damaged, events, segment_bytes=1 << 20)
    segment = segment_path(journal_dir(damaged), segments(journal_dir(damaged))[0])
    data = bytearray(segment.read_bytes())
    pickled = data.find(b"\x80\x05")  # the first pickled record: a RequestSeen
    data[pickled + 2 : pickled + 40] = b"\xff" * 38
    segment.write_bytes(bytes(data))
    consume(whole)
    consume(damaged)
    assert "1 damaged record(s) of the journal" in capsys.readouterr().err
    assert not journal_dir(damaged).exists()
    flows = rows(damaged, "SELECT id FROM flows ORDER BY id")
    assert len(flows) == len(rows(whole, "SELECT id FROM flows")) - 1  # that flow's request
    events_kept = rows(damaged, "SELECT count(*) FROM events")[0][0]
    assert events_kept > 0


def test_a_position_committed_for_another_journal_reads_a_new_one_from_its_start(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "capture.db.journal"
    writer = JournalWriter(directory)
    writer.close()
    ident = journal_id(directory)
    assert len(ident) == 16
    mine = position_text(Position(1, 900), Position(1, 40), ident)
    assert committed_positions(directory, mine) == (Position(1, 900), Position(1, 40))
    earlier = position_text(Position(3, 900), Position(3, 900), "0" * 16)
    assert committed_positions(directory, earlier) == (Position(0, 0), Position(0, 0))
    # a position committed before journals had an id is another journal's too
    assert committed_positions(directory, "3:900;3:900") == (Position(0, 0), Position(0, 0))
    (directory / "id").unlink()  # a journal made before ids, and its own position
    assert committed_positions(directory, "3:900;3:40") == (Position(3, 900), Position(3, 40))
