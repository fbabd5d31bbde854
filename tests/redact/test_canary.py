"""A session carrying every secret kind of docs/protocol.md, "Secrets on this wire", leaves none of
them in clear anywhere in
the database file (or its WAL)."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from convtap.journal.events import (
    BodyChunk,
    RequestSeen,
    ResponseEnded,
    ResponseStarted,
    WebSocketEnded,
)
from convtap.journal.events import WebSocketMessage as SocketFrame
from convtap.proxy.addon import ConvtapAddon
from convtap.proxy.script import in_process
from convtap.record.local import LocalRecorder
from convtap.redact.patterns import PLACEHOLDER, hints
from convtap.wire.turn import TurnSummary, decode_turn, message_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mitmproxy import http
from mitmproxy.test import taddons, tflow, tutils
from mitmproxy.websocket import WebSocketMessage
from wsproto.frame_protocol import Opcode

from tests.harness import capture_bytes, events_sql
from tests.seeds import SSE, tool_return, user_turn

SECRETS = {
    "authorization": "Bearer eyCANARYauthorizationTOKEN0001",
    "cookie": "__Secure-next-auth.session-token=CANARYcookie0002",
    "conduit": "CANARYconduitTOKEN0003",
    "sentinel_header": "gAAAAACANARYsentinelHEADER0004",
    "proof_header": "gAAAAACANARYproofHEADER0005",
    "sentinel_token": "gAAAAACANARYsentinelBODY0006",
    "proof_seed": "CANARYproofSEED0007",
    "turnstile": "CANARYturnstileDX0008",
    "prepare_token": "CANARYprepareTOKEN0009",
    "resume_token": "CANARYresumeTOKEN0010",
    "challenge": "CANARYattestCHALLENGE0011",
    "verify": "CANARYwsVERIFY0012",
}


def request(path: str, body: object, method: bytes = b"POST", **headers: str) -> http.Request:
    req = tutils.treq(method=method, path=path.encode(), content=json.dumps(body).encode())
    req.headers["authorization"] = SECRETS["authorization"]
    req.headers["cookie"] = SECRETS["cookie"]
    for name, value in headers.items():
        req.headers[name.replace("_", "-")] = value
    return req


def json_response(body: object) -> http.Response:
    return tutils.tresp(headers=http.Headers(content_type="application/json"),
                        content=json.dumps(body).encode())  # fmt: skip


def sse_response() -> http.Response:
    body = (SSE / "alefita_way_call.sse").read_text()
    body = body.replace(
        "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LWNvbmR1aXQtdG9rZW4.x1y2z3", SECRETS["resume_token"]
    )
    return tutils.tresp(
        headers=http.Headers(content_type="text/event-stream"), content=body.encode()
    )


def test_no_secret_reaches_the_database_in_clear(tmp_path: Path) -> None:
    addon = ConvtapAddon(in_process)
    db = tmp_path / "canary.db"
    turn = user_turn()
    turn["app_attest_challenge"] = SECRETS["challenge"]
    ret = tool_return()
    ret["app_attest_challenge"] = SECRETS["challenge"]  # reused, as a buggy client would
    sentinel = {
        "token": SECRETS["sentinel_token"],
        "prepare_token": SECRETS["prepare_token"],
        "proofofwork": {"required": True, "seed": SECRETS["proof_seed"], "difficulty": "0fffff"},
        "turnstile": {"required": True, "dx": SECRETS["turnstile"]},
    }
    api = "/backend-api/"
    headers = {
        "openai_sentinel_chat_requirements_token": SECRETS["sentinel_header"],
        "openai_sentinel_proof_token": SECRETS["proof_header"],
        "x_conduit_token": SECRETS["conduit"],
    }
    prepare = {"action": "next", "client_prepare_state": "sent"}
    flows = [
        tflow.tflow(
            req=request(api + "sentinel/chat-requirements/prepare", {"p": SECRETS["proof_header"]}),
            resp=json_response(sentinel),
        ),
        tflow.tflow(
            req=request(api + "f/conversation/prepare", prepare),
            resp=json_response({"status": "ok", "conduit_token": SECRETS["conduit"]}),
        ),
        tflow.tflow(req=request(api + "f/conversation", turn, **headers), resp=sse_response()),
        tflow.tflow(
            req=request(
                api + "f/conversation/resume",
                {"conversation_id": "c", "offset": 3},
                x_conduit_token=SECRETS["conduit"],
            ),
            resp=sse_response(),
        ),
        tflow.tflow(req=request(api + "f/conversation", ret), resp=sse_response()),
    ]
    ws = tflow.twebsocketflow()
    ws.request.path = f"/backend-api/ws/user/user-1?verify={SECRETS['verify']}"
    ws.websocket.messages = [  # type: ignore[union-attr]
        WebSocketMessage(Opcode.TEXT, False, json.dumps([{"type": "message", "topic_id": "x",
                         "payload": {"token": SECRETS["resume_token"]}}]).encode()),
    ]  # fmt: skip
    for flow in flows:
        flow.live = False  # bodies whole in `response`: tctx.cycle never calls a stream tap
    with taddons.context(addon) as tctx:
        tctx.configure(addon, convtap_db=str(db), convtap_echo="off", convtap_worker=False)
        for flow in [*flows, ws]:
            asyncio.run(tctx.cycle(addon, flow))
        # everything above is in, and the WAL still holds it: look before the final checkpoint
        assert isinstance(addon.backend, LocalRecorder)
        addon.backend.writer.flush()
        files = [db, db.with_name(db.name + "-wal")]
        raw = b"".join(p.read_bytes() for p in files if p.exists()) + capture_bytes(db)
        assert b"<redacted:" in raw and b"ws:server" in raw
        legs = addon.backend.writer.db.execute("SELECT sum(legs) FROM turns").fetchone()[0]
        assert legs == 3  # every body was decoded (the resume names a turn of its own)
        leaked = [name for name, secret in SECRETS.items() if secret.encode() in raw]
        assert leaked == []
        addon.done()
    raw = capture_bytes(db)
    assert [name for name, secret in SECRETS.items() if secret.encode() in raw] == []
    assert oct(db.stat().st_mode & 0o777) == "0o600"


def record_handoff(tmp_path: Path, frames: list[str]) -> tuple[Path, list[str]]:
    """The example handoff turn through the addon, its WebSocket leg made of `frames`, with an
    HTTP leg that gives no hint of a secret value; the database and its messages' text."""
    addon = ConvtapAddon(in_process)
    db = tmp_path / "ws.db"
    body = (SSE / "handoff_ws.sse").read_text()
    body = re.sub(r'"eyJ[\w.-]+"', "12345", body)  # no hint of a value in HTTP
    assert hints(body)[1] is False
    sse = tutils.tresp(headers=http.Headers(content_type="text/event-stream"),
                       content=body.encode())  # fmt: skip
    turn = tflow.tflow(req=request("/backend-api/f/conversation", user_turn()), resp=sse)
    turn.live = False  # the body whole in `response`: tctx.cycle never calls a stream tap
    ws = tflow.twebsocketflow()
    ws.request.path = "/backend-api/ws/user/user-1"
    ws.websocket.messages = [  # type: ignore[union-attr]
        WebSocketMessage(Opcode.TEXT, False, frame.encode()) for frame in frames
    ]
    with taddons.context(addon) as tctx:
        tctx.configure(addon, convtap_db=str(db), convtap_echo="off", convtap_worker=False)
        for flow in (turn, ws):
            asyncio.run(tctx.cycle(addon, flow))
        addon.done()
    with sqlite3.connect(db) as conn:
        texts = [row[0] for row in conn.execute("SELECT text || json FROM messages")]
        legs = conn.execute("SELECT ws_topic FROM turns WHERE ws_topic IS NOT NULL").fetchall()
    assert legs, "the turn did not continue on the WebSocket"
    return db, texts


def handoff_frames() -> list[str]:
    return (SSE / "handoff_ws.frames.jsonl").read_text().splitlines()


def test_a_secret_in_the_websocket_leg_of_a_turn_is_redacted(tmp_path: Path) -> None:
    """The turn hands off to the user WebSocket; the text the model writes there carries a key.
    The HTTP leg had no hint of a secret: the message must be scrubbed all the same."""
    secret = "sk-proj-CANARYwsLEG" + "x7" * 16
    frames = [frame.replace("uma plani", secret) for frame in handoff_frames()]
    assert any(secret in frame for frame in frames)
    db, texts = record_handoff(tmp_path, frames)
    assert any("<redacted:" in text for text in texts)
    assert secret.encode() not in capture_bytes(db)


def test_a_secret_cut_across_websocket_frames_is_redacted(tmp_path: Path) -> None:
    """The key starts at the end of one frame's stream item ("s") and goes on two frames later
    (a catch-up repeats the first in between): neither the message nor the raw frames keep any
    of it."""
    rest = "CANARYcutWS" + "x7" * 12
    frames = [
        frame.replace("uma plani", "chave s").replace("lha de or", "k-proj-" + rest)
        for frame in handoff_frames()
    ]
    db, texts = record_handoff(tmp_path, frames)
    assert any("chave <redacted:" in text for text in texts)
    assert rest.encode() not in capture_bytes(db)


def raw_events(conn: sqlite3.Connection) -> str:
    """The raw events a capture keeps, in order, as one SSE text."""
    rows = events_sql(conn).execute("SELECT convtap_event(data, raw) FROM events ORDER BY seq")
    return "".join(data for (data,) in rows)


def record_stream(db: Path, path: str, request: bytes, body: bytes, size: int) -> None:
    """One streamed answer to `POST path` through the recorder, `size` bytes at a time."""
    recorder = LocalRecorder(str(db), redact=True, echo="off")
    stream = (("content-type", "text/event-stream"),)
    recorder.handle(RequestSeen("f1", "POST", "https://x" + path, "x", path, (), request, 1.0))
    recorder.handle(ResponseStarted("f1", 200, stream))
    for i in range(0, len(body), size):
        recorder.handle(BodyChunk("f1", body[i : i + size], 1.0))
    recorder.handle(ResponseEnded("f1", 200, stream, None, "complete", 2.0))
    recorder.close()


MARKER = 'data: {"type": "message_marker", "marker": "cot_token", "event": "first"}\n\n'


@pytest.mark.parametrize(("size", "marker"), [(7, False), (7, True), (1 << 20, True)])
def test_a_secret_cut_across_many_tiny_network_chunks_is_redacted(
    tmp_path: Path, size: int, marker: bool
) -> None:
    """Bare frames carry a key in four pieces and the proxy hands them over 7 bytes at a time
    (or all at once), with a marker event among the pieces or not: no piece of the key stays in
    the raw events."""
    rest = "CANARYhttpCUT" + "x7" * 12
    message = {"id": "m1", "author": {"role": "assistant"}, "status": "in_progress",
               "content": {"content_type": "text", "parts": [""]}, "recipient": "all"}  # fmt: skip
    pieces = [delta({"v": piece}) for piece in ("k-pr", "oj-", rest[:10], rest[10:], " ok")]
    if marker:
        pieces.insert(2, MARKER)
    frames = [
        'event: delta_encoding\ndata: "v1"\n\n',
        delta({"p": "", "o": "add", "v": {"message": message, "conversation_id": "c1"}}),
        delta({"p": "/message/content/parts/0", "o": "append", "v": "my key is s"}),
        *pieces,
        "data: [DONE]\n\n",
    ]
    body = "".join(frames).encode()
    db = tmp_path / "tiny.db"
    record_stream(db, "/backend-api/f/conversation", b"{}", body, size)
    with sqlite3.connect(db) as conn:
        ((text,),) = conn.execute("SELECT text FROM messages").fetchall()
    assert text.startswith("my key is <redacted:") and text.endswith(" ok")
    raw = capture_bytes(db)
    assert rest[:10].encode() not in raw and rest[10:].encode() not in raw
    with sqlite3.connect(db) as conn:  # the raw events still decode, to the redacted text
        stored = raw_events(conn)
    assert message_text(message_of(decode_turn([stored.encode()]), "m1")) == text


def delta(value: object) -> str:
    return f"event: delta\ndata: {json.dumps(value)}\n\n"


def responses_event(value: dict[str, object]) -> str:
    return f"event: {value['type']}\ndata: {json.dumps(value)}\n\n"


@pytest.mark.parametrize("size", [7, 1 << 20])
def test_a_secret_cut_across_responses_deltas_is_redacted(tmp_path: Path, size: int) -> None:
    """The Responses API streams text in `response.output_text.delta` events: a key cut across
    them leaves no piece in the raw events, whose text still reads as the redacted answer."""
    rest = "CANARYrespCUT" + "x7" * 12
    item = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    pieces = ("my key is s", "k-pr", "oj-", rest[:10], rest[10:], " ok")
    frames = [
        responses_event({"type": "response.created", "response": {"id": "resp_1"}}),
        *(responses_event({"type": "response.output_text.delta", **item, "delta": piece})
          for piece in pieces),
        responses_event({"type": "response.completed", "response": {"id": "resp_1"}}),
    ]  # fmt: skip
    body = "".join(frames).encode()
    db = tmp_path / "responses.db"
    request = json.dumps({"model": "m", "input": "hi", "stream": True}).encode()
    record_stream(db, "/v1/responses", request, body, size)
    raw = capture_bytes(db)
    assert rest[:10].encode() not in raw and rest[10:].encode() not in raw
    with sqlite3.connect(db) as conn:
        stored = raw_events(conn)
    deltas = [json.loads(line[6:])["delta"] for line in stored.splitlines()
              if line.startswith("data: ") and "output_text.delta" in line]  # fmt: skip
    text = "".join(deltas)
    assert re.fullmatch(r"my key is <redacted:[0-9a-f]{12}> ok", text), text


@pytest.mark.parametrize("field", ["item_id", "obfuscation", "api_key"])
def test_a_secret_beside_a_responses_delta_is_redacted(tmp_path: Path, field: str) -> None:
    """Only the text of a `*.delta` event was looked at: a secret in its other fields (here
    shaped like a key, or under a key named like a secret) stayed in the raw events. The
    delta's text is left as it came."""
    secret = "sk-proj-CANARYbeside" + "x7" * 12
    item = {"item_id": "msg_1", "output_index": 0, "content_index": 0, field: f" {secret} "}
    body = "".join([
        responses_event({"type": "response.created", "response": {"id": "resp_1"}}),
        responses_event({"type": "response.output_text.delta", **item, "delta": "hello"}),
        responses_event({"type": "response.completed", "response": {"id": "resp_1"}}),
    ]).encode()  # fmt: skip
    db = tmp_path / "beside.db"
    request = json.dumps({"model": "m", "input": "hi", "stream": True}).encode()
    record_stream(db, "/v1/responses", request, body, 1 << 20)
    assert secret.encode() not in capture_bytes(db)
    with sqlite3.connect(db) as conn:
        stored = raw_events(conn)
    (delta,) = [json.loads(line[6:]) for line in stored.splitlines()
                if line.startswith("data: ") and "output_text.delta" in line]  # fmt: skip
    assert re.fullmatch(r"<redacted:[0-9a-f]{12}>", delta[field].strip()), delta
    assert delta["delta"] == "hello"


BARE = 'event: delta\ndata: {"v": "a"}\n\n'


@pytest.mark.parametrize("size", [7, 1 << 20])
@pytest.mark.parametrize(
    "line",
    ["{secret}", "id: {secret}", "retry: {secret}", "foo: {secret}", "x {secret}"],
)
def test_a_secret_in_a_line_the_decoder_does_not_read_is_redacted(
    tmp_path: Path, line: str, size: int
) -> None:
    """A line of another field (`id`, `retry`, an unknown one) or of no field is not read by the
    decoder, but it is stored with the raw events: one holding a secret was kept in clear (only
    comment lines were looked at). It becomes a comment with a placeholder; the stream decodes
    as before."""
    secret = "sk-proj-CANARYunread" + "x7" * 12
    odd = line.format(secret=secret)
    body = f'event: delta_encoding\ndata: "v1"\n\n{BARE * 3}{odd}\ndata: 1\n\n{BARE * 3}'.encode()
    db = tmp_path / "unread.db"
    record_stream(db, "/backend-api/f/conversation", b"{}", body, size)
    assert secret.encode() not in capture_bytes(db)
    with sqlite3.connect(db) as conn:
        stored = raw_events(conn)
        ((count,),) = conn.execute("SELECT event_count FROM turns").fetchall()
    assert re.search(r"\n: <redacted:[0-9a-f]{12}>\ndata: 1\n", stored), stored
    assert count == 8 == decode_turn([stored.encode()]).event_count


def test_a_secret_in_a_line_of_no_field_in_a_websocket_stream_item_is_redacted(
    tmp_path: Path,
) -> None:
    secret = "sk-proj-CANARYitem" + "x7" * 12
    frames = handoff_frames()
    item = json.loads(frames[2])
    item[0]["payload"]["payload"]["encoded_item"] = f"stray {secret}\n\n"
    frames[2] = json.dumps(item)
    db, _ = record_handoff(tmp_path, frames)
    assert secret.encode() not in capture_bytes(db)


@pytest.mark.parametrize("size", [5, 1 << 20])
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_a_secret_in_an_sse_comment_line_is_redacted(tmp_path: Path, size: int, eol: str) -> None:
    """Comment lines (`: …`) are not events, but they are stored with the raw events: one that
    holds a secret keeps a placeholder in its place; the server's pings stay as they came (with
    their CRLF in a CRLF stream)."""
    secret = "sk-proj-CANARYcomment" + "x7" * 12
    message = {"id": "m1", "author": {"role": "assistant"}, "status": "in_progress",
               "content": {"content_type": "text", "parts": [""]}, "recipient": "all"}  # fmt: skip
    body = "".join([
        'event: delta_encoding\ndata: "v1"\n\n',
        delta({"p": "", "o": "add", "v": {"message": message, "conversation_id": "c1"}}),
        ": ping - 2026-11-30 17:00:00.000000+00:00\n\n",
        delta({"p": "/message/content/parts/0", "o": "append", "v": "hello"}),
        f": upstream debug key={secret}\n\n",
        delta({"v": " there"}),
        "data: [DONE]\n\n",
    ]).replace("\n", eol).encode()  # fmt: skip
    db = tmp_path / "comment.db"
    record_stream(db, "/backend-api/f/conversation", b"{}", body, size)
    assert secret.encode() not in capture_bytes(db)
    with sqlite3.connect(db) as conn:
        stored = raw_events(conn)
        ((text,),) = conn.execute("SELECT text FROM messages").fetchall()
    assert f": ping - 2026-11-30 17:00:00.000000+00:00{eol}" in stored
    assert re.search(r"\n: <redacted:[0-9a-f]{12}>\n", stored)
    assert text == "hello there"
    assert message_text(message_of(decode_turn([stored.encode()]), "m1")) == text


def test_a_secret_in_a_comment_of_a_websocket_stream_item_is_redacted(tmp_path: Path) -> None:
    secret = "sk-proj-CANARYwsCOMMENT" + "x7" * 12
    frames = handoff_frames()
    item = next(i for i, frame in enumerate(frames) if "uma plani" in frame)
    frame = json.loads(frames[item])
    texts = [k for k, v in _strings(frame) if "event: delta" in v]
    assert texts, "no SSE text in the frame"
    frames[item] = frames[item].replace("event: delta", f": key={secret}\\n\\nevent: delta", 1)
    assert secret in frames[item]
    db, _ = record_handoff(tmp_path, frames)
    assert secret.encode() not in capture_bytes(db)


def _strings(value: object, key: str = "") -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(key, value)]
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _strings(v, k)]
    if isinstance(value, list):
        return [pair for v in value for pair in _strings(v, key)]
    return []


V1 = 'event: delta_encoding\ndata: "v1"\n\n'


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("unexpected-value", V1 + 'data: "{secret}"\n\n'),
        ("unknown-encoding", 'event: delta_encoding\ndata: "{secret}"\n\n'),
        ("invalid-delta", V1 + 'event: delta\ndata: {{"c": "{secret}", "p": "", "o": "add"}}\n\n'),
        ("invalid-delta", V1 + 'event: delta\ndata: {{"p": "", "o": "{secret}", "v": 1}}\n\n'),
    ],
)
def test_a_secret_quoted_by_a_decode_error_is_redacted(
    tmp_path: Path, kind: str, body: str
) -> None:
    """A decode error says what it could not read, the value included: a secret there reached
    the turn's `errors` in clear. The error is kept, with a placeholder for the secret."""
    secret = "sk-proj-CANARYerror" + "x7" * 12
    db = tmp_path / "errors.db"
    record_stream(db, "/backend-api/f/conversation", b"{}", body.format(secret=secret).encode(), 9)
    assert secret.encode() not in capture_bytes(db)
    with sqlite3.connect(db) as conn:
        ((errors,),) = conn.execute("SELECT errors FROM turns").fetchall()
    (error,) = json.loads(errors)
    assert error["kind"] == kind and re.search(r"<redacted:[0-9a-f]{12}>", error["detail"])


def test_a_secret_in_the_user_agent_or_the_path_is_redacted(tmp_path: Path) -> None:
    """`flows.url` and the kept headers were scrubbed, but the path beside the URL and the
    client named from the user agent (`flows.client`, `turns.client`) were stored as they
    came."""
    secret = "sk-proj-CANARYrequest" + "x7" * 12
    db = tmp_path / "request.db"
    recorder = LocalRecorder(str(db), redact=True, echo="off")
    agent = (("user-agent", f"my-client/1.0 {secret}"),)
    turn, get = "/backend-api/f/conversation", f"/backend-api/conversation/{secret}"
    body = (SSE / "plain_answer.sse").read_bytes()
    stream = (("content-type", "text/event-stream"),)
    for flow, method, path in (("f1", "POST", turn), ("f2", "GET", get)):
        request = json.dumps(user_turn()).encode() if method == "POST" else b""
        recorder.handle(
            RequestSeen(flow, method, "https://x" + path, "x", path, agent, request, 1.0)
        )
        recorder.handle(ResponseStarted(flow, 200, stream))
        recorder.handle(BodyChunk(flow, body if method == "POST" else b"{}", 1.0))
        recorder.handle(ResponseEnded(flow, 200, stream, None, "complete", 2.0))
    recorder.close()
    assert secret.encode() not in capture_bytes(db)
    with sqlite3.connect(db) as conn:
        flows = conn.execute("SELECT path, client FROM flows ORDER BY id").fetchall()
        ((client,),) = conn.execute("SELECT client FROM turns").fetchall()
    assert flows[0] == (turn, client) and client.startswith("my-client/1.0 <redacted:")
    assert flows[1][0].startswith("/backend-api/conversation/<redacted:")


@pytest.mark.parametrize(
    "data",
    [
        '{{"type": "resume_conversation_token", "token": "{token}"',  # cut: no closing brace
        '{{"token": "{token}", }}',  # a trailing comma
    ],
)
@pytest.mark.parametrize("size", [5, 1 << 20])
def test_a_secret_key_in_an_event_that_is_not_json_is_redacted(
    tmp_path: Path, data: str, size: int
) -> None:
    """A malformed event was only searched for secret-shaped values: the resume token (a secret by
    its key, docs/protocol.md, "Secrets on this wire") in an event that does not parse was kept in
    clear. Such an event is kept whole as a placeholder: it is a decode error either way."""
    token = "CANARYresumeTOKEN" + "x7" * 8
    event = f"data: {data.format(token=token)}\n\n"
    body = f'event: delta_encoding\ndata: "v1"\n\n{event}data: [DONE]\n\n'.encode()
    db = tmp_path / "malformed.db"
    record_stream(db, "/backend-api/f/conversation", b"{}", body, size)
    assert token.encode() not in capture_bytes(db)
    with sqlite3.connect(db) as conn:
        ((errors,),) = conn.execute("SELECT errors FROM turns").fetchall()
        stored = raw_events(conn)
    assert [e["kind"] for e in json.loads(errors)] == ["malformed-json"]
    assert re.search(r"\ndata: <redacted:[0-9a-f]{12}>\n", stored), stored


def call_stream(pieces: list[str], *, cut: bool) -> bytes:
    """A turn whose local tool call's arguments stream in `pieces` (an append, then bare
    frames), finished, or cut short after the last piece."""
    call = {"id": "call-1", "author": {"role": "assistant"}, "recipient": "local.alefita_way",
            "channel": "commentary", "status": "in_progress", "metadata": {},
            "content": {"content_type": "code", "language": "json", "text": ""}}  # fmt: skip
    frames = [
        'event: delta_encoding\ndata: "v1"\n\n',
        delta({"p": "", "o": "add", "v": {"message": call, "conversation_id": "c1"}, "c": 0}),
        delta({"p": "/message/content/text", "o": "append", "v": pieces[0]}),
        *(delta({"v": piece}) for piece in pieces[1:]),
    ]
    if not cut:
        frames += [delta({"p": "/message/status", "o": "replace", "v": "finished_successfully"}),
                   "data: [DONE]\n\n"]  # fmt: skip
    return "".join(frames).encode()


@pytest.mark.parametrize("size", [7, 1 << 20])
@pytest.mark.parametrize("cut", [False, True])
@pytest.mark.parametrize(
    "pieces",
    [
        ['{"api_key": "', "{secret}", '"}'],
        ['{"password": "{secret}"}'],
        ['{"city": "Lisboa", "Access-Token', '": "{se', 'cret}", "n": 1}'],
    ],
)
def test_a_secret_keys_value_in_streamed_call_arguments_is_redacted(
    tmp_path: Path, pieces: list[str], cut: bool, size: int
) -> None:
    """A call's arguments are JSON text streamed in pieces: a value under a secret key there
    (not shaped like a key of any service) was kept in clear in the raw events and the
    message's JSON, finished or cut short; only the call's own row was redacted."""
    secret = "CANARYargs" + "x7" * 10
    body = call_stream([p.replace("{secret}", secret).replace("{se", secret[:6])
                        .replace("cret}", secret[6:]) for p in pieces], cut=cut)  # fmt: skip
    assert secret.encode() in body.replace(b'", "v": "', b"").replace(
        b'"}\n\nevent: delta\ndata: {"v": "', b""
    )
    db = tmp_path / "args.db"
    record_stream(db, "/backend-api/f/conversation", b"{}", body, size)
    assert secret.encode() not in capture_bytes(db)
    assert secret[:6].encode() + secret[6:12].encode() not in capture_bytes(db)
    with sqlite3.connect(db) as conn:
        stored = raw_events(conn)
        ((text,),) = conn.execute("SELECT text FROM messages").fetchall()
    assert "<redacted:" in text
    decoded = message_text(message_of(decode_turn([stored.encode()]), "call-1"))
    assert "<redacted:" in decoded and secret[:6] not in decoded  # the raw events still decode


def message_of(turn: TurnSummary, message_id: str) -> dict[str, Any]:
    return next(m for m in turn.messages if m["id"] == message_id)


# -- a secret whose start arrives whole and whose rest follows in small frames ---------------------

# (what may stay: the kind's public prefix, the secret, what follows it and may stay too)
LONG_SECRETS = {
    "openai": ("sk-proj-", "A1b2C3d4E5f6G7h8I9j0" + "KxLmNoPqRsTuVwXyZ012" * 6, ""),
    "anthropic": ("sk-ant-api03-", "Qw9rTzY8uIoP" * 11, ""),
    "jwt": ("eyJ", "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
            ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c", ""),
    "slack": ("xoxb-", "1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", ""),
    "github-fine-grained": ("github_pat_", "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123"
                            "456789ABCDEFGHIJKLMNOPQRSTUV", ""),
    "bearer": ("Bearer ", "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ", ""),
    "pem": ("-----BEGIN PRIVATE KEY-----\n",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
            "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n" * 12,
            "-----END PRIVATE KEY-----"),
}  # fmt: skip


def runs_of(secret: str, size: int = 8) -> set[str]:
    """Every run of `size` characters of a secret (a line of a PEM body on its own)."""
    return {line[i : i + size] for line in secret.split("\n") for i in range(len(line) - size + 1)}


def stored_texts(db: Path, protocol: str) -> list[str]:
    """Every column of every row of the capture, and the text its raw events decode to."""
    with sqlite3.connect(db) as conn:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        texts = [str(v) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"')
                 for v in row if v is not None]  # fmt: skip
        stored = raw_events(conn)
    if protocol == "conversation-less":
        return texts
    if protocol == "responses":
        texts.append("".join(json.loads(line[6:]).get("delta", "") for line in stored.splitlines()
                             if line.startswith("data: {") and ".delta" in line))  # fmt: skip
    else:
        texts += [message_text(m) for m in decode_turn([stored.encode()]).messages]
    return texts


def leaked_runs(secret: str, db: Path, protocol: str) -> list[str]:
    texts = stored_texts(db, protocol)
    return sorted(run for run in runs_of(secret) if any(run in text for text in texts))


def record_chunks(db: Path, path: str, request: bytes, chunks: list[str]) -> None:
    """One streamed answer to `POST path` through the recorder, one network chunk each."""
    recorder = LocalRecorder(str(db), redact=True, echo="off")
    stream = (("content-type", "text/event-stream"),)
    recorder.handle(RequestSeen("f1", "POST", "https://x" + path, "x", path, (), request, 1.0))
    recorder.handle(ResponseStarted("f1", 200, stream))
    for chunk in chunks:
        recorder.handle(BodyChunk("f1", chunk.encode(), 1.0))
    recorder.handle(ResponseEnded("f1", 200, stream, None, "complete", 2.0))
    recorder.close()


def conversation_chunks(head: str, pieces: list[str]) -> list[str]:
    """A turn whose text begins, in its first chunk, with `head`, then goes on in bare frames
    (one network chunk each)."""
    message = {"id": "m1", "author": {"role": "assistant"}, "status": "in_progress",
               "content": {"content_type": "text", "parts": [""]}, "recipient": "all"}  # fmt: skip
    first = "".join([
        'event: delta_encoding\ndata: "v1"\n\n',
        delta({"p": "", "o": "add", "v": {"message": message, "conversation_id": "c1"}}),
        delta({"p": "/message/content/parts/0", "o": "append", "v": head}),
    ])  # fmt: skip
    return [first, *(delta({"v": piece}) for piece in pieces), "data: [DONE]\n\n"]


def responses_chunks(kind: str, head: str, pieces: list[str]) -> list[str]:
    """A Responses stream whose `kind` deltas carry `head` (in the first chunk), then `pieces`."""
    item = {"item_id": "it_1", "output_index": 0, "content_index": 0}
    event = f"response.{kind}.delta"
    first = responses_event({"type": "response.created", "response": {"id": "resp_1"}})
    first += responses_event({"type": event, **item, "delta": head})
    last = responses_event({"type": "response.completed", "response": {"id": "resp_1"}})
    return [first, *(responses_event({"type": event, **item, "delta": p}) for p in pieces), last]


def split_secret(kind: str, cut: int = 20, size: int = 4) -> tuple[str, list[str]]:
    """The first chunk's text (prose, the kind's prefix and `cut` characters of the secret: a
    key-shaped start already) and the rest in frames of `size` characters."""
    prefix, secret, suffix = LONG_SECRETS[kind]
    whole = prefix + secret + suffix + " and that is all"
    head = "my key is " + whole[: len(prefix) + cut]
    rest = whole[len(prefix) + cut :]
    return head, [rest[i : i + size] for i in range(0, len(rest), size)]


@pytest.mark.parametrize("kind", sorted(LONG_SECRETS))
def test_the_rest_of_a_secret_whose_start_came_whole_is_redacted(tmp_path: Path, kind: str) -> None:
    """The first chunk already holds a key-shaped start; the rest follows in 4-character bare
    frames, a chunk each. The held chunks were redacted again after their first redaction, and
    no pattern matches past a placeholder: the rest stayed in the raw events."""
    head, pieces = split_secret(kind)
    db = tmp_path / "rest.db"
    record_chunks(db, "/backend-api/f/conversation", b"{}", conversation_chunks(head, pieces))
    assert leaked_runs(LONG_SECRETS[kind][1], db, "conversation") == []
    with sqlite3.connect(db) as conn:
        ((text,),) = conn.execute("SELECT text FROM messages").fetchall()
        stored = raw_events(conn)
    assert re.fullmatch(r"my key is (Bearer )?<redacted:[0-9a-f]{12}> and that is all", text), text
    decoded = message_text(message_of(decode_turn([stored.encode()]), "m1"))
    if kind != "pem":  # longer than the hold in 4-character frames: its start went out alone
        assert decoded == text
    assert PLACEHOLDER.sub("-", decoded) == PLACEHOLDER.sub("-", text)


@pytest.mark.parametrize("kind", sorted(LONG_SECRETS))
@pytest.mark.parametrize("event", ["output_text", "function_call_arguments"])
def test_the_rest_of_a_secret_in_responses_deltas_is_redacted(
    tmp_path: Path, kind: str, event: str
) -> None:
    head, pieces = split_secret(kind)
    db = tmp_path / "rest.db"
    request = json.dumps({"model": "m", "input": "hi", "stream": True}).encode()
    record_chunks(db, "/v1/responses", request, responses_chunks(event, head, pieces))
    assert leaked_runs(LONG_SECRETS[kind][1], db, "responses") == []
    text = stored_texts(db, "responses")[-1]
    assert re.fullmatch(r"my key is (Bearer )?<redacted:[0-9a-f]{12}> and that is all", text), text


@pytest.mark.parametrize("kind", ["openai", "jwt", "pem"])
def test_the_rest_of_a_secret_in_websocket_frames_is_redacted(tmp_path: Path, kind: str) -> None:
    """The same through the user WebSocket: the start in one frame's stream item, the rest in
    the items of the frames after it."""
    head, pieces = split_secret(kind, size=40)
    frames = [json.loads(frame) for frame in handoff_frames()]
    at = next(i for i, frame in enumerate(frames) if "uma plani" in json.dumps(frame))
    del frames[at + 1]  # its catch-up copy
    added = len(pieces)
    for frame in frames[at + 1 :]:  # the frames after it move on, their items chained after
        frame[0]["offset"] += added if frame[0]["offset"] > frames[at][0]["offset"] else 0
        inner = frame[0]["payload"]["payload"]
        if inner.get("parent_stream_item_id") == "si-4":
            inner["parent_stream_item_id"] = f"si-4.{added}"
    copies = []
    for n, text in enumerate([head, *pieces]):
        copy = json.loads(json.dumps(frames[at]))
        inner = copy[0]["payload"]["payload"]
        copy[0]["offset"] += n
        inner["encoded_item"] = delta({"v": text})
        if n:
            inner["stream_item_id"], inner["parent_stream_item_id"] = f"si-4.{n}", "si-4" + (
                f".{n - 1}" if n > 1 else "")  # fmt: skip
        copies.append(copy)
    frames[at : at + 1] = copies
    frames_text = [json.dumps(frame) for frame in frames]
    db, texts = record_handoff(tmp_path, frames_text)
    assert leaked_runs(LONG_SECRETS[kind][1], db, "conversation") == []
    assert any("my key is <redacted:" in text for text in texts)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    kind=st.sampled_from(sorted(LONG_SECRETS)),
    protocol=st.sampled_from(["conversation", "responses"]),
    cuts=st.lists(st.integers(0, 2000), max_size=40),
)
def test_any_split_of_a_secret_across_frames_leaves_none_of_it(
    tmp_path_factory: pytest.TempPathFactory, kind: str, protocol: str, cuts: list[int]
) -> None:
    """Hypothesis cuts a secret (and the prose around it) anywhere into frames, a network chunk
    each: no run of 8 of its characters past its public prefix is in any column of the
    capture, nor in the text its raw events decode to."""
    prefix, secret, suffix = LONG_SECRETS[kind]
    whole = f"my key is {prefix}{secret}{suffix} and that is all"
    points = sorted({c % (len(whole) + 1) for c in cuts} | {0, len(whole)})
    pieces = [whole[a:b] for a, b in itertools.pairwise(points) if whole[a:b]]
    db = tmp_path_factory.mktemp("split") / "split.db"
    if protocol == "responses":
        request = json.dumps({"model": "m", "input": "hi", "stream": True}).encode()
        record_chunks(db, "/v1/responses", request,
                      responses_chunks("output_text", pieces[0], pieces[1:]))  # fmt: skip
    else:
        record_chunks(db, "/backend-api/f/conversation", b"{}",
                      conversation_chunks(pieces[0], pieces[1:]))  # fmt: skip
    assert leaked_runs(secret, db, protocol) == []


@pytest.mark.parametrize("kind", ["anthropic", "github-fine-grained", "pem"])
def test_the_rest_of_a_secret_in_responses_websocket_frames_is_redacted(
    tmp_path: Path, kind: str
) -> None:
    """The Responses API's WebSocket mode: each server event is a frame of its own."""
    head, pieces = split_secret(kind)
    db = tmp_path / "socket.db"
    recorder = LocalRecorder(str(db), redact=True, echo="off")
    recorder.handle(RequestSeen("s", "GET", "http://x/v1/responses", "x", "/v1/responses", (),
                                None, 1.0))  # fmt: skip
    create = {"type": "response.create", "model": "m", "input": "hi"}
    recorder.handle(SocketFrame("s", True, json.dumps(create), 2.0))
    item = {"item_id": "it_1", "output_index": 0, "content_index": 0}
    deltas = [{"type": "response.output_text.delta", **item, "delta": p} for p in [head, *pieces]]
    events = [{"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
              *deltas,
              {"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
                                                          "output": []}}]  # fmt: skip
    for n, event in enumerate(events):
        recorder.handle(SocketFrame("s", False, json.dumps(event), 3.0 + n / 1000))
    recorder.handle(WebSocketEnded("s", 9.0))
    recorder.close()
    with sqlite3.connect(db) as conn:
        frames = [json.loads(data) for (data,) in events_sql(conn).execute(
            "SELECT convtap_event(data, raw) AS d FROM events WHERE d LIKE '{%' "
            "ORDER BY seq")]  # fmt: skip
    texts = [
        *stored_texts(db, "conversation-less"),
        "".join(f.get("delta", "") for f in frames if isinstance(f, dict)),
    ]
    secret = LONG_SECRETS[kind][1]
    assert sorted(run for run in runs_of(secret) if any(run in t for t in texts)) == []
    assert texts[-1].startswith("my key is <redacted:") and texts[-1].endswith(" and that is all")


def test_an_event_repeated_across_turns_is_redacted_every_time(tmp_path: Path) -> None:
    """Data found clean is remembered, so that echoes are not searched again: an event that
    holds a secret never is, and is redacted in every turn that repeats it."""
    secret = "sk-proj-" + "CANARYecho" * 6
    message = {"id": "m-echo", "author": {"role": "user"}, "status": "finished_successfully",
               "content": {"content_type": "text", "parts": ["words " * 300]},
               "metadata": {"api_key": secret}, "recipient": "all"}  # fmt: skip
    echo = delta({"p": "", "o": "add", "v": {"message": message, "conversation_id": "c1"}})
    clean = delta({"p": "", "o": "add", "v": {"message": {**message, "id": "m-clean",
                   "metadata": {}}, "conversation_id": "c1"}})  # fmt: skip
    body = ('event: delta_encoding\ndata: "v1"\n\n' + clean + echo + "data: [DONE]\n\n").encode()
    for turn in range(3):
        db = tmp_path / f"turn{turn}.db"
        record_stream(db, "/backend-api/f/conversation", b"{}", body, 1 << 20)
        assert b"CANARYecho" not in capture_bytes(db)


def test_two_events_never_make_a_key_between_them(tmp_path: Path) -> None:
    """The events' data is searched a line each: an event that ends in `"cot` before one that
    starts `_token"` made a harmless marker between them, and the second's key went unseen (its
    value stored in clear)."""
    body = ('data: x "cot\n\ndata: _token": "CANARYsplit"\n\n' + "data: [DONE]\n\n").encode()
    db = tmp_path / "split.db"
    record_stream(db, "/backend-api/f/conversation", b"{}", body, 1 << 20)
    assert b"CANARYsplit" not in capture_bytes(db)
