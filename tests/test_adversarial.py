"""Every case of issue 13's list, as a user and then an adversary would try it: files convtap
only reads keep every byte, bad input is one line and exit 2, memory stays under its bound,
concurrent convtap processes lose nothing."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.harness import MITMDUMP, burst_upstream, peak_mb_while
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
    journal = capture.with_name(capture.name + ".journal")
    journal.mkdir()
    ran = convtap("reprocess", "--db", str(capture))
    one_line_error(ran)
    assert "recorder" in ran.stderr


# -- memory ---------------------------------------------------------------------------------------


def peak_mb(args: list[str], **kwargs: object) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run a command; its peak resident memory (VmHWM, read just before it exits)."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            **kwargs)  # type: ignore[call-overload]  # fmt: skip
    peak = peak_mb_while(proc)
    _, err = proc.communicate()
    return peak, subprocess.CompletedProcess(args, proc.returncode, "", err)


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
    ],
)
def test_a_har_missing_a_field_names_it(tmp_path: Path, har: object, said: str) -> None:
    """A missing field was said as Python's KeyError: `('startedDateTime')`."""
    path = tmp_path / "odd.har"
    path.write_text(json.dumps(har))
    ran = convtap("import", str(path), "--db", str(tmp_path / "c.db"))
    one_line_error(ran)
    assert f"{path}: {said}" in ran.stderr


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
    outputs = {"db": b"".join(p.read_bytes() for p in folder.glob("kinds.db*"))}
    assert convtap("report", "--db", str(db), "--output", str(folder / "r.html")).returncode == 0
    outputs["report"] = (folder / "r.html").read_bytes()
    for flags in ([], ["--shape-only"], ["--blank-words"]):
        out = folder / f"export{len(outputs)}.har"
        assert convtap("export", "--db", str(db), "--output", str(out), *flags).returncode == 0
        outputs[" ".join(["export", *flags])] = out.read_bytes()
    assert b"<redacted:" in outputs["db"] and b"lang=pt" in outputs["db"]
    return outputs


@pytest.mark.parametrize("kind", sorted(UNCAUGHT))
def test_no_kind_of_secret_is_in_the_database_the_report_or_an_export(
    outputs_of_uncaught: dict[str, bytes], kind: str
) -> None:
    """Google and Hugging Face keys, an AWS secret key in prose, a Stripe key past 24
    characters, JSON keys with a space, `passphrase`, `pass`, a Referer's query (an allow-listed
    header), a URL's `code=`, a key as an SSE event name: each was stored in clear, and went on
    into the report and the HAR export (`--shape-only` too)."""
    secret = secret_of(UNCAUGHT[kind][1]).encode()
    parts = (secret, secret[-12:])  # the end too: a Stripe key lost only its first 24
    leaks = [where for where, data in outputs_of_uncaught.items() if any(p in data for p in parts)]
    assert leaks == []
