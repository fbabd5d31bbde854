"""`convtap export` (convtap.export.har) and `--shape-only` (convtap.export.blank): a capture
as HAR that import, mitmproxy and browsers read back, with or without its words."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from convtap.contract.happenings import replay_miss
from convtap.export.blank import (
    JsonTextShaper,
    keeps,
    keeps_in_tool_data,
    shape_json_text,
    shape_value,
)
from convtap.export.blank_stream import SseShaper, StreamShaper
from convtap.ingest.capture import import_into
from convtap.ingest.readers import read_flows
from convtap.wire.delta import DeltaDecoder
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.responses import decode_responses
from convtap.wire.turn import decode_turn
from hypothesis import given, settings
from hypothesis import strategies as st
from mitmproxy import io, websocket
from mitmproxy.test import tflow
from wsproto.frame_protocol import Opcode

from tests.harness import events_sql
from tests.runner import convtap

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "captures" / "examples"
MITM12 = ROOT / ".venv-mitm12" / "bin" / "python"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
RESPONSES_ID = re.compile(r"\b(resp|fc|call|tsc|msg)_((?=[A-Za-z0-9]*\d)[A-Za-z0-9]{6,})")
WORD = re.compile(r"[^\W\d_]{4,}")
HOUR = 3600


# -- captures ------------------------------------------------------------------------------------


def own_ids(text: str, n: int) -> str:
    """A fixture with ids (and challenges) of its own, so that fixtures merged into one capture
    do not answer each other's calls."""
    text = UUID.sub(lambda m: m.group()[:-4] + f"{n:04x}", text)
    text = RESPONSES_ID.sub(lambda m: f"{m.group(1)}_{m.group(2)}f{n}", text)
    return text.replace("attest-challenge-", f"attest-challenge-f{n}-")


def shifted(har: dict[str, Any], seconds: float) -> dict[str, Any]:
    for entry in har["log"]["entries"]:
        at = datetime.fromisoformat(entry["startedDateTime"].replace("Z", "+00:00"))
        entry["startedDateTime"] = (at + timedelta(seconds=seconds)).isoformat()
    return har


def har_entry(url: str, at: str, request: Any, response: str, content_type: str) -> dict[str, Any]:
    body = json.dumps(request)
    return {
        "startedDateTime": at, "time": 300,
        "request": {"method": "POST", "url": url, "httpVersion": "HTTP/1.1", "cookies": [],
                    "headers": [{"name": "content-type", "value": "application/json"}],
                    "queryString": [], "headersSize": -1, "bodySize": len(body),
                    "postData": {"mimeType": "application/json", "text": body}},
        "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "cookies": [],
                     "headers": [{"name": "content-type", "value": content_type}],
                     "content": {"size": len(response), "mimeType": content_type,
                                 "text": response},
                     "redirectURL": "", "headersSize": -1, "bodySize": len(response)},
        "cache": {}, "timings": {"send": 1, "wait": 298, "receive": 1},
    }  # fmt: skip


def responses_examples() -> dict[str, Any]:
    """captures/examples/responses: the streamed calls, answered wrongly by item id."""
    url = "https://api.openai.com/v1/responses"
    first = {
        "model": "gpt-5.1",
        "stream": True,
        "input": [{"role": "user", "content": "Quero saber o clima amanhã, por favor."}],
    }
    answer = json.loads((EXAMPLES / "responses" / "answer_item_id.json").read_text())
    stream = (EXAMPLES / "responses" / "function_call.sse").read_text()
    final = json.dumps({"id": "resp_9b1dfeed", "object": "response", "status": "completed",
                        "output": [{"type": "message", "id": "msg_9", "role": "assistant",
                                    "content": [{"type": "output_text",
                                                 "text": "Amanhã faz sol."}]}]})  # fmt: skip
    entries = [
        har_entry(url, "2026-10-01T10:00:00.000Z", first, stream, "text/event-stream"),
        har_entry(url, "2026-10-01T10:00:05.000Z", answer, final, "application/json"),
    ]
    return {"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}}


def fixture_files(folder: Path) -> list[Path]:
    """Every rule's failing session (ids of its own, an hour apart), the Responses examples,
    and the example streams (a resume leg, legacy framing, malformed events, non-ASCII text
    under a content type without a charset)."""
    files = []
    for n, har in enumerate(sorted((EXAMPLES / "rules").glob("*/fail.har"))):
        path = folder / f"{har.parent.name}.har"
        path.write_text(json.dumps(shifted(json.loads(own_ids(har.read_text(), n)), n * HOUR)))
        files.append(path)
    path = folder / "responses.har"
    path.write_text(json.dumps(responses_examples()))
    files.append(path)
    at = 1_800_000_000
    streams = sorted(p for p in (EXAMPLES / "sse").glob("*.sse") if ".resume" not in p.name)
    for n, sse in enumerate(streams):
        sidecars = [*sse.parent.glob(sse.stem + ".resume*.sse"), sse.with_suffix(".request.json")]
        for source in [sse, *sidecars]:
            if source.exists():
                shutil.copy(source, folder / source.name)
                os.utime(folder / source.name, (at + n * HOUR, at + n * HOUR))
        files.append(folder / sse.name)
    return files


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("original")
    db = folder / "capture.db"
    results = import_into(db, fixture_files(folder))
    assert not [r.error for r in results if r.error]
    return db


@pytest.fixture(scope="module")
def exports(original: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The whole export and the shape-only one, each with the database it imports into."""
    folder = tmp_path_factory.mktemp("exports")
    out: dict[str, Path] = {}
    for name, flags in (("full", ()), ("shape", ("--shape-only",))):
        har = out[f"{name}.har"] = folder / f"{name}.har"
        proc = convtap("export", "--db", str(original), "--output", str(har), *flags)
        assert proc.returncode == 0, proc.stderr
        db = out[f"{name}.db"] = folder / f"{name}.db"
        assert convtap("import", str(har), "--db", str(db)).returncode == 0
    return out


# -- what a capture says -------------------------------------------------------------------------


def flow_free(text: str | None) -> str:
    """A return id without the flow id a Responses output's id is made of (import ids are
    derived from content)."""
    return re.sub(r"^.*(:\d+)$", r"\1", text or "")


def ledger(db: Path) -> list[tuple[Any, ...]]:
    rows = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    keys = ("call_id", "protocol", "tool", "kind", "recipient", "conversation_id", "complete",
            "answered", "accepted", "continued", "findings")  # fmt: skip
    return [(*(r[k] for k in keys), flow_free(r["return_id"])) for r in rows]


def findings(db: Path) -> list[tuple[str, str, str, str]]:
    out = json.loads(convtap("audit", "--db", str(db), "--format", "json").stdout)
    return sorted(
        (f["rule"], f["severity"], f["call_id"] or "", flow_free(f["return_id"]))
        for f in out["findings"]
    )


def turns(db: Path) -> list[tuple[Any, ...]]:
    """How each turn decoded: events, errors (where and what kind), done, complete, cut, legs."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT event_count, errors, done, stream_complete, truncated, legs "
                            "FROM turns ORDER BY started_at").fetchall()  # fmt: skip
    return [
        (count, [(e["event_index"], e["kind"]) for e in json.loads(errors)], *rest)
        for count, errors, *rest in rows
    ]


def responses_streams(db: Path) -> list[tuple[int, list[str], list[str]]]:
    """Each Responses stream's event count, decode errors and client calls' arguments' keys."""

    out = []
    with events_sql(sqlite3.connect(db)) as conn:
        flows = conn.execute("SELECT id FROM flows WHERE kind = 'responses' ORDER BY started_at")
        for (flow_id,) in flows.fetchall():
            rows = conn.execute(
                "SELECT convtap_event(data, raw) FROM events WHERE flow_id = ? ORDER BY seq",
                (flow_id,),
            )
            body = "".join(data for (data,) in rows).encode()
            if not body:
                continue
            decoder = decode_responses([body])
            errors = [e["kind"] for e in decoder.errors]
            with sqlite3.connect(db) as again:
                arguments = again.execute(
                    "SELECT arguments FROM tool_calls WHERE turn_id = ?", (flow_id,)
                ).fetchall()
            keys = sorted(k for (a,) in arguments for k in (loads_or_none(a) or {}))
            out.append((decoder.event_count, errors, keys))
    return out


# -- (a) and (b): the export reads back ----------------------------------------------------------


def test_export_and_import_give_the_same_calls_returns_and_findings(
    original: Path, exports: dict[str, Path]
) -> None:
    assert ledger(exports["full.db"]) == ledger(original)
    assert len(ledger(original)) > 30
    rules = {f[0] for f in findings(original)}
    assert len(rules) == len(list((EXAMPLES / "rules").glob("*/fail.har")))  # every rule fires
    assert findings(exports["full.db"]) == findings(original)
    assert turns(exports["full.db"]) == turns(original)


def test_export_is_har_that_mitmproxy_reads(original: Path, exports: dict[str, Path]) -> None:
    har = json.loads(exports["full.har"].read_text())
    with sqlite3.connect(original) as conn:
        # the flows that came over the wire: a socket's turns are derived from its frames
        (count,) = conn.execute(
            "SELECT count(*) FROM flows WHERE source IS NOT 'socket'"
        ).fetchone()
    assert har["log"]["version"] == "1.2" and len(har["log"]["entries"]) == count
    for entry in har["log"]["entries"]:
        assert {"startedDateTime", "time", "request", "response", "cache", "timings"} <= set(entry)
        assert {"size", "mimeType"} <= set(entry["response"]["content"])
    flows = [flow for flow, _ in read_flows(exports["full.har"])]
    assert len(flows) == count
    assert [f.request.timestamp_start for f in flows] == sorted(
        f.request.timestamp_start for f in flows
    )


def test_an_event_stream_comes_back_byte_exact(original: Path, exports: dict[str, Path]) -> None:
    """Non-ASCII text under `text/event-stream` without a charset goes in base64 (mitmproxy
    would encode it as latin-1), a cut stream ends cut again."""
    har = json.loads(exports["full.har"].read_text())
    with events_sql(sqlite3.connect(original)) as conn:
        flows = conn.execute("SELECT id, outcome FROM flows WHERE source IS NOT 'socket' "
                             "ORDER BY started_at, rowid").fetchall()  # fmt: skip
        for (flow_id, outcome), entry in zip(flows, har["log"]["entries"], strict=True):
            content = entry["response"]["content"]
            if content["mimeType"] != "text/event-stream":
                continue
            rows = conn.execute(
                "SELECT convtap_event(data, raw) FROM events WHERE flow_id = ? ORDER BY seq",
                (flow_id,),
            )
            stored = "".join(data for (data,) in rows) + (
                "data: " if outcome == "truncated" else ""
            )
            text = content["text"]
            if content.get("encoding") == "base64":
                text = base64.b64decode(text).decode()
                assert not stored.isascii()
            assert text == stored
            assert content["size"] == len(stored.encode())
    assert any(e["response"]["content"].get("encoding") for e in har["log"]["entries"])


READ_WITH_MITMPROXY = """
import hashlib, sys
from mitmproxy import http, io
with open(sys.argv[1], "rb") as handle:
    for flow in io.FlowReader(handle).stream():
        assert isinstance(flow, http.HTTPFlow)
        digest = hashlib.sha256(flow.request.get_content() or b"")
        digest.update(flow.response.get_content() or b"")
        print(flow.request.method, flow.request.pretty_url, digest.hexdigest())
"""


def read_back(python: Path, har: Path) -> list[str]:
    proc = subprocess.run([str(python), "-c", READ_WITH_MITMPROXY, str(har)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.process
@pytest.mark.skipif(not MITM12.exists(), reason="no .venv-mitm12 (mitmproxy 12)")
def test_mitmproxy_11_and_12_read_the_same_bodies(exports: dict[str, Path]) -> None:
    here = read_back(ROOT / ".venv" / "bin" / "python", exports["full.har"])
    assert len(here) == len(json.loads(exports["full.har"].read_text())["log"]["entries"])
    assert read_back(MITM12, exports["full.har"]) == here


# -- (c) --shape-only ----------------------------------------------------------------------------


def test_blank_words_keeps_calls_findings_and_decoding(
    original: Path, exports: dict[str, Path]
) -> None:
    shaped = exports["shape.db"]
    assert ledger(shaped) == ledger(original)
    assert findings(shaped) == findings(original)
    assert turns(shaped) == turns(original)
    assert responses_streams(shaped) == responses_streams(original)
    proc = convtap("diff", str(original), str(exports["shape.har"]), "--fail-on", "breaking")
    assert proc.returncode == 0, proc.stdout


def test_blank_words_leaves_none_of_the_words(original: Path, exports: dict[str, Path]) -> None:
    words = session_words(original)
    assert len(words) > 30
    assert not words & har_words(exports["shape.har"])
    assert not words & decoded_words(exports["shape.db"])  # text put together across legs
    # the check itself sees them all
    whole = har_words(exports["full.har"]) | decoded_words(exports["full.db"])
    assert words <= whole | own_words(exports["full.har"])


def decoded_words(db: Path) -> set[str]:
    """The words of a capture's messages, calls and returns, as decoded."""
    with sqlite3.connect(db) as conn:
        texts = [row[0] or "" for row in conn.execute(
            "SELECT text FROM messages UNION ALL SELECT arguments_text FROM tool_calls "
            "UNION ALL SELECT message FROM tool_returns")]  # fmt: skip
    return {w.lower() for text in texts for w in WORD.findall(text)}


def session_words(db: Path) -> set[str]:
    """Words of 4+ letters of the messages' text and the tools' arguments and results, less the
    ones the shape keeps (keys, ids, enumerations, tool names)."""
    texts: list[str] = []
    kept: list[str] = []
    with events_sql(sqlite3.connect(db)) as conn:
        for (message,) in conn.execute(
            "SELECT convtap_message(json, text, json_without_text) FROM messages"
        ):
            texts += message_strings(json.loads(message))
        for (arguments,) in conn.execute("SELECT arguments_text FROM tool_calls"):
            texts += tool_strings(arguments)
        for (message,) in conn.execute("SELECT message FROM tool_returns"):
            item = json.loads(message)
            texts += message_strings(item) + tool_strings(item.get("output"))
        for (body,) in conn.execute("SELECT request_body FROM flows WHERE kind = 'responses'"):
            for item in (loads_or_none(body) or {}).get("input") or []:
                content = item.get("content") if isinstance(item, dict) else None
                texts += [content] if isinstance(content, str) else []
        for (name,) in conn.execute("SELECT recipient FROM tool_calls"):
            kept.append(name)
        for (data,) in conn.execute("SELECT convtap_event(data, raw) FROM events"):
            kept += kept_strings([loads_or_none(line[6:]) for line in data.split("\n")])
        for row in conn.execute("SELECT request_body, response_body FROM flows"):
            kept += kept_strings([loads_or_none(text) for text in row])
    allowed = {w.lower() for text in kept for w in WORD.findall(text)}
    return {w.lower() for text in texts for w in WORD.findall(text)} - allowed


def message_strings(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if not isinstance(content, dict):
        return []
    parts = [p for p in content.get("parts") or [] if isinstance(p, str)]
    text = content.get("text")
    return parts + (tool_strings(text) if isinstance(text, str) else [])


def tool_strings(text: Any) -> list[str]:
    """The string values of tool data (JSON text), but ids and the return's `tool`."""
    value = loads_or_none(text) if isinstance(text, str) else None
    if value is None:
        return [text] if isinstance(text, str) else []
    out: list[str] = []

    def walk(item: Any, key: str | None) -> None:
        if isinstance(item, dict):
            for k, v in item.items():
                walk(v, k)
        elif isinstance(item, list):
            for v in item:
                walk(v, key)
        elif isinstance(item, str) and not keeps_in_tool_data(key):
            out.append(item)

    walk(value, None)
    return out


def kept_strings(values: list[Any]) -> list[str]:
    """Keys, and the values of kept keys, anywhere in these values."""
    out: list[str] = []

    def walk(item: Any, key: str | None) -> None:
        if isinstance(item, dict):
            for k, v in item.items():
                out.append(k)
                walk(v, k)
        elif isinstance(item, list):
            for v in item:
                walk(v, key)
        elif isinstance(item, str) and keeps(key):
            out.append(item)

    for value in values:
        walk(value, None)
    return out


def har_words(har: Path) -> set[str]:
    """Every word in a HAR file (but its own, `own_words`): its raw text, and every string in
    it read as JSON, its event streams decoded and its bodies (base64 decoded) parsed as deep as
    they go."""
    raw = har.read_text()
    words = {w.lower() for text in [raw, *strings_in(json.loads(raw))] for w in WORD.findall(text)}
    return words - own_words(har)


def own_words(har: Path) -> set[str]:
    """The words of the HAR format itself (its keys) and of convtap's comment."""
    document = json.loads(har.read_text())
    own = [document["log"].get("comment", ""), *kept_strings([document])]
    return {w.lower() for text in own for w in WORD.findall(text)}


def strings_in(value: Any, depth: int = 0) -> Iterator[str]:
    if isinstance(value, dict):
        if value.get("encoding") == "base64" and isinstance(value.get("text"), str):
            value = {**value, "text": base64.b64decode(value["text"]).decode()}
        for item in value.values():
            yield from strings_in(item, depth)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item, depth)
    elif isinstance(value, str):
        yield value
        if depth > 4:
            return
        inner = [loads_or_none(value)]
        inner += [loads_or_none(line[5:]) for line in value.split("\n") if line[:5] == "data:"]
        if "data:" in value:  # text that streams in pieces, put together
            inner.append(decode_turn([value.encode()]).result()["messages"])
        for item in inner:
            if item is not None:
                yield from strings_in(item, depth + 1)


# -- the streaming scanner -----------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
keys = st.sampled_from(["id", "call_id", "tool", "name", "message", "result", "ids"]) | st.text()
values = st.recursive(
    scalars, lambda children: st.lists(children) | st.dictionaries(keys, children), max_leaves=12
)


def skeleton(value: Any, shaped: Any, key: str | None = None, kept: bool = False) -> None:
    """`shaped` has `value`'s keys, types, numbers and kept strings; every other string is only
    x, 0 and what is neither a letter nor a digit."""
    kept = kept or keeps_in_tool_data(key)
    assert type(shaped) is type(value)
    if isinstance(value, dict):
        assert list(shaped) == list(value)
        for k in value:
            skeleton(value[k], shaped[k], k)
    elif isinstance(value, list):
        assert len(shaped) == len(value)
        for a, b in zip(value, shaped, strict=True):
            skeleton(a, b, key, kept and not isinstance(a, dict))
    elif isinstance(value, str) and not kept:
        assert utf16(shaped) == utf16(value)
        assert not re.search(r"[^\W\d_]", shaped.replace("x", ""))
        assert not re.search(r"\d", shaped.replace("0", ""))
    else:
        assert shaped == value


def utf16(text: str) -> int:
    """A length as the protocol counts it (rule 4 `truncate`): UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


@settings(max_examples=300, deadline=None)
@given(values, st.booleans(), st.lists(st.integers(min_value=0), max_size=12))
def test_any_split_of_arguments_shapes_like_the_whole(
    value: Any, ascii_only: bool, cuts: list[int]
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    whole = shape_json_text(text)
    shaper = JsonTextShaper()
    assert "".join(shaper.feed(piece) for piece in pieces(text, cuts)) == whole
    assert utf16(whole) == utf16(text)
    skeleton(value, json.loads(whole))


@settings(max_examples=200, deadline=None)
@given(st.text(), st.lists(st.integers(min_value=0), max_size=8))
def test_any_text_shapes_the_same_in_pieces_and_keeps_its_length(
    text: str, cuts: list[int]
) -> None:
    shaper = JsonTextShaper()
    shaped = "".join(shaper.feed(piece) for piece in pieces(text, cuts))
    assert shaped == shape_json_text(text) and utf16(shaped) == utf16(text)


def test_escapes_in_a_replaced_value_become_x() -> None:
    text = r'{"call_id": "c-1", "message": "S\u00e3o \"Paulo\"\n", "n": -1.5e3, "ok": true}'
    assert shape_json_text(text) == (
        r'{"call_id": "c-1", "message": "x\u0078x \"xxxxx\"\n", "n": -1.5e3, "ok": true}'
    )


@settings(max_examples=100, deadline=None)
@given(values, st.lists(st.integers(min_value=0), max_size=10))
def test_arguments_in_bare_frames_decode_to_the_whole_shaped(value: Any, cuts: list[int]) -> None:
    """docs/protocol.md, "Delta encoding v1", rule 2: pieces appended by bare frames shape as the
    whole arguments do."""
    arguments = json.dumps({"message": value, "call_id": "x"})
    message = {"id": "m1", "author": {"role": "assistant"}, "recipient": "local.echo",
               "channel": "commentary", "status": "in_progress",
               "content": {"content_type": "code", "language": "json", "text": ""}}  # fmt: skip
    frames = [{"p": "", "o": "add", "v": {"message": message}, "c": 0}]
    for n, piece in enumerate(pieces(arguments, cuts)):
        frames.append(
            {"p": "/message/content/text", "o": "append", "v": piece} if n == 0 else {"v": piece}
        )
    body = 'event: delta_encoding\ndata: "v1"\n\n' + "".join(
        f"event: delta\ndata: {json.dumps(f)}\n\n" for f in frames
    )
    shaped = SseShaper(StreamShaper(DeltaDecoder())).feed(body)
    (call,) = decode_turn([shaped.encode()]).tool_calls()
    assert call.arguments_text == shape_json_text(arguments)
    assert call.call_id == "m1" and call.recipient == "local.echo"


# -- WebSocket frames ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def websocket_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The handoff example: the turn's SSE, then the user WebSocket that carries its call."""
    folder = tmp_path_factory.mktemp("ws")
    sse = folder / "turn.sse"
    shutil.copy(EXAMPLES / "sse" / "handoff_ws.sse", sse)
    at = 1_790_000_000.0
    os.utime(sse, (at, at))
    flow = tflow.twebsocketflow()
    flow.request.host, flow.request.path = "chatgpt.com", "/backend-api/ws/user/u1?verify=v"
    flow.request.timestamp_start = at + 1
    lines = (EXAMPLES / "sse" / "handoff_ws.frames.jsonl").read_text().splitlines()
    assert flow.websocket is not None
    flow.websocket.messages = [
        websocket.WebSocketMessage(Opcode.TEXT, False, line.encode(), at + 2 + n / 100)
        for n, line in enumerate(lines)
    ]
    mitm = folder / "ws.mitm"
    with mitm.open("wb") as handle:
        io.FlowWriter(handle).add(flow)
    db = folder / "ws.db"
    assert not [r.error for r in import_into(db, [sse, mitm]) if r.error]
    return db


def decoded_with_frames(har: Path) -> dict[str, Any]:
    stream, socket = json.loads(har.read_text())["log"]["entries"]
    content = stream["response"]["content"]
    body = (
        base64.b64decode(content["text"]) if content.get("encoding") else content["text"].encode()
    )
    frames = [m["data"] for m in socket["_webSocketMessages"] if m["type"] == "receive"]
    return decode_turn([body], frames).result()


def test_websocket_frames_are_written_as_chrome_does(
    websocket_capture: Path, tmp_path: Path
) -> None:
    for flags in ((), ("--shape-only",)):
        har = tmp_path / f"ws{len(flags)}.har"
        assert (
            convtap(
                "export", "--db", str(websocket_capture), "--output", str(har), *flags
            ).returncode
            == 0
        )
        socket = json.loads(har.read_text())["log"]["entries"][1]
        assert socket["_resourceType"] == "websocket" and socket["response"]["status"] == 101
        messages = socket["_webSocketMessages"]
        assert len(messages) == 21 and {m["opcode"] for m in messages} == {1}
        assert all(isinstance(m["time"], float) and m["type"] == "receive" for m in messages)
    whole, shaped = (
        decoded_with_frames(tmp_path / "ws0.har"),
        decoded_with_frames(tmp_path / "ws1.har"),
    )
    assert (
        shaped["event_count"] == whole["event_count"] and shaped["errors"] == whole["errors"] == []
    )
    (call,), (shaped_call,) = whole["tool_calls"], shaped["tool_calls"]
    assert shaped_call["call_id"] == call["call_id"] and shaped_call["tool"] == "handoff"
    assert set(shaped_call["arguments"]) == set(call["arguments"]) == {"prompt", "reason"}
    assert "orçamento" in json.dumps(whole, ensure_ascii=False)
    assert not {"planilha", "orçamento", "Planilhas"} & har_words(tmp_path / "ws1.har")


# -- (d) and (e): read-only, bad input -----------------------------------------------------------


def test_a_read_only_capture_is_not_changed(original: Path, tmp_path: Path) -> None:
    db = tmp_path / "ro.db"
    shutil.copy(original, db)
    db.chmod(0o444)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for flags in ((), ("--shape-only",)):
        proc = convtap("export", "--db", str(db), "--output", str(tmp_path / "out.har"), *flags)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("exported ") and proc.stdout.count("\n") == 1
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.har", "ro.db"]
    assert (tmp_path / "out.har").stat().st_mode & 0o777 == 0o600


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    empty = tmp_path / "empty.db"
    empty.touch()
    cases = [
        ("--db", str(tmp_path / "missing.db")),
        ("--db", str(other)),
        ("--db", str(empty)),
    ]
    for args in cases:
        proc = convtap("export", *args, "--output", str(tmp_path / "out.har"))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith("convtap: ")
    assert not (tmp_path / "out.har").exists()
    assert convtap("export", "--db", str(other)).returncode == 2  # --output is required


def test_an_unwritable_output_is_one_line(original: Path, tmp_path: Path) -> None:
    proc = convtap("export", "--db", str(original), "--output", str(tmp_path / "no" / "x.har"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    proc = convtap("export", "--db", str(original), "--output", str(original))
    assert proc.returncode == 2 and "the capture itself" in proc.stderr


# -- the demo ------------------------------------------------------------------------------------


@pytest.mark.process
def test_the_demo_round_trips_with_and_without_its_words(tmp_path: Path) -> None:
    from convtap.mock.demo import run_demo

    db = tmp_path / "demo.db"
    run_demo(db, lambda line: None)
    for flags in ((), ("--shape-only",)):
        har, again = tmp_path / f"demo{len(flags)}.har", tmp_path / f"again{len(flags)}.db"
        assert convtap("export", "--db", str(db), "--output", str(har), *flags).returncode == 0
        assert convtap("import", str(har), "--db", str(again)).returncode == 0
        assert ledger(again) == ledger(db)
        assert findings(again) == findings(db)
        assert turns(again) == turns(db)
    shaped = tmp_path / "demo1.har"
    assert convtap("diff", str(db), str(shaped), "--fail-on", "breaking").returncode == 0
    words = session_words(db)
    assert {"caminho", "paulo"} <= words
    assert not words & har_words(shaped)


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(["alefita_way_call", "plain_answer", "malformed"]),
       st.lists(st.integers(min_value=0), max_size=20))  # fmt: skip
def test_sse_cut_anywhere_still_decodes_to_the_same_events(name: str, cuts: list[int]) -> None:
    """WebSocket slices cut events anywhere (even between CR and LF): a cut event is shaped as
    its text comes, and the stream decodes to as many events, with the same messages, calls and
    decode errors."""
    body = (EXAMPLES / "sse" / f"{name}.sse").read_bytes().decode()
    shaper = SseShaper(StreamShaper())
    shaped = "".join(shaper.feed(piece) for piece in pieces(body, cuts))
    whole, again = decode_turn([body.encode()]).result(), decode_turn([shaped.encode()]).result()
    assert again["event_count"] == whole["event_count"]
    assert [(e["event_index"], e["kind"]) for e in again["errors"]] == [
        (e["event_index"], e["kind"]) for e in whole["errors"]
    ]
    assert [m["id"] for m in again["messages"]] == [m["id"] for m in whole["messages"]]
    calls = [(c["call_id"], c["recipient"], c["complete"]) for c in whole["tool_calls"]]
    assert [(c["call_id"], c["recipient"], c["complete"]) for c in again["tool_calls"]] == calls
    assert "caminho" not in shaped


def test_a_replay_miss_stays_a_replay_miss_without_its_words() -> None:
    """Both protocols' replay misses are still found in a shape-only body (the audit reads the
    Responses error's `code` and the words that begin f/conversation's `detail`); the rest of
    their text is replaced."""
    detail = "replay miss: POST /backend-api/f/conversation, nearest Paris differs at messages"
    error = {"message": "replay miss: nearest Paris", "type": "invalid_request_error",
             "param": None, "code": "replay_miss"}  # fmt: skip
    bodies: list[dict[str, Any]] = [{"detail": detail}, {"error": error}]
    for body in bodies:
        shaped = shape_value(body)
        assert replay_miss(400, shaped) is not None, shaped
        assert "Paris" not in json.dumps(shaped)
    assert replay_miss(400, shape_value({"detail": "Replay miss? no: Paris"})) is None
