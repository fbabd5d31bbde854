"""convtap.record.recorder fed events directly: what each event makes of the rows."""

from __future__ import annotations

import json
from typing import Any

from convtap.journal.events import (
    BodyChunk,
    OwnFailure,
    RequestSeen,
    ResponseEnded,
    ResponseStarted,
)
from convtap.record.recorder import Recorder
from convtap.redact.redactor import Redactor
from convtap.store.rows import Row

from tests.harness import events_sql
from tests.seeds import SSE

STREAM = (("content-type", "text/event-stream"),)
RESUME = "/backend-api/f/conversation/resume"


class Rows:
    def __init__(self) -> None:
        self.rows: list[Row] = []

    def put(self, row: Row) -> None:
        self.rows.append(row)

    def table(self, name: str) -> list[dict[str, Any]]:
        return [dict(zip(*row.columns(), strict=True)) for row in self.rows if name == row.TABLE]


def test_a_resume_leg_of_an_unseen_turn_is_kept_as_a_turn_of_its_own() -> None:
    sink = Rows()
    recorder = Recorder(sink, Redactor(b"k"))
    body = (SSE / "resume_cut.resume.sse").read_bytes()
    request = b'{"conversation_id": "c-1", "offset": 12}'
    recorder.handle(RequestSeen("leg", "POST", "https://x" + RESUME, "x", RESUME, (), request, 1.0))
    recorder.handle(ResponseStarted("leg", 200, STREAM))
    recorder.handle(BodyChunk("leg", body, 2.0))
    recorder.handle(ResponseEnded("leg", 200, STREAM, None, "complete", 3.0))
    recorder.close()
    assert sink.table("events"), "the leg's raw events are kept"
    turns = {row["id"]: row for row in sink.table("turns")}
    assert turns["leg"]["legs"] == 1 and turns["leg"]["event_count"] > 0
    assert [f["outcome"] for f in sink.table("flows") if "outcome" in f] == ["complete"]


class _ClosedPipe:
    writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_the_recorder_goes_on_when_nobody_reads_its_lines(monkeypatch: Any) -> None:
    """`convtap record | head`: once its reader is gone, the recorder stops saying its lines
    and records on (a write into the closed pipe neither raises nor is tried again)."""
    from convtap.record.local import echo_to

    pipe = _ClosedPipe()
    monkeypatch.setattr("sys.stdout", pipe)
    echo = echo_to("stdout")
    assert echo is not None
    echo("call    local.alefita_way  c1  {}")
    echo("call    local.alefita_way  c2  {}")
    assert pipe.writes == 1
    assert echo_to("off") is None


def test_a_lone_surrogate_in_a_stream_is_recorded_and_the_recorder_goes_on(tmp_path: Any) -> None:
    """JSON text may carry a lone surrogate (`\\ud800`), UTF-8 and so SQLite cannot: the
    message's JSON keeps it as an escape, its text reads U+FFFD (the write raised, and ended
    the recorder process)."""
    import json
    import sqlite3

    from tests.redact.test_canary import record_stream
    from tests.test_cli import LONE_SURROGATES

    db = tmp_path / "lone.db"
    record_stream(db, "/backend-api/f/conversation", b"{}", LONE_SURROGATES.encode(), 40)
    with sqlite3.connect(db) as conn:
        ((text, stored),) = (
            events_sql(conn)
            .execute("SELECT text, convtap_message(json, text, json_without_text) FROM messages")
            .fetchall()
        )
        failures = conn.execute("SELECT failure FROM flows").fetchall()
    assert text == "a\ufffd\ufffdb"
    assert json.loads(stored)["content"]["parts"] == ["a\udc00\ud800b"]
    assert failures == [(None,)]


def test_a_secret_in_our_own_failure_is_redacted(monkeypatch: Any) -> None:
    """A failure of convtap's own code is kept on its flow with the exception's message, which
    may quote what it failed on: a secret there was stored in clear."""
    secret = "sk-proj-CANARY0123456789abcdefghij"

    def fail(self: Recorder, event: BodyChunk) -> None:
        raise ValueError(f"cannot read {secret!r} here")

    monkeypatch.setattr(Recorder, "_chunk", fail)
    sink = Rows()
    recorder = Recorder(sink, Redactor(b"k"))
    path = "/backend-api/f/conversation"
    recorder.handle(RequestSeen("f", "POST", "https://x" + path, "x", path, (), b"{}", 1.0))
    recorder.handle(ResponseStarted("f", 200, STREAM))
    try:
        recorder.handle(BodyChunk("f", b"data: {}\n\n", 2.0))
    except ValueError as exc:  # as the recorder's process does (JournalConsumer._handle)
        recorder.handle(OwnFailure("f", f"{type(exc).__name__}: {exc}"))
    (failure,) = [row["failure"] for row in sink.table("flows") if row.get("failure")]
    assert failure.startswith("ValueError: cannot read '<redacted:") and secret not in failure


def test_the_call_line_printed_is_redacted_as_stored() -> None:
    """`convtap record` prints each call with its arguments: a secret in them was printed in
    clear (often into a CI log) while the database held a placeholder."""
    import json

    secret = "sk-proj-CANARYecho" + "x7" * 12

    def event(value: object) -> str:
        return f"event: delta\ndata: {json.dumps(value)}\n\n"

    call = {"id": "call-1", "author": {"role": "assistant"}, "recipient": "local.alefita_way",
            "channel": "commentary", "status": "in_progress", "metadata": {},
            "content": {"content_type": "code", "language": "json", "text": ""}}  # fmt: skip
    body = "".join([
        'event: delta_encoding\ndata: "v1"\n\n',
        event({"p": "", "o": "add", "v": {"message": call, "conversation_id": "c1"}, "c": 0}),
        event({"p": "/message/content/text", "o": "append",
               "v": json.dumps({"message": f"my key {secret} ok"})}),
        event({"p": "/message/status", "o": "replace", "v": "finished_successfully"}),
        "data: [DONE]\n\n",
    ])  # fmt: skip
    lines: list[str] = []
    sink = Rows()
    recorder = Recorder(sink, Redactor(b"k"), lines.append)
    path = "/backend-api/f/conversation"
    recorder.handle(RequestSeen("f", "POST", "https://x" + path, "x", path, (), b"{}", 1.0))
    recorder.handle(ResponseStarted("f", 200, STREAM))
    recorder.handle(BodyChunk("f", body.encode(), 2.0))
    recorder.handle(ResponseEnded("f", 200, STREAM, None, "complete", 3.0))
    recorder.close()
    (said,) = [line for line in lines if line.startswith("call ")]
    stored = sink.table("tool_calls")[-1]["arguments_text"]  # the complete call's row
    assert secret not in said and said.endswith(f"call-1  {stored}") and "<redacted:" in stored


def test_a_namespaced_call_is_recorded_with_its_namespace_though_completed_says_no_output() -> None:
    """A function of a namespace tool (`function_call` with `namespace`), streamed as the Codex
    backend does: the items only in `output_item.done`, `response.completed` with `output: []`.
    The call is recorded, with its namespace, and its line names it."""
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup",
            "namespace": "crm", "arguments": "", "status": "in_progress"}  # fmt: skip
    done = {**item, "arguments": '{"id": 7}', "status": "completed"}
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0,
         "delta": '{"id": 7}', "obfuscation": "x1"},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
                                                   "output": []}},
    ]  # fmt: skip
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    sink, lines = Rows(), []
    recorder = Recorder(sink, Redactor(b"k"), lines.append)
    path = "/v1/responses"
    request = json.dumps({"model": "gpt-5.1", "input": "look it up"}).encode()
    recorder.handle(RequestSeen("r1", "POST", "https://x" + path, "x", path, (), request, 1.0))
    recorder.handle(ResponseStarted("r1", 200, STREAM))
    recorder.handle(BodyChunk("r1", body, 2.0))
    recorder.handle(ResponseEnded("r1", 200, STREAM, None, "complete", 3.0))
    recorder.close()
    (call,) = sink.table("tool_calls")
    assert (call["call_id"], call["tool"], call["namespace"]) == ("call_1", "lookup", "crm")
    assert json.loads(call["arguments"]) == {"id": 7}
    assert any(
        line.startswith("call    function_call  crm.lookup  call_id call_1") for line in lines
    )
