"""convtap.record.redact: structural redaction with keyed hashes."""

from __future__ import annotations

import json

from convtap.record.redact import Redactor


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


def test_the_same_secret_gets_the_same_placeholder_and_keys_differ() -> None:
    a, b = Redactor(b"k1"), Redactor(b"k2")
    assert a.placeholder("s") == a.placeholder(b"s") != a.placeholder("t")
    assert a.placeholder("s") != b.placeholder("s")


def test_redacting_twice_changes_nothing() -> None:
    r = Redactor(b"k")
    once = r.json({"token": "x"})
    assert r.json(once) == once
