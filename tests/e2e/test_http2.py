"""HTTP/2 on both sides of the proxy: curl speaks h2 to the recording mitmdump, which speaks h2
to its upstream (a second, plain mitmdump in reverse mode in front of the mock). The bytes arrive
exact and unbuffered, and the turn is recorded."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from convtap.mock.server import MockServer
from convtap.wire.turn import decode_turn

from tests.harness import MITMDUMP, mitmdump, wait_for
from tests.seeds import user_turn

LISTENING = re.compile(r"listening at [\d.*]+:(\d+)")


@contextmanager
def h2_upstream(tmp_path: Path, target: str, lines: list[str]) -> Iterator[int]:
    """A plain mitmdump in reverse mode: TLS with h2 towards us, streaming each chunk on."""
    proc = subprocess.Popen(
        [str(MITMDUMP), "--listen-host", "127.0.0.1", "-p", "0", "--mode", f"reverse:{target}",
         "--set", f"confdir={tmp_path / 'upstream-conf'}", "--set", "stream_large_bodies=1",
         "--set", "flow_detail=1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
    )  # fmt: skip
    assert proc.stdout is not None
    port = None
    for line in proc.stdout:
        if (match := LISTENING.search(line)) is not None:
            port = int(match.group(1))
            break
    assert port is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(20)
        reader.join(5)


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl (with HTTP/2) is not installed")
def test_http2_to_the_client_and_to_the_upstream(tmp_path: Path) -> None:
    out = tmp_path / "body.sse"
    upstream_log: list[str] = []
    with (
        MockServer("alefita_way", hold_after=4, seed=3) as mock,
        h2_upstream(tmp_path, mock.url, upstream_log) as upstream,
        mitmdump(tmp_path, f"reverse:https://127.0.0.1:{upstream}", "ssl_insecure=true") as proxy,
    ):
        curl = subprocess.Popen(
            ["curl", "-sk", "--http2", "--no-buffer", "-o", str(out), "-w", "%{http_version}",
             "-X", "POST", f"https://127.0.0.1:{proxy.port}/backend-api/f/conversation",
             "-H", "content-type: application/json", "--data", json.dumps(user_turn())],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert mock.wait_held(1)
        # Unbuffered: what the mock sent before its hold is at the client while it holds.
        assert wait_for(lambda: out.exists() and out.read_bytes().count(b"\n\n") >= 4)
        held = out.read_bytes()
        assert b"[DONE]" not in held
        mock.go()
        version, _ = curl.communicate(timeout=30)
        assert curl.returncode == 0 and version == "2"
        (sent,) = [body for path, body in mock.sent if path.endswith("f/conversation")]
        assert out.read_bytes() == sent  # byte-exact, through two HTTP/2 hops
        proxy.stop()
    assert any("f/conversation HTTP/2.0" in line for line in upstream_log)  # h2 upstream too
    assert proxy.rows("SELECT kind, status, outcome FROM flows") == [
        ("conversation", 200, "complete")
    ]
    assert proxy.rows("SELECT tool, complete FROM tool_calls") == [("alefita_way", 1)]
    dispatched = decode_turn([sent]).dispatched
    assert proxy.rows("SELECT sum(count) FROM events") == [(dispatched,)]
