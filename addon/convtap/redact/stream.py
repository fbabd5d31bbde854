"""Redaction of an event stream as it is stored: raw rows decided by the values they build.

What is secret is decided on *values*: on every string the stream's decoder builds, whatever
built it (an `add` that set it, bare frames and `append`s, a `patch`'s sub-ops, a `replace`, a
truncate, either channel; a Responses item's `*.delta` events). The decoder says where each
character came from (`wire.provenance`: a `Piece` is the text one event brought, and where in
that event's data it sits), so a secret found in a string is cut out of exactly the raw events
that carried its characters: the piece where it starts carries its placeholder, the others lose
their part, and the stored events still decode (to the redacted value). Every event is then
redacted on its own as well (keys, paths, values whole in it). An event that no string's secret
reaches is stored as it came, byte for byte.

A raw row (a `Carrier`: a network chunk's complete events, or one frame) is held back while a
string it brought text to may still turn out to hold a secret there, and goes out, in order,
once every piece it brought is settled:

- its string ended (set again, removed, the stream over) or came to rest (its message
  finished): nothing more can join it;
- or the string went on far enough: `TAIL` characters past the piece when a hint of a secret is
  near (and no secret found may go on: it is held from that secret's start), else past the
  piece's end but for the string's last run of characters that are not white space (a secret
  has none, and may have begun there: `gh` of a `ghp_…` to come, the digits of a Telegram
  token).

Never by time: a stream that pauses in the middle of a secret holds its start until the rest
comes. The hold is bounded: past `MAX_HELD` rows or `MAX_HELD_TEXT` characters the oldest goes
out as it stands (cut where a secret was found), and a secret that began in it still loses the
rest of its characters (the string's last `LONGEST` characters are remembered as context). The
hold is in the recorder's copy of the stream: the client has its bytes already.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from convtap.redact.patterns import find_secrets, hints, path_is_secret
from convtap.redact.redactor import Redactor
from convtap.wire.jsonvalue import dumps, loads_or_none
from convtap.wire.provenance import Began, Cut, Ended, Leaf, Piece, StringEvent
from convtap.wire.sse import SSEEvent, format_event

TAIL = 400  # characters past a piece, near a hint, before it goes out (a secret's start is seen)
LONGEST = 8192  # characters of one secret seen whole across what went out (a PEM key: ~3,300)
NEAR = 64  # characters after the end of a secret found that may still belong to it (an END line)
RUN = 64  # characters of a string's last run without white space held back, at most
OVERLAP = 64  # characters before new text searched with it for a hint (a hint's longest word)
MAX_HELD = 64  # raw rows held back per stream, at most
MAX_HELD_TEXT = 1 << 20  # characters of them, at most (beyond, the oldest go out)

Keep = Callable[[float, int, str], None]  # (time, events, stored text): one raw row
_SPACE_RUN = re.compile(r"\S*\Z")


def format_events(events: Sequence[SSEEvent]) -> str:
    return "".join(format_event(event) for event in events)


@dataclass(eq=False)
class Carrier:
    """A raw row in waiting: what one network chunk completed (or one frame), as it came."""

    at: float
    text: str  # as it came (lines the decoder does not read already redacted)
    events: Sequence[SSEEvent]  # its complete events, as they came
    first: int  # the stream's index of its first event
    keep: Keep  # where it goes (its flow's raw rows)
    render: Callable[[Sequence[SSEEvent]], str] = format_events  # its text, once one changed
    pieces: list[_Held] = field(default_factory=list)  # what its events brought to strings
    waiting: int = 0  # its parts not decoded yet (a frame's items waiting for their parent)

    def holds(self, event: int) -> bool:
        return self.first <= event < self.first + len(self.events)


class _Held:
    """A piece of a string whose row has not gone out: where it is, and what is stored of it.
    Its first `live` characters are the string's (a truncate may have cut the rest, whose stored
    form `rest` was fixed then)."""

    __slots__ = ("event", "leaf", "live", "rest", "start", "stored", "string", "text")

    def __init__(self, string: _String, event: int, leaf: Leaf, start: int, text: str) -> None:
        self.string, self.event, self.leaf, self.start, self.text = string, event, leaf, start, text
        self.stored = text  # as the last look cut it
        self.live = len(text)
        self.rest = ""

    @property
    def end(self) -> int:
        return self.start + self.live

    @property
    def part(self) -> str:
        return self.text[: self.live]


class _String:
    """One string the stream builds: the text gone out (its end, as context), the pieces held."""

    __slots__ = ("before", "ended", "gone", "held", "hint_at", "open_from", "resting", "secret")

    def __init__(self, secret: bool = False) -> None:
        self.secret = secret  # its place names a secret key: all of it is secret
        self.gone = 0  # characters that went out (or came in rows already gone)
        self.before = ""  # their last LONGEST characters
        self.held: list[_Held] = []
        self.hint_at: int | None = None  # where a hint of a secret was last seen (its end)
        self.open_from: int | None = None  # a secret found may go on, from here
        self.resting = self.ended = False

    @property
    def length(self) -> int:
        return self.held[-1].end if self.held else self.gone

    def text(self) -> str:
        return self.before + "".join(piece.part for piece in self.held)

    def tail(self, size: int) -> str:
        """Its last `size` characters (at most)."""
        parts: list[str] = []
        for piece in reversed(self.held):
            parts.append(piece.part)
            size -= piece.live
            if size <= 0:
                break
        else:
            parts.append(self.before[-size:] if size > 0 else "")
        return "".join(reversed(parts))

    def add(self, piece: _Held | None, text: str) -> None:
        if piece is None:  # in a row gone already: context only
            self._gone(text)
        else:
            self.held.append(piece)
        self.resting = False

    def _gone(self, text: str) -> None:
        self.gone += len(text)
        self.before = (self.before + text)[-LONGEST:]

    def went(self, piece: _Held) -> None:
        """`piece`'s row went out."""
        if self.held and self.held[0] is piece:
            self.held.pop(0)
            self._gone(piece.part)

    def settled(self) -> int:
        """Up to where nothing can change any more (a string offset)."""
        if self.resting or self.ended:
            return self.length
        if self.secret:
            return self.gone
        length = self.length
        if self.open_from is not None or (self.hint_at is not None
                                          and self.hint_at > length - TAIL):  # fmt: skip
            until = length - TAIL
            return until if self.open_from is None else min(until, self.open_from)
        run = _SPACE_RUN.search(self.tail(RUN))
        return length - (len(run.group()) if run else 0)


class StreamRedaction:
    """One stream's redaction (a turn's legs, a Responses stream, a socket's frames)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.held: deque[Carrier] = deque()  # oldest first
        self.strings: dict[Hashable, _String] = {}
        self._size = 0  # characters held

    def chunk(self, carrier: Carrier, strings: Sequence[StringEvent] = ()) -> None:
        """A raw row's events and what they did to strings: held back, and what is settled goes
        out."""
        self.held.append(carrier)
        self._size += len(carrier.text)
        self.strings_only(strings)

    def strings_only(self, strings: Sequence[StringEvent]) -> None:
        """What events of the rows held did to strings (with no new row); what is settled goes
        out."""
        grown: dict[int, tuple[_String, int]] = {}  # what grew, by how many characters
        for event in strings:
            if type(event) is Piece:
                string = self.strings.get(event.string)
                if string is None:
                    string = self.strings[event.string] = _String()
                owner = self._carrier_of(event.event)
                piece = None
                if owner is not None:
                    piece = _Held(string, event.event, event.leaf, string.length, event.text)
                    owner.pieces.append(piece)
                string.add(piece, event.text)
                before = grown.get(id(string), (string, 0))[1]
                grown[id(string)] = (string, before + len(event.text))
            elif type(event) is Began:
                self.strings[event.string] = _String(path_is_secret("/" + "/".join(event.path)))
            elif type(event) is Cut:
                self._cut(event.string, event.length)
            else:  # Ended, Rested
                self._over(event.string, ended=type(event) is Ended)
        for string, added in grown.values():
            self._grew(string, added)
        self._release()

    def flush(self) -> None:
        """The stream ended: every string is over, and everything held goes out."""
        for key in list(self.strings):
            self._over(key, ended=True)
        self._release(everything=True)

    # -- strings ------------------------------------------------------------------------------

    def _carrier_of(self, event: int) -> Carrier | None:
        for carrier in reversed(self.held):
            if carrier.holds(event):
                return carrier
            if carrier.first + len(carrier.events) <= event:
                return None
        return None

    def _grew(self, string: _String, added: int) -> None:
        """`added` characters at the end of `string`: a hint near them, a look."""
        if any(hints(string.tail(added + OVERLAP))):
            string.hint_at = string.length
        if string.secret or string.open_from is not None or (
            string.hint_at is not None and string.hint_at >= string.length - added
        ):  # fmt: skip
            self._look(string)

    def _over(self, key: Hashable, *, ended: bool) -> None:
        """The string came to rest (or ended): looked at whole, its pieces settled."""
        string = self.strings.get(key)
        if string is None:
            return
        self._look(string, final=True)
        string.resting = True
        if ended:
            string.ended = True
            del self.strings[key]

    def _look(self, string: _String, *, final: bool = False) -> list[tuple[int, int, str]]:
        """The held pieces cut where a secret sits in the string's text (context included):
        the secrets found, at their places in that text."""
        if not string.held:
            return []
        before, text = len(string.before), string.text()
        if string.secret:
            spans = [(before, len(text), text[before:])]
        else:
            keys, values = hints(text)
            spans = find_secrets(text, keyed=keys) if keys or values else []
        start = before
        for piece in string.held:
            piece.stored = _cut_piece(piece.part, start, spans, text, self.redactor) + piece.rest
            start += piece.live
        string.open_from = None
        if spans and spans[-1][1] > len(text) - NEAR and not final:
            string.open_from = string.gone - before + spans[-1][0]
        return spans

    def _cut(self, key: Hashable, length: int) -> None:
        """A truncate: what the string had is looked at whole first (its cut end is in the
        raw events, stored as that look cut it), then it goes on from its first `length`
        characters."""
        string = self.strings.get(key)
        if string is None:
            return
        spans = self._look(string, final=True)
        text, offset = string.text(), string.gone - len(string.before)
        kept: list[_Held] = []
        for piece in string.held:
            if piece.start >= length:
                continue  # its row keeps the stored form the look gave it
            if piece.end > length:
                live = length - piece.start
                piece.rest = _cut_piece(piece.part[live:], piece.start + live - offset, spans,
                                        text, self.redactor) + piece.rest  # fmt: skip
                piece.live = live
            kept.append(piece)
        string.held = kept
        if not kept and string.gone > length:  # (what went out cannot change)
            string.before = string.before[: max(0, len(string.before) - (string.gone - length))]
            string.gone = length

    # -- rows ---------------------------------------------------------------------------------

    def _release(self, everything: bool = False) -> None:
        """The oldest rows go out while all they brought is settled (or past the bounds)."""
        while self.held:
            head = self.held[0]
            bound = len(self.held) > MAX_HELD or self._size > MAX_HELD_TEXT
            settled = not head.waiting and all(_settled(p) for p in head.pieces)
            if not (everything or bound or settled):
                break
            self.held.popleft()
            self._size -= len(head.text)
            self._out(head)

    def _out(self, carrier: Carrier) -> None:
        cuts: dict[int, list[_Held]] = {}
        for piece in carrier.pieces:
            piece.string.went(piece)
            if piece.stored != piece.text:
                cuts.setdefault(piece.event, []).append(piece)
        text = carrier.text
        if cuts or any(hints(text)):
            redacted = [self._event(event, cuts.get(carrier.first + n, ()))
                        for n, event in enumerate(carrier.events)]  # fmt: skip
            if any(a is not b for a, b in zip(redacted, carrier.events, strict=True)):
                text = carrier.render(redacted)
        carrier.keep(carrier.at, len(carrier.events), text)

    def _event(self, event: SSEEvent, cuts: Sequence[_Held]) -> SSEEvent:
        """One event as stored: the strings it brought cut where a secret sits, then redacted
        on its own (keys, paths, values whole in it)."""
        data = event.data
        if cuts:
            value = loads_or_none(data)
            for piece in cuts:
                value = _replaced(value, piece.leaf, piece.stored, len(piece.text))
            data = dumps(value) or data
        redacted = self.redactor.text(data)
        name = event.event
        if name not in ("delta", "message"):  # a name is searched as a value is
            name = self.redactor.event_name(name)
        if redacted == event.data and name == event.event:
            return event
        return SSEEvent(name, redacted)


def _settled(piece: _Held) -> bool:
    string = piece.string
    return string.ended or piece.end <= string.settled()


def _cut_piece(
    piece: str, start: int, spans: list[tuple[int, int, str]], text: str, redactor: Redactor
) -> str:
    """A piece (at `start` of `text`) with the parts of `spans` it holds taken out; the piece
    where a secret starts carries its placeholder."""
    end = start + len(piece)
    out, cursor = [], start
    for a, b, secret in spans:
        if b <= start or a >= end:
            continue
        out.append(text[cursor : max(a, cursor)])
        if start <= a < end:
            out.append(redactor.placeholder(secret))
        cursor = max(cursor, min(b, end))
    if not out:
        return piece
    out.append(text[cursor:end])
    return "".join(out)


def _replaced(value: object, leaf: Leaf, text: str, length: int) -> object:
    """`value` with the first `length` characters of the string at `leaf` replaced by `text`
    (an appended scalar becomes the string it was appended as)."""
    if not leaf:
        return text + value[length:] if isinstance(value, str) else text
    key, rest = leaf[0], leaf[1:]
    if isinstance(value, dict) and isinstance(key, str) and key in value:
        return {**value, key: _replaced(value[key], rest, text, length)}
    if isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value):
        return [*value[:key], _replaced(value[key], rest, text, length), *value[key + 1 :]]
    return value
