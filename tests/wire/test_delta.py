"""convtap.wire.delta: docs/protocol.md, "Delta encoding v1", rules 1-9, one fixture per rule."""

from __future__ import annotations

import json
from typing import Any

import pytest
from convtap.wire.delta import DeltaDecoder
from convtap.wire.provenance import Began, Piece
from convtap.wire.sse import SSEEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.wire.test_bare_runs import one_each


def d(**fields: Any) -> SSEEvent:
    return SSEEvent("delta", json.dumps(fields))


def typed(obj: Any) -> SSEEvent:
    return SSEEvent("message", json.dumps(obj))


def decode(*events: SSEEvent) -> DeltaDecoder:
    decoder = DeltaDecoder()
    for event in events:
        decoder.feed(event)
    return decoder


def root(*events: SSEEvent, channel: int = 0) -> Any:
    decoder = decode(*events)
    decoder.messages  # noqa: B018 - materialises pending text
    return decoder._roots.get(channel)


def msg(mid: str = "m1", **extra: Any) -> dict[str, Any]:
    return {"id": mid, "author": {"role": "assistant"}, "content": {"parts": [""]}, **extra}


ENC = SSEEvent("delta_encoding", '"v1"')


# -- rule 1: framing of delta and non-delta events ------------------------------------------


def test_only_delta_events_are_deltas() -> None:
    decoder = decode(ENC, SSEEvent("message", json.dumps({"p": "/x", "o": "add", "v": 1})))
    assert decoder._roots == {}
    assert decoder.other_events == [{"p": "/x", "o": "add", "v": 1}]
    assert decoder.encoding == "v1"


def test_unknown_encoding_is_an_error() -> None:
    decoder = decode(SSEEvent("delta_encoding", '"v2"'))
    assert [(e.kind, e.event_index) for e in decoder.errors] == [("unknown-encoding", 0)]
    assert decoder.encoding is None


def test_new_delta_encoding_starts_a_fresh_decoder() -> None:
    decoder = decode(ENC, d(p="/a", o="add", v=1), ENC, d(v={"b": 2}))
    assert decoder._roots == {0: {"b": 2}}  # record reset to {c: 0, o: add, p: ""}


# -- rule 2: sticky c/p/o, v never copied ---------------------------------------------------


def test_sticky_record_and_bare_continuation_frames() -> None:
    r = root(
        d(p="", o="add", v={"message": msg()}),
        d(p="/message/content/parts/0", o="append", v="Hel"),
        d(v="lo"),
        d(v=", "),
        typed({"type": "message_marker", "marker": "cot_token"}),  # does not reset the record
        d(v="world"),
    )
    assert r["message"]["content"]["parts"] == ["Hello, world"]


def test_record_starts_as_add_on_empty_path_of_channel_0() -> None:
    assert root(d(v={"x": 1})) == {"x": 1}


def test_one_record_is_shared_by_all_channels() -> None:
    decoder = decode(
        d(p="", o="add", v={"t": "a"}, c=0),
        d(v={"t": "b"}, c=1),  # o and p inherited from the channel-0 delta
        d(p="/t", o="append", v="+"),  # c inherited: 1
        d(v="!", c=0),  # p and o inherited, channel switched back
    )
    assert decoder._roots == {0: {"t": "a!"}, 1: {"t": "b+"}}


def test_v_is_never_copied() -> None:
    decoder = decode(d(p="/k", o="add", v=1), d(p="/j", o="add"), d(p="/k", o="remove"))
    assert decoder._roots == {0: {}}  # remove needs no v
    assert [(e.event_index, e.kind) for e in decoder.errors] == [(1, "invalid-delta")]


# -- rule 3: roots and messages -------------------------------------------------------------


def test_history_echo_roots_are_messages_in_order_of_first_appearance() -> None:
    decoder = decode(
        ENC,
        d(p="", o="add", v={"message": msg("sys", status="finished_successfully")}, c=0),
        d(v={"message": msg("user")}, c=1),
        d(v={"message": msg("a1", status="in_progress")}, c=2),
        d(p="/message/status", o="replace", v="finished_successfully", c=0),
        d(v={"message": msg("a2")}, p="", o="add", c=2),  # a new message on a used channel
    )
    assert list(decoder.messages) == ["sys", "user", "a1", "a2"]
    assert decoder.messages["a1"]["status"] == "in_progress"  # kept as it was last seen


def test_a_root_that_is_not_a_message_is_not_listed() -> None:
    decoder = decode(d(v={"message": {"id": "x", "content": {}}}), d(v={"error": "x"}, c=1))
    assert decoder.messages == {}


# -- rule 4: the six ops on strings, arrays and objects -------------------------------------


@pytest.mark.parametrize(
    ("start", "delta", "expected"),
    [
        ({"a": [1, 3]}, {"p": "/a/1", "o": "add", "v": 2}, {"a": [1, 2, 3]}),  # add inserts
        ({"a": [1]}, {"p": "/a/-", "o": "add", "v": 2}, {"a": [1, 2]}),
        ({"a": [1]}, {"p": "/a/1", "o": "add", "v": 2}, {"a": [1, 2]}),
        ({"a": 1}, {"p": "/a", "o": "add", "v": 2}, {"a": 2}),  # add on a key sets
        ({"a": 1}, {"p": "", "o": "add", "v": {"b": 1}}, {"b": 1}),  # empty path: the root
        ({"a": [1, 2]}, {"p": "/a/0", "o": "replace", "v": 9}, {"a": [9, 2]}),
        ({"a": 1}, {"p": "/b", "o": "replace", "v": 2}, {"a": 1, "b": 2}),
        ({"a": 1, "b": 2}, {"p": "/a", "o": "remove"}, {"b": 2}),
        ({"a": [1, 2, 3]}, {"p": "/a/1", "o": "remove"}, {"a": [1, 3]}),  # splice out
        ({"s": "ab"}, {"p": "/s", "o": "append", "v": "cd"}, {"s": "abcd"}),
        ({"s": "n="}, {"p": "/s", "o": "append", "v": 1}, {"s": "n=1"}),  # v as text
        ({"a": [1]}, {"p": "/a", "o": "append", "v": [2, [3]]}, {"a": [1, 2, [3]]}),  # one level
        ({"a": [1]}, {"p": "/a", "o": "append", "v": 2}, {"a": [1, 2]}),  # a scalar is pushed
        (
            {"m": {"x": 1, "y": 1}},
            {"p": "/m", "o": "append", "v": {"y": 2}},
            {"m": {"x": 1, "y": 2}},
        ),
        ({}, {"p": "/n", "o": "append", "v": "x"}, {"n": "x"}),  # onto missing: set
        ({"n": None}, {"p": "/n", "o": "append", "v": [1]}, {"n": [1]}),  # onto null: set
        ({"s": "abcdef"}, {"p": "/s", "o": "truncate", "v": 3}, {"s": "abc"}),
        ({"a": [1, 2, 3]}, {"p": "/a", "o": "truncate", "v": 1}, {"a": [1]}),
        ({"s": "a🌿b"}, {"p": "/s", "o": "truncate", "v": 3}, {"s": "a🌿"}),  # UTF-16 units
        ({"s": "ab"}, {"p": "/s", "o": "truncate", "v": 10}, {"s": "ab"}),
    ],
)
def test_ops(start: dict[str, Any], delta: dict[str, Any], expected: dict[str, Any]) -> None:
    decoder = decode(d(p="", o="add", v=start), d(**delta))
    assert decoder.errors == []
    assert root() is None
    decoder.messages  # noqa: B018
    assert decoder._roots[0] == expected


def test_patch_applies_sub_ops_in_order_relative_to_its_path() -> None:
    r = root(
        d(p="", o="add", v={"message": msg(status="in_progress", metadata={"a": 1})}),
        d(p="/message/content/parts/0", o="append", v="hi"),
        d(v=" there"),
        d(
            p="",
            o="patch",
            v=[
                {"p": "/message/content/parts/0", "o": "append", "v": "!"},
                {"p": "/message/status", "o": "replace", "v": "finished_successfully"},
                {"p": "/message/metadata", "o": "append", "v": {"b": 2}},
            ],
        ),
        d(
            p="/message",
            o="patch",
            v=[
                {"p": "/end_turn", "o": "add", "v": True},
                {"p": "/recipient", "o": "add", "v": "all"},
            ],
        ),
    )
    assert r["message"]["content"]["parts"] == ["hi there!"]
    assert r["message"]["status"] == "finished_successfully"
    assert r["message"]["metadata"] == {"a": 1, "b": 2}
    assert r["message"]["end_turn"] is True and r["message"]["recipient"] == "all"


@pytest.mark.parametrize(
    "bad_sub_ops",
    [
        [{"p": "/a", "o": "replace", "v": 2}, {"o": "replace", "v": 1}],  # no p
        [{"p": "/a", "o": "replace", "v": 2}, {"p": "/b", "v": 1}],  # no o
        [{"p": "/a", "o": "replace", "v": 2}, {"p": "/a/x/y", "o": "add", "v": 1}],  # bad path
        [{"p": "/a", "o": "replace", "v": 2}, {"p": "/b", "o": "shuffle", "v": 1}],
        "not a list",
    ],
)
def test_patch_is_atomic(bad_sub_ops: Any) -> None:
    decoder = decode(d(p="", o="add", v={"a": 1}), d(p="", o="patch", v=bad_sub_ops))
    assert decoder._roots == {0: {"a": 1}}
    assert [(e.event_index, e.kind) for e in decoder.errors] == [(1, "invalid-delta")]


# -- rule 5: JSON Pointer --------------------------------------------------------------------


def test_pointer_escapes_decode_tilde_one_before_tilde_zero() -> None:
    r = root(d(p="/a~1b", o="add", v=1), d(p="/c~0d", o="add", v=2), d(p="/e~01", o="add", v=3))
    assert r == {"a/b": 1, "c~d": 2, "e~1": 3}


def test_missing_containers_are_created() -> None:
    r = root(d(p="/message/content/parts/0", o="append", v="x"), d(p="/a/-/b", o="add", v=1))
    assert r == {"message": {"content": {"parts": ["x"]}}, "a": [{"b": 1}]}


def test_all_digit_segment_is_a_key_on_an_object() -> None:
    assert root(d(p="", o="add", v={"m": {}}), d(p="/m/12", o="add", v=1)) == {"m": {"12": 1}}


@pytest.mark.parametrize(
    "delta",
    [
        {"p": "a", "o": "add", "v": 1},  # not a pointer
        {"p": "/s/x", "o": "add", "v": 1},  # through a string
        {"p": "/a/x", "o": "add", "v": 1},  # a non-index on an array
        {"p": "/a/5", "o": "add", "v": 1},  # past the end
        {"p": "/a/3", "o": "replace", "v": 1},
        {"p": "/a/-", "o": "remove"},
        {"p": "/nope", "o": "remove"},
        {"p": "/new/3/x", "o": "add", "v": 1},  # a new array has no index 3
        {"p": "/nope/x", "o": "truncate", "v": 1},
        {"p": "/s", "o": "truncate", "v": -1},
        {"p": "/n", "o": "truncate", "v": 1},
        {"p": "/n", "o": "append", "v": 1},  # onto a number
        {"p": "/s", "o": "append", "v": {"x": 1}},
        {"p": "/m", "o": "append", "v": "x"},
        {"p": "/s", "o": "frobnicate", "v": 1},
        {"p": "/s", "o": "add", "v": 1, "c": "zero"},
        {"p": 3, "o": "add", "v": 1},
    ],
)
def test_invalid_deltas_leave_the_state_and_record_unchanged(delta: dict[str, Any]) -> None:
    start = {"s": "str", "a": [1, 2], "n": 5, "m": {"k": 1}}
    decoder = decode(
        d(p="", o="add", v=start),
        d(p="/s", o="append", v="ing"),
        SSEEvent("delta", json.dumps(delta)),
        d(v="!"),  # the record is still the append on /s
    )
    assert [(e.event_index, e.kind) for e in decoder.errors] == [(2, "invalid-delta")]
    decoder.messages  # noqa: B018
    assert decoder._roots[0] == {**start, "s": "string!"}


# -- rule 6 and bad input --------------------------------------------------------------------


def test_malformed_json_is_recorded_and_decoding_goes_on() -> None:
    decoder = decode(
        d(p="/t", o="append", v="a"),
        SSEEvent("delta", '{"v": "b'),
        SSEEvent("message", "{not json"),
        SSEEvent("delta", "[1]"),
        SSEEvent("message", '"a string"'),
        SSEEvent("message", '{"x": NaN}'),
        d(v="c"),
    )
    assert [(e.event_index, e.kind) for e in decoder.errors] == [
        (1, "malformed-json"),
        (2, "malformed-json"),
        (3, "invalid-delta"),
        (4, "unexpected-value"),
        (5, "malformed-json"),
    ]
    assert root(d(p="/t", o="append", v="a"), d(v="c")) == {"t": "ac"}
    decoder.messages  # noqa: B018
    assert decoder._roots[0] == {"t": "ac"}


def test_json_beyond_orjson_is_still_json() -> None:
    decoder = decode(typed({"type": "x", "big": 2**70}), SSEEvent("message", '{"s": "\\ud83d"}'))
    assert decoder.errors == []
    assert decoder.events[0]["big"] == 2**70
    assert decoder.other_events == [{"s": "\ud83d"}]


# -- rule 7: typed and untyped non-delta events ----------------------------------------------


def test_typed_events_input_message_and_stream_complete() -> None:
    user = msg("u1") | {"author": {"role": "user"}}
    decoder = decode(
        typed(
            {
                "type": "resume_conversation_token",
                "kind": "conduit",
                "token": "t",
                "conversation_id": "c1",
            }
        ),
        typed({"type": "input_message", "input_message": user, "conversation_id": "c1"}),
        typed({"type": "message_stream_complete", "conversation_id": "c2"}),
        typed({"error": "boom", "error_code": "x", "conversation_id": "c2"}),
        typed({"message_id": "m", "is_completion": True, "moderation_response": {}}),
    )
    assert [e["type"] for e in decoder.events] == [
        "resume_conversation_token",
        "input_message",
        "message_stream_complete",
    ]
    assert decoder.messages == {"u1": user}
    assert decoder.stream_complete is True
    assert decoder.conversation_id == "c2"
    assert len(decoder.other_events) == 2


# -- rule 8: [DONE] and the event count ------------------------------------------------------


def test_done_and_event_count() -> None:
    decoder = decode(ENC, d(v={"x": 1}), SSEEvent("message", "[DONE]"), typed({"type": "late"}))
    assert decoder.done is True
    assert decoder.event_count == 3  # [DONE] is not counted
    assert decoder.event_index == 4


# -- rule 9: legacy framing ------------------------------------------------------------------


def test_legacy_snapshots_last_one_wins() -> None:
    snap = [
        {"message": msg(content={"parts": [t]}, status=s), "conversation_id": "c", "error": None}
        for t, s in (("a", "in_progress"), ("ab", "in_progress"), ("abc", "finished"))
    ]
    decoder = decode(*(typed(s) for s in snap))
    assert decoder.encoding is None
    assert decoder.messages["m1"]["content"]["parts"] == ["abc"]
    assert decoder.messages["m1"]["status"] == "finished"
    assert decoder.other_events == [] and decoder.conversation_id == "c"


# -- robustness ------------------------------------------------------------------------------


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
deltas = st.fixed_dictionaries(
    {},
    optional={
        "c": st.integers(0, 2) | st.text(max_size=1),
        "p": st.sampled_from(["", "/a", "/a/0", "/a/-", "/m/x", "/a/0/b", "/s", "bad"]),
        "o": st.sampled_from(["add", "replace", "remove", "append", "truncate", "patch", "x"]),
        "v": json_values
        | st.lists(
            st.fixed_dictionaries(
                {"p": st.sampled_from(["", "/a"]), "o": st.sampled_from(["add", "x"])}
            )
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            deltas.map(lambda x: d(**x)),
            st.text(max_size=20).map(lambda t: SSEEvent("delta", t)),
            st.text(max_size=20).map(lambda t: SSEEvent("message", t)),
        ),
        max_size=25,
    )
)
def test_garbage_never_raises(events: list[SSEEvent]) -> None:
    decoder = decode(*events)
    assert decoder.event_index == len(events)
    json.dumps(decoder.messages)


MESSAGE = {"id": "m", "author": {"role": "assistant"}, "content": {"parts": [""]}}


def test_where_each_piece_of_a_string_came_from_is_told() -> None:
    """Every string appended (bare frames on the short path and the long one, explicit appends)
    is told piece by piece with the event and the place in its data it came from."""
    events = [
        SSEEvent("delta_encoding", '"v1"'),
        SSEEvent("delta", json.dumps({"p": "", "o": "add", "v": {"message": MESSAGE}})),
        SSEEvent("delta", '{"p": "/message/content/parts/0", "o": "append", "v": "s"}'),
        SSEEvent("delta", '{"v": "k-"}'),
        SSEEvent("message", '{"type": "message_marker", "marker": "cot_token"}'),
        SSEEvent("delta", '{"v":"pr\\u006fj"}'),
        SSEEvent("delta", '{"p": "/message/status", "o": "replace", "v": "done"}'),
        SSEEvent("message", "[DONE]"),
    ]
    decoder = DeltaDecoder(sources=True)
    decoder.feed_all(events)
    told = one_each(decoder.strings())
    [part] = [e.string for e in told if isinstance(e, Began) and e.path[-1] == "0"]
    pieces = [(e.event, e.leaf, e.text) for e in told if isinstance(e, Piece) and e.string == part]
    assert pieces == [(1, ("v", "message", "content", "parts", 0), ""), (2, ("v",), "s"),
                      (3, ("v",), "k-"), (5, ("v",), "proj")]  # fmt: skip
    assert decoder.messages["m"]["content"]["parts"] == ["sk-proj"]
    assert decoder.strings() == []  # told once


# Data of events a run of typed events may hold or end at: each way a run ends (not JSON, not an
# object, no string type, a type with a way of its own, another conversation), big integers.
TYPED_DATA = [
    '{"type": "message_marker", "marker": "cot_token"}',
    '{"type": "message_marker", "conversation_id": "c1"}',
    '{"type": "title_generation", "title": "t", "conversation_id": "c2"}',
    '{"type": "x", "conversation_id": 5}',
    '{"type": "x", "conversation_id": null}',
    '{"type": "x", "big": 100000000000000000000000}',
    '{"type": ["not", "a", "string"]}',
    '{"type": "message_stream_complete", "conversation_id": "c1"}',
    '{"type": "stream_handoff", "options": []}',
    '{"no": "type"}',
    '{"broken": ',
    '{"v": "appended"}',
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["message", "message", "message", "delta"]),
                  st.sampled_from(TYPED_DATA)).map(lambda pair: SSEEvent(*pair)),
        max_size=30,
    )
)  # fmt: skip
def test_typed_events_fed_at_once_do_what_they_do_one_by_one(events: list[SSEEvent]) -> None:
    """Runs of typed events are taken together (a pass in C each): what they do, and what the
    decoder keeps, is what they do one event at a time."""
    start = [ENC, d(p="", o="add", v={"message": msg()}), d(p="/message/content/parts/0",
                                                          o="append", v="a")]  # fmt: skip
    one, batch = DeltaDecoder(sources=True), DeltaDecoder(sources=True)
    one_found = [found for event in [*start, *events] for found in one.feed(event)]
    batch_found = batch.feed_all(start) + batch.feed_all(events)
    assert batch_found == one_found
    for name in ("event_index", "event_count", "conversation_id", "handoff", "stream_complete"):
        assert getattr(batch, name) == getattr(one, name)
    assert (list(batch.events), list(batch.other_events)) == (list(one.events), one.other_events)
    assert batch.errors == one.errors
    assert batch.messages == one.messages
    assert batch.strings() == one.strings()
