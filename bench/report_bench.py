"""Report size and open time against capture size: `convtap report` of up to 10,000 calls,
opened from disk in Debian's headless Chromium.

    python bench/report_bench.py [--sizes 1000 10000]

Each capture is bench/audit_bench.py's (N contract-shaped sessions: a call, a prepare, a return,
one in ten breaking the contract), with each session's two turns, its return and the
continuation recorded as the recorder would, then audited. The page is written (time, and the
peak of Python memory while writing it, which stays flat: the capture is streamed), then
opened over the DevTools protocol: the load event and the moment the page's filters are ready,
both from the start of navigation, and the time one filter (a rule) takes to apply.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from audit_bench import build, session
from convtap.ingest.capture import audit_capture
from convtap.report.page import write_report
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
            }
        ],
    }


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


def opened(browser: Chromium, page: Path) -> dict[str, float]:
    """Open the page from disk; the times the browser took, in seconds."""
    browser.open("about:blank")
    browser.open(page.as_uri())
    load = browser.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    ready = browser.evaluate("window.__convtapReadyAt")
    return {
        "load": load / 1000,
        "ready": ready / 1000,
        "open": max(load, ready) / 1000,
        "rule": browser.evaluate("window.convtapFilter({rule: 'return-recipient'})") / 1000,
        "search": browser.evaluate("window.convtapFilter({q: 'ret-42'})") / 1000,
        "elements": browser.evaluate("document.getElementsByTagName('*').length"),
        "findings": browser.evaluate("document.getElementsByClassName('finding').length"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    args = parser.parse_args()
    binary = shutil.which("chromium")
    if binary is None:
        sys.exit("report_bench: Debian's chromium is not installed (apt-get install chromium)")
    print(f"{'calls':>7} {'findings':>9} {'page MB':>8} {'write s':>8} {'peak MB':>8}"
          f" {'load s':>7} {'ready s':>8} {'open s':>7} {'rule ms':>8} {'search ms':>10}"
          f" {'elements':>9}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, Chromium(binary) as browser:
        for size in args.sizes:
            db, page = Path(tmp) / f"report-{size}.db", Path(tmp) / f"report-{size}.html"
            capture(db, size)
            start = time.perf_counter()
            write_report(db, page)
            seconds = time.perf_counter() - start
            tracemalloc.start()  # a second run: tracing slows it down
            write_report(db, page)
            peak = tracemalloc.get_traced_memory()[1] / 1e6
            tracemalloc.stop()
            t = opened(browser, page)
            print(f"{size:>7,} {t['findings']:>9,.0f} {page.stat().st_size / 1e6:>8.1f}"
                  f" {seconds:>8.2f} {peak:>8.1f} {t['load']:>7.2f} {t['ready']:>8.2f}"
                  f" {t['open']:>7.2f} {t['rule'] * 1000:>8.0f} {t['search'] * 1000:>10.0f}"
                  f" {t['elements']:>9,.0f}")  # fmt: skip
    print("write: convtap report (peak: Python memory while writing); load, ready: from the start")
    print("of navigation to the load event and to the filters being ready; open: the later of")
    print("the two; rule, search: applying one rule filter, one text search (the first)")


if __name__ == "__main__":
    main()
