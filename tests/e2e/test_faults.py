"""Nothing lost at line rate: bursts through `convtap record`, kill -9 of the proxy and of the
recorder process mid-burst, a full disk. What reached the client is what the database holds."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from convtap.journal.backend import DISK_FULL
from convtap.journal.segments import JournalWriter, hold, journal_dir
from convtap.record.worker import NICE
from convtap.store.database import check_database

from tests.harness import (
    ADDON,
    MITMDUMP,
    burst_bodies,
    burst_upstream,
    children,
    complete_events,
    free_port,
    mitmdump,
    record,
    send_burst,
    small_tmpfs,
    wait_for,
    wait_for_port,
)


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def conversation(body: bytes) -> str:
    found = re.search(rb'"conversation_id": "([^"]+)"', body)
    assert found is not None
    return found.group(1).decode()


def assert_holds_what_the_client_got(db: Path, received: list[bytes]) -> None:
    """Every event the client got whole is in the database, once; every turn the client got
    whole has its tool call, complete; no flow says the recorder lost anything."""
    sql = (
        "SELECT f.started_at, sum(e.count) FROM flows f JOIN events e ON e.flow_id = f.id "
        "GROUP BY f.id ORDER BY f.started_at"
    )
    counts = sorted((int(n) for _, n in rows(db, sql)), reverse=True)
    whole = [body for body in received if body.endswith(b"data: [DONE]\n\n")]
    assert counts[: len(whole)] == sorted(map(complete_events, whole), reverse=True)
    # A turn cut by a dying proxy may hold more than its client got, never less: the proxy
    # journals a chunk before it forwards it, and the socket of a killed process may drop what
    # it had sent but not yet delivered (the client sees a reset).
    cut = sorted((n for b in received if b not in whole if (n := complete_events(b))), reverse=True)
    assert len(counts) >= len(whole) + len(cut)
    for stored, got in zip(counts[len(whole) :], cut, strict=False):
        assert stored >= got
    calls = dict(rows(db, "SELECT conversation_id, complete FROM tool_calls"))
    assert all(calls.get(conversation(body)) == 1 for body in whole)  # each whole turn's call
    # and at most the call of the one turn in flight when the proxy died, complete or not (it
    # was journaled before it was forwarded)
    assert len(calls) <= len(whole) + 1
    assert rows(db, "SELECT count(*) FROM flows WHERE failure IS NOT NULL") == [(0,)]
    unanswered = rows(db, "SELECT count(*), count(DISTINCT call_id) FROM findings "
                          "WHERE rule = 'call-unanswered'")[0]  # fmt: skip
    assert unanswered[0] == unanswered[1]  # no finding twice


def test_a_burst_at_full_speed_loses_nothing(tmp_path: Path) -> None:
    bodies = burst_bodies(60)  # about 18 MB, as fast as loopback goes
    db = tmp_path / "burst.db"
    received: list[bytes] = []
    with burst_upstream(bodies) as upstream, record(db, upstream, tmp_path) as rec:
        (recorder,) = children(rec.proc.pid)  # it yields the CPU to the proxy: traffic first
        proxy_priority = os.getpriority(os.PRIO_PROCESS, rec.proc.pid)
        lowered = min(proxy_priority + NICE, 19)  # once it has started
        assert wait_for(lambda: os.getpriority(os.PRIO_PROCESS, recorder) == lowered, 30)
        send_burst(rec.port, len(bodies), received)
        rec.proc.send_signal(signal.SIGINT)  # Ctrl-C: it waits for the recorder to catch up
        out = rec.wait(300)
    assert rec.proc.returncode == 0, out[-2000:]
    assert received == bodies  # byte-exact
    assert not journal_dir(db).exists()  # consumed and removed on a clean exit
    assert_holds_what_the_client_got(db, received)


def test_ctrl_c_mid_burst_leaves_everything_the_client_got(tmp_path: Path) -> None:
    """Ctrl-C while turns stream: the proxy waits for its recorder, closes its journal and
    stops; every event that reached the client by then is recorded, once (what streams after
    the journal closed is withheld: `tests/proxy/test_addon.py`)."""
    bodies = burst_bodies(40)
    db = tmp_path / "interrupted.db"
    received: list[bytes] = []
    with burst_upstream(bodies) as upstream, record(db, upstream, tmp_path) as rec:
        sender = threading.Thread(target=send_burst, args=(rec.port, len(bodies), received))
        sender.start()
        assert wait_for(lambda: len(received) >= 5, 60)
        rec.proc.send_signal(signal.SIGINT)
        out = rec.wait(300)
        sender.join(60)
    assert rec.proc.returncode == 0, out[-2000:]
    assert not journal_dir(db).exists()
    assert_holds_what_the_client_got(db, received)


@pytest.mark.parametrize("again", ["record", "record --catch-up"])
def test_the_recorder_killed_mid_burst_loses_nothing_after_a_restart(
    tmp_path: Path, again: str
) -> None:
    bodies = burst_bodies(40)
    db = tmp_path / "killed.db"
    received: list[bytes] = []
    with burst_upstream(bodies) as upstream:
        with record(db, upstream, tmp_path) as rec:
            sender = threading.Thread(target=send_burst, args=(rec.port, len(bodies), received))
            sender.start()
            assert wait_for(lambda: len(received) >= 5, 60)
            (recorder,) = children(rec.proc.pid)
            os.kill(recorder, signal.SIGKILL)
            out = rec.wait(60)  # it stops, loudly
            sender.join(60)
        assert rec.proc.returncode == 1
        assert "recorder process ended" in out
        assert journal_dir(db).exists()  # what was not recorded yet waits on disk
        if again == "record":
            with record(db, upstream, tmp_path) as restart:
                restart.proc.send_signal(signal.SIGINT)
                out = restart.wait(300)
            assert restart.proc.returncode == 0, out[-2000:]
        else:  # no proxy: the journal alone
            command = [sys.executable, "-m", "convtap.cli", "record", "--catch-up", "--db", str(db)]
            caught = subprocess.run(command, capture_output=True, text=True, timeout=300)
            assert caught.returncode == 0, caught.stderr[-2000:]
            assert f"recorded what the journal beside {db} held" in caught.stdout
    assert not journal_dir(db).exists()
    assert len(received) >= 5
    assert_holds_what_the_client_got(db, received)


def test_the_proxy_killed_mid_burst_leaves_everything_it_forwarded(tmp_path: Path) -> None:
    bodies = burst_bodies(40)
    received: list[bytes] = []
    with (
        burst_upstream(bodies) as upstream,
        mitmdump(tmp_path, f"reverse:http://127.0.0.1:{upstream}") as proxy,
    ):
        sender = threading.Thread(target=send_burst, args=(proxy.port, len(bodies), received))
        sender.start()
        assert wait_for(lambda: len(received) >= 5, 60)
        (recorder,) = children(proxy.process.pid)
        os.kill(proxy.process.pid, signal.SIGKILL)
        proxy.process.wait(10)
        sender.join(60)
        # the recorder sees its proxy gone, records the journal to its end and exits
        assert wait_for(lambda: not alive(recorder), 120)
    assert not journal_dir(proxy.db).exists()
    assert_holds_what_the_client_got(proxy.db, received)
    cut = rows(proxy.db, "SELECT count(*) FROM flows WHERE outcome LIKE 'interrupted%'")
    assert cut in ([(0,)], [(1,)])  # the turn in flight when it died, if any


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for its dead parent's reaper."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MB file system for the capture and its journal."""
    with small_tmpfs(tmp_path / "small", "6m") as where:
        yield where


def test_a_full_disk_stops_recording_loudly_and_never_the_traffic(
    tmp_path: Path, small_disk: Path
) -> None:
    bodies = burst_bodies(50)  # 15 MB through a 6 MB disk
    db = small_disk / "capture.db"
    received: list[bytes] = []
    with burst_upstream(bodies) as upstream, record(db, upstream, tmp_path) as rec:
        send_burst(rec.port, len(bodies), received)
        assert received == bodies  # every byte, exactly, to the client
        time.sleep(1.5)  # the watcher checks once a second
        assert rec.proc.poll() is None  # the proxy goes on
        rec.proc.send_signal(signal.SIGINT)
        out = rec.wait(120)
    assert "recording stopped" in out and "No space left on device" in out


def test_a_recorder_that_finds_the_disk_full_at_its_start_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    """The proxy's journal filled a small disk before its recorder process had opened the
    database: the recorder died with two tracebacks, the second calling the capture "not a
    usable SQLite database"."""
    with small_tmpfs(tmp_path / "small", "2m") as where:
        db = where / "capture.db"
        check_database(db)  # as `convtap record` makes it before the proxy starts
        journal = JournalWriter(journal_dir(db))
        journal.close()
        with (where / "filler").open("wb") as filler, contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        for leftover in ("-wal", "-shm"):
            Path(f"{db}{leftover}").unlink(missing_ok=True)
        command = [sys.executable, "-m", "convtap.record.worker", str(db), "--echo", "off"]
        ran = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=60)  # fmt: skip
    assert ran.returncode == DISK_FULL, ran.stderr
    assert ran.stderr.splitlines() == [
        f"convtap: recording stopped: cannot write into {db}: the disk is full (disk I/O error)"
    ]


def test_a_second_recording_into_the_same_database_is_refused(tmp_path: Path) -> None:
    """Two `convtap record` on one database (both default to captures/capture.db) shared its
    journal, and each took the other's open segment for a crash's torn tail: half the turns
    were lost, silently. The second is refused before it listens; the first loses nothing."""
    bodies = burst_bodies(30)
    db = tmp_path / "shared.db"
    received: list[bytes] = []
    with burst_upstream(bodies) as upstream:
        with record(db, upstream, tmp_path) as first:
            sender = threading.Thread(target=send_burst, args=(first.port, len(bodies), received))
            sender.start()
            second = subprocess.run(
                [sys.executable, "-m", "convtap.cli", "record", "--mode",
                 f"reverse:http://127.0.0.1:{upstream}", "--listen-port", "0", "--db", str(db)],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            sender.join(120)
            first.proc.send_signal(signal.SIGINT)
            out = first.wait(300)
        assert second.returncode == 2 and not second.stdout
        assert second.stderr.strip().splitlines() == [
            f"convtap: another convtap is recording into {db} (its journal is in use): give this"
            " one its own database; `convtap import` merges them later"
        ]
        assert first.proc.returncode == 0, out[-2000:]
        assert received == bodies
        assert_holds_what_the_client_got(db, received)
        with record(db, upstream, tmp_path) as later:  # once it is done, the database is free
            later.proc.send_signal(signal.SIGINT)
            assert later.wait(60) and later.proc.returncode == 0


def test_a_second_recording_session_into_the_same_database_is_recorded(tmp_path: Path) -> None:
    """The first session's journal was consumed and removed, and its position stayed committed:
    the second session's new journal, numbered from its first segment again, was read from
    that old position, and every turn of the second session was lost, silently."""
    bodies = burst_bodies(6)
    db = tmp_path / "twice.db"
    received: list[bytes] = []
    with burst_upstream(bodies) as upstream:
        for first in (0, 3):
            with record(db, upstream, tmp_path) as rec:
                send_burst(rec.port, 3, received, first)
                rec.proc.send_signal(signal.SIGINT)
                out = rec.wait(120)
            assert rec.proc.returncode == 0, out[-2000:]
    assert received == bodies
    assert not journal_dir(db).exists()
    assert_holds_what_the_client_got(db, received)
    assert rows(db, "SELECT count(*) FROM flows") == [(6,)]


def test_the_recorder_killed_between_turns_still_audits_them_after_a_restart(
    tmp_path: Path,
) -> None:
    """Killed when no flow was open, the restarted recorder began with an empty audit state:
    the calls recorded before the kill never got their `call-unanswered` finding."""
    bodies = burst_bodies(4)
    db = tmp_path / "between.db"
    received: list[bytes] = []
    with burst_upstream(bodies) as upstream, record(db, upstream, tmp_path) as rec:
        send_burst(rec.port, len(bodies), received)

        def committed() -> bool:  # every turn's call, and the position after its end
            ended = "SELECT count(*) FROM flows WHERE ended_at IS NOT NULL"
            return rows(db, ended) == [(4,)] and rows(db, "SELECT count(*) FROM tool_calls") == [
                (4,)
            ]

        assert wait_for(committed, 60)
        time.sleep(1.0)  # the recorder commits what waited once it is idle
        (recorder,) = children(rec.proc.pid)
        os.kill(recorder, signal.SIGKILL)
        assert rec.wait(60) and rec.proc.returncode == 1
    command = [sys.executable, "-m", "convtap.cli", "record", "--catch-up", "--db", str(db)]
    caught = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert caught.returncode == 0, caught.stderr[-2000:]
    assert received == bodies
    assert_holds_what_the_client_got(db, received)
    unanswered = "SELECT count(DISTINCT call_id) FROM findings WHERE rule = 'call-unanswered'"
    assert rows(db, unanswered) == [(4,)]


@pytest.mark.parametrize("database", ["not a database", "in use"])
def test_mitmdump_with_the_addon_refuses_a_database_in_one_line(
    tmp_path: Path, database: str
) -> None:
    """mitmproxy run directly with the addon (`mitmdump -s addon/mitm.py`) printed its "error in
    script" traceback around the reason; now the reason alone, and mitmdump exits at startup."""
    db = tmp_path / "capture.db"
    if database == "not a database":
        db.write_text("notes, not a capture\n")
        reason = f"{db} is not a SQLite database"
        held = None
    else:
        check_database(db)  # a capture, which a recording holds
        held = hold(journal_dir(db))
        reason = f"another convtap is recording into {db} (its journal is in use)"
    before = db.read_bytes()
    try:
        run = subprocess.run(
            [str(MITMDUMP), "-s", str(ADDON), "--listen-host", "127.0.0.1", "-p", "0",
             "--set", f"confdir={tmp_path / 'conf'}", "--set", f"convtap_db={db}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        if held is not None:
            os.close(held)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "Traceback" not in out and "error in script" not in out, out
    (line,) = [line for line in out.splitlines() if "convtap" in line]
    assert f"convtap: convtap_db: {reason}" in line, out
    assert db.read_bytes() == before  # only read


def drain(fd: int) -> None:
    """Read a pipe or a terminal until its writers are gone."""
    with contextlib.suppress(OSError):  # a terminal's reader gets EIO then
        while os.read(fd, 65536):
            pass


@contextlib.contextmanager
def record_to(
    output: int, db: Path, upstream: int, tmp_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """`convtap record` printing into `output` (a pipe or a terminal); killed if it still runs
    at the end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "convtap.cli", "record", "--mode",
         f"reverse:http://127.0.0.1:{upstream}", "--listen-port", "0", "--db", str(db),
         "--set", f"confdir={tmp_path / 'conf'}"],
        stdout=output, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def listening_port(read: int) -> int:
    """The proxy's port, from what it printed first."""
    banner = b""
    while (found := re.search(rb"listening at 127\.0\.0\.1:(\d+)", banner)) is None:
        got = os.read(read, 4096)
        assert got, banner
        banner += got
    return int(found.group(1))


def pause(terminal: int) -> None:
    """Ctrl-S, and the terminal's buffer full: the next line written to it waits."""
    termios.tcflow(terminal, termios.TCOOFF)
    # filled through a description of its own: the processes' stays blocking
    filler = os.open(os.ttyname(terminal), os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(filler, b"." * 1024)
    os.close(filler)


def resume_and_stop(proc: subprocess.Popen[bytes], read: int, terminal: int) -> None:
    """Ctrl-Q on the paused terminal, what waited read to the end, then Ctrl-C: it exits 0."""
    termios.tcflow(terminal, termios.TCOON)
    os.close(terminal)
    drained = threading.Thread(target=drain, args=(read,))
    drained.start()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(300) == 0
    drained.join(30)


@pytest.mark.parametrize("reader", ["gone", "stalled"])
def test_the_proxy_goes_on_whatever_the_reader_of_its_output_does(
    tmp_path: Path, reader: str
) -> None:
    """`convtap record | head` (gone): mitmproxy exits the process when it cannot write a log
    line, so the proxy's next warning (here: the recorder, stopped, falls 64 MB behind) cut every
    client's traffic. A reader that stops reading (a paused terminal, a full pipe: stalled)
    held it up at that line. Now the lines wait apart or go nowhere, and the traffic goes on,
    all of it recorded."""
    bodies = burst_bodies(300)  # 90 MB: past the 64 MB of lag that is reported
    db = tmp_path / "headless.db"
    received: list[bytes] = []
    with burst_upstream(bodies) as upstream:
        # stalled: a terminal whose output is paused (Ctrl-S), where each line is written at once
        read, write = os.pipe() if reader == "gone" else os.openpty()
        with record_to(write, db, upstream, tmp_path) as proc:
            port = listening_port(read)
            if reader == "gone":
                os.close(read)  # `| head` is done reading
                os.close(write)
            else:
                pause(write)
            (recorder,) = children(proc.pid)
            os.kill(recorder, signal.SIGSTOP)
            try:
                send_burst(port, len(bodies) - 1, received)
                time.sleep(1.5)  # the watcher says how far behind the recorder is once a second
                more: list[bytes] = []
                send_burst(port, 1, more, first=len(bodies) - 1)  # the proxy goes on, at once
                received += more
            finally:
                os.kill(recorder, signal.SIGCONT)
            if reader == "stalled":
                resume_and_stop(proc, read, write)
            else:
                proc.send_signal(signal.SIGINT)
                assert proc.wait(300) == 0
    assert received == bodies
    assert_holds_what_the_client_got(db, received)


def test_the_recorder_goes_on_while_its_output_is_paused(tmp_path: Path) -> None:
    """The recorder process prints a line for each call into the same terminal: while that
    terminal was paused (Ctrl-S), its first line waited, and nothing more was recorded until
    the user read on. Now every call reaches the database while the terminal stays paused."""
    bodies = burst_bodies(40)
    db = tmp_path / "paused.db"
    received: list[bytes] = []
    with burst_upstream(bodies) as upstream:
        read, write = os.openpty()
        with record_to(write, db, upstream, tmp_path) as proc:
            port = listening_port(read)
            pause(write)
            send_burst(port, len(bodies), received)
            calls = "SELECT count(*) FROM tool_calls WHERE complete"
            assert wait_for(lambda: rows(db, calls) == [(len(bodies),)], 120), rows(db, calls)
            resume_and_stop(proc, read, write)  # the lines that waited come out
    assert received == bodies
    assert_holds_what_the_client_got(db, received)


def test_recording_with_its_output_closed(tmp_path: Path) -> None:
    """Started with its output closed (`convtap record >&- 2>&-`, as some service managers do):
    Python gives the closed streams as None, and the proxy's queued stdout failed at startup
    with a traceback. It records as ever."""
    bodies = burst_bodies(5)
    db = tmp_path / "closed.db"
    port = free_port()
    received: list[bytes] = []
    script = ('exec "$0" -m convtap.cli record --mode "reverse:http://127.0.0.1:$1"'
              ' --listen-port "$2" --db "$3" --set "confdir=$4" >&- 2>&-')  # fmt: skip
    with burst_upstream(bodies) as upstream:
        args = [sys.executable, str(upstream), str(port), str(db), str(tmp_path / "conf")]
        with subprocess.Popen(["sh", "-c", script, *args]) as proc:
            try:
                assert wait_for_port(port), "it did not listen"
                send_burst(port, len(bodies), received)
                proc.send_signal(signal.SIGINT)
                assert proc.wait(120) == 0
            finally:
                if proc.poll() is None:
                    proc.kill()
    assert received == bodies
    assert_holds_what_the_client_got(db, received)
