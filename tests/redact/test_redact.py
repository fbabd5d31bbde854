"""convtap.redact.redactor: structural redaction with keyed hashes."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from convtap.redact.patterns import (
    EXACT_KEYS,
    KEY_PARTS,
    hints,
    is_secret_key,
    keyed_secrets,
    may_hold_secret,
    value_hints,
)
from convtap.redact.redactor import Redactor
from hypothesis import given, settings
from hypothesis import strategies as st


def test_secret_keys_anywhere_are_replaced_by_a_keyed_hash() -> None:
    value = {
        "type": "resume_conversation_token",
        "token": "T1",
        "kind": "conduit",
        "nested": [{"app_attest_challenge": "C1", "x_token": {"a": 1}, "max_tokens": 5}],
    }
    out = Redactor(b"k").json(value)
    text = json.dumps(out)
    assert "T1" not in text and "C1" not in text
    assert out["kind"] == "conduit" and out["nested"][0]["max_tokens"] == 5
    assert out["token"].startswith("<redacted:")
    assert out["nested"][0]["x_token"].startswith("<redacted:")
    assert value["token"] == "T1"  # the input is untouched


@pytest.mark.parametrize(
    "value",
    [
        {" verify": "S3cret"},  # an exact key with blanks around it
        {"AUTH ": "S3cret"},
        {"args": '{"pwd": "S3cret"}'},  # an exact key in JSON text inside a string
        {"p": "/message/metadata/verify/x", "o": "add", "v": "S3cret"},
        {"p": "/message/metadata/auth/x", "o": "add", "v": "S3cret"},  # a middle segment
        {"note": "sk-proj-S3cretS3cretS3cretS3cret"},
        {"data": "Bearer S3cretS3cretS3cret"},
    ],
)
def test_json_looks_cheaply_first_and_walks_whatever_may_hold_a_secret(value: object) -> None:
    r = Redactor(b"k")
    assert "S3cret" not in json.dumps(r.json(value))
    assert "S3cret" not in r.text(json.dumps(value))  # the cheap look of the text, the same
    assert "S3cret" not in (r.dumps(value) or "")
    plain = {"type": "message_marker", "marker": "cot_token", "event": "first", "n": [1.5]}
    assert r.json(plain) is plain  # nothing to walk: the value itself


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(["AuTh", "PASS", "pWd", "VeRiFy", "veri", "fy", "\u0130", "verİfy",
                              "\u212a", "é", "🌿", "\ud800", '"', "\\u", " ", "x", "a"]),
             max_size=12).map("".join)
)  # fmt: skip
def test_the_cheap_look_sees_an_exact_key_as_the_text_lowercased_does(text: str) -> None:
    """`may_hold_secret` searches the UTF-8 bytes with ASCII lowercased for an exact key's word:
    what the text lowercased whole shows (U+0130 lowercases to "i" and a combining dot)."""
    low = text.lower()
    expected = any(hints(text)) or "\\u" in text or any(key in low for key in EXACT_KEYS)
    assert may_hold_secret(text) == expected
    assert may_hold_secret(text.encode("utf-8", "surrogatepass")) == expected  # its UTF-8 alike
    assert may_hold_secret('{"a": "' + text + ' Verify"}')


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["_", "-", "TOKEN", "sk-", "ghp_", "AKIA", "key", "\\u0041",
                                 '"', ":", "=", " ", "É", "\ud800", "x", "7"]),
                max_size=40).map("".join))  # fmt: skip
def test_the_cheap_look_at_utf8_answers_as_at_the_text(text: str) -> None:
    """A decoded block is looked at as it was written (UTF-8): the same answer as its text."""
    assert may_hold_secret(text.encode("utf-8", "surrogatepass")) == may_hold_secret(text)


def test_the_same_secret_gets_the_same_placeholder_and_keys_differ() -> None:
    a, b = Redactor(b"k1"), Redactor(b"k2")
    assert a.placeholder("s") == a.placeholder(b"s") != a.placeholder("t")
    assert a.placeholder("s") != b.placeholder("s")


def test_redacting_twice_changes_nothing() -> None:
    r = Redactor(b"k")
    once = r.json({"token": "x"})
    assert r.json(once) == once


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"message": "plain words, nothing here"}', (False, False)),
        ('{"Access-Token": 1}', (True, False)),  # any case, `-` as `_`
        ('{"to\\u006ben": 1}', (True, False)),  # a JSON escape hides no key
        ('{"to\u212aen": 1}', (True, False)),  # the Kelvin sign lowercases to k, as keys do
        ('{"v": "SK-proj-abc"}', (False, True)),
        ('{"v": "s\\u006b-proj-abc"}', (False, True)),
        ('{"marker": "cot_token", "v": "🌿 é"}', (False, False)),  # a marker, not a key
        ('["cot_token","last_token""user_visible_token"]', (False, False)),  # side by side
        ('{"marker": "last_token", "token": 1}', (True, False)),  # a key beside a marker
        ('{"m": "cot_token", "v": "sk-proj-abc"}', (False, True)),
        ('{"v": "\ud800 lone surrogate"}', (False, False)),
    ],
)
def test_hints_fold_text_as_keys_are_compared(text: str, expected: tuple[bool, bool]) -> None:
    assert hints(text) == expected
    assert value_hints(text) is expected[1]
    assert is_secret_key("to\u212aen") and is_secret_key("İsession")


@pytest.mark.parametrize("text", ["token" * 1_000_000, '"cot_token"' * 400_000, "sk-" * 1_500_000])
def test_text_made_of_hints_is_searched_in_bounded_memory(text: str) -> None:
    """A message made of hint words is searched a window at a time: its matches are never all
    held at once (they took 28 times the text's size)."""
    tracemalloc.start()
    try:
        hints(text)
        value_hints(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(text)


def _unread_line_by_line(redactor: Redactor, text: str) -> str:
    """The reference for `Redactor.unread`: every line looked at on its own."""
    lines = text.split("\n")
    for n, line in enumerate(lines):
        read = line.partition(":")[0] in ("data", "event")
        if line and not read and any(hints(line)):
            lines[n] = f": {redactor.placeholder(line)}"
    return "\n".join(lines)


@pytest.mark.parametrize(
    "text",
    [
        "",
        ":",
        "\n:",
        ": ping - 2026-11-30\n\n",
        ": key sk-proj-CANARY0123456789abcdefghij\n\ndata: 1\n\n",
        "data: 1\n\n: ping\n\n: token=abc\n: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig\n\n",
        'data: {"v": ": token"}\n\n:tail without a line end password',
        "id: sk-proj-CANARY0123456789abcdefghij\ndata: 1\n\nid: 7\ndata: 2\n\n",
        "data: 1\n\nstray sk-proj-CANARY0123456789abcdefghij\n\nevent:delta\ndata:token\n\n",
        "retry: 5\nfoo: token\ndatum: x\ndata\n\n",
    ],
)
def test_lines_the_decoder_does_not_read_with_a_hint_are_placeholders(text: str) -> None:
    """Comments, other fields and lines of no field: those with a hint of a secret become a
    comment holding a placeholder; data and event lines are left to the event redaction."""
    redactor = Redactor(b"k" * 32)
    assert redactor.unread(text) == _unread_line_by_line(redactor, text)
    if "CANARY" in text or "eyJ" in text:
        assert "CANARY" not in redactor.unread(text) and "eyJ" not in redactor.unread(text)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('{"api_key": "abc", "city": "Lisboa"}', ["abc"]),
        ('{"city": "Lisboa", "password": "hun\\"ter', ['hun\\"ter']),  # cut short, an escape
        ('{"api\\u005fkey": "abc"}', ["abc"]),  # a key hidden by an escape
        ('{"Access-Token" : "t1", "n": {"secret": "s2"}}', ["t1", "s2"]),
        ('{"token": "<redacted:0123456789ab>"}', []),  # already a placeholder
        ('{"tokens": "many", "note": "a token is here"}', []),  # not secret keys; prose
        ('{"token": 12}', []),  # not a string
        ('{"note": "' + '\\"' * 5000 + '", "token": "t3"}', ["t3"]),  # escaped quotes, read once
        ('{"out": "[{\\"pass\\": \\"pw\\"}]"}', ["pw"]),  # JSON text in a string
        ('{"out": "\\"{\\\\\\"pwd\\\\\\": \\\\\\"pw', ["pw"]),  # encoded twice, cut short
    ],
)
def test_keyed_secrets_finds_secret_keys_values_in_json_text(text: str, found: list[str]) -> None:
    spans = keyed_secrets(text)
    assert [secret for _, _, secret in spans] == found
    assert all(text[start:end] == secret for start, end, secret in spans)


PROSE = [
    "The secret: nothing to see here. Pass the salt, compass and bypass.",
    "Set max_tokens=4096 and tokens: 500000; the token: the next word.",
    "Your API key is in the dashboard; rotate the private key yearly.",
    "a risk-adjusted task-management-system-overview, scikit-learn and sk-learn",
    "ids 7f3e9a1b-2c4d-4e6f-8a0b-1c2d3e4f5a6b call_AbC123xYz789QwE456 resp_0123456789abcdef"
    " msg_67ab12cd34ef56ab78cd90ef fc_68a1b2c3d4e5f6a7b8c9d0e1 conv-s user-1",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 at 8.8.8.8",
    "https://example.com/search?q=aws+keys&page=2&zipcode=12345&monkey=1 and AWS; hf is a face",
    '[1] "Quoted" text: the token: the next word, C:\\Users\\key\\pass and \\u00e9 \\"pass\\"',
]


@pytest.mark.parametrize("text", PROSE)
def test_ordinary_prose_and_ids_are_kept(text: str) -> None:
    """Words that name secrets, and ids the rows join on, are no secret: kept as they are, in
    text, in JSON values and under keys that are not secret."""
    redactor = Redactor(b"k" * 32)
    assert redactor.scrub(text) == text
    value = {"id": "m1", "text": text, "max_tokens": 5, "tokens": ["a"], "code": "rate_limit",
             "passage": text, "key": "city", "sort_key": "name"}  # fmt: skip
    assert redactor.json(value) == value
    data = json.dumps({"v": text})
    assert redactor.text(data) == data


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('{"note": "\\u0073k-proj-' + "A1b2C3d4" * 4 + " and the event is cut", "A1b2C3d4"),
        ('{"url": "https:\\/\\/me:pw123456@db.example\\/x"}', "pw123456"),
        # a lone surrogate (half of an escaped emoji) in what is hashed
        ('{"note": "https://x.example/cb?code=\\ud83d\\ude00cd1234 cut', "cd1234"),
        ('{"note": "{\\"api_key\\": \\"kEy123456\\"}" cut', "kEy123456"),
    ],
)
def test_a_secret_hidden_by_json_escapes_is_found(text: str, secret: str) -> None:
    """Text that is not read as JSON (an event cut short): the secret shows only once its
    escapes are undone, and is cut from the text as it came."""
    out = Redactor(b"k" * 32).scrub(text)
    assert "<redacted:" in out and secret not in out, out
    assert out.startswith('{"') and out.endswith(text[-4:])


def _spellings(name: str) -> list[str]:
    spaced = name.replace("_", " ")
    return [name, name.upper(), name.replace("_", "-"), spaced.title(), spaced]


@pytest.mark.parametrize("name", sorted({*KEY_PARTS, *EXACT_KEYS}))
def test_every_secret_key_name_is_a_hint_in_every_spelling(name: str) -> None:
    """The cheap search looks for fewer words than there are secret key names (past about a
    hundred words it runs at half the speed): each name, in each spelling, as a JSON key and as
    a delta's path, must still be found, and be a secret key."""
    for key in _spellings(name):
        assert is_secret_key(key), key
        assert hints(json.dumps({key: "x"}))[0], key
        assert hints(json.dumps({"p": f"/message/metadata/{key}", "o": "append"}))[0], key
