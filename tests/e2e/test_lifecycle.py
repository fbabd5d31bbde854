"""A recording's life from its first line to its last: Ctrl-C at any moment, as a terminal sends
it (to the whole process group), ends `convtap record` with the session recorded and no
traceback; and at every clean exit the `.db` alone holds the capture, whoever still reads it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from convtap.journal.segments import journal_dir
from convtap.mock.refclient import RefClient
from convtap.mock.server import MockServer

from tests.runner import convtap

CONVTAP = Path(sys.executable).parent / "convtap"  # the command as a user runs it
LISTENING = re.compile(r"proxy listening at 127\.0\.0\.1:(\d+)")
LIVE_URL = re.compile(r"Watch live: (http://127\.0\.0\.1:\d+/[A-Za-z0-9_-]+/)")
EXAMPLE = Path(__file__).resolve().parents[2] / "captures" / "examples" / "rules"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy


@dataclass
class Terminal:
    """`convtap record` started as from a terminal: the leader of its own process group, which
    a Ctrl-C signals as a whole; what it prints is read as it comes."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    def said(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: re.Pattern[str], timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while (found := pattern.search(self.said())) is None:
            assert self.proc.poll() is None and time.monotonic() < deadline, self.said()
            time.sleep(0.01)
        return found

    def ctrl_c(self) -> str:
        """SIGINT to the whole group, as the terminal sends it; all it printed once it exits."""
        os.killpg(self.proc.pid, signal.SIGINT)
        self.proc.wait(120)
        return self.said()


@contextmanager
def terminal(
    db: Path, upstream: int, tmp_path: Path, *flags: str, env: dict[str, str] | None = None
) -> Iterator[Terminal]:
    proc = subprocess.Popen(
        [CONVTAP, "record", "--mode", f"reverse:http://127.0.0.1:{upstream}", "--listen-port",
         "0", "--db", str(db), "--set", f"confdir={tmp_path / 'conf'}", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    started = Terminal(proc)
    reader = threading.Thread(target=_read, args=(proc, started.lines), daemon=True)
    reader.start()
    try:
        yield started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(120)
        reader.join(30)


def _read(proc: subprocess.Popen[str], lines: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)


def count(db: Path, sql: str) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute(sql).fetchone()[0])


def table(db: Path, name: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        return sorted(conn.execute(f"SELECT * FROM {name}").fetchall(), key=repr)


def alone(db: Path, folder: Path) -> Path:
    """A copy of the database file alone, as a CI artifact is (no -wal, no -shm beside it)."""
    folder.mkdir()
    return Path(shutil.copy(db, folder / db.name))


def assert_whole_alone(db: Path, tmp_path: Path) -> None:
    """The `.db` alone holds every row the capture holds (its WAL included), as it is."""
    copy = alone(db, tmp_path / "artifact")
    for name in ("flows", "events", "turns", "tool_calls", "tool_returns", "messages", "findings"):
        assert table(copy, name) == table(db, name), name
    assert count(copy, "SELECT count(*) FROM flows") > 0


# -- whole at every clean exit -----------------------------------------------------------------


@pytest.mark.parametrize("web", [False, True], ids=["record", "record --web"])
def test_after_record_the_db_alone_holds_every_flow(tmp_path: Path, web: bool) -> None:
    db = tmp_path / "s1.db"
    flags = ("--web",) if web else ()
    with MockServer("alefita_way") as mock, terminal(db, mock.port, tmp_path, *flags) as rec:
        port = int(rec.wait_for(LISTENING).group(1))
        for _ in range(3):
            assert RefClient(f"http://127.0.0.1:{port}", timeout=20).run(faulty=True).accepted
        if web:  # the page read once the recording began: its reader holds the capture's WAL
            with DIRECT.open(rec.wait_for(LIVE_URL).group(1), timeout=30) as page:
                assert b"alefita_way" in page.read()
        out = rec.ctrl_c()
    assert rec.proc.returncode == 0 and "Traceback" not in out, out[-2000:]
    assert not journal_dir(db).exists()
    assert_whole_alone(db, tmp_path)
    assert count(db, "SELECT count(*) FROM tool_calls") == 3


@contextmanager
def reader_open(db: Path) -> Iterator[None]:
    """Another process reading the capture the whole time (the live page, Datasette): it has
    read it once, so SQLite counts it among the connections that keep the WAL."""
    script = textwrap.dedent(f"""
        import sqlite3, sys
        conn = sqlite3.connect({str(db.resolve().as_uri() + "?mode=ro")!r}, uri=True)
        conn.execute("SELECT count(*) FROM flows").fetchone()
        print("reading", flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "reading\n"
    try:
        yield
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)


@pytest.mark.parametrize("command", ["import", "import a.db", "reprocess", "audit"])
def test_after_every_command_the_db_alone_holds_the_capture(tmp_path: Path, command: str) -> None:
    db = tmp_path / "capture.db"
    first = EXAMPLE / "return-recipient" / "fail.har"
    second = EXAMPLE / "call-arguments" / "fail.har"
    assert convtap("import", str(first), "--db", str(db)).returncode == 0
    with reader_open(db):
        if command == "import":
            ran = convtap("import", str(second), "--db", str(db))
        elif command == "import a.db":
            other = tmp_path / "a.db"
            assert convtap("import", str(second), "--db", str(other)).returncode == 0
            ran = convtap("import", str(other), "--db", str(db))
        else:
            ran = convtap(command, "--db", str(db))
        assert ran.returncode in (0, 1), ran.stderr  # audit: 1 for its findings
        assert_whole_alone(db, tmp_path)


def test_datasette_reading_the_capture_keeps_no_rows_from_the_db(tmp_path: Path) -> None:
    from tests.store.test_datasette_plugin import _port, datasette_binary, query

    db = tmp_path / "capture.db"
    assert convtap("import", str(EXAMPLE / "return-recipient" / "fail.har"), "--db",
                   str(db)).returncode == 0  # fmt: skip
    process = subprocess.Popen([datasette_binary(), "serve", "-h", "127.0.0.1", "-p", "0", db],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)  # fmt: skip
    try:
        base = f"http://127.0.0.1:{_port(process)}"
        assert query(base, "capture", "findings_by_rule")  # Datasette has the capture open
        ran = convtap("import", str(EXAMPLE / "call-arguments" / "fail.har"), "--db", str(db))
        assert ran.returncode == 0, ran.stderr
        assert_whole_alone(db, tmp_path)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


# -- Ctrl-C at any moment ----------------------------------------------------------------------


@pytest.mark.parametrize("after", [0.1, 0.5, 1.5])
@pytest.mark.parametrize("web", [False, True], ids=["record", "record --web"])
def test_ctrl_c_at_any_moment_of_the_start_ends_it_quietly(
    tmp_path: Path, after: float, web: bool
) -> None:
    db = tmp_path / "s1.db"
    flags = ("--web",) if web else ()
    with MockServer("alefita_way") as mock, terminal(db, mock.port, tmp_path, *flags) as rec:
        time.sleep(after)
        out = rec.ctrl_c()
    # 130 when it came before any command ran (the shell's status for SIGINT), else a clean stop
    assert rec.proc.returncode in (0, 130) and "Traceback" not in out, out[-3000:]
    assert "Aborted" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    assert not journal_dir(db).exists()  # the recorder, if it started, finished: nothing left
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("s1.db.")]


SLOW_START = """
import sys, time
from importlib.abc import MetaPathFinder

class SlowRecorder(MetaPathFinder):
    # The recorder process under load: its modules take seconds to load (3-8 s were seen).
    def find_spec(self, name, path=None, target=None):
        if name == "convtap.record.recorder":
            time.sleep(4)
        return None

if sys.orig_argv[1:3] == ["-m", "convtap.record.worker"]:
    sys.meta_path.insert(0, SlowRecorder())
"""


def test_ctrl_c_while_the_recorder_still_loads_records_the_session(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_START)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    db = tmp_path / "s1.db"
    with (
        MockServer("alefita_way") as mock,
        terminal(db, mock.port, tmp_path, env={"PYTHONPATH": path}) as rec,
    ):
        port = int(rec.wait_for(LISTENING).group(1))
        summary = RefClient(f"http://127.0.0.1:{port}", timeout=20).run(faulty=True)
        assert summary.call_id is not None
        out = rec.ctrl_c()  # the recorder is still loading its modules
    assert rec.proc.returncode == 0 and "Traceback" not in out, out[-3000:]
    assert not journal_dir(db).exists()  # nothing waits for a later --catch-up
    assert count(db, f"SELECT count(*) FROM tool_calls WHERE call_id = '{summary.call_id}'") == 1
    assert count(db, "SELECT count(*) FROM tool_returns WHERE call_id IS NOT NULL") == 1
    assert f"call    local.alefita_way  {summary.call_id}" in out  # and it said so
