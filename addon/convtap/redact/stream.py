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
from convtap.wire.bounded import Bounded
from convtap.wire.jsonvalue import dumps, loads_or_none
from convtap.wire.provenance import Began, Cut, Ended, Leaf, Piece, Pieces, StringEvent
from convtap.wire.sse import SSEEvent, format_event

TAIL = 400  # characters past a piece, near a hint, before it goes out (a secret's start is seen)
LONGEST = 8192  # characters of one secret seen whole across what went out (a PEM key: ~3,300)
NEAR = 64  # characters after the end of a secret found that may still belong to it (an END line)
RUN = 64  # characters of a string's last run without white space held back, at most
OVERLAP = 64  # characters before new text searched with it for a hint (a hint's longest word)
MAX_HELD = 64  # raw rows held back per stream, at most
MAX_HELD_TEXT = 1 << 20  # characters of them, at most (beyond, the oldest go out)
VOUCHED = 4096  # texts known to hold no hint (`StreamRedaction.vouch`), per stream, at most
VOUCH_FROM = 64  # characters a text needs for that (a shorter one is searched: it is cheap)

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
    ends: dict[_String, int] = field(default_factory=dict)  # of each string, its last piece's
    waiting: int = 0  # its parts not decoded yet (a frame's items waiting for their parent)
    end: int = -1  # the index after its last event
    utf8: bytes | None = None  # the bytes `text` decodes, when known: searched as they came
    found: tuple[bool, bool] | None = None  # `hints` of `text`, once searched

    def __post_init__(self) -> None:
        self.end = self.first + len(self.events)

    def hints(self) -> tuple[bool, bool]:
        """`hints` of its text as it came, searched once (by its release, or by a `vouch`)."""
        if self.found is None:
            self.found = hints(self.text, self.utf8)
        return self.found

    def settled(self) -> bool:
        """Whether everything it brought to strings is settled."""
        return not self.waiting and all(
            string.ended or end <= string.settled() for string, end in self.ends.items()
        )


class _Held:
    """Pieces one row brought to one string, in a run: the texts of the events from `event` on,
    one each, all at `leaf`; from `start` of the string. `stored` is what the last look made of
    each (None: all as they came)."""

    __slots__ = ("event", "frozen", "leaf", "start", "stored", "string", "text", "texts")

    def __init__(
        self, string: _String, event: int, leaf: Leaf, start: int, texts: list[str]
    ) -> None:
        self.string, self.event, self.leaf, self.start, self.texts = (
            string, event, leaf, start, texts
        )  # fmt: skip
        self.text = texts[0] if len(texts) == 1 else "".join(texts)
        self.stored: list[str] | None = None
        self.frozen = False  # a truncate fixed what is stored of it

    @property
    def end(self) -> int:
        return self.start + len(self.text)

    def cut(
        self, spans: list[tuple[int, int, str]], text: str, at: int, redactor: Redactor
    ) -> None:
        """Each of its texts cut where `spans` (in `text`, where this begins at `at`) sit."""
        if self.frozen:
            return
        end = at + len(self.text)
        if not any(a < end and b > at for a, b, _ in spans):
            self.stored = None
            return
        stored, start = [], at
        for piece in self.texts:
            stored.append(_cut_piece(piece, start, spans, text, redactor))
            start += len(piece)
        self.stored = stored


class _String:
    """One string the stream builds: the text gone out (its end, as context), the pieces held."""

    __slots__ = ("_before", "ended", "gone", "held", "hint_at", "length", "open_from",
                 "resting", "secret")  # fmt: skip

    def __init__(self, secret: bool = False) -> None:
        self.secret = secret  # its place names a secret key: all of it is secret
        self.gone = 0  # characters that went out (or came in rows already gone)
        self._before: list[str] = []  # their end: the last LONGEST characters, and more
        self.held: deque[_Held] = deque()
        self.length = 0
        self.hint_at: int | None = None  # where a hint of a secret was last seen (its end)
        self.open_from: int | None = None  # a secret found may go on, from here
        self.resting = self.ended = False

    @property
    def before(self) -> str:
        """The last LONGEST characters that went out."""
        if len(self._before) != 1:
            self._before = ["".join(self._before)[-LONGEST:]]
        return self._before[0]

    def text(self) -> str:
        return self.before + "".join(piece.text for piece in self.held)

    def tail(self, size: int) -> str:
        """Its last `size` characters (at most)."""
        parts: list[str] = []
        for piece in reversed(self.held):
            parts.append(piece.text)
            size -= len(piece.text)
            if size <= 0:
                break
        else:
            if size > 0:
                parts.append(self.before[-size:])
        return "".join(reversed(parts))

    def add(self, piece: _Held | None, text: str) -> None:
        if piece is None:  # in a row gone already: context only
            self._gone(text)
        else:
            self.held.append(piece)
        self.length += len(text)
        self.resting = False

    def _gone(self, text: str) -> None:
        self.gone += len(text)
        self._before.append(text)
        if len(self._before) > 256:
            self._before = [self.before]

    def went(self, piece: _Held) -> None:
        """`piece`'s row went out."""
        if self.held and self.held[0] is piece:
            self.held.popleft()
            self._gone(piece.text)

    def restart(self, length: int) -> None:
        """A truncate kept the first `length` characters: what is held is fixed as it is (it
        goes out as the look before made it), and the string goes on from its kept text."""
        kept = self.text()[: max(0, length - (self.gone - len(self.before)))]
        for piece in self.held:
            piece.frozen = True
        self.held = deque()
        self._before, self.gone, self.length = [kept[-LONGEST:]], length, length
        self.open_from = None

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
        # texts known to hold no hint, by what they are the text of (a message's id)
        self.vouched: Bounded[Hashable, str] = Bounded(VOUCHED)

    def chunk(self, carrier: Carrier, strings: Sequence[StringEvent] = ()) -> None:
        """A raw row's events and what they did to strings: held back, and what is settled goes
        out."""
        self.held.append(carrier)
        self._size += len(carrier.text)
        self.strings_only(strings)

    def strings_only(self, strings: Sequence[StringEvent]) -> None:
        """What events of the rows held did to strings (with no new row); what is settled goes
        out."""
        grown: dict[_String, int] = {}  # what grew, by how many characters
        last = self.held[-1] if self.held else None
        for event in strings:
            if isinstance(event, Piece | Pieces):
                string = self.strings.get(event.string)
                if string is None:
                    string = self.strings[event.string] = _String()
                at = event.event
                owner = last if last is not None and last.first <= at < last.end else (
                    self._carrier_of(at)
                )  # fmt: skip
                texts = [event.text] if isinstance(event, Piece) else event.texts
                piece = None
                if owner is not None:
                    piece = _Held(string, at, event.leaf, string.length, texts)
                    owner.pieces.append(piece)
                    owner.ends[string] = piece.end
                    text = piece.text
                else:
                    text = "".join(texts)
                string.add(piece, text)
                grown[string] = grown.get(string, 0) + len(text)
            elif isinstance(event, Began):
                self.strings[event.string] = _String(path_is_secret("/" + "/".join(event.path)))
            elif isinstance(event, Cut):
                self._cut(event.string, event.length)
            else:  # Ended, Rested
                self._over(event.string, ended=isinstance(event, Ended))
        for string, added in grown.items():
            self._grew(string, added)
        self._release()

    def vouch(self, carrier: Carrier, key: Hashable, text: str) -> None:
        """`text` (of what `key` names) is remembered as holding no hint when `holds_no_hint`
        shows it by `carrier`'s search: `text_hints` then need not search it again."""
        if holds_no_hint(carrier, text):
            self.vouched[key] = text

    def text_hints(self, key: Hashable, text: str) -> tuple[bool, bool]:
        """`hints(text)`, known without a search when `text` is the text vouched for `key`."""
        if self.vouched.get(key) == text:  # the same value: the same answer
            return False, False
        return hints(text)

    def flush(self) -> None:
        """The stream ended: every string is over, and everything held goes out."""
        for key in list(self.strings):
            self._over(key, ended=True)
        self._release(everything=True)

    # -- strings ------------------------------------------------------------------------------

    def _carrier_of(self, event: int) -> Carrier | None:
        for carrier in reversed(self.held):
            if carrier.first <= event < carrier.end:
                return carrier
            if carrier.end <= event:
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

    def _look(self, string: _String, *, final: bool = False) -> None:
        """The held pieces cut where a secret sits in the string's text (context included)."""
        if not string.held:
            return
        before, text = len(string.before), string.text()
        if string.secret:
            spans = [(before, len(text), text[before:])]
        else:
            keys, values = hints(text)
            if not keys and not values:
                return
            spans = find_secrets(text, keyed=keys)
        at = before
        for piece in string.held:
            piece.cut(spans, text, at, self.redactor)
            at += len(piece.text)
        string.open_from = None
        if spans and spans[-1][1] > len(text) - NEAR and not final:
            string.open_from = string.gone - before + spans[-1][0]

    def _cut(self, key: Hashable, length: int) -> None:
        """A truncate: what the string had is looked at whole first (its cut end is in the
        raw events, stored as that look cut it), then it goes on from its first `length`
        characters."""
        string = self.strings.get(key)
        if string is not None:
            self._look(string, final=True)
            string.restart(length)

    # -- rows ---------------------------------------------------------------------------------

    def _release(self, everything: bool = False) -> None:
        """The oldest rows go out while all they brought is settled (or past the bounds)."""
        while self.held:
            head = self.held[0]
            bound = len(self.held) > MAX_HELD or self._size > MAX_HELD_TEXT
            if not (everything or bound or head.settled()):
                break
            self.held.popleft()
            self._size -= len(head.text)
            self._out(head)

    def _out(self, carrier: Carrier) -> None:
        cuts: dict[int, list[tuple[Leaf, str, int]]] = {}  # event -> (leaf, stored, length)
        for piece in carrier.pieces:
            piece.string.went(piece)
            if piece.stored is None:
                continue
            for n, (text, stored) in enumerate(zip(piece.texts, piece.stored, strict=True)):
                if stored != text:
                    cuts.setdefault(piece.event + n, []).append((piece.leaf, stored, len(text)))
        text = carrier.text
        if cuts or any(carrier.hints()):
            redacted = [self._event(event, cuts.get(carrier.first + n, ()))
                        for n, event in enumerate(carrier.events)]  # fmt: skip
            if any(a is not b for a, b in zip(redacted, carrier.events, strict=True)):
                text = carrier.render(redacted)
        carrier.keep(carrier.at, len(carrier.events), text)

    def _event(self, event: SSEEvent, cuts: Sequence[tuple[Leaf, str, int]]) -> SSEEvent:
        """One event as stored: the strings it brought cut where a secret sits, then redacted
        on its own (keys, paths, values whole in it)."""
        data = event.data
        if cuts:
            value = loads_or_none(data)
            for leaf, stored, length in cuts:
                value = _replaced(value, leaf, stored, length)
            data = dumps(value) or data
        redacted = self.redactor.text(data)
        name = event.event
        if name not in ("delta", "message"):  # a name is searched as a value is
            name = self.redactor.event_name(name)
        if redacted == event.data and name == event.event:
            return event
        return SSEEvent(name, redacted)


def holds_no_hint(carrier: Carrier, text: str) -> bool:
    """Whether `hints(text)` is surely (False, False), shown by the search of `carrier`'s text
    (which its release makes anyway) instead of a search of its own: the carrier's text held no
    hint, and `text` sits in it whole, right after a `"`, holding no `"` and no `\\` (a JSON
    string's value as it came: a message's text echoed whole in one event). Then every hint
    `hints(text)` could find is found in the carrier's text at the same place:

    - both are folded alike (lowercased, `-` as `_`): the hint words are ASCII (but for İ and
      the Kelvin sign, the only characters that lowercase to ASCII, which make a search fold
      text with `str.lower`), and the ASCII bytes of `text`'s fold are those of the carrier's
      there, folded either way;
    - the carrier's search may decode `\\uXXXX` and `\\/` escapes: none begins inside `text`
      (no backslash) and none that begins before it reaches into it (the `"` before it is no
      part of one);
    - a harmless marker is blanked in the carrier's fold: it is a `"…"` with no quote inside,
      so one that overlaps `text` (no quote in it, one before it) would be the quoted text
      itself, and `text` is longer than any marker (`VOUCH_FROM`);
    - a search that finds nothing reads all the text, in windows that overlap by the longest
      word; and where no key's word is found, no assignment is looked for in either.
    """
    if len(text) < VOUCH_FROM or '"' in text or "\\" in text or any(carrier.hints()):
        return False
    row = carrier.text
    at = row.find(text[:VOUCH_FROM])  # (its head looked for, then all of it compared: cheaper)
    return at > 0 and row[at - 1] == '"' and row.startswith(text, at)


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
