"""End-to-end harness: a real `mitmdump` process with the addon, on 127.0.0.1 only."""

from __future__ import annotations

import http.client
import json
import re
import signal
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

ROOT = Path(__file__).resolve().parent.parent
ADDON = ROOT / "addon" / "mitm.py"
MITMDUMP = Path(sys.executable).parent / "mitmdump"
LISTENING = re.compile(r"listening at [\d.]+:(\d+)")


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
