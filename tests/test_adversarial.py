"""convtap as a user and then an adversary would try it: files convtap only reads keep every
byte, bad input is one line and exit 2, memory stays under its bound, concurrent convtap
processes lose nothing."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import json
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import MITMDUMP, burst_upstream, capture_bytes, events_sql, peak_mb_while
from tests.report.test_report import report_text
from tests.runner import convtap
from tests.seeds import SSE, call_and_return_har, har_entry, user_turn

ROOT = Path(__file__).resolve().parent.parent
ADDON = ROOT / "addon" / "mitm.py"


def fingerprint(path: Path) -> tuple[str, int]:
    """A file's bytes and mode, and whether SQLite's side files appeared beside it."""
    side = [Path(f"{path}{s}").exists() for s in ("-wal", "-shm", ".journal")]
    digest = hashlib.sha256(path.read_bytes()).hexdigest() + str(side)
    return digest, stat.S_IMODE(path.stat().st_mode)


def one_line_error(ran: object) -> None:
    assert ran.returncode == 2
    err = ran.stderr.strip()
    assert err and len(err.splitlines()) == 1 and "Traceback" not in err, err


@pytest.fixture
def good_har(tmp_path: Path) -> Path:
    path = tmp_path / "good.har"
    path.write_text(json.dumps(call_and_return_har()))
    return path


@pytest.fixture
def other_app_db(tmp_path: Path) -> Path:
    """Another application's SQLite file, 0644, rollback journal."""
    path = tmp_path / "otherapp.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('mine')")
    path.chmod(0o644)
    return path


@pytest.fixture
def capture(tmp_path: Path, good_har: Path) -> Path:
    db = tmp_path / "capture.db"
    assert convtap("import", str(good_har), "--db", str(db)).returncode == 0
    return db


# -- never write what we only read ----------------------------------------------------------------


def test_importing_into_another_applications_database_is_refused(
    good_har: Path, other_app_db: Path
) -> None:
    before = fingerprint(other_app_db)
    one_line_error(convtap("import", str(good_har), "--db", str(other_app_db)))
    assert fingerprint(other_app_db) == before


@pytest.mark.parametrize(
    "command",
    [["audit", "--db"], ["calls", "--db"], ["reprocess", "--db"], ["diff", "--against-schemas"]],
)
def test_commands_that_read_refuse_a_foreign_database_without_touching_it(
    other_app_db: Path, command: list[str]
) -> None:
    before = fingerprint(other_app_db)
    one_line_error(convtap(*command, str(other_app_db)))
    assert fingerprint(other_app_db) == before  # header bytes 18-19 too: no WAL switch


@pytest.mark.parametrize(
    "command", [["audit", "--db"], ["calls", "--db"], ["diff", "--against-schemas"]]
)
def test_an_empty_file_stays_empty(tmp_path: Path, command: list[str]) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    one_line_error(convtap(*command, str(empty)))
    assert empty.stat().st_size == 0
    target = tmp_path / "target.db"
    one_line_error(convtap("import", str(empty), "--db", str(target)))
    assert empty.stat().st_size == 0 and not target.exists()


def test_a_read_only_capture_is_never_chmod_ed_or_written(
    tmp_path: Path, capture: Path, good_har: Path
) -> None:
    capture.chmod(0o444)
    before = fingerprint(capture)
    one_line_error(convtap("import", str(good_har), "--db", str(capture)))
    audited = convtap("audit", "--db", str(capture), "--format", "json")
    assert audited.returncode in (0, 1) and json.loads(audited.stdout)["summary"]["calls"] == 1
    assert "read-only" in audited.stderr
    assert convtap("calls", "--db", str(capture)).returncode == 0
    assert fingerprint(capture) == before


@pytest.mark.process
def test_the_default_database_is_not_touched_when_another_is_in_use(tmp_path: Path) -> None:
    """mitmproxy reads the addon's attributes while registering it: nothing may open
    ./captures/capture.db then."""
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(
        [str(MITMDUMP), "-s", str(ADDON), "-p", "0", "--listen-host", "127.0.0.1",
         "--set", f"convtap_db={tmp_path / 'elsewhere.db'}",
         "--set", f"confdir={tmp_path / 'conf'}"],
        cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if "listening at" in line:
            break
    proc.terminate()
    proc.wait(30)
    assert not (work / "captures").exists()
    assert (tmp_path / "elsewhere.db").exists()


@pytest.mark.process
def test_record_says_so_when_captures_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "captures").write_text("not a folder")
    ran = subprocess.run([sys.executable, "-m", "convtap.cli", "record", "--listen-port", "0"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)  # fmt: skip
    one_line_error(ran)


# -- one line and exit 2 --------------------------------------------------------------------------


def test_garbage_databases_are_one_line(tmp_path: Path, good_har: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(os.urandom(4096))
    one_line_error(convtap("import", str(garbage), "--db", str(tmp_path / "new.db")))
    one_line_error(convtap("import", str(good_har), "--db", str(garbage)))
    assert not (tmp_path / "new.db").exists()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_deep_nesting_is_a_decode_error_and_decoding_goes_on(tmp_path: Path) -> None:
    body = (SSE / "alefita_way_call.sse").read_text()
    deep = body.replace("data: [DONE]", f'data: {{"type": "x", "v": {nested(1000)}}}\n\n'
                        f"data: {nested(5000)}\n\ndata: [DONE]")  # fmt: skip
    path = tmp_path / "deep.sse"
    path.write_text(deep)
    for fmt in ("json", "text"):
        ran = convtap("decode", "--format", fmt, str(path))
        assert ran.returncode == 0, ran.stderr
    out = json.loads(convtap("decode", "--format", "json", str(path)).stdout)
    assert [e["kind"] for e in out["errors"]] == ["malformed-json"]
    assert out["done"] and out["tool_calls"]
    frames = tmp_path / "frames.jsonl"
    frames.write_text(nested(3000) + "\n")
    assert convtap("decode", "--ws", str(frames), str(path)).returncode == 0
    responses = tmp_path / "deep.json"
    responses.write_text(f'{{"object": "response", "id": "r", "output": {nested(3000)}}}')
    assert convtap("decode", "--protocol", "responses", str(responses)).returncode == 0
    har = tmp_path / "deep.har"
    entry = call_and_return_har()
    entry["log"]["entries"][0]["response"]["content"]["text"] = deep
    har.write_text(json.dumps(entry))
    ran = convtap("diff", str(har), str(har))
    assert ran.returncode == 0, ran.stderr


# -- smaller things -------------------------------------------------------------------------------


def test_empty_and_non_conversation_inputs_say_so(tmp_path: Path) -> None:
    empty_har = tmp_path / "empty.har"
    empty_har.write_text(json.dumps({"log": {"version": "1.2", "entries": []}}))
    empty_mitm, empty_sse, junk_sse = (tmp_path / n for n in ("e.mitm", "e.sse", "junk.sse"))
    empty_mitm.touch()
    empty_sse.touch()
    junk_sse.write_bytes(b"\x00\xffnot an event stream at all")
    for path in (empty_har, empty_mitm, empty_sse, junk_sse):
        ran = convtap("import", str(path), "--db", str(tmp_path / "x.db"))
        one_line_error(ran)
        assert "nothing to import" in ran.stderr or "no " in ran.stderr
    assert not (tmp_path / "x.db").exists()  # a failed import into a new database removes it


def test_a_multi_file_import_reports_each_file(tmp_path: Path, good_har: Path) -> None:
    bad = tmp_path / "bad.har"
    bad.write_text("{not json")
    db = tmp_path / "multi.db"
    ran = convtap("import", str(good_har), str(bad), "--db", str(db))
    assert ran.returncode == 2
    assert f"imported 2 flows from {good_har}" in ran.stdout
    assert str(bad) in ran.stderr
    assert convtap("calls", "--db", str(db), "--format", "json").returncode == 0


def test_invalid_utf8_is_a_decode_error(tmp_path: Path) -> None:
    body = (SSE / "plain_answer.sse").read_bytes()
    assert b"Ol\xc3\xa1" in body
    path = tmp_path / "bad.sse"
    path.write_bytes(body.replace(b"Ol\xc3\xa1", b"Ol\xff\xfe", 1))
    out = json.loads(convtap("decode", "--format", "json", str(path)).stdout)
    assert [e["kind"] for e in out["errors"]] == ["invalid-utf8"]
    assert out["messages"]  # replaced, as WHATWG's decoder does, and decoded on


# -- concurrency ----------------------------------------------------------------------------------


@pytest.mark.process
@pytest.mark.parametrize("attempt", range(6))  # a race: each attempt is one more chance
def test_two_imports_into_one_new_database_lose_nothing(
    tmp_path: Path, good_har: Path, attempt: int
) -> None:
    """Both commit; neither's rows may vanish. They did, one time in ten: an import read the
    flow ids through a second open of the file, whose close dropped its connection's POSIX
    locks, and the other process, thinking itself alone, deleted the WAL under it."""
    other = tmp_path / "other.har"
    other.write_text(json.dumps(call_and_return_har()))  # other ids, other flows
    db = tmp_path / "shared.db"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "convtap.cli", "import", str(p), "--db", str(db)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in (good_har, other)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM flows").fetchone()[0] == 4


def test_reprocess_is_refused_while_a_recorder_writes(tmp_path: Path, capture: Path) -> None:
    """A journal held by a recording, or holding traffic not recorded yet, is refused; an empty
    one nobody holds (what a killed `reprocess` leaves) is not."""
    import fcntl

    journal = capture.with_name(capture.name + ".journal")
    journal.mkdir()
    fd = os.open(journal, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a recording holds it
    try:
        ran = convtap("reprocess", "--db", str(capture))
    finally:
        os.close(fd)
    one_line_error(ran)
    assert "recording into" in ran.stderr
    (journal / "0000000000.seg").write_bytes(b"x")
    ran = convtap("reprocess", "--db", str(capture))
    one_line_error(ran)
    assert "--catch-up" in ran.stderr
    (journal / "0000000000.seg").unlink()
    assert convtap("reprocess", "--db", str(capture)).returncode == 0


# -- memory ---------------------------------------------------------------------------------------


def peak_mb(args: list[str], **kwargs: object) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run a command; its peak resident memory (VmHWM, read just before it exits)."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            **kwargs)  # type: ignore[call-overload]  # fmt: skip
    peak = peak_mb_while(proc)
    _, err = proc.communicate()
    return peak, subprocess.CompletedProcess(args, proc.returncode, "", err)


@pytest.mark.process
def test_decoding_many_pings_and_events_stays_small(tmp_path: Path) -> None:
    """`decode` spools what it lists: 200,000 pings or typed events stay far under 200 MB
    (`bench/decode_memory_bench.py` measures ten times more, and the growth)."""
    from bench.decode_memory_bench import pings, typed

    decode = [sys.executable, "-m", "convtap.cli", "decode"]
    peak, ran = peak_mb([*decode, str(pings(tmp_path / "pings.sse", 200_000))])
    assert ran.returncode == 0, ran.stderr
    assert peak < 200, f"{peak:.0f} MB for 200,000 pings"
    peak, ran = peak_mb([*decode, "--format", "json", str(typed(tmp_path / "t.sse", 200_000))])
    assert ran.returncode == 0, ran.stderr
    assert peak < 200, f"{peak:.0f} MB for 200,000 typed events"


@pytest.mark.process
def test_an_event_that_never_ends_is_bounded_through_the_proxy(tmp_path: Path) -> None:
    """A 60 MB event with no end, then a normal one: the recorder stays small and says so."""
    endless = b'event: delta_encoding\ndata: "v1"\n\ndata: {"type": "x", "v": "' + b"a" * 60_000_000
    body = endless + b'"}\n\ndata: {"type": "after"}\n\ndata: [DONE]\n\n'
    db = tmp_path / "endless.db"
    with burst_upstream([body]) as upstream:
        proc = subprocess.Popen(
            [str(MITMDUMP), "-s", str(ADDON), "-p", "0", "--listen-host", "127.0.0.1",
             "--mode", f"reverse:http://127.0.0.1:{upstream}", "--set", f"convtap_db={db}",
             "--set", f"confdir={tmp_path / 'conf'}", "--set", "convtap_echo=off"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        port = None
        for line in proc.stdout:
            if "listening at" in line:
                port = int(line.rsplit(":", 1)[1].strip().rstrip("."))
                break
        assert port is not None
        threading.Thread(target=lambda: proc.stdout and proc.stdout.read(), daemon=True).start()
        recorder = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])
        peak = 0.0

        def watch() -> None:
            nonlocal peak
            peak = peak_mb_while(proc, recorder, every=0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/backend-api/f/conversation", body=json.dumps({"n": 0}),
                     headers={"content-type": "application/json"})  # fmt: skip
        got = conn.getresponse().read()
        assert got == body
        proc.terminate()
        proc.wait(120)
        watcher.join(5)
    assert peak < 150, f"the recorder peaked at {peak:.0f} MB"
    with sqlite3.connect(db) as conn:
        errors = json.loads(conn.execute("SELECT errors FROM turns").fetchone()[0])
    assert [e["kind"] for e in errors] == ["event-too-large"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["mock", "--port", "99999"], "Invalid value for '--port': 99999 is not in the range"),
        (["record", "--listen-port", "70000"], "Invalid value for '--listen-port'"),
        (["calls", "--db", "."], "Invalid value for '--db'"),
        (["calls", "--forma", "json"], "No such option '--forma'. Did you mean '--format'?"),
        (["decode"], "Missing argument 'FILE [FILE...]'"),
        (["nosuch"], "No such command 'nosuch'"),
        (["--badopt"], "No such option '--badopt'"),
    ],
)
def test_bad_usage_is_one_line(args: list[str], said: str) -> None:
    """click printed three lines (usage, a hint, the error) for bad usage; a mock given port
    99999 listened on 34463 (the port modulo 65536), and a proxy given it failed in mitmproxy."""
    ran = convtap(*args)
    one_line_error(ran)
    assert ran.stderr.startswith(f"convtap: {said}") and "--help`)" in ran.stderr


@pytest.mark.parametrize(
    ("har", "said"),
    [
        ({"x": 1}, "not a HAR file (no 'log' in it)"),
        ({"log": {"entries": [{"request": {}}]}}, "entry 0 is not a HAR entry (no '"),
        ({"log": {"pages": []}}, "not a HAR file (no 'entries' in it)"),
        ({"log": {"entries": {"0": {}}}}, "not a HAR file (log.entries is not a list)"),
        ({"log": {"entries": [1]}}, "not a HAR file (an entry of log.entries is not an object)"),
        ('{"log": {"entries": [{"request": ', "not a HAR file (parse error: premature EOF)"),
    ],
)
def test_a_har_missing_a_field_names_it(tmp_path: Path, har: object, said: str) -> None:
    """A missing field was said as Python's KeyError: `('startedDateTime')`."""
    path = tmp_path / "odd.har"
    path.write_text(har if isinstance(har, str) else json.dumps(har))
    ran = convtap("import", str(path), "--db", str(tmp_path / "c.db"))
    one_line_error(ran)
    assert f"{path}: {said}" in ran.stderr


@pytest.mark.process
@pytest.mark.parametrize(
    ("redirect", "args", "code", "said"),
    [
        (">&-", ["decode", str(SSE / "alefita_way_call.sse")], 0, ""),
        ("<&-", ["decode", "-"], 2, "convtap: cannot read -: standard input is closed"),
        (">&-", ["calls", "--db", "{db}"], 0, ""),
    ],
)
def test_a_closed_standard_stream_is_no_traceback(
    tmp_path: Path, redirect: str, args: list[str], code: int, said: str
) -> None:
    """Started with stdout or stdin closed, Python gives the stream as None: `decode` wrote
    into it and read from it, and printed a traceback."""
    db = tmp_path / "c.db"
    if "{db}" in args:
        ran = convtap("import", str(SSE / "alefita_way_call.sse"), "--db", str(db))
        assert ran.returncode == 0, ran.stderr
    command = " ".join(f"'{a.format(db=db)}'" for a in [sys.executable, "-m", "convtap.cli", *args])
    ran = subprocess.run(["sh", "-c", f"exec {command} {redirect}"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert ran.returncode == code and ran.stderr.strip() == said, ran.stderr


def test_a_busy_listen_port_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    """`convtap record` on a port another program holds: convtap's own line (naming
    --listen-port), exit 2, and no database or journal made (mitmproxy's hint, exit 1 and a new
    database were what a user got)."""
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        db = tmp_path / "new.db"
        ran = convtap("record", "--listen-port", str(port), "--db", str(db))
    one_line_error(ran)
    assert f"127.0.0.1:{port}" in ran.stderr and "--listen-port" in ran.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_error_quoting_a_bad_value_prints_no_secret(tmp_path: Path) -> None:
    """A message about bad input quotes the value it could not read: a secret there went to
    stderr (and so into CI logs) in clear."""
    from tests.ingest.test_readers import call_and_return_har

    secret = "sk-proj-" + "Qx7vB2mK9pL4wR8tY3nZ6cF1hJ5dG0sA" * 3
    har = call_and_return_har()
    socket = {**har["log"]["entries"][0], "_webSocketMessages": [
        {"type": "send", "time": secret, "opcode": 1, "data": "{}"}]}  # fmt: skip
    socket["request"] = {**socket["request"], "method": "GET",
                         "url": "https://chatgpt.com/v1/responses"}  # fmt: skip
    odd = tmp_path / "odd.har"
    odd.write_text(json.dumps({"log": {**har["log"], "entries": [socket]}}))
    ran = convtap("import", str(odd), "--db", str(tmp_path / "c.db"))
    one_line_error(ran)
    assert "<secret>" in ran.stderr
    assert secret[8:30] not in ran.stderr


def test_a_frame_time_that_is_no_number_is_one_line_and_a_huge_status_is_told(
    tmp_path: Path,
) -> None:
    """`_webSocketMessages[].time` of "x" printed a ValueError's traceback and left a database;
    a status of 10**30 (past SQLite's integers) is recorded as a failure on its flow."""
    from tests.ingest.test_readers import call_and_return_har

    har = call_and_return_har()
    socket = {**har["log"]["entries"][0], "_webSocketMessages": [
        {"type": "send", "time": "x", "opcode": 1, "data": "{}"}]}  # fmt: skip
    socket["request"] = {**socket["request"], "method": "GET",
                         "url": "https://chatgpt.com/v1/responses"}  # fmt: skip
    odd = tmp_path / "odd.har"
    odd.write_text(json.dumps({"log": {**har["log"], "entries": [socket]}}))
    ran = convtap("import", str(odd), "--db", str(tmp_path / "c.db"))
    one_line_error(ran)
    assert "entry 0 has a WebSocket frame that is not one" in ran.stderr
    assert not list(tmp_path.glob("c.db*"))
    huge = json.loads(json.dumps(har))
    huge["log"]["entries"][0]["response"]["status"] = 10**30
    big = tmp_path / "big.har"
    big.write_text(json.dumps(huge))
    db = tmp_path / "big.db"
    assert convtap("import", str(big), "--db", str(db)).returncode == 0
    with sqlite3.connect(db) as conn:
        failures = [f for (f,) in conn.execute("SELECT failure FROM flows") if f]
    assert failures and "OverflowError" in failures[0]


# -- kill -9 in the middle ------------------------------------------------------------------------


def socket_har(sockets: int, frames: int) -> dict[str, object]:
    """Responses WebSocket sessions, one entry each, of `frames` server frames: a flow whose
    rows take many batches to write."""
    har = call_and_return_har()
    base = har["log"]["entries"][0]
    entries = []
    for s in range(sockets):
        sent = {"type": "response.create", "model": "gpt-5", "input": f"hello {s}"}
        messages = [{"type": "send", "time": 1000.0 + s, "opcode": 1, "data": json.dumps(sent)}]
        messages += [
            {"type": "receive", "time": 1000.0 + s + n / 1e6, "opcode": 1,
             "data": json.dumps({"type": "response.output_text.delta", "item_id": f"msg_{s}",
                                 "output_index": 0, "content_index": 0, "delta": f"w{n} "})}
            for n in range(frames)
        ]  # fmt: skip
        request = {k: v for k, v in base["request"].items() if k != "postData"}
        entries.append({
            **base, "startedDateTime": f"2026-08-27T19:00:{s:02d}.000Z",
            "request": {**request, "method": "GET", "url": "https://chatgpt.com/v1/responses"},
            "response": {**base["response"], "status": 101, "headers": [],
                         "content": {"size": 0, "mimeType": "x"}},
            "_webSocketMessages": messages,
        })  # fmt: skip
    return {"log": {**har["log"], "entries": entries}}


def calls_har(pairs: int) -> dict[str, object]:
    """`pairs` conversations, each a call and its return, each with its own ids."""
    from tests.seeds import CALL_ID, CONV

    har = call_and_return_har()
    text = json.dumps(har["log"]["entries"])
    entries = []
    for n in range(pairs):
        copy = json.loads(text.replace(CALL_ID, f"{CALL_ID[:-8]}{n:08x}")
                          .replace(CONV, f"{CONV[:-8]}{n:08x}"))  # fmt: skip
        for k, entry in enumerate(copy):
            clock = f"{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.{k:03d}"
            entry["startedDateTime"] = f"2026-08-27T{clock}Z"
        entries += copy
    return {"log": {**har["log"], "entries": entries}}


def counts(db: Path) -> dict[str, int]:
    """Rows per table, and events per flow, read as another process would (read-only)."""
    with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True) as conn:
        found = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                 for t in ("flows", "events", "tool_calls", "findings")}  # fmt: skip
        for flow, events in conn.execute("SELECT f.id, (SELECT count(*) FROM events e "
                                         "WHERE e.flow_id = f.id) FROM flows f"):  # fmt: skip
            found[flow] = events
    return found


def started(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "convtap.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def kill_when(proc: subprocess.Popen[str], ready: object, timeout: float = 120) -> None:
    """`kill -9` the process as soon as `ready()` says its work is under way (polled)."""
    import time

    deadline = time.monotonic() + timeout
    while not ready():  # type: ignore[operator]
        assert proc.poll() is None, f"it ended before it could be killed: {proc.communicate()}"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.kill()
    assert proc.wait(30) == -signal.SIGKILL, "it ended before it could be killed"


@pytest.mark.process
def test_an_import_killed_midway_leaves_whole_flows_and_a_re_import_completes_it(
    tmp_path: Path,
) -> None:
    """A flow's row was committed before its events: `kill -9` left a flow with part of its
    events, and the next import skipped it as already there."""
    har = tmp_path / "sockets.har"
    har.write_text(json.dumps(socket_har(6, 6_000)))
    whole = tmp_path / "whole.db"
    assert convtap("import", str(har), "--db", str(whole)).returncode == 0
    expected = counts(whole)
    db = tmp_path / "killed.db"
    proc = started(["import", str(har), "--db", str(db)])

    def some_flow_committed() -> bool:
        try:
            return counts(db)["flows"] > 0
        except sqlite3.Error:
            return False  # not made yet

    kill_when(proc, some_flow_committed)
    left = counts(db)
    assert left["flows"] < expected["flows"], "killed too late to prove anything"
    partial = {k: (n, expected[k]) for k, n in left.items() if k.startswith("import-")
               and n != expected[k]}  # fmt: skip
    assert not partial, f"flows with part of their events: {partial}"
    ran = convtap("import", str(har), "--db", str(db))
    assert ran.returncode == 0, ran.stderr
    assert counts(db) == expected


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PAIRS = 400  # a reprocess of about half a second of CPU: killed 0.15 s in, it is midway


@pytest.mark.process
def test_a_reprocess_killed_midway_leaves_the_previous_result(tmp_path: Path) -> None:
    """`reprocess` cleared the derived tables and committed as it went: readers saw 0 calls,
    then some, and a `kill -9` left 7,722 of 10,000 with nothing to say so."""
    har = tmp_path / "calls.har"
    har.write_text(json.dumps(calls_har(PAIRS)))
    db = tmp_path / "capture.db"
    assert convtap("import", str(har), "--db", str(db)).returncode == 0
    assert convtap("audit", "--db", str(db)).returncode in (0, 1)
    before = counts(db)
    assert before["tool_calls"] == PAIRS and before["findings"] > 0
    proc = started(["reprocess", "--db", str(db)])
    seen: list[dict[str, int]] = []
    began: list[float] = []

    def under_way() -> bool:
        """Its journal folder is held, and it has worked 0.15 s of CPU since (of about 0.5)."""
        seen.append(counts(db))  # what a reader sees meanwhile
        if not began and db.with_name(db.name + ".journal").exists():
            began.append(cpu_seconds(proc.pid))
        return bool(began) and cpu_seconds(proc.pid) - began[0] >= 0.15

    kill_when(proc, under_way)
    assert all(s == before for s in seen), "a reader saw a partial reprocess"
    assert counts(db) == before
    ledger = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert len(ledger) == PAIRS
    ran = convtap("reprocess", "--db", str(db))  # its left-over journal folder is no recording
    assert ran.returncode == 0, ran.stderr
    assert counts(db)["tool_calls"] == PAIRS


# -- one line, exit 2, nothing left behind -------------------------------------------------------


DEEP = 100_000


def test_a_har_nested_100k_levels_is_one_line_in_every_command_that_reads_one(
    tmp_path: Path,
) -> None:
    """A RecursionError's traceback (and, from `import`, an empty new database)."""
    har = tmp_path / "deep.har"
    har.write_text('{"log": {"entries": ' + nested(DEEP) + "}}")
    db = tmp_path / "new.db"
    for args in (["import", str(har), "--db", str(db)], ["diff", str(har), str(har)],
                 ["diff", str(har), str(SSE / "alefita_way_call.sse")]):  # fmt: skip
        ran = convtap(*args)
        one_line_error(ran)
        assert "nested too deep" in ran.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep.har"]
    scenario = tmp_path / "deep.json"
    scenario.write_text(nested(DEEP))
    one_line_error(convtap("mock", "--scenario", str(scenario), "--port", "0"))
    # the other readers of JSON: a decode error each, and decoding goes on
    body = tmp_path / "deep.sse"
    body.write_text(f"data: {nested(DEEP)}\n\ndata: [DONE]\n\n")
    frames = tmp_path / "frames.jsonl"
    frames.write_text(nested(DEEP) + "\n")
    for args in (["decode", str(body)], ["decode", "--ws", str(frames), str(body)],
                 ["decode", "--protocol", "responses", str(scenario)]):  # fmt: skip
        ran = convtap(*args)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config folder of this test's own (where the redaction key lives)."""
    folder = tmp_path / "config"
    folder.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    return folder


@pytest.mark.parametrize("unusable", ["empty", "a folder", "config is a file", "not UTF-8"])
def test_an_unusable_redaction_key_is_one_line_and_leaves_nothing(
    tmp_path: Path, config: Path, good_har: Path, unusable: str
) -> None:
    """The key was read after the database and journal were made: a traceback, and both left
    behind. (Tests run as root, who reads a folder of mode 0: a config folder that is a file is
    the unusable one here.)"""
    key = config / "convtap" / "redaction.key"
    key.parent.mkdir()
    if unusable == "empty":
        key.touch()
    elif unusable == "a folder":
        key.mkdir()
    elif unusable == "config is a file":
        key.parent.rmdir()
        key.parent.write_text("not a folder")
    else:
        key.write_bytes(b"\xff\xfe")
    work = tmp_path / "work"
    work.mkdir()
    db = work / "new.db"
    for args in (["import", str(good_har), "--db", str(db)],
                 ["record", "--listen-port", "0", "--db", str(db)],
                 ["demo", "--db", str(db)],
                 ["record", "--catch-up", "--db", str(db)]):  # fmt: skip
        if "--catch-up" in args:
            (work / "new.db.journal").mkdir()
        ran = convtap(*args)
        one_line_error(ran)
        assert "redaction key" in ran.stderr
        assert sorted(p.name for p in work.iterdir()) in ([], ["new.db.journal"])
    decoded = convtap("decode", str(SSE / "alefita_way_call.sse"))  # said as the key, not the input
    one_line_error(decoded)
    assert "redaction key" in decoded.stderr


@pytest.mark.parametrize("odd", ["not UTF-8", "a folder"])
def test_schemas_check_of_a_folder_with_an_odd_entry_is_one_line(tmp_path: Path, odd: str) -> None:
    folder = tmp_path / "schemas"
    assert convtap("schemas", "--dir", str(folder)).returncode == 0
    entry = folder / ("ConversationMessage.json" if odd == "not UTF-8" else "extra.json")
    if odd == "not UTF-8":
        entry.write_bytes(b"\xff\xfe{}")
    else:
        entry.mkdir()
    ran = convtap("schemas", "--check", "--dir", str(folder))
    one_line_error(ran)
    assert str(entry) in ran.stderr
    if odd == "a folder":
        one_line_error(convtap("schemas", "--dir", str(folder)))  # nor removed, nor a traceback
        assert entry.is_dir()


@pytest.mark.process
def test_record_says_its_recorder_died_in_one_line_without_tracebacks(tmp_path: Path) -> None:
    """Killed recorder, clients connected: `record` stops with exit 1 and convtap's line, and
    the loop's cancelled connections printed a CancelledError traceback each."""
    import re
    import signal

    from convtap.mock.server import MockServer

    from tests.seeds import user_turn

    with MockServer("alefita_way", hold_after=2) as mock:
        proc = subprocess.Popen(
            [sys.executable, "-m", "convtap.cli", "record", "--listen-port", "0",
             "--db", str(tmp_path / "c.db"), "--mode", f"reverse:http://127.0.0.1:{mock.port}",
             "--set", f"confdir={tmp_path / 'conf'}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        port = None
        for line in proc.stdout:
            if match := re.search(r"127\.0\.0\.1:(\d+)", line):
                port = int(match.group(1))
                break
        assert port is not None

        def client() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            with contextlib.suppress(OSError, http.client.HTTPException):
                conn.request("POST", "/backend-api/f/conversation",
                             body=json.dumps(user_turn()),
                             headers={"content-type": "application/json"})  # fmt: skip
                conn.getresponse().read()

        clients = [threading.Thread(target=client, daemon=True) for _ in range(5)]
        for thread in clients:
            thread.start()
        assert mock.wait_held(5, timeout=30)  # five streams under way through the proxy
        recorder = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0]
        os.kill(int(recorder), signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        mock.go()
    assert proc.returncode == 1
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert (
        err.strip().splitlines()
        == [line for line in err.strip().splitlines() if "the recorder process ended" in line]
        and err.strip()
    ), err


def post_raw(port: int, path: str, body: bytes) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", path, body=body, headers={"content-type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read()


def tool_with(parameters: str) -> bytes:
    return (b'{"model": "gpt-5", "input": "hi", "stream": true, "tools": [{"type": "function", '
            b'"name": "f", "parameters": ' + parameters.encode() + b"}]}")  # fmt: skip


NAN_MINIMUM = '{"type": "object", "properties": {"n": {"type": "integer", "minimum": NaN}}}'
INF_MAXIMUM = '{"type": "object", "properties": {"n": {"type": "number", "maximum": -1e999}}}'
HOSTILE = {
    "deep-conversation": ("/backend-api/f/conversation", nested(DEEP).encode()),
    "deep-responses": ("/v1/responses", nested(DEEP).encode()),
    "deep-schema": ("/v1/responses", tool_with(nested(DEEP))),
    "minimum-nan": ("/v1/responses", tool_with(NAN_MINIMUM)),
    "maximum-inf": ("/v1/responses", tool_with(INF_MAXIMUM)),
}


@pytest.mark.parametrize(("path", "body"), HOSTILE.values(), ids=HOSTILE.keys())
def test_the_mock_answers_a_hostile_body_with_a_4xx_json_error(path: str, body: bytes) -> None:
    """It answered 500, an HTML page, and printed a traceback."""
    from convtap.mock.server import MockServer

    with MockServer("declared") as mock:
        status, answer = post_raw(mock.port, path, body)
        assert 400 <= status < 500, (status, answer[:200])
        assert isinstance(json.loads(answer), dict)
        fine = tool_with('{"type": "object", "properties": {"n": {"type": "integer"}}}')
        assert post_raw(mock.port, "/v1/responses", fine)[0] == 200  # and it serves on


def test_a_scenario_that_is_not_one_is_said_short(tmp_path: Path) -> None:
    """Pydantic's report ran to 31 lines: now its first problems, in one line."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": [{"kind": "bogus"}, 5], "gzip": "no", "x": 1, "y": 2}))
    ran = convtap("mock", "--scenario", str(bad), "--port", "0")
    one_line_error(ran)
    assert "not a scenario (" in ran.stderr and "more)" in ran.stderr
    assert len(ran.stderr) < 400


def test_a_flow_file_cut_short_imports_what_comes_before_the_cut(tmp_path: Path) -> None:
    """A .mitm cut 7 bytes before its end was refused whole, though 4 of its 5 flows were
    readable: they are imported, and the cut is said in one line (exit 2, as for any file of
    an import that could not be read whole)."""
    from convtap.ingest.readers import read_flows
    from mitmproxy import io

    har = tmp_path / "five.har"
    entries = call_and_return_har()["log"]["entries"]
    log = call_and_return_har()["log"]
    for n in range(3):  # more flows, told apart by their time
        for k, entry in enumerate(json.loads(json.dumps(entries))):
            entry["startedDateTime"] = f"2026-08-28T10:00:0{n}.{k}00Z"
            log["entries"].append(entry)
    har.write_text(json.dumps({"log": log}))
    whole = tmp_path / "five.mitm"
    with whole.open("wb") as handle:
        writer = io.FlowWriter(handle)
        for flow, _ in list(read_flows(har))[:5]:
            writer.add(flow)
    cut = tmp_path / "cut.mitm"
    cut.write_bytes(whole.read_bytes()[:-7])
    db = tmp_path / "c.db"
    ran = convtap("import", str(cut), "--db", str(db))
    one_line_error(ran)
    assert "cut short" in ran.stderr and "imported 4 flows" in ran.stdout
    ran = convtap("import", str(whole), "--db", str(db))
    assert ran.returncode == 0 and "imported 1 flows" in ran.stdout and "4 already" in ran.stdout
    garbage = tmp_path / "garbage.mitm"
    garbage.write_bytes(whole.read_bytes()[:100] + os.urandom(200))
    one_line_error(convtap("import", str(garbage), "--db", str(tmp_path / "g.db")))
    assert not (tmp_path / "g.db").exists()


@pytest.mark.parametrize("kind", ["foreign", "garbage"])
def test_record_catch_up_refuses_what_is_no_capture(
    tmp_path: Path, other_app_db: Path, kind: str
) -> None:
    """It said "nothing to catch up" and exited 0."""
    target = other_app_db
    if kind == "garbage":
        target = tmp_path / "garbage.db"
        target.write_bytes(os.urandom(4096))
    before = fingerprint(target)
    one_line_error(convtap("record", "--catch-up", "--db", str(target)))
    assert fingerprint(target) == before


def test_a_hard_link_to_the_database_is_not_imported_into_itself(
    tmp_path: Path, capture: Path
) -> None:
    link = tmp_path / "link.db"
    os.link(capture, link)
    ran = convtap("import", str(link), "--db", str(capture))
    one_line_error(ran)
    assert "the database it would be imported into" in ran.stderr


# -- bounded by design ----------------------------------------------------------------------------


def test_a_schema_asking_for_millions_gets_capped_arguments_and_others_their_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Tools whose schemas ask for 200,000 items or a 2,000,000-character string: the mock makes
    arguments within its caps (docs/commands.md), says so, and a second client is answered."""
    from convtap.mock.arguments import MAX_SIZE
    from convtap.mock.refclient import RefClient
    from convtap.mock.server import MockServer

    def tool(name: str, kind: dict[str, object]) -> dict[str, object]:
        return {"name": name, "description": name, "type": "kwargs",
                "params": [{"name": "x", "required": True, "type": kind}]}  # fmt: skip

    declared = [
        tool("many", {"type": "array", "minItems": 200_000, "items": {"type": "string"}}),
        tool("long", {"type": "string", "minLength": 2_000_000}),
    ]
    made: list[object] = []
    with MockServer("declared", seed=3) as server:
        greedy = threading.Thread(
            target=lambda: made.extend(RefClient(server.url, timeout=60).run_declared(declared))
        )
        greedy.start()
        other = RefClient(server.url, timeout=30).run()
        greedy.join(120)
    assert other.accepted and "Pronto" in other.continuation_text  # answered whole
    assert [call.tool for call in made] == ["many", "long"]  # type: ignore[attr-defined]
    for call in made:
        assert len(call.arguments_text) <= MAX_SIZE + 64  # type: ignore[attr-defined]
    capped = [r.getMessage() for r in caplog.records if "capped" in r.getMessage()]
    assert len(capped) == 2 and "many" in capped[0] and "long" in capped[1], capped


NOT_UTF8 = (
    b'event: delta_encoding\ndata: "v1"\n\n'
    b'event: delta\ndata: {"p": "", "o": "add", "v": {"message": {"id": "m1", "author": {"role":'
    b' "assistant"}, "content": {"content_type": "text", "parts": ["caf\xe9 \xff\xfe"]}}, '
    b'"conversation_id": "c-bytes"}}\n\n'
    b": a comment \x80\x81\n\n"
    b'event: delta\ndata: {"v": " and \xc3\x28 on"}\n\n'
    b"data: [DONE]\n\n"
)


def stored_bytes(db: Path) -> bytes:
    from convtap.store.database import event_bytes

    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM events ORDER BY flow_id, seq").fetchall()
    return b"".join(event_bytes(dict(row)) for row in rows)


def imported_as_it_came(tmp_path: Path, body: bytes) -> Path:
    """`body` imported as a raw `.sse`: its raw events are its bytes, before and after a
    `reprocess`; the capture."""
    raw = tmp_path / "turn.sse"
    raw.write_bytes(body)
    db = tmp_path / "imported.db"
    assert convtap("import", str(raw), "--db", str(db)).returncode == 0
    assert stored_bytes(db) == body
    assert convtap("reprocess", "--db", str(db)).returncode == 0
    assert stored_bytes(db) == body
    return db


@pytest.mark.process
def test_bytes_that_are_not_utf8_are_stored_and_given_back_as_they_came(tmp_path: Path) -> None:
    """Recorded live through mitmdump and imported from a raw `.sse`: the raw events read back
    from the database are the bytes sent; `reprocess` keeps them; `export` gives them back."""
    from tests.harness import mitmdump

    with burst_upstream([NOT_UTF8]) as upstream, mitmdump(
        tmp_path, f"reverse:http://127.0.0.1:{upstream}"
    ) as proxy:  # fmt: skip
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
        conn.request("POST", "/backend-api/f/conversation", body=json.dumps({"n": 0}),
                     headers={"content-type": "application/json"})  # fmt: skip
        assert conn.getresponse().read() == NOT_UTF8
        proxy.stop()
    assert stored_bytes(proxy.db) == NOT_UTF8
    imported = imported_as_it_came(tmp_path, NOT_UTF8)
    har = tmp_path / "out.har"
    assert convtap("export", "--db", str(imported), "--output", str(har)).returncode == 0
    content = json.loads(har.read_text())["log"]["entries"][0]["response"]["content"]
    assert content["encoding"] == "base64"
    assert base64.b64decode(content["text"]) == NOT_UTF8


def test_an_imported_raw_stream_is_stored_piece_by_piece_like_a_live_one(tmp_path: Path) -> None:
    """A raw `.sse` was one `events` row for the whole body (`diff` on a large one took 48 s and
    800 MB); it is fed in pieces as a live stream arrives, and stored a piece's events a row."""
    from convtap.journal.flows import PIECE
    from convtap.store.database import event_bytes

    frames = b"".join(b'event: delta\ndata: {"v": " word %d"}\n\n' % n for n in range(20_000))
    body = NOT_UTF8.replace(b"data: [DONE]\n\n", b"")
    raw = tmp_path / "long.sse"
    raw.write_bytes(body + frames + b"data: [DONE]\n\n")
    db = tmp_path / "long.db"
    assert convtap("import", str(raw), "--db", str(db)).returncode == 0
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        sizes = [len(event_bytes(dict(row))) for row in conn.execute("SELECT * FROM events")]
        (events,) = conn.execute("SELECT sum(count) FROM events").fetchone()
    assert len(sizes) >= len(raw.read_bytes()) // PIECE and max(sizes) <= 2 * PIECE, sizes[:5]
    assert events >= 20_000
    assert stored_bytes(db) == raw.read_bytes()


def test_a_crlf_stream_is_stored_with_the_line_ends_it_came_with(tmp_path: Path) -> None:
    """A stream framed with CRLF was stored with LF line ends; its raw events are now its bytes,
    a CRLF cut between its CR and its LF by a piece's end included."""
    from convtap.journal.flows import PIECE

    frames = b"".join(b'event: delta\r\ndata: {"v": " w%d"}\r\n\r\n' % n for n in range(2_000))
    head = NOT_UTF8.replace(b"data: [DONE]\n\n", b"").replace(b"\n", b"\r\n")
    body = next(
        candidate
        for n in range(100)
        if (candidate := head + b": " + b"x" * n + b"\r\n" + frames + b"data: [DONE]\r\n\r\n")[
            PIECE - 1 : PIECE + 1
        ]
        == b"\r\n"
    )
    imported_as_it_came(tmp_path, body)


# -- no secret in clear, of any kind, in the database, the report or an export ---------------------

# Kinds a user pastes and a server echoes that were not caught at all: name -> (where, secret)
UNCAUGHT = {
    "google": ("prose", "AIzaSyD3x4mPl3Gk8Yq0Zr7Wt2Uv9Lb6Nc1Hj5Pe"),
    "hugging-face": ("prose", "hf_QwErTyUiOpAsDfGhJkLzXcVbNm1234567890"),
    "aws-secret": ("prose", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    "stripe": ("prose", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dcXyZ" * 2),
    "api-key-with-a-space": ("key:Api Key", "apispaceCANARY0001"),
    "private-key-with-a-space": ("key:private key", "privspaceCANARY0002"),
    "passphrase": ("key:passphrase", "passphraseCANARY0003"),
    "pass": ("key:pass", "passCANARY0004"),
    "referer-token": ("referer", "access_token=refererCANARY0005"),
    "referer-sig": ("referer", "sig=refererSIGcanary0006"),
    "query-code": ("url", "code=oauthCODEcanary0007"),
    "event-name": ("event", "sk-proj-eventNAMEcanary0008abcdefghij"),
}


def secret_of(text: str) -> str:
    """The part that must not be stored: after `NAME=`, else all."""
    return text.split("=", 1)[1] if "=" in text else text


def uncaught_har() -> dict[str, object]:
    prose = " and ".join(s for where, s in UNCAUGHT.values() if where == "prose")
    request = user_turn(f"my keys: {prose}")
    request["messages"][0]["metadata"] = {
        where[4:]: secret for where, secret in UNCAUGHT.values() if where.startswith("key:")
    }
    body = (SSE / "plain_answer.sse").read_text().replace("data: [DONE]", "").rstrip("\n")
    named = UNCAUGHT["event-name"][1]
    extra = [
        f'event: {named}\ndata: {{"type": "server_ste_metadata", "note": 1}}',
        'data: {"type": "server_ste_metadata", "note": ' + json.dumps(prose) + "}",
        'data: {"type": "server_ste_metadata", "extra": '
        + json.dumps(request["messages"][0]["metadata"]) + "}",
        "data: [DONE]",
    ]  # fmt: skip
    stream = "\n\n".join([body, *extra]) + "\n\n"
    query = UNCAUGHT["query-code"][1]
    url = f"https://chatgpt.com/backend-api/f/conversation?{query}"
    entry = har_entry(url, request, stream.encode(), "2026-11-30T10:00:00.000Z")
    referer = "&".join(s for where, s in UNCAUGHT.values() if where == "referer")
    entry["request"]["headers"].append(
        {"name": "Referer", "value": f"https://chatgpt.com/c/abc?{referer}&lang=pt"}
    )
    return {"log": {"version": "1.2", "creator": {"name": "t", "version": "1"},
                    "entries": [entry]}}  # fmt: skip


@pytest.fixture(scope="module")
def outputs_of_uncaught(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The HAR of every kind imported; the database's files, the report, the exports."""
    folder = tmp_path_factory.mktemp("kinds")
    har = folder / "kinds.har"
    har.write_text(json.dumps(uncaught_har()))
    db = folder / "kinds.db"
    assert convtap("import", str(har), "--db", str(db)).returncode == 0
    outputs = {"db": capture_bytes(db)}
    assert convtap("report", "--db", str(db), "--output", str(folder / "r.html")).returncode == 0
    outputs["report"] = report_text(folder / "r.html")  # its data decoded too
    for flags in ([], ["--shape-only"], ["--blank-words"]):
        out = folder / f"export{len(outputs)}.har"
        assert convtap("export", "--db", str(db), "--output", str(out), *flags).returncode == 0
        outputs[" ".join(["export", *flags])] = out.read_bytes()
    traces = convtap("export", "--db", str(db), "--format", "otlp", "--otel-content")
    assert traces.returncode == 0 and b"gen_ai.input.messages" in traces.stdout_bytes
    outputs["export --format otlp --otel-content"] = traces.stdout_bytes
    assert b"<redacted:" in outputs["db"] and b"lang=pt" in outputs["db"]
    return outputs


@pytest.mark.parametrize("kind", sorted(UNCAUGHT))
def test_no_kind_of_secret_is_in_the_database_the_report_or_an_export(
    outputs_of_uncaught: dict[str, bytes], kind: str
) -> None:
    """Google and Hugging Face keys, an AWS secret key in prose, a Stripe key past 24
    characters, JSON keys with a space, `passphrase`, `pass`, a Referer's query (an allow-listed
    header), a URL's `code=`, a key as an SSE event name: each was stored in clear, and went on
    into the report and the HAR export (`--shape-only` too); the traces with content read only
    what was stored."""
    secret = secret_of(UNCAUGHT[kind][1]).encode()
    parts = (secret, secret[-12:])  # the end too: a Stripe key lost only its first 24
    leaks = [where for where, data in outputs_of_uncaught.items() if any(p in data for p in parts)]
    assert leaks == []


# -- no secret hidden by how JSON writes it -------------------------------------------------------

OPENAI_KEY = "sk-proj-" + "Tq7Zr2Lm9Xc4Vb8Nn1Hs6Kd3Pf5Gw0Jy" * 4
# Where a secret was stored in clear because of how it was written: name -> (secret, where).
HIDDEN = {
    "a key of the request's object": (OPENAI_KEY, "request-key"),
    "a key of an event's object": ("sk-ant-api03-" + "Rb5Yq8Wn2Ce7Ux4Mk" * 5 + "AA", "event-key"),
    "escaped in an event that is not JSON": ("ghp_Fe9Ws2Qa7Zx4Cv1Bn8Mk3Lp6Jh0Gt5Rd2Ysq", "unread"),
    "a tool result that is a JSON array": ("arrayRESULTpass0001", "output:array"),
    "a tool result encoded twice": ("twiceRESULTpass0002", "output:twice"),
    "a tool result after a line break": ("breakRESULTsecret0003", "output:break"),
    "arguments streaming JSON text": ("nestedARGSapikey0004", "arguments:nested"),
    "arguments streaming a unicode escape": ("hf_Pk4Ns7Ud1Rv8Xe2Wm5Ta9Qc3Lb6Jg0Hy", "arguments:u"),
    "arguments streaming an escaped URL": ("slashARGSpassword0005", "arguments:slash"),
}


def escaped(secret: str) -> str:
    """A secret as JSON text may write it: its first character a `\\u` escape."""
    return f"\\u{ord(secret[0]):04x}{secret[1:]}"


def hidden_arguments(where: str, secret: str) -> str:
    """A function call's arguments (JSON text) that hide `secret` as `where` says."""
    if where == "arguments:nested":
        return json.dumps({"cmd": json.dumps({"api_key": secret})})
    if where == "arguments:u":
        return '{"key": "' + escaped(secret) + '"}'
    return json.dumps({"url": f"https://me:{secret}@db.example/x"}).replace("/", "\\/")


def hidden_output(where: str, secret: str) -> str:
    """A tool's result (a string) that hides `secret` as `where` says."""
    if where == "output:array":
        return json.dumps([{"name": "db", "passphrase": secret}])
    if where == "output:twice":
        return json.dumps(json.dumps({"pass": secret}))
    return "\n" + json.dumps({"client_secret": secret})


def responses_stream(arguments: str) -> bytes:
    """A Responses stream whose function call's arguments come in 4-character deltas."""
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "run",
            "arguments": ""}  # fmt: skip
    values = [{"type": "response.created", "response": {"id": "resp_1", "output": []}},
              {"type": "response.output_item.added", "output_index": 0, "item": item}]  # fmt: skip
    values += [{"type": "response.function_call_arguments.delta", "output_index": 0,
                "item_id": "fc_1", "delta": arguments[i : i + 4]}
               for i in range(0, len(arguments), 4)]  # fmt: skip
    values.append({"type": "response.completed", "response": {"id": "resp_1", "output": []}})
    return "".join(f"event: {v['type']}\ndata: {json.dumps(v)}\n\n" for v in values).encode()


def hidden_entry(n: int, secret: str, where: str) -> dict[str, object]:
    """A flow of its own (no hint of one case helps another) that hides `secret`."""
    at = f"2026-11-30T11:00:{n:02d}.000Z"
    if where.startswith(("output:", "arguments:")):
        output = hidden_output(where, secret) if where.startswith("output:") else "ok"
        request = {"model": "gpt-5", "stream": True, "input": [
            {"type": "function_call_output", "call_id": "call_0", "output": output}]}  # fmt: skip
        arguments = hidden_arguments(where, secret) if where.startswith("arguments:") else "{}"
        return har_entry("https://api.openai.com/v1/responses", request,
                         responses_stream(arguments), at)  # fmt: skip
    request = user_turn("hello")
    if where == "request-key":
        request["messages"][0]["metadata"] = {secret: "seen"}
    body = (SSE / "plain_answer.sse").read_text().replace("data: [DONE]\n\n", "")
    if where == "event-key":
        body += 'data: {"type": "server_ste_metadata", "extra": {"' + secret + '": 1}}\n\n'
    if where == "unread":  # cut short: it never parses
        body += 'data: {"type": "server_ste_metadata", "note": "' + escaped(secret) + "\n\n"
    url = "https://chatgpt.com/backend-api/f/conversation"
    return har_entry(url, request, (body + "data: [DONE]\n\n").encode(), at)


def appended_text(data: bytes) -> str:
    """What the deltas in `data` append, put back together, as it is and with two levels of
    JSON escapes undone: where a secret cut into pieces would show whole."""
    pieces = re.findall(rb'"(?:v|delta)": ?"((?:[^"\\]|\\.)*)"', data)
    text = "".join(json.loads(b'"' + piece + b'"') for piece in pieces)
    levels = [text]
    for _ in range(2):
        levels.append(levels[-1].replace('\\"', '"').replace("\\\\", "\\").replace("\\/", "/"))
    return "\n".join(levels)


@pytest.fixture(scope="module")
def outputs_of_hidden(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The hidden secrets' flows imported; the database, the text its deltas append, the
    report, the exports and the shapes."""
    folder = tmp_path_factory.mktemp("hidden")
    entries = [hidden_entry(n, *case) for n, case in enumerate(HIDDEN.values())]
    har = folder / "hidden.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": entries,
                                       "creator": {"name": "t", "version": "1"}}}))  # fmt: skip
    db = folder / "hidden.db"
    assert convtap("import", str(har), "--db", str(db)).returncode == 0
    outputs = {"db": capture_bytes(db)}
    outputs["appended"] = appended_text(outputs["db"]).encode()
    assert convtap("report", "--db", str(db), "--output", str(folder / "r.html")).returncode == 0
    outputs["report"] = report_text(folder / "r.html")  # its data decoded too
    for flags in ([], ["--shape-only"]):
        out = folder / f"export{len(outputs)}.har"
        assert convtap("export", "--db", str(db), "--output", str(out), *flags).returncode == 0
        outputs[" ".join(["export", *flags])] = out.read_bytes()
    outputs["shapes"] = convtap("shapes", str(db)).stdout.encode()
    assert outputs["db"].count(b"<redacted:") >= len(HIDDEN)
    return outputs


@pytest.mark.parametrize("case", sorted(HIDDEN))
def test_no_secret_is_hidden_from_redaction_by_how_json_writes_it(
    outputs_of_hidden: dict[str, bytes], case: str
) -> None:
    """A secret used as an object's key, written with a `\\u` escape or `\\/`, or inside JSON
    text carried in a string (an array, a string encoded twice, after a line break; a call's
    arguments as they stream): each was stored in clear, or in pieces the deltas put together,
    and went on into the report, the exports (`--shape-only` too) and the shapes."""
    secret = HIDDEN[case][0].encode()
    runs = {secret[i : i + 10] for i in range(8, len(secret) - 9)}  # past a kind's prefix
    leaks = [where for where, data in outputs_of_hidden.items() if any(r in data for r in runs)]
    assert leaks == []


def test_a_secret_in_bare_frames_no_append_takes_is_redacted_across_pieces(tmp_path: Path) -> None:
    """Bare frames sent when no append is open (after a patch of the root) are no text to the
    decoder, but their strings still put a secret together: cut across the import's pieces (as
    across network chunks live), the frames after the cut were never looked at, and the raw
    events kept the key in clear, a few characters a frame."""
    from convtap.journal.flows import PIECE

    secret = OPENAI_KEY
    head = (SSE / "plain_answer.sse").read_bytes().replace(b"data: [DONE]\n\n", b"")

    def body(filler: int) -> tuple[bytes, int]:
        """The stream, and where the frame holding the secret's 20th character starts."""
        text = "x" * filler + " my key: " + secret + " and that is all" + " words" * 100
        frames = [b'event: delta\ndata: {"v": %s}\n\n' % json.dumps(text[i : i + 3]).encode()
                  for i in range(0, len(text), 3)]  # fmt: skip
        at = (filler + len(" my key: ") + 20) // 3
        return head + b"".join(frames) + b"data: [DONE]\n\n", len(head) + sum(map(len, frames[:at]))

    stream = next(b for n in range(0, 3 * PIECE, 3) if (b := body(n))[1] > PIECE)[0]
    raw = tmp_path / "turn.sse"
    raw.write_bytes(stream)
    db = tmp_path / "frames.db"
    assert convtap("import", str(raw), "--db", str(db)).returncode == 0
    text = appended_text(capture_bytes(db))
    assert "<redacted:" in text
    assert not any(secret[i : i + 10] in text for i in range(8, len(secret) - 9))


def test_decode_prints_no_secret_an_event_carries_as_its_type_or_a_key(tmp_path: Path) -> None:
    """`convtap decode` lists the kinds of events it saw: an event's `type`, an other event's
    keys, counted before they were redacted, so the text printed the secret in clear."""
    typed = "hf_" + "Vd3Rk8Zq1Wy6Tn4Mb9Lc2Xs7" * 2
    keyed = "sk-ant-api03-" + "Gu5Jp0Hc8Fv3Nq6Dw1Ez" * 5
    head = (SSE / "plain_answer.sse").read_text().replace("data: [DONE]\n\n", "")
    raw = tmp_path / "kinds.sse"
    raw.write_text(head + f'data: {{"type": "{typed}"}}\n\ndata: {{"{keyed}": 1}}\n\n'
                   "data: [DONE]\n\n")  # fmt: skip
    for fmt in ("text", "json"):
        ran = convtap("decode", "--format", fmt, str(raw))
        assert ran.returncode == 0 and "<redacted:" in ran.stdout, ran.stderr
        assert typed[3:20] not in ran.stdout and keyed[13:30] not in ran.stdout


def handoff_with(pieces: list[str], spell: object) -> list[str]:
    """The example handoff's WebSocket frames, the stream item that writes "uma plani" replaced
    by one frame per piece (its SSE text as `spell` writes it), chained after it."""
    frames = [
        json.loads(line) for line in (SSE / "handoff_ws.frames.jsonl").read_text().splitlines()
    ]
    at = next(i for i, frame in enumerate(frames) if "uma plani" in json.dumps(frame))
    del frames[at + 1]  # its catch-up copy
    for frame in frames[at + 1 :]:  # the frames after it move on, their items chained after
        frame[0]["offset"] += len(pieces) if frame[0]["offset"] > frames[at][0]["offset"] else 0
        inner = frame[0]["payload"]["payload"]
        if inner.get("parent_stream_item_id") == "si-4":
            inner["parent_stream_item_id"] = f"si-4.{len(pieces) - 1}"
    copies = []
    for n, piece in enumerate(pieces):
        copy = json.loads(json.dumps(frames[at]))
        copy[0]["offset"] += n
        inner = copy[0]["payload"]["payload"]
        inner["encoded_item"] = spell(json.dumps(piece))  # type: ignore[operator]
        if n:
            inner["stream_item_id"] = f"si-4.{n}"
            inner["parent_stream_item_id"] = "si-4" + (f".{n - 1}" if n > 1 else "")
        copies.append(copy)
    frames[at : at + 1] = copies
    return [json.dumps(frame) for frame in frames]


def stream_items_text(db: Path) -> str:
    """What the bare frames in the stream items of a capture's WebSocket frames append."""
    with contextlib.closing(events_sql(sqlite3.connect(db))) as conn:
        rows = conn.execute("SELECT convtap_event(data, raw) FROM events ORDER BY flow_id, seq")
        frames = [json.loads(data) for (data,) in rows if data.startswith("[")]
    items = "".join(m["payload"]["payload"].get("encoded_item", "") for frame in frames
                    for m in frame if "payload" in m.get("payload", {}))  # fmt: skip
    values = []
    for line in items.splitlines():
        with contextlib.suppress(ValueError):
            values.append(json.loads(line.removeprefix("data:")))
    return "".join(v["v"] for v in values if isinstance(v, dict) and isinstance(v.get("v"), str))


SSE_SPELLINGS = {
    "crlf": lambda piece: f'event: delta\r\ndata: {{"v": {piece}}}\r\n\r\n',
    "no-space": lambda piece: f'event:delta\ndata:{{"v": {piece}}}\n\n',
    "spaced-json": lambda piece: f'event: delta\ndata: {{ "v" : {piece} }}\n\n',
}


@pytest.mark.parametrize("spelling", sorted(SSE_SPELLINGS))
def test_a_secret_cut_across_websocket_stream_items_in_any_sse_spelling_is_redacted(
    tmp_path: Path, spelling: str
) -> None:
    """A turn continued on the user WebSocket writes its text in stream items of 2 characters
    each (no one with a hint of a key), in SSE as it may be written: CRLF line ends, `data:`
    with no space, spaces in the JSON. Its text was found only in one spelling, so the raw
    frames kept the key, 2 characters a frame (the message was redacted)."""
    text = "my key is " + OPENAI_KEY + " and that is all" + " more" * 100
    frames = handoff_with([text[i : i + 2] for i in range(0, len(text), 2)],
                          SSE_SPELLINGS[spelling])  # fmt: skip
    turn = har_entry("https://chatgpt.com/backend-api/f/conversation", user_turn(),
                     (SSE / "handoff_ws.sse").read_bytes(), "2026-11-30T12:00:00.000Z")  # fmt: skip
    request = {k: v for k, v in turn["request"].items() if k != "postData"}
    messages = [{"type": "receive", "time": 1.9e9 + n / 1000, "opcode": 1, "data": frame}
                for n, frame in enumerate(frames)]  # fmt: skip
    socket = {**turn, "startedDateTime": "2026-11-30T12:00:01.000Z",
              "request": {**request, "method": "GET",
                          "url": "wss://chatgpt.com/backend-api/ws/user/user-1"},
              "response": {**turn["response"], "status": 101, "headers": [],
                           "content": {"size": 0, "mimeType": "x"}},
              "_webSocketMessages": messages}  # fmt: skip
    har = tmp_path / "ws.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": [turn, socket],
                                       "creator": {"name": "t", "version": "1"}}}))  # fmt: skip
    db = tmp_path / "ws.db"
    assert convtap("import", str(har), "--db", str(db)).returncode == 0
    appended = stream_items_text(db)
    assert "my key is " in appended
    assert not any(OPENAI_KEY[i : i + 10] in appended for i in range(8, len(OPENAI_KEY) - 9))


def test_the_headers_an_mcp_tool_sends_are_kept_as_headers_are(tmp_path: Path) -> None:
    """A Responses request's MCP tool carries the HTTP headers to send its server (the way it
    authenticates): one under a name no secret key has was stored in clear, and exported."""
    key = "mcpHEADERvalue" + "Zx81Qw" * 4
    tool = {"type": "mcp", "server_label": "crm", "server_url": "https://mcp.example/sse",
            "headers": {"X-Crm-Auth": key, "Content-Type": "application/json"}}  # fmt: skip
    request = {"model": "gpt-5", "stream": True, "input": "hi", "tools": [tool]}
    entry = har_entry("https://api.openai.com/v1/responses", request, responses_stream("{}"),
                      "2026-11-30T12:30:00.000Z")  # fmt: skip
    har = tmp_path / "mcp.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": [entry],
                                       "creator": {"name": "t", "version": "1"}}}))  # fmt: skip
    db = tmp_path / "mcp.db"
    assert convtap("import", str(har), "--db", str(db)).returncode == 0
    outputs = [capture_bytes(db)]
    for flags in ([], ["--shape-only"]):
        out = tmp_path / f"export{len(outputs)}.har"
        assert convtap("export", "--db", str(db), "--output", str(out), *flags).returncode == 0
        outputs.append(out.read_bytes())
    assert not any(key[4:].encode() in data for data in outputs)
    assert b"application/json" in outputs[0] and b"<redacted:" in outputs[0]


def explicit_appends(text: str, between: str | None) -> bytes:
    """A turn whose text comes in 3-character appends that each name their path (no bare
    frame), each followed, when `between` is given, by an append to that other path."""
    head = (SSE / "plain_answer.sse").read_text().replace("data: [DONE]\n\n", "")
    events = []
    for i in range(0, len(text), 3):
        events.append({"p": "/message/content/parts/0", "o": "append", "v": text[i : i + 3]})
        if between is not None:
            events.append({"p": between, "o": "append", "v": "z"})
    frames = "".join(f"event: delta\ndata: {json.dumps(e)}\n\n" for e in events)
    return (head + frames + "data: [DONE]\n\n").encode()


@pytest.mark.parametrize("between", [None, "/message/metadata/note"])
def test_a_secret_in_appends_that_each_name_their_path_is_redacted(
    tmp_path: Path, between: str | None
) -> None:
    """Text appended by deltas that each name their path, rather than by bare frames: each
    began a new string to the redaction, so a key cut across them was never put back together
    and stayed in the raw events, 3 characters an event; appends to another string between
    them cut it apart too."""
    raw = tmp_path / "turn.sse"
    raw.write_bytes(explicit_appends("my key is " + OPENAI_KEY + " and that is all", between))
    db = tmp_path / "appends.db"
    assert convtap("import", str(raw), "--db", str(db)).returncode == 0
    with contextlib.closing(events_sql(sqlite3.connect(db))) as conn:
        rows = conn.execute("SELECT convtap_event(data, raw) FROM events ORDER BY seq")
        stored = "".join(data for (data,) in rows)
    values = [json.loads(line[6:]) for line in stored.splitlines() if line.startswith("data: {")]
    text = "".join(v["v"] for v in values if v.get("p") == "/message/content/parts/0")
    assert "my key is <redacted:" in text
    assert not any(OPENAI_KEY[i : i + 10] in text for i in range(8, len(OPENAI_KEY) - 9))


def test_a_decode_error_quotes_no_secret_cut_short(tmp_path: Path) -> None:
    """A decode error quotes the start of what it could not read (80 characters of an event
    that is no JSON object, 60 of arguments whose deltas disagree with `.done`): a key the cut
    fell in no longer looked like one, so its first characters were stored and printed in clear."""
    head = (SSE / "plain_answer.sse").read_text().replace("data: [DONE]\n\n", "")
    data = json.dumps("note " + "x" * 52 + " " + OPENAI_KEY)  # the key crosses character 80
    (tmp_path / "event.sse").write_text(f"{head}data: {data}\n\ndata: [DONE]\n\n")
    arguments = json.dumps({"x": "y" * 30 + " " + OPENAI_KEY})  # it crosses character 60
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f"}
    events = [{"type": "response.created", "response": {"id": "resp_1"}},
              {"type": "response.output_item.added", "output_index": 0, "item": item},
              {"type": "response.function_call_arguments.delta", "item_id": "fc_1",
               "output_index": 0, "delta": arguments},
              {"type": "response.function_call_arguments.done", "item_id": "fc_1",
               "output_index": 0, "arguments": arguments + " "}]  # fmt: skip
    (tmp_path / "args.sse").write_text("".join(f"data: {json.dumps(e)}\n\n" for e in events))
    db = tmp_path / "errors.db"
    outputs = []
    for name in ("event.sse", "args.sse"):
        assert convtap("import", str(tmp_path / name), "--db", str(db)).returncode == 0
        for fmt in ("text", "json"):
            ran = convtap("decode", "--format", fmt, str(tmp_path / name))
            assert "not a JSON object" in ran.stdout or "add up to" in ran.stdout
            outputs.append(ran.stdout.encode())
    outputs.append(capture_bytes(db))
    assert not any(OPENAI_KEY[8:16].encode() in data for data in outputs)


def test_a_damaged_compressed_event_row_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    """A raw event row whose zlib bytes were damaged (by hand, by a disk): every command that
    reads raw events says so in one line and exits 2 (it was a zlib traceback); `reprocess`
    leaves the previous result, and nothing is written beside."""
    db = tmp_path / "damaged.db"
    ran = convtap(
        "import", str(ROOT / "captures/examples/sse/alefita_way_call.sse"), "--db", str(db)
    )
    assert ran.returncode == 0, ran.stderr
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        (compressed,) = conn.execute("SELECT count(*) FROM events WHERE data IS NULL").fetchone()
        assert compressed > 0
        conn.execute("UPDATE events SET raw = x'789c0102' WHERE rowid = (SELECT min(rowid) "
                     "FROM events WHERE data IS NULL)")  # fmt: skip
        calls = conn.execute("SELECT * FROM tool_calls").fetchall()
    before = fingerprint(db)
    for args in (
        ["export", "--db", str(db), "--output", str(tmp_path / "out.har")],
        ["export", "--db", str(db), "--shape-only", "--output", str(tmp_path / "shape.har")],
        ["diff", str(db), str(db)],
        ["shapes", str(db), "--output", str(tmp_path / "shapes.json")],
        ["reprocess", "--db", str(db)],
    ):
        one_line_error(convtap(*args))
        assert "damaged" in convtap(*args).stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.db"]
    assert fingerprint(db) == before
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT * FROM tool_calls").fetchall() == calls


def test_shapes_never_writes_over_a_source_it_reads(tmp_path: Path) -> None:
    """`convtap shapes c.db --output c.db` replaced the capture by its shapes (exit 0)."""
    db = tmp_path / "c.db"
    ran = convtap(
        "import", str(ROOT / "captures/examples/sse/alefita_way_call.sse"), "--db", str(db)
    )
    assert ran.returncode == 0, ran.stderr
    before = fingerprint(db)
    one_line_error(convtap("shapes", str(db), "--output", str(db)))
    assert fingerprint(db) == before


def test_a_raw_stream_whose_sidecar_is_a_folder_is_one_line(tmp_path: Path) -> None:
    """`X.request.json` a folder: the import said IsADirectoryError in a traceback."""
    raw = tmp_path / "turn.sse"
    raw.write_bytes((ROOT / "captures/examples/sse/alefita_way_call.sse").read_bytes())
    (tmp_path / "turn.request.json").mkdir()
    ran = convtap("import", str(raw), "--db", str(tmp_path / "t.db"))
    assert "Traceback" not in ran.stderr and "turn.request.json" in ran.stderr, ran.stderr
    assert ran.returncode != 0


@pytest.mark.process
@pytest.mark.parametrize("command", ["import", "audit", "reprocess", "record"])
def test_a_fifo_or_device_as_the_database_is_one_line_and_no_wait(
    tmp_path: Path, good_har: Path, command: str
) -> None:
    """`--db` naming a FIFO waited forever for a writer (the first bytes were read to check
    them), and a device was opened as a database."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = {"import": [str(good_har)], "record": ["--listen-port", "0"]}.get(command, [])
    for db in (fifo, Path("/dev/null")):
        ran = subprocess.run([sys.executable, "-m", "convtap.cli", command, *args, "--db", str(db)],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        one_line_error(ran)
        assert "not a regular file" in ran.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode) and sorted(tmp_path.iterdir()) == [fifo, good_har]


def test_a_symlink_loop_or_to_nothing_as_a_path_is_one_line(
    tmp_path: Path, capture: Path, good_har: Path
) -> None:
    """`report` of a symlink loop (as --db or --output) printed pathlib's RuntimeError; a
    symlink to nothing given to `import --db` was said to be read-only."""
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    loop, dangling = str(tmp_path / "loop1"), str(tmp_path / "dangling")
    one_line_error(convtap("report", "--db", loop))
    one_line_error(convtap("report", "--db", str(capture), "--output", loop))
    one_line_error(convtap("import", str(good_har), "--db", loop))
    ran = convtap("import", str(good_har), "--db", dangling)
    one_line_error(ran)
    assert "symlink to nothing" in ran.stderr and not (tmp_path / "nowhere").exists()


def test_a_capture_with_a_damaged_page_is_one_line_and_changes_nothing(
    tmp_path: Path, capture: Path
) -> None:
    """A page of the events table overwritten (a disk, a copy gone wrong): `export`, `diff`
    and `shapes` printed SQLite's "database disk image is malformed" as a traceback."""
    with contextlib.closing(sqlite3.connect(capture)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'events'"
        ).fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    with capture.open("r+b") as handle:
        handle.seek((root - 1) * size)
        handle.write(b"\xff" * size)
    before = fingerprint(capture)
    for args in (
        ["export", "--db", str(capture), "--output", str(tmp_path / "out.har")],
        ["diff", str(capture), str(capture)],
        ["diff", "--against-schemas", str(capture)],
        ["shapes", str(capture), "--output", str(tmp_path / "shapes.json")],
    ):
        ran = convtap(*args)
        one_line_error(ran)
        assert "malformed" in ran.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capture.db", "good.har"]
    assert fingerprint(capture) == before


@pytest.mark.parametrize("command", ["import", "audit", "reprocess"])
def test_another_applications_sqlite_file_without_tables_is_not_taken(
    tmp_path: Path, good_har: Path, command: str
) -> None:
    """A SQLite file with no table yet (another application set its `user_version` and
    `application_id`, its schema to come) was taken as new: `audit` and `reprocess` made
    convtap's schema in it."""
    other = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(other)) as conn:
        conn.execute("PRAGMA application_id = 1234")
        conn.execute("PRAGMA user_version = 7")
    before = fingerprint(other)
    args = [str(good_har)] if command == "import" else []
    ran = convtap(command, *args, "--db", str(other))
    one_line_error(ran)
    assert "not a convtap capture" in ran.stderr and fingerprint(other) == before


@pytest.mark.process
def test_a_capture_another_process_holds_locked_is_a_bounded_wait_and_one_clear_line(
    tmp_path: Path, capture: Path, good_har: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process in `BEGIN EXCLUSIVE` on the capture: the writing commands waited their
    bound and said the capture was "not a usable SQLite database (database is locked)"."""
    from convtap.store import database, opening

    monkeypatch.setattr(opening, "BUSY_TIMEOUT", 0.5)  # where a capture is opened
    monkeypatch.setattr(database, "BUSY_TIMEOUT", 0.5)  # and read beside its writer
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], "
         "isolation_level=None); c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); "
         "sys.stdin.read()", str(capture)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        before = hashlib.sha256(capture.read_bytes()).hexdigest()
        for args in (["import", str(good_har)], ["audit"], ["reprocess"]):
            ran = convtap(*args, "--db", str(capture))
            one_line_error(ran)
            assert "is locked by another process (waited 0 s)" in ran.stderr
        assert hashlib.sha256(capture.read_bytes()).hexdigest() == before
    finally:
        holder.communicate("", timeout=30)


@contextlib.contextmanager
def mock_process(scenario: str) -> Iterator[int]:
    """`convtap mock` as a user runs it, in a process of its own; its port."""
    command = [sys.executable, "-m", "convtap.cli", "mock", "--port", "0", "--scenario", scenario]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            yield int(proc.stdout.readline().rsplit(":", 1)[1])
        finally:
            proc.terminate()
            proc.wait(30)


@pytest.mark.process
def test_the_mock_answers_another_client_while_it_streams_a_long_echo() -> None:
    """The mock wrote a stream's pieces without giving the loop back while the socket took
    them: a message of 16 MB (its echo 32 MB), read as fast as it came, held every other client
    until it was all sent; and it found the first byte past ASCII one byte at a time."""
    message = user_turn("h" * 16_000_000)
    got = [0]
    with mock_process("plain") as port:
        big = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        big.request("POST", "/backend-api/f/conversation", body=json.dumps(message),
                    headers={"content-type": "application/json"})  # fmt: skip
        stream = big.getresponse()
        got[0] = len(stream.read(1))

        def read_on() -> None:
            while chunk := stream.read1(1 << 20):
                got[0] += len(chunk)

        reader = threading.Thread(target=read_on)
        reader.start()
        other = post_raw(port, "/backend-api/f/conversation/prepare", b"{}")
        got_when_answered = got[0]
        reader.join(120)
    assert other[0] == 200
    assert got[0] > 32_000_000 and got_when_answered < got[0] / 2, (got_when_answered, got[0])


def test_the_mock_refuses_a_request_of_too_many_messages_in_one_line_of_json() -> None:
    """400,000 messages in one f/conversation request held the mock's loop for a minute
    (each message stored and echoed) and grew it by gigabytes."""
    from convtap.mock.scenario import MAX_MESSAGES
    from convtap.mock.server import MockServer

    message = user_turn("hi")
    many = {**message, "messages": message["messages"] * (MAX_MESSAGES + 1)}
    with MockServer("plain") as mock:
        status, answer = post_raw(
            mock.port, "/backend-api/f/conversation", json.dumps(many).encode()
        )
        assert status == 400 and "at most 1,000 messages" in json.loads(answer)["detail"]
        status, _ = post_raw(mock.port, "/backend-api/f/conversation", json.dumps(message).encode())
        assert status == 200


def test_a_client_that_sends_wrong_types_is_recorded_without_a_failure_of_ours(
    tmp_path: Path,
) -> None:
    """`messages: 1`, a required parameter named by a list, and a Responses output whose
    `call_id` is an array each ended in a TypeError of convtap's own, kept on the flow
    (`flows.failure`) in place of what the request should have given."""
    from convtap.store.database import open_readonly

    conversation = "https://chatgpt.com/backend-api/f/conversation"
    not_a_list = {**user_turn(), "messages": 1}
    odd_signature = user_turn()
    odd_signature["local_function_signatures"][1]["params"][0]["name"] = []
    outputs = {"model": "gpt-5", "stream": True, "input": [
        {"type": "function_call_output", "call_id": [], "id": {}, "output": "{}"}]}  # fmt: skip
    call = (SSE / "alefita_way_call.sse").read_bytes()
    responses = (ROOT / "captures/examples/responses/function_call.sse").read_bytes()
    entries = [
        har_entry(conversation, not_a_list, call, "2026-08-27T19:51:00.000Z"),
        har_entry(conversation, odd_signature, call, "2026-08-27T19:52:00.000Z"),
        har_entry("https://api.openai.com/v1/responses", outputs, responses,
                  "2026-08-27T19:53:00.000Z"),
    ]  # fmt: skip
    har = tmp_path / "odd.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    db = tmp_path / "c.db"
    ran = convtap("import", str(har), "--db", str(db))
    assert ran.returncode == 0, ran.stderr
    capture = open_readonly(db)
    with contextlib.closing(capture.conn):
        failures = capture.execute("SELECT failure FROM flows WHERE failure IS NOT NULL")
        assert failures.fetchall() == []
        assert capture.execute("SELECT count(*) FROM tool_returns").fetchone()[0] == 1


@pytest.mark.parametrize(
    "content",
    [b"5:hello,", b"999999999999:"],  # a tnetstring that is no flow; a length past the file's end
)
def test_a_flow_file_of_garbage_is_one_line_and_leaves_no_database(
    tmp_path: Path, content: bytes
) -> None:
    """mitmproxy's reader raised an AttributeError on a tnetstring that is no flow, and a
    MemoryError on a length prefix of a terabyte (it reads that much at once): tracebacks, and
    the new database left behind."""
    flows = tmp_path / "odd.mitm"
    flows.write_bytes(content)
    for args in (["import", str(flows), "--db", str(tmp_path / "c.db")], ["shapes", str(flows)]):
        ran = convtap(*args)
        one_line_error(ran)
        # what mitmproxy's reader said comes after (mitmproxy 11 and 12 word it differently)
        assert f"{flows}: not a mitmproxy flow file or HAR (" in ran.stderr
    assert sorted(tmp_path.iterdir()) == [flows]


@pytest.mark.process
def test_the_mock_says_in_one_line_what_it_cannot_start_with(tmp_path: Path) -> None:
    """A busy port and a certificate path in a symlink loop were tracebacks; `--delay nan`,
    `-1` or `inf`, `--hold-after -1` and `--die-after 0` were taken (a stream that never
    ends, or holds before its first event); a FIFO as the scenario was waited on forever, and
    /dev/zero read until memory ran out; a host that does not resolve was a traceback too."""
    import socket

    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    fifo = tmp_path / "scenario.json"
    os.mkfifo(fifo)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = str(holder.getsockname()[1])
        for args in (
            ["--port", busy],
            ["--port", "0", "--delay", "nan"],
            ["--port", "0", "--delay", "-1"],
            ["--port", "0", "--delay", "inf"],
            ["--port", "0", "--hold-after", "-1"],
            ["--port", "0", "--die-after", "0"],
            ["--port", "0", "--host", "no-such-host.invalid"],
            ["--port", "0", "--tls", "--cert-file", str(tmp_path / "loop1" / "ca.pem")],
        ):
            one_line_error(convtap("mock", *args))
    for scenario in (str(fifo), "/dev/zero"):
        ran = subprocess.run([sys.executable, "-m", "convtap.cli", "mock", "--port", "0",
                              "--scenario", scenario], capture_output=True, text=True,
                             timeout=60)  # fmt: skip
        one_line_error(ran)
        assert "not a regular file" in ran.stderr


@pytest.mark.process
@pytest.mark.parametrize(
    "args",
    [["--mode", "bogus"], ["--mode", "reverse:ftp://x"], ["--listen-host", "no-such.invalid"]],
)
def test_record_refuses_a_mode_or_host_mitmproxy_cannot_use_before_anything_is_made(
    tmp_path: Path, args: list[str]
) -> None:
    """mitmproxy said these at startup (exit 1, "Error logged during startup"), after the
    database and its journal were made: both were left behind."""
    db = tmp_path / "new.db"
    ran = subprocess.run([sys.executable, "-m", "convtap.cli", "record", *args, "--listen-port",
                          "0", "--db", str(db)], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    one_line_error(ran)
    assert list(tmp_path.iterdir()) == []


def test_a_conversation_tree_with_odd_nodes_is_recorded_without_a_failure_of_ours(
    tmp_path: Path,
) -> None:
    """`GET conversation/<id>` whose node has an `author` that is no object, or an `id` or
    `role` that is no string, ended in an AttributeError or a row SQLite refused."""
    from convtap.store.database import open_readonly

    mapping = {
        "a": {"message": {"id": "m-1", "author": 1}},
        "b": {"message": {"id": [], "author": {"role": {}}}},
        "c": {"message": {"id": "m-3", "author": {"role": "tool"}}},
    }
    tree = json.dumps({"conversation_id": "c-1", "mapping": mapping}).encode()
    entry = har_entry("https://chatgpt.com/backend-api/conversation/c-1", {}, tree,
                      "2026-08-27T19:51:00.000Z", content_type="application/json")  # fmt: skip
    entry["request"]["method"] = "GET"
    del entry["request"]["postData"]
    har = tmp_path / "tree.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": [entry]}}))
    db = tmp_path / "c.db"
    ran = convtap("import", str(har), "--db", str(db))
    assert ran.returncode == 0, ran.stderr
    capture = open_readonly(db)
    with contextlib.closing(capture.conn):
        assert capture.execute("SELECT failure FROM flows").fetchall() == [(None,)]
        nodes = capture.execute("SELECT node_id, message_id, role FROM conversation_nodes "
                                "ORDER BY node_id").fetchall()  # fmt: skip
    assert nodes == [("a", "m-1", None), ("b", None, None), ("c", "m-3", "tool")]


def test_export_and_report_never_write_over_the_captures_wal(tmp_path: Path, capture: Path) -> None:
    """`--output capture.db-wal` replaced the WAL, where committed rows wait for a checkpoint
    (another process holding the capture open): those rows were lost."""
    with contextlib.closing(sqlite3.connect(capture)) as holder:
        holder.execute("PRAGMA wal_autocheckpoint=0")
        holder.execute("UPDATE flows SET failure = 'kept in the WAL'")
        holder.commit()
        wal = Path(f"{capture}-wal")
        before = hashlib.sha256(wal.read_bytes()).hexdigest()
        for command in ("export", "report"):
            for side in ("-wal", "-shm"):
                one_line_error(convtap(command, "--db", str(capture), "--output",
                                       f"{capture}{side}"))  # fmt: skip
        assert hashlib.sha256(wal.read_bytes()).hexdigest() == before
    with contextlib.closing(sqlite3.connect(capture)) as conn:
        assert conn.execute("SELECT DISTINCT failure FROM flows").fetchall() == [
            ("kept in the WAL",)
        ]


def test_a_file_name_with_a_line_break_is_still_one_line(tmp_path: Path) -> None:
    """A name holding a line break (or another control character) was printed as it is: the
    one line of an error became two."""
    odd = tmp_path / "two\nlines.har"
    odd.write_text("{}")
    missing = str(tmp_path / "no\x1bsuch.db")
    for args in (
        ["import", str(odd), "--db", str(tmp_path / "c.db")],
        ["calls", "--db", missing],
        ["decode", missing],
        ["export", "--db", missing, "--output", str(tmp_path / "out.har")],
    ):
        ran = convtap(*args)
        one_line_error(ran)
        assert "\\n" in ran.stderr or "\\x1b" in ran.stderr
    assert sorted(tmp_path.iterdir()) == [odd]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/no/such/path"),
        ("POST", "/backend-api/conversation/c-1"),
        ("PUT", "/v1/responses"),
        ("GET", "/backend-api/f/conversation"),
        ("GET", "/v1/responses"),  # no upgrade: WebSocket mode's path, as plain HTTP
        ("GET", "/ws/user/u-1"),
    ],
)
def test_the_mock_answers_a_wrong_path_or_method_with_a_json_error(method: str, path: str) -> None:
    """An unknown path, a method a path does not serve, and a WebSocket path fetched without an
    upgrade were answered with tornado's HTML page (or plain text)."""
    from convtap.mock.server import MockServer

    with MockServer("plain") as mock:
        conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=60)
        conn.request(method, path)
        response = conn.getresponse()
        assert 400 <= response.status < 500
        assert response.getheader("content-type", "").startswith("application/json")
        assert path in json.loads(response.read())["error"]["message"]


@pytest.mark.process
@pytest.mark.parametrize("sidecar", ["x.request.json", "x.resume.sse"])
def test_a_raw_streams_sidecar_that_is_a_fifo_or_device_is_one_line(
    tmp_path: Path, sidecar: str
) -> None:
    """`X.request.json` or `X.resume.sse` that is a FIFO was waited on forever, and one that is
    /dev/zero read until memory ran out."""
    raw = tmp_path / "x.sse"
    raw.write_bytes((SSE / "alefita_way_call.sse").read_bytes())
    fifo, device = tmp_path / "fifo", tmp_path / sidecar
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/zero")):
        device.unlink(missing_ok=True)
        device.symlink_to(target)
        ran = subprocess.run([sys.executable, "-m", "convtap.cli", "import", str(raw), "--db",
                              str(tmp_path / "c.db")], capture_output=True, text=True,
                             timeout=60)  # fmt: skip
        one_line_error(ran)
        assert f"cannot read {device}: not a regular file" in ran.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["x.sse", "fifo", sidecar])


def test_schemas_into_what_is_no_folder_is_one_line(tmp_path: Path) -> None:
    """`convtap schemas --dir` naming a FIFO, a symlink loop or a symlink to nothing printed
    mkdir's FileExistsError as a traceback."""
    fifo, loop, dangling = tmp_path / "fifo", tmp_path / "loop", tmp_path / "dangling"
    os.mkfifo(fifo)
    loop.symlink_to(loop)
    dangling.symlink_to(tmp_path / "nowhere")
    for directory in (fifo, loop, dangling):
        for check in ([], ["--check"]):
            ran = convtap("schemas", *check, "--dir", str(directory))
            one_line_error(ran)
            assert "is not a folder" in ran.stderr
    assert sorted(tmp_path.iterdir()) == [dangling, fifo, loop]


@pytest.mark.process
@pytest.mark.parametrize("setting", ["ssl_insecure=maybe", "listen_port=abc"])
def test_record_with_a_set_value_mitmproxy_refuses_is_one_line_and_leaves_nothing(
    tmp_path: Path, setting: str
) -> None:
    """mitmproxy said it as `/path/to/convtap: Not an integer: abc`, exit 1, and the new
    database was left behind."""
    db = tmp_path / "new.db"
    ran = subprocess.run([sys.executable, "-m", "convtap.cli", "record", "--set", setting,
                          "--listen-port", "0", "--db", str(db)], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    one_line_error(ran)
    assert ran.stderr.startswith("convtap: ")
    assert list(tmp_path.iterdir()) == []


def test_the_mock_keeps_a_bounded_log_of_what_it_received() -> None:
    """Every request and stream body was kept for `/_mock/received`, for as long as the mock
    ran: a client that goes on grew it without end."""
    from convtap.mock.server import MockServer

    kept = 1000  # docs/guarantees.md
    with MockServer("plain") as mock:
        for n in range(kept + 5):
            assert (
                post_raw(mock.port, "/backend-api/f/conversation/prepare", b'{"n": %d}' % n)[0]
                == 200
            )
        received = mock.received
    assert len(received) == kept and received[0]["body"] == {"n": 5}


def test_catch_up_of_a_journal_segment_it_cannot_read_is_one_line(
    tmp_path: Path, capture: Path
) -> None:
    """A folder where the journal's segment goes: the reader's IsADirectoryError, then, closing,
    a query on the database it had just closed (sqlite3.ProgrammingError), as a traceback."""
    journal = Path(f"{capture}.journal")
    journal.mkdir(mode=0o700)
    (journal / "0000000001.seg").mkdir()
    ran = convtap("record", "--catch-up", "--db", str(capture))
    one_line_error(ran)
    assert "cannot read the journal's" in ran.stderr and (journal / "0000000001.seg").is_dir()


def test_demo_never_deletes_what_is_no_capture(tmp_path: Path, other_app_db: Path) -> None:
    """`convtap demo --db` deleted whatever was at the path (another application's database, a
    FIFO) before it recorded there: only a convtap capture (or an empty file) is replaced."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    before = fingerprint(other_app_db)
    for db in (other_app_db, fifo):
        ran = convtap("demo", "--db", str(db))
        one_line_error(ran)
        assert "the demo replaces only a convtap capture" in ran.stderr
    assert fingerprint(other_app_db) == before and stat.S_ISFIFO(fifo.stat().st_mode)


def test_the_mock_remembers_a_bounded_number_of_conversations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every conversation, turn and WebSocket topic the mock played stayed in its memory for as
    long as it ran; past the bound, the oldest is forgotten (its tree is a 404)."""
    import re

    from convtap.mock import app
    from convtap.mock.server import MockServer

    monkeypatch.setattr(app, "REMEMBERED", 3)
    with MockServer("plain") as mock:
        ids = []
        for _ in range(4):
            status, body = post_raw(mock.port, "/backend-api/f/conversation",
                                    json.dumps(user_turn()).encode())  # fmt: skip
            assert status == 200
            found = re.search(rb'"conversation_id": "([^"]+)"', body)
            assert found is not None
            ids.append(found.group(1).decode())

        def tree(conversation_id: str) -> int:
            conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=60)
            conn.request("GET", f"/backend-api/conversation/{conversation_id}")
            return conn.getresponse().status

        assert [tree(i) for i in ids] == [404, 200, 200, 200]


def test_an_import_that_imports_nothing_leaves_no_folder_it_made(tmp_path: Path) -> None:
    """`--db new/sub/c.db` made the folders for the new database; the database went again when
    nothing could be imported, the folders stayed."""
    empty = tmp_path / "empty.har"
    empty.write_text(json.dumps({"log": {"version": "1.2", "entries": []}}))
    one_line_error(convtap("import", str(empty), "--db", str(tmp_path / "new" / "sub" / "c.db")))
    assert sorted(tmp_path.iterdir()) == [empty]


def test_a_delta_whose_op_is_no_string_is_an_invalid_delta(tmp_path: Path) -> None:
    """`"o": []` (in a delta or a patch's sub-op) raised a TypeError (a list is no set member):
    `decode` printed a traceback, `import` lost the turn to a failure of convtap's own, and
    `export --blank-words` printed a traceback too."""
    stream = (SSE / "alefita_way_call.sse").read_text()
    odd = stream.replace('"o": "add"', '"o": []', 1).replace('"o": "append"', '"o": {}', 1)
    odd = odd.replace('"o": "replace", "v": "finished', '"o": [1], "v": "finished', 1)  # sub-op
    assert odd.count('"o": []') == 1 and odd.count('"o": {}') == 1 and '"o": [1]' in odd
    raw = tmp_path / "odd.sse"
    raw.write_text(odd)
    ran = convtap("decode", "--format", "json", str(raw))
    assert ran.returncode == 0, ran.stderr
    kinds = [e["kind"] for e in json.loads(ran.stdout)["errors"]]
    assert kinds.count("invalid-delta") >= 3
    db = tmp_path / "c.db"
    assert convtap("import", str(raw), "--db", str(db)).returncode == 0
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT failure FROM flows").fetchall() == [(None,)]
    ran = convtap("export", "--blank-words", "--db", str(db), "--output", str(tmp_path / "b.har"))
    assert ran.returncode == 0, ran.stderr


def test_a_websocket_frame_whose_type_is_no_string_is_no_traceback(tmp_path: Path) -> None:
    """A turn topic's frame whose `payload.type` is a list raised a TypeError building a set of
    it: `decode --ws` printed a traceback (and the live recorder lost the turn)."""
    frames = (SSE / "handoff_ws.frames.jsonl").read_text().splitlines()
    odd = []
    for line in frames:
        frame = json.loads(line)
        for message in frame if isinstance(frame, list) else []:
            if isinstance(message, dict) and isinstance(message.get("payload"), dict):
                message["payload"]["type"] = []
        odd.append(json.dumps(frame))
    assert odd != frames
    path = tmp_path / "odd.frames.jsonl"
    path.write_text("\n".join(odd) + "\n")
    ran = convtap("decode", "--format", "json", "--ws", str(path), str(SSE / "handoff_ws.sse"))
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["protocol"] == "f-conversation"


def test_a_field_name_with_a_line_break_or_a_pipe_keeps_the_markdown_diff_one_row(
    tmp_path: Path,
) -> None:
    """`diff --format markdown` put a field name as it came into its table: a line break ended
    the row in the middle (and a `|` in a path added a column), so a capture could write what
    it liked into a pull request's comment."""
    har = json.loads((ROOT / "captures/examples/diff/newer.har").read_text())
    entry = har["log"]["entries"][0]
    body = json.loads(entry["request"]["postData"]["text"])
    body["x\n## injected | y"] = 1
    entry["request"]["postData"]["text"] = json.dumps(body)
    odd = tmp_path / "odd.har"
    odd.write_text(json.dumps(har))
    older = str(ROOT / "captures/examples/diff/older.har")
    ran = convtap("diff", older, str(odd), "--format", "markdown", "--fail-on", "never")
    assert ran.returncode == 0, ran.stderr
    rows = [line for line in ran.stdout.splitlines() if "injected" in line]
    assert len(rows) == 1 and rows[0].startswith("| ") and "\\n## injected \\| y" in rows[0]
    assert not any(line.startswith("## injected") for line in ran.stdout.splitlines())
