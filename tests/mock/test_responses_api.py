"""The mock's Responses API as the real one behaves (docs/protocol.md, "What the socket and the
store promise"): its endpoints beside create, `store: false` and the per-socket cache, error
frames with string codes, one response in flight per socket lane, and never a call of a tool the
client did not declare."""

from __future__ import annotations

import asyncio
import http.client
import json
from typing import Any
from urllib.parse import urlsplit

from convtap.mock.server import MockServer
from tornado.websocket import WebSocketClientConnection, websocket_connect

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function", "name": "get_weather", "parameters": CITY}


def call(url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    conn.request(method, path, json.dumps(body) if body is not None else None,
                 {"content-type": "application/json"})  # fmt: skip
    reply = conn.getresponse()
    data = json.loads(reply.read())
    conn.close()
    return reply.status, data


async def until_done(socket: WebSocketClientConnection) -> list[dict[str, Any]]:
    events = []
    while True:
        frame = await socket.read_message()
        assert isinstance(frame, str)
        events.append(json.loads(frame))
        if events[-1]["type"] in ("response.completed", "error"):
            return events


async def create(socket: WebSocketClientConnection, **body: Any) -> list[dict[str, Any]]:
    await socket.write_message(json.dumps({"type": "response.create", "model": "m", **body}))
    return await until_done(socket)


def test_stored_responses_are_read_listed_compacted_and_deleted() -> None:
    with MockServer("weather", seed=1) as mock:
        _, first = call(mock.url, "POST", "/v1/responses",
                        {"model": "m", "input": [{"role": "user", "content": "weather?"}],
                         "tools": [WEATHER]})  # fmt: skip
        rid = first["id"]
        assert call(mock.url, "GET", f"/v1/responses/{rid}") == (200, first)
        status, items = call(mock.url, "GET", f"/v1/responses/{rid}/input_items?order=asc")
        assert status == 200 and [i["role"] for i in items["data"]] == ["user"]
        assert items["first_id"] == items["data"][0]["id"]
        status, compacted = call(mock.url, "POST", "/v1/responses/compact",
                                 {"model": "m", "previous_response_id": rid})  # fmt: skip
        assert status == 200 and compacted["object"] == "response.compaction"
        assert compacted["output"][-1]["type"] == "compaction"
        assert call(mock.url, "DELETE", f"/v1/responses/{rid}")[1]["deleted"] is True
        status, gone = call(mock.url, "GET", f"/v1/responses/{rid}")
        assert status == 404 and gone["error"]["code"] == "response_not_found"
        _, unstored = call(mock.url, "POST", "/v1/responses",
                           {"model": "m", "input": "hi", "store": False})  # fmt: skip
        assert unstored["store"] is False
        assert call(mock.url, "GET", f"/v1/responses/{unstored['id']}")[0] == 404


def test_a_store_false_response_lives_only_in_its_sockets_cache() -> None:
    async def run(url: str) -> None:
        ws = url.replace("http", "ws") + "/v1/responses"
        one, two = await websocket_connect(ws), await websocket_connect(ws)
        made = await create(one, input="weather?", tools=[WEATHER], store=False)
        response = made[-1]["response"]
        (fc,) = [i for i in response["output"] if i["type"] == "function_call"]
        answer = [{"type": "function_call_output", "call_id": fc["call_id"], "output": "21"}]
        elsewhere = await create(two, previous_response_id=response["id"], input=answer)
        assert elsewhere[-1]["error"]["code"] == "previous_response_not_found"
        over_http = call(
            url,
            "POST",
            "/v1/responses",
            {"model": "m", "previous_response_id": response["id"], "input": answer},
        )
        assert over_http[1]["error"]["code"] == "previous_response_not_found"
        # on its own socket a wrong continuation fails, and evicts the response it named
        wrong = [{**answer[0], "call_id": "call_nope"}]
        failed = await create(one, previous_response_id=response["id"], input=wrong)
        assert failed[-1]["type"] == "error" and isinstance(failed[-1]["error"]["code"], str)
        retry = await create(one, previous_response_id=response["id"], input=answer)
        assert retry[-1]["error"]["code"] == "previous_response_not_found"
        one.close()
        two.close()

    with MockServer("weather", seed=1) as mock:
        asyncio.run(run(mock.url))


def test_a_second_create_while_one_streams_is_refused_on_its_lane_only() -> None:
    async def run(url: str) -> None:
        socket = await websocket_connect(url.replace("http", "ws") + "/v1/responses")
        first = {"type": "response.create", "model": "m", "input": "one"}
        await socket.write_message(json.dumps(first))
        await socket.write_message(json.dumps({**first, "input": "two"}))
        await socket.write_message(json.dumps({**first, "input": "three", "stream_id": "B"}))
        frames = []
        while sum(f["type"] == "response.completed" for f in frames) < 2:
            frame = await socket.read_message()
            assert isinstance(frame, str)
            frames.append(json.loads(frame))
        errors = [f for f in frames if f["type"] == "error"]
        assert [e["error"]["code"] for e in errors] == ["response_in_progress"]
        assert "stream_id" not in errors[0]  # the default lane's, not lane B's
        lanes = [f.get("stream_id") for f in frames if f["type"] == "response.completed"]
        assert set(map(str, lanes)) == {"B", "None"}
        socket.close()

    with MockServer("plain", seed=1, delay=0.02) as mock:
        asyncio.run(run(mock.url))


def test_a_tool_the_api_refuses_is_refused_and_one_it_takes_is_taken() -> None:
    with MockServer("declared", seed=1) as mock:
        unknown = call(
            mock.url,
            "POST",
            "/v1/responses",
            {"model": "m", "input": "hi", "tools": [{"type": "telepathy"}]},
        )
        nameless = call(
            mock.url,
            "POST",
            "/v1/responses",
            {"model": "m", "input": "hi", "tools": [{"type": "function"}]},
        )
        bare = call(
            mock.url,
            "POST",
            "/v1/responses",
            {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f"}]},
        )
    assert unknown[0] == 400 and unknown[1]["error"]["param"] == "tools[0].type"
    assert unknown[1]["error"]["code"] == "invalid_value"
    assert nameless[0] == 400 and nameless[1]["error"]["code"] == "missing_required_parameter"
    assert nameless[1]["error"]["param"] == "tools[0].name"
    assert bare[0] == 200 and bare[1]["output"][0]["name"] == "f"


def test_the_weather_scenario_calls_only_what_was_declared() -> None:
    with MockServer("weather", seed=1) as mock:
        _, nothing = call(mock.url, "POST", "/v1/responses", {"model": "m", "input": "hi"})
        _, weather = call(mock.url, "POST", "/v1/responses",
                          {"model": "m", "input": "hi", "tools": [WEATHER]})  # fmt: skip
    assert [i["type"] for i in nothing["output"]] == ["message"]
    assert [i["type"] for i in weather["output"]] == ["function_call"]  # no tool search
