"""The mock's Responses API handlers: what `convtap.mock.responses` says, moved as the real API
moves it (docs/protocol.md, "Responses API", "What the socket and the store promise").

- `POST /v1/responses` (and `/backend-api/codex/responses`): `"stream": true` gets an event
  stream (no `[DONE]`), anything else the response object as JSON;
- `GET` on the same paths upgraded is WebSocket mode: each `response.create` frame gets the same
  response, its events one frame each (with the create's `stream_id`, when it has one). One
  response is in flight per lane: a create that comes while one streams on its lane is refused
  with an error frame. Each socket has its own cache of the responses it made, the only place a
  `store: false` one lives; error frames carry a string `code`;
- `POST /v1/responses/compact`, `GET` and `DELETE /v1/responses/{id}`,
  `GET /v1/responses/{id}/input_items`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from tornado.websocket import WebSocketClosedError

from convtap.mock.app import UNANSWERABLE, Handler, MockState, Socket, StreamHandler, api_error
from convtap.mock.app import parse_body as parse_json
from convtap.mock.responses import socket_cache
from convtap.vocab import RESPONSE_CREATE
from convtap.wire.bounded import Bounded

LANES = 1024  # lanes one socket keeps a stream task for (the least recently used forgotten)
OVERLAP = {"message": "A response is already in progress on this connection; wait for it to "
           "complete before sending another response.create.", "type": "invalid_request_error",
           "param": None, "code": "response_in_progress"}  # fmt: skip


def error_frame(body: dict[str, Any], status: int = 400) -> dict[str, Any]:
    """An API error body as a WebSocket error frame, whose `code` is a string: the API's own,
    or the error's type where the API gives none (docs/protocol.md, "What the mock sends")."""
    error = dict(body.get("error") or {})
    error["code"] = error.get("code") or error.get("type") or "invalid_request_error"
    return {"type": "error", "status": status, "error": error}


class ResponsesHandler(Socket, StreamHandler):
    """`POST …/responses`, and WebSocket mode on `GET` upgraded (see the module's docstring)."""

    def initialize(self, state: MockState) -> None:
        super().initialize(state)
        self.cache = socket_cache()
        self.streams: Bounded[str | None, asyncio.Task[None]] = Bounded(LANES)

    def check_origin(self, origin: str) -> bool:
        return True

    async def on_message(self, message: str | bytes) -> None:
        event = parse_json(message.encode() if isinstance(message, str) else message)
        self.state.record({"method": "WS", "path": self.request.uri, "headers": {},
                           "body": event})  # fmt: skip
        kind = event.get("type") if isinstance(event, dict) else None
        lane = event.get("stream_id") if isinstance(event, dict) else None
        lane = lane if isinstance(lane, str) else None
        if kind == "response.steer":  # the mock does not steer: say so, as the server would
            await self._send_event({"type": "response.steer.failed", "error": {
                "code": "not_supported", "message": "the mock does not steer"}}, lane)  # fmt: skip
            return
        if kind != RESPONSE_CREATE:
            error = api_error(f"unknown client event type {kind!r}")
            await self._send_event(error_frame(error), lane)
            return
        running = self.streams.get(lane)
        if running is not None and not running.done():
            await self._send_event(error_frame({"error": OVERLAP}), lane)
            return
        assert isinstance(event, dict)
        body = {k: v for k, v in event.items() if k not in ("type", "stream_id")}
        refused = self.state.responses.refusal(body, self.cache)
        if refused is not None:  # as the real API over the socket: an error frame, 400
            await self._send_event(error_frame(refused), lane)
            return
        try:
            _, events = self.state.responses.answer_events(body, self.cache)
        except UNANSWERABLE as exc:
            error = api_error(f"the mock cannot answer this: {exc}"[:300])
            await self._send_event(error_frame(error), lane)
            return
        # streamed beside the socket's reading, so that a create sent meanwhile is seen
        self.streams[lane] = asyncio.get_running_loop().create_task(self._frames(events, lane))

    async def _frames(self, events: list[dict[str, Any]], lane: str | None) -> None:
        for n, item in enumerate(events):
            if n == len(events) - 1:  # the lane is free once its last event leaves
                self.streams.pop(lane, None)
            await self._send_event(item, lane)
            await asyncio.sleep(self.state.options.delay)

    async def _send_event(self, event: dict[str, Any], lane: str | None) -> None:
        if lane is not None:
            event = {**event, "stream_id": lane}
        with contextlib.suppress(WebSocketClosedError):
            await self.write_message(json.dumps(event, ensure_ascii=False))

    async def post(self) -> None:
        body = self.json_body()
        if not isinstance(body, dict):
            return self.send_json(api_error("the body must be a JSON object"), 400)
        refused = self.state.responses.refusal(body)
        if refused is not None:
            return self.send_json(refused, 400)
        try:
            response, entries = self.state.responses.answer(body)
        except UNANSWERABLE as exc:
            return self.send_json(api_error(f"the mock cannot answer this: {exc}"[:300]), 400)
        if body.get("stream") is True:
            await self.stream(entries, broken=False, may_die=False)
        else:
            self.send_json(response)


class CompactHandler(Handler):
    """`POST /v1/responses/compact`: the window compacted into one opaque item."""

    def post(self) -> None:
        body = self.json_body()
        if not isinstance(body, dict):
            return self.send_json(api_error("the body must be a JSON object"), 400)
        if not isinstance(body.get("model"), str):  # the API requires it, as for a create
            return self.send_json(_missing("model"), 400)
        previous = body.get("previous_response_id")  # a window's calls need no outputs here
        if isinstance(previous, str) and self.state.responses.find(previous) is None:
            return self.send_json(_not_found(previous, "previous_response_not_found"), 400)
        self.send_json(self.state.responses.compact(body))


class ResponseHandler(Handler):
    """`GET` and `DELETE /v1/responses/{id}`: a stored response (`store: false` ones never are)."""

    def get(self, response_id: str) -> None:
        remembered = self.state.responses.find(response_id)
        if remembered is None:
            return self.send_json(_not_found(response_id), 404)
        self.send_json(remembered.response)

    def delete(self, response_id: str) -> None:
        if not self.state.responses.delete(response_id):
            return self.send_json(_not_found(response_id), 404)
        self.send_json({"id": response_id, "object": "response.deleted", "deleted": True})


class InputItemsHandler(Handler):
    """`GET /v1/responses/{id}/input_items`: the input a stored response was given, as a list
    (newest first unless `order=asc`, as the API lists them), each item with an id."""

    def get(self, response_id: str) -> None:
        remembered = self.state.responses.find(response_id)
        if remembered is None:
            return self.send_json(_not_found(response_id), 404)
        items = [
            {"id": f"{response_id}_in_{n}", **i} if "id" not in i else i
            for n, i in enumerate(x for x in remembered.input if isinstance(x, dict))
        ]
        if self.get_query_argument("order", "desc") != "asc":
            items.reverse()
        ids = [i["id"] for i in items]
        self.send_json({"object": "list", "data": items, "has_more": False,
                        "first_id": ids[0] if ids else None,
                        "last_id": ids[-1] if ids else None})  # fmt: skip


def _missing(param: str) -> dict[str, Any]:
    return {"error": {"message": f"Missing required parameter: '{param}'.",
                      "type": "invalid_request_error", "param": param,
                      "code": "missing_required_parameter"}}  # fmt: skip


def _not_found(response_id: str, code: str = "response_not_found") -> dict[str, Any]:
    return {"error": {"message": f"Response with id '{response_id}' not found.",
                      "type": "invalid_request_error", "param": None, "code": code}}  # fmt: skip
