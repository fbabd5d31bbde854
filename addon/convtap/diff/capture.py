"""The shapes of a capture: a database, anything `convtap import` reads, or a shapes file.

Contexts, the denominators of "always" and "never" for a whole kind: a request is its own
context (family `requests`); a message's is its turn (family `turns`); an event's, delta op's
or WebSocket payload's is its flow, of the family of the flow's kind (`conversation` with its
resume legs, `responses` with its sockets, `websocket`), counted when it carried at least one.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from convtap.diff.baseline import is_shapes_file, read_shapes
from convtap.diff.shapes import (
    IDENTIFIER,
    Shapes,
    add,
    is_user_data,
    message_kind,
    pointer_pattern,
)
from convtap.ingest.capture import as_database
from convtap.store.database import (
    StoreError,
    event_text,
    iter_shape_rows,
    message_value,
    open_readonly,
)
from convtap.store.rows import MessageRow
from convtap.vocab import DONE, RESPONSE_CREATE, Endpoint, RawKind
from convtap.wire.bounded import Bounded
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.sse import SSEParser
from convtap.wire.wsturn import TURN_TOPIC_PREFIX, TurnTopicAssembler, frame_messages

# A resume leg goes on with its turn's events; a Responses socket carries the same events as
# a POST (one socket, one context).
FAMILIES: dict[str, str] = {
    Endpoint.RESUME.value: Endpoint.CONVERSATION.value,
    Endpoint.RESPONSES_SOCKET.value: Endpoint.RESPONSES.value,
}
JSON_RESPONSES = "responses-json"  # the family of Responses answers not streamed (JSON bodies)
MAX_FAMILIES = 64  # families one flow counts itself in (its own, its item types')
MAX_ITEMS = 4096  # Responses items of one flow whose type is remembered
MAX_TURN_TOPICS = 64  # turn topics of one user socket reassembled at once (the oldest forgotten)


def capture_shapes(path: Path) -> Shapes:
    """The shapes of a shapes file, of a capture database, or of anything `convtap import`
    reads (imported into a temporary database first). Rows are streamed, never loaded whole."""
    if is_shapes_file(path):
        return read_shapes(path)
    with as_database(path) as db:
        return database_shapes(db)


def database_shapes(path: Path) -> Shapes:
    db = open_readonly(path)
    shapes = Shapes()
    flow: str | None = None
    turn: Any = None
    state = _FlowState(shapes, "", "")
    try:
        for source, row in iter_shape_rows(db):
            if source == "request":
                shapes.contexts["requests"] += 1
                body = loads_or_none(row["request_body"])
                add(shapes, f"request:{row['kind']}", _request(row["kind"], body), "requests")
            elif source == "response":
                body = loads_or_none(row["response_body"])
                if isinstance(body, dict) and body.get("object") == "response":
                    shapes.contexts[JSON_RESPONSES] += 1
                    add(shapes, "response:responses", body, JSON_RESPONSES)
            elif source == "message":
                message = message_value(MessageRow.read(row))
                if not isinstance(message, dict):
                    continue
                context = str(row["turn_id"])
                if row["turn_id"] is None or context != turn:
                    shapes.contexts["turns"] += 1
                turn = context
                add(shapes, message_kind(message), message, "turns", context)
            else:
                if row["flow_id"] != flow:
                    state.close()
                    flow = row["flow_id"]
                    family = str(row["flow_kind"] or "?")
                    state = _FlowState(shapes, str(flow), FAMILIES.get(family, family))
                state.feed(row["event"], event_text(row))
        state.close()
    except sqlite3.DatabaseError as exc:  # a damaged page
        raise StoreError(f"{path} cannot be read: {exc}") from exc
    finally:
        db.conn.close()
    return shapes


def _request(kind: Any, body: Any) -> Any:
    """A Responses request as the protocol has it, whichever transport carried it and whichever
    of its forms the client wrote: a socket's `response.create` frame without its envelope
    `type`, a POST without `stream` (which only picks SSE over a JSON body), an `input` string
    as the one user message it stands for, an input message without `type` or with a string
    `content` as the typed message with text parts it stands for."""
    if kind != Endpoint.RESPONSES or not isinstance(body, dict):
        return body
    envelope = body.get("type") == RESPONSE_CREATE
    request = {k: v for k, v in body.items() if k != "stream" and not (envelope and k == "type")}
    items = request.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if isinstance(items, list):
        request["input"] = [_input_item(item) for item in items]
    return request


def _input_item(item: Any) -> Any:
    if not isinstance(item, dict) or "role" not in item or item.get("type", "message") != "message":
        return item
    typed = {**item, "type": "message"}
    if isinstance(item.get("content"), str):  # the text alone, for one text part
        typed["content"] = [{"type": "input_text", "text": item["content"]}]
    return typed


class _FlowState:
    """One flow's raw events: SSE framing and the sticky delta record (rule 2), or WS frames.
    A turn topic on the user socket carries a turn's SSE text (a handoff): it is reassembled
    and read as a `conversation` flow of its own, as if it had come over SSE."""

    def __init__(self, shapes: Shapes, flow: str, family: str) -> None:
        self.shapes, self.flow, self.family = shapes, flow, family
        self.counted: Bounded[str, bool] = Bounded(MAX_FAMILIES)  # the families counted
        self.items: Bounded[str, str] = Bounded(MAX_ITEMS)  # a Responses item's id -> type
        self.parser = SSEParser()
        self.record = ("", "add")  # p, o
        self.turns: Bounded[str, tuple[TurnTopicAssembler, _FlowState]] = Bounded(MAX_TURN_TOPICS)

    def close(self) -> None:
        for assembler, turn in self.turns.values():
            turn.feed(RawKind.SSE, assembler.close())

    def add(self, kind: str, obj: Any) -> None:
        family = self._family(obj)
        if family not in self.counted:
            self.shapes.contexts[family] += 1
            self.counted[family] = True
        add(self.shapes, kind, obj, family, self.flow)

    def _family(self, event: Any) -> str:
        """A Responses event about one item (`output_text.delta` of a message) is counted
        against the responses that produced an item of its type (`responses message`): which
        items a response has is the session's doing."""
        if self.family != Endpoint.RESPONSES or not isinstance(event, dict):
            return self.family
        item = event.get("item")
        item = item if isinstance(item, dict) else {}
        item_id, item_type = item.get("id"), item.get("type")
        if isinstance(item_id, str) and isinstance(item_type, str) and IDENTIFIER.match(item_type):
            self.items[item_id] = item_type
        kind = self.items.get(event.get("item_id"))  # type: ignore[arg-type]
        return self.family if kind is None else f"{self.family} {kind}"

    def feed(self, source: str, data: str) -> None:
        if source != RawKind.SSE:  # a WebSocket frame
            frame = loads_or_none(data)
            if isinstance(frame, dict):  # the Responses API's WebSocket mode: one event a frame
                kind = frame.get("type")
                kind = kind if isinstance(kind, str) else "(untyped)"
                if source == RawKind.WS_CLIENT and kind == RESPONSE_CREATE:
                    return  # a request: its body is the socket turn's `request:responses`
                self.add(f"event:{kind}" if source == RawKind.WS_SERVER else f"ws:{kind}", frame)
            for item in frame if isinstance(frame, list) else []:
                if isinstance(item, dict):
                    self._ws_item(item)
            if isinstance(frame, list) and source == RawKind.WS_SERVER:
                self._turn_topics(frame, data)
            return
        for event in self.parser.feed(data.encode()):
            if event.data == DONE:
                continue
            obj = loads_or_none(event.data)
            if event.event == "delta" and isinstance(obj, dict):
                self._delta(obj)
            elif event.event != "delta_encoding" and isinstance(obj, dict):
                kind = obj.get("type")
                self.add(f"event:{kind}" if isinstance(kind, str) else "event:(untyped)", obj)

    def _delta(self, delta: dict[str, Any]) -> None:
        p, o = delta.get("p", self.record[0]), delta.get("o", self.record[1])
        if not isinstance(p, str) or not isinstance(o, str):
            return
        self.record = (p, o)
        value = delta.get("v")
        ops = [(p, o, value)]
        if o == "patch" and isinstance(value, list):
            ops += [
                (p + str(s.get("p", "")), str(s.get("o")), s.get("v"))
                for s in value
                if isinstance(s, dict)
            ]
        for path, op, v in ops:
            kind = f"delta:{op}"
            self.add(kind, {})
            pattern = pointer_pattern(path)
            self.shapes.kinds[kind].add_value(pattern, v, is_user_data(kind, pattern))

    def _turn_topics(self, frame: list[Any], data: str) -> None:
        topics = {m.get("topic_id", t) for m, t in frame_messages(frame)}
        for topic in sorted(t for t in topics if isinstance(t, str)):
            if not topic.startswith(TURN_TOPIC_PREFIX):
                continue
            if topic not in self.turns:
                turn = _FlowState(self.shapes, f"{self.flow} {topic}", "conversation")
                self.turns[topic] = (TurnTopicAssembler(topic), turn)
            assembler, turn = self.turns[topic]
            turn.feed(RawKind.SSE, assembler.feed(data))

    def _ws_item(self, item: dict[str, Any]) -> None:
        payload = item.get("payload")
        if not isinstance(payload, dict):
            kind = "reply" if "reply" in item else str(item.get("type"))
            self.add(f"ws:{kind}", item)
            return
        inner = payload.get("payload")
        kind = str(payload.get("type"))
        if isinstance(inner, dict) and isinstance(inner.get("type"), str):
            kind += f":{inner['type']}"
        self.add(f"ws:{kind}", payload)
