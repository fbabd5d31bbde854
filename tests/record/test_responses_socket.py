"""The Responses API's WebSocket mode through the recorder: `response.create` frames are requests,
the server's events their responses (one after another, and side by side on `stream_id`
lanes); each turn is a flow of its own, so that pairing, acceptance and the rules work as for
HTTP. The server's side is played by the mock's own Responses server."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from convtap.ingest.capture import audit_capture, ledger
from convtap.journal.events import RequestSeen, WebSocketEnded, WebSocketMessage
from convtap.mock.responses import ResponsesServer
from convtap.mock.scenario import load_scenario
from convtap.record.local import LocalRecorder
from convtap.wire.sse import SSEParser

from tests.harness import capture_bytes, events_sql

PATH = "/v1/responses"
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"type": "function", "name": "get_weather", "parameters": CITY}]


class Socket:
    """A client and the mock's Responses server on one socket, recorded as the proxy would."""

    def __init__(self, db: Path) -> None:
        scenario = load_scenario("declared").responses
        assert scenario is not None
        self.server = ResponsesServer(scenario, seed=1)
        self.recorder = LocalRecorder(str(db), redact=True)
        self.at = 1.0
        self.recorder.handle(RequestSeen("s", "GET", "http://x" + PATH, "x", PATH, (), None, 1.0))

    def send(self, frame: dict[str, Any]) -> None:
        self.at += 1
        self.recorder.handle(WebSocketMessage("s", True, json.dumps(frame), self.at))

    def receive(self, event: dict[str, Any]) -> None:
        self.at += 1
        self.recorder.handle(WebSocketMessage("s", False, json.dumps(event), self.at))

    def answer(self, create: dict[str, Any], lane: str | None = None) -> list[dict[str, Any]]:
        """The server's events for a create (not yet received)."""
        _, entries = self.server.answer(create)
        events = [json.loads(e.data) for e in SSEParser().feed("".join(entries).encode())]
        return [{**e, "stream_id": lane} if lane else e for e in events]

    def turn(self, create: dict[str, Any], lane: str | None = None) -> dict[str, Any]:
        self.send({"type": "response.create", **create, **({"stream_id": lane} if lane else {})})
        events = self.answer(create, lane)
        for event in events:
            self.receive(event)
        return events[-1]["response"]  # response.completed's

    def close(self) -> None:
        self.recorder.handle(WebSocketEnded("s", self.at + 1))
        self.recorder.close()


def calls_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in response["output"] if i["type"] == "function_call"]


def test_a_socket_session_is_recorded_paired_and_audited_like_http(tmp_path: Path) -> None:
    db = tmp_path / "socket.db"
    socket = Socket(db)
    first = socket.turn({"model": "gpt-5.1", "tools": TOOLS, "input": "weather in Lisbon?"})
    (call,) = calls_of(first)
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"}
    socket.turn({"model": "gpt-5.1", "previous_response_id": first["id"], "input": [output]})
    socket.close()
    rows = {r.call_id: r for r in ledger(db)}
    assert rows[call["call_id"]].answered and rows[call["call_id"]].accepted
    assert rows[call["call_id"]].turn_id == "s#1"
    with sqlite3.connect(db) as conn:
        turns = conn.execute(
            "SELECT id, kind, status, outcome, turn_id FROM flows WHERE source = 'socket' "
            "ORDER BY id").fetchall()  # fmt: skip
        frames = conn.execute("SELECT event, count(*) FROM events GROUP BY event").fetchall()
    assert turns == [("s#1", "responses", 200, "complete", "s"),
                     ("s#2", "responses", 200, "complete", "s")]  # fmt: skip
    assert dict(frames)["ws:client"] == 2 and dict(frames)["ws:server"] > 10
    assert [f.rule for f in audit_capture(db).findings] == []


def test_a_wrong_call_id_over_the_socket_is_found(tmp_path: Path) -> None:
    db = tmp_path / "wrong.db"
    socket = Socket(db)
    first = socket.turn({"model": "gpt-5.1", "tools": TOOLS, "input": "weather?"})
    (call,) = calls_of(first)
    wrong = {"type": "function_call_output", "call_id": call["id"], "output": "21 C"}  # fc_…
    socket.turn({"model": "gpt-5.1", "previous_response_id": first["id"], "input": [wrong]})
    socket.close()
    rules = [f.rule for f in audit_capture(db).findings]
    assert "responses-output-call-id" in rules and "responses-call-unanswered" in rules


def test_lanes_run_side_by_side_and_a_cut_socket_loses_nothing(tmp_path: Path) -> None:
    """Two lanes interleaved, each create answered on its own lane; a third create whose
    response is cut by the socket closing: its call is still recorded, its turn interrupted."""
    db = tmp_path / "lanes.db"
    socket = Socket(db)
    a = {"model": "gpt-5.1", "tools": TOOLS, "input": "a?"}
    b = {"model": "gpt-5.1", "tools": TOOLS, "input": "b?"}
    socket.send({"type": "response.create", **a, "stream_id": "A"})
    socket.send({"type": "response.create", **b, "stream_id": "B"})
    events_a, events_b = socket.answer(a, "A"), socket.answer(b, "B")
    for pair in zip(events_a, events_b, strict=False):
        for event in pair:
            socket.receive(event)
    for event in events_a[len(events_b) :] + events_b[len(events_a) :]:
        socket.receive(event)
    c = {"model": "gpt-5.1", "tools": TOOLS, "input": "c?"}
    socket.send({"type": "response.create", **c})
    cut = socket.answer(c)
    for event in cut[: len(cut) - 3]:  # up to the call's arguments, before it is done
        socket.receive(event)
    socket.close()
    with sqlite3.connect(db) as conn:
        turns = dict(conn.execute("SELECT id, outcome FROM flows WHERE source = 'socket'"))
        calls = dict(conn.execute("SELECT call_id, turn_id FROM tool_calls"))
    assert turns == {"s#1": "complete", "s#2": "complete", "s#3": "interrupted: the socket closed"}
    assert sorted(calls.values()) == ["s#1", "s#2", "s#3"]
    first_a = calls_of(events_a[-1]["response"])[0]["call_id"]
    assert calls[first_a] == "s#1"  # lane A's create is turn 1, whatever B streamed meanwhile


def test_an_error_frame_refuses_its_create(tmp_path: Path) -> None:
    db = tmp_path / "error.db"
    socket = Socket(db)
    socket.send({"type": "response.create", "model": "gpt-5.1", "previous_response_id": "resp_x",
                 "input": []})  # fmt: skip
    message = "Previous response with id 'resp_x' not found."
    error = {"type": "invalid_request_error", "message": message}
    socket.receive({"type": "error", "status": 400, "error": error})
    socket.close()
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT status, outcome, response_body FROM flows WHERE id = 's#1'")
        status, outcome, body = row.fetchone()
    assert (status, outcome) == (400, "error") and "not found" in body


def test_a_socket_session_comes_back_from_its_har_export(tmp_path: Path) -> None:
    """Exported as HAR (the socket an entry with `_webSocketMessages`, its turns not entries of
    their own) and imported again: the same calls, returns and findings."""
    from convtap.export.har import export_har
    from convtap.ingest.capture import import_into
    from convtap.ingest.replay import reprocess_db

    db = tmp_path / "socket.db"
    socket = Socket(db)
    first = socket.turn({"model": "gpt-5.1", "tools": TOOLS, "input": "weather in Lisbon?"})
    (call,) = calls_of(first)
    wrong = {"type": "function_call_output", "call_id": call["id"], "output": "21 C"}
    socket.turn({"model": "gpt-5.1", "previous_response_id": first["id"], "input": [wrong]})
    socket.close()
    har = tmp_path / "socket.har"
    assert export_har(db, har) == 1  # the socket alone
    entry = json.loads(har.read_text())["log"]["entries"][0]
    assert entry["response"]["status"] == 101 and len(entry["_webSocketMessages"]) > 10
    again = tmp_path / "again.db"
    import_into(again, [har])

    def seen(path: Path) -> tuple[Any, ...]:
        # the turn within its socket (an import names the socket's flow anew)
        calls = sorted((r.call_id, (r.turn_id or "").rsplit("#")[1], r.answered)
                       for r in ledger(path))  # fmt: skip
        return calls, sorted(f.rule for f in audit_capture(path).findings)

    assert seen(again) == seen(db)
    assert seen(db)[1] == ["responses-call-unanswered", "responses-output-call-id"]
    before = seen(db)
    reprocess_db(db)  # decoded again from the socket's raw frames: the same
    assert seen(db) == before


def test_a_warm_up_create_generates_nothing_and_its_id_chains(tmp_path: Path) -> None:
    """`generate: false` (the Codex CLI's first create on a socket): a response with no output,
    whose id the next create names; nothing to answer, nothing found."""
    db = tmp_path / "warm.db"
    socket = Socket(db)
    warm = socket.turn({"model": "gpt-5.1", "tools": TOOLS, "input": [], "generate": False})
    assert warm["output"] == [] and warm["status"] == "completed"
    socket.turn({"model": "gpt-5.1", "previous_response_id": warm["id"], "input": "hi"})
    socket.close()
    with sqlite3.connect(db) as conn:
        turns = conn.execute("SELECT id, outcome FROM flows WHERE source = 'socket'").fetchall()
        first = conn.execute("SELECT count(*) FROM tool_calls WHERE turn_id = 's#1'").fetchone()
    assert sorted(turns) == [("s#1", "complete"), ("s#2", "complete")] and first == (0,)


def test_steering_is_kept_and_said(tmp_path: Path) -> None:
    """`response.steer` and the server's answers: kept raw on the socket, one line each."""
    from convtap.record.recorder import Recorder
    from convtap.redact.redactor import Redactor

    lines: list[str] = []
    rows: list[Any] = []

    class Sink:
        def put(self, row: Any) -> None:
            rows.append(row)

    recorder = Recorder(Sink(), Redactor(b"k"), lines.append)
    recorder.handle(RequestSeen("s", "GET", "http://x" + PATH, "x", PATH, (), None, 1.0))
    steer = {"type": "response.steer", "previous_response_id": "resp_1",
             "input": [{"role": "user", "content": "shorter, please"}]}  # fmt: skip
    over = {"code": "response_completed", "message": "the response is over"}
    failed = {"type": "response.steer.failed", "response_id": "resp_1", "error": over}
    recorder.handle(WebSocketMessage("s", True, json.dumps(steer), 2.0))
    recorder.handle(WebSocketMessage("s", False, json.dumps(failed), 3.0))
    recorder.handle(WebSocketEnded("s", 4.0))
    assert lines == ["steer   steer  resp_1  1 input item(s)",
                     "steer   steer.failed  resp_1  the response is over"]  # fmt: skip
    kept = [row.event for row in rows if row.TABLE == "events"]
    assert kept == ["ws:client", "ws:server"]


def test_a_secret_streamed_across_delta_frames_is_not_kept(tmp_path: Path) -> None:
    """The model repeats a key the user pasted, 4 characters a frame (`output_text.delta`):
    no frame holds it whole, and none of it is stored in clear."""
    db = tmp_path / "secret.db"
    socket = Socket(db)
    key = "sk-proj-" + "Q7wErTy9UiOp3AsDfGhJkL1z"
    socket.send({"type": "response.create", "model": "gpt-5.1", "input": "repeat my key"})
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress",
            "content": []}  # fmt: skip
    text = f"Your key is {key}, keep it safe."
    events = [{"type": "response.created", "response": {"id": "resp_1", "status": "in_progress",
                                                       "output": []}},
              {"type": "response.output_item.added", "output_index": 0, "item": item}]  # fmt: skip
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    events += [{"type": "response.output_text.delta", **where, "delta": text[n : n + 4]}
               for n in range(0, len(text), 4)]  # fmt: skip
    events.append({"type": "response.completed",
                   "response": {"id": "resp_1", "status": "completed", "output": []}})  # fmt: skip
    for event in events:
        socket.receive(event)
    socket.close()
    stored = capture_bytes(db)
    assert key.encode() not in stored and b"Q7wErTy9UiOp" not in stored
    with sqlite3.connect(db) as conn:
        frames = [json.loads(d) for (d,) in events_sql(conn).execute(
            "SELECT convtap_event(data, raw) FROM events WHERE event = 'ws:server' "
            "ORDER BY seq")]  # fmt: skip
    assert len(frames) == len(events)  # every frame kept, in order, each still JSON
    assert [f["type"] for f in frames] == [e["type"] for e in events]
    streamed = "".join(f.get("delta", "") for f in frames)  # the text, as a client reads it
    assert "Your key is " in streamed and key not in streamed and "Q7wErTy9" not in streamed
    assert "<redacted:" in streamed


def test_a_chain_that_mixes_http_and_the_socket_pairs_across_them(tmp_path: Path) -> None:
    """The first response over HTTP, its outputs over a socket naming it by
    previous_response_id: paired, accepted, no finding."""
    from convtap.journal.events import BodyChunk, ResponseEnded, ResponseStarted

    db = tmp_path / "mixed.db"
    socket = Socket(db)
    create = {"model": "gpt-5.1", "tools": TOOLS, "input": "weather?", "stream": True}
    events = socket.answer(create)
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    sse = (("content-type", "text/event-stream"),)
    handle = socket.recorder.handle
    handle(RequestSeen("h", "POST", "http://x" + PATH, "x", PATH, (), json.dumps(create).encode(),
                       1.5))  # fmt: skip
    handle(ResponseStarted("h", 200, sse))
    handle(BodyChunk("h", body, 1.6))
    handle(ResponseEnded("h", 200, sse, None, "complete", 1.7))
    first = events[-1]["response"]
    (call,) = calls_of(first)
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"}
    socket.turn({"model": "gpt-5.1", "previous_response_id": first["id"], "input": [output]})
    socket.close()
    (row,) = [r for r in ledger(db) if r.call_id == call["call_id"]]
    assert (row.turn_id, row.answered, row.accepted) == ("h", True, True)
    assert [f.rule for f in audit_capture(db).findings] == []


def test_a_frame_larger_than_an_sse_event_is_kept_whole_and_lanes_are_bounded(
    tmp_path: Path,
) -> None:
    """A 5 MB server frame (past the SSE parser's 4 MB event bound, which the socket's
    redaction goes through) is stored as it came; a client opening 3,000 lanes holds at most
    `MAX_LANES` of them."""
    from convtap.record.responses import MAX_LANES

    db = tmp_path / "big.db"
    socket = Socket(db)
    socket.send({"type": "response.create", "model": "gpt-5.1", "input": "long"})
    created = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress",
                                                        "output": []}}  # fmt: skip
    delta = {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
             "content_index": 0, "delta": "x" * 5_000_000}  # fmt: skip
    socket.receive(created)
    socket.receive(delta)
    for n in range(3000):
        socket.send({"type": "response.create", "model": "gpt-5.1", "stream_id": f"lane-{n}",
                     "input": "hi"})  # fmt: skip
    sockets = socket.recorder.recorder.responses.sockets
    (state,) = sockets.values()
    assert len(state.waiting) <= MAX_LANES
    socket.close()
    with sqlite3.connect(db) as conn:
        frames = [d for (d,) in events_sql(conn).execute(
            "SELECT convtap_event(data, raw) FROM events WHERE event = 'ws:server' "
            "ORDER BY seq")]  # fmt: skip
    assert [json.loads(f) for f in frames] == [created, delta]


def test_frames_of_any_shape_are_recorded_without_a_failure_of_ours(tmp_path: Path) -> None:
    """Found by a fuzz of this session's frames: a create whose `input` is a number, and a
    call named by a number, raised inside the recorder (a failure on the flow, the socket's
    other turns left open)."""
    db = tmp_path / "odd.db"
    socket = Socket(db)
    socket.send({"type": "response.create", "model": "m", "input": 1, "stream_id": "A"})
    socket.receive({"type": "response.created", "stream_id": "A", "output_index": 0,
                    "item": {"type": "function_call", "name": 1, "call_id": "call_1"}})  # fmt: skip
    socket.close()
    with sqlite3.connect(db) as conn:
        failures = [f for (f,) in conn.execute("SELECT failure FROM flows") if f]
        calls = conn.execute("SELECT call_id, tool FROM tool_calls").fetchall()
        turns = conn.execute("SELECT outcome FROM flows WHERE source = 'socket'").fetchall()
    assert failures == [] and calls == [("call_1", "1")]  # the column holds text
    assert turns == [("interrupted: the socket closed",)]
