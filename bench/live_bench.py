"""What keeping the live page current costs against capture size, each figure as a ratio to its
target (issue 35, at 100,000 calls: one update at most 100 ms of server time, the page open and
usable in 1 s, a filter in 100 ms), measured in one run.

    python bench/live_bench.py [--sizes 1000 10000 100000]

Each capture is bench/report_bench.py's. For each: the server's first reading of the whole
capture (once, when `convtap serve` starts) and the page it serves (what a browser opening the URL
waits for: a shell, its data fetched after); then one update, as a recording makes it: a session
more written into the capture (its flows, call, return, turns, messages and finding, in one
transaction), and the server's reading of it (the rows it added, the steps they show, read again)
with the message a page is sent (its steps counted: those of the new session, nothing else); the
look that says whether anything changed (`PRAGMA data_version`, every 200 ms); and the summary and
the pictures read again (at most every so often: they are read whole). Then in Debian's headless
Chromium, through a real `convtap serve`: the page open (its first screen, usable from then on with
the filters applying to what is read so far: the target's figure; and all its data read), a rule
filter and two text searches over all the data, and how long a session written into the capture
takes to show in the open page (end to end, with the 200 ms poll).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from audit_bench import session
from convtap.report.parts import LiveCapture, LivePage
from convtap.store.database import connect, insert_sql
from report_bench import ROOT, indexed, prepared, recorded

sys.path.insert(0, str(ROOT))

from tests.report.test_browser import Chromium

TARGETS = {100_000: {"update": 0.1, "open": 1.0, "filter": 0.1}}


def timed(step: Callable[[], object]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def add_session(db: Path, n: int) -> None:
    """Session `n` written into the capture as a recording would, in one transaction, with the
    finding its return draws when it breaks the contract (n a multiple of 10)."""
    tables = session(n)
    for table, rows in recorded(n).items():
        tables.setdefault(table, []).extend(rows)
    conn = connect(db).conn
    with conn:
        for table, rows in tables.items():
            for row in rows:
                conn.execute(insert_sql("insert", table, tuple(row)), tuple(row.values()))
        if n % 10 == 0:
            evidence = json.dumps({"expected": "all", "actual": "alefita_way"})
            conn.execute("INSERT INTO findings (rule, severity, conversation_id, call_id, "
                         "return_id, flow_id, message, evidence, created_at) VALUES "
                         "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         ("return-recipient", "error", f"conv-{n}", f"call-{n}", f"ret-{n}",
                          f"r{n}", "recipient is not all", evidence, time.time()))  # fmt: skip
    conn.close()


def server_side(db: Path, size: int) -> dict[str, Any]:
    """The server's costs, measured in this process, on a capture being recorded into (a
    connection open in it, as a recorder's is)."""
    recorder = connect(db).conn
    live = LiveCapture(db)
    page = LivePage(db, "/token/")
    first = timed(lambda: page.read_whole(live.capture))
    parts = page.parts(live.capture)
    whole = timed(lambda: page.whole(live.capture, parts))
    seen = dict(parts.digests)
    version = page.model.version
    add_session(db, size)
    started = time.perf_counter()
    assert live.changed()
    page.read(live.capture, reopened=live.reopened())
    message = page.update(version, seen, parts)
    update = time.perf_counter() - started
    assert message is not None
    sent = len(json.loads(message[1])["steps"])
    look = min(timed(live.changed) for _ in range(100))
    summary = timed(lambda: page.parts(live.capture))
    live.close()
    recorder.close()
    return {"first": first, "whole": whole, "update": update, "sent": sent, "look": look,
            "parts": summary}  # fmt: skip


def browser_side(browser: Chromium, db: Path, size: int) -> dict[str, float]:
    """The page through a real `convtap serve`: open, filters, and a session shown live."""
    proc = subprocess.Popen([sys.executable, "-m", "convtap.cli", "serve", "--db", str(db)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    try:
        browser.open("about:blank")
        browser.open(url)
        while not browser.evaluate("window.__convtapReady === true"):
            time.sleep(0.02)
        timing = "performance.getEntriesByType('navigation')[0]"
        out = {
            "first": browser.evaluate("window.__convtapFirstAt") / 1000,
            "open": browser.evaluate("window.__convtapReadyAt") / 1000,
            "served": browser.evaluate(f"{timing}.responseEnd - {timing}.requestStart") / 1000,
            "indexed": indexed(browser),
            "rule": browser.evaluate("window.convtapFilter({rule: 'return-recipient'})") / 1000,
            "search": browser.evaluate("window.convtapFilter({q: 'ret-42'})") / 1000,
            "again": browser.evaluate("window.convtapFilter({q: 'ret-43'})") / 1000,
        }
        browser.evaluate(f"window.convtapFilter({{q: 'call-{size + 1}'}})")
        updates = browser.evaluate("window.__convtapUpdates || 0")
        started = time.perf_counter()
        add_session(db, size + 1)
        while not browser.evaluate(f"document.getElementById('call-call-{size + 1}') !== null"):
            time.sleep(0.01)
        out["shown"] = time.perf_counter() - started
        out["updates"] = browser.evaluate("window.__convtapUpdates || 0") - updates
        return out
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def ratio(value: float, target: float | None, scale: float = 1.0) -> str:
    shown = value * scale
    return (
        f"{shown:.1f}" if target is None else f"{shown:.1f}/{target * scale:g}={value / target:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument(
        "--captures",
        type=Path,
        metavar="DIR",
        help="keep each capture made in DIR and reuse it in later runs",
    )
    args = parser.parse_args()
    binary = shutil.which("chromium")
    if binary is None:
        sys.exit("live_bench: Debian's chromium is not installed (apt-get install chromium)")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'calls':>7} {'first s':>8} {'page s':>7} {'update ms':>16} {'sent':>5} {'look us':>8}"
          f" {'parts s':>8} | {'first s':>13} {'read s':>7} {'indexed s':>9} {'rule ms':>14}"
          f" {'search ms':>14}"
          f" {'again ms':>9} {'shown s':>8}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, Chromium(binary) as browser:
        for size in args.sizes:
            db = Path(tmp) / f"live-{size}.db"
            prepared(db, size, args.captures)
            s = server_side(db, size)
            b = browser_side(browser, db, size)
            goal = TARGETS.get(size, {})
            print(f"{size:>7,} {s['first']:>8.2f} {s['whole']:>7.2f}"
                  f" {ratio(s['update'], goal.get('update'), 1000):>16} {s['sent']:>5}"
                  f" {s['look'] * 1e6:>8.0f} {s['parts']:>8.2f} |"
                  f" {ratio(b['first'], goal.get('open')):>13} {b['open']:>7.2f}"
                  f" {b['indexed']:>9.2f}"
                  f" {ratio(b['rule'], goal.get('filter'), 1000):>14}"
                  f" {ratio(b['search'], goal.get('filter'), 1000):>14}"
                  f" {b['again'] * 1000:>9.0f} {b['shown']:>8.2f}")  # fmt: skip
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("value/target=ratio (≤ 1 meets it). Server: first, the reading of the whole capture")
    print("when it starts; page, the page it serves; update, reading one session more and the")
    print("message a page is sent (sent: its steps, 2: the session's turns); look, whether")
    print("anything changed; parts, the summary and the pictures read again (at most every so")
    print("often). Browser, through `convtap serve`: first (from the start of navigation to the")
    print("first screen drawn: the page is usable from there on, its filters applying to what is")
    print("read so far), read (to all the data read), indexed (to")
    print("the search text made, when idle), a rule filter, a text search, another; shown: a")
    print("session written until the page shows it (the 200 ms poll included)")


if __name__ == "__main__":
    main()
