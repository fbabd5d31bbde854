"""Where the text of each string a delta stream builds came from.

A stream builds a string out of many events: an `add` sets a message whose text has begun, bare
frames and `append`s (a `patch`'s sub-ops too) add to it, a `replace` sets it again, a `truncate`
cuts it, two channels grow theirs in turns. A reader that decides on a string's *value* and must
act on the raw events that carried it (the recorder's redaction: a secret is found in the value,
and cut out of each event that brought a character of it) needs to know, for every character,
the event and the place in that event's data it came from. `StringSources` says so. The delta
decoder tells it each op it applies, at the same keys, as it applies it, and it answers with
`StringEvent`s (docs/architecture.md, "Redaction by value"):

- `Began(string, channel, path)`: a string that may grow (its value set by an op, or appended to
  for the first time); `string` numbers it within the stream.
- `Piece(string, event, leaf, text)`: `text` is now at the string's end. It is the first
  `len(text)` characters of the string at `leaf` (a path into the event's data; the number for
  an appended scalar) of dispatched event `event` (-1: from no event this stream kept).
- `Pieces(string, event, leaf, texts)`: as many `Piece`s, of the events from `event` on, one
  each, all at `leaf` (a run of bare frames: most of a stream, told in one value).
- `Cut(string, length)`: a truncate kept its first `length` characters.
- `Ended(string)`: it is gone (set again, removed, a new delta state).

The strings of a delta the decoder refused (an invalid one: bare frames sent when no append is
open, say) are in the raw events but in no value: they are told as pieces of one string of their
own, `REFUSED`, in stream order, so that a secret cut across such frames is found all the same.
- `Rested(string)`: its message finished: no character of it is expected to follow.

It mirrors the decoded roots with a shadow that is only as deep as ops reach: a value set whole
is one node that remembers the event that set it, opened a level at a time when an op goes
inside; a string set or appended to is a node of its own. Arrays are mirrored with the inserts
and removals the decoder makes, so that an index names the same string before and after. A
message that arrives finished (an echo of the history) is at rest: its strings are not followed
unless something appends to one.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any, NamedTuple

Leaf = tuple[str | int, ...]
V: Leaf = ("v",)  # where a delta's own value sits in its data
DEPTH = 32  # levels of a value set whole that are mirrored at once (deeper: opened when reached)


class Began(NamedTuple):
    string: Hashable
    channel: int
    path: tuple[str, ...]  # the decoded JSON Pointer segments of its place


class Piece(NamedTuple):
    string: Hashable
    event: int
    leaf: Leaf
    text: str


class Pieces(NamedTuple):
    string: Hashable
    event: int  # the first's; the others are the events after it, one each
    leaf: Leaf
    texts: list[str]


class Cut(NamedTuple):
    string: Hashable
    length: int


class Ended(NamedTuple):
    string: Hashable


class Rested(NamedTuple):
    string: Hashable


StringEvent = Began | Piece | Pieces | Cut | Ended | Rested
_NOWHERE: tuple[int, Leaf] = (-1, ())
REFUSED = "refused"  # the string the strings of refused deltas make


class _Node:
    """One place of the decoded state: set whole by `source` (not opened yet), or mirrored by
    `kids`; `string` when it is a string being followed."""

    __slots__ = ("kids", "source", "string")

    def __init__(self, source: tuple[int, Leaf] = _NOWHERE) -> None:
        self.source = source
        self.kids: dict[str, _Node] | list[_Node] | None = None
        self.string: int | None = None


def _cloned(node: _Node) -> _Node:
    """A copy of a shadow's tree (each node has one parent: a tree), for a patch to undo to:
    what `copy.deepcopy` made, at a fifth of its cost (a patch per turn copied the history's
    shadow: 7 % of the recorder's time)."""
    copy = _Node(node.source)
    copy.string = node.string
    kids = node.kids
    if isinstance(kids, dict):
        copy.kids = {key: _cloned(kid) for key, kid in kids.items()}
    elif kids is not None:
        copy.kids = [_cloned(kid) for kid in kids]
    return copy


def finished_message(value: object) -> bool:
    """A message (or a root holding one) whose status says it is done: an echo of the history."""
    if isinstance(value, dict) and isinstance(value.get("message"), dict):
        value = value["message"]
    if not isinstance(value, dict) or "author" not in value:
        return False
    status = value.get("status")
    return isinstance(status, str) and status != "in_progress"


class StringSources:
    """The shadow of one delta state's roots, and what its ops did to strings (`take()`)."""

    def __init__(self) -> None:
        self.roots: dict[int, _Node] = {}
        self._out: list[StringEvent] = []
        self._live: dict[Hashable, None] = {}  # strings begun and not ended
        self._next = 0
        self.last: int | None = None  # the string the last op appended to or set

    def take(self) -> list[StringEvent]:
        """What the ops since the last `take` did."""
        out, self._out = self._out, []
        return out

    def pieces(self, pieces: Pieces) -> None:
        """Bare frames went on appending to a string (the decoder's short way for them)."""
        self._out.append(pieces)

    def refused(self, event: int, delta: dict[str, Any]) -> None:
        """Event `event`, a delta the decoder refused: its strings, as pieces of `REFUSED`."""
        if REFUSED not in self._live:
            self._live[REFUSED] = None
            self._out.append(Began(REFUSED, -1, ()))
        self._out += [Piece(REFUSED, event, leaf, text) for leaf, text in _leaves(delta, ())]

    def reset(self) -> None:
        """A fresh delta state: every string ends."""
        self._out += map(Ended, self._live)
        self._live.clear()
        self.roots.clear()

    # -- a patch applies whole or not at all --------------------------------------------------

    def mark(self, channel: int) -> tuple[_Node | None, int, dict[Hashable, None]]:
        root = self.roots.get(channel)
        return None if root is None else _cloned(root), len(self._out), dict(self._live)

    def undo(self, channel: int, mark: tuple[_Node | None, int, dict[Hashable, None]]) -> None:
        root, length, live = mark
        if root is None:
            self.roots.pop(channel, None)
        else:
            self.roots[channel] = root
        del self._out[length:]
        self._live = live

    # -- where an op applies ------------------------------------------------------------------

    def at(
        self, real_roots: dict[int, Any], holder: int, channel: int, segments: list[str],
        event: int, leaf: Leaf,
    ) -> Place:  # fmt: skip
        """The place `segments` names in channel `channel` (whose real root is `real_roots`'
        `holder`: a patch works on a copy), for an op of event `event` whose value sits at
        `leaf`; the real containers on the way (missing ones already made by the decoder) open
        the shadow's nodes."""
        real: Any = real_roots
        parent: dict[Any, _Node] | list[_Node] = self.roots
        real_keys: list[Any] = [holder, *segments]
        shadow_keys: list[Any] = [channel, *segments]
        for real_key, key in zip(real_keys[:-1], shadow_keys[:-1], strict=True):
            real_child = real[_index(real, real_key)] if isinstance(real, list) else real[real_key]
            parent = _opened(_child(parent, key, real), real_child)
            real = real_child
        self.last = None
        return Place(self, parent, real, real_keys[-1], shadow_keys[-1], channel,
                     tuple(segments), event, leaf)  # fmt: skip

    # -- what an op did (called by `Place`) ---------------------------------------------------

    def _begin(self, node: _Node, channel: int, path: tuple[str, ...], text: str) -> int:
        """`node` (whose value is `text`) is followed from now on: its first piece is where it
        was set."""
        number = self._next
        self._next += 1
        node.string = number
        self._live[number] = None
        event, leaf = node.source
        self._out += [Began(number, channel, path), Piece(number, event, leaf, text)]
        return number

    def _end(self, node: _Node | None) -> None:
        for string in _strings(node):
            if string in self._live:
                del self._live[string]
                self._out.append(Ended(string))

    def rest(self, channel: int) -> None:
        """Channel `channel`'s message finished: its strings are at rest."""
        self._out += map(Rested, _strings(self.roots.get(channel)))

    def _plant(
        self, value: Any, event: int, leaf: Leaf, channel: int, path: tuple[str, ...],
        depth: int = 0,
    ) -> _Node:  # fmt: skip
        """The node of a value set whole: its strings followed (a message set finished: not)."""
        node = _Node((event, leaf))
        if isinstance(value, str):
            self._begin(node, channel, path, value)
        elif isinstance(value, dict | list) and depth < DEPTH and not finished_message(value):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            kids = [self._plant(item, event, (*leaf, key), channel, (*path, str(key)), depth + 1)
                    for key, item in items]  # fmt: skip
            node.kids = dict(zip(value, kids, strict=True)) if isinstance(value, dict) else kids
        return node


class Place:
    """Where one op applies in the shadow: the parent's nodes and the key (an array index
    resolved as the decoder resolves it), with the event and leaf of the op's value."""

    __slots__ = ("channel", "event", "key", "kids", "leaf", "path", "real", "real_key",
                 "sources")  # fmt: skip

    def __init__(
        self, sources: StringSources, kids: dict[Any, _Node] | list[_Node], real: Any,
        real_key: Any, key: Any, channel: int, path: tuple[str, ...], event: int, leaf: Leaf,
    ) -> None:  # fmt: skip
        self.sources, self.kids, self.real, self.real_key, self.key = (
            sources, kids, real, real_key, key
        )  # fmt: skip
        self.channel, self.path, self.event, self.leaf = channel, path, event, leaf

    def _index(self) -> Any:
        if isinstance(self.kids, list):
            return len(self.kids) if self.key == "-" else int(self.key)
        return self.key

    def set(self, value: Any) -> None:
        kids, key = self.kids, self._index()
        node = self.sources._plant(value, self.event, self.leaf, self.channel, self.path)
        if isinstance(kids, list):
            if key == len(kids):
                kids.append(node)
            else:
                self.sources._end(kids[key])
                kids[key] = node
        else:
            self.sources._end(kids.get(key))
            kids[key] = node
        self.sources.last = node.string

    def insert(self, value: Any) -> None:
        kids = self.kids
        assert isinstance(kids, list)
        node = self.sources._plant(value, self.event, self.leaf, self.channel, self.path)
        kids.insert(self._index(), node)
        self.sources.last = node.string

    def remove(self) -> None:
        kids = self.kids
        node = kids.pop(self._index()) if isinstance(kids, list) else kids.pop(self.key, None)
        self.sources._end(node)

    def truncate_text(self, length: int) -> None:
        node = self._node()
        if node is not None and node.string is not None:
            self.sources._out.append(Cut(node.string, length))

    def truncate_items(self, count: int) -> None:
        node = self._node()
        if node is not None and isinstance(node.kids, list):
            for gone in node.kids[count:]:
                self.sources._end(gone)
            del node.kids[count:]

    def append_text(self, before: str, text: str) -> None:
        """`text` appended onto the string whose value was `before`."""
        node = self._node()
        if node is None:  # (opened from a source that did not hold it: cannot be, but safe)
            node = self._put(_Node())
        string = node.string
        if string is None:
            string = self.sources._begin(node, self.channel, self.path, before)
        self.sources._out.append(Piece(string, self.event, self.leaf, text))
        self.sources.last = string

    def extend(self, items: list[Any]) -> None:
        node = self._node()
        if node is not None:
            kids = _opened(node, self._real_value())
            assert isinstance(kids, list)
            start = len(kids)
            for n, item in enumerate(items):
                path = (*self.path, str(start + n))
                kids.append(self.sources._plant(item, self.event, (*self.leaf, n), self.channel,
                                                path))  # fmt: skip

    def push(self, item: Any) -> None:
        node = self._node()
        if node is not None:
            kids = _opened(node, self._real_value())
            assert isinstance(kids, list)
            path = (*self.path, str(len(kids)))
            kids.append(self.sources._plant(item, self.event, self.leaf, self.channel, path))

    def merge(self, value: dict[str, Any]) -> None:
        node = self._node()
        if node is not None:
            kids = _opened(node, self._real_value())
            assert isinstance(kids, dict)
            for key, item in value.items():
                self.sources._end(kids.get(key))
                kids[key] = self.sources._plant(item, self.event, (*self.leaf, key),
                                                self.channel, (*self.path, key))  # fmt: skip

    def _node(self) -> _Node | None:
        kids, key = self.kids, self._index()
        if isinstance(kids, list):
            return kids[key] if 0 <= key < len(kids) else None
        return kids.get(key)

    def _put(self, node: _Node) -> _Node:
        kids, key = self.kids, self._index()
        if isinstance(kids, list):
            kids.append(node)
        else:
            kids[key] = node
        return node

    def _real_value(self) -> Any:
        real, key = self.real, self.real_key
        if isinstance(real, list):
            return real[_index(real, key)]
        return real.get(key) if isinstance(real, dict) else None


def _index(real: list[Any], key: Any) -> int:
    return len(real) - 1 if key == "-" else int(key)


def _child(parent: dict[Any, _Node] | list[_Node], key: Any, real: Any) -> _Node:
    """The node at `key` of an opened parent, made when the decoder just made its container."""
    if isinstance(parent, list):
        index = _index(real, key) if isinstance(real, list) else int(key)
        while len(parent) <= index:  # (a container made by rule 5: only ever one)
            parent.append(_Node())
        return parent[index]
    node = parent.get(key)
    if node is None:
        node = parent[key] = _Node()
    return node


def _opened(node: _Node, real: Any) -> dict[Any, _Node] | list[_Node]:
    """A node's kids, mirrored from the real container when it was set whole."""
    if node.kids is None or isinstance(node.kids, list) != isinstance(real, list):
        event, leaf = node.source
        if isinstance(real, list):
            node.kids = [_Node((event, (*leaf, n)) if event >= 0 else _NOWHERE)
                         for n in range(len(real))]  # fmt: skip
        else:
            keys = real if isinstance(real, dict) else ()
            node.kids = {k: _Node((event, (*leaf, k)) if event >= 0 else _NOWHERE) for k in keys}
    return node.kids


def _strings(node: _Node | None) -> Iterator[int]:
    """The strings followed at and under a node."""
    stack = [node] if node is not None else []
    while stack:
        current = stack.pop()
        if current.string is not None:
            yield current.string
        kids = current.kids
        if kids:
            stack.extend(kids.values() if isinstance(kids, dict) else kids)


def _leaves(value: Any, leaf: Leaf, depth: int = 0) -> Iterator[tuple[Leaf, str]]:
    """The strings in a value, with where they sit (`DEPTH` levels deep)."""
    if isinstance(value, str):
        yield leaf, value
    elif isinstance(value, dict | list) and depth < DEPTH:
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            yield from _leaves(item, (*leaf, key), depth + 1)
