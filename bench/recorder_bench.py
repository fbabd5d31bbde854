"""The recorder's own throughput: a journal of turns recorded into a database, in one run against
the same bytes through the decoder alone and through json.loads alone.

    python bench/recorder_bench.py [--mb 50] [--soak 20000]

1. Throughput: --mb of decode_bench's turns are journaled (as the proxy does, 16 KiB chunks),
   then `JournalConsumer` (the recorder process's loop) records them: framing, delta v1,
   redaction, the rules, the rows and SQLite. Compare with the proxy's line rate from
   proxy_bench (the recorder must keep up with it). Its CPU per MB of stream, and the size of the
   database it made per byte of traffic (with what holds the bytes). Each turn is a conversation
   of its own, whose echo of 24 earlier messages is new: the worst case. Then the same turns as
   one conversation going on, as a session is: each echoes the earlier messages the recorder has
   seen already (decoded and kept raw again, not written again).
2. Soak: --soak small turns (a call each) through the same recorder, with its process memory
   (VmRSS) sampled after each quarter: the first quarter against the last must stay flat.
3. The machine: how many processes' worth of Python it runs at once (two spinning processes
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
import zlib
from pathlib import Path

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
from convtap.store.database import connect, event_bytes, index_text  # noqa: E402
from convtap.store.schema import TABLES  # noqa: E402
from convtap.wire.turn import TurnDecoder  # noqa: E402

from bench.decode_bench import baseline, generate, sse  # noqa: E402

PATH = "/backend-api/f/conversation"
CPU_TARGET = 20.0  # issue 24: ms of the recorder's CPU per MB of stream, at most
SIZE_TARGET = 1.0  # issue 24: bytes of database per byte of traffic, at most
STREAM = (("content-type", "text/event-stream"),)


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


def record(db: Path, bodies: list[bytes], conversation: str | None = None) -> tuple[float, float]:
    """Journal the turns, then time the recorder consuming them to the end: (seconds, CPU
    seconds of this process)."""
    journal = JournalWriter(journal_dir(db))
    for n, body in enumerate(bodies):
        for event in turn_events(n, body, conversation=conversation):
            journal.append(event)
    journal.close()
    registry()  # the rules, read once per process (0.1 s): not a cost per MB
    start, cpu = time.perf_counter(), time.process_time()
    consumer = JournalConsumer(str(db), redact=True, echo="off")
    consumer.run(lambda timeout: True)
    consumer.close()
    return time.perf_counter() - start, time.process_time() - cpu


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


def decoder_only(bodies: list[bytes]) -> float:
    start = time.perf_counter()
    for body in bodies:
        turn = TurnDecoder()
        for i in range(0, len(body), 16384):
            turn.feed(body[i : i + 16384])
        turn.close()
    return time.perf_counter() - start


def library_floor(bodies: list[bytes], recorded: Path, tmp: Path) -> tuple[float, float, float]:
    """CPU seconds the libraries alone take for what the recorder makes of `bodies`: (the
    decoder with nothing around it, zlib level 1 over the stream in 16 KiB pieces, SQLite
    storing the recorded capture's rows again). The last is copied table by table inside
    SQLite (no Python per row), in one transaction, then the full-text index caught up and the
    capture closed (its checkpoint): less than any writer of the same rows can take."""
    cpu = time.process_time()
    decoder_only(bodies)
    decoding = time.process_time() - cpu
    cpu = time.process_time()
    for body in bodies:
        for i in range(0, len(body), 16384):
            zlib.compress(body[i : i + 16384], 1)
    compressing = time.process_time() - cpu
    db = connect(tmp / "floor.db")
    conn = db.conn
    conn.execute("ATTACH DATABASE ? AS recorded", (str(recorded),))
    cpu = time.process_time()
    with conn:
        for table in TABLES:
            conn.execute(f"INSERT INTO main.[{table}] SELECT * FROM recorded.[{table}]")
    conn.execute("DETACH DATABASE recorded")
    index_text(db)
    conn.close()
    return decoding, compressing, time.process_time() - cpu


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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--soak", type=int, default=20000, help="small turns for the soak")
    args = parser.parse_args()
    bodies = generate(args.mb)
    size = sum(map(len, bodies)) / 1e6
    with tempfile.TemporaryDirectory(prefix="recorder_bench-") as tmp:
        loads_floor = baseline(json.loads)
        start = time.perf_counter()
        loads_floor(bodies)
        floor = time.perf_counter() - start
        decoding = decoder_only(bodies)
        recording, recording_cpu = record(Path(tmp) / "bench.db", bodies)
        stored, parts = database_bytes(Path(tmp) / "bench.db")
        least = library_floor(bodies, Path(tmp) / "bench.db", Path(tmp))
        going_on = one_conversation(bodies)
        going_size = sum(map(len, going_on)) / 1e6
        _, going_cpu = record(Path(tmp) / "going.db", going_on, "conv-000000")
        going_stored, going_parts = database_bytes(Path(tmp) / "going.db")
        examples = real_captures(Path(tmp))
        samples = soak(Path(tmp), args.soak)
        theirs, ours = secret_scans(bodies)
        capacity = parallel_capacity()
    print(f"{size:.1f} MB of turns ({len(bodies)} turns), 16 KiB chunks, one run")
    print(f"{'':44} {'seconds':>8} {'MB/s':>7} {'vs json.loads':>14}")
    for label, seconds in (
        ("json.loads of every data line (floor)", floor),
        ("decoder alone (TurnDecoder)", decoding),
        ("recorder: journal -> SQLite, redacted, audited", recording),
    ):
        print(f"{label:44} {seconds:8.2f} {size / seconds:7.1f} {floor / seconds:13.2f}x")
    per_mb = recording_cpu * 1000 / size
    print(
        f"recorder CPU: {per_mb:.1f} ms per MB of stream "
        f"({'meets' if per_mb <= CPU_TARGET else 'MISSES'} the {CPU_TARGET:.0f} ms target)"
    )
    floor_ms = [seconds * 1000 / size for seconds in least]
    print(
        f"the least the libraries take for it, with no redaction, rules or rows of ours: "
        f"decoder {floor_ms[0]:.1f} + zlib {floor_ms[1]:.1f} + SQLite storing its rows "
        f"{floor_ms[2]:.1f} = {sum(floor_ms):.1f} ms per MB "
        f"({'under' if sum(floor_ms) <= CPU_TARGET else 'OVER'} the {CPU_TARGET:.0f} ms target)"
    )
    print(size_line("database of this stream", size * 1e6, stored, parts))
    going_per_mb = going_cpu * 1000 / going_size
    print(
        f"the same turns as one conversation going on (its echoes recorded once): recorder CPU "
        f"{going_per_mb:.1f} ms per MB ({'meets' if going_per_mb <= CPU_TARGET else 'MISSES'} "
        f"the {CPU_TARGET:.0f} ms target)"
    )
    print(size_line("database of it", going_size * 1e6, going_stored, going_parts))
    fixtures = "database of captures/examples (small fixtures: rows outweigh traffic), imported"
    print(size_line(fixtures, *examples))
    print(f"secret scanning: detect-secrets' scanner {theirs:.2f} MB/s; convtap's check of the "
          f"same text {ours:.0f} MB/s ({ours / theirs:.0f}x)")  # fmt: skip
    print(f"this machine runs {capacity:.2f} processes' worth of Python at once "
          f"({os.cpu_count()} CPUs): a second process buys the recorder at most that")  # fmt: skip
    if samples:  # --soak 0: none
        first, last = samples[0], samples[-1]
        print(f"soak: {args.soak:,} small turns with a call each; recorder RSS after each quarter: "
              + ", ".join(f"{s:.1f}" for s in samples) + f" MB; last vs first {last - first:+.1f} "
              + "MB " + ("(flat)" if last - first <= 16 else "(GROWS)"))  # fmt: skip


if __name__ == "__main__":
    main()
