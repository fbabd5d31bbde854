"""convtap.wire.responses and the Responses API through import, audit and `convtap decode`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from convtap.ingest.capture import audit_capture, import_into
from convtap.wire.events import DecodeError
from convtap.wire.provenance import Piece
from convtap.wire.responses import ResponsesDecoder, decode_responses, looks_like_responses
from convtap.wire.sse import SSEParser

from tests.runner import convtap

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "captures" / "examples" / "responses"
STREAM = (EXAMPLES / "function_call.sse").read_bytes()
CONTRACT = {
    "protocol",
    "response_id",
    "status",
    "event_types",
    "output_items",
    "tool_calls",
    "errors",
}


def chunked(body: bytes, size: int) -> dict[str, object]:
    decoder, parser = ResponsesDecoder(), SSEParser()
    for i in range(0, len(body), size):
        for event in parser.feed(body[i : i + size]):
            decoder.feed(event)
    return decoder.result()


def test_the_stream_yields_the_client_calls() -> None:
    result = decode_responses([STREAM]).result()
    assert set(result) == CONTRACT
    assert result["response_id"] == "resp_68a1c0ffee" and result["status"] == "completed"
    assert [(c["type"], c["item_id"], c["call_id"], c["name"]) for c in result["tool_calls"]] == [
        ("function_call", "fc_68a1b2c3", "call_Qx7RkP2m", "get_weather"),
        ("tool_search_call", "tsc_68a1d4e5", "call_S1kq9Wz", None),
    ]
    first, search = result["tool_calls"]
    assert first["arguments"] == {"city": "São Paulo", "unit": "celsius"}  # parsed, as for
    assert first["arguments_text"] == '{"city": "São Paulo", "unit": "celsius"}'  # f/conversation
    assert search["arguments"] == {"query": "calendar tools"}
    assert json.loads(search["arguments_text"]) == {"query": "calendar tools"}
    assert result["errors"] == []


@pytest.mark.parametrize("size", [1, 7, 64, 4096])
def test_any_chunking_gives_the_same_result(size: int) -> None:
    assert chunked(STREAM, size) == decode_responses([STREAM]).result()


def test_arguments_are_accumulated_and_checked_against_done() -> None:
    text = STREAM.decode()
    broken = text.replace('"delta": "{\\"city', '"delta": "{\\"town', 1)
    cut = broken.split("event: response.output_item.done")[0]  # no item.done, no completed
    result = decode_responses([cut.encode()]).result()
    assert [e["kind"] for e in result["errors"]] == ["arguments-mismatch"]
    assert result["tool_calls"][0]["arguments_text"].startswith('{"city"')  # .done wins


def test_a_call_cut_before_its_done_keeps_what_its_deltas_said() -> None:
    """A stream cut mid-call (a client that hung up, a dropped connection): a custom tool's
    input is put together from its deltas, as a function's arguments are."""
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {
            "type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "apply_patch",
            "input": ""}},
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "item_id": "ctc_1",
         "delta": "*** Begin Patch\n"},
        {"type": "response.output_item.added", "output_index": 1, "item": {
            "type": "function_call", "id": "fc_1", "call_id": "call_2", "name": "f",
            "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_1",
         "delta": '{"a": '},
    ]  # fmt: skip
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    calls = decode_responses([body]).tool_calls()
    assert [c.arguments_text for c in calls] == ["*** Begin Patch\n", '{"a": ']


def test_a_json_response_and_detection() -> None:
    body = json.dumps(
        {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "output": [
                {
                    "type": "custom_tool_call",
                    "id": "ctc_1",
                    "call_id": "call_c",
                    "name": "patch",
                    "input": "*** Begin",
                },
                {"type": "tool_search_call", "id": "ts", "execution": "server", "arguments": {}},
            ],
        }
    )
    result = decode_responses([body.encode()]).result()
    assert [(c["type"], c["arguments"], c["arguments_text"]) for c in result["tool_calls"]] == [
        ("custom_tool_call", None, "*** Begin")  # not JSON: arguments is null
    ]  # the server's own search is not the client's
    assert looks_like_responses(body.encode()) and looks_like_responses(STREAM)
    assert not looks_like_responses((ROOT / "captures/examples/sse/plain_answer.sse").read_bytes())


def test_decode_detects_the_protocol() -> None:
    proc = convtap("decode", "--format", "json", str(EXAMPLES / "function_call.sse"))
    assert proc.returncode == 0, proc.stderr
    assert set(json.loads(proc.stdout)) == CONTRACT


def audit(har: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    db = tmp_path / f"{har.parent.name}-{har.stem}.db"
    import_into(db, [har])
    return db, [f.rule for f in audit_capture(db).findings]


def test_import_pairs_outputs_with_calls_by_call_id(tmp_path: Path) -> None:
    import sqlite3

    rules = ROOT / "captures" / "examples" / "rules"
    db, findings = audit(rules / "responses-output-call-id" / "pass.har", tmp_path)
    assert findings == []
    with sqlite3.connect(db) as conn:
        assert conn.execute(
            "SELECT call_id, protocol FROM tool_returns ORDER BY id"
        ).fetchall() == [("call_Qx7RkP2m", "responses"), ("call_S1kq9Wz", "responses")]
    bad, findings = audit(rules / "responses-output-call-id" / "fail.har", tmp_path)
    assert "responses-output-call-id" in findings
    with sqlite3.connect(bad) as conn:
        assert conn.execute(
            "SELECT call_id, body_call_id FROM tool_returns ORDER BY id"
        ).fetchall()[0] == (None, "fc_68a1b2c3")


def test_where_each_piece_of_a_streamed_text_came_from_is_told() -> None:
    """The recorder's redaction takes the text of `*.delta` events from the decoder (each event
    is parsed once): a string per item part, told piece by piece with its event; a part's
    `.done` ends it."""
    item = {"item_id": "fc_1", "output_index": 0}
    datas = [
        json.dumps({"type": "response.created", "response": {"id": "r1"}}),
        json.dumps({"type": "response.output_text.delta", **item, "delta": "my key is s"}),
        json.dumps({"type": "response.function_call_arguments.delta", **item, "delta": '{"a'}),
        "{not json",
        json.dumps({"type": "response.output_text.delta", **item, "delta": 7}),
        json.dumps({"type": "response.output_text.delta", **item, "delta": "k-"}),
        json.dumps({"type": "response.output_text.done", **item, "text": "my key is sk-"}),
        "[DONE]",
    ]
    decoder = ResponsesDecoder(follow=True)
    events = SSEParser().feed("".join(f"data: {d}\n\n" for d in datas).encode())
    found = decoder.feed_all(events, ())
    told = decoder.strings()
    assert [(type(e).__name__, e.string) for e in told if not isinstance(e, Piece)] == [
        ("Began", 0), ("Began", 1), ("Ended", 0)]  # fmt: skip
    assert [(e.string, e.event, e.leaf, e.text) for e in told if isinstance(e, Piece)] == [
        (0, 1, ("delta",), "my key is s"),
        (1, 2, ("delta",), '{"a'),
        (0, 5, ("delta",), "k-"),
    ]
    assert [e["kind"] for e in decoder.errors] == ["malformed-json"]
    assert [e.kind for e in found if isinstance(e, DecodeError)] == ["malformed-json"]
