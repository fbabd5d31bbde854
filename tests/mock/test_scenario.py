"""convtap.mock.scenario and .serverturn: every scenario renders streams the decoder reads."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from convtap.mock.scenario import (
    Conversation,
    PlayedTurn,
    ScenarioError,
    UnknownConversation,
    dispatched_count,
    load_scenario,
    scenario_names,
    ws_frames,
)
from convtap.wire.turn import TurnDecoder, decode_turn
from pydantic import ValidationError

ROOT = Path(__file__).resolve().parents[2]

NAMES = ["plain", "alefita_way", "handoff", "websocket", "resume", "weather", "declared"]
SEED_ARGS = {"message": "segundo eco do caminho"}  # the call of docs/protocol.md


SIGNATURE_FILES = ROOT / "addon" / "convtap" / "mock" / "seed"
SIGNATURES = [
    json.loads((SIGNATURE_FILES / f"signature_{name}.json").read_text())
    for name in ("handoff", "alefita_way")
]  # what the app declares: the scenarios call only these


def user_request(text: str = "use o alefita way", **extra: Any) -> dict[str, Any]:
    message = {
        "id": "7f3e9a1b-2c4d-4e6f-8a0b-1c2d3e4f5a6b",
        "author": {"role": "user", "name": None, "metadata": {}},
        "content": {"content_type": "text", "parts": [text]},
    }
    return {"action": "next", "messages": [message], "local_function_signatures": SIGNATURES,
            **extra}  # fmt: skip


@pytest.mark.parametrize("name", ["alefita_way", "handoff", "websocket", "resume"])
def test_a_scenario_never_calls_a_tool_the_client_did_not_declare(name: str) -> None:
    """The real server calls only the local tools a client declares: a browser declares none."""
    convs: dict[str, Conversation] = {}
    for declared in ([], [SIGNATURES[0]] if name != "handoff" else [SIGNATURES[1]]):
        turn = play(name, user_request(local_function_signatures=declared), convs)
        if turn.ws_items:  # a WebSocket-delivered turn: its items carry the answer
            assert "local." not in "".join(turn.ws_items)
            continue
        decoded = decode(turn)
        assert decoded["tool_calls"] == []
        said = json.dumps([m["content"] for m in decoded["messages"]])
        assert "did not declare" in said


def return_request(call: dict[str, Any], conversation_id: str, **content: Any) -> dict[str, Any]:
    """The return for `call` (a decoded tool call), as docs/protocol.md, "The tool return
    contract", says."""
    text = json.dumps(
        {"call_id": call["call_id"], "result": call["arguments"], "tool": call["tool"]}
    )
    message = {
        "id": "b65539dc-d45f-4b37-b735-a11ac75aafed",
        "author": {"role": "tool", "name": call["tool"], "metadata": {}},
        "content": {"content_type": "code", "text": text, **content},
        "recipient": "all",
        "channel": "commentary",
        "status": "finished_successfully",
        "end_turn": None,
        "weight": 1,
        "metadata": {"is_visually_hidden_from_conversation": True},
    }
    return {
        "messages": [message],
        "conversation_id": conversation_id,
        "parent_message_id": call["call_id"],
    }


def decode(turn: PlayedTurn) -> dict[str, Any]:
    """The turn as a client sees it: the (maybe cut) body, a resume leg, the WebSocket."""
    first = "".join(turn.first_leg()).encode()
    bodies = [first]
    if turn.cut is not None:
        offset = decode_turn([first]).event_count
        bodies.append("".join(turn.resume_leg(offset)).encode())
    return decode_turn(bodies, ws_frames(turn, subscribe_id=1)).result()


def play(name: str, request: dict[str, Any], convs: dict[str, Conversation]) -> PlayedTurn:
    return load_scenario(name).play(request, convs, conduit_token="conduit-token")


def test_every_scenario_file_loads() -> None:
    assert scenario_names() == sorted(NAMES)
    for name in NAMES:
        assert load_scenario(name).name == name
    assert load_scenario(ROOT / "addon/convtap/mock/scenarios/plain.json").name == "plain"


@pytest.mark.parametrize("name", NAMES)
def test_each_turn_decodes_without_errors(name: str) -> None:
    convs: dict[str, Conversation] = {}
    first = play(name, user_request(), convs)
    result = decode(first)
    assert result["errors"] == []
    assert result["done"] and result["stream_complete"] and result["encoding"] == "v1"
    assert result["conversation_id"] == first.conversation_id
    calls = [c for c in result["tool_calls"] if c["kind"] == "local"]
    if name in ("plain", "weather"):
        assert calls == []
        return
    (call,) = calls
    assert call["complete"]
    second = play(name, return_request(call, first.conversation_id), convs)
    assert second.conversation_id == first.conversation_id  # reused after the first turn
    continued = decode(second)
    assert continued["errors"] == [] and continued["stream_complete"]
    echo = [e for e in continued["events"] if e["type"] == "input_message"]
    assert echo[0]["input_message"]["author"]["role"] == "tool"  # the return is echoed
    tree = convs[first.conversation_id].tree()
    node = tree["mapping"]["b65539dc-d45f-4b37-b735-a11ac75aafed"]
    assert node["parent"] == call["call_id"]  # the tool node hangs under the call
    assert tree["current_node"] in tree["mapping"]


def test_the_alefita_call_has_the_observed_shape() -> None:
    turn = play("alefita_way", user_request(), {})
    result = decode(turn)
    (call,) = result["tool_calls"]
    message = next(m for m in result["messages"] if m["id"] == call["call_id"])
    assert message["recipient"] == "local.alefita_way"
    assert message["channel"] == "commentary"
    assert message["author"] == {"role": "assistant", "name": None, "metadata": {}}
    assert message["content"]["content_type"] == "code"
    assert message["content"]["language"] == "json"
    assert json.loads(message["content"]["text"]) == SEED_ARGS
    assert message["status"] == "finished_successfully"  # patched at the end
    assert message["metadata"]["reasoning_status"] == "is_reasoning"
    # The arguments stream in: an append on /message/content/text, then bare frames.
    body = "".join(turn.events)
    assert '"p": "/message/content/text", "o": "append"' in body
    assert body.count('event: delta\ndata: {"v": "') >= 3
    channels = [m["channel"] for m in result["messages"] if m["author"]["role"] == "assistant"]
    assert channels == ["analysis", "commentary"]


def test_the_handoff_call_carries_the_declared_parameters() -> None:
    (call,) = decode(play("handoff", user_request(), {}))["tool_calls"]
    assert call["recipient"] == "local.handoff"
    assert set(call["arguments"]) == {"prompt", "reason"}  # both required in its signature


def test_ids_are_fresh_on_every_request() -> None:
    one = decode(play("alefita_way", user_request(), {}))
    two = decode(play("alefita_way", user_request(), {}))
    assert one["conversation_id"] != two["conversation_id"]
    assert one["tool_calls"][0]["call_id"] != two["tool_calls"][0]["call_id"]


def test_any_return_is_accepted_and_quoted() -> None:
    convs: dict[str, Conversation] = {}
    first = play("alefita_way", user_request(), convs)
    call = decode(first)["tool_calls"][0]
    wrong = return_request(call, first.conversation_id, language="json")
    wrong["messages"][0]["recipient"] = "alefita_way"
    wrong["messages"][0]["content"]["text"] = '{"call_id": "invented", "result": {"message": "x"}}'
    result = decode(play("alefita_way", wrong, convs))
    assert result["stream_complete"]
    answer = result["messages"][-1]
    assert answer["channel"] == "final" and answer["end_turn"] is True
    assert answer["content"]["parts"][0].endswith("Ela devolveu: x")


def test_an_unknown_conversation_or_an_empty_request_is_refused() -> None:
    with pytest.raises(UnknownConversation):
        play("plain", user_request(conversation_id="nope"), {})
    with pytest.raises(ScenarioError):
        play("plain", {"messages": []}, {})


def test_the_resume_cut_and_leg_decode_to_the_uncut_turn() -> None:
    turn = play("resume", user_request(), {})
    assert turn.cut is not None
    whole = decode_turn(["".join(turn.events).encode()]).result()
    first = "".join(turn.first_leg()).encode()
    cut = decode_turn([first])
    assert cut.truncated and not cut.done  # cut inside an event, no [DONE]
    leg = turn.resume_leg(cut.event_count)
    assert json.loads(leg[0].split("data: ", 1)[1]).keys() == {"v"}  # a bare frame first
    resumed = decode_turn([first, "".join(leg).encode()]).result()
    for key in ("messages", "tool_calls", "events", "done", "stream_complete", "errors"):
        assert resumed[key] == whole[key], key
    assert resumed["event_count"] == whole["event_count"] == dispatched_count(turn.events)


def test_resuming_at_every_offset_gives_the_same_turn() -> None:
    turn = play("resume", user_request(), {})
    whole = decode_turn(["".join(turn.events).encode()]).result()
    events = [e for e in turn.events if not e.startswith(":")]
    for offset in range(dispatched_count(turn.events) + 1):
        legs = ["".join(events[:offset]).encode(), "".join(turn.resume_leg(offset)).encode()]
        assert decode_turn(legs).result()["messages"] == whole["messages"], offset
    with pytest.raises(ScenarioError):
        turn.resume_leg(dispatched_count(turn.events) + 1)


def test_the_websocket_turn_has_the_handoff_and_the_irregular_frames() -> None:
    turn = play("websocket", user_request(), {})
    sse = decode_turn(["".join(turn.first_leg()).encode()]).result()
    (handoff,) = [e for e in sse["events"] if e["type"] == "stream_handoff"]
    assert handoff["options"] == [{"type": "subscribe_ws_topic", "topic_id": turn.topic_id}]
    assert sse["done"] and sse["tool_calls"] == []  # the call only arrives on the socket
    for subscribe_id in (1, None):
        frames = [json.loads(f) for f in ws_frames(turn, subscribe_id=subscribe_id)]
        items = [
            m["payload"]["payload"]
            for frame in frames
            for m in frame
            if m.get("topic_id") == turn.topic_id and m["payload"]["payload"]["type"] != "done"
        ]
        ids = [i["stream_item_id"] for i in items if i["type"] == "stream-item"]
        assert len(ids) != len(set(ids))  # a duplicate
        parents = [i["parent_stream_item_id"] for i in items if i["type"] == "stream-item"]
        assert any(p not in ids[:n] for n, p in enumerate(parents) if p)  # before its parent
        assert any(i["type"] == "heartbeat" for i in items)
        assert any(m.get("topic_id") == "conversations" for f in frames for m in f)
        assert frames[-1][0]["payload"]["payload"]["type"] == "done"
    reply = json.loads(ws_frames(turn, subscribe_id=1)[0])[0]["reply"]
    assert len(reply["catchups"]) == 2
    # However the frames split into feeds, the turn decodes the same.
    frames_text = ws_frames(turn, subscribe_id=1)
    expected = decode(turn)
    assert [c["tool"] for c in expected["tool_calls"]] == ["alefita_way"]
    for order in itertools.islice(itertools.permutations(range(3)), 3):
        decoder = TurnDecoder()
        decoder.feed("".join(turn.first_leg()).encode())
        for n in order:  # the first frames in another order still reassemble
            decoder.feed_ws_frame(frames_text[n])
        for frame in frames_text[3:]:
            decoder.feed_ws_frame(frame)
        decoder.close()
        assert decoder.summary().result()["messages"] == expected["messages"]


def test_scenario_files_are_checked(tmp_path: Path) -> None:
    scenario = load_scenario("plain")
    data = scenario.model_dump()
    data["on_user"]["steps"] = [{"say": "x", "typo": 1}]
    with pytest.raises(ValidationError):
        type(scenario).model_validate(data)
    with pytest.raises(ScenarioError, match="known: "):
        load_scenario("no-such-scenario")
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"description": "x", "on_user": {"steps": []}}))
    with pytest.raises(ScenarioError, match="steps"):
        load_scenario(broken)


BOOK_TRIP = {
    "name": "book_trip", "description": "Book a trip", "type": "kwargs",
    "params": [
        {"name": "city", "required": True,
         "type": {"type": "string", "enum": ["Lisboa", "Porto"], "description": "where"}},
        {"name": "nights", "required": True,
         "type": {"type": "integer", "minimum": 1, "maximum": 5, "description": "how long"}},
        {"name": "extras", "required": False,
         "type": {"type": "array", "items": {"type": "object", "required": ["name"],
                  "properties": {"name": {"type": "string"}, "paid": {"type": "boolean"}}}}},
    ],
}  # fmt: skip


def declared_request(**extra: Any) -> dict[str, Any]:
    signatures = [
        {"name": "handoff", "description": "h", "type": "kwargs", "params": []},
        {"name": "alefita_way", "description": "a", "type": "kwargs",
         "params": [{"name": "message", "required": True,
                     "type": {"type": "string", "description": "m"}}]},
        BOOK_TRIP,
    ]  # fmt: skip
    return user_request(local_function_signatures=signatures, **extra)


def test_declared_calls_each_declared_tool_once_then_answers() -> None:
    from convtap.mock.arguments import signature_schema
    from jsonschema import validate

    convs: dict[str, Conversation] = {}
    scenario = load_scenario("declared")
    turn = scenario.play(declared_request(), convs, conduit_token="t", seed=7)
    seen: list[str] = []
    ids: set[str] = set()
    for _ in range(3):
        result = decode(turn)
        assert result["errors"] == [] and result["stream_complete"]
        calls = [
            c for c in result["tool_calls"] if c["kind"] == "local" and c["call_id"] not in ids
        ]
        ids |= {c["call_id"] for c in calls}
        if not calls:
            break
        (call,) = calls
        seen.append(call["tool"])
        signature = BOOK_TRIP if call["tool"] == "book_trip" else None
        if signature is not None:
            validate(call["arguments"], signature_schema(signature))
            assert set(call["arguments"]) == {"city", "nights", "extras"}
        turn = scenario.play(return_request(call, turn.conversation_id), convs,
                             conduit_token="t", seed=7)  # fmt: skip
    assert seen == ["alefita_way", "book_trip"]  # handoff is the handoff scenario's
    texts = [m for m in result["messages"] if m["author"]["role"] == "assistant"]
    assert "chamei cada ferramenta" in texts[-1]["content"]["parts"][0]


def test_declared_arguments_are_deterministic_per_seed() -> None:
    from convtap.mock.arguments import arguments_for, signature_schema

    schema = signature_schema(BOOK_TRIP)
    assert arguments_for(schema, 1, "book_trip") == arguments_for(schema, 1, "book_trip")
    assert any(arguments_for(schema, n, "book_trip") != arguments_for(schema, 1, "book_trip")
               for n in range(2, 20))  # fmt: skip
