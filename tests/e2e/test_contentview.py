"""The `convtap` content view: flows saved by a real mitmdump, shown again by a second mitmdump
with the addon, read decoded (messages, tool calls, WebSocket turn frames) instead of raw
`data:` lines; requests keep mitmproxy's JSON view; a body that is not a stream reads as an
error line, never a traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

from convtap.mock.refclient import RefClient
from convtap.mock.server import MockServer
from convtap.proxy.contentview import render
from convtap.proxy.tap import Tap

from tests.harness import ADDON, MITMDUMP, mitmdump


def show(flows: Path, tmp_path: Path, *settings: str) -> str:
    args = [str(MITMDUMP), "-nr", str(flows), "-s", str(ADDON), "--set", "flow_detail=3",
            "--set", f"convtap_db={tmp_path / 'shown.db'}",
            "--set", f"confdir={tmp_path / 'conf'}"]  # fmt: skip
    for setting in settings:
        args += ["--set", setting]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_saved_flows_show_decoded(tmp_path: Path) -> None:
    flows = tmp_path / "flows.mitm"
    with (
        MockServer("websocket") as mock,
        mitmdump(
            tmp_path, f"reverse:{mock.url}", "keep_host_header=true", f"save_stream_file={flows}"
        ) as proxy,
    ):
        summary = RefClient(proxy.url).run()
    assert summary.websocket and summary.call_id

    out = show(flows, tmp_path)
    assert "encoding v1" in out and "── user → all" in out  # the conversation answer, decoded
    assert "· turn topic conversation-turn-" in out  # the handed-off leg, frame by frame,
    assert "the turn so far: " in out  # each with where the turn stands after it
    assert "the turn, ended in this frame:" in out  # and the last one with all of it
    assert f"local tool call: {summary.tool}" in out
    assert '"action": "next"' in out  # the request itself stays mitmproxy's JSON
    assert "Traceback" not in out

    # the user's own choice of view wins over ours
    raw = show(flows, tmp_path, "dumper_default_contentview=raw")
    assert "the turn so far" not in raw and "event: delta" in raw


def test_render_survives_bad_bodies() -> None:
    assert "TRUNCATED" in render(b'data: {"v": ')
    assert "error" in render(b"\xff\xfe garbage").lower() or "0 events" in render(b"\xff\xfe")
    frame = render(
        b'[{"type": "conversation-turn-x", "payload": ', flow=None, websocket_message=object()
    )
    assert frame.startswith("WebSocket frame") and "error" in frame


def test_the_kept_copy_has_a_bound() -> None:
    failures: list[str] = []
    tap = Tap("f", "", lambda event: None, lambda flow, exc: failures.append(str(exc)), keep=10)
    assert tap(b"data: ") == b"data: " and tap.kept == b"data: "
    assert tap(b"{...}\n\n") == b"{...}\n\n"  # past the bound: the copy goes, the bytes flow on
    assert tap.kept is None and tap(b"more") == b"more" and tap.kept is None
    assert Tap("f", "", lambda event: None, lambda flow, exc: None).kept is None  # keep=0
    assert not failures
