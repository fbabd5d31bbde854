"""Report size, write time and open time against capture size, each as a ratio to its target
(issue 35: at 10,000 calls the page at most 5 MB, written in 3 s, usable in Chromium in 1.5 s;
at 100,000 calls written in 30 s in bounded memory), measured in one run.

    python bench/report_bench.py [--sizes 1000 10000 100000]

Each capture is bench/audit_bench.py's (N contract-shaped sessions: a call, a prepare, a return,
one in ten breaking the contract), with each session's two turns, its return and the
continuation recorded as the recorder would, then audited. The page is written in a process of
its own (its time, and its peak memory: the largest resident size of that process), then
opened from disk in Debian's headless Chromium over the DevTools protocol: the first screen drawn
and the page ready (all its data read, the filters usable), both from the start of navigation;
then one filter (a rule), and a text search (the first, then another), each applied over all
the data.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from audit_bench import build, session
from convtap.ingest.capture import audit_capture
from convtap.store.database import connect, insert_sql
from convtap.wire.jsonvalue import dumps

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.report.test_browser import Chromium  # noqa: E402  (the tests' DevTools client)


def recorded(n: int) -> dict[str, list[dict[str, Any]]]:
    """What the recorder adds to audit_bench's session `n`: its turns, the return, and the
    assistant message that continues the turn after it."""
    flows = {flow["id"]: flow for flow in session(n)["flows"]}
    back = json.loads(flows[f"r{n}"]["request_body"])
    message = back["messages"][0]
    conv, call, at = f"conv-{n}", f"call-{n}", flows[f"t{n}"]["started_at"]
    turn = {"conversation_id": conv, "model": "gpt-5-6-thinking", "client": "bench-client/1.0",
            "encoding": "v1", "done": 1, "stream_complete": 1, "truncated": 0, "legs": 1,
            "errors": "[]"}  # fmt: skip
    return {
        "turns": [
            {**turn, "id": f"t{n}", "event_count": 24, "started_at": at, "ended_at": at + 2.5},
            {
                **turn,
                "id": f"r{n}",
                "parent_message_id": call,
                "event_count": 17,
                "started_at": at + 4,
                "ended_at": at + 6,
            },
        ],
        "tool_returns": [
            {
                "id": f"r{n}:0",
                "protocol": "f-conversation",
                "flow_id": f"r{n}",
                "conversation_id": conv,
                "parent_message_id": call,
                "message_id": message["id"],
                "tool": "alefita_way",
                "body_call_id": call,
                "body_tool": "alefita_way",
                "message": dumps(message),
                "returned_at": at + 4,
                "call_id": call,
            }
        ],
        "messages": [
            {
                "id": f"answer-{n}",
                "conversation_id": conv,
                "turn_id": f"r{n}",
                "role": "assistant",
                "recipient": "all",
                "channel": "final",
                "content_type": "text",
                "status": "finished_successfully",
                "text": "Executei a ferramenta alefita_way.",
                "first_seen_at": at + 5,
                "updated_at": at + 5,
            }
        ],
    }


def prepared(path: Path, size: int, kept: Path | None) -> None:
    """The capture of `size` sessions at `path`: made there, or (with `kept`, a folder) made once
    into it and copied from it, so that later runs skip the minutes a large one takes."""
    if kept is None:
        capture(path, size)
        return
    cached = kept / f"report-{size}.db"
    if not cached.exists():
        capture(cached.with_suffix(".part"), size)
        cached.with_suffix(".part").rename(cached)
    shutil.copyfile(cached, path)


def capture(path: Path, size: int) -> None:
    build(path, size)
    tables: dict[str, list[dict[str, Any]]] = {"turns": [], "tool_returns": [], "messages": []}
    for n in range(size):
        for table, rows in recorded(n).items():
            tables[table] += rows
    db = connect(path)
    with db.conn:
        for table, rows in tables.items():
            for row in rows:
                db.conn.execute(insert_sql("insert", table, tuple(row)), tuple(row.values()))
    db.conn.close()
    audit_capture(path)


# The write timed inside the child (its start and imports left out): wall and CPU time, and its
# peak resident memory (VmHWM: made anew by exec, where getrusage counts the parent's pages).
WRITE = """import re, sys, time
from pathlib import Path
from convtap.report.page import write_report
started, cpu = time.perf_counter(), time.process_time()
write_report(Path(sys.argv[1]), Path(sys.argv[2]))
peak = re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text())[1]
print(time.perf_counter() - started, time.process_time() - cpu, int(peak) / 1024)
"""


def written(db: Path, page: Path) -> tuple[float, float, float]:
    """Write the page in a child process: seconds, CPU seconds, its peak memory in MB."""
    ran = subprocess.run([sys.executable, "-c", WRITE, str(db), str(page)], check=True,
                         capture_output=True, text=True)  # fmt: skip
    seconds, cpu, peak = ran.stdout.split()
    return float(seconds), float(cpu), float(peak)


def opened(browser: Chromium, page: Path) -> dict[str, float]:
    """Open the page from disk; the times the browser took, in seconds."""
    browser.open("about:blank")
    browser.open(page.as_uri())
    return {
        "first": browser.evaluate("window.__convtapFirstAt") / 1000,
        "ready": browser.evaluate("window.__convtapReadyAt") / 1000,
        "indexed": indexed(browser),
        "rule": browser.evaluate("window.convtapFilter({rule: 'return-recipient'})") / 1000,
        "search": browser.evaluate("window.convtapFilter({q: 'ret-42'})") / 1000,
        "again": browser.evaluate("window.convtapFilter({q: 'ret-43'})") / 1000,
        "elements": browser.evaluate("document.getElementsByTagName('*').length"),
        "shown": browser.evaluate("document.getElementById('shown').textContent"),
    }


TARGETS = {10_000: {"mb": 5.0, "write": 3.0, "ready": 1.5}, 100_000: {"write": 30.0}}


def indexed(browser: Chromium) -> float:
    """Seconds from the start of navigation until the search text of every item is made (in
    idle moments once the page is ready)."""
    while browser.evaluate("window.__convtapIndexedAt") is None:
        time.sleep(0.05)
    return float(browser.evaluate("window.__convtapIndexedAt")) / 1000


def ratio(value: float, target: float | None) -> str:
    return f"{value:.2f}" if target is None else f"{value:.2f}/{target:g}={value / target:.2f}"


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
        sys.exit("report_bench: Debian's chromium is not installed (apt-get install chromium)")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'calls':>7} {'page MB':>14} {'write s':>16} {'cpu s':>6} {'peak MB':>8} {'first s':>7}"
          f" {'ready s':>16} {'indexed s':>9} {'rule ms':>8} {'search ms':>10} {'again ms':>9}"
          f" {'elements':>9}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, Chromium(binary) as browser:
        for size in args.sizes:
            db, page = Path(tmp) / f"report-{size}.db", Path(tmp) / f"report-{size}.html"
            prepared(db, size, args.captures)
            seconds, cpu, peak = written(db, page)
            t = opened(browser, page)
            mb = page.stat().st_size / 1e6
            goal = TARGETS.get(size, {})
            print(f"{size:>7,} {ratio(mb, goal.get('mb')):>14}"
                  f" {ratio(seconds, goal.get('write')):>16} {cpu:>6.2f}"
                  f" {peak:>8.0f} {t['first']:>7.2f} {ratio(t['ready'], goal.get('ready')):>16}"
                  f" {t['indexed']:>9.2f}"
                  f" {t['rule'] * 1000:>8.0f} {t['search'] * 1000:>10.0f}"
                  f" {t['again'] * 1000:>9.0f} {t['elements']:>9,.0f}")  # fmt: skip
            db.unlink()
            page.unlink()
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("value/target=ratio (≤ 1 meets it). write: `convtap report` in a process of its own")
    print("(cpu: its CPU time); peak: its largest resident size; first, ready: from navigation")
    print("to the first screen drawn, and to every step read with the filters usable; indexed:")
    print("to the search text of every item made (when the page is idle); rule, search, again:")
    print("one rule filter, a text search, another, each over all the data")


if __name__ == "__main__":
    main()
