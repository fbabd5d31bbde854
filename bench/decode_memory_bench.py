"""`convtap decode`'s peak memory against the length of what it decodes.

    python bench/decode_memory_bench.py [--events 2000000]

Two streams of many small events, the kind a long session is made of: pings (comment lines,
the server's keep-alive) and typed events (kept and listed by `decode --format json`). Each is
decoded at a tenth of --events and at --events in a child process whose peak resident memory
(VmHWM) is read: the ratio of the two peaks says whether memory grows with the stream (1.0: it
does not). `decode` spools what it lists to files as it goes, so it must not.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the checkout's `tests` importable
    sys.path.insert(0, str(ROOT))

from tests.harness import peak_mb_while  # noqa: E402


def pings(path: Path, events: int) -> Path:
    with path.open("w") as out:
        out.write('event: delta_encoding\ndata: "v1"\n\n')
        for n in range(events // 1000):
            out.write("".join(f": ping - {n}-{i}\n\n" for i in range(1000)))
    return path


def typed(path: Path, events: int) -> Path:
    with path.open("w") as out:
        for n in range(events // 1000):
            out.write("".join(f'data: {{"type": "marker", "n": {n * 1000 + i}}}\n\n'
                              for i in range(1000)))  # fmt: skip
    return path


def decode_peak(path: Path, *options: str) -> tuple[float, float]:
    """(peak MB, seconds) of `convtap decode` on `path`."""
    args = [sys.executable, "-m", "convtap.cli", "decode", *options, str(path)]
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = peak_mb_while(proc)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"decode failed: {err.strip()}")
    return peak, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    events = parser.parse_args().events
    print(f"convtap decode: peak memory, {events // 10:,} events against {events:,}")
    print(f"{'stream':<14}{'small MB':>10}{'large MB':>10}{'ratio':>8}{'events/s':>12}")
    with tempfile.TemporaryDirectory() as folder:
        for name, make, options in (
            ("pings", pings, ()),
            ("typed events", typed, ("--format", "json")),
        ):
            small = make(Path(folder) / f"{name[0]}-small.sse", events // 10)
            large = make(Path(folder) / f"{name[0]}-large.sse", events)
            small_peak, _ = decode_peak(small, *options)
            large_peak, seconds = decode_peak(large, *options)
            print(f"{name:<14}{small_peak:>10.0f}{large_peak:>10.0f}"
                  f"{large_peak / small_peak:>8.2f}{events / seconds:>12,.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
