"""End to end: a real mitmdump with the addon, `convtap mock` upstream, a real HTTP client."""

from __future__ import annotations

import contextlib
import gzip
import http.client
import os
import signal
import sqlite3
import ssl
import threading
from pathlib import Path

import pytest
from convtap.mock.refclient import RefClient
from convtap.mock.server import MockServer
from convtap.wire.turn import decode_turn

from tests.harness import mitmdump, post_stream, read_all, read_until, wait_for
from tests.seeds import user_turn

CONVERSATION = "/backend-api/f/conversation"


def test_stream_reaches_the_client_byte_exact_and_unbuffered(tmp_path: Path) -> None:
    with (
        MockServer("alefita_way", hold_after=3, seed=1) as mock,
        mitmdump(tmp_path, f"reverse:{mock.url}") as proxy,
    ):
        conn, response = post_stream(proxy.port, CONVERSATION, user_turn())
        received = bytearray()
        # The mock holds everything after its third event until the go-ahead: the client can
        # only read an event now if the proxy forwarded it at once.
        read_until(response, b"\n\n", received)
        assert mock.wait_held(1) and mock.holding == 1
        mock.go()
        body = read_all(response, received)
        conn.close()
        ((path, sent),) = mock.sent
        assert path == CONVERSATION and body == sent
        proxy.stop()
        calls = decode_turn([body]).tool_calls()
        assert proxy.rows("SELECT call_id, tool, complete FROM tool_calls") == [
            (calls[0].call_id, "alefita_way", 1)
        ]
        assert proxy.rows("SELECT done, stream_complete, truncated, legs FROM turns") == [
            (1, 1, 0, 1)
        ]
        assert any("call    local.alefita_way" in line for line in proxy.lines)


def test_a_session_is_recorded_paired_and_accepted(tmp_path: Path) -> None:
    with MockServer("alefita_way") as mock, mitmdump(tmp_path, f"reverse:{mock.url}") as proxy:
        summary = RefClient(proxy.url).run()
        assert summary.accepted
        proxy.stop()
        assert proxy.rows(
            "SELECT call_id, return_id, answered, accepted, continued FROM call_ledger"
        ) == [(summary.call_id, summary.return_id, 1, 1, 1)]
        assert proxy.rows("SELECT body_call_id, parent_message_id, tool FROM tool_returns") == [
            (summary.call_id, summary.call_id, "alefita_way")
        ]
        kinds = sorted(k for (k,) in proxy.rows("SELECT kind FROM flows"))
        assert {"conversation", "prepare", "sentinel", "conversation-get"} <= set(kinds)
        assert proxy.rows(
            "SELECT count(*) FROM conversation_nodes WHERE node_id = ?", summary.return_id
        ) == [(1,)]
        assert proxy.rows("SELECT count(DISTINCT name) FROM tool_signatures") == [(2,)]
        assert any(line.startswith("return  alefita_way") for line in proxy.lines)


def test_https_in_regular_proxy_mode(tmp_path: Path) -> None:
    cert = tmp_path / "upstream-ca.pem"
    with (
        MockServer("alefita_way", tls=True, cert_file=cert) as mock,
        mitmdump(tmp_path, "regular", "ssl_insecure=true") as proxy,
    ):
        client = RefClient(mock.url, proxy=proxy.url, cafile=proxy.ca)
        summary = client.run()
        assert summary.accepted and mock.url.startswith("https://")
        proxy.stop()
        assert proxy.rows("SELECT answered, accepted FROM call_ledger") == [(1, 1)]
        assert proxy.rows("SELECT DISTINCT host FROM flows") == [("127.0.0.1",)]


def test_websocket_handoff_carries_the_call(tmp_path: Path) -> None:
    with (
        MockServer("websocket") as mock,
        mitmdump(tmp_path, f"reverse:{mock.url}", "keep_host_header=true") as proxy,
    ):
        summary = RefClient(proxy.url).run()
        assert summary.websocket and summary.accepted
        proxy.stop()
        assert proxy.rows("SELECT kind FROM flows WHERE kind = 'websocket'")
        assert proxy.rows("SELECT count(*) FROM events WHERE event = 'ws:server'")[0][0] > 3
        ((topic, legs),) = proxy.rows("SELECT ws_topic, legs FROM turns WHERE ws_topic IS NOT NULL")
        assert topic.startswith("conversation-turn-") and legs == 2
        assert proxy.rows("SELECT call_id, answered FROM call_ledger") == [(summary.call_id, 1)]
        (url,) = proxy.rows("SELECT url FROM flows WHERE kind = 'websocket'")[0]
        assert "verify=%3Credacted%3A" in url or "verify=<redacted:" in url


def test_a_resume_leg_continues_its_turn(tmp_path: Path) -> None:
    with MockServer("resume") as mock, mitmdump(tmp_path, f"reverse:{mock.url}") as proxy:
        summary = RefClient(proxy.url).run()
        assert summary.resumes == 1
        proxy.stop()
        rows = proxy.rows(
            "SELECT t.legs, t.done, t.truncated FROM turns t JOIN flows f "
            "ON f.turn_id = t.id WHERE f.kind = 'resume'"
        )
        assert rows == [(2, 1, 0)]
        ((outcome,),) = proxy.rows(
            "SELECT outcome FROM flows WHERE kind = 'conversation' AND turn_id IN "
            "(SELECT turn_id FROM flows WHERE kind = 'resume')"
        )
        assert "closed" in outcome  # the upstream cut the first leg inside an event


def test_gzip_is_passed_through_and_decoded_for_the_record(tmp_path: Path) -> None:
    with (
        MockServer("alefita_way", gzip=True) as mock,
        mitmdump(tmp_path, f"reverse:{mock.url}") as proxy,
    ):
        conn, response = post_stream(
            proxy.port, CONVERSATION, user_turn(), {"Accept-Encoding": "gzip"}
        )
        assert response.getheader("content-encoding") == "gzip"
        body = read_all(response, bytearray())
        conn.close()
        assert body == mock.sent[0][1]
        call = decode_turn([gzip.decompress(body)]).tool_calls()[0]
        proxy.stop()
        assert proxy.rows("SELECT call_id FROM tool_calls") == [(call.call_id,)]


def test_client_abort_mid_stream(tmp_path: Path) -> None:
    with (
        MockServer("alefita_way", hold_after=4) as mock,
        mitmdump(tmp_path, f"reverse:{mock.url}") as proxy,
    ):
        conn, response = post_stream(proxy.port, CONVERSATION, user_turn())
        read_until(response, b"\n\n", bytearray())
        assert mock.wait_held(1)
        conn.close()  # the client goes away in the middle of the stream
        # the proxy sees it go while the upstream still holds the rest
        assert wait_for(lambda: proxy.rows("SELECT outcome FROM flows WHERE outcome IS NOT NULL"))
        mock.go()
        proxy.stop()
        ((outcome,),) = proxy.rows("SELECT outcome FROM flows")
        assert "disconnect" in outcome.lower() or "closed" in outcome.lower()
        assert proxy.rows("SELECT done FROM turns") == [(0,)]
        assert proxy.rows("SELECT sum(count) FROM events")[0][0] >= 1


def test_upstream_dies_mid_stream(tmp_path: Path) -> None:
    with (
        MockServer("alefita_way", die_after=6) as mock,
        mitmdump(tmp_path, f"reverse:{mock.url}") as proxy,
    ):
        conn, response = post_stream(proxy.port, CONVERSATION, user_turn())
        received = bytearray()
        with contextlib.suppress(http.client.IncompleteRead, ConnectionError):
            read_all(response, received)  # the body breaks off where the upstream died
        conn.close()
        assert received and mock.sent[0][1].startswith(bytes(received))
        assert wait_for(lambda: proxy.rows("SELECT outcome FROM flows WHERE outcome IS NOT NULL"))
        proxy.stop()
        assert proxy.rows("SELECT done FROM turns") == [(0,)]
        assert proxy.rows("SELECT sum(count) FROM events")[0][0] == 6


def test_kill_9_mid_stream_leaves_a_database_that_opens(tmp_path: Path) -> None:
    with (
        MockServer("alefita_way", hold_after=8) as mock,
        mitmdump(tmp_path, f"reverse:{mock.url}") as proxy,
    ):
        conn, response = post_stream(proxy.port, CONVERSATION, user_turn())
        read_until(response, b"\n\n", bytearray())
        assert mock.wait_held(1)
        # (the last events may be held back by the redaction: the text they end may go on)
        assert wait_for(lambda: (proxy.rows("SELECT sum(count) FROM events")[0][0] or 0) > 0)
        os.kill(proxy.process.pid, signal.SIGKILL)
        proxy.process.wait(10)
        mock.go()
        conn.close()
        with sqlite3.connect(proxy.db) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert 0 < db.execute("SELECT sum(count) FROM events").fetchone()[0] <= 8
            assert db.execute("SELECT kind FROM flows").fetchall() == [("conversation",)]


def test_twenty_concurrent_sessions(tmp_path: Path) -> None:
    with MockServer("alefita_way") as mock, mitmdump(tmp_path, f"reverse:{mock.url}") as proxy:
        results: list[object] = []

        def session() -> None:
            try:
                results.append(RefClient(proxy.url, timeout=60).run())
            except Exception as exc:  # reported below
                results.append(exc)

        threads = [threading.Thread(target=session) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert len(results) == 20
        assert [r for r in results if isinstance(r, Exception)] == []
        proxy.stop()
        assert proxy.rows("SELECT count(*), sum(answered), sum(accepted) FROM call_ledger") == [
            (20, 20, 20)
        ]
        assert proxy.rows("SELECT count(*) FROM flows WHERE failure IS NOT NULL") == [(0,)]


def test_tls_context_is_real(tmp_path: Path) -> None:
    """The HTTPS test above trusts only the throw-away CA: a client without it fails."""
    cert = tmp_path / "ca.pem"
    with (
        MockServer("plain", tls=True, cert_file=cert) as mock,
        mitmdump(tmp_path, "regular", "ssl_insecure=true") as proxy,
    ):
        conn = http.client.HTTPSConnection(
            "127.0.0.1", proxy.port, timeout=10, context=ssl.create_default_context()
        )
        conn.set_tunnel("127.0.0.1", mock.port)
        with pytest.raises(ssl.SSLError):
            conn.request("GET", "/backend-api/conversation/x")
        conn.close()


def test_convtap_record_prints_the_session_and_flushes_on_ctrl_c(tmp_path: Path) -> None:
    """`convtap record` as a user runs it: the banner, a line per call, return and finding,
    and Ctrl-C (SIGINT) flushing the database before it exits 0."""
    import re
    import subprocess
    import sys

    db = tmp_path / "live.db"
    with MockServer("alefita_way") as mock:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "convtap.cli",
                "record",
                "--mode",
                f"reverse:{mock.url}",
                "--listen-port",
                "0",
                "--db",
                str(db),
                "--set",
                f"confdir={tmp_path / 'conf'}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        lines: list[str] = []
        port = None
        for line in proc.stdout:
            lines.append(line)
            if (match := re.search(r"proxy listening at 127\.0\.0\.1:(\d+)", line)) is not None:
                port = int(match.group(1))
                break
        assert port is not None, "".join(lines)
        assert any("convtap recording into" in line for line in lines)
        client = RefClient(f"http://127.0.0.1:{port}")
        good, bad = client.run(), client.run(faulty=True)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert f"call    local.alefita_way  {good.call_id}" in out
    assert f"return  alefita_way  {bad.return_id}" in out
    assert "finding error   return-recipient" in out
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*), sum(answered) FROM call_ledger").fetchone() == (2, 2)
        rules = {r for (r,) in conn.execute("SELECT rule FROM findings")}
    assert {"return-recipient", "return-call-id"} <= rules
