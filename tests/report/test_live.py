"""The live page: `convtap record --web` and `convtap serve`, opened in Debian's headless
Chromium, show a tool call made through the real proxy in front of the real mock, and its
finding, without a reload and with the filters kept; the token guards the page; `serve` only
reads the capture."""

from __future__ import annotations

import hashlib
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from convtap.mock.refclient import RefClient
from convtap.mock.server import MockServer
from convtap.report.page import write_report

from tests.harness import record
from tests.report.test_browser import Chromium, chromium
from tests.report.test_report import Page, build_capture, rows
from tests.runner import convtap

DEADLINE = 30.0  # seconds: generous for a loaded CI machine; the latency measured is printed
LIVE_URL = re.compile(r"Watch live: (http://127\.0\.0\.1:\d+/[A-Za-z0-9_-]+/)")
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    with Chromium(chromium()) as opened:
        yield opened


def wait_page(browser: Chromium, expression: str, timeout: float = DEADLINE) -> float:
    """Seconds until `expression` is true in the page; fails past `timeout`."""
    started = time.monotonic()
    while not browser.evaluate(expression):
        assert time.monotonic() - started < timeout, f"never true: {expression}"
        time.sleep(0.05)  # the page, not the poll, should take the CPU
    return time.monotonic() - started


def open_live(browser: Chromium, url: str) -> None:
    """Open the page and wait until its events are connected (an update may already have come:
    the recorder making the capture is one); mark the document, so that a reload would show
    (the mark would be gone)."""
    browser.requests.clear()
    browser.open(url)
    wait_page(browser, "window.__convtapReady === true && /· live(: updated [0-9:.]+)?$/"
              ".test(document.querySelector('.top p').textContent)")  # fmt: skip
    browser.evaluate("window.__sameDocument = true")


TOTAL_ITEMS = "+document.getElementById('shown').textContent.match(/of (\\d+) items/)[1]"
CALLS_SHOWN = """[...document.querySelectorAll('#timeline .call[id^="call-"]')]
    .filter((el) => el.getElementsByClassName('finding').length > 0).map((el) => el.id)"""
FINDINGS_SHOWN = "[...document.querySelectorAll('#timeline .finding')].map((el) => el.dataset.rule)"


def run_client(proxy_port: int) -> None:
    """A tool call through the proxy, answered with a faulty return (a finding or more)."""
    summary = RefClient(f"http://127.0.0.1:{proxy_port}", timeout=20).run(faulty=True)
    assert summary.call_id is not None and summary.accepted


def first_finding(db: Path) -> float:
    """When the capture first holds a finding (polled every 20 ms)."""
    started = time.monotonic()
    while time.monotonic() - started < DEADLINE:
        with suppress(sqlite3.Error):
            if db.exists() and rows(db, "SELECT count(*) FROM findings")[0][0]:
                return time.monotonic()
        time.sleep(0.02)
    return float("nan")


def shows_what_was_recorded(browser: Chromium, db: Path) -> None:
    """Once the recorder is done: every call in the capture is in the page, with every finding."""
    calls = sorted(f"call-{call_id}" for (call_id,) in rows(db, "SELECT call_id FROM tool_calls"))
    findings = Counter(rule for (rule,) in rows(db, "SELECT rule FROM findings"))
    assert calls and findings
    started = time.monotonic()
    while (sorted(browser.evaluate(CALLS_SHOWN)), Counter(browser.evaluate(FINDINGS_SHOWN))) != (
        calls,
        findings,
    ):
        assert time.monotonic() - started < DEADLINE, browser.evaluate(FINDINGS_SHOWN)
        time.sleep(0.05)
    assert browser.evaluate("window.__sameDocument === true")  # updated, never reloaded


@pytest.mark.process
def test_record_web_shows_a_call_and_its_finding_live(browser: Chromium, tmp_path: Path) -> None:
    db = tmp_path / "capture.db"
    with MockServer("alefita_way") as mock, record(db, mock.port, tmp_path, "--web") as rec:
        match = LIVE_URL.search("".join(rec.lines))
        assert match is not None, "".join(rec.lines)
        open_live(browser, match.group(1))
        assert browser.evaluate(CALLS_SHOWN) == []
        recorded: list[float] = []
        watcher = threading.Thread(target=lambda: recorded.append(first_finding(db)), daemon=True)
        watcher.start()
        run_client(rec.port)
        ended = time.monotonic()
        wait_page(browser, f"{CALLS_SHOWN}.length > 0")
        shown = time.monotonic()
        watcher.join(DEADLINE)
        print(
            f"\nthe call and its finding shown {(shown - ended) * 1000:.0f} ms after the"
            f" client's end, {(shown - recorded[0]) * 1000:.0f} ms after they were committed"
        )
        rec.proc.send_signal(signal.SIGINT)  # the recording goes on while the page is open
        out = rec.wait(120)
    assert rec.proc.returncode == 0, out[-2000:]
    shows_what_was_recorded(browser, db)
    origin = match.group(1).rsplit("/", 2)[0]
    assert browser.requests and all(url.startswith(f"{origin}/") for url in browser.requests)


@pytest.mark.process
def test_the_filters_are_kept_across_an_update(browser: Chromium, tmp_path: Path) -> None:
    db = tmp_path / "capture.db"
    with MockServer("alefita_way") as mock, record(db, mock.port, tmp_path, "--web") as rec:
        match = LIVE_URL.search("".join(rec.lines))
        assert match is not None
        open_live(browser, match.group(1))
        run_client(rec.port)
        wait_page(browser, f"{CALLS_SHOWN}.length === 1")
        first = browser.evaluate("document.querySelector('.conv-row').dataset.conv")
        browser.evaluate(f"location.hash = 'conversation={first}'")
        wait_page(browser, "document.getElementById('shown').textContent.startsWith('showing')")
        items = browser.evaluate(TOTAL_ITEMS)
        run_client(rec.port)  # a second conversation: recorded, shown only if the filter allows
        wait_page(browser, f"{TOTAL_ITEMS} > {items}")  # in the page's data, not drawn
        rec.proc.send_signal(signal.SIGINT)
        rec.wait(120)
    shown = browser.evaluate(
        "[...document.querySelectorAll('.conv-row')].map((el) => el.dataset.conv)"
    )
    assert shown == [first]
    assert browser.evaluate("location.hash") == f"#conversation={first}"
    assert browser.evaluate("document.getElementById('filters').elements.conversation.value") == (
        first
    )
    tools = {tool for (tool,) in rows(db, "SELECT tool FROM tool_calls WHERE tool IS NOT NULL")}
    offered = browser.evaluate("[...document.getElementById('filters').elements.tool.options]"
                               ".map((o) => o.value)")  # fmt: skip
    assert tools and tools <= set(offered)  # none when the page opened: added as they came
    assert browser.evaluate("window.__sameDocument === true")


@contextmanager
def serving(db: Path, *flags: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`convtap serve --db db` running: its process and the URL it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "convtap.cli", "serve", "--db", str(db),
                             *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    try:
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else ""
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        proc.wait(30)


@pytest.mark.process
def test_serve_shows_what_another_process_records(browser: Chromium, tmp_path: Path) -> None:
    db = tmp_path / "capture.db"
    with MockServer("alefita_way") as mock, record(db, mock.port, tmp_path) as rec:
        with serving(db) as (server, url):
            open_live(browser, url)
            run_client(rec.port)
            wait_page(browser, f"{CALLS_SHOWN}.length > 0")
            rec.proc.send_signal(signal.SIGINT)
            rec.wait(120)
            shows_what_was_recorded(browser, db)
        assert server.returncode == 0


def noise(n: int) -> str:
    """Text gzip cannot shrink much (hex digests), so that the blocks are of some size."""
    return "".join(hashlib.sha256(f"{n}.{k}".encode()).hexdigest() for k in range(4))


def more_turns(db: Path, count: int) -> None:
    """`count` turns more in a conversation of their own, each with one message."""
    conn = sqlite3.connect(db)
    with conn:
        for n in range(count):
            at = 1_700_000_000.0 + n
            conn.execute(
                "INSERT INTO turns (id, conversation_id, done, stream_complete, truncated,"
                " event_count, legs, started_at, ended_at)"
                " VALUES (?, 'conv-blocks', 1, 1, 0, 1, 1, ?, ?)",
                (f"turn-{n}", at, at + 1),
            )
            conn.execute(
                "INSERT INTO messages (id, conversation_id, turn_id, role, text,"
                " first_seen_at, updated_at) VALUES (?, 'conv-blocks', ?, 'user', ?,"
                " ?, ?)",
                (f"msg-{n}", f"turn-{n}", f"block text {n:05d} {noise(n)}", at, at),
            )
    conn.close()


@pytest.mark.process
def test_the_page_reads_its_data_block_by_block_and_shows_every_request(
    browser: Chromium, tmp_path: Path
) -> None:
    db = build_capture(tmp_path, "blocks")
    more_turns(db, 2_500)  # more than two of the server's blocks (1,000 requests each)
    static = Page(write_report(db, tmp_path / "report.html").read_text())
    with serving(db) as (_, url):
        status, data = fetch(f"{url}data")
        assert status == 200 and data.count(b"\n") == 3  # one block a line
        open_live(browser, url)
        shown = "+document.getElementById('shown').textContent.match(/(\\d+) items/)[1]"
        assert browser.evaluate(shown) == len(static.items) > 2_500
        for n in (0, 999, 1000, 2499):  # the first and last of blocks: none lost at a seam
            browser.evaluate(f"window.convtapFilter({{q: 'block text {n:05d}'}})")
            counter = browser.evaluate("document.getElementById('shown').textContent")
            assert counter.startswith(f"showing 1 of {len(static.items)} items"), (n, counter)
    assert [url for url in browser.requests if "/data" in url] == [f"{url}data"]  # asked once


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with DIRECT.open(url, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def files(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


@pytest.mark.process
def test_only_the_token_opens_the_page_and_the_capture_is_only_read(tmp_path: Path) -> None:
    db = build_capture(tmp_path, "a live look")
    (call_id,) = rows(db, "SELECT call_id FROM tool_calls ORDER BY call_id")[0]
    before = files(tmp_path)
    with serving(db) as (server, url):
        status, page = fetch(url)
        assert status == 200 and Page(page.decode()).blocks == []  # a shell: no data in it
        status, data = fetch(f"{url}data")  # fetched by the page: every step, one block a line
        held = Page(f'<script id="convtap-data">{data.decode()}</script>')
        assert status == 200 and call_id in held.calls
        base, token = url.rstrip("/").rsplit("/", 1)
        wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
        paths = ["", f"{wrong}/", f"{wrong}/events", f"{wrong}/data", f"{token}x/",
                 f"{token}/../", "favicon.ico"]  # fmt: skip
        for refused in (f"{base}/{path}" for path in paths):
            status, body = fetch(refused)
            assert (status, body) == (404, b"404\n"), refused
        events = urllib.request.Request(f"{url}events?v=0")
        with DIRECT.open(events, timeout=10) as stream:  # since no reading: every step
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            assert call_id.encode() in first_update(stream)
        time.sleep(0.5)  # a few polls of the capture
    assert server.returncode == 0
    assert files(tmp_path) == before  # not a byte changed, no file made beside it


@pytest.mark.process
def test_serve_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    missing = convtap("serve", "--db", str(tmp_path / "missing.db"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "no database at" in missing.stderr and not (tmp_path / "missing.db").exists()
    db = build_capture(tmp_path, "busy")
    with serving(db) as (_, url):
        port = url.split(":")[2].split("/")[0]
        busy = convtap("serve", "--db", str(db), "--port", port)
    assert busy.returncode == 2 and busy.stderr.startswith(
        f"convtap: cannot listen on 127.0.0.1:{port}"
    )


def first_update(stream: Any) -> bytes:
    while not (line := stream.readline()).startswith(b"data: "):
        assert line, "the stream ended"
    return bytes(line)


@pytest.mark.process
def test_at_most_16_pages_are_kept_current_and_a_silent_one_holds_up_none(tmp_path: Path) -> None:
    db = build_capture(tmp_path, "many pages")
    (call_id,) = rows(db, "SELECT call_id FROM tool_calls ORDER BY call_id")[0]
    with serving(db) as (_, url), ExitStack() as streams:
        silent = [streams.enter_context(DIRECT.open(f"{url}events", timeout=10)) for _ in range(16)]
        assert fetch(f"{url}events") == (503, b"503\n")  # never read: each holds its place
        silent[0].close()
        started = time.monotonic()
        while (answer := fetch_stream(f"{url}events?v=0")) is None:
            assert time.monotonic() - started < DEADLINE
            time.sleep(0.05)
        with answer:
            assert call_id.encode() in first_update(answer)


def fetch_stream(url: str) -> Any:
    """The event stream at `url`, or None when the server refuses it (503)."""
    try:
        return DIRECT.open(url, timeout=10)
    except urllib.error.HTTPError as refused:
        assert refused.code == 503
        return None


def test_record_web_on_a_busy_port_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = str(holder.getsockname()[1])
        ran = convtap("record", "--web", "--web-port", port, "--listen-port", "0",
                      "--db", str(tmp_path / "capture.db"))  # fmt: skip
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1, ran.stderr
    assert f"127.0.0.1:{port}" in ran.stderr and "--web-port" in ran.stderr
    assert list(tmp_path.iterdir()) == []
