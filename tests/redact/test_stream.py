"""Redaction by value, mapped to the raw bytes (docs/guarantees.md, "It never stores a secret in
clear"): for streams of every form the wire allows (`tests/redact/streams.py`: random ops,
channels, interleavings, cuts, chunkings; the Responses API over SSE and WebSocket mode; a turn
handed off to the user socket), carrying every secret kind the docs list, no 8-character window
of the secret is anywhere in the capture (database, WAL, every raw event), in `convtap decode`'s
output, the HAR export or the report; every message's stored text is its decoded text with the
secret replaced, and the stored raw events decode to exactly that text (the other message's text
whole: no message's text is ever taken by another)."""

from __future__ import annotations

import io
import json
import random
import sqlite3
import tempfile
from pathlib import Path

import pytest
from convtap.export.har import export_har
from convtap.ingest.capture import import_into
from convtap.ingest.decoding import decode
from convtap.ingest.replay import reprocess_db
from convtap.journal.events import (
    BodyChunk,
    RequestSeen,
    ResponseEnded,
    ResponseStarted,
    WebSocketEnded,
    WebSocketMessage,
)
from convtap.record.local import LocalRecorder, redactor
from convtap.redact.patterns import find_secrets
from convtap.report.page import write_report
from convtap.wire.responses import decode_responses
from convtap.wire.turn import decode_turn, message_text
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from tests.harness import capture_bytes, events_sql
from tests.redact import streams
from tests.redact.streams import KINDS, Generated, cut_into
from tests.redact.streams import TEXT_PATH as TEXT
from tests.report.test_report import report_text

STREAM = (("content-type", "text/event-stream"),)
CONVERSATION = "/backend-api/f/conversation"
PROPERTY = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip


def secret_of(kind: str, rng: random.Random) -> tuple[str, str]:
    """A secret of `kind`, and the part of it that must never be stored."""
    secret = KINDS[kind](rng)
    [(_, _, part)] = find_secrets(f"my key is {secret} ok")
    if currently_in_test_context():
        note(f"secret {secret!r}")
    return secret, part


def fresh(tmp_path: Path) -> Path:
    """A folder of its own for one example (Hypothesis runs many in one test's `tmp_path`)."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


def windows(part: str) -> list[bytes]:
    """Every 8 characters of the part of a secret that must never be stored, as bytes (a PEM
    body's lines one by one: JSON writes its line breaks as `\\n`)."""
    found = []
    for line in part.split("\n"):
        found += [line[i : i + 8].encode() for i in range(max(0, len(line) - 7))]
    return found


def assert_nowhere(part: str, *blobs: bytes) -> None:
    for blob in blobs:
        leaked = [w for w in windows(part) if w in blob]
        assert not leaked, f"{len(leaked)} windows of the secret in clear, e.g. {leaked[0]!r}"


def raw_events(db: Path, flow: str | None = None) -> list[str]:
    with sqlite3.connect(db) as conn:
        where = "WHERE flow_id = ?" if flow else ""
        rows = events_sql(conn).execute(
            f"SELECT convtap_event(data, raw) FROM events {where} ORDER BY flow_id, seq",
            (flow,) if flow else (),
        )
        return [text for (text,) in rows]


def stored_texts(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT id, text FROM messages"))


def record_sse(db: Path, generated: Generated, path: str = CONVERSATION) -> None:
    recorder = LocalRecorder(str(db), redact=True, echo="off")
    body = b'{"action": "next", "conversation_id": "conv-gen"}'
    recorder.handle(RequestSeen("f1", "POST", "https://x" + path, "x", path, (), body, 1.0))
    recorder.handle(ResponseStarted("f1", 200, STREAM))
    for n, chunk in enumerate(generated.chunks):
        recorder.handle(BodyChunk("f1", chunk, 1.0 + n))  # a pause between each: never by time
    recorder.handle(ResponseEnded("f1", 200, STREAM, None, "complete", 99.0))
    recorder.close()


kinds = st.sampled_from(sorted(KINDS))


def check_f_conversation(tmp_path: Path, kind: str, rng: random.Random) -> None:
    secret, part = secret_of(kind, rng)
    generated = streams.delta_stream(rng, secret)
    decoded = decode_turn([generated.body])
    texts = {m["id"]: message_text(m) for m in decoded.messages}
    assert texts == generated.texts  # the generator says what it means to
    db = fresh(tmp_path) / "x.db"
    record_sse(db, generated)
    assert_nowhere(part, capture_bytes(db))
    scrub = redactor().scrub
    stored = stored_texts(db)
    assert stored == {mid: scrub(text) for mid, text in texts.items()}
    assert stored["msg-hello"] == streams.HELLO
    again = decode_turn(["".join(raw_events(db)).encode()])
    assert {m["id"]: message_text(m) for m in again.messages} == stored  # the bytes agree


def check_responses_stream(tmp_path: Path, kind: str, rng: random.Random) -> None:
    secret, part = secret_of(kind, rng)
    generated = streams.responses_stream(rng, secret)
    db = fresh(tmp_path) / "x.db"
    record_sse(db, generated, "/v1/responses")
    assert_nowhere(part, capture_bytes(db))
    again = decode_responses(["".join(raw_events(db)).encode()])
    [message, call] = again.output_items
    scrub = redactor().scrub
    assert message["content"][0]["text"] == scrub(generated.texts["msg_1"])
    assert secret not in call["arguments"] and "Lisboa" in call["arguments"]


def check_responses_socket(tmp_path: Path, kind: str, rng: random.Random) -> None:
    secret, part = secret_of(kind, rng)
    generated = streams.responses_frames(rng, secret)
    db = fresh(tmp_path) / "x.db"
    recorder = LocalRecorder(str(db), redact=True, echo="off")
    upgrade = (("upgrade", "websocket"),)
    recorder.handle(RequestSeen("ws1", "GET", "wss://x/v1/responses", "x", "/v1/responses",
                                upgrade, None, 1.0))  # fmt: skip
    recorder.handle(ResponseEnded("ws1", 101, upgrade, None, "complete", 1.0))
    for n, frame in enumerate(generated.extra["frames"]):
        recorder.handle(WebSocketMessage("ws1", n == 0, frame, 2.0 + n))
    recorder.handle(WebSocketEnded("ws1", 99.0))
    recorder.close()
    assert_nowhere(part, capture_bytes(db))
    frames = raw_events(db, "ws1")
    assert len(frames) == len(generated.extra["frames"])  # every frame kept, in its place
    again = decode_responses(["".join(f"data: {f}\n\n" for f in frames[1:]).encode()])
    assert again.output_items[0]["content"][0]["text"] == redactor().scrub(generated.texts["msg_1"])


def check_handoff(tmp_path: Path, kind: str, rng: random.Random) -> None:
    secret, part = secret_of(kind, rng)
    topic = "conversation-turn-gen"
    generated = streams.handoff_frames(rng, secret, topic)
    db = fresh(tmp_path) / "x.db"
    recorder = LocalRecorder(str(db), redact=True, echo="off")
    handoff = ('event: delta_encoding\ndata: "v1"\n\ndata: {"type": "stream_handoff", '
               '"conversation_id": "conv-gen", "options": [{"type": "subscribe_ws_topic", '
               f'"topic_id": "{topic}"}}]}}\n\ndata: [DONE]\n\n').encode()  # fmt: skip
    body = b'{"action": "next", "conversation_id": "conv-gen"}'
    recorder.handle(RequestSeen("f1", "POST", "https://x" + CONVERSATION, "x", CONVERSATION,
                                (), body, 1.0))  # fmt: skip
    recorder.handle(ResponseStarted("f1", 200, STREAM))
    recorder.handle(BodyChunk("f1", handoff, 1.0))
    recorder.handle(ResponseEnded("f1", 200, STREAM, None, "complete", 1.5))
    path = "/backend-api/ws/user/u1"
    recorder.handle(RequestSeen("ws1", "GET", "wss://x" + path, "x", path, (), None, 2.0))
    recorder.handle(ResponseEnded("ws1", 101, (), None, "complete", 2.0))
    for n, frame in enumerate(generated.extra["frames"]):
        recorder.handle(WebSocketMessage("ws1", False, frame, 3.0 + n))
    recorder.handle(WebSocketEnded("ws1", 99.0))
    recorder.close()
    assert_nowhere(part, capture_bytes(db))
    assert len(raw_events(db, "ws1")) == len(generated.extra["frames"])
    stored = stored_texts(db)
    assert stored.get("msg-hello") == streams.HELLO
    assert stored.get("msg-secret") == redactor().scrub(generated.texts["msg-secret"])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(kind=kinds, rng=st.randoms(use_true_random=False))
def test_decode_export_and_report_keep_no_secret(
    tmp_path: Path, kind: str, rng: random.Random
) -> None:
    """`convtap decode` of the stream, `convtap import` of it, and what a capture becomes: the HAR
    export and the report."""
    secret, part = secret_of(kind, rng)
    generated = streams.delta_stream(rng, secret)
    source = fresh(tmp_path) / "x.sse"
    source.write_bytes(generated.body)
    for fmt in ("text", "json"):
        out = io.StringIO()
        decode([str(source)], out, fmt=fmt, protocol="auto", ws_path=None, redact=True)
        assert_nowhere(part, out.getvalue().encode())
    db = fresh(tmp_path) / "x.db"
    [imported] = import_into(db, [source], redact=True)  # as `convtap import x.sse`
    assert imported.error is None
    assert stored_texts(db) == {
        mid: redactor().scrub(text) for mid, text in generated.texts.items()
    }
    har = tmp_path / "x.har"
    export_har(db, har, blank_words=False)
    page = write_report(db, tmp_path / "x.html")
    assert_nowhere(part, har.read_bytes(), report_text(page), capture_bytes(db))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_the_generator_makes_is_a_secret(kind: str) -> None:
    """The generator's secrets are ones convtap knows (else the tests above test nothing)."""
    secret, part = secret_of(kind, random.Random(kind))
    assert len(part) >= 12 and (part in secret or secret in part)


# -- the forms that once leaked, one by one -------------------------------------------------------

KEY = "ghp_Q7wEr9TyU2iOp4AsD6fGh8JkL0zXc3VbN5mQ"


def sse(*deltas: dict[str, object]) -> bytes:
    events = ['event: delta_encoding\ndata: "v1"\n\n']
    events += [f"event: delta\ndata: {json.dumps(d)}\n\n" for d in deltas]
    return "".join([*events, "data: [DONE]\n\n"]).encode()


def root(message_id: str, parts: list[str]) -> dict[str, object]:
    return {"message": streams._message(message_id, parts), "conversation_id": "conv-gen"}


def recorded(tmp_path: Path, body: bytes) -> Path:
    db = tmp_path / "case.db"
    record_sse(db, Generated([body[i : i + 7] for i in range(0, len(body), 7)], {}))
    return db


def decoded_again(db: Path) -> dict[str, str]:
    again = decode_turn(["".join(raw_events(db)).encode()])
    return {m["id"]: message_text(m) for m in again.messages}


@pytest.mark.parametrize("cut", [2, 4, 9])
def test_patch_sub_ops_appending_a_secret_keep_none_of_it(tmp_path: Path, cut: int) -> None:
    """`{"p": "", "o": "patch", "v": [{"p": "/message/content/parts/0", "o": "append", …}]}`,
    the key cut inside its prefix (`gh` | `p_Q7wE…`) or after it."""
    body = sse({"p": "", "o": "add", "v": root("m", ["my key is "]), "c": 0},
               *({"p": "", "o": "patch", "v": [{"p": TEXT, "o": "append", "v": piece}]}
                 for piece in (KEY[:cut], KEY[cut:], " ok")))  # fmt: skip
    db = recorded(tmp_path, body)
    assert_nowhere(KEY, capture_bytes(db))
    assert (
        stored_texts(db)["m"] == decoded_again(db)["m"] == redactor().scrub(f"my key is {KEY} ok")
    )


def test_an_add_carrying_the_start_of_a_secret_then_appends_keep_none_of_it(
    tmp_path: Path,
) -> None:
    body = sse({"p": "", "o": "add", "v": root("m", ["my key is " + KEY[:12]]), "c": 0},
               {"p": TEXT, "o": "append", "v": KEY[12:30]}, {"v": KEY[30:] + " ok"})  # fmt: skip
    db = recorded(tmp_path, body)
    assert_nowhere(KEY, capture_bytes(db))
    assert decoded_again(db)["m"] == redactor().scrub(f"my key is {KEY} ok")


def test_a_replace_of_the_string_then_appends_keep_none_of_it(tmp_path: Path) -> None:
    body = sse({"p": "", "o": "add", "v": root("m", [""]), "c": 0},
               {"p": TEXT, "o": "replace", "v": "my key is " + KEY[:10]},
               {"p": TEXT, "o": "append", "v": KEY[10:]}, {"v": " ok"})  # fmt: skip
    db = recorded(tmp_path, body)
    assert_nowhere(KEY, capture_bytes(db))
    assert decoded_again(db)["m"] == redactor().scrub(f"my key is {KEY} ok")


def test_two_channels_appending_to_the_same_path_in_turns_keep_their_own_text(
    tmp_path: Path,
) -> None:
    """Channels 0 and 1 append to `/message/content/parts/0` in turns: each message keeps its
    own text, in the raw events and after they are decoded again, and the key is cut."""
    a, b = cut_into(random.Random(3), f"my key is {KEY} ok"), ["he", "llo", " there"]
    deltas: list[dict[str, object]] = [
        {"p": "", "o": "add", "v": root("a", [""]), "c": 0},
        {"p": "", "o": "add", "v": root("b", [""]), "c": 1},
    ]
    for n in range(max(len(a), len(b))):
        if n < len(a):
            deltas.append({"c": 0, "p": TEXT, "o": "append", "v": a[n]})
        if n < len(b):
            deltas.append({"c": 1, "p": TEXT, "o": "append", "v": b[n]})
    db = recorded(tmp_path, sse(*deltas))
    assert_nowhere(KEY, capture_bytes(db))
    texts = decoded_again(db)
    assert texts == stored_texts(db) == {"a": redactor().scrub(f"my key is {KEY} ok"),
                                          "b": "hello there"}  # fmt: skip
    reprocess_db(db)
    assert stored_texts(db) == texts
    assert_nowhere(KEY, capture_bytes(db))


@PROPERTY
@given(kind=kinds, rng=st.randoms(use_true_random=False))
def test_an_f_conversation_stream_of_any_form_keeps_no_secret(
    tmp_path: Path, kind: str, rng: random.Random
) -> None:
    check_f_conversation(tmp_path, kind, rng)


@PROPERTY
@given(kind=kinds, rng=st.randoms(use_true_random=False))
def test_a_responses_stream_keeps_no_secret(tmp_path: Path, kind: str, rng: random.Random) -> None:
    check_responses_stream(tmp_path, kind, rng)


@PROPERTY
@given(kind=kinds, rng=st.randoms(use_true_random=False))
def test_a_responses_socket_keeps_no_secret(tmp_path: Path, kind: str, rng: random.Random) -> None:
    check_responses_socket(tmp_path, kind, rng)


@PROPERTY
@given(kind=kinds, rng=st.randoms(use_true_random=False))
def test_a_turn_handed_off_to_the_user_socket_keeps_no_secret(
    tmp_path: Path, kind: str, rng: random.Random
) -> None:
    check_handoff(tmp_path, kind, rng)


CHECKS = {"f/conversation": check_f_conversation, "responses": check_responses_stream,
          "responses socket": check_responses_socket, "user socket": check_handoff}  # fmt: skip
