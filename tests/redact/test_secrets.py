"""No secret in clear, in any spelling, anywhere it can sit: Hypothesis puts secrets of every
kind in random places, casings, spacings and JSON escapes of a capture, imports it, and finds
none of them in any file of the database (main, -wal, -shm) nor in `convtap decode` output."""

from __future__ import annotations

import itertools
import json
import string
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from convtap.ingest.capture import import_into
from convtap.redact.keyfile import key_file, redaction_key
from convtap.redact.redactor import Redactor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.runner import convtap
from tests.seeds import har_entry, user_turn

URL = "https://chatgpt.com/backend-api/f/conversation"
ALNUM = string.ascii_letters + string.digits


def body(alphabet: str, size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=size, max_size=size)


# Each kind: how the secret looks (a value found by its shape).
SHAPED = {
    "openai": body(ALNUM, 48).map(lambda s: "sk-proj-" + s),
    "anthropic": body(ALNUM, 40).map(lambda s: "sk-ant-api03-" + s),
    "aws": body(string.ascii_uppercase + string.digits, 16).map(lambda s: "AKIA" + s),
    "github": body(ALNUM, 36).map(lambda s: "ghp_" + s),
    "jwt": st.tuples(body(ALNUM, 20), body(ALNUM, 30), body(ALNUM, 20)).map(
        lambda t: f"eyJ{t[0]}.eyJ{t[1]}.{t[2]}"
    ),
    "bearer": body(ALNUM, 32).map(lambda s: "Bearer " + s),
    "basic": body(ALNUM, 24).map(lambda s: "Basic " + s),
    "private-key": body(ALNUM, 64).map(
        lambda s: f"-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----"
    ),
}
# Keys whose value is secret whatever it looks like, in the spellings clients use.
KEYS = ["token", "Token", "access_token", "Access_Token", "api_key", "apiKey", "x-api-key",
        "password", "client_secret", "Authorization", "cookie", "session_token", "verify",
        "app_attest_challenge", "refreshToken"]  # fmt: skip


def secret_part(secret: str) -> str:
    """The part that must never be stored (a Bearer's scheme word may stay)."""
    return secret.split(" ", 1)[1] if secret.startswith(("Bearer ", "Basic ")) else secret


def escape_key(key: str, how: str) -> str:
    """A key as JSON text: plain, with one letter \\u-escaped, with spaces before the colon."""
    if how == "unicode" and len(key) > 2:
        return json.dumps(key)[:-2] + f"\\u{ord(key[-1]):04x}" + '"'
    return json.dumps(key)


def escape_value(value: str, how: str) -> str:
    if how == "unicode":
        return '"' + "".join(f"\\u{ord(c):04x}" if c.isalpha() else c
                             for c in json.dumps(value)[1:-1]) + '"'  # fmt: skip
    return json.dumps(value)


def stream_with(place: str, key_text: str, value_text: str, bare: list[str]) -> bytes:
    """An f/conversation stream with the secret at `place` (as JSON text, escapes kept)."""
    call = {"id": "call-1", "author": {"role": "assistant", "name": None, "metadata": {}},
            "content": {"content_type": "code", "language": "json", "text": ""},
            "status": "in_progress", "recipient": "local.alefita_way", "channel": "commentary",
            "metadata": {}, "end_turn": None, "weight": 1, "create_time": 1.0}  # fmt: skip
    events = ['event: delta_encoding\ndata: "v1"\n\n']
    root = json.dumps({"message": call, "conversation_id": "conv-s"})
    events.append(f'event: delta\ndata: {{"p": "", "o": "add", "v": {root}, "c": 0}}\n\n')
    if place == "typed-event":
        events.append(f'data: {{"type": "resume_conversation_token", {key_text} : {value_text}, '
                      '"conversation_id": "conv-s"}\n\n')  # fmt: skip
    elif place == "metadata-path":
        path = json.dumps("/message/metadata/" + json.loads(key_text))
        events.append(f'event: delta\ndata: {{"p": {path}, "o": "append", "v": "x"}}\n\n')
        events += [f'event: delta\ndata: {{"v": {json.dumps(piece)}}}\n\n' for piece in bare]
    elif place == "unknown-field":
        events.append(f'data: {{"type": "server_ste_metadata", "extra": {{{key_text}: '
                      f'{value_text}}}}}\n\n')  # fmt: skip
    events.append('event: delta\ndata: {"p": "/message/content/text", "o": "append", "v": "{"}\n\n')
    if place == "arguments":
        events.append(f'event: delta\ndata: {{"v": {json.dumps(key_text + ": ")}}}\n\n')
        events.append(f'event: delta\ndata: {{"v": {json.dumps(value_text)}}}\n\n')
    else:
        events.append('event: delta\ndata: {"v": "\\"message\\": \\"ok\\""}\n\n')
    events.append('event: delta\ndata: {"v": "}"}\n\n')
    events.append('event: delta\ndata: {"p": "/message/status", "o": "replace", '
                  '"v": "finished_successfully"}\n\n')  # fmt: skip
    if place == "message-text":
        answer = {"id": "answer-1", "author": {"role": "assistant", "name": None, "metadata": {}},
                  "content": {"content_type": "text", "parts": [""]}, "status": "in_progress",
                  "recipient": "all", "channel": "final", "metadata": {}, "end_turn": None,
                  "weight": 1, "create_time": 2.0}  # fmt: skip
        root = json.dumps({"message": answer, "conversation_id": "conv-s"})
        events.append(f'event: delta\ndata: {{"p": "", "o": "add", "v": {root}, "c": 1}}\n\n')
        events.append('event: delta\ndata: {"p": "/message/content/parts/0", "o": "append", '
                      '"v": "here: "}\n\n')  # fmt: skip
        events += [f'event: delta\ndata: {{"v": {json.dumps(piece)}}}\n\n' for piece in bare]
    events.append('data: {"type": "message_stream_complete", "conversation_id": "conv-s"}\n\n')
    events.append("data: [DONE]\n\n")
    return "".join(events).encode()


def pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if text[a:b]]


def database_bytes(db: Path) -> bytes:
    return b"".join(
        Path(f"{db}{suffix}").read_bytes()
        for suffix in ("", "-wal", "-shm")
        if Path(f"{db}{suffix}").exists()
    )


def leaked(secret: str, haystack: bytes) -> bool:
    part = secret_part(secret)
    forms = {part, json.dumps(part)[1:-1]}
    if "\n" in part:  # a private key: its body is what matters
        forms = {line for line in part.split("\n") if len(line) > 20}
    return any(form.encode() in haystack for form in forms)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.data(),
    place=st.sampled_from(
        [
            "typed-event",
            "metadata-path",
            "unknown-field",
            "arguments",
            "message-text",
            "request",
            "url",
            "header",
        ]
    ),
    key_how=st.sampled_from(["plain", "unicode"]),
    value_how=st.sampled_from(["plain", "unicode"]),
    cuts=st.lists(st.integers(0, 10_000), max_size=4),
)
def test_no_secret_reaches_the_database_in_clear(
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    place: str,
    key_how: str,
    value_how: str,
    cuts: list[int],
) -> None:
    by_key = place in ("typed-event", "metadata-path", "unknown-field", "request", "url")
    kind = data.draw(st.sampled_from(sorted(SHAPED) + (["keyed"] if by_key else [])))
    secret = data.draw(body(ALNUM, 24) if kind == "keyed" else SHAPED[kind])
    key = data.draw(st.sampled_from(KEYS)) if kind == "keyed" else "note"
    if place == "metadata-path" and kind != "keyed":
        place = "message-text"  # a shaped value sits in text; a keyed one behind its path
    request = user_turn()
    url, headers = URL, []
    if place == "request":
        request[key] = secret
        request["messages"][0]["metadata"] = {key: secret}
    elif place == "url":
        keyed = kind == "keyed"
        url = f"{URL}?{key}={quote(secret) if keyed else 'x'}&q={'y' if keyed else quote(secret)}"
    elif place == "header":
        headers = [{"name": "x-custom-secret", "value": secret},
                   {"name": "user-agent", "value": f"client {secret}"}]  # fmt: skip
    value_text = escape_value(secret, value_how)
    stream = stream_with(place, escape_key(key, key_how), value_text, pieces(secret, cuts))
    entry = har_entry(url, request, stream, "2026-11-30T10:00:00.000Z")
    entry["request"]["headers"] += headers
    if place == "url":
        entry["request"]["url"] = url
    folder = tmp_path_factory.mktemp("secret")
    db = imported(folder, entry)
    assert not leaked(secret, database_bytes(db)), (place, kind, key, secret)
    sse = folder / "body.sse"
    sse.write_bytes(stream)
    for fmt in ("json", "text"):
        decoded = convtap("decode", "--format", fmt, str(sse))
        assert decoded.returncode == 0
        assert not leaked(secret, decoded.stdout_bytes), (fmt, place, kind, key)


def test_the_key_is_random_per_installation_and_private(tmp_path: Path) -> None:
    """Placeholders cannot be tested against a guess without the key, which never leaves."""
    key = redaction_key()
    assert key_file().stat().st_mode & 0o777 == 0o600
    assert len(key) == 64 and key != b"convtap redaction v1"
    assert redaction_key() == key  # made once, then kept
    assert Redactor().placeholder("Bearer CANARY1") != Redactor(
        b"convtap redaction v1"
    ).placeholder("Bearer CANARY1")


def test_a_team_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVTAP_REDACT_KEY", "team secret")
    assert Redactor().placeholder("x") == Redactor(b"team secret").placeholder("x")


@pytest.mark.process
def test_no_secret_reaches_the_database_through_a_live_proxy(tmp_path: Path) -> None:
    """Every shaped kind streamed in small pieces (as a model streams its text) across network
    chunks of 7 bytes, and every keyed spelling in typed events, through mitmdump and the
    journal: none in any database file, nor in the journal while it exists."""
    shaped = {
        "openai": "sk-proj-" + "Ab3dE" * 10, "anthropic": "sk-ant-api03-" + "Qw9rT" * 8,
        "aws": "AKIA" + "ABCDEFGH12345678", "github": "ghp_" + "a1B2c" * 7 + "d",
        "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.c2lnbmF0dXJlLXNpZw",
        "bearer": "Bearer " + "tok3nValue" * 3, "basic": "Basic " + "dXNlcjpwYXNzd29yZA==",
        "private-key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
                       "-----END PRIVATE KEY-----",
    }  # fmt: skip
    keyed = {key: f"keyed-{n:02d}-" + "Zx7Vq" * 5 for n, key in enumerate(KEYS)}
    text = " and ".join(shaped.values())
    stream = stream_with("message-text", '"note"', '"x"', pieces(text, list(range(3, 900, 4))))
    typed = "".join(f"data: {{\"type\": \"server_ste_metadata\", {json.dumps(k)} : "
                    f"{json.dumps(v)}}}\n\n" for k, v in keyed.items())  # fmt: skip
    stream = stream.replace(b"data: [DONE]", typed.encode() + b"data: [DONE]")
    from tests.harness import burst_upstream, mitmdump, send_burst

    received: list[bytes] = []
    with (
        burst_upstream([stream], chunk=7) as upstream,
        mitmdump(tmp_path, f"reverse:http://127.0.0.1:{upstream}") as proxy,
    ):
        send_burst(proxy.port, 1, received)
        assert received == [stream]
    db = proxy.db
    stored = database_bytes(db)
    assert stored and b"server_ste_metadata" in stored
    leaks = [k for k, s in {**shaped, **keyed}.items() if leaked(s, stored)]
    assert leaks == []


@pytest.mark.parametrize("key", ["verify", "auth", "pwd", "api_key"])
def test_a_value_behind_an_exact_secret_key_in_a_delta_path_is_redacted(
    tmp_path: Path, key: str
) -> None:
    """A value appended under `/message/metadata/verify` (an exact secret key, reached only by
    a delta's path, then bare frames) was kept in clear, in the raw events and the message's
    JSON: an exact key counted as a hint only when quoted as a JSON key. Found by Hypothesis."""
    secret = "0" * 24
    stream = stream_with("metadata-path", json.dumps(key), json.dumps(secret), [secret])
    db = imported(tmp_path, har_entry(URL, user_turn(), stream, "2026-11-30T10:00:00.000Z"))
    assert not leaked(secret, database_bytes(db))


def imported(folder: Path, entry: dict[str, Any]) -> Path:
    """A HAR of one entry imported into a new capture in `folder`; the capture."""
    har = folder / "capture.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"},
                                       "entries": [entry]}}))  # fmt: skip
    db = folder / "capture.db"
    [result] = import_into(db, [har])
    assert result.error is None and result.imported == 1
    return db
