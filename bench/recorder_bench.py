"""The recorder's own cost: a journal of turns recorded into a database, against the fair floor
of the same stream, measured in one run.

    python bench/recorder_bench.py [--mb 50] [--repeat 3] [--soak 20000] [--instructions MB]

1. The recorder: --mb of decode_bench's turns are journaled (as the proxy does, 16 KiB chunks),
   then `JournalConsumer` (the recorder process's loop) records them: framing, delta v1,
   redaction, the rules, the rows and SQLite. Its CPU per MB of stream (the least of --repeat
   recordings), the full-text index's catch-up apart (the recorder makes it when idle, or when it
   stops: not on the recording path), and the size of the database per byte of traffic. Each
   turn is a conversation of its own, whose echo of 24 earlier messages is new: the worst case.
   Then the same turns as one conversation going on, as a session is: each echoes the earlier
   messages the recorder has seen already (decoded and kept raw again, not written again).
2. The fair floor of each stream, in the same run: orjson of every data line, the compression of
   the stream as raw events are stored, SQLite storing the same rows without the full-text index
   (issue 35); the recorder is given as a ratio to it.
3. --instructions MB: the same for MB of turns under valgrind's callgrind, in instructions per
   MB (stable on a shared machine, where CPU time is not).
4. Soak: --soak small turns (a call each) through the same recorder, with its process memory
   (VmRSS) sampled after each quarter: the first quarter against the last must stay flat.
5. The machine: how many processes' worth of Python it runs at once (two spinning processes
   against one), which bounds what splitting the recorder across processes could give.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import orjson

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the checkout's `bench` importable
    sys.path.insert(0, str(ROOT))

from convtap.contract.registry import registry  # noqa: E402
from convtap.ingest.capture import import_into  # noqa: E402
from convtap.journal.events import (  # noqa: E402
    BodyChunk,
    RecorderEvent,
    RequestSeen,
    ResponseEnded,
    ResponseStarted,
)
from convtap.journal.segments import JournalWriter, journal_dir  # noqa: E402
from convtap.record.consumer import JournalConsumer  # noqa: E402
from convtap.store.database import close, connect, event_bytes  # noqa: E402
from convtap.store.schema import TABLES  # noqa: E402

from bench.decode_bench import baseline, generate, sse  # noqa: E402
from bench.instructions import counted, measured, valgrind  # noqa: E402

try:  # how raw events are compressed (an older checkout, for an A/B run: zlib level 1)
    from convtap.store.compact import CODEC, pack
except ImportError:
    import zlib

    CODEC = "zlib level 1"

    def pack(raw: bytes) -> bytes:
        return zlib.compress(raw, 1)


PATH = "/backend-api/f/conversation"
CPU_TARGET = 20.0  # issue 35: ms of the recorder's CPU per MB of stream, at most (worst case)
GOING_TARGET = 17.0  # issue 35: the same for one conversation going on
FLOOR_TARGET = 1.5  # issue 35: the recorder against the fair floor of the same stream, at most
SIZE_TARGET = 1.0  # issue 24: bytes of database per byte of traffic, at most
STREAM = (("content-type", "text/event-stream"),)


class Recorded(NamedTuple):
    """One recording's parts: (seconds, CPU seconds) each."""

    recording: tuple[float, float]
    index: tuple[float, float]
    closing: tuple[float, float]

    @property
    def recording_cpu(self) -> float:
        return self.recording[1]

    @property
    def index_cpu(self) -> float:
        return self.index[1]

    @property
    def closing_cpu(self) -> float:
        return self.closing[1]


def run_now(part: Callable[[], None]) -> None:
    part()


def turn_events(
    n: int, body: bytes, chunk: int = 16384, conversation: str | None = None
) -> list[RecorderEvent]:
    conversation = conversation or f"conv-{n:06d}"
    request = json.dumps({"action": "next", "conversation_id": conversation, "messages": [],
                          "model": "m", "parent_message_id": f"p-{n}"}).encode()  # fmt: skip
    flow = f"flow-{n:06d}"
    events: list[RecorderEvent] = [
        RequestSeen(flow, "POST", "https://x" + PATH, "x", PATH, (), request, float(n)),
        ResponseStarted(flow, 200, STREAM),
    ]
    events += [BodyChunk(flow, body[i : i + chunk], float(n)) for i in range(0, len(body), chunk)]
    events.append(ResponseEnded(flow, 200, STREAM, None, "complete", float(n)))
    return events


def one_conversation(bodies: list[bytes]) -> list[bytes]:
    """The same turns as one conversation going on: each echoes the same earlier messages (the
    first turn's, which the recorder has then seen: an unchanged echo is not written again),
    then streams its own answer and call."""
    first = bodies[0]
    head = first[: first.index(b'"id": "conv-000000-a"')]
    head = head[: head.rindex(b"event: delta\n")]
    out = [first]
    for n, body in enumerate(bodies[1:], 1):
        answer = body[body.rindex(b"event: delta\n", 0, body.index(b'"id": "conv-%06d-a"' % n)) :]
        out.append(head + answer.replace(b'conv-%06d"' % n, b'conv-000000"'))
    return out


def journaled(db: Path, bodies: list[bytes], conversation: str | None = None) -> None:
    """The turns written into the journal beside `db`, as the proxy writes them."""
    journal = JournalWriter(journal_dir(db))
    for n, body in enumerate(bodies):
        for event in turn_events(n, body, conversation=conversation):
            journal.append(event)
    journal.close()


def record(db: Path, count: Callable[[Callable[[], None]], None] = run_now) -> Recorded:
    """The recorder consuming the journal beside `db` to the end, in three timed parts: the
    recording itself (every row committed), the full-text index caught up (which the recorder
    does when it is idle, or stops), and closing the capture (its checkpoint). `count` runs
    each part (`instructions.measured`, under callgrind)."""
    registry()  # the rules, read once per process (0.1 s): not a cost per MB
    consumer = JournalConsumer(str(db), redact=True, echo="off")
    parts = [
        lambda: consumer.run(lambda timeout: True),
        consumer.writer.index,
        consumer.close,
    ]
    times = []
    for part in parts:
        start, cpu = time.perf_counter(), time.process_time()
        count(part)
        times.append((time.perf_counter() - start, time.process_time() - cpu))
    return Recorded(*times)


def best_record(
    tmp: Path, bodies: list[bytes], repeat: int, conversation: str | None = None
) -> tuple[Recorded, Path]:
    """The least-CPU of `repeat` recordings of the turns, each into a new capture (the last
    one kept, for its size and the floor)."""
    runs = []
    for n in range(repeat):
        db = tmp / f"rec-{conversation or 'each'}-{n}.db"
        journaled(db, bodies, conversation)
        runs.append(record(db))
    return min(runs, key=lambda r: r.recording_cpu), db


def database_bytes(db: Path) -> tuple[int, dict[str, int]]:
    """The capture's size on disk (with its WAL), and the bytes of its pages by what holds them
    (SQLite's `dbstat`, where SQLite has it)."""
    size = sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())
    parts: dict[str, int] = {}
    with contextlib.closing(sqlite3.connect(db)) as conn:
        try:  # each table with its indexes
            rows = conn.execute("SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize) FROM dbstat d "
                                "LEFT JOIN sqlite_master m ON m.name = d.name "
                                "GROUP BY 1").fetchall()  # fmt: skip
        except sqlite3.Error:
            rows = []
    for name, pages in rows:
        part = "full-text index" if name.startswith("messages_fts") else name
        part = part if pages >= size / 50 else "the rest"
        parts[part] = parts.get(part, 0) + pages
    return size, parts


def real_captures(tmp: Path) -> tuple[int, int, dict[str, int]]:
    """The captures under captures/examples imported into one database: (the traffic it holds,
    its size on disk, its pages by what holds them). The traffic is what was on the wire and
    kept: each flow's headers and bodies, and its raw events' bytes."""
    files = sorted(
        p for p in (ROOT / "captures" / "examples").rglob("*")
        if p.suffix in (".har", ".sse") and not p.name.endswith(".resume.sse")
    )  # fmt: skip
    db = tmp / "examples.db"
    import_into(db, files)
    columns = ("request_headers", "request_body", "response_headers", "response_body")
    kept = " + ".join(f"coalesce(length(CAST({c} AS BLOB)), 0)" for c in columns)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT data, raw FROM events")
        events = sum(len(event_bytes(dict(row))) for row in rows)
        (flows,) = conn.execute(f"SELECT sum({kept}) FROM flows").fetchone()
    stored, parts = database_bytes(db)
    return events + flows, stored, parts


def size_line(label: str, traffic: float, stored: float, parts: dict[str, int]) -> str:
    """The database's bytes per byte of traffic against the target, with what holds them."""
    ratio = stored / traffic
    held = sorted(parts.items(), key=lambda kv: -kv[1])
    return (
        f"{label}: {stored / 1e6:.2f} MB for {traffic / 1e6:.2f} MB of traffic, {ratio:.2f} bytes "
        f"per byte ({'meets' if ratio <= SIZE_TARGET else 'MISSES'} the {SIZE_TARGET} target): "
        + ", ".join(f"{name} {pages / traffic:.2f}" for name, pages in held)
    )


def floor_parts(bodies: list[bytes], recorded: Path, tmp: Path) -> list[Callable[[], None]]:
    """The fair floor under the recorder, in three parts: what the libraries it is built on take
    for the same stream with no work of convtap's own around them. orjson of every data line
    (the least any decoder in Python does), the compression of the stream in 16 KiB pieces as
    raw events are stored (`compact.pack`), and SQLite storing the recorded capture's rows
    again, without the full-text index (copied table by table inside SQLite, no Python per row,
    in one transaction, then the capture closed: its checkpoint)."""
    loads = baseline(orjson.loads)
    db = connect(tmp / f"floor-{recorded.stem}.db")
    for trigger in ("messages_fts_ai", "messages_fts_au", "messages_fts_ad"):
        db.conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    db.conn.execute("ATTACH DATABASE ? AS recorded", (str(recorded),))

    def compress() -> None:
        for body in bodies:
            for i in range(0, len(body), 16384):
                pack(body[i : i + 16384])

    def store() -> None:
        with db.conn:
            for table in TABLES:
                db.conn.execute(f"INSERT INTO main.[{table}] SELECT * FROM recorded.[{table}]")
        db.conn.execute("DETACH DATABASE recorded")
        close(db)

    def parse() -> None:
        loads(bodies)

    return [parse, compress, store]


def floor_cpu(bodies: list[bytes], recorded: Path, tmp: Path) -> list[float]:
    """CPU seconds of each part of the fair floor."""
    spent = []
    for part in floor_parts(bodies, recorded, tmp):
        cpu = time.process_time()
        part()
        spent.append(time.process_time() - cpu)
    return spent


def secret_scans(bodies: list[bytes]) -> tuple[float, float]:
    """MB/s of detect-secrets' own scanner (its default plugins, line by line, on 1 MB) and of
    convtap's redaction check of the same stream (every chunk, as the recorder looks at it)."""
    from convtap.redact.patterns import hints, value_hints
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    sample = b"".join(bodies).decode()
    lines = sample[:1_000_000].split("\n")
    with default_settings():
        start = time.perf_counter()
        for line in lines:
            list(scan_line(line))
        theirs = 1.0 / (time.perf_counter() - start)
    start = time.perf_counter()
    for i in range(0, len(sample), 16384):
        chunk = sample[i : i + 16384]
        hints(chunk)
        value_hints(chunk)
    ours = len(sample) / 1e6 / (time.perf_counter() - start)
    return theirs, ours


def spin(n: int = 3_000_000) -> float:
    """Seconds of a pure-Python loop (CPU only)."""
    start, total = time.perf_counter(), 0
    for i in range(n):
        total += i * i
    return time.perf_counter() - start


def parallel_capacity() -> float:
    """How many processes' worth of Python this machine runs at once: two spinning processes
    against one alone (2.0 on two free cores). The recorder cannot gain from a second process
    beyond it (an SQLite writer process was tried: it did not record faster here)."""
    alone = min(spin() for _ in range(3))
    with multiprocessing.get_context("fork").Pool(2) as pool:
        together = min(max(pool.map(spin, [3_000_000] * 2)) for _ in range(3))
    return 2 * alone / together


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def small_turn(rng: random.Random, n: int) -> bytes:
    """A short turn with a local call: what a long session is made of."""
    conv = f"soak-{n:06d}"
    call = {"id": f"{conv}-call", "author": {"role": "assistant", "name": None, "metadata": {}},
            "content": {"content_type": "code", "language": "json", "text": ""},
            "status": "in_progress", "recipient": "local.alefita_way", "channel": "commentary",
            "metadata": {}, "end_turn": None, "weight": 1, "create_time": 1.0}  # fmt: skip
    parts = [
        sse('"v1"', "delta_encoding"),
        sse({"p": "", "o": "add", "v": {"message": call, "conversation_id": conv}}, "delta"),
        sse({"p": "/message/content/text", "o": "append", "v": '{"message": "'}, "delta"),
    ]
    parts += [sse({"v": rng.choice(["a ", "b ", "c "])}, "delta") for _ in range(40)]
    parts += [sse({"v": '"}'}, "delta"),
              sse({"p": "/message/status", "o": "replace", "v": "finished_successfully"},
                  "delta"),
              sse({"type": "message_stream_complete", "conversation_id": conv}),
              sse("[DONE]")]  # fmt: skip
    return "".join(parts).encode()


def soak(tmp: Path, turns: int) -> list[float]:
    """Memory of the recorder after each quarter of `turns` small turns."""
    db = tmp / "soak.db"
    rng = random.Random(3)
    consumer = JournalConsumer(str(db), redact=True, echo="off")
    journal = JournalWriter(journal_dir(db))
    samples = []
    quarter = max(turns // 4, 1)
    for n in range(turns):
        for event in turn_events(n, small_turn(rng, n)):
            journal.append(event)
        if (n + 1) % 200 == 0:
            while consumer.catch_up():
                pass
        if (n + 1) % quarter == 0:
            samples.append(rss_mb())
    journal.close()
    consumer.run(lambda timeout: True)
    consumer.close()
    return samples


def counted_part(args: argparse.Namespace) -> None:
    """Under callgrind (`instructions.counted`): one stream recorded, then its fair floor, each
    part counted apart."""
    bodies = generate(args.mb)
    conversation = None
    if args.part == "going":
        bodies, conversation = one_conversation(bodies), "conv-000000"
    with tempfile.TemporaryDirectory(prefix="recorder_bench-") as tmp:
        db = Path(tmp) / "counted.db"
        journaled(db, bodies, conversation)
        record(db, measured)
        for part in floor_parts(bodies, db, Path(tmp)):
            measured(part)


def per_mb(values: Sequence[float], size: float, scale: float) -> list[float]:
    return [value * scale / size for value in values]


def ratio_lines(label: str, unit: str, recorder: float, index: float, floor: list[float],
                target: float | None) -> list[str]:  # fmt: skip
    """A stream's recorder against its fair floor, per MB of stream, in `unit`."""
    fair = sum(floor)
    ratio = recorder / fair
    verdict = "" if target is None else (
        f"; {'meets' if recorder <= target else 'MISSES'} the {target:.0f} {unit} target"
    )  # fmt: skip
    return [
        f"{label}: recorder {recorder:.1f} {unit} per MB{verdict}",
        f"  fair floor: orjson per data line {floor[0]:.1f} + {CODEC} {floor[1]:.1f} + SQLite "
        f"rows without the full-text index {floor[2]:.1f} = {fair:.1f}: recorder "
        f"{ratio:.2f}x it ({'meets' if ratio <= FLOOR_TARGET else 'MISSES'} the "
        f"{FLOOR_TARGET}x target)",
        f"  full-text index, caught up when the recorder is idle or stops: {index:.1f} {unit} "
        "per MB (not on the recording path)",
    ]


def cpu_report(tmp: Path, bodies: list[bytes], repeat: int) -> None:
    """Both streams recorded (best of `repeat`, CPU time), each against its fair floor."""
    size = sum(map(len, bodies)) / 1e6
    going = one_conversation(bodies)
    going_size = sum(map(len, going)) / 1e6
    worst, worst_db = best_record(tmp, bodies, repeat)
    on, going_db = best_record(tmp, going, repeat, "conv-000000")
    for label, rec, db, stream, mb, target in (
        ("each turn a new conversation (worst case)", worst, worst_db, bodies, size, CPU_TARGET),
        ("one conversation going on", on, going_db, going, going_size, GOING_TARGET),
    ):
        floors = [floor_cpu(stream, db, tmp / f"{db.stem}-{n}") for n in range(repeat)]
        floor = [min(f[i] for f in floors) for i in range(3)]
        recorder = rec.recording_cpu + rec.closing_cpu
        ms = per_mb([recorder, rec.index_cpu, *floor], mb, 1000)
        for line in ratio_lines(f"CPU, {label}, best of {repeat}", "ms", ms[0], ms[1], ms[2:],
                                target):  # fmt: skip
            print(line)
        stored, parts = database_bytes(db)
        print("  " + size_line("database", mb * 1e6, stored, parts))


def instruction_report(megabytes: float) -> None:
    """Both streams recorded under callgrind, each against its fair floor: instructions per MB."""
    if valgrind() is None:
        print("instruction counts: valgrind is not installed (apt-get install valgrind): skipped")
        return
    bodies = generate(megabytes)
    sizes = {"worst": sum(map(len, bodies)) / 1e6,
             "going": sum(map(len, one_conversation(bodies))) / 1e6}  # fmt: skip
    for part, label in (("worst", "each turn a new conversation"),
                        ("going", "one conversation going on")):  # fmt: skip
        counts = counted(Path(__file__), "--part", part, "--mb", str(megabytes))
        assert counts is not None and len(counts) == 6, counts
        recording, index, closing, *floor = per_mb(counts, sizes[part], 1e-6)
        title = f"instructions (callgrind, {sizes[part]:.1f} MB), {label}"
        for line in ratio_lines(title, "M", recording + closing, index, floor, None):
            print(line)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=3, help="recordings, the least CPU kept")
    parser.add_argument("--soak", type=int, default=20000, help="small turns for the soak")
    parser.add_argument(
        "--instructions",
        type=float,
        default=0.0,
        metavar="MB",
        help="also count instructions (callgrind) recording MB of turns",
    )
    parser.add_argument("--part", choices=("worst", "going"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        counted_part(args)
        return
    bodies = generate(args.mb)
    size = sum(map(len, bodies)) / 1e6
    print(f"{size:.1f} MB of turns ({len(bodies)} turns), 16 KiB chunks")
    with tempfile.TemporaryDirectory(prefix="recorder_bench-") as tmp:
        cpu_report(Path(tmp), bodies, args.repeat)
        if args.instructions:
            instruction_report(args.instructions)
        if args.soak:
            samples = soak(Path(tmp), args.soak)
            growth = samples[-1] - samples[0]
            print(f"soak: {args.soak:,} small turns with a call each; recorder RSS after each "
                  "quarter: " + ", ".join(f"{s:.1f}" for s in samples) + f" MB; last vs first "
                  f"{growth:+.1f} MB " + ("(flat)" if growth <= 16 else "(GROWS)"))  # fmt: skip
        examples = real_captures(Path(tmp))
    fixtures = "database of captures/examples (small fixtures: rows outweigh traffic), imported"
    print(size_line(fixtures, *examples))
    theirs, ours = secret_scans(bodies)
    print(f"secret scanning: detect-secrets' scanner {theirs:.2f} MB/s; convtap's check of the "
          f"same text {ours:.0f} MB/s ({ours / theirs:.0f}x)")  # fmt: skip
    capacity = parallel_capacity()
    print(f"this machine runs {capacity:.2f} processes' worth of Python at once "
          f"({os.cpu_count()} CPUs): a second process buys the recorder at most that")  # fmt: skip


if __name__ == "__main__":
    main()
