"""The mock server (convtap.mock.server, .app, .refclient) driven directly by
the reference client (no proxy), every scenario, gzip, hold, die, TLS."""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import signal
import ssl
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from convtap.mock.app import split_chunks
from convtap.mock.refclient import RefClient, user_message
from convtap.mock.refhttp import ClientError
from convtap.mock.server import MockServer
from convtap.wire.turn import TurnDecoder

REPO = Path(__file__).resolve().parents[2]
ANSWERS = {
    "plain": "Olá! O caminho de Alefita",
    "alefita_way": "Ela devolveu: segundo eco do caminho",
    "handoff": "Continuei no modo Work",
    "websocket": "A ferramenta respondeu: eco pelo websocket",
    "resume": "A ferramenta devolveu: eco depois do corte — retomado",
}


def conversation_posts(received: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in received if r["method"] == "POST" and r["path"].endswith("f/conversation")]


@pytest.mark.parametrize("gzip", [False, True], ids=["identity", "gzip"])
@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_the_reference_client_completes_every_scenario(name: str, gzip: bool) -> None:
    with MockServer(name, gzip=gzip) as server:
        client = RefClient(server.url, timeout=5)
        summary = client.run()
        received = client.request_json("GET", "/_mock/received")
    assert received == server.received  # /_mock/ requests are not recorded
    assert ANSWERS[name] in summary.continuation_text
    assert summary.conversation_id is not None and summary.tree is not None
    posts = conversation_posts(received)
    assert all("app_attest_challenge" in p["body"] for p in posts)
    challenges = [p["body"]["app_attest_challenge"] for p in posts]
    assert len(set(challenges)) == len(challenges)  # never reused
    if name == "plain":
        assert summary.call_id is None and not summary.accepted and len(posts) == 1
        return
    assert summary.accepted
    mapping = summary.tree["mapping"]
    node = mapping[summary.return_id]
    assert node["parent"] == summary.call_id  # the tool node, under the call
    assert node["message"]["author"]["role"] == "tool"
    assert mapping[summary.call_id]["message"]["recipient"] == f"local.{summary.tool}"
    # The server received the return exactly as docs/protocol.md, "The tool return contract"
    # says.
    ret = posts[-1]["body"]
    assert ret["parent_message_id"] == summary.call_id
    assert ret["conversation_id"] == summary.conversation_id
    (message,) = ret["messages"]
    assert message["recipient"] == "all" and message["channel"] == "commentary"
    assert "language" not in message["content"]
    body = json.loads(message["content"]["text"])
    assert list(body) == ["call_id", "result", "tool"]
    assert body["call_id"] == summary.call_id and body["tool"] == summary.tool
    assert message["metadata"] == {"is_visually_hidden_from_conversation": True}
    assert summary.websocket == (name == "websocket")
    assert summary.resumes == (1 if name == "resume" else 0)
    if name == "websocket":
        ws = [r for r in received if r["method"] == "WS"]
        assert ws[0]["body"][0]["type"] == "subscribe"
        assert ws[0]["body"][0]["topic_id"].startswith("conversation-turn-")
    if name == "resume":
        (resume,) = [r for r in received if r["path"].endswith("/f/conversation/resume")]
        assert resume["body"]["conversation_id"] == summary.conversation_id
        assert resume["body"]["offset"] > 0 and resume["headers"]["X-Conduit-Token"]


def test_a_faulty_return_is_accepted_too() -> None:
    with MockServer("alefita_way") as server:
        summary = RefClient(server.url, timeout=5).run(faulty=True)
        ret = conversation_posts(server.received)[-1]["body"]["messages"][0]
    assert summary.accepted  # like the real server: any return continues the turn
    assert ret["recipient"] == "alefita_way" and ret["content"]["language"] == "json"
    body = json.loads(ret["content"]["text"])
    assert "tool" not in body and body["call_id"] != summary.call_id


def stream(server: MockServer, **headers: str) -> tuple[http.client.HTTPResponse, Any]:
    """A raw f/conversation request; the response and its connection."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    body = RefClient(server.url).conversation_body(user_message("oi"), None, None)
    conn.request("POST", "/backend-api/f/conversation", json.dumps(body), headers)
    return conn.getresponse(), conn


def read_events(chunks: Iterator[bytes], turn: TurnDecoder, count: int) -> None:
    """Feed chunks until `count` events are decoded. Blocks on the socket: if the server held
    back what it had sent, this would time out instead of returning."""
    while turn.summary().event_count < count:
        turn.feed(next(chunks))


def chunks_of(response: http.client.HTTPResponse, gzipped: bool) -> Iterator[bytes]:
    inflater = zlib.decompressobj(wbits=31)
    while chunk := response.read1(65536):
        yield inflater.decompress(chunk) if gzipped else chunk


@pytest.mark.parametrize("gzip", [False, True], ids=["identity", "gzip"])
def test_hold_after_sends_the_first_events_and_waits_for_the_go_ahead(gzip: bool) -> None:
    with MockServer("plain", hold_after=3, gzip=gzip) as server:
        response, conn = stream(server, **{"Accept-Encoding": "gzip"})
        assert response.getheader("Content-Encoding") == ("gzip" if gzip else None)
        turn = TurnDecoder()
        chunks = chunks_of(response, gzip)
        read_events(chunks, turn, 3)  # with gzip: decodable at once, thanks to Z_SYNC_FLUSH
        assert server.wait_held(1)  # the server is parked at its hold point ...
        assert turn.summary().event_count == 3 and not turn.summary().done  # ... with 3 events out
        server.go()
        for chunk in chunks:
            turn.feed(chunk)
        turn.end_leg()
        conn.close()
    assert turn.summary().done and turn.summary().stream_complete and not turn.summary().truncated


def test_the_go_endpoint_releases_a_held_stream() -> None:
    with MockServer("alefita_way", hold_after=5) as server:
        response, conn = stream(server)
        turn = TurnDecoder()
        chunks = chunks_of(response, False)
        read_events(chunks, turn, 5)
        assert server.wait_held(1)
        released = RefClient(server.url).request_json("POST", "/_mock/go", {})
        assert released == {"released": 1}
        for chunk in chunks:
            turn.feed(chunk)
        conn.close()
    assert turn.summary().done


def test_die_after_cuts_the_stream_and_the_client_resumes() -> None:
    with MockServer("plain", die_after=4, gzip=True) as server:
        summary = RefClient(server.url, timeout=5).run()
        resumes = [r for r in server.received if r["path"].endswith("/resume")]
    assert summary.resumes == 1 and resumes[0]["body"]["offset"] == 4
    assert ANSWERS["plain"] in summary.continuation_text


def test_a_cut_body_ends_without_done() -> None:
    with MockServer("resume") as server:
        response, conn = stream(server)
        turn = TurnDecoder()
        try:
            while chunk := response.read1(65536):
                turn.feed(chunk)
        except http.client.IncompleteRead:
            pass  # no terminating chunk: the socket was closed mid-body
        turn.end_leg()
        conn.close()
    assert turn.summary().truncated and not turn.summary().done and turn.summary().event_count > 0


def test_tls_with_the_written_certificate(tmp_path: Path) -> None:
    cert = tmp_path / "mock-ca.pem"
    with MockServer("websocket", tls=True, cert_file=cert) as server:
        assert server.url.startswith("https://127.0.0.1:")
        assert cert.read_text().startswith("-----BEGIN CERTIFICATE-----")
        summary = RefClient(server.url, cafile=cert, timeout=5).run()
        assert summary.accepted and summary.websocket  # wss:// too
        with pytest.raises(ssl.SSLCertVerificationError):
            RefClient(server.url, timeout=5).request_json("GET", "/_mock/received")


def test_errors_are_json_statuses() -> None:
    with MockServer("plain") as server:
        client = RefClient(server.url, timeout=5)
        with pytest.raises(ClientError, match="HTTP 404"):
            client.request_json("GET", "/backend-api/conversation/nope")
        with pytest.raises(ClientError, match="HTTP 404"):
            body = {"conversation_id": "nope", "offset": 1}
            list(client.open_stream("/backend-api/f/conversation/resume", body))
        with pytest.raises(ClientError, match="HTTP 404"):
            body = client.conversation_body(user_message("oi"), "nope", None)
            list(client.open_stream("/backend-api/f/conversation", body))
        prepared = client.request_json("POST", "/backend-api/f/conversation/prepare", {})
        assert prepared["status"] == "ok" and prepared["conduit_token"]
        sentinel = client.request_json("POST", "/backend-api/sentinel/chat-requirements/prepare")
        assert sentinel["token"].startswith("gAAAAA") and sentinel["proofofwork"]["required"]


def test_chunks_split_anywhere_and_inside_utf8() -> None:
    data = ("data: olá — 🌿\n\n" * 40).encode()
    chunks = split_chunks(data, random.Random(7))
    assert b"".join(chunks) == data and len(chunks) > 1
    with pytest.raises(UnicodeDecodeError):
        for chunk in chunks:
            chunk.decode()


@pytest.mark.process
def test_the_command_prints_its_address_and_stops_on_sigterm() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "convtap", "mock", "--port", "0", "--scenario", "plain"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            match = re.fullmatch(r"convtap mock listening at (http://127\.0\.0\.1:\d+)\n", line)
            assert match, line
            summary = RefClient(match.group(1), timeout=5).run()
            assert ANSWERS["plain"] in summary.continuation_text
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
