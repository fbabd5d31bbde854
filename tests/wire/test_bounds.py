"""Each bound of the delta decoder, reached through every public entry: one event at a time
(`DeltaDecoder.feed`), a list of them (`feed_all`), and bytes (`TurnDecoder.feed`, which takes
runs of bare frames in one step), whole and byte by byte. Each entry stops at the bound, says so
with exactly one decode error of the bound's kind, and decodes the same turn."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from convtap.wire import delta
from convtap.wire.bounded import Kept
from convtap.wire.delta import DeltaDecoder
from convtap.wire.events import DecodeError
from convtap.wire.sse import SSEParser
from convtap.wire.turn import TurnDecoder

Decoded = tuple[list[dict[str, Any]], list[DecodeError]]  # the messages, the errors as told


def message(mid: str) -> dict[str, Any]:
    return {"id": mid, "author": {"role": "assistant"}, "content": {"parts": [""]}}


def event(data: Any, name: str = "delta") -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


START = 'event: delta_encoding\ndata: "v1"\n\n'
APPEND = {"p": "/message/content/parts/0", "o": "append", "v": "ab"}


def long_string() -> str:
    """A string appended to by an append and bare frames (a run of them, then one alone)."""
    frames = "".join(event({"v": piece}) for piece in ["cde", "fgh", "ijk"])
    return START + event({"p": "", "o": "add", "v": {"message": message("m")}}) + event(
        APPEND
    ) + frames + ": ping\n\n" + event({"v": "lmn"})  # fmt: skip


def many_messages() -> str:
    return START + "".join(
        event({"p": "", "o": "add", "v": {"message": message(f"m{n}")}, "c": 0}) for n in range(6)
    ) + "".join(event({"message": message(f"s{n}")}, "message") for n in range(2))  # fmt: skip


def many_channels() -> str:
    return START + "".join(
        event({"p": "", "o": "add", "v": {"message": message(f"m{n}")}, "c": n}) for n in range(6)
    )


def by_events(text: str) -> Decoded:
    decoder = DeltaDecoder()
    told: list[DecodeError] = []
    for sse in SSEParser().feed(text.encode()):
        told += [e for e in decoder.feed(sse) if isinstance(e, DecodeError)]
    return list(decoder.messages.values()), told


def by_list(text: str) -> Decoded:
    decoder = DeltaDecoder()
    found = decoder.feed_all(SSEParser().feed(text.encode()))
    return list(decoder.messages.values()), [e for e in found if isinstance(e, DecodeError)]


def by_bytes(chunks: Callable[[bytes], list[bytes]]) -> Callable[[str], Decoded]:
    def decode(text: str) -> Decoded:
        turn = TurnDecoder()
        told: list[DecodeError] = []
        for chunk in chunks(text.encode()):
            told += [e for e in turn.feed(chunk).events if isinstance(e, DecodeError)]
        turn.end_leg()
        return turn.summary().messages, told

    return decode


ENTRIES = {
    "DeltaDecoder.feed": by_events,
    "DeltaDecoder.feed_all": by_list,
    "TurnDecoder.feed, whole": by_bytes(lambda body: [body]),
    "TurnDecoder.feed, byte by byte": by_bytes(
        lambda body: [body[i : i + 1] for i in range(len(body))]
    ),
}
BOUNDS = {  # the bound, its value here, the stream that passes it, the error it gives
    "string": ("MAX_STRING", 10, long_string, "value-too-large"),
    "messages": ("MAX_MESSAGES", 3, many_messages, "too-many-messages"),
    "channels": ("MAX_CHANNELS", 3, many_channels, "invalid-delta"),
}


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("bound", BOUNDS)
def test_every_entry_stops_at_every_bound(
    entry: str, bound: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, limit, make, kind = BOUNDS[bound]
    monkeypatch.setattr(delta, name, limit)
    messages, told = ENTRIES[entry](make())
    assert [e.kind for e in told] == [kind] * len(told) and told, told
    if bound == "string":
        (only,) = messages
        text = only["content"]["parts"][0]
        assert (
            text == "abcdefgh"
        )  # what fits; the frame that passes the bound and those after are not kept
        assert len(told) == 1
    elif bound == "messages":
        assert [m["id"] for m in messages] == ["m0", "m1", "m2"]
        assert len(told) == 1
    else:
        assert len(told) == 3  # each delta onto a channel past the bound is refused
    assert (messages, told) == by_events(make())  # every entry decodes the same turn


def test_kept_keeps_its_first_items_whether_appended_or_extended() -> None:
    one, many, heard = Kept[int](3), Kept[int](3), Kept[int](3, listener=None)
    for n in range(5):
        one.append(n)
    many.extend([0, 1])
    many.extend([2, 3, 4])
    seen: list[int] = []
    heard.listener = seen.append
    heard.extend(range(5))
    assert one == many == heard == [0, 1, 2]
    assert one.total == many.total == heard.total == 5 and many.dropped == 2
    assert seen == [0, 1, 2, 3, 4]
