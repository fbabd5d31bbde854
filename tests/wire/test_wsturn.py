"""convtap.wire.wsturn: turn-topic reassembly."""

from __future__ import annotations

import json
from typing import Any

from convtap.wire.wsturn import TurnTopicAssembler

TOPIC = "conversation-turn-t1"


def item(n: int, parent: int | None, text: str, topic: str = TOPIC) -> dict[str, Any]:
    return {
        "type": "message",
        "topic_id": topic,
        "offset": n,
        "payload": {
            "type": "conversation-turn-stream",
            "payload": {
                "type": "stream-item",
                "encoded_item": text,
                "stream_item_id": f"i{n}",
                "parent_stream_item_id": None if parent is None else f"i{parent}",
            },
        },
    }


def frame(*items: dict[str, Any]) -> str:
    return json.dumps(list(items))


def test_items_are_released_in_chain_order_as_soon_as_their_parent_was() -> None:
    ws = TurnTopicAssembler(TOPIC)
    assert ws.feed(frame(item(1, None, "a"))) == "a"
    assert ws.feed(frame(item(3, 2, "c"))) == ""  # before its parent
    assert ws.feed(frame(item(2, 1, "b"), item(2, 1, "b"))) == "bc"  # a duplicate in the frame
    assert ws.feed(frame(item(1, None, "a"))) == ""  # a duplicate later
    assert ws.close() == ""


def test_catchups_heartbeats_other_topics_and_done() -> None:
    ws = TurnTopicAssembler()
    reply = {
        "id": 1,
        "reply": {
            "type": "subscribe",
            "topic_id": TOPIC,
            "recovered": True,
            "catchups": [item(1, None, "a"), item(2, 1, "b")],
        },
    }
    heartbeat = {
        "type": "message",
        "topic_id": TOPIC,
        "payload": {"type": "conversation-turn-stream", "payload": {"type": "heartbeat"}},
    }
    other = item(9, None, "nope", topic="conversations")
    other_turn = item(8, None, "nope", topic="conversation-turn-t2")
    assert ws.feed(frame(reply, heartbeat, other)) == "ab"
    assert ws.topic_id == TOPIC
    assert ws.feed(frame(other_turn, item(3, 2, "c"))) == "c"
    assert not ws.done
    ws.feed(frame({"type": "message", "topic_id": TOPIC, "payload": {"type": "done"}}))
    assert ws.done


def test_orphans_are_released_by_offset_at_close() -> None:
    ws = TurnTopicAssembler(TOPIC)
    assert ws.feed(frame(item(5, 4, "y"), item(4, 3, "x"))) == ""  # the start never came
    assert ws.close() == "xy"


def test_bad_frames_are_errors() -> None:
    ws = TurnTopicAssembler(TOPIC)
    assert ws.feed("{oops") == ""
    assert ws.feed(b'{"not": "an array"}') == ""
    assert ws.feed(frame(item(1, None, "a"))) == "a"
    assert [e.split(":")[0] for e in ws.errors] == ["frame 0", "frame 1"]
