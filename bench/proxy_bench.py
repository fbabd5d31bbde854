"""What the addon costs the proxy: plain `mitmdump` against `mitmdump -s addon/mitm.py`, one run.

    PYTHONPATH=. python bench/proxy_bench.py [--mb 50] [--events 2000] [--rounds 3] [--quick]

Both proxies run `--mode reverse:http://127.0.0.1:UPSTREAM` on 127.0.0.1, in front of a small
upstream written here (a forked `http.server`, chunked `text/event-stream` answers to
`POST /backend-api/f/conversation`). The bodies are decode_bench's turns, shaped like real
traffic: `delta_encoding`, the history echo, thousands of bare `{"v": ...}` continuation frames,
a streamed tool call, patches and `[DONE]`. Every turn gets its own conversation and message ids.
The addon records into a temporary database, which is checked afterwards.

1. Proxy CPU: utime+stime of the mitmdump process (/proc/PID/stat) across --mb of turns, one POST
   per turn on one keep-alive connection, after a warm-up turn; each reading is taken once the
   process is idle again, so the addon's writer thread finishing its backlog is counted. The
   variants run --rounds times, interleaved, and each keeps its round of least CPU: on two
   shared cores one round's ratio swings by ±0.3 (other tenants, the recorder on the other core).
2. Per-event latency: the upstream sends --events bare frames 1 ms apart, each carrying
   `time.monotonic_ns()` at send time; the client stamps each complete event on arrival.
3. Peak memory (VmHWM) of a fresh proxy process per stream size and variant.

The client reads every body incrementally and asserts the bytes it got are the bytes sent.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import random
import re
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the checkout's `bench` and `addon` importable
    sys.path.insert(0, str(ROOT))

from bench.decode_bench import message, sse, turn  # noqa: E402

PATH = "/backend-api/f/conversation"
TEMPLATES = 8  # distinct turns; turn n is template n % 8 with its ids renumbered to n
TICKS = os.sysconf("SC_CLK_TCK")
MITMDUMP = Path(sys.executable).parent / "mitmdump"


# -- the stream --------------------------------------------------------------------------------


def templates() -> list[bytes]:
    rng = random.Random(7)
    return [turn(rng, n) for n in range(TEMPLATES)]


def turn_body(bodies: list[bytes], n: int) -> bytes:
    """Turn n: a template with its conversation and message ids renumbered (same length)."""
    k = n % len(bodies)
    return bodies[k].replace(b"conv-%06d" % k, b"conv-%06d" % n)


def event_count(body: bytes) -> int:
    return sum(1 for line in body.split(b"\n") if line.startswith(b"data: "))


def paced_prelude() -> list[bytes]:
    answer = message("lat-a", "assistant", "", status="in_progress", channel="final")
    root = {"message": answer, "conversation_id": "conv-latency"}
    return [
        sse('"v1"', "delta_encoding").encode(),
        sse({"p": "", "o": "add", "v": root, "c": 0}, "delta").encode(),
        sse({"p": "/message/content/parts/0", "o": "append", "v": "t"}, "delta").encode(),
    ]


def paced_coda() -> list[bytes]:
    finish = [{"p": "/message/status", "o": "replace", "v": "finished_successfully"}]
    done = {"type": "message_stream_complete", "conversation_id": "conv-latency"}
    return [
        sse({"p": "", "o": "patch", "v": finish}, "delta").encode(),
        sse(done).encode(),
        sse("[DONE]").encode(),
    ]


# -- the upstream (a forked process) -------------------------------------------------------------


class UpstreamServer(ThreadingHTTPServer):
    daemon_threads = True
    bodies: list[bytes]
    chunk: int


class Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: UpstreamServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path.split("?", 1)[0] != PATH:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        if self.headers["x-bench"] == "paced":
            self.paced(int(self.headers["x-bench-events"]), float(self.headers["x-bench-gap"]))
        else:
            body = turn_body(self.server.bodies, int(self.headers["x-bench-turn"]))
            step = self.server.chunk
            for i in range(0, len(body), step):
                self.send_chunk(body[i : i + step])
        self.wfile.write(b"0\r\n\r\n")

    def paced(self, events: int, gap: float) -> None:
        for frame in paced_prelude():
            self.send_chunk(frame)
        start = time.monotonic()
        for i in range(events):
            wait = start + i * gap - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self.send_chunk(b'event: delta\ndata: {"v": " %d"}\n\n' % time.monotonic_ns())
        for frame in paced_coda():
            self.send_chunk(frame)

    def send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


def serve(bodies: list[bytes], chunk: int, conn: Connection) -> None:
    server = UpstreamServer(("127.0.0.1", 0), Upstream)
    server.bodies, server.chunk = bodies, chunk
    conn.send(server.server_address[1])
    server.serve_forever()


@contextlib.contextmanager
def upstream(bodies: list[bytes], chunk: int) -> Iterator[tuple[int, int]]:
    """(port, pid) of the upstream server process."""
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=serve, args=(bodies, chunk, there), daemon=True)
    proc.start()
    try:
        if not here.poll(30):
            raise RuntimeError("the upstream did not start")
        assert proc.pid is not None
        yield int(here.recv()), proc.pid
    finally:
        proc.terminate()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join(5)


# -- the proxy -----------------------------------------------------------------------------------


@dataclass
class Bulk:
    megabytes: float
    turns: int
    events: int
    seconds: float


@dataclass
class Variant:
    name: str
    addon: bool = False
    flags: tuple[str, ...] = ()
    cpu: float = 0.0
    wall: float = 0.0
    lat: list[float] = field(default_factory=list)
    hwm: dict[int, float] = field(default_factory=dict)
    bulk: Bulk | None = None
    drained: float = 0.0  # seconds from the stream's start until the recorder was idle again
    worker_cpu: float = 0.0
    others_cpu: float = 0.0  # the client's and the upstream's CPU seconds during the stream
    rounds: list[float] = field(default_factory=list)  # the CPU seconds of every round
    notes: list[str] = field(default_factory=list)


@dataclass
class Proxy:
    proc: subprocess.Popen[bytes]
    port: int
    db: Path | None

    def cpu(self, pid: int | None = None) -> float:
        return process_cpu(pid or self.proc.pid)

    def worker_cpu(self) -> float:
        """CPU seconds of the proxy's child processes (the addon's recorder worker)."""
        total = 0.0
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                    total += self.cpu(int(child))
        return total

    def hwm_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM")

    def settle(self, quiet: float = 0.3, limit: float = 300.0) -> float:
        """CPU seconds once the process is idle (≤ 1 tick in `quiet` s): the writer is done."""
        last, deadline = self.cpu() + self.worker_cpu(), time.monotonic() + limit
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = self.cpu() + self.worker_cpu()
            if now - last <= 1.0 / TICKS:
                return self.cpu()
            last = now
        raise RuntimeError(f"the proxy did not go idle within {limit:.0f} s")


def process_cpu(pid: int) -> float:
    """utime + stime of a process, all its threads (/proc/PID/stat fields 14 and 15)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@contextlib.contextmanager
def proxy(variant: Variant, upstream_port: int, tmp: Path, name: str) -> Iterator[Proxy]:
    db = tmp / f"{name}.db" if variant.addon else None
    cmd = [
        str(MITMDUMP), "--mode", f"reverse:http://127.0.0.1:{upstream_port}",
        "--listen-host", "127.0.0.1", "-p", "0",
        "--set", f"confdir={tmp / 'confdir'}", "--set", "flow_detail=0", *variant.flags,
    ]  # fmt: skip
    if db is not None:
        cmd += ["-s", str(ROOT / "addon" / "mitm.py"), "--set", f"convtap_db={db}"]
        cmd += ["--set", "convtap_echo=off"]
    logfile = tmp / f"{name}.log"
    with logfile.open("wb") as log:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
        )
    try:
        port, deadline = None, time.monotonic() + 30
        while port is None and time.monotonic() < deadline and proc.poll() is None:
            found = re.search(r"listening at .*?:(\d+)", logfile.read_text("utf-8", "replace"))
            port = int(found.group(1)) if found else None
            time.sleep(0.05)
        if port is None:
            raise RuntimeError(f"mitmdump did not listen:\n{logfile.read_text()[-2000:]}")
        yield Proxy(proc, port, db)
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(90)  # the addon's done hook joins its writer
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def recorded(db: Path) -> tuple[int, int, int]:
    """(flows, events, flows with a failure of ours) the addon wrote, read after it stopped."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        flows = conn.execute("SELECT count(*) FROM flows").fetchone()[0]
        events = conn.execute("SELECT coalesce(sum(count), 0) FROM events").fetchone()[0]
        failed = conn.execute("SELECT count(*) FROM flows WHERE failure IS NOT NULL").fetchone()[0]
    return int(flows), int(events), int(failed)


# -- the client ----------------------------------------------------------------------------------


def request_body(n: int) -> bytes:
    user = {
        "id": f"user-{n:06d}", "author": {"role": "user"},
        "content": {"content_type": "text", "parts": ["continue"]},
    }  # fmt: skip
    return json.dumps({
        "action": "next", "messages": [user], "conversation_id": f"conv-{n:06d}",
        "parent_message_id": f"parent-{n:06d}", "model": "gpt-5-6-thinking",
    }).encode()  # fmt: skip


def post(conn: http.client.HTTPConnection, n: int, **bench: str) -> http.client.HTTPResponse:
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    headers.update({f"x-bench-{k}" if k != "mode" else "x-bench": v for k, v in bench.items()})
    conn.request("POST", PATH, body=request_body(n), headers=headers)
    resp = conn.getresponse()
    assert resp.status == 200, f"HTTP {resp.status}"
    assert resp.headers["content-type"].startswith("text/event-stream")
    return resp


def bulk(port: int, bodies: list[bytes], first: int, size: float) -> Bulk:
    """Turns from number `first` until `size` bytes went through; every byte checked."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    total = events = n = 0
    start = time.perf_counter()
    try:
        while total < size:
            expected = turn_body(bodies, first + n)
            resp = post(conn, first + n, mode="turn", turn=str(first + n))
            got, crc = 0, 0
            for _ in range(len(expected) + 1):  # each read returns ≥ 1 byte until the end
                data = resp.read1(1 << 16)
                if not data:
                    break
                got, crc = got + len(data), zlib.crc32(data, crc)
            assert got == len(expected), f"turn {first + n}: {got} bytes, {len(expected)} sent"
            assert crc == zlib.crc32(expected), f"turn {first + n}: the bytes differ"
            total, events, n = total + got, events + event_count(expected), n + 1
    finally:
        conn.close()
    return Bulk(total / 1e6, n, events, time.perf_counter() - start)


def latencies(port: int, events: int, gap: float = 0.001) -> list[float]:
    """Milliseconds from each paced event's send to its arrival at the client."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    stamp = re.compile(rb'^event: delta\ndata: \{"v": " (\d+)"\}$')
    out: list[float] = []
    done, buffer = False, b""
    try:
        resp = post(conn, 999_999, mode="paced", events=str(events), gap=str(gap))
        for _ in range(64 * events + 1000):  # bounded: far more reads than the stream needs
            data = resp.read1(1 << 16)
            arrived = time.monotonic_ns()
            if not data:
                break
            *complete, buffer = (buffer + data).split(b"\n\n")
            for event in complete:
                if found := stamp.match(event):
                    out.append((arrived - int(found.group(1))) / 1e6)
                done = done or event == b"data: [DONE]"
    finally:
        conn.close()
    assert done and not buffer, "the paced stream did not end with [DONE]"
    assert len(out) == events, f"{len(out)} timed events arrived, {events} sent"
    return out


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 10) - 1]


# -- the run -------------------------------------------------------------------------------------


def check_db(px: Proxy, v: Variant, flows: int, events: int) -> None:
    """After the process stopped: did the addon record every flow and event it saw?"""
    if px.db is None:
        return
    got = recorded(px.db)
    ok = got[:2] == (flows, events) and not got[2]
    v.notes.append(
        f"{'ok' if ok else 'MISMATCH'}: DB holds {got[0]} flows / {got[1]:,} events"
        f" (expected {flows} / {events:,}), {got[2]} flows with a failure"
    )


def run_cpu_latency(v: Variant, up: int, args: argparse.Namespace, tmp: Path, n: int) -> None:
    bodies = args.bodies
    with proxy(v, up, tmp, f"{v.name}-cpu{n}") as px:
        warm = bulk(px.port, bodies, 0, 1)  # one warm-up turn
        before = px.settle()
        worker_before = px.worker_cpu()
        others = time.process_time() + process_cpu(args.upstream_pid)
        start = time.perf_counter()
        v.bulk = bulk(px.port, bodies, 1, args.mb * 1e6)
        v.others_cpu = time.process_time() + process_cpu(args.upstream_pid) - others
        v.cpu, v.wall = px.settle(quiet=0.1) - before, v.bulk.seconds
        v.drained = time.perf_counter() - start
        if v.addon:
            v.worker_cpu = px.worker_cpu() - worker_before
        v.lat = latencies(px.port, args.events)
        px.settle()
    flows = warm.turns + v.bulk.turns + 1
    check_db(px, v, flows, warm.events + v.bulk.events + args.events + 6)


def run_memory(v: Variant, up: int, mb: int, bodies: list[bytes], tmp: Path) -> None:
    with proxy(v, up, tmp, f"{v.name}-mem{mb}") as px:
        b = bulk(px.port, bodies, 0, mb * 1e6)
        px.settle()
        v.hwm[mb] = px.hwm_mb()
    check_db(px, v, b.turns, b.events)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=50.0, help="MB streamed for the CPU figure")
    parser.add_argument("--events", type=int, default=2000, help="paced events for latency")
    parser.add_argument("--memory", type=int, nargs=2, default=[10, 200], metavar="MB")
    parser.add_argument("--chunk", type=int, default=16384, help="upstream write size")
    parser.add_argument("--rounds", type=int, default=3, help="each variant's best round is kept")
    parser.add_argument("--quick", action="store_true", help="2 MB, 200 events, 10/20 MB")
    args = parser.parse_args()
    if args.quick:
        args.mb, args.events, args.memory, args.rounds = 2.0, 200, [10, 20], 1
    if not MITMDUMP.exists():
        sys.exit(f"no mitmdump next to {sys.executable}")
    args.bodies = bodies = templates()
    direct = Variant("direct")
    proxies = [
        Variant("plain"),  # mitmproxy's default: buffers the whole SSE body, then sends it
        Variant("stream", flags=("--set", "stream_large_bodies=1")),  # forwards each chunk
        Variant("addon", addon=True),  # the addon's tap makes it stream
    ]
    # the same hooks doing nothing: what any addon costs, apart from convtap's own work; and the
    # same with one write per chunk before it is forwarded: the least a lossless tap costs
    empty = ("-s", str(ROOT / "bench" / "empty_addon.py"))
    hooks = Variant("hooks", flags=empty)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="proxy_bench-") as tmpdir:
        tmp = Path(tmpdir)
        floor = Variant("floor", flags=(*empty, "--set", f"bench_write_chunks={tmp / 'chunks'}"))
        with upstream(bodies, args.chunk) as (up, args.upstream_pid):
            bulk(up, bodies, 0, 1)
            direct.bulk = bulk(up, bodies, 1, args.mb * 1e6)
            direct.wall = direct.bulk.seconds
            direct.lat = latencies(up, args.events)
            for n in range(args.rounds):  # interleaved, the best round of each kept
                for v in [*proxies, hooks, floor]:
                    trial = Variant(v.name, v.addon, v.flags)
                    run_cpu_latency(trial, up, args, tmp, n)
                    (tmp / "chunks").unlink(missing_ok=True)
                    v.notes += trial.notes  # every round's database is checked
                    v.rounds.append(trial.cpu)
                    if n == 0 or trial.cpu < v.cpu:
                        v.cpu, v.wall, v.lat, v.bulk = trial.cpu, trial.wall, trial.lat, trial.bulk
                        v.drained, v.worker_cpu = trial.drained, trial.worker_cpu
                        v.others_cpu = trial.others_cpu
            for mb in args.memory:
                for v in proxies:
                    run_memory(v, up, mb, bodies, tmp)
    report(args, [direct, *proxies], hooks, floor, time.monotonic() - started)


def report(
    args: argparse.Namespace,
    variants: list[Variant],
    hooks: Variant,
    floor: Variant,
    elapsed: float,
) -> None:
    plain, stream, addon = variants[1:]
    assert addon.bulk is not None
    b, small, large = addon.bulk, *args.memory
    per_turn = statistics.mean(map(len, args.bodies)) / 1e6
    per_turn_events = round(statistics.mean(map(event_count, args.bodies)))
    print(
        f"{MITMDUMP} ({os.cpu_count()} CPUs); upstream writes {args.chunk}-byte HTTP/1.1 chunks\n"
        f"plain = mitmdump, defaults (buffers each SSE body whole); stream = mitmdump --set"
        f" stream_large_bodies=1 (forwards each chunk); addon = mitmdump -s addon/mitm.py\n"
        f"CPU: {b.megabytes:.1f} MB = {b.turns} f/conversation turns of {per_turn:.2f} MB"
        f" (~{per_turn_events:,} events), one POST each on one keep-alive connection, after a"
        f" warm-up turn;\n  utime+stime of mitmdump, each reading taken once it is idle again;"
        f" {args.rounds} interleaved rounds, each variant's least-CPU round shown\n"
        f"latency: {args.events:,} bare frames 1 ms apart in one stream, send→arrival"
        f" (CLOCK_MONOTONIC)\n"
        f"memory: a fresh proxy per size; {small}/{large} MB as that many MB of ~{per_turn:.1f} MB"
        f" turns (one POST each, generated per request): a single huge turn\n"
        f"  would make the decoder hold that turn's whole message state by design"
    )
    lat = {v.name: (percentile(v.lat, 50), percentile(v.lat, 99)) for v in variants}
    ratio = addon.cpu / stream.cpu if stream.cpu else float("inf")
    p99 = lat["addon"][1] - lat["stream"][1]
    growth = {v.name: v.hwm[large] - v.hwm[small] for v in variants[1:]}
    bounded = growth["addon"] <= growth["stream"] + 16

    def cells(fmt: str, values: list[float | None]) -> list[str]:
        return ["-" if x is None else format(x, fmt) for x in values]

    rows = [
        ("proxy CPU, utime+stime (s)", *cells(".2f", [None, plain.cpu, stream.cpu, addon.cpu]),
         f"{ratio:.2f}x", "≤ 1.10x", ratio <= 1.10),
        ("  wall time of that stream (s)", *cells(".2f", [v.wall for v in variants]),
         f"{addon.wall / stream.wall:.2f}x", "", None),
        ("  throughput (MB/s)", *cells(".1f", [b.megabytes / v.wall for v in variants]),
         "", "", None),
        ("event latency p50 (ms)", *cells(".3f", [lat[v.name][0] for v in variants]),
         f"{lat['addon'][0] - lat['stream'][0]:+.3f} ms", "", None),
        ("event latency p99 (ms)", *cells(".3f", [lat[v.name][1] for v in variants]),
         f"{p99:+.3f} ms", "≤ +1 ms", p99 <= 1.0),
    ]  # fmt: skip
    line_rate = b.megabytes / addon.wall
    drain = b.megabytes / addon.drained
    rows += [
        ("recorder: MB/s until it had recorded all", "-", "-", "-", f"{drain:.1f}",
         f"{drain / line_rate:.2f}x rate", "≥ 1.00x", drain >= line_rate * 0.97),
        ("  recorder CPU for that stream (s)", "-", "-", "-", f"{addon.worker_cpu:.2f}",
         f"{b.megabytes / addon.worker_cpu:.1f} MB/cpu-s", "", None),
    ]  # fmt: skip
    for mb in (small, large):
        rows.append(
            (f"peak RSS VmHWM, {mb} MB stream (MB)", "-",
             *cells(".1f", [v.hwm[mb] for v in variants[1:]]),
             f"{addon.hwm[mb] - stream.hwm[mb]:+.1f} MB", "", None)
        )  # fmt: skip
    rows.append(
        (f"  VmHWM growth {small}→{large} MB (MB)", "-",
         *cells("+.1f", [growth[v.name] for v in variants[1:]]), "", "bounded", bounded)
    )  # fmt: skip
    head = ("", "direct", "plain", "stream", "addon", "addon vs stream", "target", "")
    widths = (36, 7, 7, 7, 7, 15, 8, 6)
    print(
        " ".join(
            f"{h:>{w}}" if i else f"{h:{w}}"
            for i, (h, w) in enumerate(zip(head, widths, strict=True))
        )
    )
    for label, *middle, verdict in rows:
        mark = "" if verdict is None else ("meets" if verdict else "MISSES")
        line = [f"{label:{widths[0]}}"]
        line += [f"{c:>{w}}" for c, w in zip(middle, widths[1:-1], strict=True)]
        print(" ".join([*line, f"{mark:>{widths[-1]}}"]))
    print(
        f"an addon with the same hooks doing nothing (bench/empty_addon.py): CPU {hooks.cpu:.2f} s,"
        f" {hooks.cpu / stream.cpu:.2f}x stream: the rest of the addon's cost is convtap's own"
        f" work ({addon.cpu - hooks.cpu:+.2f} s)\n"
        f"the same hooks writing each chunk to a file before forwarding it (one writev, as the"
        f" journal does): CPU {floor.cpu:.2f} s, {floor.cpu / stream.cpu:.2f}x stream: the least"
        f" a tap costs that loses nothing when the proxy is killed; the addon is"
        f" {addon.cpu / floor.cpu:.2f}x that\n"
        f"addon vs plain (buffered): CPU {addon.cpu / plain.cpu:.2f}x; plain's latency is the"
        f" whole body's, since it forwards nothing until the end\n"
        f"recorder rate = the stream's MB over the time from its first byte until the recorder"
        f" process (fed by the journal) was idle again; 'rate' = the proxy's line rate"
    )
    # What keeping up would take: the CPU the machine had left while the addon's stream ran.
    cores = os.cpu_count() or 1
    left = cores * addon.wall - addon.cpu - addon.others_cpu
    print(
        f"the machine while the addon's stream ran ({addon.wall:.2f} s x {cores} CPUs ="
        f" {cores * addon.wall:.2f} CPU-s): proxy {addon.cpu:.2f}, client and upstream"
        f" {addon.others_cpu:.2f}, left {left:.2f} CPU-s; to keep up the recorder may take"
        f" {left / b.megabytes * 1000:.1f} ms of CPU per MB, it took"
        f" {addon.worker_cpu / b.megabytes * 1000:.1f}"
    )
    print(
        "proxy CPU of every round (s), in the order run; each ratio above takes each variant's"
        " least:"
    )
    for v in (stream, hooks, floor, addon):
        print(f"  {v.name:7} {' '.join(f'{c:.2f}' for c in v.rounds)}")
    print("bounded = addon growth ≤ stream growth + 16 MB; the addon's databases:")
    for note in addon.notes:
        print(f"  {note}")
    print(f"every body verified byte for byte (length + CRC32); the run took {elapsed:.0f} s")


if __name__ == "__main__":
    main()
