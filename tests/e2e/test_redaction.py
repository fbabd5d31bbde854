"""Redaction by value, live: `convtap record` in front of an upstream that streams a secret of
every kind in a random form and random chunks (`tests/redact/streams.py`), one stream pausing in
the middle of its key; after Ctrl-C the capture holds no 8-character window of any of them, and
every message's text is its text with the secret replaced."""

from __future__ import annotations

import http.client
import json
import random
import signal
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from convtap.journal.segments import journal_dir
from convtap.record.local import redactor

from tests.harness import answering_upstream, capture_bytes, record
from tests.redact import streams
from tests.redact.test_stream import assert_nowhere, secret_of

PAUSE = 1.5  # seconds the stream stops in the middle of its key
KEY = "ghp_Q7wEr9TyU2iOp4AsD6fGh8JkL0zXc3VbN5mQ"


def paused_stream() -> streams.Generated:
    """A GitHub token in 4-character bare frames, the stream stopping after 29 of its 40."""
    message = streams._message("m-paused", ["my key is "])
    head = ['event: delta_encoding\ndata: "v1"\n\n', "event: delta\ndata: " + json.dumps(
        {"p": "", "o": "add", "v": {"message": message, "conversation_id": "conv-p"}, "c": 0})
        + "\n\n", "event: delta\ndata: " + json.dumps(
        {"p": streams.TEXT_PATH, "o": "append", "v": KEY[:1]}) + "\n\n"]  # fmt: skip
    frames = [f"event: delta\ndata: {json.dumps({'v': KEY[i : i + 4]})}\n\n"
              for i in range(1, len(KEY), 4)]  # fmt: skip
    first = "".join(head + frames[:7]).encode()  # 29 characters of it
    rest = "".join([*frames[7:], 'event: delta\ndata: {"v": " ok"}\n\n', "data: [DONE]\n\n"])
    return streams.Generated([first, b"PAUSE", rest.encode()],
                             {"m-paused": f"my key is {KEY} ok"})  # fmt: skip


def paced(bodies: list[streams.Generated]) -> Callable[[int], Iterator[bytes]]:
    """Stream k's chunks as generated, 0.5 ms apart (a `PAUSE` stops it for PAUSE seconds)."""

    def pieces(n: int) -> Iterator[bytes]:
        for chunk in bodies[n].chunks:
            if chunk == b"PAUSE":
                time.sleep(PAUSE)
                continue
            yield chunk
            time.sleep(0.0005)

    return pieces


def test_a_live_recording_keeps_no_secret_of_any_kind_in_any_form(tmp_path: Path) -> None:
    kinds = sorted(streams.KINDS)
    parts, bodies = [KEY], [paused_stream()]
    for n, kind in enumerate(kinds):
        secret, part = secret_of(kind, random.Random(n))
        parts.append(part)
        bodies.append(streams.delta_stream(random.Random(1000 + n), secret, f"-{n}"))
    db = tmp_path / "live.db"
    with answering_upstream(paced(bodies)) as port, record(db, port, tmp_path) as rec:
        for n in range(len(bodies)):
            conn = http.client.HTTPConnection("127.0.0.1", rec.port, timeout=30)
            conn.request("POST", "/backend-api/f/conversation", body=json.dumps({"n": n}),
                         headers={"content-type": "application/json"})  # fmt: skip
            assert conn.getresponse().read() == bodies[n].body.replace(b"PAUSE", b"")
            conn.close()
        rec.proc.send_signal(signal.SIGINT)
        out = rec.wait(120)
    assert rec.proc.returncode == 0, out[-2000:]
    assert not journal_dir(db).exists()  # (it held the bytes in clear: gone once recorded)
    for part in parts:
        assert_nowhere(part, capture_bytes(db))
    scrub = redactor().scrub
    with sqlite3.connect(db) as conn:
        stored = dict(conn.execute("SELECT id, text FROM messages"))
    expected = {mid: scrub(text) for body in bodies for mid, text in body.texts.items()}
    assert stored == expected
