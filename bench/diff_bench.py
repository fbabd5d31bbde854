"""Shape inference throughput and `convtap diff` time on two large captures.

    python bench/diff_bench.py [--mb 100]

Builds two capture databases of --mb MB of turns each (the decoder benchmark's traffic; the
second with a new metadata field and a new marker value), then times `convtap diff A B` in a
child process and reads that process's peak memory: it must stay far below the captures' size,
since rows are streamed, never loaded whole. Then diffs B against A's shapes file (`convtap
shapes A --output`): about half the time, since only B is read, and the same changes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the checkout's `bench` importable
    sys.path.insert(0, str(ROOT))

from convtap.journal.events import (  # noqa: E402
    BodyChunk,
    RequestSeen,
    ResponseEnded,
    ResponseStarted,
)
from convtap.record.local import LocalRecorder  # noqa: E402

from bench.decode_bench import generate  # noqa: E402
from tests.harness import peak_mb_while  # noqa: E402

SSE = (("content-type", "text/event-stream"),)


def build(path: Path, bodies: list[bytes]) -> int:
    recorder = LocalRecorder(str(path), redact=True, echo="off")
    events = 0
    for n, body in enumerate(bodies):
        flow = f"flow-{n}"
        request = json.dumps({"action": "next", "messages": [], "model": "m"}).encode()
        path_ = "/backend-api/f/conversation"
        recorder.handle(RequestSeen(flow, "POST", f"https://x{path_}", "x", path_, (), request,
                                    float(n)))  # fmt: skip
        recorder.handle(ResponseStarted(flow, 200, SSE))
        for i in range(0, len(body), 16384):
            recorder.handle(BodyChunk(flow, body[i : i + 16384], float(n)))
        events += body.count(b"\n\n")
        recorder.handle(ResponseEnded(flow, 200, SSE, None, "complete", float(n)))
    recorder.close()
    return events


def run_measured(args: list[str]) -> tuple[str, float]:
    """Run a command; its output and its peak memory (VmHWM, polled: ru_maxrss would count
    this process's memory, which the child shares until it execs)."""
    with tempfile.TemporaryFile() as out:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(args, stdout=out, env=env)
        peak = peak_mb_while(proc, every=0.05)
        if proc.wait() != 0:
            raise RuntimeError(f"{args} failed")
        out.seek(0)
        return out.read().decode(), peak


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=100.0)
    args = parser.parse_args()
    older = generate(args.mb)
    newer = [
        b.replace(
            b'"finish_details": {"type": "stop"}',
            b'"finish_details": {"type": "stop"}, "stop_reason": "end"',
        ).replace(b'"marker": "cot_token"', b'"marker": "reasoning_token"')
        for b in older
    ]
    size = sum(map(len, older)) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.db", Path(tmp) / "b.db"
        start = time.perf_counter()
        events = build(a, older) + build(b, newer)
        built = time.perf_counter() - start
        db_mb = (a.stat().st_size + b.stat().st_size) / 1e6
        start = time.perf_counter()
        command = ["diff", "--format", "json", "--fail-on", "never", str(a), str(b)]
        out, peak = run_measured([sys.executable, "-m", "convtap.cli", *command])
        seconds = time.perf_counter() - start
        baseline = Path(tmp) / "baseline.json"
        run_measured([sys.executable, "-m", "convtap.cli", "shapes", str(a), "--output",
                      str(baseline)])  # fmt: skip
        start = time.perf_counter()
        against = ["diff", "--format", "json", "--fail-on", "never", str(baseline), str(b)]
        out_baseline, _ = run_measured([sys.executable, "-m", "convtap.cli", *against])
        baseline_seconds = time.perf_counter() - start
        baseline_kb = baseline.stat().st_size / 1e3
    summary = json.loads(out)["summary"]
    print(
        f"two captures of {size:.1f} MB of traffic each ({events:,} events in all; "
        f"{db_mb:.0f} MB of databases, built in {built:.1f} s)"
    )
    print(
        f"convtap diff A B: {seconds:.1f} s, {events / seconds:,.0f} events/s of shape "
        f"inference, peak memory {peak:.0f} MB; changes: {summary}"
    )
    print(f"peak memory is {peak / db_mb:.2f}x the databases' size: rows are streamed")
    same = json.loads(out_baseline)["changes"] == json.loads(out)["changes"]
    print(
        f"convtap diff baseline.json B ({baseline_kb:.0f} kB of shapes): {baseline_seconds:.1f} s, "
        f"{baseline_seconds / seconds:.2f}x the time of A B; the same changes: {same}"
    )


if __name__ == "__main__":
    main()
