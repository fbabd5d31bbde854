"""Delta encoding v1: SSE events in, messages, typed events and decode errors out.

Follows docs/protocol.md, "Delta encoding v1", rules 1-9 (how ChatGPT's own client decodes the
stream), with one deliberate deviation (rule 6): an invalid delta is recorded as a decode error and
skipped instead of ending the stream. The decoder works on plain dicts; nothing here validates
models.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import and_, eq, is_not, ne
from typing import Any, TypeGuard

import orjson

from convtap.wire.bounded import Kept
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
from convtap.wire.provenance import Leaf, Pieces, Place, StringEvent, StringSources, V
from convtap.wire.sse import OVERSIZED, BareRun, EventRun, Frames, SSEEvent

OPS = frozenset({"add", "replace", "remove", "append", "truncate", "patch"})
MAX_KEPT = 1000  # typed events, other events and errors kept in memory (the rest are counted)
MAX_MESSAGES = 10_000  # messages one turn may hold
MAX_CHANNELS = 10_000  # roots (channels c) one turn may hold
MAX_STRING = 16 * 1024 * 1024  # characters a string may grow to by appends
TOO_LARGE = (
    f"a string grew past {MAX_STRING} characters; the rest of it is kept in the raw events only"
)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class InvalidDelta(ValueError):
    """A delta that cannot apply; the decoder turns it into a DecodeError."""


_NONE: Sequence[DecoderEvent] = ()
# Typed events that do more than being kept (`DeltaDecoder._object`).
_OWN_WAY = frozenset({"stream_handoff", "message_stream_complete", "input_message"})


class _TypedRuns:
    """Where runs of typed events may be among a list of events: made once for the list (a
    pass in C each), read at each run's start."""

    def __init__(self, names: Sequence[str], datas: Sequence[str]) -> None:
        self._datas = datas
        self._typed = list(map(str.startswith, datas, repeat("{")))
        if names.count("message") != len(names):
            self._typed = list(map(and_, self._typed, map(eq, names, repeat("message"))))

    def datas(self, at: int) -> list[str]:
        """The data of the events from `at` on that are named `message` and start an object."""
        try:
            end = self._typed.index(False, at)
        except ValueError:
            end = len(self._typed)
        return list(self._datas[at:end])


def _may_be_typed(names: Sequence[str], datas: Sequence[str], at: int) -> bool:
    """Whether event `at` is there, named `message`, and its data starts an object."""
    return at < len(datas) and names[at] == "message" and datas[at][:1] == "{"


def _first(flags: Iterable[object], value: object = True) -> int:
    """The index of the first of `flags` that is `value` (the count of them when none is)."""
    listed = list(flags)
    try:
        return listed.index(value)
    except ValueError:
        return len(listed)


def _parsed_while(datas: list[str]) -> list[Any]:
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
        self._bounds_hit: set[str] = set()
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
        self, names: Sequence[str], datas: Sequence[str], found: list[DecoderEvent]
    ) -> None:
        """Events, given as their names and their data."""
        loads_fast = orjson.loads
        at, count = 0, len(datas)
        runs: _TypedRuns | None = None
        while at < count:
            name, data = names[at], datas[at]
            if name == "message" and data[:1] == "{" and _may_be_typed(names, datas, at + 1):
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
            found += self._feed_one(SSEEvent(name, data))

    def _typed_run(self, datas: list[str], found: list[DecoderEvent]) -> int:
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
                found = self._bound(index + n, "value-too-large", TOO_LARGE)
        return found

    def _feed_one(self, event: SSEEvent) -> Sequence[DecoderEvent]:
        index = self.event_index
        self.event_index += 1
        data = event.data
        if data == "[DONE]":  # rule 8
            self.done = True
            return [StreamDone()]
        self.event_count += 1
        if event.event == OVERSIZED:  # the framing's bound: not kept, reported
            detail = f"an event of {data} bytes, over the limit; the stream goes on after it"
            return self.record_error(index, "event-too-large", detail)
        try:
            obj = loads(data)
        except ValueError as exc:
            return self.record_error(index, "malformed-json", f"{event.event} event: {exc}")
        if event.event == "delta":  # rule 1: only `delta` events are deltas
            if type(obj) is not dict:
                return self.record_error(index, "invalid-delta", "a delta must be a JSON object")
            if self._pending is not None and len(obj) == 1 and type(obj.get("v")) is str:
                return self._extend(index, [obj["v"]])  # rule 2: a bare frame
            return self._delta(index, obj)
        if event.event == "delta_encoding":
            if obj != "v1":
                detail = f"unknown delta encoding {obj!r}"
                return self.record_error(index, "unknown-encoding", detail)
            self.encoding = "v1"
            self._flush()
            self.reset_state()
            return _NONE
        if type(obj) is not dict:
            detail = f"a {event.event} event that is not a JSON object: {excerpt(data, 80)}"
            return self.record_error(index, "unexpected-value", detail)
        return self._object(obj)

    # -- non-delta events (rules 7 and 9) -------------------------------------------------------

    def _object(self, obj: dict[str, JSON]) -> Sequence[DecoderEvent]:
        found: list[DecoderEvent] = [*self._conversation(obj)]
        kind = obj.get("type")
        if isinstance(kind, str):
            self.events.append(obj)
            found.append(ControlEvent(obj))
            if kind == "stream_handoff":
                self.handoff = obj
            elif kind == "message_stream_complete":
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
            return self._bound(self.event_index - 1, "too-many-messages",
                               f"more than {MAX_MESSAGES} messages in one turn; the rest are "
                               "kept in the raw events only")  # fmt: skip
        self._messages[mid] = message
        if known and self._status.get(mid) == status:
            return _NONE
        self._status[mid] = status
        self._changed = True
        return [MessageChanged(message)]

    def _bound(self, index: int, kind: str, detail: str) -> Sequence[DecoderEvent]:
        """A bound reached: one decode error the first time, nothing after."""
        if kind in self._bounds_hit:
            return _NONE
        self._bounds_hit.add(kind)
        return self.record_error(index, kind, detail)

    def record_error(self, index: int, kind: str, detail: str) -> list[DecoderEvent]:
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
                    root = _patch(self._roots.get(c, MISSING), p, value, (sources, c, index, V))
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
                self._pending = _apply(self._roots, c, _pointer(p), o, value, origin)
                self._pending_string = sources.last if sources is not None else None
                # the string's length so far: the bound is on what it grows to
                self._pending_size = len(self._pending[2][0]) if self._pending else 0
        except InvalidDelta as exc:
            # Rule 6, recorder's reading: the state (roots and sticky record) stays as it was.
            if self.sources is not None:
                self.sources.refused(index, delta)
            return self.record_error(index, "invalid-delta", f"{o} {p!r}: {exc}")
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


def copied(value: JSON) -> JSON:
    """A copy of a decoded JSON value (what `copy.deepcopy` makes of one: its containers new,
    its scalars shared, since none can change), several times faster."""
    if type(value) is dict:
        return {key: copied(item) for key, item in value.items()}
    if type(value) is list:
        return [copied(item) for item in value]
    return value


def _pointer(path: str) -> list[str]:
    """Rule 5: JSON Pointer (RFC 6901) segments; `~1` is decoded before `~0`."""
    if path == "":
        return []
    if path[0] != "/":
        raise InvalidDelta("a path must be empty or start with '/'")
    return [s.replace("~1", "/").replace("~0", "~") for s in path[1:].split("/")]


def _is_index(segment: str) -> bool:
    return segment.isascii() and segment.isdigit()


# Who applies an op, for `wire.provenance`: its sources (None: not followed), the channel, the
# event and where its value sits in the event's data.
Origin = tuple[StringSources | None, int, int, Leaf]


def _patch(root: JSON, path: str, ops: JSON, origin: Origin) -> JSON:
    """Rule 4 `patch`: sub-ops relative to the patch path, applied whole or not at all (the
    caller undoes what `origin`'s sources were told when it raises)."""
    if not isinstance(ops, list):
        raise InvalidDelta("patch value must be a list of operations")
    holder = {0: copied(root)} if root is not MISSING else {}
    sources, channel, event, leaf = origin
    for n, sub in enumerate(ops):
        if not isinstance(sub, dict) or not isinstance(sub.get("p"), str) or "o" not in sub:
            raise InvalidDelta(f"sub-op {n} needs its own p and o")  # they inherit nothing
        o = sub["o"]
        inner: Origin = (sources, channel, event, (*leaf, n, "v"))
        if o == "patch":
            holder[0] = _patch(holder.get(0, MISSING), path + sub["p"], sub.get("v", MISSING),
                               inner)  # fmt: skip
        elif isinstance(o, str) and o in OPS:
            _apply(holder, 0, _pointer(path + sub["p"]), o, sub.get("v", MISSING), inner)
        else:
            raise InvalidDelta(f"sub-op {n}: unknown op {o!r}")
    return holder.get(0, MISSING) if holder else MISSING


def _apply(
    roots: dict[int, JSON], channel: int, segments: list[str], op: str, value: JSON,
    origin: Origin | None = None,
) -> tuple[Any, Any, list[str]] | None:  # fmt: skip
    """Apply one op, checking everything before changing anything so that a failure leaves the
    state untouched. Returns the appended-to string's place when the op appended text."""
    if value is MISSING and op != "remove":
        raise InvalidDelta("missing value v")
    keys: list[Any] = [channel, *segments]
    container: Any = roots
    depth = 0
    while depth < len(keys) - 1:  # walk what exists
        child = _get(container, keys[depth])
        if child is MISSING or child is None:
            break
        if not isinstance(child, dict | list):
            where = "/" + "/".join(segments[:depth])
            raise InvalidDelta(f"{where} is a {_kind(child)}, not a container")
        container = child
        depth += 1
    if depth < len(keys) - 1:
        # Rule 5: create the missing containers, once we know the op can apply to a new one.
        _check_bounds(container, keys[depth], remove=False)
        for key in keys[depth + 1 :]:
            _check_new_container_key(key)
        _check_op(op, MISSING, value)
        for key, next_key in zip(keys[depth:-1], keys[depth + 1 :], strict=True):
            fresh: Any = [] if _is_index(next_key) or next_key == "-" else {}
            _set(container, key, fresh)
            container = fresh
        target = MISSING
    else:
        target = _get(container, keys[-1])
        _check_op(op, target, value)
        if op in ("add", "replace", "remove") or target is MISSING:
            _check_bounds(container, keys[-1], remove=op == "remove")
    place = None
    if origin is not None:  # the op will apply: its sources (when followed) are told
        sources, shadow_channel, event, leaf = origin
        if sources is not None:
            place = sources.at(roots, channel, shadow_channel, segments, event, leaf)
    return _perform(container, keys[-1], op, target, value, place)


def _get(container: Any, key: Any) -> JSON:
    if isinstance(container, dict):
        return container.get(key, MISSING)
    if not _is_index(key):
        if key == "-":
            return MISSING
        raise InvalidDelta(f"{key!r} is not an array index")
    index = int(key)
    return container[index] if index < len(container) else MISSING


def _check_bounds(container: Any, key: Any, *, remove: bool) -> None:
    """An array index names an item, or (except for remove) the end of the array."""
    if not isinstance(container, list):
        return  # object keys: remove of a missing key is caught by _check_op
    size = len(container)
    if key == "-":
        if remove:
            raise InvalidDelta("'-' names no item to remove")
        return
    if int(key) > (size - 1 if remove else size):
        raise InvalidDelta(f"index {key} is out of range for an array of {size}")


def _check_new_container_key(key: str) -> None:
    if not (_is_index(key) or key == "-"):
        return  # an object key: a new {} takes it
    if key not in ("0", "-"):
        raise InvalidDelta(f"index {key} is out of range for a new array")


def _check_op(op: str, target: JSON, value: JSON) -> None:
    if op in ("add", "replace"):
        return
    if op == "remove":
        if target is MISSING:
            raise InvalidDelta("nothing to remove")
    elif op == "append":
        if isinstance(target, str):
            if isinstance(value, dict | list):
                raise InvalidDelta(f"cannot append a {_kind(value)} onto a string")
        elif isinstance(target, dict):
            if not isinstance(value, dict):
                raise InvalidDelta(f"cannot append a {_kind(value)} onto an object")
        elif not (isinstance(target, list) or target is MISSING or target is None):
            raise InvalidDelta(f"cannot append onto a {_kind(target)}")
    elif op == "truncate":
        if type(value) is not int or value < 0:
            raise InvalidDelta(f"truncate needs a non-negative integer, not {value!r}")
        if not isinstance(target, str | list):
            raise InvalidDelta(f"cannot truncate a {_kind(target)}")


def _set(container: Any, key: Any, value: JSON) -> None:
    if isinstance(container, dict):
        container[key] = value
    elif key == "-" or int(key) == len(container):
        container.append(value)
    else:
        container[int(key)] = value


def _perform(
    container: Any, key: Any, op: str, target: JSON, value: JSON, place: Place | None
) -> tuple[Any, Any, list[str]] | None:
    """Rule 4, once _check_op and _check_settable have passed. `place` is told first (it reads
    the state before the op)."""
    is_list = isinstance(container, list)
    if is_list:
        key = len(container) if key == "-" else int(key)
    if op == "add" and is_list:
        if place is not None:
            place.insert(value)
        container.insert(key, value)  # on an array index, add inserts
    elif op in ("add", "replace"):
        if place is not None:
            place.set(value)
        _set(container, key, value)
    elif op == "remove":
        if place is not None:
            place.remove()
        del container[key]
    elif op == "truncate":
        kept = _utf16_prefix(target, value) if isinstance(target, str) else target[:value]
        if place is not None:
            if isinstance(kept, str):
                place.truncate_text(len(kept))
            else:
                place.truncate_items(len(kept))
        container[key] = kept
    elif isinstance(target, str):
        text = _as_text(value)
        if place is not None:
            place.append_text(target, text)
        container[key] = target + text
        return container, key, [container[key]]
    elif isinstance(target, list):
        if isinstance(value, list):
            if place is not None:
                place.extend(value)
            target.extend(value)  # onto an array, append concatenates one level
        else:
            if place is not None:
                place.push(value)
            target.append(value)
    elif isinstance(target, dict):
        assert isinstance(value, dict)  # (`_check_op`)
        if place is not None:
            place.merge(value)
        target.update(value)  # shallow merge, new keys win: how /message/metadata grows
    else:
        if place is not None:
            place.set(value)
        _set(container, key, value)  # onto missing or null, append sets
        if isinstance(value, str):
            return container, key, [value]
    return None


def _as_text(value: JSON) -> str:
    """`v` as text, as JavaScript's `+` would write a scalar."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _utf16_prefix(text: str, units: int) -> str:
    """The first `units` UTF-16 code units of `text`, as JavaScript's string slicing counts."""
    if text.isascii() or all(ord(ch) < 0x10000 for ch in text):
        return text[:units]
    encoded = text.encode("utf-16-le", "surrogatepass")[: 2 * units]
    return encoded.decode("utf-16-le", "surrogatepass")


def _kind(value: JSON) -> str:
    if value is MISSING:
        return "missing value"
    if value is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), "number"
    )
