"""What keeping the live page current costs against capture size, as a ratio to writing the
static report of the same capture in the same run.

    python bench/live_bench.py [--sizes 100 1000 10000]

Each capture is bench/report_bench.py's. For each: `convtap report`'s write (the baseline), the
live page's whole render (what a browser opening the URL waits for), one reading of every part
(what each change costs the server: it renders them all again), and the look that says whether
anything changed (`PRAGMA data_version`), which runs every 200 ms.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from convtap.report.page import write_report
from convtap.report.parts import LiveCapture, LivePage
from report_bench import capture


def timed(step: Callable[[], object]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    args = parser.parse_args()
    print(f"{'calls':>7} {'report s':>9} {'whole':>7} {'parts':>7} {'parts MB':>9}"
          f" {'look us':>8}   (whole, parts: ratios to report)")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            db = Path(tmp) / f"live-{size}.db"
            capture(db, size)
            report = timed(lambda: write_report(db, db.with_suffix(".html")))  # noqa: B023
            live = LiveCapture(db)
            page = LivePage(db, "/token/events")
            whole = timed(lambda: page.whole(live.capture, 0))  # noqa: B023
            started = time.perf_counter()
            parts = page.parts(live.capture, 0)
            reading = time.perf_counter() - started
            look = min(timed(live.changed) for _ in range(100))
            megabytes = sum(map(len, parts.html.values())) / 1e6
            print(f"{size:>7} {report:>9.2f} {whole / report:>7.2f} {reading / report:>7.2f}"
                  f" {megabytes:>9.1f} {look * 1e6:>8.0f}")  # fmt: skip
            live.close()


if __name__ == "__main__":
    main()
