"""Redaction of an event stream as it is stored: raw SSE chunks, in order, some held back.

A model streams its text in bare frames (`{"v": " to"}`, `{"v": "ken"}`): a secret in its output
(an API key the user pasted and the model repeats) arrives cut into pieces, across events and
across network chunks, so no single event holds it. So the text that bare frames append to one
string (or a Responses API item's `*.delta` events) is put back together, searched, and a secret
found in it is replaced piece by piece: the piece where it starts carries the placeholder, the
others lose their part of it, and the stream still decodes (to the redacted text).

Each byte is redacted once, from the text as it came: the held chunks are kept as they came and
looked at again, together, whenever a chunk with a hint arrives (a placeholder written by an
earlier look would hide the secret's start from the next). A chunk is held until the ones after
it have appended `TAIL` characters (more than a secret's start needs to be recognised) and no
secret found ends near the end of what came so far (it may go on), or the stream pauses or ends;
at most `MAX_HELD` chunks and `MAX_HELD_TEXT` characters per stream. What went out is
remembered (`Carry`): the end of the string it was appending to, from the start of a secret still
open (up to `LONGEST` characters), so that the rest of a secret that went out cut short is cut too.
The hold is in the recorder's copy of the stream: the client has its bytes already.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from convtap.redact.patterns import find_secrets, hints, keyed_secrets, path_is_secret
from convtap.redact.redactor import Redactor, StreamState
from convtap.wire.events import Appended
from convtap.wire.jsonvalue import dumps, loads, loads_or_none
from convtap.wire.responses import delta_text
from convtap.wire.sse import SSEEvent, format_event

_BARE_START = re.compile(r'\{\s*"v"\s*:\s*"')  # how a bare frame's data starts
TAIL = 400  # characters appended after a chunk before it goes out (a secret's start is seen)
LONGEST = 8192  # characters of one secret seen whole across what went out (a PEM key: ~3,300)
NEAR = 64  # characters after the end of a secret found that may still belong to it (an END line)
MAX_HELD = 64  # chunks held back per stream, at most
MAX_HELD_TEXT = 1 << 20  # characters of them, at most (beyond, the oldest go out)

CLEAN_FROM = 1024  # characters: an event's data this long, once found clean, is remembered
CLEAN_BUDGET = 1 << 22  # characters of such data remembered, at most (the oldest go first)

Keep = Callable[[float, int, str], None]  # (time, events, text): one raw row
ANY_ITEM = object()  # a string whose item is not known: the next `*.delta` continues it


@dataclass(frozen=True, slots=True)
class Carry:
    """Where a stream stands after a chunk: whether its sticky delta path names a secret key,
    and the string its pieces were appending to (the Responses item, or None for bare frames;
    the end of its text as it came)."""

    secret_path: bool = False
    item: object = None
    text: str = ""


@dataclass(frozen=True, slots=True)
class _Mark:
    """Where a stream stands after a chunk, as a look left it: read only when it goes out."""

    secret_path: bool
    item: object
    run: _Run
    count: int  # pieces of the run up to here

    def carry(self) -> Carry:
        return Carry(self.secret_path, self.item, self.run.text(self.count))


@dataclass
class Held:
    at: float
    text: str  # as it came (lines the decoder does not read already redacted)
    events: Sequence[SSEEvent]  # as they came (never changed by its reader)
    keep: Keep  # where it goes when it goes (its flow's raw rows)
    appended: int  # characters of text its bare frames and appends add
    values: bool  # a hint of a secret value in it
    after: Carry | _Mark  # where the stream stands after it
    stored: str | None = None  # its text as the last look redacted it (None: as it came)
    parsed: list[object] | None = None  # its events' data as JSON, read at its first look

    def out(self) -> None:
        self.keep(self.at, len(self.events), self.text if self.stored is None else self.stored)


class _Run:
    """The pieces that append to one string, after the text it already had (`before`, gone out
    already): put back together, searched, and cut."""

    __slots__ = ("after", "before", "item", "pieces")

    def __init__(self, item: object = None, before: str = "") -> None:
        self.item, self.before = item, before
        self.pieces: list[tuple[int, str, str]] = []  # (position in the events, text, field)
        self.after: str | None = None  # its text after the last secret closed (when one was)

    def text(self, count: int) -> str:
        """The end of the string after its first `count` pieces (at most LONGEST characters),
        as it came."""
        out: list[str] = []
        size = 0
        for _, piece, _ in reversed(self.pieces[:count]):
            out.append(piece)
            size += len(piece)
            if size >= LONGEST:
                break
        else:
            out.append(self.before)
        return "".join(reversed(out))[-LONGEST:]

    def close(self, out: list[SSEEvent], redactor: Redactor) -> bool:
        """Cut the secrets found out of the pieces (a secret that began in the text gone out
        loses the rest); True when one ends NEAR the end (it may go on)."""
        if not self.pieces:
            return False
        whole = self.before + "".join(piece for _, piece, _ in self.pieces)
        keys, values = hints(whole)
        spans = find_secrets(whole, keyed=keys) if keys or values else []
        if not spans:
            return False
        self.after = whole[spans[-1][1] :]
        start = len(self.before)
        for position, piece, holder in self.pieces:
            end = start + len(piece)
            new, cursor = [], start
            for a, b, secret in spans:
                if b <= start or a >= end:
                    continue
                new.append(whole[cursor : max(a, cursor)])
                if start <= a < end:
                    new.append(redactor.placeholder(secret))
                cursor = max(cursor, min(b, end))
            new.append(whole[cursor:end])
            text = "".join(new)
            if text != piece:
                event = out[position]
                value = _parsed(event.data)
                if isinstance(value, dict):
                    value[holder] = text
                    out[position] = event._replace(data=dumps(value) or event.data)
            start = end
        return spans[-1][1] > len(whole) - NEAR


class _Runs:
    """The strings a look's pieces append to, each put back together on its own: appends to
    two strings in turn (two paths, two Responses items) neither join nor cut one another."""

    __slots__ = ("current", "runs")

    def __init__(self, first: _Run) -> None:
        self.current = first  # the one bare frames go on appending to
        self.runs = [first]

    def to(self, item: object) -> _Run:
        """The run of the string `item` names, made current (a new one for None: a string
        set whole, or one whose start is not known)."""
        run = self.current
        if item is not None and (item == run.item or run.item is ANY_ITEM):
            run.item = item
            return run
        found = None if item is None else next((r for r in self.runs if r.item == item), None)
        self.current = found or _Run(item)
        if found is None:
            self.runs.append(self.current)
        return self.current

    def close(self, out: list[SSEEvent], redactor: Redactor) -> bool:
        """Each run cut; True when a secret found in one ends NEAR its end (it may go on)."""
        return any([run.close(out, redactor) for run in self.runs])


class _CleanTexts:
    """Events' data already searched and found to hold no hint of a secret, remembered (up to
    CLEAN_BUDGET characters, the oldest forgotten first) so that what streams repeat is not
    searched again: every turn of a conversation echoes its earlier messages. A text of
    `hints` either way (the search is a function of the text alone)."""

    def __init__(self) -> None:
        self._texts: dict[str, None] = {}
        self._size = 0

    def __contains__(self, text: str) -> bool:
        return len(text) >= CLEAN_FROM and text in self._texts

    def add(self, texts: list[str]) -> None:
        """Texts searched together (a line each) and found clean: the JSON objects among them."""
        for text in texts:
            whole = text[:1] == "{" and text[-1:] == "}"
            if whole and len(text) >= CLEAN_FROM and text not in self._texts:
                self._texts[text] = None
                self._size += len(text)
        while self._size > CLEAN_BUDGET:
            oldest = next(iter(self._texts))
            del self._texts[oldest]
            self._size -= len(oldest)


_SEEN_CLEAN = _CleanTexts()


@dataclass
class StreamRedaction:
    """One stream's redaction (a turn's legs, or a Responses stream) and its held chunks."""

    redactor: Redactor
    state: StreamState = field(default_factory=StreamState)  # after every chunk seen
    held: list[Held] = field(default_factory=list)  # oldest first
    carry: Carry = Carry()  # where the stream stood after the chunks gone out
    tail: str = ""  # the end of the appended text so far, as JSON string text
    open: bool = False  # a secret found ends near the end of the text so far (may go on)
    values_clean: bool = True  # no hint of a secret value in the stream so far
    keys_clean: bool = True  # no hint of a secret key (or path) in the stream so far

    def hinted(self, keys: bool, values: bool) -> None:
        """What `hints` found in the stream's text: its messages are looked at as closely."""
        self.keys_clean = self.keys_clean and not keys
        self.values_clean = self.values_clean and not values

    def chunk(
        self,
        at: float,
        text: str,
        events: Sequence[SSEEvent],
        keep: Keep,
        appended: Appended,
        unread: bool = True,
        unread_text: str | None = None,
    ) -> None:
        """A chunk's complete events: held back, and what was held long enough goes out.
        `appended` is what the decoder saw them append (`frames.appended` without one);
        `unread` is False when the text is known to hold no line the decoder does not read
        (a comment, another field), and `unread_text` those lines when the parser knows them."""
        if unread:
            text = self.redactor.unread(text, unread_text)
        # bare frames the decoder did not take as appends (no append open) are pieces too to
        # a look (`_event`): their text is searched with the rest
        pieces = "".join([*appended.pieces, *_bare_frames(appended.others)])
        others = [data for data in appended.others if data not in _SEEN_CLEAN]
        # one event's data to a line: no marker or hint is made across two of them; each path
        # as the JSON string it came in: its last segment is a key there
        rest = "\n".join(others) + "".join(f'\n"{path}"' for path in appended.paths)
        window = searched = self.tail + pieces
        if len(set(appended.paths)) > 1:  # appends to strings in turn: each searched whole too
            searched = "\n".join([window, *_strings(events)])
        keys, values = hints(rest)
        if not keys and not values:
            _SEEN_CLEAN.add(others)
        # The appended text may be JSON text (a call's arguments): a secret key named there
        # counts, once its look is confirmed (prose says "token" often).
        appended_keys, appended_values = hints(searched)
        values = values or appended_values
        keys = keys or (appended_keys and bool(keyed_secrets(searched)))
        self.tail = window[-TAIL:]
        self.hinted(keys, values)
        before = _carry(self.held[-1].after) if self.held else self.carry
        item = ANY_ITEM if pieces else before.item
        after = Carry(self.state.secret_path, item, (before.text + pieces)[-TAIL:])
        # The events as given (a block's runs of bare frames are made into events only if a look
        # needs them: most chunks go out unlooked at).
        self.held.append(Held(at, text, events, keep, len(pieces), values, after))
        if keys or values or self.state.secret_path or self.open:
            self._look(any(held.values for held in self.held))
        self._release()

    def _release(self) -> None:
        """The oldest held chunks go out while the ones after them append TAIL characters and
        no secret found may go on (a secret that starts in them has been seen whole), or when
        none ever appended any, or past the bounds."""
        after = sum(held.appended for held in self.held[1:])
        size = sum(len(held.text) for held in self.held)
        while len(self.held) > 1 and (
            (after >= TAIL and not self.open) or not self.tail
            or len(self.held) > MAX_HELD or size > MAX_HELD_TEXT
        ):  # fmt: skip
            first = self.held.pop(0)
            self._out(first)
            after -= self.held[0].appended
            size -= len(first.text)

    def _out(self, held: Held) -> None:
        held.out()
        self.carry = _kept(_carry(held.after))

    def flush_older(self, than: float) -> None:
        """Chunks held since before `than` go out (the stream paused)."""
        if self.held and self.held[-1].at < than:
            self.flush()

    def flush(self) -> None:
        """The stream (or its leg) ended: what is held goes out."""
        for held in self.held:
            self._out(held)
        self.held = []

    def _look(self, scrub: bool) -> None:
        """Every held chunk redacted again from what came (keys, paths, values event by event;
        the text that runs of pieces append, put back together, across them)."""
        state = StreamState()
        state.secret_path = self.carry.secret_path
        runs = _Runs(_Run(self.carry.item, self.carry.text))
        out: list[SSEEvent] = []
        for held in self.held:
            if held.parsed is None:
                held.parsed = [_parsed(event.data) for event in held.events]
            for event, value in zip(held.events, held.parsed, strict=True):
                self._event(event, value, out, runs, state, scrub)
            run = runs.current
            held.after = _Mark(state.secret_path, run.item, run, len(run.pieces))
        self.open = runs.close(out, self.redactor)
        if runs.current.after is not None and not self.open:  # what is left starts after it
            self.tail = runs.current.after[-TAIL:]
        self.state.secret_path = state.secret_path
        for held in self.held:
            count = len(held.events)
            redacted, out = out[:count], out[count:]
            held.stored = None if tuple(held.events) == tuple(redacted) else "".join(
                format_event(e) for e in redacted
            )  # fmt: skip

    def _event(
        self,
        event: SSEEvent,
        value: object,
        out: list[SSEEvent],
        runs: _Runs,
        state: StreamState,
        scrub: bool,
    ) -> None:
        """One event (and its data as JSON, never changed) redacted into `out`; its piece
        joins the run of the string it appends to."""
        if event.event not in ("delta", "message"):  # a name is searched as a value is
            event = event._replace(event=self.redactor.event_name(event.event))
        if event.event == "delta" and isinstance(value, dict):
            piece = value.get("v")
            if len(value) == 1 and isinstance(piece, str) and not state.secret_path:
                runs.current.pieces.append((len(out), piece, "v"))  # a bare frame (rule 2)
                out.append(event)
                return
            path = value.get("p")
            if isinstance(path, str):  # an explicit path: another string, maybe
                appends = value.get("o") == "append" and isinstance(piece, str)
                if appends and not path_is_secret(path):
                    state.secret_path = False
                    out.append(self._all_but(event, value, "v", scrub, state))
                    runs.to(("path", path)).pieces.append((len(out) - 1, str(piece), "v"))
                    return
                runs.to(None)  # the string is set whole (or is a secret): none goes on
        delta = delta_text(value)
        if delta is None or not isinstance(value, dict):
            out.append(event._replace(data=self.redactor.event_text(event.data, scrub, state)))
            return
        out.append(self._all_but(event, value, "delta", scrub, state))
        runs.to(delta[0]).pieces.append((len(out) - 1, delta[1], "delta"))

    def _all_but(
        self, event: SSEEvent, value: dict[str, Any], holder: str, scrub: bool, state: StreamState
    ) -> SSEEvent:
        """An event redacted but for its piece (the run cuts that): its other fields."""
        blank = dumps({**value, holder: ""}) or ""
        if not any(hints(blank)):
            return event
        redacted = _parsed(self.redactor.event_text(blank, scrub, state))
        if not isinstance(redacted, dict) or redacted == {**value, holder: ""}:
            return event
        return event._replace(data=dumps({**redacted, holder: value[holder]}) or event.data)


def _strings(events: Sequence[SSEEvent]) -> list[str]:
    """The text each string gets from events that append to several in turn (explicit appends,
    and the bare frames after each)."""
    strings: dict[str | None, list[str]] = {}
    path = None
    for event in events:
        value = loads_or_none(event.data) if event.event == "delta" else None
        if not isinstance(value, dict) or not isinstance(piece := value.get("v"), str):
            continue
        if len(value) > 1 and value.get("o") == "append" and isinstance(value.get("p"), str):
            path = value["p"]
        elif len(value) > 1:
            continue
        strings.setdefault(path, []).append(piece)
    return ["".join(parts) for parts in strings.values()]


def _bare_frames(datas: list[str]) -> list[str]:
    """The strings of the bare frames (`{"v": "…"}`) among events' data."""
    found = []
    for data in datas:
        if _BARE_START.match(data):  # (not an event that adds a message: `{"v": {…}}`)
            value = loads_or_none(data)
            if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("v"), str):
                found.append(value["v"])
    return found


def _carry(after: Carry | _Mark) -> Carry:
    return after if isinstance(after, Carry) else after.carry()


def _kept(carry: Carry) -> Carry:
    """What is kept of where a stream stood: the end of its string from the start of a secret
    that may go on, else its last TAIL characters."""
    text = carry.text
    if len(text) <= TAIL:
        return carry
    start = len(text) - TAIL
    if any(hints(text)):
        spans = find_secrets(text, keyed=hints(text)[0])
        if spans and spans[-1][1] > len(text) - NEAR:
            start = min(start, spans[-1][0])
    return Carry(carry.secret_path, carry.item, text[start:])


def _parsed(data: str) -> object:
    try:
        return loads(data)
    except (ValueError, RecursionError):
        return None
