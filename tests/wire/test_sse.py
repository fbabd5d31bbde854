"""convtap.wire.sse: WHATWG framing under any chunking."""

from __future__ import annotations

from pathlib import Path

import pytest
from convtap.wire.sse import UNREAD_LINE, SSEEvent, SSEParser, unread_line_starts
from hypothesis import example, given, settings
from hypothesis import strategies as st

EXAMPLES = Path(__file__).resolve().parents[2] / "captures" / "examples" / "sse"


def parse(chunks: list[bytes]) -> tuple[list[SSEEvent], bool]:
    parser = SSEParser()
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    return events, parser.close()


def whole(body: bytes) -> tuple[list[SSEEvent], bool]:
    return parse([body])


def test_fields_comments_and_multiline_data() -> None:
    body = (
        b": ping - 2026-08-27\n"
        b'event: delta\ndata: {"v": 1}\n\n'
        b"data: line one\ndata:line two\ndata:  two spaces\nid: 7\nretry: 10\nbogus: x\n\n"
        b"data\n\n"  # a lone empty data line: empty data, not dispatched
        b"event: ignored\n\n"  # no data: not dispatched, and the type does not leak
        b"data: after\n\n"
    )
    events, truncated = whole(body)
    assert events == [
        SSEEvent("delta", '{"v": 1}'),
        SSEEvent("message", "line one\nline two\n two spaces"),
        SSEEvent("message", "after"),
    ]
    assert truncated is False


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(eol: bytes) -> None:
    body = eol.join([b"event: delta", b"data: a", b"", b"data: b", b"", b""])
    assert whole(body) == ([SSEEvent("delta", "a"), SSEEvent("message", "b")], False)


def test_crlf_split_between_cr_and_lf_is_one_line_end() -> None:
    events, _ = parse([b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"])
    assert events == [SSEEvent("message", "a"), SSEEvent("message", "b")]


def texts(chunks: list[bytes], runs: bool = False) -> bytes:
    """The text of every `read`, joined, as the bytes it holds."""
    parser = SSEParser()
    read = "".join(parser.read(chunk, runs).text for chunk in chunks)
    return read.encode("utf-8", "surrogateescape")


CRLF_BODY = (
    b': ping\r\n\r\nevent: delta\r\ndata: {"v": "a"}\r\n\r\n'
    b'event: delta\r\ndata: {"v": "b"}\r\n\r\ndata: {"type": "x"}\r\nid: 7\r\n\r\n'
    b"data: \xff\r\n\r\ndata: [DONE]\r\n\r\n"
)


@pytest.mark.parametrize("runs", [False, True])
def test_crlf_line_ends_are_kept_in_the_text_under_any_chunking(runs: bool) -> None:
    """The raw events of a CRLF stream are its bytes, whatever the chunking: cut at every
    offset (between CR and LF too) and byte at a time."""
    assert texts([CRLF_BODY], runs) == CRLF_BODY
    for cut in range(len(CRLF_BODY) + 1):
        assert texts([CRLF_BODY[:cut], CRLF_BODY[cut:]], runs) == CRLF_BODY
    assert texts([CRLF_BODY[i : i + 1] for i in range(len(CRLF_BODY))], runs) == CRLF_BODY
    assert texts([b"\xef\xbb\xbf" + CRLF_BODY], runs) == b"\xef\xbb\xbf" + CRLF_BODY  # kept too


def test_the_bytes_kept_as_they_came_are_bounded_as_the_events_are() -> None:
    """An event of CRLF lines that never ends: the bytes kept for the text are dropped with it,
    so they stay under the event bound; the events after it keep their CRLFs."""
    parser = SSEParser(max_event=1 << 12)
    line = b"data: " + b"x" * 100 + b"\r\n"
    for _ in range(200):
        parser.read(line * 10)
        assert parser._raw is not None and len(parser._raw.buf) <= (1 << 12) + len(line) * 10
    block = parser.read(b"\r\ndata: after\r\n\r\n")
    assert [e.event for e in block.events] == ["\nevent-too-large", "message"]
    assert block.text == "data: after\r\n\r\n"


def as_came_but_lone_crs(kept: bytes, came: bytes) -> bool:
    """`kept` is the start of `came`, but for lone CRs (no LF after them) kept as LF."""
    pairs = enumerate(zip(kept, came, strict=False))
    lone = [k == c or (c == ord("\r") and k == ord("\n") and came[i + 1 : i + 2] != b"\n")
            for i, (k, c) in pairs]  # fmt: skip
    return len(kept) <= len(came) and all(lone)


@settings(max_examples=500, deadline=None)
@example(b"data: x\rdata: yy\n\r\r\rd", [18], False)  # a CR out with its block, a lone CR next
@example(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\r\r", [], False)  # a second BOM is a line's text
@given(
    st.lists(st.sampled_from([b"\r", b"\n", b"\r\n", b"data: x", b"event: e", b": c", b"id: 1",
                              b"\xef\xbb\xbf", b"\xff", b"d"]), max_size=30).map(b"".join),
    st.lists(st.integers(0, 200), max_size=6),
    st.booleans(),
)  # fmt: skip
def test_a_blocks_text_keeps_the_line_ends_it_came_with(
    body: bytes, cuts: list[int], runs: bool
) -> None:
    """The texts hold the stream's bytes as they came (its leading BOM too), lone CRs as LF
    (the redaction of unread lines finds lines by LF), and parse back to the same events."""
    bounds = sorted({min(cut, len(body)) for cut in cuts})
    chunks = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True)]
    kept = texts(chunks, runs)
    assert as_came_but_lone_crs(kept, body)
    assert SSEParser().feed(kept) == whole(body)[0][: len(SSEParser().feed(kept))]


def test_cr_at_chunk_end_dispatches_at_once() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r\r") == [SSEEvent("message", "a")]


def test_unicode_line_separators_are_text() -> None:
    text = "a\u2028b\u2029c\u0085d"
    events, _ = whole(f"data: {text}\n\n".encode())
    assert events == [SSEEvent("message", text)]


def test_utf8_split_inside_a_sequence() -> None:
    body = "data: olá 🌿\n\n".encode()
    for cut in range(len(body) + 1):
        assert parse([body[:cut], body[cut:]])[0] == [SSEEvent("message", "olá 🌿")]


def test_bom_is_stripped_even_when_split() -> None:
    body = b"\xef\xbb\xbfdata: x\n\n"
    assert parse([body[:1], body[1:2], body[2:]])[0] == [SSEEvent("message", "x")]
    assert whole(b"data: \xef\xbb\xbfx\n\n")[0] == [SSEEvent("message", "\ufeffx")]


def test_unfinished_trailing_event_is_truncated_not_dispatched() -> None:
    assert whole(b"data: a\n\ndata: b\n") == ([SSEEvent("message", "a")], True)
    assert whole(b'data: a\n\ndata: {"v": "hal') == ([SSEEvent("message", "a")], True)
    assert whole(b"data: a\n\n: ping\n") == ([SSEEvent("message", "a")], False)
    assert whole(b"") == ([], False)


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert whole(b"data: \xff\xfe\n\n")[0] == [SSEEvent("message", "\ufffd\ufffd")]


def test_feed_after_close_is_misuse() -> None:
    parser = SSEParser()
    parser.close()
    with pytest.raises(RuntimeError):
        parser.feed(b"data: x\n\n")


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.sse")), ids=lambda p: p.name)
def test_every_split_and_byte_at_a_time_match_whole(path: Path) -> None:
    body = path.read_bytes()
    expected = whole(body)
    assert expected[0], "an example with no events proves nothing"
    for cut in range(len(body) + 1):
        assert parse([body[:cut], body[cut:]]) == expected
    assert parse([body[i : i + 1] for i in range(len(body))]) == expected


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_hypothesis_chunkings_match_whole(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(sorted(EXAMPLES.glob("*.sse"))))
    body = path.read_bytes()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=40)))
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert parse(chunks) == whole(body)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=20))
def test_garbage_never_raises(chunks: list[bytes]) -> None:
    events, truncated = parse(chunks)
    assert parse([b"".join(chunks)]) == (events, truncated)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=20))
@example([b"\xef\xbb\xbf", b"\xef\xbb\xbf"])  # a second BOM is text, not the stream's BOM
def test_a_blocks_text_is_what_its_events_came_in(chunks: list[bytes]) -> None:
    """The text of each `read` (stored raw by the recorder) parses back to the same events."""
    parser = SSEParser()
    texts: list[str] = []
    events: list[SSEEvent] = []
    for chunk in [*chunks, b"data: \xff\n\n", "data: é🌿\r\n\r\n".encode()]:
        block = parser.read(chunk)
        texts.append(block.text)
        events += block.events
        assert bool(block.text) or not block.events
    # The texts start with the stream's BOM, if it had one, and are parsed as it was.
    again = SSEParser().feed("".join(texts).encode("utf-8", "surrogateescape"))
    assert again == events


@given(chunks=st.lists(st.binary(max_size=30), max_size=8))
def test_a_blocks_text_holds_the_bytes_it_came_in(chunks: list[bytes]) -> None:
    """Bytes that are not UTF-8 stay in the text as they came (`surrogateescape`): the raw
    events are stored byte for byte."""
    body = b"".join(chunks).replace(b"\r", b"").lstrip(b"\xef\xbb\xbf") + b"\n\ndata: \xff\x80\n\n"
    parser = SSEParser()
    texts = [parser.read(piece).text for piece in (body[:7], body[7:])]
    kept = "".join(texts).encode("utf-8", "surrogateescape")
    assert kept == body[: len(kept)] and kept.endswith(b"data: \xff\x80\n\n")


def read_by_the_decoder(line: bytes) -> bool:
    """A data or event field (WHATWG: the field name is all before the first colon)."""
    return line.partition(b":")[0] in (b"data", b"event")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=64), st.sampled_from([
    b": ping\n\n", b"data: 1\n: c\n\n", b":\n", b"event: delta\ndata: {\"v\": \"a\"}\n\n",
    b"\r\n:x\r\n\r\n", b"data: x\n\n", b"id: 7\ndata: x\n\n", b"retry: 5\n\n", b"stray\n\n",
    b"data\n\n", b"event:delta\ndata:x\n\n", b"datum: x\n\n",
])), max_size=20), st.booleans())  # fmt: skip
def test_the_parser_tells_whether_it_took_in_lines_it_does_not_read(
    chunks: list[bytes], runs: bool
) -> None:
    """Comments, other fields (id, retry, unknown ones) and lines of no field: the recorder
    looks at them for secrets only when the parser says it took some in."""
    parser = SSEParser()
    begun = False  # a BOM that begins the stream is no line (WHATWG: it is skipped)
    for chunk in chunks:
        block = parser.read(chunk, runs)
        text = block.text if begun else block.text.removeprefix("\ufeff")
        begun = begun or bool(block.text)
        lines = text.encode("utf-8", "surrogateescape").split(b"\n")
        unread = [line for line in lines if line and not read_by_the_decoder(line)]
        assert block.unread_lines == bool(unread)
        if block.unread_text is not None:  # those lines exactly, when the parser gives them
            given = block.unread_text.encode("utf-8", "surrogateescape").split(b"\n")
            assert [line for line in given if line] == unread


@pytest.mark.parametrize("block", [b":data: x\n\n", b": c\n:event: delta\ndata: y\n\n:data: z\n\n"])
def test_a_field_inside_a_comment_line_is_part_of_the_comment(block: bytes) -> None:
    """WHATWG: a line that starts with a colon is a comment, whatever follows the colon (the
    fast path once read `:data: x` as a comment and an event)."""
    expected = [SSEEvent("message", "y")] if b"y" in block else []
    assert SSEParser().feed(block) == expected
    assert SSEParser().read(block, runs=True).unread_lines


_LINES = ["data: x", "event: y", "", ": ping", "id: 3", "retry: 1", "data", "event", "dat", ":"]


@given(st.lists(st.one_of(st.sampled_from(_LINES), st.text(max_size=8)), max_size=8))
def test_unread_line_starts_are_where_the_unread_line_pattern_matches(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert unread_line_starts(text) == [m.end() for m in UNREAD_LINE.finditer(text)]
