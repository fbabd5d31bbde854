"""A decoded body written out for people (text) or tools (`--format json`'s shape, a contract),
in bounded memory: what `convtap decode` prints (`ingest.decoding`) and what mitmproxy's content
view shows.

Bodies are read in pieces and fed to the decoder as they are read; the events, other events and
decode errors go to spool files as they are decoded (never all in memory), and the output is
written at the end. The redaction is given (`Redaction`: the command's redactor), so that the
content view, which shows a body as it came, loads no redaction at all.
"""

from __future__ import annotations

import codecs
import io
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import IO, Any, BinaryIO, Protocol, TextIO

import orjson

from convtap.ingest.responses_text import frame_line, item_line
from convtap.vocab import WireProtocol
from convtap.wire.events import ControlEvent, DecodeError, DecoderEvent, OtherEvent
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.responses import ResponsesDecoder, ResponsesStream, looks_like_responses
from convtap.wire.turn import TurnDecoder, TurnSummary, message_text, tool_call

# Bytes read at a time: a piece's events (objects the garbage collector tracks) are gone before
# it looks for cycles, so it never walks the whole heap, and they stay in the CPU's cache.
PIECE = 16 << 10
BLOCK = 64 << 10  # bytes of spooled lines read back at a time
MAX_FRAME = 16 << 20  # a WebSocket frame line longer than this is not read whole
SPOOL = 8 << 20  # bytes of events kept in memory before they spill to a temporary file


class DecodeInputError(Exception):
    """A file that cannot be read."""


def open_input(name: str) -> BinaryIO:
    if name == "-" and sys.stdin is None:  # started with it closed (`<&-`)
        raise DecodeInputError("cannot read -: standard input is closed")
    try:
        return sys.stdin.buffer if name == "-" else Path(name).open("rb")
    except OSError as exc:
        raise DecodeInputError(f"cannot read {name}: {exc.strerror or exc}") from exc


class Redaction(Protocol):
    """What decoding asks of redaction (`redact.redactor.Redactor` gives it)."""

    def may_hold_secret(self, text: str | bytes) -> bool: ...
    def json(self, value: Any) -> Any: ...


class AsItCame:
    """No redaction: what the one who captured the traffic sees anyway."""

    def may_hold_secret(self, text: str | bytes) -> bool:
        return False

    def json(self, value: Any) -> Any:
        return value


def pieces(handle: BinaryIO) -> Iterator[bytes]:
    while piece := handle.read(PIECE):
        yield piece


class Spool:
    """JSON values, one per line, in memory and then on disk; read back as a JSON array. How
    many of each kind (`kind` of each value) is counted as they come. The lines are kept as
    UTF-8 (lone surrogates, which JSON allows, as `surrogatepass` writes them)."""

    def __init__(self, redact: Redaction, kind: Callable[[Any], str] | None = None) -> None:
        self.redact = redact
        self.file: IO[bytes] = tempfile.SpooledTemporaryFile(SPOOL)  # noqa: SIM115  (closed with us)
        self.count = 0
        self.kind = kind
        self.kinds: Counter[str] = Counter()

    def add(self, values: list[Any]) -> None:
        """Values, redacted (looked at together: most hold nothing to redact)."""
        if not values:
            return
        lines = b"\n".join(_dumped(values))
        if self.redact.may_hold_secret(lines):  # (searched as UTF-8: not decoded for it)
            values = list(map(self.redact.json, values))
            lines = b"\n".join(_dumped(values))
        if self.kind is not None:  # counted as redacted: a kind is printed
            self.kinds.update(map(self.kind, values))
        self.file.write(lines)
        self.file.write(b"\n")
        self.count += len(values)

    def lines(self) -> Iterator[str]:
        self.file.seek(0)
        for line in self.file:
            yield line[:-1].decode("utf-8", "surrogatepass")

    def write_array(self, out: TextIO, indent: str = "  ") -> None:
        if not self.count:
            out.write("[]")
            return
        between = f",\n{indent}  ".encode()  # a line of JSON text never holds a line end
        text = codecs.getincrementaldecoder("utf-8")("surrogatepass")  # a block may cut a character
        self.file.seek(0)
        out.write(f"[\n{indent}  ")
        previous = b""
        while block := self.file.read(BLOCK):
            out.write(text.decode(previous.replace(b"\n", between)))
            previous = block
        # the last line end ends the last line
        out.write(text.decode(previous[:-1].replace(b"\n", between), final=True))
        out.write(f"\n{indent}]")


def _dumped(values: list[Any]) -> list[bytes]:
    """Values as JSON text in UTF-8 (non-ASCII kept), one line each."""
    try:
        return list(map(orjson.dumps, values))
    except TypeError:  # one orjson refuses: each as `_line` writes it
        return [_line(value).encode("utf-8", "surrogatepass") for value in values]


def _line(value: Any) -> str:
    """A value as one line of JSON text (non-ASCII kept)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # what orjson refuses (big integers, lone surrogates)
        return json.dumps(value, ensure_ascii=False)


def render(
    handles: list[BinaryIO],
    out: TextIO,
    redactor: Redaction,
    *,
    fmt: str = "text",
    protocol: str = "auto",
    ws_path: str | None = None,
) -> None:
    """Bodies (the first, then its resume legs) read from open binary files."""
    first = handles[0].read(PIECE)
    if protocol == WireProtocol.RESPONSES or (protocol == "auto" and looks_like_responses(first)):
        _responses(handles, first, out, fmt, redactor)
    else:
        _conversation(handles, first, ws_path, out, fmt, redactor)


def socket_frame_text(data: bytes) -> str:
    """One frame of the Responses API's WebSocket mode, for people (the content view)."""
    return "\n".join(frame_line(loads_or_none(data))) + "\n"


def decoded_text(body: bytes) -> str:
    """One body decoded for people, as `convtap decode` prints it (secrets as they are: it is
    what the one who captured the traffic sees anyway)."""
    out = io.StringIO()
    render([io.BytesIO(body)], out, AsItCame())
    return out.getvalue()


def _conversation(
    handles: list[BinaryIO],
    first: bytes,
    ws_path: str | None,
    out: TextIO,
    fmt: str,
    redactor: Redaction,
) -> None:
    turn = TurnDecoder()
    events = Spool(redactor, itemgetter("type"))  # a string (`ControlEvent`)
    others = Spool(redactor, ",".join)
    errors = Spool(redactor)

    def spool(found: list[DecoderEvent]) -> None:  # every one, however many the turn keeps
        if {*map(type, found)} == {ControlEvent}:  # a run of typed events: looked at in C
            events.add(list(map(attrgetter("payload"), found)))
            return
        controls, other, failed = [], [], []
        for event in found:
            if type(event) is ControlEvent:
                controls.append(event.payload)
            elif type(event) is OtherEvent:
                other.append(event.payload)
            elif type(event) is DecodeError:
                failed.append(event._asdict())
        events.add(controls)
        others.add(other)
        errors.add(failed)

    for n, handle in enumerate(handles):
        spool(turn.feed(first if n == 0 else b"").events)
        for piece in pieces(handle):
            spool(turn.feed(piece).events)
        turn.end_leg()
    if ws_path is not None:
        with open_input(ws_path) as frames:
            while line := frames.readline(MAX_FRAME):
                if line.strip():
                    spool(turn.feed_ws_frame(line.rstrip(b"\r\n")).events)
    spool(turn.close())
    summary = turn.summary()
    messages = [redactor.json(m) for m in summary.messages]
    calls = [redactor.json(c.as_json()) for c in summary.tool_calls()]
    if fmt == "json":
        head = {
            "protocol": WireProtocol.CONVERSATION, "encoding": summary.encoding,
            "conversation_id": summary.conversation_id, "done": summary.done,
            "stream_complete": summary.stream_complete, "truncated": summary.truncated,
            "event_count": summary.event_count,
        }  # fmt: skip
        out.write("{\n")
        for key, value in head.items():
            out.write(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},\n")
        out.write('  "messages": ')
        _array(out, messages)
        for key, kept in (("events", events), ("other_events", others), ("errors", errors)):
            out.write(f',\n  "{key}": ')
            kept.write_array(out)
        out.write(',\n  "tool_calls": ')
        _array(out, calls)
        out.write("\n}\n")
        return
    _turn_text(out, summary, messages, events, others, errors)


def _array(out: TextIO, values: list[Any]) -> None:
    text = json.dumps(values, ensure_ascii=False, indent=2)
    out.write(text.replace("\n", "\n  "))


def _turn_text(
    out: TextIO, d: TurnSummary, messages: list[dict[str, Any]], events: Spool,
    others: Spool, errors: Spool,
) -> None:  # fmt: skip
    """The decoded turn for people: one block per message, tool calls marked, errors listed."""
    state = ["done" if d.done else "no [DONE]"]
    if d.stream_complete:
        state.append("stream complete")
    if d.truncated:
        state.append("TRUNCATED (the last body ended inside an event)")
    out.write(f"conversation {d.conversation_id or '-'} · encoding {d.encoding or 'legacy'}"
              f" · {d.event_count} events · {d.legs} leg(s) · {', '.join(state)}\n")  # fmt: skip
    for message in messages:
        author = message.get("author") or {}
        role = author.get("role", "?") + (f" ({author['name']})" if author.get("name") else "")
        recipient = message.get("recipient") or "all"
        details = [str(message.get(k)) for k in ("channel", "status") if message.get(k)]
        out.write(f"\n── {role} → {recipient} · {' · '.join(details)} · {message['id']}\n")
        call = tool_call(message)
        if call is not None:
            state_word = "complete" if call.complete else "in progress"
            out.write(f"   ⚙ {call.kind} tool call: {call.tool} ({state_word})\n")
        text = message_text(message)
        for line in text.splitlines() or ([text] if text else []):
            out.write(f"   {line}\n")
    _kinds(out, "event", events)
    _kinds(out, "other event", others)
    if errors.count:
        out.write(f"\n{errors.count} decode error(s):\n")
        for line in errors.lines():
            e = json.loads(line)
            out.write(f"  event {e['event_index']}: {e['kind']}: {e['detail']}\n")


def _kinds(out: TextIO, label: str, spool: Spool) -> None:
    """How many events of each kind, in order of first appearance (not every one of them)."""
    if not spool.count:
        return
    listed = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in spool.kinds.items())
    out.write(f"\n{spool.count} {label}(s): {listed}\n")


def _responses(
    handles: list[BinaryIO], first: bytes, out: TextIO, fmt: str, redactor: Redaction
) -> None:
    decoder = ResponsesDecoder()
    errors = Spool(redactor)

    def spool(found: list[DecoderEvent]) -> None:  # every one, however many it keeps
        errors.add([event._asdict() for event in found if type(event) is DecodeError])

    for n, handle in enumerate(handles):
        head = first if n == 0 else handle.read(PIECE)
        if head.lstrip().startswith(b"{"):  # a whole JSON response (not streamed)
            spool(decoder.whole(head + handle.read()))
            continue
        stream = ResponsesStream(decoder)
        spool(stream.feed(head).events)
        for piece in pieces(handle):
            spool(stream.feed(piece).events)
        stream.end_leg()
    result = redactor.json({key: value for key, value in decoder.summary().result().items()
                            if key != "errors"})  # fmt: skip
    if fmt == "json":
        out.write("{\n")
        for key, value in result.items():
            text = json.dumps(value, ensure_ascii=False, indent=2).replace("\n", "\n  ")
            out.write(f"  {json.dumps(key)}: {text},\n")
        out.write('  "errors": ')
        errors.write_array(out)
        out.write("\n}\n")
        return
    out.write(f"response {result['response_id'] or '-'} · {result['status'] or 'no status'} · "
              f"{len(result['event_types'])} event types\n")  # fmt: skip
    for item in result["output_items"]:  # the answer, as a conversation reads it
        out.write(item_line(item) + "\n")
    for call in result["tool_calls"]:
        call_id, item_id = call["call_id"] or "-", call["item_id"] or "-"
        out.write(f"   ⚙ client call: {call['type']} {call['name'] or ''} "
                  f"call_id {call_id} (item {item_id})\n")  # fmt: skip
    for line in errors.lines():
        e = json.loads(line)
        out.write(f"   error {e['event_index']}: {e['kind']}: {e['detail']}\n")
