"""The short path for runs of bare frames (`SSEParser.read(runs=True)`, `DeltaDecoder`'s `BareRun`s)
gives exactly what the event-by-event path gives, for any stream and any chunking."""

from __future__ import annotations

import json
from typing import Any

import pytest
from convtap.wire import delta
from convtap.wire.delta import DeltaDecoder
from convtap.wire.events import DecodeError
from convtap.wire.provenance import Piece, Pieces, StringEvent
from convtap.wire.sse import BareRun, Frames, SSEEvent, SSEParser
from convtap.wire.turn import TurnDecoder
from hypothesis import given, settings
from hypothesis import strategies as st

MESSAGE = {"id": "m", "author": {"role": "assistant"}, "content": {"parts": [""]}}
START = [
    'event: delta_encoding\ndata: "v1"\n\n',
    "event: delta\ndata: " + json.dumps({"p": "", "o": "add", "v": {"message": MESSAGE}}) + "\n\n",
    'event: delta\ndata: {"p": "/message/content/parts/0", "o": "append", "v": "a"}\n\n',
]


def bare(value: str, ascii_only: bool, compact: bool) -> str:
    body = json.dumps(value, ensure_ascii=ascii_only)
    return f'event: delta\ndata: {{"v":{"" if compact else " "}{body}}}\n\n'


# Bodies a bare frame's string may have that are not all valid JSON strings, or not the plain shape.
ODD = [
    r'{"v": "\x"}', r'{"v": "\ud800"}', r'{"v": "\udc00\ud800"}', '{"v": "a\tb"}', r'{"v": "\""}',
    r'{"v": "\\"}', r'{"v": "a\\"}', '{"v": "a"} ', '{"v": "a", "c": 1}', '{"v": "a"', '{"v": 1}',
    '{ "v": "a"}', r'{"v": "\u00e9\/"}', '{"v": "🌿"}', '{"v":"a"}', '{"v": ""}',
]  # fmt: skip

item = st.one_of(
    st.builds(bare, st.text(max_size=12), st.booleans(), st.booleans()),
    st.sampled_from(ODD).map(lambda data: f"event: delta\ndata: {data}\n\n"),
    st.sampled_from(
        [
            ": ping - 2026-11-30\n\n",
            "\n",
            'data: {"type": "message_marker"}\n\n',
            'event: delta\ndata: {"p": "/message/content/parts/0", "o": "append", "v": "x"}\n\n',
            'event: delta\ndata: {"p": "/message/status", "o": "replace", "v": "done"}\n\n',
            'event: delta\nevent: delta\ndata: {"v": "twice named"}\n\n',
            'data: {"v": "a message, not a delta"}\n\n',
            'event: delta\r\ndata: {"v": "crlf"}\r\n\r\n',
            'event: delta\ndata: {"v": "one"}\ndata: {"v": "two lines"}\n\n',
            "data: \udcff\n\n",  # the byte 0xff: not UTF-8
        ]
    ),
)


def stream(items: list[str]) -> bytes:
    return "".join([*START, *items]).encode("utf-8", "surrogateescape")


def cut(body: bytes, cuts: list[int]) -> list[bytes]:
    cuts = sorted(c % (len(body) + 1) for c in cuts)
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


@settings(max_examples=400, deadline=None)
@given(st.lists(item, max_size=40), st.lists(st.integers(0, 10**6), max_size=8))
def test_runs_frame_the_same_events(items: list[str], cuts: list[int]) -> None:
    one, many = SSEParser(), SSEParser()
    for chunk in cut(stream(items), cuts):
        expected = one.read(chunk)
        got = many.read(chunk, runs=True)
        assert list(got.events) == expected.events
        assert len(got.events) == len(expected.events)
        assert got._replace(events=[], unread_text=None) == expected._replace(
            events=[], unread_text=None
        )
        if got.unread_text is not None and expected.unread_text is not None:  # both know them
            assert lines_of(got.unread_text) == lines_of(expected.unread_text)  # blanks aside
    assert many.close() == one.close()


def lines_of(text: str | None) -> list[str] | None:
    return None if text is None else [line for line in text.split("\n") if line]


def one_by_one(body: bytes) -> tuple[DeltaDecoder, list[StringEvent]]:
    """The reference: every event through `DeltaDecoder.feed` alone (and the bytes that are
    not UTF-8 reported as `TurnDecoder` does)."""
    parser, decoder = SSEParser(), DeltaDecoder(sources=True)
    strings: list[StringEvent] = []
    block = parser.read(body)
    for event in block.events:
        decoder.feed_all([event])
        strings += decoder.strings()
    for position in block.bad_utf8:
        decoder.record_error(position, "invalid-utf8", "bytes that are not UTF-8 (read as U+FFFD)")
    return decoder, strings


def by_runs(chunks: list[bytes]) -> tuple[dict[str, Any], list[StringEvent]]:
    turn = TurnDecoder(sources=True)
    strings: list[StringEvent] = []
    errors: list[DecodeError] = []
    for chunk in chunks:
        decoded = turn.feed(chunk)
        strings += decoded.strings
        errors += [e for e in decoded.events if isinstance(e, DecodeError)]
    summary = turn.summary()
    assert sorted(errors) == sorted(summary.errors)  # every error is told as it happens
    return (
        {
            "messages": summary.messages,
            "errors": sorted(summary.errors),
            "event_count": summary.event_count,
            "done": summary.done,
        },
        strings,
    )


def state(decoder: DeltaDecoder) -> dict[str, Any]:
    return {
        "messages": list(decoder.messages.values()),
        "errors": sorted(decoder.errors),  # a chunk's invalid UTF-8 is told after its events
        "event_count": decoder.event_count,
        "done": decoder.done,
    }


@settings(max_examples=400, deadline=None)
@given(st.lists(item, max_size=40), st.lists(st.integers(0, 10**6), max_size=8))
def test_runs_decode_to_the_same_turn(items: list[str], cuts: list[int]) -> None:
    body = stream(items)
    expected, strings = one_by_one(body)
    got, got_strings = by_runs(cut(body, cuts))
    assert got == state(expected)
    # where each piece came from, however the runs went
    assert one_each(got_strings) == one_each(strings)


def one_each(strings: list[StringEvent]) -> list[StringEvent]:
    """Runs of pieces told one piece at a time."""
    out: list[StringEvent] = []
    for event in strings:
        if isinstance(event, Pieces):
            out += [Piece(event.string, event.event + n, event.leaf, text)
                    for n, text in enumerate(event.texts)]  # fmt: skip
        else:
            out.append(event)
    return out


def test_a_block_of_bare_frames_is_one_run_parsed_in_one_call() -> None:
    values = ["Olá", ' "quoted"\n', "\\", "🌿", "\u2028"]
    text = "".join(bare(v, ascii_only, False) for v in values for ascii_only in (True, False))
    frames = SSEParser().read(text.encode(), runs=True).events
    assert isinstance(frames, Frames)
    [run] = frames.parts
    assert isinstance(run, BareRun)
    assert json.loads(run.array()) == [v for v in values for _ in (1, 2)]
    assert len(frames) == 10
    assert frames[0] == SSEEvent("delta", json.dumps({"v": "Olá"}))


def test_a_run_is_only_where_an_event_starts() -> None:
    text = 'event: x\ndata: 1\nevent: delta\ndata: {"v": "not a run"}\n\n' + bare(
        "run", False, False
    )
    frames = SSEParser().read(text.encode(), runs=True).events
    assert isinstance(frames, Frames)
    assert [type(p) for p in frames.parts] == [list, BareRun]
    assert list(frames) == [
        SSEEvent("delta", '1\n{"v": "not a run"}'),  # one event of two data lines
        SSEEvent("delta", '{"v": "run"}'),
    ]


@pytest.mark.parametrize("limit", [5, 6, 7, 40])
def test_a_run_past_the_string_bound_is_an_error_as_frame_by_frame(
    limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delta, "MAX_STRING", limit)
    body = stream([bare("bcd", False, False), bare("efg", False, False), bare("h", False, False)])
    assert by_runs([body])[0] == state(one_by_one(body)[0])


def test_a_run_that_continues_an_append_is_taken_in_one_step() -> None:
    turn = TurnDecoder()
    turn.feed(stream([]))
    run = "".join(bare(f"-{n}", False, False) for n in range(50)).encode()
    runs: list[int] = []
    original = turn._decoder._continue_run

    def counted(part: BareRun) -> Any:
        taken = original(part)
        runs.append(part.frames if taken is not None else -1)
        return taken

    turn._decoder._continue_run = counted  # type: ignore[method-assign]
    turn.feed(run + b": ping\n\n" + run)
    assert runs == [50, 50]
    summary = turn.summary()
    assert summary.messages[0]["content"]["parts"] == [
        "a" + "".join(f"-{n}" for n in range(50)) * 2
    ]
    assert summary.event_count == 3 + 100


TYPED = [
    'data: {"type": "message_marker", "marker": "cot_token", "event": "first"}\n\n',
    'data: {"type": "title_generation", "title": "t", "conversation_id": "c1"}\n\n',
    'data: {"type": "message_marker", "conversation_id": "c2"}\n\n',
    'data: {"type": "message_marker", "conversation_id": 7}\n\n',
    'data: {"type": "message_stream_complete", "conversation_id": "c1"}\n\n',
    'data: {"type": "stream_handoff", "options": []}\n\n',
    'data: {"type": 3}\n\n',
    'data: {"no": "type"}\n\n',
    'data: {"message": ' + json.dumps(MESSAGE) + "}\n\n",
    'data: {"type": "x"\n\n',  # not JSON
    'data: {"type": "x"}, {"type": "y"}\n\n',  # two values: not JSON alone
    'data: {"type": "a", "v": [\n\n',
    "data: {}]}\n\n",
    "data: [DONE]\n\n",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TYPED), max_size=30))
def test_runs_of_typed_events_decode_as_each_event_alone(items: list[str]) -> None:
    body = stream(items)
    reference = DeltaDecoder()
    found = []
    for event in SSEParser().read(body).events:
        found += reference._feed_one(event)  # the long way: `_object` for each one
    turn = TurnDecoder()
    got = turn.feed(body).events
    decoder = turn._decoder
    assert [type(e) for e in got] == [type(e) for e in found]
    assert got == found
    assert list(decoder.events) == list(reference.events)
    assert decoder.conversation_id == reference.conversation_id
    assert (decoder.event_index, decoder.event_count) == (
        reference.event_index,
        reference.event_count,
    )
    assert state(decoder) == state(reference)
