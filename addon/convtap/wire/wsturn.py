"""WebSocket frames in, the ordered SSE text of one turn topic out.

docs/protocol.md, "WebSocket handoff": every frame is a JSON array of replies (whose catch-ups
replay items already published) and messages. On a turn topic (`conversation-turn-<turn id>`) a
message carries a stream item: a slice of SSE text, chained to the one before it by
`parent_stream_item_id`. Items are deduplicated by `stream_item_id` and released in chain order as
soon as their parent has been; heartbeats and other topics are ignored; `done` ends the turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from convtap.wire.bounded import Bounded
from convtap.wire.jsonvalue import loads

TURN_TOPIC_PREFIX = "conversation-turn-"
MAX_ITEMS = 100_000  # stream items remembered (seen, waiting for their parent)


def frame_messages(items: list[Any]) -> Iterator[tuple[dict[str, Any], Any]]:
    """A frame's messages with the topic each came on: its own, and a reply's catch-ups."""
    for item in items:
        if not isinstance(item, dict):
            continue
        reply = item.get("reply")
        if isinstance(reply, dict):
            catchups = reply.get("catchups")
            for catchup in catchups if isinstance(catchups, list) else ():
                if isinstance(catchup, dict):
                    yield catchup, reply.get("topic_id")
        elif item.get("type") == "message":
            yield item, item.get("topic_id")


class TurnTopicAssembler:
    """Reassembles one turn topic. With no topic given, the first turn topic seen is taken."""

    def __init__(self, topic_id: str | None = None) -> None:
        self.topic_id = topic_id
        self.done = False
        self.errors: list[str] = []  # frames that could not be read, with why
        self.frame_count = 0
        self._seen: Bounded[str, bool] = Bounded(MAX_ITEMS)
        self._waiting: Bounded[str | None, dict[str, Any]] = Bounded(MAX_ITEMS)  # parent -> item
        self._offsets: Bounded[str, int] = Bounded(MAX_ITEMS)
        self._last: str | None = None  # the id of the last released item
        self._started = False

    def feed(self, frame: str | bytes) -> str:
        """Take one frame's text; return the SSE text that is now in order (maybe "")."""
        return "".join(text for _, text in self.feed_items(frame))

    def feed_items(self, frame: str | bytes) -> list[tuple[str, str]]:
        """Take one frame's text; return the items now in order: (stream item id, its SSE
        text)."""
        index = self.frame_count
        self.frame_count += 1
        try:
            items = loads(frame if isinstance(frame, str) else frame.decode("utf-8", "replace"))
        except ValueError as exc:
            self.errors.append(f"frame {index}: not JSON: {exc}")
            return []
        if not isinstance(items, list):
            self.errors.append(f"frame {index}: not a JSON array")
            return []
        for message, topic in frame_messages(items):
            self._message(message, topic)
        return self._release()

    def seen(self, item_id: str) -> bool:
        """Whether the item was taken already (a catch-up repeats items)."""
        return item_id in self._seen

    def close(self) -> str:
        """The frames have ended: release what still waits for a parent that never came, by
        envelope offset (the offsets agree with the chain)."""
        return "".join(text for _, text in self.close_items())

    def close_items(self) -> list[tuple[str, str]]:
        """`close`, item by item."""
        pending = sorted(self._waiting.values(), key=lambda it: self._offsets.get(it["id"], 0))
        self._waiting.clear()
        return [(it["id"], it["text"]) for it in pending]

    def _message(self, message: dict[str, Any], topic: object) -> None:
        topic = message.get("topic_id", topic)
        if not isinstance(topic, str) or not topic.startswith(TURN_TOPIC_PREFIX):
            return  # conversations, notifications, ...: no turn's business
        if self.topic_id is None:
            self.topic_id = topic
        elif topic != self.topic_id:
            return
        payload = message.get("payload")
        if not isinstance(payload, dict):
            return
        inner = payload.get("payload")
        kinds = (payload.get("type"), inner.get("type") if isinstance(inner, dict) else None)
        if "done" in kinds:
            self.done = True
            return
        if not isinstance(inner, dict) or inner.get("type") != "stream-item":
            return  # heartbeats and anything else
        item_id, text = inner.get("stream_item_id"), inner.get("encoded_item")
        if not isinstance(item_id, str) or not isinstance(text, str) or item_id in self._seen:
            return
        self._seen[item_id] = True
        parent = inner.get("parent_stream_item_id")
        offset = message.get("offset")
        self._offsets[item_id] = offset if isinstance(offset, int) else len(self._offsets)
        self._waiting[parent if isinstance(parent, str) and parent else None] = {
            "id": item_id,
            "text": text,
        }

    def _release(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        key = self._last if self._started else None
        while (item := self._waiting.pop(key, None)) is not None:
            out.append((item["id"], item["text"]))
            key = self._last = item["id"]
            self._started = True
        return out
