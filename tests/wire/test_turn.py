"""convtap.wire.turn: whole turns, goldens, legs, tool calls, chunking invariance."""

from __future__ import annotations

import json
from typing import Any

import pytest
from convtap.redact.redactor import Redactor
from convtap.wire.turn import TurnDecoder, decode_turn, tool_call
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.goldens import CASES, decoded, golden_path, inputs


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_matches_its_golden(name: str) -> None:
    assert decoded(name) == json.loads(golden_path(name).read_text())


def chunked(bodies: list[bytes], frames: list[str], size: int) -> dict[str, Any]:
    turn = TurnDecoder()
    for body in bodies:
        for i in range(0, len(body), size):
            turn.feed(body[i : i + size])
        turn.end_leg()
    for frame in frames:
        turn.feed_ws_frame(frame)
    turn.close()
    return turn.summary().result()


@pytest.mark.parametrize("name", sorted(CASES))
def test_byte_at_a_time_and_every_split_give_the_same_turn(name: str) -> None:
    bodies, frames = inputs(name)
    expected = decode_turn(bodies, frames).result()
    assert chunked(bodies, frames, 1) == expected
    first = bodies[0]
    for cut in range(len(first) + 1):
        turn = TurnDecoder()
        turn.feed(first[:cut])
        turn.feed(first[cut:])
        turn.end_leg()
        for body in bodies[1:]:
            turn.feed(body)
            turn.end_leg()
        for frame in frames:
            turn.feed_ws_frame(frame)
        turn.close()
        assert turn.summary().result() == expected, f"split at {cut}"


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(CASES)), st.integers(1, 400))
def test_hypothesis_chunk_sizes(name: str, size: int) -> None:
    bodies, frames = inputs(name)
    assert chunked(bodies, frames, size) == decode_turn(bodies, frames).result()


def test_the_seed_call_is_decoded_as_the_seed_states() -> None:
    result = decoded("alefita_way_call")
    assert result["tool_calls"] == [
        {
            "call_id": "b6d6e3a6-af6f-4a78-a649-8e3935182fcc",
            "recipient": "local.alefita_way",
            "kind": "local",
            "tool": "alefita_way",
            "arguments": {"message": "segundo eco do caminho"},
            "arguments_text": '{"message": "segundo eco do caminho"}',
            "complete": True,
        }
    ]
    assert result["done"] and result["stream_complete"] and not result["truncated"]
    call = next(m for m in result["messages"] if m["id"] == result["tool_calls"][0]["call_id"])
    assert call["channel"] == "commentary" and call["content"]["language"] == "json"


def test_resume_leg_continues_the_state_and_the_cut_event_is_dropped() -> None:
    bodies, _ = inputs("resume_cut")
    alone = decode_turn(bodies[:1]).result()
    assert alone["truncated"] is True and alone["done"] is False
    both = decode_turn(bodies).result()
    assert both["truncated"] is False and both["done"] is True
    assert both["errors"] == []
    (answer,) = [m for m in both["messages"] if m["author"]["role"] == "assistant"]
    assert answer["content"]["parts"] == [
        "Orvalho na folha —\no sol devagar desperta\nsilêncio no chão"
    ]
    # the resume offset is the count of events the first leg delivered whole
    offset = bodies[1].split(b"offset ")[1].split(b"\n")[0]
    assert alone["event_count"] == int(offset)


def test_joining_the_legs_instead_would_differ() -> None:
    bodies, _ = inputs("resume_cut")
    assert decode_turn([b"".join(bodies)]).result() != decode_turn(bodies).result()


def test_websocket_continuation_carries_the_handoff_call() -> None:
    bodies, frames = inputs("handoff_ws")
    without = decode_turn(bodies).result()
    assert without["tool_calls"] == []
    result = decode_turn(bodies, frames).result()
    assert [(c["tool"], c["kind"], c["complete"]) for c in result["tool_calls"]] == [
        ("handoff", "local", True)
    ]
    assert result["tool_calls"][0]["arguments"]["reason"] == "Planilhas rodam no Work"
    assert result["errors"] == [] and result["stream_complete"] is True


def test_bad_websocket_frames_are_errors_and_decoding_goes_on() -> None:
    bodies, frames = inputs("handoff_ws")
    result = decode_turn(bodies, ["not json", '{"an": "object"}', *frames]).result()
    assert [(e["event_index"], e["kind"]) for e in result["errors"]] == [
        (-1, "ws-frame"),
        (-1, "ws-frame"),
    ]
    assert len(result["tool_calls"]) == 1


@pytest.mark.parametrize(
    ("recipient", "kind", "tool"),
    [
        ("local.alefita_way", "local", "alefita_way"),
        ("functions.lookup", "functions", "lookup"),
        ("web.run", "builtin", "web.run"),
        ("python", "builtin", "python"),
    ],
)
def test_tool_call_kinds(recipient: str, kind: str, tool: str) -> None:
    message = {
        "id": "m",
        "author": {"role": "assistant"},
        "recipient": recipient,
        "status": "in_progress",
        "content": {"content_type": "code", "text": "[1]"},
    }
    call = tool_call(message)
    assert call is not None
    assert (call.kind, call.tool, call.complete, call.arguments) == (kind, tool, False, None)


@pytest.mark.parametrize(
    "message",
    [
        {"id": "m", "author": {"role": "assistant"}, "recipient": "all", "content": {}},
        {"id": "m", "author": {"role": "assistant"}, "content": {}},
        {"id": "m", "author": {"role": "tool"}, "recipient": "local.x", "content": {}},
    ],
)
def test_not_tool_calls(message: dict[str, Any]) -> None:
    assert tool_call(message) is None


def test_secrets_are_redacted_in_the_result() -> None:
    bodies, _ = inputs("alefita_way_call")
    token = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LWNvbmR1aXQtdG9rZW4.x1y2z3"
    raw = json.dumps(decode_turn(bodies).result())
    assert token in raw
    redacted = json.dumps(Redactor(b"k").json(decode_turn(bodies).result()))
    assert token not in redacted and "<redacted:" in redacted
