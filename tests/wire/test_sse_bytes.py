"""The parser hands on the bytes a block's text decodes (`Block.utf8`) only when the text is
exactly them decoded: the recorder then searches and stores those bytes instead of encoding the
text again, so they must never differ from it (CRLF line ends, a BOM, bytes that are not UTF-8:
no bytes handed on)."""

from __future__ import annotations

from convtap.wire.sse import SSEParser
from hypothesis import given, settings
from hypothesis import strategies as st

pieces = st.sampled_from([
    b'event: delta\ndata: {"v": " caf\xc3\xa9"}\n\n', b'data: {"v": "\xf0\x9f\x8c\xbf"}\n\n',
    b": ping\n\n", b"\r\n", b"\r", b"\n", b"\xef\xbb\xbf", b"\xff", b"id: 1\n", b"data: x",
])  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(pieces, max_size=30), st.lists(st.integers(1, 40), min_size=1, max_size=30))
def test_the_bytes_handed_on_are_the_text_exactly(parts: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(parts)
    parser = SSEParser()
    at, n = 0, 0
    while at < len(stream):
        size = cuts[n % len(cuts)]
        block = parser.read(stream[at : at + size], runs=n % 2 == 0)
        at, n = at + size, n + 1
        if block.utf8 is not None:
            assert block.utf8.decode("utf-8") == block.text


def test_a_plain_block_hands_on_its_bytes_and_a_crlf_one_does_not() -> None:
    block = SSEParser().read(b'event: delta\ndata: {"v": "\xc3\xa9"}\n\n')
    assert block.utf8 == b'event: delta\ndata: {"v": "\xc3\xa9"}\n\n'
    assert SSEParser().read(b"data: 1\r\n\r\n").utf8 is None
    assert SSEParser().read(b"\xef\xbb\xbfdata: 1\n\n").utf8 is None
    assert SSEParser().read(b"data: \xff\n\n").utf8 is None
