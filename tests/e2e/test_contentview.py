"""The `convtap` content view: flows saved by a real mitmdump, shown again by a second mitmdump
with the addon, read decoded (messages, tool calls, WebSocket turn frames) instead of raw
`data:` lines; requests keep mitmproxy's JSON view; a body that is not a stream reads as an
error line, never a traceback."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from convtap.mock.refclient import RefClient, RunSummary
from convtap.mock.server import MockServer
from convtap.proxy.contentview import render
from convtap.proxy.tap import Tap
from mitmproxy import version

from tests.harness import ADDON, MITMDUMP, free_port, mitmdump, wait_for


def show(flows: Path, tmp_path: Path, *settings: str) -> str:
    args = [str(MITMDUMP), "-nr", str(flows), "-s", str(ADDON), "--set", "flow_detail=3",
            "--set", f"convtap_db={tmp_path / 'shown.db'}",
            "--set", f"confdir={tmp_path / 'conf'}"]  # fmt: skip
    for setting in settings:
        args += ["--set", setting]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@dataclass
class Saved:
    flows: Path
    summary: RunSummary


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Saved:
    """A WebSocket-handoff session through a real mitmdump that saves its flows (`-w`)."""
    tmp_path = tmp_path_factory.mktemp("saved")
    flows = tmp_path / "flows.mitm"
    with (
        MockServer("websocket") as mock,
        mitmdump(
            tmp_path, f"reverse:{mock.url}", "keep_host_header=true", f"save_stream_file={flows}"
        ) as proxy,
    ):
        summary = RefClient(proxy.url).run()
    assert summary.websocket and summary.call_id
    return Saved(flows, summary)


def test_saved_flows_show_decoded(saved: Saved, tmp_path: Path) -> None:
    flows, summary = saved.flows, saved.summary
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


def test_mitmweb_serves_the_decoded_view(saved: Saved, tmp_path: Path) -> None:
    """mitmweb's own endpoints, as its page asks them: the view is listed and renders."""
    port = free_port()
    args = [str(MITMDUMP.with_name("mitmweb")), "-nr", str(saved.flows), "-s", str(ADDON),
            "--set", f"convtap_db={tmp_path / 'web.db'}", "--set", f"confdir={tmp_path / 'conf'}",
            "--set", "web_open_browser=false", "--set", "web_host=127.0.0.1",
            "--set", f"web_port={port}"]  # fmt: skip
    if version.VERSION.split(".")[0] != "11":  # 12 asks for a password (or token)
        args += ["--set", "web_password=convtap"]
    web = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"

    def get(path: str) -> Any:
        with urllib.request.urlopen(f"{base}{path}?token=convtap", timeout=10) as answer:
            return json.loads(answer.read())

    try:
        assert wait_for(lambda: _answers(base), 30), "mitmweb did not start"
        assert wait_for(lambda: len(get("/flows")) > 5, 30)
        flows = get("/flows")
        assert "convtap" in get("/state")["contentViews"]
        (turn, *_) = [f["id"] for f in flows if f["request"]["path"].endswith("f/conversation")]
        (socket,) = [f["id"] for f in flows if "/ws/user/" in f["request"]["path"]]
        shown = json.dumps(get(f"/flows/{turn}/response/content/auto.json"), ensure_ascii=False)
        assert "encoding v1" in shown and "── user → all" in shown
        frames = json.dumps(get(f"/flows/{socket}/messages/content/auto.json"), ensure_ascii=False)
        assert "the turn, ended in this frame:" in frames
        assert f"local tool call: {saved.summary.tool}" in frames
    finally:
        web.terminate()
        web.wait(30)


def _answers(base: str) -> bool:
    try:
        urllib.request.urlopen(base, timeout=2).close()
    except urllib.error.HTTPError:
        return True  # it answers (12 asks for the password first)
    except OSError:
        return False
    return True


def test_render_survives_bad_bodies() -> None:
    assert "TRUNCATED" in render(b'data: {"v": ')
    assert "error" in render(b"\xff\xfe garbage").lower() or "0 events" in render(b"\xff\xfe")
    frame = render(
        b'[{"type": "conversation-turn-x", "payload": ', flow=None, websocket_message=object()
    )
    assert frame.startswith("WebSocket frame") and "error" in frame


def test_the_kept_copy_has_a_bound() -> None:
    failures: list[str] = []
    tap = Tap("f", "", lambda data, at: None, lambda flow, exc: failures.append(str(exc)), keep=10)
    assert tap(b"data: ") == b"data: " and tap(b"{}") == b"{}" and tap.body() == b"data: {}"
    assert tap(b"{...}\n\n") == b"{...}\n\n"  # past the bound: the copy goes, the bytes flow on
    assert tap.body() is None and tap(b"more") == b"more" and tap.body() is None
    assert Tap("f", "", lambda data, at: None, lambda flow, exc: None).body() is None  # keep=0
    assert not failures


def test_a_lone_surrogate_in_a_stream_is_shown_as_its_escape(tmp_path: Path) -> None:
    """`{"v": "a\\ud800b"}` is JSON; mitmdump's dumper writes the view as UTF-8, which cannot
    carry the surrogate: it failed with an addon error (and `-nr` exited 1)."""
    from mitmproxy import io
    from mitmproxy.test import tflow

    flow = tflow.tflow(resp=True)
    flow.request.method, flow.request.path = "POST", "/backend-api/f/conversation"
    flow.request.content = b'{"action": "next", "conversation_id": "c", "messages": []}'
    flow.response.headers["content-type"] = "text/event-stream"
    message = {"id": "m1", "author": {"role": "assistant"}, "status": "in_progress",
               "content": {"content_type": "text", "parts": [""]}}  # fmt: skip
    events = [
        ("delta_encoding", '"v1"'),
        ("delta", json.dumps({"p": "", "o": "add", "v": {"message": message}})),
        ("delta", '{"p": "/message/content/parts/0", "o": "append", "v": "a\\ud800b"}'),
    ]
    body = "".join(f"event: {name}\ndata: {data}\n\n" for name, data in events) + "data: [DONE]\n\n"
    flow.response.content = body.encode()
    flows = tmp_path / "flows.mitm"
    with flows.open("wb") as handle:
        io.FlowWriter(handle).add(flow)
    out = show(flows, tmp_path)
    assert "── assistant → all · in_progress · m1" in out and "a\\ud800b" in out
    assert "Traceback" not in out


def test_a_responses_socket_frame_is_shown_decoded() -> None:
    """WebSocket mode: each frame, client or server, one readable block (a create with its
    input and tools, an event with what it carries)."""
    from mitmproxy.test import tflow

    flow = tflow.twebsocketflow()
    flow.request.path = "/v1/responses"
    flow.request.method = "GET"
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    answer = {"type": "function_call_output", "call_id": "call_1", "output": "21"}
    create = {"type": "response.create", "model": "gpt-5.1", "tools": tools,
              "instructions": "Be brief.\nAlways.", "stream_id": "A",
              "input": [{"role": "user", "content": "Weather in Lisboa?"}, answer]}  # fmt: skip
    shown = render(json.dumps(create).encode(), flow, flow.websocket.messages[0])
    assert shown.splitlines() == [
        "response.create: model gpt-5.1 · lane A · 1 tool (get_weather)",
        "── instructions: Be brief.",
        "── user: Weather in Lisboa?",
        "── ↩ function_call_output · call_id call_1: 21",
    ]
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_2", "name": "lookup",
            "namespace": "crm", "arguments": '{"id": 7}'}  # fmt: skip
    done = {"type": "response.output_item.done", "output_index": 0, "item": call}
    assert render(json.dumps(done).encode(), flow, flow.websocket.messages[0]).splitlines() == [
        "response.output_item.done · output 0",
        '── ⚙ function_call crm.lookup · call_id call_2: {"id": 7}',
    ]
    error = {"type": "error", "status": 400, "error": {"message": "No tool call found"}}
    assert "error · status 400: No tool call found" in render(
        json.dumps(error).encode(), flow, flow.websocket.messages[0]
    )


def test_viewing_saved_flows_makes_no_database(saved: Saved, tmp_path: Path) -> None:
    """`mitmdump -nr flows.mitm -s …` with no convtap_db: the flows shown decoded, and no
    `captures/capture.db` made where it runs (it was)."""
    args = [str(MITMDUMP), "-nr", str(saved.flows), "-s", str(ADDON), "--set", "flow_detail=3",
            "--set", f"confdir={tmp_path / 'conf'}"]  # fmt: skip
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "encoding v1" in proc.stdout  # the view still decodes
    assert [p.name for p in work.rglob("*")] == []
