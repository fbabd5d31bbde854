"""`convtap export --shape-only` of streams: an SSE stream's and a WebSocket's events shaped in
wire order (pure), each with what the events before it set up (`shape` says what is kept and
what is replaced).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from convtap.export.blank import (
    JsonTextShaper,
    dump,
    is_json_container,
    keeps,
    kept,
    shape_json_text,
    shape_object,
    shape_string,
    shape_text,
    shape_value,
)
from convtap.vocab import DONE, DecodeErrorKind
from convtap.wire.bounded import Bounded
from convtap.wire.delta import OPS, DeltaDecoder
from convtap.wire.events import DecodeError, StreamDone
from convtap.wire.jsonvalue import JSON, loads, loads_or_none
from convtap.wire.sse import SSEEvent
from convtap.wire.wsturn import frame_messages

ARGUMENTS_DELTA = "response.function_call_arguments.delta"
MAX_STREAMS = 4096  # Responses argument streams per response, WebSocket topics per socket
MAX_ITEMS = 100_000  # WebSocket stream items remembered (as wire.wsturn)
_CODE_TEXT = ("message", "content", "text")
_CONTENT_TYPE = ("message", "content", "content_type")
_UNKNOWN = "?"  # a channel whose message was never seen whole


@dataclass
class _CodeText:
    """A call's arguments being appended to: the scanner, and the text so far (for truncate)."""

    shaper: JsonTextShaper
    text: list[str]

    def feed(self, piece: str) -> str:
        self.text.append(piece)
        return self.shaper.feed(piece)


class StreamShaper:
    """The events of one stream in wire order (a turn across its legs, a WebSocket turn topic,
    a Responses stream), each shaped with what the events before it set up: the sticky delta
    record (rule 2), each channel's content type, the arguments being appended to.

    Given the turn's `DeltaDecoder`, a delta the decoder refuses leaves that state as it was,
    as it leaves the decoder's (rule 6, the recorder's reading)."""

    def __init__(self, decoder: DeltaDecoder | None = None) -> None:
        self.decoder = decoder
        self.done = False  # the stream said [DONE]
        self._arguments: Bounded[str, JsonTextShaper] = Bounded(MAX_STREAMS)
        self._reset()

    def _reset(self) -> None:
        self._record: tuple[int, str, str] = (0, "", "add")  # rule 2: sticky c, p, o
        self._content_types: dict[int, str | None] = {}  # rule 3: one root per channel c
        self._code: dict[int, _CodeText] = {}

    def event(self, name: str, data: str) -> str:
        """One dispatched event's data, shaped."""
        valid = True
        if self.decoder is not None:
            found = self.decoder.feed(SSEEvent(name, data))
            valid = not any(
                type(e) is DecodeError and e.kind == DecodeErrorKind.INVALID_DELTA for e in found
            )
            self.done = self.done or any(type(e) is StreamDone for e in found)
        if data == DONE:  # rule 8
            return data
        try:
            value = loads(data)
        except ValueError:
            return shape_text(data)
        if name == "delta_encoding":
            if value == "v1":  # rule 1: a new delta state
                self._reset()
            return data
        if name == "delta" and isinstance(value, dict):
            return dump(self._delta(value) if valid else shape_value(value))
        if isinstance(value, dict) and value.get("type") == ARGUMENTS_DELTA:
            return dump(self._arguments_delta(value))
        return dump(shape_value(value))

    def _delta(self, delta: dict[str, JSON]) -> JSON:
        c0, p0, o0 = self._record
        c, p, o = delta.get("c", c0), delta.get("p", p0), delta.get("o", o0)  # rule 2
        segments = _segments(p) if isinstance(p, str) else None
        if type(c) is not int or segments is None or not isinstance(o, str) or o not in OPS:
            return shape_value(delta)
        self._record = (c, str(p), str(o))
        out = dict(delta)
        if "v" in delta:  # rule 2: v is never copied
            if o == "patch":
                out["v"] = self._patch(c, str(p), delta["v"])
            else:
                out["v"] = self._value(c, segments, str(o), delta["v"])
        return out

    def _patch(self, c: int, path: str, ops: JSON) -> JSON:
        """Rule 4 `patch`: each sub-op has its own p and o, relative to the patch's path."""
        if not isinstance(ops, list):
            return shape_value(ops)
        out: list[JSON] = []
        for sub in ops:
            p, o = (sub.get("p"), sub.get("o")) if isinstance(sub, dict) else (None, None)
            segments = _segments(path + p) if isinstance(p, str) else None
            if not isinstance(sub, dict) or segments is None or not isinstance(o, str):
                out.append(shape_value(sub))
                continue
            shaped = dict(sub)
            if "v" in sub:
                if o == "patch":
                    shaped["v"] = self._patch(c, path + str(p), sub["v"])
                else:
                    shaped["v"] = self._value(c, segments, o, sub["v"])
            out.append(shaped)
        return out

    def _value(self, c: int, segments: tuple[str, ...], op: str, value: JSON) -> JSON:
        """The `v` of one op at `segments` of channel c's root, shaped; the state follows it."""
        if op == "truncate":
            if segments == _CODE_TEXT and isinstance(value, int):
                self._truncate_code(c, value)
            return value
        if op == "append" and segments == _CODE_TEXT and self._is_code(c):
            code = self._code.get(c)
            if code is None:
                code = self._code[c] = _CodeText(JsonTextShaper(), [])
            text = code.feed(_as_text(value))
            return text if isinstance(value, str) else value
        key = _last_key(segments)
        if keeps(key):
            shaped = kept(value)
        elif isinstance(value, str):
            if segments == _CODE_TEXT and (self._is_code(c) or is_json_container(value)):
                shaped = shape_json_text(value)
            else:
                shaped = shape_text(value) if op == "append" else shape_string(value)
        elif isinstance(value, dict):
            inherited = segments == _CODE_TEXT[:2] and self._content_types.get(c) == "code"
            shaped = shape_object(value, code=inherited)
        else:
            shaped = shape_value(value)
        self._track(c, segments, op, value)
        return shaped

    def _is_code(self, c: int) -> bool:
        """Whether channel c's message is code: its /message/content/text is JSON text (a
        call's arguments). Unknown (a resume leg of a turn not seen) counts as code."""
        return self._content_types.get(c, _UNKNOWN) in ("code", _UNKNOWN)

    def _track(self, c: int, segments: tuple[str, ...], op: str, value: JSON) -> None:
        """What an op changed: the message's content type, the arguments being appended to."""
        if _CONTENT_TYPE[: len(segments)] == segments:
            found = _descend(value, _CONTENT_TYPE[len(segments) :])
            if isinstance(found, str):
                self._content_types[c] = found
            elif op != "append":
                self._content_types[c] = None
        if _CODE_TEXT[: len(segments)] == segments:
            text = _descend(value, _CODE_TEXT[len(segments) :])
            if isinstance(text, str):
                self._code[c] = _CodeText(JsonTextShaper(), [])
                self._code[c].feed(text)
            elif op != "append":
                self._code.pop(c, None)

    def _truncate_code(self, c: int, units: int) -> None:
        code = self._code.get(c)
        if code is not None:
            self._code[c] = _CodeText(JsonTextShaper(), [])
            self._code[c].feed(_utf16_prefix("".join(code.text), units))

    def _arguments_delta(self, event: dict[str, JSON]) -> dict[str, JSON]:
        """Responses: a call's arguments streamed in `delta`s, shaped as one JSON text."""
        key = str(event.get("item_id") or event.get("output_index"))  # as ResponsesDecoder
        shaper = self._arguments.get(key)
        if shaper is None:
            shaper = self._arguments[key] = JsonTextShaper()
        rest = shape_object({k: v for k, v in event.items() if k != "delta"}, code=False)
        delta = event.get("delta")
        return {
            k: (shaper.feed(delta) if k == "delta" and isinstance(delta, str) else rest.get(k, v))
            for k, v in event.items()
        }


def _segments(path: str) -> tuple[str, ...] | None:
    """Rule 5: a JSON Pointer's segments (`~1` before `~0`), or None when it is not one."""
    if path == "":
        return ()
    if path[0] != "/":
        return None
    return tuple(s.replace("~1", "/").replace("~0", "~") for s in path[1:].split("/"))


def _last_key(segments: tuple[str, ...]) -> str | None:
    for segment in reversed(segments):
        if not (segment == "-" or (segment.isascii() and segment.isdigit())):
            return segment
    return None


def _descend(value: JSON, keys: tuple[str, ...]) -> JSON:
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _as_text(value: JSON) -> str:
    """What `append` adds to a string (wire.delta's reading of rule 4)."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _utf16_prefix(text: str, units: int) -> str:
    """Rule 4 `truncate`: the first `units` UTF-16 code units."""
    encoded = text.encode("utf-16-le", "surrogatepass")[: 2 * units]
    return encoded.decode("utf-16-le", "surrogatepass")


# -- SSE text and WebSocket frames ---------------------------------------------------------------


class SseShaper:
    """SSE text in chunks (a flow's stored rows, or WebSocket slices cut anywhere), shaped event
    by event through a `StreamShaper`. An event cut between two chunks is shaped as its text
    comes by `_CutEvent`, then given whole to the stream so that its state follows."""

    def __init__(self, stream: StreamShaper) -> None:
        self.stream = stream
        self._cut: _CutEvent | None = None
        self._cr = False  # the last chunk ended with CR: a leading LF belongs to it

    def feed(self, text: str) -> str:
        if self._cr and text[:1] == "\n":
            text = text[1:]
        self._cr = text[-1:] == "\r"
        text = text.replace("\r\n", "\n").replace("\r", "\n")  # WHATWG: CR, LF, CRLF end lines
        out: list[str] = []
        while text:
            if self._cut is None:
                end = text.rfind("\n\n") + 2
                if end >= 2:
                    out.append(self._events(text[:end]))
                    text = text[end:]
                    if not text:
                        break
                self._cut = _CutEvent()
            shaped, used = self._cut.feed(text)
            out.append(shaped)
            if used is None:
                break
            self._events(self._cut.original())  # its state, now that it is whole
            self._cut, text = None, text[used:]
        return "".join(out)

    def _events(self, block: str) -> str:
        """Whole events (the block ends with a blank line), shaped."""
        out: list[str] = []
        lines: list[str] = []
        for line in block.split("\n")[:-1]:
            if line:
                lines.append(line)
                continue
            out += self._event(lines) if lines else []
            out.append("")
            lines = []
        return "".join(line + "\n" for line in out)

    def _event(self, lines: list[str]) -> list[str]:
        name, data = "message", []
        before: list[str] = []  # the lines before the first data line, and after it
        after: list[str] = []
        for line in lines:
            field, colon, value = line.partition(":")
            value = value[1:] if colon and value[:1] == " " else value
            if field == "data":
                data.append(value)
                continue
            if field == "event":
                name = value
            (after if data else before).append(line)
        if not "".join(data):  # an event with empty data is not dispatched
            return lines
        shaped = self.stream.event(name, "\n".join(data)).split("\n")
        return before + [f"data: {line}" for line in shaped] + after


class _CutEvent:
    """An event's text as it comes, cut anywhere: field names, comments and values of other
    fields kept, the data through a `JsonTextShaper` with the keep rules (so ids and structure
    stay), but a `delta_encoding` event's and `[DONE]` as they are (rules 1 and 8)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._data = JsonTextShaper(keeps)
        self._state = "field"  # field | data | value | comment
        self._field = ""
        self._name = ""  # the event field's value so far
        self._head = ""  # the data's first characters
        self._data_lines = 0
        self._line_empty = True

    def original(self) -> str:
        return "".join(self._text)

    def feed(self, text: str) -> tuple[str, int | None]:
        """Shaped text up to the end of the event, and how much of `text` it took (None: all,
        and the event goes on)."""
        out: list[str] = []
        for i, ch in enumerate(text):
            if ch == "\n":
                out.append(ch)
                if self._line_empty:  # a blank line: the event ends
                    self._text.append(text[: i + 1])
                    return "".join(out), i + 1
                self._state, self._field, self._line_empty = "field", "", True
                continue
            self._line_empty = False
            if self._state == "field":
                out.append(ch)
                self._field_char(ch)
            elif self._state == "data":
                out.append(self._data_char(ch))
            else:
                out.append(ch)
                if self._field == "event":
                    self._name += ch
        self._text.append(text)
        return "".join(out), None

    def _field_char(self, ch: str) -> None:
        if ch != ":":
            self._field += ch
        elif self._field == "":
            self._state = "comment"
        elif self._field == "data":
            self._state = "data"
            if self._data_lines:
                self._data.feed("\n")  # data lines are joined by a line feed
            self._data_lines += 1
        else:
            self._state = "value"
            self._name = "" if self._field == "event" else self._name

    def _data_char(self, ch: str) -> str:
        shaped = self._data.feed(ch)
        if self._data_lines == 1 and len(self._head) < 8:
            self._head += ch
        if self._name.removeprefix(" ") == "delta_encoding":
            return ch
        if self._data_lines == 1 and DONE.startswith(self._head.removeprefix(" ")):
            return ch
        return shaped


class FrameShaper:
    """A user WebSocket's frames (docs/protocol.md, "WebSocket handoff"), in two passes. `learn`
    each frame first: each turn topic's `encoded_item` slices (SSE text cut anywhere) are shaped as
    the client decodes them, duplicates dropped and in `parent_stream_item_id` order, with a
    fresh state per topic. Then `frame` gives each frame walked by the keep rules, its slices
    replaced by their shaped text."""

    def __init__(self) -> None:
        self._topics: Bounded[str, _TopicItems] = Bounded(MAX_STREAMS)
        self._shaped: Bounded[str, str] = Bounded(MAX_ITEMS)  # stream item id -> its slice

    def learn(self, text: str) -> None:
        items = loads_or_none(text)
        for message, topic in frame_messages(items if isinstance(items, list) else []):
            self._item(message, topic)

    def finish(self) -> None:
        """Every frame learnt: items whose parent never came are shaped by envelope offset."""
        for topic in self._topics.values():
            topic.release_rest(self._shaped)

    def frame(self, text: str) -> str:
        try:
            value = loads(text)
        except ValueError:
            return shape_text(text)
        return dump(self._walk(value))

    def _item(self, message: dict[str, JSON], topic: JSON) -> None:
        topic = message.get("topic_id", topic)
        payload = message.get("payload")
        inner = payload.get("payload") if isinstance(payload, dict) else None
        if not isinstance(topic, str) or not isinstance(inner, dict):
            return
        item_id, text = inner.get("stream_item_id"), inner.get("encoded_item")
        if not isinstance(item_id, str) or not isinstance(text, str):
            return
        items = self._topics.get(topic)
        if items is None:
            items = self._topics[topic] = _TopicItems(SseShaper(StreamShaper()))
        parent, offset = inner.get("parent_stream_item_id"), message.get("offset")
        items.add(item_id, parent if isinstance(parent, str) else None, text, offset)
        items.release(self._shaped)

    def _walk(self, value: JSON) -> JSON:
        if isinstance(value, list):
            return [self._walk(item) for item in value]
        if not isinstance(value, dict):
            return shape_value(value)
        out: dict[str, JSON] = {}
        for key, item in value.items():
            if keeps(key):
                out[key] = kept(item)
            elif key == "encoded_item" and isinstance(item, str):
                shaped = self._shaped.get(str(value.get("stream_item_id")))
                out[key] = shape_text(item) if shaped is None else shaped
            else:
                out[key] = self._walk(item)
        return out


@dataclass
class _TopicItems:
    """One topic's stream items, shaped in chain order (as `wire.wsturn` releases them)."""

    sse: SseShaper
    seen: set[str] = field(default_factory=set)
    waiting: dict[str | None, tuple[str, str, int]] = field(default_factory=dict)
    last: str | None = None

    def add(self, item_id: str, parent: str | None, text: str, offset: JSON) -> None:
        if item_id in self.seen or len(self.seen) >= MAX_ITEMS:
            return
        self.seen.add(item_id)
        order = offset if isinstance(offset, int) else len(self.seen)
        self.waiting[parent or None] = (item_id, text, order)

    def release(self, shaped: Bounded[str, str]) -> None:
        while (item := self.waiting.pop(self.last, None)) is not None:
            shaped[item[0]] = self.sse.feed(item[1])
            self.last = item[0]

    def release_rest(self, shaped: Bounded[str, str]) -> None:
        for item_id, text, _ in sorted(self.waiting.values(), key=lambda item: item[2]):
            shaped[item_id] = self.sse.feed(text)
        self.waiting.clear()
