"""`convtap mock --replay`: a capture's exchanges matched by content (what a client mints per run
left out, a placeholder standing for its secret), once each and in order; a miss names the nearest
recorded request and the paths that differ, never a value; the server sends the recorded bytes.
Bad input to `run` and `mock --replay` is one line, exit 2."""

from __future__ import annotations

import copy
import http.client
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from convtap.diff.shapes import differences
from convtap.ingest.capture import import_into
from convtap.mock.recorded import Exchange, Miss, Recording, load, same_scalar
from convtap.store.database import close, connect

from tests.runner import convtap

ROOT = Path(__file__).resolve().parents[2]
SESSION = ROOT / "captures" / "examples" / "rules" / "replay-miss" / "pass.har"


def requests_of(har: Path) -> list[dict[str, Any]]:
    entries = json.loads(har.read_text())["log"]["entries"]
    return [json.loads(e["request"]["postData"]["text"]) for e in entries]


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    """The example Responses session (a streamed call, its output answered as JSON)."""
    db = tmp_path / "session.db"
    assert not [r.error for r in import_into(db, [SESSION]) if r.error]
    return db


def test_a_session_replays_in_order_each_exchange_once(capture: Path) -> None:
    first, second = requests_of(SESSION)
    replay = load(capture)
    assert [e.method for e in replay.exchanges] == ["POST", "POST"]
    answered = replay.answer("POST", "/v1/responses", first)
    assert isinstance(answered, Exchange) and answered.number == 1
    assert b"response.completed" in b"".join(p.data for p in answered.pieces)  # type: ignore[misc]
    # the same request again: its exchange has answered, and the session is not over
    again = replay.answer("POST", "/v1/responses", first)
    assert isinstance(again, Miss) and "has answered already" in again.message
    last = replay.answer("POST", "/v1/responses?ignored=1", second)  # the query is left out
    assert isinstance(last, Exchange) and last.number == 2
    assert json.loads(last.pieces[0].data)["id"] == "resp_68a1beef"
    # once every exchange has answered, the session starts over
    assert isinstance(replay.answer("POST", "/v1/responses", first), Exchange)


def test_a_changed_tool_is_a_miss_naming_its_path_and_no_value(capture: Path) -> None:
    first, _ = requests_of(SESSION)
    changed = copy.deepcopy(first)
    changed["tools"][0]["parameters"]["properties"]["secret_field_name"] = {"type": "string"}
    changed["temperature"] = 0.123456
    missed = load(capture).answer("POST", "/v1/responses", changed)
    assert isinstance(missed, Miss)
    assert missed.message.startswith("replay miss: POST /v1/responses matches no recorded")
    assert "the nearest, #1 (POST /v1/responses, flow " in missed.message
    assert "tools[]{function}.parameters" in missed.message and "temperature" in missed.message
    assert "secret_field_name" not in missed.message and "0.123456" not in missed.message


def test_a_request_to_a_path_never_recorded_is_a_miss(capture: Path) -> None:
    missed = load(capture).answer("GET", "/v1/models", None)
    assert isinstance(missed, Miss)
    assert "the capture holds no GET request" in missed.message


def recording(body: Any, kind: str = "conversation") -> Recording:
    exchange = Exchange(1, "flow-1", "POST", "/backend-api/f/conversation", kind, body,
                        pieces=[])  # fmt: skip
    return Recording([exchange], [])


def test_what_a_client_mints_per_run_is_left_out_and_its_ids_echoed_back() -> None:
    recorded = {"action": "next", "app_attest_challenge": "one-time-a", "messages": [
        {"id": "6b1c2d3e-0000-4000-8000-000000000001", "author": {"role": "user"},
         "create_time": 1.5, "content": {"content_type": "text", "parts": ["hi"]}}]}  # fmt: skip
    live = copy.deepcopy(recorded)
    live["app_attest_challenge"] = "one-time-b"
    live["messages"][0].update(id="9f9f9f9f-1111-4000-8000-000000000002", create_time=99.0)
    replay = recording(recorded)
    assert isinstance(replay.answer("POST", "/backend-api/f/conversation", live), Exchange)
    echoed = b'{"message": {"id": "6b1c2d3e-0000-4000-8000-000000000001"}}'
    assert (
        replay.translate(echoed) == b'{"message": {"id": "9f9f9f9f-1111-4000-8000-000000000002"}}'
    )


def test_a_placeholder_stands_for_the_secret_the_client_sends() -> None:
    assert same_scalar("Bearer <redacted:1bcb253baf80>", "Bearer sk-proj-abc")
    assert not same_scalar("Bearer <redacted:1bcb253baf80>", "Basic sk-proj-abc")
    assert same_scalar("<redacted:2884379f94c5>", {"type": "integer"})  # a whole value redacted
    assert not same_scalar(1, True) and same_scalar(1, 1.0) and not same_scalar("1", 1)
    recorded = {"model": "gpt-5.1", "tools": [{"type": "function", "name": "f", "parameters": {
        "type": "object", "properties": {"token_budget": "<redacted:2884379f94c5>"}}}]}  # fmt: skip
    live = copy.deepcopy(recorded)
    live["tools"][0]["parameters"]["properties"]["token_budget"] = {"type": "integer"}
    assert isinstance(recording(recorded, "responses").answer(
        "POST", "/backend-api/f/conversation", live), Exchange)  # fmt: skip


def test_the_paths_that_differ_are_written_as_diff_writes_them() -> None:
    a = {"input": [{"type": "message", "role": "user", "content": "x"}], "store": True,
         "tools": [{"type": "function", "name": "f", "parameters": {"a": 1}}]}  # fmt: skip
    b = copy.deepcopy(a)
    b["store"] = "yes"
    b["tools"][0]["parameters"] = {"b": 2}
    b["extra"] = 1
    b["input"].append({"type": "message", "role": "user", "content": "y"})
    paths = list(differences("request:responses", a, b, same_scalar))
    assert paths == ["input", "store", "tools[]{function}.parameters", "extra"]


@pytest.mark.process
def test_the_replay_server_sends_the_recorded_bytes_and_a_miss_as_the_api_refuses(
    capture: Path,
) -> None:
    first, _ = requests_of(SESSION)
    proc = subprocess.Popen([sys.executable, "-m", "convtap.cli", "mock", "--replay", str(capture),
                             "--port", "0", "--timing", "recorded"], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout is not None
    match = re.search(r":(\d+) \(replaying 2 recorded requests\)", proc.stdout.readline())
    assert match is not None
    try:
        conn = http.client.HTTPConnection("127.0.0.1", int(match.group(1)), timeout=30)
        changed = json.dumps({**first, "model": "gpt-4"})
        conn.request("POST", "/v1/responses", changed, {"content-type": "application/json"})
        refused = conn.getresponse()
        error = json.loads(refused.read())["error"]
        assert refused.status == 400 and error["code"] == "replay_miss"
        assert error["type"] == "invalid_request_error"
        assert "the nearest, #1 (POST /v1/responses" in error["message"]
        assert error["message"].endswith("differs at model")
        conn.request(
            "POST", "/v1/responses", json.dumps(first), {"content-type": "application/json"}
        )
        response = conn.getresponse()
        body = response.read()
        assert response.status == 200 and response.getheader("content-type") == "text/event-stream"
        recorded = json.loads(SESSION.read_text())["log"]["entries"][0]["response"]["content"]
        assert body == recorded["text"].encode()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run"], "Missing argument '-- COMMAND [ARG]...'"),
        (["run", "--", "no-such-command-here"], "no-such-command-here: command not found"),
        (["run", "--", "./no/such/file"], "./no/such/file: no such file"),
        (["run", "--upstream", "nowhere", "--", "true"], "--upstream nowhere: not a URL"),
        (["run", "--fail-on", "info", "--", "true"], "Invalid value for '--fail-on'"),
        (["mock", "--timing", "recorded"], "--timing goes with --replay"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(args: list[str], said: str) -> None:
    done = convtap(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and said in done.stderr


def test_a_capture_that_cannot_be_replayed_is_one_line_and_exit_2(
    tmp_path: Path, capture: Path
) -> None:
    text = tmp_path / "notes.db"
    text.write_text("not a database")
    empty = tmp_path / "empty.db"
    close(connect(empty))  # a capture, with nothing in it
    cases = [
        (["--replay", str(tmp_path / "missing.db")], "--replay: no database at"),
        (["--replay", str(text)], "is not a"),
        (["--replay", str(tmp_path / "missing.har")], "--replay: "),
        (["--replay", str(empty)], "holds no request to replay"),
        (["--replay", str(capture), "--scenario", "plain"], "--scenario plays a scenario"),
        (["--replay", str(capture), "--lenient"], "--lenient plays a scenario"),
    ]
    for args, said in cases:
        done = convtap("mock", "--port", "0", *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert said in done.stderr, done.stderr


@pytest.mark.process
def test_run_with_a_database_that_is_no_capture_is_one_line_and_exit_2(tmp_path: Path) -> None:
    text = tmp_path / "notes.db"
    text.write_text("not a database")
    done = subprocess.run([sys.executable, "-m", "convtap.cli", "run", "--db", str(text), "--",
                           "true"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "is not a SQLite database" in done.stderr
