"""A relay between a WebSocket-mode client and an HTTP upstream, recorded on both sides (the
recipe of README.md, "Test a relay"): a small relay written here (each `response.create` frame
becomes a streamed `POST /v1/responses`, its events frames back), a real `mitmdump` with the addon
in front of it and another behind it, `convtap mock` as the upstream. Both sides are audited and
diffed; a relay that nulls `previous_response_id` is caught behind it as
`responses-chain-broken`."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from convtap.ingest.capture import audit_capture
from convtap.mock.server import MockServer
from convtap.wire.sse import SSEParser
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from tornado.web import Application
from tornado.websocket import WebSocketHandler, websocket_connect

from tests.harness import mitmdump
from tests.runner import convtap

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function", "name": "get_weather", "parameters": CITY}


class RelaySocket(WebSocketHandler):
    """WebSocket mode in, HTTP out: what the gateways of the field do (and, with `nulls`, the
    bug they ship: the chain's id lost on the way)."""

    def initialize(self, upstream: str, nulls: bool) -> None:
        self.upstream, self.nulls = upstream, nulls

    async def on_message(self, message: str | bytes) -> None:
        create = json.loads(message)
        body = {k: v for k, v in create.items() if k != "type"} | {"stream": True}
        if self.nulls and "previous_response_id" in body:
            body["previous_response_id"] = None
        status, data = await asyncio.get_running_loop().run_in_executor(None, self.post, body)
        if status != 200:
            await self.write_message(json.dumps({"type": "error", "status": status,
                                                 **json.loads(data)}))  # fmt: skip
            return
        for event in SSEParser().feed(data):
            await self.write_message(event.data)

    def post(self, body: dict[str, Any]) -> tuple[int, bytes]:
        parts = urlsplit(self.upstream)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        conn.request("POST", "/v1/responses", json.dumps(body),
                     {"content-type": "application/json"})  # fmt: skip
        reply = conn.getresponse()
        data = reply.read()
        conn.close()
        return reply.status, data


@contextmanager
def relay(upstream: str, *, nulls: bool = False) -> Iterator[str]:
    """The relay on 127.0.0.1, in a thread of its own; yields its URL."""
    ready = threading.Event()
    found: dict[str, Any] = {}

    def serve() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        sockets = bind_sockets(0, address="127.0.0.1")
        args = {"upstream": upstream, "nulls": nulls}
        server = HTTPServer(Application([(r"/v1/responses", RelaySocket, args)]))
        server.add_sockets(sockets)
        found.update(loop=loop, port=sockets[0].getsockname()[1], server=server)
        ready.set()
        loop.run_forever()
        server.stop()
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{found['port']}"
    finally:
        found["loop"].call_soon_threadsafe(found["loop"].stop)
        thread.join(10)


async def weather_session(url: str) -> list[dict[str, Any]]:
    """A WebSocket-mode client: a call, then its output with previous_response_id."""
    socket = await websocket_connect(url.replace("http", "ws") + "/v1/responses")
    last: list[dict[str, Any]] = []

    async def turn(**body: Any) -> dict[str, Any]:
        await socket.write_message(json.dumps({"type": "response.create", "model": "m", **body}))
        while True:
            frame = await socket.read_message()
            assert isinstance(frame, str)
            event = json.loads(frame)
            if event["type"] in ("response.completed", "error"):
                last.append(event)
                return event

    first = (await turn(input="weather in Lisbon?", tools=[WEATHER]))["response"]
    (fc,) = [i for i in first["output"] if i["type"] == "function_call"]
    output = {"type": "function_call_output", "call_id": fc["call_id"], "output": "21 C"}
    await turn(previous_response_id=first["id"], input=[output], tools=[WEATHER])
    socket.close()
    return last


def recorded(tmp_path: Path, *, nulls: bool) -> tuple[Path, Path, list[dict[str, Any]]]:
    front, behind = tmp_path / "front", tmp_path / "behind"
    front.mkdir()
    behind.mkdir()
    with (
        MockServer("weather", seed=1) as mock,
        mitmdump(behind, f"reverse:{mock.url}") as back,
        relay(back.url, nulls=nulls) as gateway,
        mitmdump(front, f"reverse:{gateway}") as ahead,
    ):
        ends = asyncio.run(weather_session(ahead.url))
        ahead.stop()
        back.stop()
    return ahead.db, back.db, ends


def rules_of(db: Path) -> list[str]:
    return sorted(f.rule for f in audit_capture(db).findings)


def test_a_relay_recorded_on_both_sides_audits_clean_and_diffs_to_no_break(
    tmp_path: Path,
) -> None:
    front, behind, ends = recorded(tmp_path, nulls=False)
    assert [e["type"] for e in ends] == ["response.completed", "response.completed"]
    assert rules_of(front) == [] and rules_of(behind) == []
    diffed = convtap("diff", "--fail-on", "breaking", str(front), str(behind))
    assert diffed.returncode == 0, diffed.stdout + diffed.stderr


def test_a_relay_that_nulls_previous_response_id_is_caught_behind_it(tmp_path: Path) -> None:
    front, behind, ends = recorded(tmp_path, nulls=True)
    assert ends[-1]["type"] == "error"  # the upstream refused the broken chain
    assert "responses-chain-broken" in rules_of(behind)
    assert "responses-chain-broken" not in rules_of(front)  # the client sent the chain whole
    diffed = convtap("diff", "--format", "json", "--fail-on", "never", str(front), str(behind))
    changes = json.loads(diffed.stdout)["changes"]
    assert any(c["path"] == "previous_response_id" for c in changes), changes
