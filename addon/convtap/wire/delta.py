"""Delta encoding v1: SSE events in, messages, typed events and decode errors out.

Follows docs/protocol.md, "Delta encoding v1", rules 1-9 (how ChatGPT's own client decodes the
stream), with one deliberate deviation (rule 6): an invalid delta is recorded as a decode error and
skipped instead of ending the stream. The decoder works on plain dicts; nothing here validates
models.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import and_, eq, is_not, methodcaller, ne
from typing import Any, TypeGuard

import orjson

from convtap.vocab import DONE, MESSAGE_STREAM_COMPLETE, STREAM_HANDOFF, DecodeErrorKind
from convtap.wire.bounded import Kept
from convtap.wire.deltaops import MISSING, InvalidDelta, apply, patch, pointer
from convtap.wire.deltaops import OPS as OPS  # the ops, named here too
from convtap.wire.events import (
    ControlEvent,
    ConversationSeen,
    DecodeError,
    DecoderEvent,
    MessageChanged,
    OtherEvent,
    StreamDone,
    excerpt,
)
from convtap.wire.jsonvalue import JSON, loads
from convtap.wire.provenance import Pieces, StringEvent, StringSources, V
from convtap.wire.sse import OVERSIZED, BareRun, EventRun, Frames, SSEEvent

MAX_KEPT = 1000  # typed events, other events and errors kept in memory (the rest are counted)
MAX_MESSAGES = 10_000  # messages one turn may hold
MAX_CHANNELS = 10_000  # roots (channels c) one turn may hold
MAX_STRING = 16 * 1024 * 1024  # characters a string may grow to by appends
TOO_LARGE = (
    f"a string grew past {MAX_STRING} characters; the rest of it is kept in the raw events only"
)


_NONE: Sequence[DecoderEvent] = ()
# Typed events that do more than being kept (`DeltaDecoder._object`).
_OWN_WAY = frozenset({STREAM_HANDOFF, MESSAGE_STREAM_COMPLETE, "input_message"})
# An event's data, as text (an `SSEEvent`'s) or as the UTF-8 that came (an `EventRun`'s).
Data = str | bytes
_DONE = (DONE, DONE.encode())
_OBJECT = ("{", b"{")  # how an object's text starts, in either


class _TypedRuns:
    """Where runs of typed events may be among a list of events: made once for the list (a
    pass in C each), read at each run's start."""

    def __init__(self, names: Sequence[str], datas: Sequence[Data]) -> None:
        self._datas = datas
        self._typed = list(map(methodcaller("startswith", _OBJECT[type(datas[0]) is bytes]), datas))
        if names.count("message") != len(names):
            self._typed = list(map(and_, self._typed, map(eq, names, repeat("message"))))

    def datas(self, at: int) -> list[Data]:
        """The data of the events from `at` on that are named `message` and start an object."""
        try:
            end = self._typed.index(False, at)
        except ValueError:
            end = len(self._typed)
        return list(self._datas[at:end])


def _may_be_typed(names: Sequence[str], datas: Sequence[Data], at: int) -> bool:
    """Whether event `at` is there, named `message`, and its data starts an object."""
    return at < len(datas) and names[at] == "message" and datas[at][:1] in _OBJECT


def _first(flags: Iterable[object], value: object = True) -> int:
    """The index of the first of `flags` that is `value` (the count of them when none is)."""
    listed = list(flags)
    try:
        return listed.index(value)
    except ValueError:
        return len(listed)


def _parsed_while(datas: list[Data]) -> list[Any]:
    """`datas` parsed by orjson, up to the first it refuses."""
    try:
        return list(map(orjson.loads, datas))
    except orjson.JSONDecodeError:
        parsed = []
        for data in datas:
            try:
                parsed.append(orjson.loads(data))
            except orjson.JSONDecodeError:
                break
        return parsed


def is_message(value: object) -> TypeGuard[dict[str, Any]]:
    """Rule 3: a message has a string id, a string author.role and a content."""
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        return False
    author = value.get("author")
    return isinstance(author, dict) and isinstance(author.get("role"), str) and "content" in value


class DeltaDecoder:
    """Decodes one turn's events, fed in wire order across all its legs.

    `feed_all` returns what the events did as `DecoderEvent`s. What is kept for the end of
    the turn (`messages`, `events`, `errors`, ...) is read through `TurnDecoder.summary()`.

    Its memory is bounded: typed events, other events and errors are kept up to `MAX_KEPT`
    each and counted past it (the returned events have them all); a turn holds at most
    `MAX_MESSAGES` messages and `MAX_CHANNELS` roots, and a string stops growing at `MAX_STRING`
    characters. Each bound, when reached, is a decode error.
    """

    def __init__(self, sources: bool = False) -> None:
        # where each string's text came from (`wire.provenance`), when a reader asks for it
        self.sources = StringSources() if sources else None
        self.encoding: str | None = None
        self.conversation_id: str | None = None
        self.done = False
        self.stream_complete = False
        self.event_index = 0  # index of the next dispatched event, [DONE] included
        self.event_count = 0  # docs/protocol.md "Resume": dispatched events except [DONE]
        self.events: Kept[dict[str, JSON]] = Kept(MAX_KEPT)
        self.other_events: Kept[dict[str, JSON]] = Kept(MAX_KEPT)
        self.errors: Kept[DecodeError] = Kept(MAX_KEPT)
        self.handoff: dict[str, JSON] | None = None  # the last stream_handoff event
        self._messages: dict[str, dict[str, JSON]] = {}
        self._status: dict[str, JSON] = {}
        self._bounds_hit: set[DecodeErrorKind] = set()
        self._changed = False  # the `feed_all` under way changed a message
        self.reset_state()

    def reset_state(self) -> None:
        """A fresh delta state (rule 1: a new `delta_encoding` event; a WebSocket leg)."""
        self._roots: dict[int, JSON] = {}  # rule 3: one root per channel c
        self._record: tuple[int, str, str] = (0, "", "add")  # rule 2: sticky c, p, o
        # A string being appended to by bare frames, kept as pieces until something reads it:
        # (container, key, pieces). Joining once instead of on each frame keeps decoding linear.
        self._pending: tuple[Any, Any, list[str]] | None = None
        self._pending_size = 0
        self._pending_string: int | None = None  # its number in `sources`
        if self.sources is not None:
            self.sources.reset()

    def strings(self) -> list[StringEvent]:
        """What the events fed since the last call did to strings (`wire.provenance`): only
        when the decoder was made with `sources`."""
        return self.sources.take() if self.sources is not None else []

    @property
    def messages(self) -> dict[str, dict[str, JSON]]:
        """Every message by id, in order of first appearance, in its latest state."""
        self._materialize()
        return self._messages

    def feed(self, event: SSEEvent) -> list[DecoderEvent]:
        """One event; what it did."""
        return self.feed_all((event,))

    def feed_all(self, events: Iterable[SSEEvent]) -> list[DecoderEvent]:
        """`feed` each event in order; what they all did. Bare frames that continue a string
        append (most of a real stream) take a short path here, and a whole run of them
        (`Frames`) one step."""
        found: list[DecoderEvent] = []
        parts: Sequence[BareRun | EventRun | Sequence[SSEEvent]] = (
            events.parts
            if isinstance(events, Frames)
            else [events if isinstance(events, Sequence) else list(events)]
        )
        for part in parts:
            if isinstance(part, BareRun):
                taken = self._continue_run(part)
                if taken is not None:
                    found += taken
                    continue
                part = part.events()
            if isinstance(part, EventRun):
                self._feed_events(part.names or ["message"] * part.frames, part.datas, found)
            elif part:
                names, datas = zip(*part, strict=True)
                self._feed_events(names, datas, found)
        if self._changed:
            self._changed = False
            self._materialize()  # a changed message is read as it is now
        return found

    def _continue_run(self, run: BareRun) -> Sequence[DecoderEvent] | None:
        """A run of bare frames that continues a string append, in one step: what it did;
        None when it cannot be (no append to continue, a string that is not valid)."""
        if self._pending is None:
            return None
        try:  # one call for the run's strings
            values = orjson.loads(run.array())
        except orjson.JSONDecodeError:  # one is not valid (a lone surrogate escape)
            return None
        if len(values) != run.frames:
            return None
        index = self.event_index
        self.event_index += len(values)
        self.event_count += len(values)
        return self._extend(index, values)

    def _feed_events(
        self, names: Sequence[str], datas: Sequence[Data], found: list[DecoderEvent]
    ) -> None:
        """Events, given as their names and their data (text, or the UTF-8 that came)."""
        loads_fast = orjson.loads
        at, count = 0, len(datas)
        runs: _TypedRuns | None = None
        while at < count:
            name, data = names[at], datas[at]
            if name == "message" and data[:1] in _OBJECT and _may_be_typed(names, datas, at + 1):
                runs = runs or _TypedRuns(names, datas)  # maybe a run of typed events
                taken = self._typed_run(runs.datas(at), found)
                if taken:
                    at += taken
                    continue
            at += 1
            if self._pending is not None and name == "delta":
                try:
                    obj = loads_fast(data)
                except orjson.JSONDecodeError:
                    obj = None
                if type(obj) is dict and len(obj) == 1 and type(obj.get("v")) is str:
                    index = self.event_index  # rule 2: a bare frame continuing an append
                    self.event_index += 1
                    self.event_count += 1
                    found += self._extend(index, [obj["v"]])
                    continue
            found += self._feed_data(name, data)

    def _typed_run(self, datas: list[Data], found: list[DecoderEvent]) -> int:
        """Typed events (`message_marker`, ...) taken the short way `_object` takes for one,
        and kept all at once: how many of `datas` (the data of events named `message` that
        start an object) were (0: the first is not one). The run ends before the first that is
        not JSON, not an object, of no string `type`, of a type with a way of its own, or that
        names another conversation (unless it is the first: the conversation is seen in order).
        Each of these is one pass in C over the run."""
        objs = _parsed_while(datas)
        if {*map(type, objs)} != {dict}:
            objs = objs[: _first(map(is_not, map(type, objs), repeat(dict)))]
        kinds = list(map(dict.get, objs, repeat("type")))
        if {*map(type, kinds)} != {str}:
            objs = objs[: _first(map(is_not, map(type, kinds), repeat(str)))]
            kinds = kinds[: len(objs)]
        if not _OWN_WAY.isdisjoint(kinds):
            objs = objs[: _first(map(_OWN_WAY.__contains__, kinds))]
        conversation_id = self.conversation_id
        named = list(map(dict.get, objs, repeat("conversation_id"), repeat(conversation_id)))
        if named.count(conversation_id) != len(named):
            if named[0] != conversation_id:  # it names the conversation for the ones after it
                found += self._conversation(objs[0])
                conversation_id = self.conversation_id
            objs = objs[: _first(map(ne, named, repeat(conversation_id)))]
        taken = len(objs)
        if taken:
            self.event_index += taken
            self.event_count += taken
            self.events.extend(objs)
            found.extend(map(tuple.__new__, repeat(ControlEvent), zip(objs)))
        return taken

    def _extend(self, index: int, values: list[str]) -> Sequence[DecoderEvent]:
        """Rule 2: bare frames (events from `index` on) continuing the string append under
        way. Their strings are appended up to `MAX_STRING` characters; past it, they are kept
        in the raw events only, and the first time is a decode error. The one place a bare
        frame's string is appended, whichever entry it came through."""
        pending = self._pending
        assert pending is not None
        if self.sources is not None:  # every piece, past the bound too: the raw events hold it
            string = self._pending_string
            assert string is not None
            self.sources.pieces(Pieces(string, index, V, values))
        size = self._pending_size + sum(map(len, values))
        if size <= MAX_STRING:
            self._pending_size = size
            pending[2].extend(values)
            return _NONE
        found: Sequence[DecoderEvent] = _NONE
        for n, value in enumerate(values):
            self._pending_size += len(value)
            if self._pending_size <= MAX_STRING:
                pending[2].append(value)
            elif not found:
                found = self._bound(index + n, DecodeErrorKind.VALUE_TOO_LARGE, TOO_LARGE)
        return found

    def _feed_one(self, event: SSEEvent) -> Sequence[DecoderEvent]:
        return self._feed_data(event.event, event.data)

    def _feed_data(self, name: str, data: Data) -> Sequence[DecoderEvent]:
        """One event, given as its name and its data (text, or the UTF-8 that came)."""
        index = self.event_index
        self.event_index += 1
        if data == _DONE[type(data) is bytes]:  # rule 8
            self.done = True
            return [StreamDone()]
        self.event_count += 1
        if name == OVERSIZED:  # the framing's bound: not kept, reported
            detail = f"an event of {data!s} bytes, over the limit; the stream goes on after it"
            return self.record_error(index, DecodeErrorKind.EVENT_TOO_LARGE, detail)
        try:
            # UTF-8 that came reads as its text does in orjson; what orjson refuses is read
            # again as text (the stdlib's bytes reading would guess UTF-16 from NUL bytes).
            obj = orjson.loads(data) if type(data) is bytes else loads(data)
        except orjson.JSONDecodeError:
            data = data.decode() if type(data) is bytes else data
            try:
                obj = loads(data)
            except ValueError as exc:
                return self._malformed(index, name, exc)
        except ValueError as exc:
            return self._malformed(index, name, exc)
        if name == "delta":  # rule 1: only `delta` events are deltas
            if type(obj) is not dict:
                return self.record_error(
                    index, DecodeErrorKind.INVALID_DELTA, "a delta must be a JSON object"
                )
            if self._pending is not None and len(obj) == 1 and type(obj.get("v")) is str:
                return self._extend(index, [obj["v"]])  # rule 2: a bare frame
            return self._delta(index, obj)
        if name == "delta_encoding":
            if obj != "v1":
                detail = f"unknown delta encoding {obj!r}"
                return self.record_error(index, DecodeErrorKind.UNKNOWN_ENCODING, detail)
            self.encoding = "v1"
            self._flush()
            self.reset_state()
            return _NONE
        if type(obj) is not dict:
            text = data.decode() if isinstance(data, bytes) else data
            detail = f"a {name} event that is not a JSON object: {excerpt(text, 80)}"
            return self.record_error(index, DecodeErrorKind.UNEXPECTED_VALUE, detail)
        return self._object(obj)

    def _malformed(self, index: int, name: str, exc: ValueError) -> list[DecoderEvent]:
        return self.record_error(index, DecodeErrorKind.MALFORMED_JSON, f"{name} event: {exc}")

    # -- non-delta events (rules 7 and 9) -------------------------------------------------------

    def _object(self, obj: dict[str, JSON]) -> Sequence[DecoderEvent]:
        found: list[DecoderEvent] = [*self._conversation(obj)]
        kind = obj.get("type")
        if isinstance(kind, str):
            self.events.append(obj)
            found.append(ControlEvent(obj))
            if kind == STREAM_HANDOFF:
                self.handoff = obj
            elif kind == MESSAGE_STREAM_COMPLETE:
                self.stream_complete = True
            elif kind == "input_message" and is_message(obj.get("input_message")):
                found += self._register(obj["input_message"])  # a snapshot of the input
        elif is_message(obj.get("message")):
            found += self._register(obj["message"])  # rule 9: a legacy cumulative snapshot
        else:
            self.other_events.append(obj)  # error envelopes, the legacy moderation trailer, ...
            found.append(OtherEvent(obj))
        return found

    def _conversation(self, obj: dict[str, JSON]) -> Sequence[DecoderEvent]:
        """A conversation id the stream names, when it is new."""
        conversation_id = obj.get("conversation_id")
        if not isinstance(conversation_id, str) or conversation_id == self.conversation_id:
            return _NONE
        self.conversation_id = conversation_id
        return [ConversationSeen(conversation_id)]

    def _register(self, message: dict[str, JSON]) -> Sequence[DecoderEvent]:
        mid: str = message["id"]
        status = message.get("status")
        known = mid in self._messages
        if not known and len(self._messages) >= MAX_MESSAGES:
            return self._bound(self.event_index - 1, DecodeErrorKind.TOO_MANY_MESSAGES,
                               f"more than {MAX_MESSAGES} messages in one turn; the rest are "
                               "kept in the raw events only")  # fmt: skip
        self._messages[mid] = message
        if known and self._status.get(mid) == status:
            return _NONE
        self._status[mid] = status
        self._changed = True
        return [MessageChanged(message)]

    def _bound(self, index: int, kind: DecodeErrorKind, detail: str) -> Sequence[DecoderEvent]:
        """A bound reached: one decode error the first time, nothing after."""
        if kind in self._bounds_hit:
            return _NONE
        self._bounds_hit.add(kind)
        return self.record_error(index, kind, detail)

    def record_error(self, index: int, kind: DecodeErrorKind, detail: str) -> list[DecoderEvent]:
        error = DecodeError(index, kind, detail)
        self.errors.append(error)
        return [error]

    # -- deltas (rules 2-6) ---------------------------------------------------------------------

    def _delta(self, index: int, delta: dict[str, JSON]) -> Sequence[DecoderEvent]:
        self._flush()
        c0, p0, o0 = self._record
        c, p, o = delta.get("c", c0), delta.get("p", p0), delta.get("o", o0)
        try:
            if type(c) is not int:
                raise InvalidDelta(f"channel c must be an integer, not {c!r}")
            if not isinstance(p, str):
                raise InvalidDelta(f"path p must be a string, not {p!r}")
            if not isinstance(o, str) or o not in OPS:
                raise InvalidDelta(f"unknown op {o!r}")
            value = delta.get("v", MISSING)  # rule 2: v is never copied
            sources = self.sources
            if o == "patch":
                mark = sources.mark(c) if sources is not None else None
                try:
                    root = patch(self._roots.get(c, MISSING), p, value, (sources, c, index, V))
                except InvalidDelta:
                    if sources is not None and mark is not None:
                        sources.undo(c, mark)
                    raise
                if root is not MISSING:
                    self._roots[c] = root
            else:
                if c not in self._roots and len(self._roots) >= MAX_CHANNELS:
                    raise InvalidDelta(f"more than {MAX_CHANNELS} channels in one turn")
                origin = (sources, c, index, V)
                self._pending = apply(self._roots, c, pointer(p), o, value, origin)
                self._pending_string = sources.last if sources is not None else None
                # the string's length so far: the bound is on what it grows to
                self._pending_size = len(self._pending[2][0]) if self._pending else 0
        except InvalidDelta as exc:
            # Rule 6, recorder's reading: the state (roots and sticky record) stays as it was.
            if self.sources is not None:
                self.sources.refused(index, delta)
            return self.record_error(index, DecodeErrorKind.INVALID_DELTA, f"{o} {p!r}: {exc}")
        self._record = (c, p, o)
        root = self._roots.get(c)
        if not isinstance(root, dict):
            return _NONE
        message = root.get("message")
        if not is_message(message):
            return self._conversation(root)
        changed = self._register(message)
        status = message.get("status")
        if changed and self.sources is not None and status not in (None, "in_progress"):
            self.sources.rest(c)  # its strings are not expected to grow
        return [*self._conversation(root), *changed]

    def _materialize(self) -> None:
        if self._pending is not None:
            container, key, pieces = self._pending
            text = "".join(pieces)
            container[key] = text
            pieces[:] = [text]

    def _flush(self) -> None:
        self._materialize()
        self._pending = None
