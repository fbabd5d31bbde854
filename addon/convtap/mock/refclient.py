"""A reference client for the conversation backend: a local tool call, done right (or wrong).

Standard library HTTP (`refhttp`) and tornado's WebSocket client, nothing else. It runs one
user turn (sentinel prepare/finalize, `f/conversation/prepare`, `f/conversation` declaring the
`handoff` and `alefita_way` signatures), decodes the stream with `TurnDecoder` (resuming a
cut stream, following a `stream_handoff` onto the user WebSocket), runs the `local.*` tool the
model called, sends the return exactly as docs/protocol.md, "The tool return contract" says (or
with typical mistakes when `faulty`), reads the continuation and fetches `GET conversation/<id>`
to see whether the server took the return. `run_responses` (from `refresponses`) does the same
for the Responses API. It talks to a base URL directly or through an HTTP proxy.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import time
import uuid
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from tornado.httpclient import HTTPRequest
from tornado.netutil import Resolver
from tornado.websocket import websocket_connect

from convtap.mock.refresponses import ResponsesClient
from convtap.vocab import STREAM_HANDOFF
from convtap.wire.calls import ToolCall
from convtap.wire.jsonvalue import loads
from convtap.wire.turn import TurnDecoder, TurnSummary, handoff_topic, message_text

SEED = resources.files("convtap.mock") / "seed"
DEFAULT_PROMPT = "use o alefita way com a mensagem: segundo eco do caminho"
MODEL = "gpt-5-6-thinking"
MAX_RESUMES = 3


@dataclass(frozen=True)
class RunSummary:
    conversation_id: str | None
    call_id: str | None  # the local call's message id (docs/protocol.md, "Local tool calls")
    tool: str | None
    return_id: str | None  # the tool message the client sent
    continuation_text: str  # the last assistant answer of the last turn
    accepted: bool  # the continuation completed and the return is a node of the tree
    resumes: int  # f/conversation/resume requests made
    websocket: bool  # a turn continued on the user WebSocket
    tree: dict[str, Any] | None  # GET conversation/<id>


def signatures() -> list[dict[str, Any]]:
    """The two `local_function_signatures` validated end to end (docs/protocol.md, "Local tool
    calls")."""
    return [
        json.loads((SEED / f"signature_{name}.json").read_text(encoding="utf-8"))
        for name in ("handoff", "alefita_way")
    ]


def run_tool(call: ToolCall) -> Any:
    """The client side of the tools: alefita_way echoes its message (the observed return);
    handoff accepts (the handoff shape of `ToolResultBody`, docs/protocol.md, "The tool return
    contract")."""
    args = call.arguments or {}
    if call.tool == "alefita_way":
        return {"message": args.get("message")}
    if call.tool == "handoff":
        return {"accepted": True, "thread_id": str(uuid.uuid4())}
    return {"message": f"{call.tool} ran with {sorted(args)}"}


def tool_return(call: ToolCall, result: Any, *, faulty: bool = False) -> dict[str, Any]:
    """The tool record (docs/protocol.md, "The tool return contract": the items and the
    builder). `faulty` makes the usual
    mistakes: recipient = the tool, an invented call_id, a `language` key, no `tool` key."""
    body: dict[str, Any] = {"call_id": call.call_id, "result": result, "tool": call.tool}
    content: dict[str, Any] = {"content_type": "code"}
    recipient = "all"
    if faulty:
        body = {"call_id": str(uuid.uuid4()), "result": result}
        content["language"] = "json"
        recipient = call.tool
    # The builder uses JSON.stringify({call_id, result, tool}): compact, keys in that order.
    content["text"] = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return {
        "id": str(uuid.uuid4()),
        "author": {"role": "tool", "name": call.tool, "metadata": {}},
        "create_time": time.time(),
        "update_time": None,
        "content": content,
        "status": "finished_successfully",
        "end_turn": None,
        "weight": 1,
        "metadata": {"is_visually_hidden_from_conversation": True},
        "recipient": recipient,
        "channel": "commentary",
    }


def user_message(text: str) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "author": {"role": "user", "name": None, "metadata": {}},
        "create_time": time.time(),
        "content": {"content_type": "text", "parts": [text]},
        "metadata": {},
    }


class _ProxyResolver(Resolver):
    """Sends the WebSocket's TCP connection to the proxy; the request keeps its Host header,
    which a proxy in regular mode uses to route an origin-form request."""

    def initialize(self, address: tuple[str, int]) -> None:
        self.address = address

    async def resolve(
        self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC
    ) -> list[tuple[int, Any]]:
        return [(socket.AF_INET, self.address)]


class RefClient(ResponsesClient):
    """One client session against `base_url` (e.g. `http://127.0.0.1:8765`): f/conversation's
    turns here, the Responses API's from `ResponsesClient`, the transport from `HttpClient`."""

    def __init__(
        self,
        base_url: str,
        *,
        proxy: str | None = None,
        cafile: str | Path | None = None,
        timeout: float = 10.0,
    ) -> None:
        super().__init__(base_url, proxy=proxy, cafile=cafile, timeout=timeout)
        self.resumes = 0
        self.websocket = False

    def requirements(self, conversation_id: str | None) -> dict[str, str]:
        """A fresh challenge and prepare (docs/protocol.md, "The tool return contract"): the
        headers of the next f/conversation request."""
        prepared = self.request_json("POST", "/backend-api/sentinel/chat-requirements/prepare", {})
        finalized = self.request_json(
            "POST",
            "/backend-api/sentinel/chat-requirements/finalize",
            {"prepare_token": prepared.get("prepare_token"), "proofofwork": "gAAAAABwQ8Lk5FbGpA"},
        )
        prepare_body: dict[str, Any] = {
            "action": "next",
            "client_prepare_state": "sent",  # PrepareRequestBody
            "model": MODEL,
            "thinking_effort": "standard",
            "timezone": "America/Sao_Paulo",
            "timezone_offset_min": 180,
        }
        if conversation_id is not None:
            prepare_body["conversation_id"] = conversation_id
        conduit = self.request_json("POST", "/backend-api/f/conversation/prepare", prepare_body)
        return {
            "openai-sentinel-chat-requirements-token": str(finalized.get("token")),
            "openai-sentinel-proof-token": "gAAAAAB" + secrets.token_urlsafe(16),
            "x-conduit-token": str(conduit.get("conduit_token")),
        }

    def conversation_body(
        self,
        message: dict[str, Any],
        conversation_id: str | None,
        parent: str | None,
        declared: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A `ConversationRequestBody` (docs/protocol.md, "The tool return contract", "TypeScript
        types"); conversation_id and parent_message_id are omitted on the first turn."""
        body: dict[str, Any] = {
            "action": "next",
            "messages": [message],
            "model": MODEL,
            "local_function_signatures": signatures() if declared is None else declared,
            "supported_encodings": ["v1"],
            "thinking_effort": "standard",
            "timezone": "America/Sao_Paulo",
            "timezone_offset_min": 180,
            "client_prepare_state": "success",
            "app_attest_challenge": secrets.token_urlsafe(32),  # one-time, fresh every request
        }
        if conversation_id is not None:
            body["conversation_id"] = conversation_id
        if parent is not None:
            body["parent_message_id"] = parent
        return body

    def turn(self, body: dict[str, Any]) -> TurnSummary:
        """One turn, every leg: the stream, its resumes, its WebSocket continuation."""
        headers = self.requirements(body.get("conversation_id"))
        turn = TurnDecoder()
        conduit = headers["x-conduit-token"]
        for chunk in self.open_stream("/backend-api/f/conversation", body, headers):
            turn.feed(chunk)
        turn.end_leg()
        for event in turn.summary().events:  # the stream's own conduit token wins
            if event.get("type") == "resume_conversation_token" and event.get("kind") == "conduit":
                conduit = str(event.get("token"))
        for _ in range(MAX_RESUMES):
            so_far = turn.summary()
            if so_far.done:
                break
            self.resumes += 1  # docs/protocol.md, "Resume": offset = events consumed
            resume = {"conversation_id": so_far.conversation_id, "offset": so_far.event_count}
            path = "/backend-api/f/conversation/resume"
            for chunk in self.open_stream(path, resume, {"x-conduit-token": conduit}):
                turn.feed(chunk)
            turn.end_leg()
        handoffs = [e for e in turn.summary().events if e.get("type") == STREAM_HANDOFF]
        topic = handoff_topic(handoffs[-1] if handoffs else None)
        if topic is not None:
            self.websocket = True
            asyncio.run(self._ws_leg(turn, topic))
        turn.close()
        return turn.summary()

    async def _ws_leg(self, turn: TurnDecoder, topic: str) -> None:
        """docs/protocol.md, "WebSocket handoff": subscribe on the user socket, feed its frames."""
        url = self.request_json("GET", "/backend-api/celsius/ws/user")["websocket_url"]
        request = HTTPRequest(url, connect_timeout=self.timeout, request_timeout=self.timeout)
        if url.startswith("wss:"):
            request.ssl_options = self.ssl_context
        resolver = None
        if self.proxy is not None:
            resolver = _ProxyResolver(address=(self.proxy.hostname, self.proxy.port or 8080))
        conn = await websocket_connect(request, resolver=resolver)
        try:
            await conn.write_message(
                json.dumps([{"type": "subscribe", "topic_id": topic, "id": 1}])
            )
            while True:
                frame = await asyncio.wait_for(conn.read_message(), self.timeout)
                if frame is None:
                    break
                turn.feed_ws_frame(frame)
                if _ends_turn(frame, topic):
                    break
        finally:
            conn.close()

    def run(self, prompt: str = DEFAULT_PROMPT, *, faulty: bool = False) -> RunSummary:
        """A whole local tool call: ask, run the called tool, return, read the continuation."""
        first = self.turn(self.conversation_body(user_message(prompt), None, None))
        conversation_id = first.conversation_id
        last = first
        call = next((c for c in first.tool_calls() if c.kind == "local"), None)
        record = None
        if call is not None and conversation_id is not None:
            record = tool_return(call, run_tool(call), faulty=faulty)
            # docs/protocol.md, "The tool return contract": a NEW request, parent_message_id =
            # the call's message id.
            last = self.turn(self.conversation_body(record, conversation_id, call.call_id))
        tree = None
        if conversation_id is not None:
            tree = self.request_json("GET", f"/backend-api/conversation/{conversation_id}")
        in_tree = (
            record is not None and tree is not None and record["id"] in tree.get("mapping", {})
        )
        return RunSummary(
            conversation_id=conversation_id,
            call_id=call.call_id if call else None,
            tool=call.tool if call else None,
            return_id=record["id"] if record else None,
            continuation_text=_answer(last),
            accepted=bool(in_tree and last.stream_complete),
            resumes=self.resumes,
            websocket=self.websocket,
            tree=tree,
        )

    def run_declared(
        self, declared: list[dict[str, Any]], prompt: str = "use your tools", max_calls: int = 8
    ) -> list[ToolCall]:
        """Declare `declared`, then run every local call the model makes and return it
        (docs/protocol.md, "The tool return contract"), turn after turn, until a turn makes no
        new call. The calls, in order."""
        turn = self.turn(self.conversation_body(user_message(prompt), None, None, declared))
        conversation_id = turn.conversation_id
        made: list[ToolCall] = []
        for _ in range(max_calls):
            seen = {c.call_id for c in made}
            call = next((c for c in turn.tool_calls() if c.kind == "local" and c.complete
                         and c.call_id not in seen), None)  # fmt: skip
            if call is None or conversation_id is None:
                break
            made.append(call)
            record = tool_return(call, run_tool(call))
            body = self.conversation_body(record, conversation_id, call.call_id, declared)
            turn = self.turn(body)
        return made


def _ends_turn(frame: str | bytes, topic: str) -> bool:
    """A `done` message on the turn topic, or the `[DONE]` item (docs/protocol.md, "WebSocket
    handoff")."""
    try:
        items = loads(frame if isinstance(frame, str) else frame.decode())
    except ValueError:
        return False
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict) or item.get("topic_id") != topic:
            continue
        payload = item.get("payload")
        inner = payload.get("payload") if isinstance(payload, dict) else None
        if isinstance(inner, dict) and inner.get("type") == "done":
            return True
    return False


def _answer(turn: TurnSummary) -> str:
    """The text of the turn's last assistant message addressed to everyone."""
    texts = [
        message_text(m)
        for m in turn.messages
        if isinstance(m.get("author"), dict)
        and m["author"].get("role") == "assistant"
        and m.get("recipient") in ("all", None)
        and m.get("channel") != "analysis"  # hidden reasoning (docs/protocol.md, "Channels")
    ]
    return texts[-1] if texts else ""
