"""A text vouched for by its raw row's search (`redact.stream.holds_no_hint`): whatever the row
and wherever the text sits in it, a text it vouches for holds no hint when searched on its own;
and what a stream remembers of such texts is bounded."""

from __future__ import annotations

from convtap.redact.patterns import hints
from convtap.redact.redactor import Redactor
from convtap.redact.stream import VOUCH_FROM, VOUCHED, Carrier, StreamRedaction, holds_no_hint
from hypothesis import example, given, settings
from hypothesis import strategies as st

# What a row's text is made of: plain words, the pieces of hint words and of JSON around them,
# escapes, the harmless markers, and the characters that lowercase to ASCII.
FRAGMENTS = [
    "o caminho ",
    "é uma ",
    "🌿",
    "ferramenta",
    '"',
    '", "',
    "\\",
    "\\u00",
    "\\u0041",
    "\\/",
    "\\u006bey",
    "41",
    "abia",
    "ia",
    "tok",
    "en",
    "token",
    "key",
    '"auth',
    "auth",
    "verify",
    " ",
    "-",
    "_",
    "sk-",
    "AKIA",
    "İ",
    "K",
    "ke",
    "pass",
    "word",
    ": ",
    "=",
    "cot_token",
    '"cot_token"',
    "resume_conversation",
    "_token",
    "eyJ",
    "\n",
    "://",
    "@",
    "x" * 40,
]
ROW = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=60).map("".join)


def carrier(text: str) -> Carrier:
    return Carrier(0.0, text, [], 0, lambda at, count, stored: None)


@settings(max_examples=2000, deadline=None)
@given(ROW, st.data())
@example('data: {"v": "' + "ab" * 40 + '"}', None)
def test_a_vouched_text_holds_no_hint(row: str, data: st.DataObject | None) -> None:
    if data is None:
        start, end = 13, 13 + 80
    else:
        start = data.draw(st.integers(0, len(row)))
        end = data.draw(st.integers(start, len(row)))
    text = row[start:end]
    if holds_no_hint(carrier(row), text):
        assert hints(text) == (False, False)


def test_what_it_does_not_vouch_for() -> None:
    clean = "o caminho é uma ferramenta 🌿 " * 4
    assert holds_no_hint(carrier(f'data: {{"v": "{clean}"}}'), clean)
    # not after a quote: an escape before it may take its first characters (\u00 + "ab…")
    hexed = "abia" + clean
    assert not holds_no_hint(carrier(f'data: {{"v": "\\u00{hexed}"}}'), hexed)
    assert hints(hexed)[1]
    # a quote in it: a marker cut at its end is no marker (the row's is blanked, its own not)
    cut = clean + '", "m": "cot_token'
    row = f'data: {{"v": "{clean}", "m": "cot_token"}}'
    assert hints(row) == (False, False) and hints(cut)[0]
    assert not holds_no_hint(carrier(row), cut)
    # a row with a hint vouches for nothing; nor does it for a text it does not hold whole
    assert not holds_no_hint(carrier(f'data: {{"token": "{clean}"}}'), clean)
    assert not holds_no_hint(carrier(f'data: {{"v": "{clean}"}}'), clean + "x")
    # a text with a quote or a backslash, or a short one (a marker's length), is searched
    assert not holds_no_hint(carrier(f'data: {{"v": "{clean}\\"x"}}'), clean + '\\"x')
    assert not holds_no_hint(carrier('data: {"v": "cot_token"}'), "cot_token")
    assert len("resume_conversation_token") < VOUCH_FROM


def test_a_stream_remembers_a_bounded_number_of_texts() -> None:
    redaction = StreamRedaction(Redactor(b"k" * 32))
    text = "o caminho é uma ferramenta 🌿 " * 4
    row = carrier(f'data: {{"v": "{text}"}}')
    for n in range(VOUCHED + 10):
        redaction.vouch(row, n, text)
    assert len(redaction.vouched) == VOUCHED
    assert redaction.text_hints(VOUCHED + 9, text) == (False, False)
    # forgotten: searched again (same answer); another text under a vouched key: searched
    assert redaction.text_hints(0, text) == (False, False)
    assert redaction.text_hints(VOUCHED + 9, text + " token") == (True, False)
