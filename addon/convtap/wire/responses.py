"""The Responses API stream (docs/protocol.md, "Responses API"): typed events in, output
items and the calls the client must execute out.

`POST /v1/responses` (and the Codex backend's `…/codex/responses`) streams events whose data is
an object with a `type` (`response.created`, `response.output_item.added`,
`response.function_call_arguments.delta` / `.done`, `response.output_item.done`,
`response.completed`, ...); there is no `[DONE]`. Client-executed calls are `function_call`,
`custom_tool_call` and `tool_search_call` with `execution: "client"`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from convtap.vocab import DONE, CallKind, DecodeErrorKind, WireProtocol
from convtap.wire.bounded import Bounded, Kept
from convtap.wire.calls import ToolCall
from convtap.wire.events import (
    ControlEvent,
    Decoded,
    DecodeError,
    DecoderEvent,
    excerpt,
)
from convtap.wire.jsonvalue import loads, loads_or_none
from convtap.wire.provenance import Began, Ended, Piece, StringEvent
from convtap.wire.sse import OVERSIZED, SSEEvent, SSEParser
from convtap.wire.typed import item_errors

PROTOCOL = WireProtocol.RESPONSES
CLIENT_CALLS = ("function_call", "custom_tool_call", "tool_search_call")

# Every event type the Responses API streams (the official SDK's `ResponseStreamEvent` union,
# held equal to it by a test, and WebSocket mode's steering answers). The decoder reads the few
# it needs; every other one is kept as it came, never a decode error.
EVENT_TYPES = frozenset(
    {
        "error",
        *(f"response.{name}" for name in (
            "created", "in_progress", "queued", "completed", "failed", "incomplete",
            "output_item.added", "output_item.done", "content_part.added", "content_part.done",
            "output_text.delta", "output_text.done", "output_text.annotation.added",
            "refusal.delta", "refusal.done", "function_call_arguments.delta",
            "function_call_arguments.done", "custom_tool_call_input.delta",
            "custom_tool_call_input.done", "reasoning_text.delta", "reasoning_text.done",
            "reasoning_summary_part.added", "reasoning_summary_part.done",
            "reasoning_summary_text.delta", "reasoning_summary_text.done", "audio.delta",
            "audio.done", "audio.transcript.delta", "audio.transcript.done",
            "code_interpreter_call.in_progress", "code_interpreter_call.interpreting",
            "code_interpreter_call.completed", "code_interpreter_call_code.delta",
            "code_interpreter_call_code.done", "file_search_call.in_progress",
            "file_search_call.searching", "file_search_call.completed",
            "web_search_call.in_progress", "web_search_call.searching",
            "web_search_call.completed", "image_generation_call.in_progress",
            "image_generation_call.generating", "image_generation_call.partial_image",
            "image_generation_call.completed", "mcp_call.in_progress", "mcp_call.completed",
            "mcp_call.failed", "mcp_call_arguments.delta", "mcp_call_arguments.done",
            "mcp_list_tools.in_progress", "mcp_list_tools.completed", "mcp_list_tools.failed",
            "shell_call_command.added", "shell_call_command.delta", "shell_call_command.done",
            "shell_call_output_content.delta", "shell_call_output_content.done",
            "compaction.compacting",
            # WebSocket mode: the answers to a client's `response.steer`
            "steer.accepted", "steer.pending", "steer.failed",
        )),
    }
)  # fmt: skip
# Every item type of a request's `input` and a response's `output` (the SDK's
# `ResponseInputItem` and `ResponseOutputItem` unions, held equal by the same test).
ITEM_TYPES = frozenset(
    {
        "message", "item_reference", "reasoning", "compaction", "compaction_trigger",
        "configuration_update", "additional_tools", "program", "program_output",
        "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
        "tool_search_call", "tool_search_output", "file_search_call", "web_search_call",
        "image_generation_call", "code_interpreter_call", "computer_call",
        "computer_call_output", "local_shell_call", "local_shell_call_output", "shell_call",
        "shell_call_output", "apply_patch_call", "apply_patch_call_output", "mcp_call",
        "mcp_list_tools", "mcp_approval_request", "mcp_approval_response",
    }
)  # fmt: skip
OUTPUTS = ("function_call_output", "custom_tool_call_output", "tool_search_output")
# The field of a client call that its `*_arguments.delta` / `*_input.delta` events stream.
STREAMED_TEXT = {"function_call": "arguments", "custom_tool_call": "input"}
MAX_KEPT = 1000  # errors and event types kept
MAX_ITEMS = 10_000  # output items and argument streams a response may hold
MAX_DELTAS = 100_000  # argument deltas one call may stream


def delta_text(value: object) -> tuple[tuple[object, ...], str] | None:
    """(the item and part it continues, its text) of a `*.delta` event (output text, a function
    call's arguments, ...), which streams text as bare frames do; None for any other value."""
    if not isinstance(value, dict):
        return None
    kind, text = value.get("type"), value.get("delta")
    if not isinstance(kind, str) or not kind.endswith(".delta") or not isinstance(text, str):
        return None
    where = (kind, value.get("item_id"), value.get("output_index"), value.get("content_index"),
             value.get("summary_index"))  # fmt: skip
    return where, text


_DELTA: tuple[str, ...] = ("delta",)
_OVER = frozenset({"response.completed", "response.failed", "response.incomplete"})


@dataclass
class ResponsesDecoder:
    response_id: str | None = None
    status: str | None = None
    event_types: list[str] = field(default_factory=list)  # distinct, in order of first appearance
    errors: Kept[dict[str, Any]] = field(default_factory=lambda: Kept(MAX_KEPT))
    event_count: int = 0
    # What the final response object said of its cost: its model, `usage`, `service_tier` and
    # why it stopped short (`incomplete_details.reason`); the cost is priced from these.
    model: str | None = None
    usage: dict[str, Any] | None = None
    service_tier: str | None = None
    incomplete_reason: str | None = None
    # output_index -> item, item id -> its argument deltas: bounded, like everything kept
    _items: Bounded[int, dict[str, Any]] = field(default_factory=lambda: Bounded(MAX_ITEMS))
    _arguments: Bounded[str, list[str]] = field(default_factory=lambda: Bounded(MAX_ITEMS))
    # Where each string's text came from (`wire.provenance`), when a reader asks (`follow`):
    # a string is what one item's part streams in `*.delta` events, numbered by where it is.
    follow: bool = False
    _strings: Bounded[tuple[object, ...], int] = field(
        default_factory=lambda: Bounded(MAX_ITEMS)
    )  # fmt: skip
    _out: list[StringEvent] = field(default_factory=list)
    _next: int = 0

    def strings(self) -> list[StringEvent]:
        """What the events fed since the last call did to strings (with `follow`)."""
        out, self._out = self._out, []
        return out

    def feed_all(
        self, events: Iterable[SSEEvent], bad_utf8: Iterable[int] = ()
    ) -> list[DecoderEvent]:
        """A parser's events, and where among them its bytes were not UTF-8; what they did: a
        `ControlEvent` for each typed event but the `*.delta` ones (which only grow an item:
        read it from `summary()`), and the decode errors."""
        first = self.event_count
        found: list[DecoderEvent] = []
        for event in events:
            value = self._feed_one(event, found)
            if self.follow and isinstance(value, dict):
                self._follow(self.event_count - 1, value)  # (its index)
        for position in bad_utf8:
            detail = "bytes that are not UTF-8 (read as U+FFFD)"
            found.append(self._error(first + position, DecodeErrorKind.INVALID_UTF8, detail))
        return found

    def feed(self, event: SSEEvent) -> list[DecoderEvent]:
        """One event; what it did."""
        return self.feed_all((event,))

    def _follow(self, index: int, value: dict[str, Any]) -> None:
        """What event `index` did to strings: a `*.delta` grows its part's, a `*.done` ends
        it, an item's `.done` ends its parts', the response's end ends all."""
        delta = delta_text(value)
        if delta is not None:
            where, text = delta
            string = self._strings.get(where)
            if string is None:
                string = self._strings[where] = self._next
                self._next += 1
                self._out.append(Began(string, -1, ()))
            self._out.append(Piece(string, index, _DELTA, text))
            return
        kind = value.get("type")
        if not isinstance(kind, str) or not self._strings:
            return
        if kind in _OVER:
            ended = list(self._strings)
        elif kind == "response.output_item.done":
            item = value.get("item")
            item_id = item.get("id") if isinstance(item, dict) else None
            position = value.get("output_index")
            ended = [w for w in self._strings
                     if (item_id is not None and w[1] == item_id) or w[2] == position]  # fmt: skip
        elif kind.endswith(".done"):
            where = (kind[: -len(".done")] + ".delta", value.get("item_id"),
                     value.get("output_index"), value.get("content_index"),
                     value.get("summary_index"))  # fmt: skip
            ended = [where] if where in self._strings else []
        else:
            return
        for where in ended:
            self._out.append(Ended(self._strings.pop(where)))

    def _feed_one(self, event: SSEEvent, found: list[DecoderEvent]) -> object:
        """One event, what it did added to `found`; its data as parsed (None when it is not
        JSON)."""
        index = self.event_count
        self.event_count += 1
        if event.data == DONE:
            return None
        if event.event == OVERSIZED:
            detail = f"an event of {event.data} bytes, over the limit"
            found.append(self._error(index, DecodeErrorKind.EVENT_TOO_LARGE, detail))
            return None
        try:
            obj = loads(event.data)
        except ValueError as exc:
            found.append(
                self._error(index, DecodeErrorKind.MALFORMED_JSON, f"{event.event} event: {exc}")
            )
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            detail = "an event that is not a typed object"
            found.append(self._error(index, DecodeErrorKind.UNEXPECTED_VALUE, detail))
            return obj
        kind = obj["type"]
        if not kind.endswith(".delta"):  # a delta (most of a stream) changes only an item
            found.append(ControlEvent(obj))
        if kind not in self.event_types and len(self.event_types) < MAX_KEPT:
            self.event_types.append(kind)
        response = obj.get("response")
        if isinstance(response, dict):
            self.response(response, final=kind != "response.created")
        position = obj.get("output_index")
        item = obj.get("item")
        if isinstance(item, dict) and isinstance(position, int):
            self._items[position] = item  # .added, then replaced by .done
        if kind == "response.output_item.done" and isinstance(item, dict):
            self._check(index, item, found)
        if kind.endswith("_arguments.delta") or kind.endswith("_input.delta"):
            key = str(obj.get("item_id") or position)
            deltas = self._arguments.get(key)
            if deltas is None:
                deltas = self._arguments[key] = []
            if len(deltas) < MAX_DELTAS:
                deltas.append(str(obj.get("delta", "")))
        elif kind.endswith("_arguments.done") or kind.endswith("_input.done"):
            key = str(obj.get("item_id") or position)
            final = obj.get("arguments", obj.get("input"))
            streamed = "".join(self._arguments.get(key, []))
            if key in self._arguments and isinstance(final, str) and streamed != final:
                detail = (
                    f"item {key}: the deltas add up to {excerpt(streamed, 60)!r}, .done says "
                    f"{excerpt(final, 60)!r}"
                )
                found.append(self._error(index, DecodeErrorKind.ARGUMENTS_MISMATCH, detail))
            target = self._item(key, position)
            if target is not None and isinstance(final, str):
                target["input" if kind.endswith("_input.done") else "arguments"] = final
        return obj

    def whole(self, body: bytes) -> list[DecoderEvent]:
        """A non-streamed answer: one JSON response object."""
        try:
            value = loads(body.decode("utf-8", "replace"))
        except ValueError as exc:
            return [self._error(self.event_count, DecodeErrorKind.MALFORMED_JSON, str(exc))]
        found: list[DecoderEvent] = []
        if isinstance(value, dict):
            self.response(value)
            output = value.get("output")
            for item in output if isinstance(output, list) else ():
                if isinstance(item, dict):
                    self._check(self.event_count, item, found)
        return found

    def _check(self, index: int, item: dict[str, Any], found: list[DecoderEvent]) -> None:
        """A finished item validated once against its model (`wire.typed`)."""
        for detail in item_errors(item):
            found.append(self._error(index, DecodeErrorKind.WRONG_TYPE, detail))

    def response(self, response: dict[str, Any], *, final: bool = True) -> None:
        """A response object (from an event, or a whole non-streamed JSON answer)."""
        if isinstance(response.get("id"), str):
            self.response_id = response["id"]
        if isinstance(response.get("status"), str):
            self.status = response["status"]
        if isinstance(response.get("model"), str):
            self.model = response["model"]
        if isinstance(response.get("usage"), dict):
            self.usage = response["usage"]
        if isinstance(response.get("service_tier"), str):
            self.service_tier = response["service_tier"]
        details = response.get("incomplete_details")
        if isinstance(details, dict) and isinstance(details.get("reason"), str):
            self.incomplete_reason = details["reason"]
        output = response.get("output")
        if final and isinstance(output, list) and output:
            self._items.clear()
            for n, item in enumerate(output):
                if isinstance(item, dict):
                    self._items[n] = item

    def _item(self, key: str, position: Any) -> dict[str, Any] | None:
        for item in self._items.values():
            if item.get("id") == key:
                return item
        return self._items.get(position) if isinstance(position, int) else None

    def _error(self, index: int, kind: DecodeErrorKind, detail: str) -> DecodeError:
        error = DecodeError(index, kind, detail)
        self.errors.append(error._asdict())
        return error

    @property
    def output_items(self) -> list[dict[str, Any]]:
        items = [self._items[n] for n in sorted(self._items)]
        for item in items:  # a call whose .done never came: what its deltas said
            key = str(item.get("id"))
            field = STREAMED_TEXT.get(str(item.get("type")))
            if field is not None and not item.get(field) and key in self._arguments:
                item[field] = "".join(self._arguments[key])
        return items

    def summary(self) -> ResponseSummary:
        """What the response said so far, as one value (read when it ends)."""
        return ResponseSummary(self.response_id, self.status, list(self.event_types),
                               self.output_items, list(self.errors), self.model, self.usage,
                               self.service_tier, self.incomplete_reason)  # fmt: skip

    def tool_calls(self) -> list[ToolCall]:
        return self.summary().tool_calls()

    def result(self) -> dict[str, Any]:
        return self.summary().result()


@dataclass(frozen=True, slots=True)
class ResponseSummary:
    """One response as decoded: its id and status, the event types it used, its output items
    (a call's arguments put together), and the decode errors (up to the decoder's bound)."""

    response_id: str | None
    status: str | None
    event_types: list[str]
    output_items: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    model: str | None = None
    usage: dict[str, Any] | None = None  # the response's `usage`, as it came
    service_tier: str | None = None
    incomplete_reason: str | None = None

    def tool_calls(self) -> list[ToolCall]:
        """The calls the client must execute."""
        return client_calls(self.output_items)

    def result(self) -> dict[str, Any]:
        """`convtap decode --format json` for this protocol (a contract)."""
        return {
            "protocol": PROTOCOL,
            "response_id": self.response_id,
            "status": self.status,
            "event_types": self.event_types,
            "output_items": self.output_items,
            "tool_calls": [call.as_json() for call in self.tool_calls()],
            "errors": self.errors,
        }


class ResponsesStream:
    """A Responses API event stream, chunk by chunk, through the same entry as f/conversation's
    `TurnDecoder` (`convtap.wire.events.StreamDecoder`); `decoder` holds what the response
    said, read when it ends."""

    def __init__(self, decoder: ResponsesDecoder | None = None, *, follow: bool = False) -> None:
        # one response's, across its bodies; `follow`: its strings followed (`Decoded.strings`,
        # for a redaction that reads them: the recorder's)
        self.decoder = decoder or ResponsesDecoder(follow=follow)
        self._parser = SSEParser()

    def feed(self, chunk: bytes) -> Decoded:
        block = self._parser.read(chunk)
        first = self.decoder.event_count
        found = self.decoder.feed_all(block.events, block.bad_utf8)
        return Decoded(found, block.text, block.events, first, self.decoder.strings(),
                       block.unread_lines, block.unread_text)  # fmt: skip

    def end_leg(self) -> bool:
        return self._parser.close()

    def summary(self) -> ResponseSummary:
        return self.decoder.summary()


def qualified_name(namespace: object, name: object) -> str | None:
    """A tool as a Responses client names it: `namespace.name` for a function of a namespace
    tool (`crm.lookup`), else its name; None when it has neither. Any JSON value is taken."""
    parts = [str(part) for part in (namespace, name) if part not in (None, "")]
    if len(parts) == 2 and parts[0] == parts[1]:  # a deferred function named as its namespace
        return parts[1]
    return ".".join(parts) or None


def client_calls(items: list[Any]) -> list[ToolCall]:
    """The calls the client must execute: function and custom tool calls, and tool searches
    whose `execution` is `client`."""
    calls = []
    for item in items:
        if not isinstance(item, dict) or item.get("type") not in CLIENT_CALLS:
            continue
        if item["type"] == "tool_search_call" and item.get("execution") != "client":
            continue
        calls.append(client_call(item))
    return calls


def client_call(item: dict[str, Any], execution: str | None = "client") -> ToolCall:
    """A client call item (`CLIENT_CALLS`) as a call, from a response's output or a request's
    input; `execution` is the item's when it says none (a response's calls are the client's)."""
    raw = item.get("input") if item.get("type") == "custom_tool_call" else item.get("arguments")
    # One meaning per key, as for f/conversation: `arguments` the parsed JSON value (null when
    # it is not JSON), `arguments_text` the text as it came.
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    name = item.get("name")
    return ToolCall(
        protocol=PROTOCOL,
        call_id=_text(item.get("call_id")),
        item_id=_text(item.get("id")),
        namespace=_text(item.get("namespace")),  # a function of a namespace tool
        recipient=str(item.get("type")),
        kind=CallKind.CLIENT,
        tool="" if name is None else str(name),  # any JSON value a stream sends, as text
        arguments=loads_or_none(raw) if isinstance(raw, str) else raw,
        arguments_text=text,
        complete=True,
        execution=_text(item.get("execution", execution)),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def decode_responses(bodies: list[bytes]) -> ResponsesDecoder:
    """Whole bodies: event streams, or a non-streamed JSON response object."""
    decoder = ResponsesDecoder()
    for body in bodies:
        stripped = body.lstrip()
        if stripped.startswith(b"{"):
            decoder.whole(stripped)
            continue
        stream = ResponsesStream(decoder)
        stream.feed(body)
        stream.end_leg()
    return decoder


# A Responses API event's type, or a whole response object, in JSON spaced or compact.
_RESPONSES_TYPE = re.compile(rb'"type"\s*:\s*"response\.')
_RESPONSE_OBJECT = re.compile(rb'"object"\s*:\s*"response"')


def looks_like_responses(body: bytes) -> bool:
    """True when a body is a Responses API stream or response (not f/conversation), with or
    without `event:` lines."""
    head = body[:4096]
    return (
        b"event: response." in head
        or _RESPONSES_TYPE.search(head) is not None
        or (head.lstrip().startswith(b"{") and _RESPONSE_OBJECT.search(head) is not None)
    )
