"""The server's side of one turn, written as wire text: SSE events and WebSocket frames.

Pure and deterministic apart from the ids it is given. A `TurnWriter` renders the steps of a
turn (`Think`, `Call`, `Say`: see `addon/scenario.py` for the file format that lists them) the way
real streams look (docs/protocol.md, "Delta encoding v1"; `captures/examples/sse/build.py`): the
`delta_encoding` declaration, the conduit resume token, the input echo, the history echo with one
root per channel `c`, markers, pings, text appended in bare continuation frames, a finishing patch,
`message_stream_complete` and `[DONE]`. `Conversation` is the server's tree (what `GET
conversation/<id>` returns); `PlayedTurn` is one answer, with its resume legs; `ws_frames` puts a
WebSocket-delivered turn on the user socket.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from convtap.vocab import DONE as DONE_DATA
from convtap.vocab import MESSAGE_STREAM_COMPLETE, STREAM_HANDOFF
from convtap.wire.sse import SSEEvent, format_event

ROOT_NODE = "client-created-root"  # the mapping's root node, whose message is null
TOPIC_PREFIX = "conversation-turn-"  # docs/protocol.md, "WebSocket handoff"
DONE = f"data: {DONE_DATA}\n\n"

JSON = Any
IdFactory = Callable[[], str]


class ScenarioError(ValueError):
    """A request the scenario cannot answer (unknown conversation, no message, bad offset)."""


class FrozenData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Think(FrozenData):
    think: str


class Say(FrozenData):
    say: str
    echo_return: bool = False


class Call(FrozenData):
    call: str = Field(min_length=1)
    arguments: dict[str, JSON]


class CallDeclared(FrozenData):
    """The next tool the client declared and the model has not called yet in this conversation
    (any but `handoff`), with arguments made from its parameters; `otherwise` is said once every
    declared tool has been called."""

    call_declared: Literal["next"]
    otherwise: str = "Every tool you declared has been called once."


Step = Think | Say | Call | CallDeclared


class TurnScript(FrozenData):
    delivery: Literal["sse", "websocket"] = "sse"
    cut_after_events: int | None = Field(default=None, ge=1)
    steps: list[Step] = Field(min_length=1)

    @model_validator(mode="after")
    def _cut_needs_sse(self) -> TurnScript:
        if self.cut_after_events is not None and self.delivery != "sse":
            raise ValueError("cut_after_events applies to SSE delivery only")
        return self


@dataclass
class Conversation:
    """The server's tree: what `GET conversation/<id>` returns (docs/protocol.md, "Endpoints")."""

    id: str
    mapping: dict[str, dict[str, JSON]] = field(default_factory=dict)
    current_node: str = ROOT_NODE
    declared: list[dict[str, JSON]] = field(default_factory=list)  # the client's local tools
    declared_names: set[str] = field(default_factory=set)  # handoff included
    called: list[str] = field(default_factory=list)  # the declared tools called so far

    def __post_init__(self) -> None:
        self.mapping.setdefault(
            ROOT_NODE, {"id": ROOT_NODE, "message": None, "parent": None, "children": []}
        )

    def add(self, message: dict[str, JSON], parent: str) -> None:
        mid: str = message["id"]
        self.mapping[mid] = {"id": mid, "message": message, "parent": parent, "children": []}
        self.mapping[parent]["children"].append(mid)
        self.current_node = mid

    def path(self, node: str) -> list[dict[str, JSON]]:
        """The messages from the root down to `node`: the history a turn echoes."""
        out: list[dict[str, JSON]] = []
        at: str | None = node
        while at is not None:
            entry = self.mapping[at]
            if entry["message"] is not None:
                out.append(entry["message"])
            at = entry["parent"]
        return out[::-1]

    def tree(self) -> dict[str, JSON]:
        return {
            "conversation_id": self.id,
            "mapping": copy.deepcopy(self.mapping),
            "current_node": self.current_node,
        }


@dataclass(frozen=True)
class PlayedTurn:
    """One request's answer. `events` are complete SSE texts (comments included, `[DONE]`
    last); with WebSocket delivery `ws_items` are the turn topic's encoded items."""

    conversation_id: str
    turn_id: str
    conduit_token: str
    events: tuple[str, ...]
    ws_items: tuple[str, ...] = ()
    cut: int | None = None  # the f/conversation body breaks halfway through events[cut]

    @property
    def topic_id(self) -> str | None:
        return TOPIC_PREFIX + self.turn_id if self.ws_items else None

    def first_leg(self) -> list[str]:
        """The f/conversation body: whole, or cut in the middle of an event (no `[DONE]`)."""
        if self.cut is None:
            return list(self.events)
        broken = self.events[self.cut]
        return [*self.events[: self.cut], broken[: len(broken) // 2]]

    def resume_leg(self, offset: int) -> list[str]:
        """The f/conversation/resume body from event `offset` (docs/protocol.md, "Resume": every
        dispatched event except `[DONE]` counts; comments are not events)."""
        if offset < 0:
            raise ScenarioError(f"offset {offset} is negative")
        seen = 0
        for index, text in enumerate(self.events):
            if seen == offset and not _is_comment(text):
                return list(self.events[index:])
            if not _is_comment(text) and text != DONE:
                seen += 1
        raise ScenarioError(f"offset {offset} is past the end of the turn ({seen} events)")


def _is_comment(text: str) -> bool:
    return text.startswith(":")


def dispatched_count(events: list[str] | tuple[str, ...]) -> int:
    """How many events a client counts for the resume offset (docs/protocol.md, "Resume")."""
    return sum(1 for text in events if not _is_comment(text) and text != DONE)


def new_message(
    mid: str,
    role: str,
    stamp: float,
    *,
    text: str,
    code: bool = False,
    recipient: str = "all",
    channel: str | None = None,
    end_turn: bool | None = None,
    weight: float = 1.0,
    metadata: dict[str, JSON] | None = None,
) -> dict[str, JSON]:
    """A finished message in the `ConversationMessage` shape."""
    content: dict[str, JSON] = (
        {"content_type": "code", "language": "json", "text": text}  # the call's content
        if code
        else {"content_type": "text", "parts": [text]}
    )
    return {
        "id": mid,
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": stamp,
        "update_time": None,
        "content": content,
        "status": "finished_successfully",
        "end_turn": end_turn,
        "weight": weight,
        "metadata": metadata or {},
        "recipient": recipient,
        "channel": channel,
    }


def returned_value(tool_message: Mapping[str, JSON]) -> str:
    """What a return carried, as the continuation quotes it: `result.message` when there is
    one (the model reads result.message), else the result or the raw text."""
    content = tool_message.get("content")
    text = content.get("text") if isinstance(content, dict) else None
    if not isinstance(text, str):
        return json.dumps(content, ensure_ascii=False)
    try:
        body = json.loads(text)
    except ValueError:
        return text
    result = body.get("result", body) if isinstance(body, dict) else body
    if isinstance(result, dict) and isinstance(result.get("message"), str):
        return str(result["message"])
    return json.dumps(result, ensure_ascii=False)


def _event(data: JSON, name: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return format_event(SSEEvent(name or "message", text))


def _delta(**fields: JSON) -> str:
    return _event(fields, "delta")


class TurnWriter:
    """Writes one turn's events in the order real streams use (docs/protocol.md, "Delta encoding
    v1", rules 1-8)."""

    def __init__(
        self,
        conversation: Conversation,
        stamp: float,
        new_id: IdFactory,
        *,
        model: str,
        title: str | None = None,
        piece_size: int = 7,
    ) -> None:
        self.model = model
        self.title = title  # a title_generation event on the conversation's first turn
        self.piece_size = piece_size  # characters per streamed text frame
        self.conversation = conversation
        self.stamp = stamp
        self.new_id = new_id
        self.channel = 0  # rule 3: the next free root index c

    def write(
        self,
        script: TurnScript,
        inputs: list[dict[str, JSON]],
        conduit_token: str,
        first_turn: bool,
        tool_input: dict[str, JSON] | None,
    ) -> PlayedTurn:
        cid = self.conversation.id
        turn_id = self.new_id()
        head = [
            _event('"v1"', "delta_encoding"),  # rule 1: the stream declares its encoding
            _event(
                {
                    "type": "resume_conversation_token",  # rule 7: kind conduit
                    "kind": "conduit",
                    "token": conduit_token,
                    "expires_at": None,
                    "conversation_id": cid,
                }
            ),
        ]
        for message in inputs:  # rule 7: the input echo
            head.append(_event({"type": "input_message", "input_message": message, **self._c()}))
        for message in self.conversation.path(self.conversation.current_node):
            head.append(self._root(message))  # rule 3: the history echo, one root each
        head.append(self._ping())
        head.append(self._marker(inputs[-1]["id"], "user_visible_token", "first"))
        if first_turn and self.title:
            head.append(_event({"type": "title_generation", "title": self.title, **self._c()}))
        if script.delivery == "websocket":
            self.channel = 0  # the turn topic is decoded with a fresh decoder
            items = [_event('"v1"', "delta_encoding"), *self._steps(script, tool_input)]
            handoff = {
                "type": STREAM_HANDOFF,
                "conversation_id": cid,
                "turn_id": turn_id,
                "options": [{"type": "subscribe_ws_topic", "topic_id": TOPIC_PREFIX + turn_id}],
            }
            return PlayedTurn(
                cid, turn_id, conduit_token, (*head, _event(handoff), DONE), tuple(items)
            )
        events = head + self._steps(script, tool_input)
        cut = None if script.cut_after_events is None else _cut_index(events, script)
        return PlayedTurn(cid, turn_id, conduit_token, tuple(events), cut=cut)

    def _c(self) -> dict[str, JSON]:
        return {"conversation_id": self.conversation.id}

    def _steps(self, script: TurnScript, tool_input: dict[str, JSON] | None) -> list[str]:
        out: list[str] = []
        model = {"cot_version": "v5", "resolved_model_slug": self.model}
        for step in script.steps:
            if isinstance(step, Think):  # the analysis channel is hidden reasoning
                meta = {**model, "is_visually_hidden_from_conversation": True}
                msg = self._new(text=step.think, channel="analysis", metadata=meta)
                out += self._stream(msg, "/message/content/parts/0")
            elif isinstance(step, Call):  # the local call's exact structure ("Local tool calls")
                args = json.dumps(step.arguments, ensure_ascii=False)
                meta = {**model, "reasoning_status": "is_reasoning"}
                msg = self._new(
                    text=args,
                    code=True,
                    recipient=f"local.{step.call}",
                    channel="commentary",
                    metadata=meta,
                )
                out += self._stream(msg, "/message/content/text")
            elif isinstance(step, Say):
                text = step.say
                if step.echo_return and tool_input is not None:
                    text = f"{text} {returned_value(tool_input)}"
                msg = self._new(text=text, channel="final", end_turn=True, metadata=model)
                out += self._stream(msg, "/message/content/parts/0", final_marker=True)
        out.append(self._marker(self.conversation.current_node, "last_token", "last"))
        out.append(_event({"type": MESSAGE_STREAM_COMPLETE, **self._c()}))
        out.append(
            _event({"type": "conversation_detail_metadata", "banner_info": None, **self._c()})
        )
        out.append(DONE)  # rule 8
        return out

    def _new(self, **kwargs: Any) -> dict[str, JSON]:
        message = new_message(self.new_id(), "assistant", self.stamp, **kwargs)
        self.conversation.add(message, self.conversation.current_node)
        return message

    def _stream(
        self,
        final: dict[str, JSON],
        path: str,
        *,
        final_marker: bool = False,
    ) -> list[str]:
        """A message born empty and in progress, its text appended in bare frames (rule 2),
        finished by a patch (rule 4) — the shape of every streamed message in the captures."""
        born = copy.deepcopy(final)
        born["status"], born["end_turn"] = "in_progress", None
        if "text" in born["content"]:  # code: the arguments ("Local tool calls")
            text, born["content"]["text"] = final["content"]["text"], ""
        else:
            text, born["content"]["parts"] = final["content"]["parts"][0], [""]
        step = self.piece_size
        pieces = [text[i : i + step] for i in range(0, len(text), step)] or [""]
        c = self.channel
        self.channel += 1
        out = [_delta(p="", o="add", v=self._root_value(born), c=c)]
        out.append(_delta(p=path, o="append", v=pieces[0]))
        if final_marker:
            out.append(self._marker(final["id"], "final_channel_token", "first"))
        for n, piece in enumerate(pieces[1:], 1):
            out.append(_delta(v=piece))  # rule 2: a bare continuation frame
            if n % 4 == 0:
                out.append(self._ping())
        patch = [
            {"p": "/message/status", "o": "replace", "v": "finished_successfully"},
            {"p": "/message/end_turn", "o": "replace", "v": final["end_turn"]},
            {"p": "/message/metadata", "o": "append", "v": {"is_complete": True}},
        ]
        final["metadata"] = {**final["metadata"], "is_complete": True}
        out.append(_delta(p="", o="patch", v=patch))
        return out

    def _root_value(self, message: dict[str, JSON]) -> dict[str, JSON]:
        return {"message": message, "conversation_id": self.conversation.id, "error": None}

    def _root(self, message: dict[str, JSON]) -> str:
        c = self.channel
        self.channel += 1
        if c == 0:
            return _delta(p="", o="add", v=self._root_value(message), c=c)
        return _delta(v=self._root_value(message), c=c)  # rule 2: p and o carried over

    def _marker(self, message_id: str, marker: str, event: str) -> str:
        return _event(
            {
                "type": "message_marker",  # rule 7
                "conversation_id": self.conversation.id,
                "message_id": message_id,
                "marker": marker,
                "event": event,
            }
        )

    def _ping(self) -> str:
        stamp = datetime.fromtimestamp(self.stamp, UTC).isoformat(sep=" ")
        return f": ping - {stamp}\n\n"  # docs/protocol.md, "SSE framing": the keep-alive


def _cut_index(events: list[str], script: TurnScript) -> int:
    """The first bare continuation frame at or after event offset `cut_after_events`, so that
    the resume leg starts with one (docs/protocol.md, "Resume")."""
    assert script.cut_after_events is not None
    seen = 0
    for index, text in enumerate(events):
        if _is_comment(text):
            continue
        if seen >= script.cut_after_events and _is_bare_frame(text):
            return index
        seen += 1
    raise ScenarioError(f"no bare continuation frame after event {script.cut_after_events}")


def _is_bare_frame(text: str) -> bool:
    """A delta of the form `{"v": "<text>"}` (docs/protocol.md, "Delta encoding v1", rule 2)."""
    if not text.startswith("event: delta\ndata: "):
        return False
    value = json.loads(text[len("event: delta\ndata: ") :])
    return isinstance(value, dict) and list(value) == ["v"] and isinstance(value["v"], str)


def ws_frames(turn: PlayedTurn, *, subscribe_id: int | None = None) -> list[str]:
    """The user socket's frames for a WebSocket-delivered turn (docs/protocol.md, "WebSocket
    handoff"), with the irregularities a reassembler must survive: catch-ups in the subscribe
    reply, a frame on another topic, an item sent before its parent, a duplicate, a heartbeat,
    then `done`. With `subscribe_id` the first frame is the reply to that subscribe command,
    carrying the first two items as catch-ups (items already published); without, every item
    is a message (the client subscribed before the turn began)."""
    topic = turn.topic_id
    if topic is None:
        return []

    def envelope(offset: int, payload: dict[str, JSON]) -> dict[str, JSON]:
        return {"type": "message", "topic_id": topic, "offset": offset, "payload": payload}

    def item(n: int) -> dict[str, JSON]:
        return envelope(
            n + 1,
            {
                "type": "conversation-turn-stream",
                "payload": {
                    "type": "stream-item",
                    "conversation_id": turn.conversation_id,
                    "turn_id": turn.turn_id,
                    "encoded_item": turn.ws_items[n],
                    "stream_item_id": f"{turn.turn_id}-{n}",
                    "parent_stream_item_id": f"{turn.turn_id}-{n - 1}" if n else None,
                    "server_timestamp_ms": 1_787_848_300_000 + n,
                },
            },
        )

    frames: list[list[dict[str, JSON]]] = []
    order = list(range(len(turn.ws_items)))
    if subscribe_id is not None:
        catchups = [item(n) for n in order[:2]]
        reply = {"type": "subscribe", "topic_id": topic, "recovered": True}
        reply |= {"last_offset": len(catchups), "catchups": catchups}
        frames.append([{"id": subscribe_id, "reply": reply}])
        order = order[2:]
    other = {"type": "conversation-updated", "conversation_id": turn.conversation_id}
    frames.append([{"type": "message", "topic_id": "conversations", "offset": 7, "payload": other}])
    if len(order) > 3:
        order[1], order[2] = order[2], order[1]  # an item that arrives before its parent
    heartbeat = {"type": "conversation-turn-stream", "payload": {"type": "heartbeat"}}
    for position, n in enumerate(order):
        frames.append([item(n)])
        if position == 3:
            frames.append([item(n)])  # a duplicate: dropped by stream_item_id
            frames.append([envelope(0, heartbeat)])
    done = {"type": "conversation-turn-stream", "payload": {"type": "done"}}
    frames.append([envelope(len(turn.ws_items) + 1, done)])
    return [json.dumps(frame, ensure_ascii=False) for frame in frames]
