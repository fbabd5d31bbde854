"""A burst of turns at full loopback speed through `convtap record`, as issue 10 asks: every tool
call in `convtap calls`, complete, and no flow marked as lost; with the time the burst took, the
time the recorder then needed to catch up (Ctrl-C waits for it), and the journal's peak size.

    python bench/burst_bench.py [--mb 150] [--otlp-endpoint URL]

With --otlp-endpoint, the burst runs twice, without and with `record --otlp-endpoint URL` (live
traces from a thread of the recorder process), and the second's times are given as ratios to
the first's: what the live traces cost the client and the recorder.

The turns are decode_bench's (~0.3 MB each, each ending in a local tool call), sent one after the
other on one keep-alive connection through `convtap record --mode reverse:` to a local upstream.
"""

from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the checkout's `tests` importable
    sys.path.insert(0, str(ROOT))

from convtap.journal.segments import journal_dir  # noqa: E402

from tests.harness import burst_bodies, burst_upstream, record, send_burst  # noqa: E402


def journal_bytes(db: Path) -> int:
    folder = journal_dir(db)
    try:
        return sum(p.stat().st_size for p in folder.iterdir())
    except OSError:
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=150.0)
    parser.add_argument("--otlp-endpoint", metavar="URL")
    args = parser.parse_args()
    bodies = burst_bodies(max(1, round(args.mb / 0.3)))
    plain = burst(bodies)
    if args.otlp_endpoint:
        traced = burst(bodies, "--otlp-endpoint", args.otlp_endpoint)
        print(f"with --otlp-endpoint {args.otlp_endpoint}: the client took "
              f"{traced[0] / plain[0]:.2f}x the time, the burst and the recorder's catching up "
              f"{traced[1] / plain[1]:.2f}x (one run each)")  # fmt: skip


def burst(bodies: list[bytes], *flags: str) -> tuple[float, float]:
    """One burst through `convtap record` (`flags` added): the client's time, and the time
    until the recorder had it all."""
    size = sum(map(len, bodies)) / 1e6
    with tempfile.TemporaryDirectory(prefix="burst_bench-") as tmp:
        db = Path(tmp) / "burst.db"
        received: list[bytes] = []
        peak = 0
        with burst_upstream(bodies) as upstream, record(db, upstream, Path(tmp), *flags) as rec:
            sender = threading.Thread(target=send_burst, args=(rec.port, len(bodies), received))
            start = time.perf_counter()
            sender.start()
            while sender.is_alive():
                peak = max(peak, journal_bytes(db))
                sender.join(0.2)
            sent = time.perf_counter() - start
            behind = journal_bytes(db)
            rec.proc.send_signal(signal.SIGINT)  # Ctrl-C: it waits for the recorder to catch up
            out = rec.wait(3600)
            drained = time.perf_counter() - start - sent
        calls = json.loads(subprocess.run(
            [sys.executable, "-m", "convtap.cli", "calls", "--db", str(db), "--format", "json"],
            capture_output=True, text=True, check=True,
        ).stdout)  # fmt: skip
        with sqlite3.connect(db) as conn:
            lost = conn.execute("SELECT count(*) FROM flows WHERE failure IS NOT NULL").fetchone()
            flows = conn.execute("SELECT count(*) FROM flows").fetchone()
            complete = conn.execute("SELECT count(*) FROM tool_calls WHERE complete").fetchone()
    exact = received == bodies
    print(f"burst: {size:.1f} MB in {len(bodies)} turns, each ending in a local tool call, one run"
          + (f" ({' '.join(flags)})" if flags else ""))  # fmt: skip
    print(f"  the client received it all in {sent:.1f} s ({size / sent:.1f} MB/s), "
          f"byte-exact: {exact}")  # fmt: skip
    print(f"  the journal peaked at {peak / 1e6:.0f} MB ({behind / 1e6:.0f} MB when the burst "
          f"ended); Ctrl-C waited {drained:.1f} s for the recorder")  # fmt: skip
    print(f"  recorder rate over the whole burst: {size / (sent + drained):.1f} MB/s "
          f"({(sent + drained) / sent:.2f}x the burst's duration to drain it)")  # fmt: skip
    print(f"  convtap calls: {len(calls)} calls for {len(bodies)} turns, {complete[0]} complete; "
          f"{flows[0]} flows, {lost[0]} marked as lost; exit {rec.proc.returncode}")  # fmt: skip
    ok = exact and len(calls) == complete[0] == len(bodies) and lost[0] == 0
    print("every call recorded, complete, nothing lost" if ok else "LOSS: see above")
    if not ok:
        print(out[-2000:])
        sys.exit(1)
    return sent, sent + drained


if __name__ == "__main__":
    main()
