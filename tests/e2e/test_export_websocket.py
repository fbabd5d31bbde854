"""A turn handed off to the WebSocket survives `convtap export` and `convtap import`: its frames
go out as Chrome's `_webSocketMessages` and come back through convtap's HAR reader."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from convtap.mock.refclient import RefClient
from convtap.mock.server import MockServer

from tests.harness import mitmdump
from tests.runner import convtap


def test_a_websocket_turn_comes_back_from_its_export(tmp_path: Path) -> None:
    with (
        MockServer("websocket") as mock,
        mitmdump(tmp_path, f"reverse:{mock.url}", "keep_host_header=true") as proxy,
    ):
        summary = RefClient(proxy.url).run()
    assert summary.websocket and summary.call_id
    ((legs,),) = proxy.rows("SELECT legs FROM turns WHERE ws_topic IS NOT NULL")
    assert legs == 2  # the call came on the WebSocket
    har = tmp_path / "export.har"
    assert convtap("export", "--db", str(proxy.db), "--output", str(har)).returncode == 0
    entries = json.loads(har.read_text())["log"]["entries"]
    assert any(e.get("_webSocketMessages") for e in entries)
    again = tmp_path / "again.db"
    assert convtap("import", str(har), "--db", str(again)).returncode == 0
    with sqlite3.connect(again) as conn:
        assert conn.execute("SELECT legs FROM turns WHERE ws_topic IS NOT NULL").fetchall() == [
            (2,)
        ]
    calls = [
        (row["call_id"], row["answered"], row["accepted"])
        for row in json.loads(convtap("calls", "--db", str(again), "--format", "json").stdout)
    ]
    assert calls == [(summary.call_id, True, True)]
