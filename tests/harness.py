"""End-to-end harness: a real `mitmdump` process with the addon, on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
ADDON = ROOT / "addon" / "mitm.py"
MITMDUMP = Path(sys.executable).parent / "mitmdump"
LISTENING = re.compile(r"listening at [\d.]+:(\d+)")
RECORD_LISTENING = re.compile(r"proxy listening at 127\.0\.0\.1:(\d+)")


@dataclass
class Proxy:
    port: int
    db: Path
    confdir: Path
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ca(self) -> Path:
        return self.confdir / "mitmproxy-ca-cert.pem"

    def stop(self) -> None:
        """SIGTERM, as a user's Ctrl-C: the addon flushes the database on the way out."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the capture (read-only: the recorder may still be creating it)."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10) as conn:
            return conn.execute(sql, params).fetchall()


@contextmanager
def mitmdump(tmp_path: Path, mode: str, *settings: str) -> Iterator[Proxy]:
    confdir = tmp_path / "mitmproxy"
    db = tmp_path / "capture.db"
    args = [str(MITMDUMP), "--listen-host", "127.0.0.1", "-p", "0", "--mode", mode,
            "-s", str(ADDON), "--set", f"confdir={confdir}", "--set", f"convtap_db={db}",
            "--set", "convtap_echo=stdout", "--set", "flow_detail=0"]  # fmt: skip
    for setting in settings:
        args += ["--set", setting]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               bufsize=1)  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    port = None
    deadline = time.monotonic() + 30
    for line in process.stdout:
        lines.append(line)
        if (match := LISTENING.search(line)) is not None:
            port = int(match.group(1))
            break
        if time.monotonic() > deadline:
            break
    if port is None:
        process.kill()
        raise RuntimeError("mitmdump did not start:\n" + "".join(lines))
    proxy = Proxy(port, db, confdir, process, lines)
    reader = threading.Thread(target=lambda: lines.extend(process.stdout or ()), daemon=True)
    reader.start()
    try:
        yield proxy
    finally:
        proxy.stop()
        reader.join(5)


def post_stream(
    port: int, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """A real HTTP client's request; the caller reads the response as it streams."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("POST", path, body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json", **(headers or {})})  # fmt: skip
    return conn, conn.getresponse()


def read_until(response: http.client.HTTPResponse, needle: bytes, received: bytearray) -> None:
    """Read what has arrived until `needle` is in it (the socket timeout bounds the wait)."""
    while needle not in received:
        chunk = response.read1(65536)
        if not chunk:
            raise AssertionError(f"the body ended before {needle!r}")
        received += chunk


def read_all(response: http.client.HTTPResponse, received: bytearray) -> bytes:
    while chunk := response.read1(65536):
        received += chunk
    return bytes(received)


def wait_for(predicate: Any, timeout: float = 10.0) -> bool:
    """Poll until `predicate()` is true; a database not created yet counts as not yet."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except sqlite3.Error:
            pass
        time.sleep(0.05)
    return False


# -- a burst of turns ------------------------------------------------------------------------------

BURST_PATH = "/backend-api/f/conversation"


def burst_bodies(turns: int) -> list[bytes]:
    """Turns shaped like real traffic (bench/decode_bench.py), each ending in a local tool call,
    each with its own conversation and message ids (~300 kB a turn)."""
    import random

    from bench.decode_bench import turn

    rng = random.Random(11)
    templates = [turn(rng, n) for n in range(4)]
    return [
        templates[n % 4].replace(b"conv-%06d" % (n % 4), b"conv-%06d" % n) for n in range(turns)
    ]


@contextmanager
def burst_upstream(bodies: list[bytes], chunk: int = 16384) -> Iterator[int]:
    """A local upstream answering `POST f/conversation` with body {"n": k} by turn k, chunked,
    as fast as the socket takes it. Yields its port."""

    def pieces(n: int) -> Iterator[bytes]:
        body = bodies[n]
        for i in range(0, len(body), chunk):
            yield body[i : i + chunk]

    with answering_upstream(pieces) as port:
        yield port


@contextmanager
def answering_upstream(pieces: Any) -> Iterator[int]:
    """A local upstream answering `POST` with body {"n": k} by an event stream of the chunks
    `pieces(k)` yields, each sent as it is yielded (so a generator paces them). Yields its port."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["content-length"])))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for piece in pieces(int(request["n"])):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def send_burst(port: int, count: int, received: list[bytes], first: int = 0) -> None:
    """POST turns first..first+count-1 one after the other on one connection, each read whole;
    what each got goes into `received` (a turn cut short, by a proxy that died, ends the burst)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        for n in range(first, first + count):
            conn.request("POST", BURST_PATH, body=json.dumps({"n": n, "action": "next"}),
                         headers={"content-type": "application/json"})  # fmt: skip
            response = conn.getresponse()
            got = bytearray()
            try:
                while chunk := response.read1(65536):
                    got += chunk
            except (OSError, http.client.HTTPException):
                received.append(bytes(got))
                return
            received.append(bytes(got))
    except (OSError, http.client.HTTPException):
        return
    finally:
        conn.close()


def complete_events(body: bytes) -> int:
    """The events a client got whole (what the recorder must hold for that flow)."""
    whole = body[: body.rfind(b"\n\n") + 2] if b"\n\n" in body else b""
    return sum(1 for line in whole.split(b"\n") if line.startswith(b"data: "))


def free_port() -> int:
    """A port nothing listens on now (another process may take it before the caller does)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 30.0) -> bool:
    """Whether something listens on 127.0.0.1:`port` within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return True
        time.sleep(0.05)
    return False


def hwm_mb(pid: int) -> float | None:
    """A process's peak resident memory so far (VmHWM), in MB; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None  # exited, not yet reaped: no memory left


def peak_mb_while(
    proc: subprocess.Popen[Any], pid: int | None = None, every: float = 0.02
) -> float:
    """The peak resident memory of `pid` (else of `proc`) until `proc` exits, polled: ru_maxrss
    would count the parent's memory, which a child shares until it execs."""
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, hwm_mb(pid or proc.pid) or 0.0)
        time.sleep(every)
    return peak


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(p) for p in handle.read().split()]


@dataclass
class Recording:
    """A running `convtap record`: its process, its port, and its output, read as it comes (a
    pipe nobody reads fills up, and a process writing into it then waits: the proxy's traffic
    with it)."""

    proc: subprocess.Popen[str]
    port: int
    lines: list[str]
    reader: threading.Thread

    def wait(self, timeout: float) -> str:
        """Its exit (status in `proc.returncode`); all it printed."""
        self.proc.wait(timeout)
        self.reader.join(timeout)
        return "".join(self.lines)


@contextmanager
def record(db: Path, upstream: int, tmp_path: Path, *flags: str) -> Iterator[Recording]:
    """`convtap record` as a user runs it, in front of `upstream` (`flags` added)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "convtap.cli", "record", "--mode",
         f"reverse:http://127.0.0.1:{upstream}", "--listen-port", "0", "--db", str(db),
         "--set", f"confdir={tmp_path / 'conf'}", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    port = None
    for line in proc.stdout:
        lines.append(line)
        if (match := RECORD_LISTENING.search(line)) is not None:
            port = int(match.group(1))
            break
    assert port is not None, "".join(lines)
    reader = threading.Thread(target=lines.extend, args=(proc.stdout,), daemon=True)
    reader.start()
    try:
        yield Recording(proc, port, lines, reader)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(120)
        reader.join(30)


@contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A file system of `size` (tmpfs) mounted at the new folder `where`; the test is skipped
    where mounting is not allowed (CI runs as root, so it runs there)."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, text=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (CI runs as root): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def capture_bytes(db: Path) -> bytes:
    """What a capture holds, as a search for a secret in clear must read it: its files' bytes
    (the database, its WAL), and every raw event's bytes (stored zlib-compressed)."""
    from convtap.store.compact import event_bytes

    files = [Path(f"{db}{suffix}") for suffix in ("", "-wal")]
    held = b"".join(p.read_bytes() for p in files if p.is_file())
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        events = conn.execute("SELECT data, raw FROM events").fetchall()
    return held + b"".join(event_bytes(dict(row)) for row in events)


def events_sql(conn: sqlite3.Connection) -> sqlite3.Connection:
    """The connection, with convtap's SQL functions (`convtap_event`) added."""
    from convtap.store.compact import add_sql_functions

    add_sql_functions(conn)
    return conn
