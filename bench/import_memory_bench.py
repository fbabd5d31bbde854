"""`convtap import`'s peak memory against the size of what it imports.

    python bench/import_memory_bench.py [--events 2000000] [--event-mb 200] [--turns 10000]

Each input is imported at a tenth of its size and at its size, into a new database, in a child
process whose peak resident memory (VmHWM) is read: the ratio of the two peaks says whether
memory grows with the file (1.0: it does not). A raw `.sse` of many small events; a raw `.sse`
that is one event (larger than the decoder keeps: it is skipped, and said); a HAR and a mitmproxy
flow file of 100 turns whose streams hold the events; a HAR of many small turns. `import` reads a
raw body in pieces and a HAR or flow file one flow at a time, so none must grow with the file;
many turns grow the live audit's memory until its bound (4,096 turns, calls and conversations).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the checkout's `tests` importable
    sys.path.insert(0, str(ROOT))

from tests.harness import peak_mb_while  # noqa: E402
from tests.seeds import SSE, har_entry, user_turn  # noqa: E402

HEAD = b'event: delta_encoding\ndata: "v1"\n\n'
URL = "https://chatgpt.com/backend-api/f/conversation"
TURNS = 100  # turns of the HAR and flow file whose events grow


def message(n: int) -> bytes:
    return HEAD + (
        b'event: delta\ndata: {"p": "", "o": "add", "v": {"message": {"id": "m%d", "author": '
        b'{"role": "assistant"}, "content": {"content_type": "text", "parts": [""]}}, '
        b'"conversation_id": "c-bench-%d"}}\n\n' % (n, n)
    )


FRAMES = b"".join(b'event: delta\ndata: {"v": " w%d"}\n\n' % i for i in range(1000))
DONE = b"data: [DONE]\n\n"


def turn_body(events: int, n: int = 0) -> bytes:
    """A v1 stream: a message, then `events` bare frames appending to it."""
    return message(n) + FRAMES * (events // 1000) + DONE


def many_events(path: Path, events: int) -> Path:
    with path.open("wb") as out:
        out.write(message(0))
        for _ in range(events // 1000):
            out.write(FRAMES)
        out.write(DONE)
    return path


def one_event(path: Path, mb: int) -> Path:
    with path.open("wb") as out:
        out.write(HEAD + b'data: {"type": "x", "v": "')
        for _ in range(mb):
            out.write(b"a" * (1 << 20))
        out.write(b'"}\n\ndata: [DONE]\n\n')
    return path


def _at(n: int) -> str:
    return f"2026-08-{1 + n // 86400:02d}T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"


def _entries(turns: int, events: int) -> Iterator[dict[str, object]]:
    """`turns` turns, each of `events` frames (or the example session's call, for 0)."""
    call = (SSE / "alefita_way_call.sse").read_bytes()
    for n in range(turns):
        yield har_entry(URL, user_turn(), turn_body(events, n) if events else call, _at(n))


def _write_har(path: Path, entries: Iterator[dict[str, object]]) -> Path:
    with path.open("w") as out:
        out.write('{"log": {"version": "1.2", "creator": {"name": "bench", "version": "1"}, '
                  '"entries": [')  # fmt: skip
        for n, entry in enumerate(entries):
            out.write((", " if n else "") + json.dumps(entry))
        out.write("]}}")
    return path


def long_turns_har(path: Path, events: int) -> Path:
    return _write_har(path, _entries(TURNS, events // TURNS))


def long_turns_flow_file(path: Path, events: int) -> Path:
    from mitmproxy import io
    from mitmproxy.io.har import request_to_flow

    with path.open("wb") as out:
        writer = io.FlowWriter(out)
        for entry in _entries(TURNS, events // TURNS):
            writer.add(request_to_flow(entry))
    return path


def many_turns_har(path: Path, turns: int) -> Path:
    return _write_har(path, _entries(turns, 0))


def import_peak(path: Path, db: Path) -> tuple[float, float]:
    """(peak MB, seconds) of `convtap import` of `path` into a new `db`."""
    args = [sys.executable, "-m", "convtap.cli", "import", str(path), "--db", str(db)]
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = peak_mb_while(proc)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"import failed: {err.strip()}")
    return peak, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--event-mb", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10_000)
    options = parser.parse_args()
    inputs: list[tuple[str, Callable[[Path, int], Path], str, int]] = [
        ("raw .sse, events", many_events, ".sse", options.events),
        ("raw .sse, one event (MB)", one_event, ".sse", options.event_mb),
        (f"HAR, {TURNS} turns, events", long_turns_har, ".har", options.events),
        (f"flow file, {TURNS} turns, events", long_turns_flow_file, ".mitm", options.events),
        ("HAR, small turns", many_turns_har, ".har", options.turns),
    ]
    print("convtap import: peak memory at a tenth of each input and at all of it")
    print(f"{'input':<30}{'size':>11}{'file MB':>9}{'small MB':>10}{'large MB':>10}"
          f"{'ratio':>7}{'s':>7}")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        for name, make, suffix, size in inputs:
            peaks = []
            for n, count in enumerate((size // 10, size)):
                source = make(Path(folder) / f"input{n}{suffix}", count)
                peak, seconds = import_peak(source, Path(folder) / f"import{n}.db")
                megabytes = source.stat().st_size / 1e6
                source.unlink()
                peaks.append(peak)
            print(f"{name:<30}{size:>11,}{megabytes:>9.0f}{peaks[0]:>10.0f}{peaks[1]:>10.0f}"
                  f"{peaks[1] / peaks[0]:>7.2f}{seconds:>7.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
