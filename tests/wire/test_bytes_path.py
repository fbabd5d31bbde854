"""The decoder reads a valid UTF-8 block's data as the bytes that came (`EventRun.datas`,
`BareRun.array`: orjson parses them with no encoding again): for text of multi-byte UTF-8
characters (two, three and four bytes), cut anywhere, even inside a character, that gives what
the same events give fed one by one as text."""

from __future__ import annotations

import json

from convtap.wire.delta import DeltaDecoder
from convtap.wire.provenance import StringEvent
from convtap.wire.sse import BareRun, EventRun, Frames, SSEEvent, SSEParser
from convtap.wire.turn import TurnDecoder
from hypothesis import given, settings
from hypothesis import strategies as st

WIDE = 'é€\u2028🌿a"\\\n'  # 2, 3, 3 and 4 bytes of UTF-8, and what JSON escapes
MESSAGE = {"id": "m", "author": {"role": "assistant"}, "content": {"parts": ["Olá 🌿"]}}


def delta(value: object) -> str:
    return f"event: delta\ndata: {json.dumps(value, ensure_ascii=False)}\n\n"


START = [
    'event: delta_encoding\ndata: "v1"\n\n',
    delta({"p": "", "o": "add", "v": {"message": MESSAGE, "conversation_id": "c-é"}}),
    delta({"p": "/message/content/parts/0", "o": "append", "v": "€"}),
]
ITEMS = [
    *(delta({"v": text}) for text in ("é", "€ e", "🌿🌿", "\u2028", 'a"b\\c', "Olá, 世界")),
    'event: delta\ndata: {"v":"ção"}\n\n',
    'event: delta\ndata: {"v": "\\u00e9\\ud83c\\udf3f"}\n\n',  # escaped, a pair of surrogates
    'event: delta\ndata: {"v": "\\ud800 só"}\n\n',  # a lone surrogate escape: not a run's
    'data: {"type": "message_marker", "marker": "cot_token", "título": "é"}\n\n',
    'data: {"type": "title_generation", "title": "Olá 🌿", "conversation_id": "c-é"}\n\n',
    delta({"p": "/message/metadata", "o": "append", "v": {"nota": "€"}}),
    'event: delta\ndata: {"v": "não fecha\n\n',  # not JSON
    'event: delta\ndata: "só texto"\n\n',  # a delta that is not an object
    'event: título\ndata: "é"\n\n',  # an event of its own name, not an object
    ": ping 🌿\n\n",
    "data: [DONE]\n\n",
]
item = st.one_of(
    st.sampled_from(ITEMS),
    st.builds(lambda text: delta({"v": text}), st.text(alphabet=WIDE, max_size=6)),
)


def one_by_one(body: bytes) -> tuple[dict[str, object], list[StringEvent]]:
    """The text path: each event, its data as text, fed on its own."""
    decoder = DeltaDecoder(sources=True)
    strings: list[StringEvent] = []
    for event in SSEParser().read(body).events:
        assert isinstance(event.data, str)
        decoder.feed_all([event])
        strings += decoder.strings()
    return state(decoder), strings


def by_bytes(chunks: list[bytes]) -> tuple[dict[str, object], list[StringEvent]]:
    """The bytes path: the chunks as a turn's decoder reads them."""
    turn = TurnDecoder(sources=True)
    strings: list[StringEvent] = []
    for chunk in chunks:
        strings += turn.feed(chunk).strings
    return state(turn._decoder), strings


def state(decoder: DeltaDecoder) -> dict[str, object]:
    return {
        "messages": list(decoder.messages.values()),
        "events": list(decoder.events),
        "other_events": list(decoder.other_events),
        "errors": sorted(decoder.errors),
        "counts": (decoder.event_index, decoder.event_count, decoder.done),
        "conversation": decoder.conversation_id,
    }


def pieces(strings: list[StringEvent]) -> list[tuple[int, str]]:
    """The text each event brought to strings, whether told one piece or a run at a time."""
    out: list[tuple[int, str]] = []
    for event in strings:
        texts = getattr(event, "texts", None)
        if texts is not None:
            out += [(event.event + n, text) for n, text in enumerate(texts)]  # type: ignore[attr-defined]
        elif hasattr(event, "text"):
            out.append((event.event, event.text))  # type: ignore[attr-defined]
    return out


def test_every_cut_of_a_wide_stream_decodes_as_its_text_does() -> None:
    body = "".join([*START, *ITEMS[:12], ": ping\n\n", *ITEMS[:8]]).encode()
    expected, strings = one_by_one(body)
    assert "Olá, 世界" in str(expected["messages"])  # the wide text reached the message
    for at in range(len(body) + 1):
        got, got_strings = by_bytes([body[:at], body[at:]])
        assert got == expected, at
        assert pieces(got_strings) == pieces(strings), at


@settings(max_examples=300, deadline=None)
@given(st.lists(item, max_size=30), st.lists(st.integers(0, 10**6), max_size=6))
def test_wide_streams_decode_the_same_by_bytes_and_by_text(
    items: list[str], cuts: list[int]
) -> None:
    body = "".join([*START, *items]).encode()
    at = sorted(c % (len(body) + 1) for c in cuts)
    chunks = [body[a:b] for a, b in zip([0, *at], [*at, len(body)], strict=True)]
    got, got_strings = by_bytes(chunks)
    expected, strings = one_by_one(body)
    assert got == expected
    assert pieces(got_strings) == pieces(strings)


def test_a_valid_block_hands_the_decoder_its_bytes() -> None:
    body = "".join([*START, *ITEMS[:6], ITEMS[9], ITEMS[10]]).encode()
    frames = SSEParser().read(body, runs=True).events
    assert isinstance(frames, Frames)
    runs = [p for p in frames.parts if isinstance(p, BareRun)]
    event_runs = [p for p in frames.parts if isinstance(p, EventRun)]
    assert runs and event_runs
    assert all(type(data) is bytes for p in event_runs for data in p.datas)
    assert json.loads(runs[0].array()) == ["é", "€ e", "🌿🌿", "\u2028", 'a"b\\c', "Olá, 世界"]
    assert list(frames) == SSEParser().read(body).events  # the same events, as text
    assert frames[3] == SSEEvent("delta", json.dumps({"v": "é"}, ensure_ascii=False))
