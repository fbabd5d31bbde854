"""convtap.wire.typed: each finished message and Responses item validated once against its model.

A known field of the wrong type is a `wrong-type` decode error naming the field's path, and
decoding goes on; unknown fields, new enum values and kinds of content the models do not know
are no error (they are kept, and `diff --against-schemas` shows them)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from convtap.diff.capture import capture_shapes
from convtap.diff.compare import drift
from convtap.ingest.capture import import_into
from convtap.models import ConversationMessage
from convtap.vocab import DecodeErrorKind
from convtap.wire.events import DecodeError
from convtap.wire.responses import ResponsesDecoder, decode_responses
from convtap.wire.sse import SSEEvent
from convtap.wire.turn import TurnDecoder, decode_turn
from convtap.wire.typed import item_errors, message_errors, wrong_types


def message(
    mid: str = "m-1", status: str = "finished_successfully", **changes: Any
) -> dict[str, Any]:
    value: dict[str, Any] = {
        "id": mid,
        "author": {"role": "assistant", "name": None, "metadata": {}},
        "content": {"content_type": "text", "parts": ["Hello"]},
        "create_time": 1.5,
        "end_turn": True,
        "metadata": {},
        "recipient": "all",
        "status": status,
        "weight": 1,
    }
    value.update(changes)
    return value


def sse(data: object, name: str | None = None) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def stream(*messages: dict[str, Any], after: str = "") -> bytes:
    text = sse("v1", "delta_encoding")
    for value in messages:
        text += sse({"v": {"message": value, "conversation_id": "c-1"}, "o": "add"}, "delta")
    return (text + after + "data: [DONE]\n\n").encode()


def wrong(found: list[Any]) -> list[str]:
    """The details of the `wrong-type` errors among decoder events or error dicts."""
    errors = [e._asdict() if type(e) is DecodeError else e for e in found]
    return [e["detail"] for e in errors if isinstance(e, dict) and e["kind"] == "wrong-type"]


def test_a_message_as_its_model_has_it_has_no_wrong_type() -> None:
    assert wrong_types(ConversationMessage, message()) == []


def test_a_wrong_type_is_named_by_its_path_in_the_model() -> None:
    bad = message(content={"content_type": "text", "parts": [7, "ok"]}, weight="1")
    assert message_errors(bad) == [
        "content.parts.0: a string expected, got an integer (message m-1)",
        "weight: an integer or a number expected, got a string (message m-1)",  # one a field
    ]


def test_unknown_fields_new_values_and_unknown_kinds_of_content_are_no_error() -> None:
    assert message_errors(message(brand_new={"x": 1}, status="a_new_status")) == []
    assert message_errors(message(channel="a_new_channel")) == []
    images = {"content_type": "multimodal_text", "parts": [{"asset_pointer": "file-service://x"}]}
    assert message_errors(message(content=images)) == []  # not the text content's parts


def test_a_missing_field_is_no_wrong_type() -> None:
    value = message()
    del value["weight"], value["create_time"]
    assert message_errors(value) == []


def test_the_turn_records_the_wrong_type_and_decodes_on() -> None:
    bad = message(content={"content_type": "text", "parts": [7]}, unknown_field="kept")
    after = message("m-2", content={"content_type": "text", "parts": ["after"]})
    summary = decode_turn([stream(bad, after)])
    errors = [e for e in summary.errors if e.kind == DecodeErrorKind.WRONG_TYPE]
    assert [e.detail for e in errors] == [
        "content.parts.0: a string expected, got an integer (message m-1)"
    ]
    assert errors[0].event_index >= 0
    kept = {m["id"]: m for m in summary.messages}
    assert kept["m-1"]["content"]["parts"] == [7]  # as it came
    assert kept["m-1"]["unknown_field"] == "kept"
    assert kept["m-2"]["content"]["parts"] == ["after"]  # decoding went on
    assert summary.done
    assert summary.result()["errors"][0]["kind"] == "wrong-type"


def test_a_message_is_validated_once_it_is_finished_and_only_once() -> None:
    """A leg that ends with the message in progress leaves it unvalidated (its fields may still
    grow); the leg that finishes it validates it, once, however it changes after."""
    typo = {"content_type": "text", "parts": [7]}
    going = stream(message(status="in_progress", content=typo))[: -len("data: [DONE]\n\n")]
    patch = sse({"p": "/message/status", "o": "replace", "v": "finished_successfully"}, "delta")
    again = sse({"p": "/message/status", "o": "replace", "v": "finished_partial"}, "delta")
    decoder = TurnDecoder()
    decoder.feed(going)
    decoder.end_leg()
    assert wrong(decoder.summary().errors) == []
    decoder.feed(patch.encode())
    decoder.end_leg()
    assert len(wrong(decoder.summary().errors)) == 1
    decoder.feed(again.encode())
    decoder.end_leg()
    decoder.close()
    assert len(wrong(decoder.summary().errors)) == 1


def test_every_chunking_gives_the_same_wrong_types() -> None:
    body = stream(message(content={"content_type": "text", "parts": [7]}))
    whole = wrong(decode_turn([body]).errors)
    for size in (1, 5, 64):
        decoder = TurnDecoder()
        for start in range(0, len(body), size):
            decoder.feed(body[start : start + size])
        decoder.end_leg()
        assert wrong(decoder.summary().errors) == whole


def function_call(**changes: Any) -> dict[str, Any]:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
            "arguments": '{"city": "Paris"}', "status": "completed"}  # fmt: skip
    item.update(changes)
    return item


def test_a_finished_responses_item_of_the_wrong_type_is_a_decode_error() -> None:
    decoder = ResponsesDecoder()
    done = {"type": "response.output_item.done", "output_index": 0,
            "item": function_call(arguments={"city": "Paris"}, extra_field=1)}  # fmt: skip
    found = decoder.feed(SSEEvent("response.output_item.done", json.dumps(done)))
    assert wrong(found) == ["arguments: a string expected, got an object (function_call fc_1)"]
    completed = {"type": "response.completed", "response": {"id": "r-1", "status": "completed"}}
    decoder.feed(SSEEvent("response.completed", json.dumps(completed)))
    result = decoder.result()
    assert result["status"] == "completed"  # decoding went on
    assert result["output_items"][0]["extra_field"] == 1
    assert wrong(result["errors"]) == [
        "arguments: a string expected, got an object (function_call fc_1)"
    ]


def test_a_responses_item_no_model_describes_and_a_good_one_are_no_error() -> None:
    assert item_errors({"type": "message", "id": "msg_1", "content": 7}) == []
    assert item_errors(function_call()) == []


def test_a_json_answer_s_items_are_validated_too() -> None:
    answer = {"id": "r-1", "object": "response", "status": "completed",
              "output": [function_call(name=["get_weather"])]}  # fmt: skip
    errors = decode_responses([json.dumps(answer).encode()]).result()["errors"]
    assert wrong(errors) == ["name: a string expected, got an array (function_call fc_1)"]


def test_a_capture_keeps_the_decode_error_and_the_unknown_field_drift_shows_it(
    tmp_path: Path,
) -> None:
    """Recorded (imported from a .sse file): the turn's row holds the `wrong-type` error with
    its path, the message row keeps the unknown field, `diff --against-schemas` names it."""
    bad = message(content={"content_type": "text", "parts": [7]}, brand_new_field="kept")
    sse_file = tmp_path / "turn.sse"
    sse_file.write_bytes(stream(bad))
    db = tmp_path / "capture.db"
    import_into(db, [sse_file])
    with sqlite3.connect(db) as conn:
        (errors,) = conn.execute("SELECT errors FROM turns").fetchone()
        (kept,) = conn.execute("SELECT json FROM messages WHERE id = 'm-1'").fetchone()
    assert [(e["kind"], e["detail"].split(":")[0]) for e in json.loads(errors)] == [
        ("wrong-type", "content.parts.0")
    ]
    assert json.loads(kept)["brand_new_field"] == "kept"
    unknown = [c.path for c in drift(capture_shapes(db)) if c.check == "unknown-field"]
    assert "brand_new_field" in unknown


def test_the_hidden_system_message_a_real_stream_begins_with_is_no_wrong_type() -> None:
    """A real f/conversation stream opens with a hidden system message whose `create_time` and
    `update_time` are null and whose `weight` is 0.0: that is the wire as the server sends it."""
    system = message(
        "s-0",
        author={"role": "system", "name": None, "metadata": {}},
        content={"content_type": "text", "parts": [""]},
        create_time=None,
        update_time=None,
        weight=0.0,
        metadata={"is_visually_hidden_from_conversation": True},
        channel=None,
    )
    assert wrong_types(ConversationMessage, system) == []
    summary = decode_turn([stream(system, message())])
    assert wrong(summary.errors) == []
    assert len(summary.messages) == 2
