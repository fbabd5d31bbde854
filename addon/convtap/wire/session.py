"""What a flow says about the session: endpoint kinds, turn requests, tool returns, tree nodes.

Pure functions over parsed JSON (PROTOCOL.md "Endpoints", "Local tool calls", and seed 000 §3
for the return). Pairing a return with its call and tracking acceptance happen in the store,
over everything recorded so far, so that imported and live captures pair the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from convtap.wire.jsonvalue import loads

API = "/backend-api/"
_CONVERSATION_GET = re.compile(r"^/backend-api/conversation/([0-9A-Za-z-]+)$")


def endpoint_kind(method: str, path: str) -> str | None:
    """The kind of a request by method and path (query excluded), or None when it is not ours.

    Matches PROTOCOL.md's endpoints exactly, so `f/conversation/prepare` is never taken for the
    conversation, and `conversation` (no `f/`) is the legacy form of the same request.
    """
    path = path.split("?", 1)[0].rstrip("/")
    if method == "POST":
        if path.endswith("/responses"):  # /v1/responses, /backend-api/codex/responses
            return "responses"
        if path in (API + "f/conversation", API + "conversation"):
            return "conversation"
        if path in (API + "f/conversation/prepare", API + "conversation/prepare"):
            return "prepare"
        if path in (API + "f/conversation/resume", API + "conversation/resume"):
            return "resume"
        if path.startswith(API + "sentinel/chat-requirements"):
            return "sentinel"
    if method == "GET":
        if _CONVERSATION_GET.match(path) and not path.endswith("/init"):
            return "conversation-get"
        if "/ws/user/" in path:
            return "websocket"
    return None


def parse_json(body: bytes | None) -> Any:
    """A request or response body as JSON, or None when it is empty or not JSON."""
    if not body:
        return None
    try:
        return loads(body.decode("utf-8", "replace"))
    except ValueError:
        return None


@dataclass
class ToolReturn:
    """A `tool` message in a conversation request: what the client returned (seed 000 §3)."""

    message_id: str | None
    tool: str | None  # author.name
    call_id: str | None  # the call_id inside content.text, when it is a JSON object
    body_tool: str | None  # the `tool` key inside content.text
    body: dict[str, Any] | None  # content.text parsed, when it is a JSON object
    message: dict[str, Any]


@dataclass
class TurnRequest:
    """The parts of a `f/conversation` request body that the recorder and the rules use."""

    conversation_id: str | None = None
    parent_message_id: str | None = None
    message_ids: list[str] = field(default_factory=list)
    signatures: list[dict[str, Any]] = field(default_factory=list)
    execution_target: dict[str, Any] | None = None
    model: str | None = None
    challenge: str | None = None
    returns: list[ToolReturn] = field(default_factory=list)


def read_turn_request(body: Any) -> TurnRequest:
    if not isinstance(body, dict):
        return TurnRequest()
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    signatures = body.get("local_function_signatures")
    target = body.get("conversation_execution_target")
    if not isinstance(target, dict):
        # seed 003: the target persists in the first user message's metadata
        for message in messages:
            metadata = message.get("metadata")
            if isinstance(metadata, dict) and isinstance(
                metadata.get("conversation_execution_target"), dict
            ):
                target = metadata["conversation_execution_target"]
                break
    return TurnRequest(
        conversation_id=_str(body.get("conversation_id")),
        parent_message_id=_str(body.get("parent_message_id")),
        message_ids=[m["id"] for m in messages if isinstance(m.get("id"), str)],
        signatures=[s for s in signatures if isinstance(s, dict)]
        if isinstance(signatures, list)
        else [],
        execution_target=target if isinstance(target, dict) else None,
        model=_str(body.get("model")),
        challenge=_str(body.get("app_attest_challenge")),
        returns=[read_return(m) for m in messages if _role(m) == "tool"],
    )


def read_return(message: dict[str, Any]) -> ToolReturn:
    author = message.get("author")
    content = message.get("content")
    text = content.get("text") if isinstance(content, dict) else None
    body: Any = None
    if isinstance(text, str):
        try:
            body = loads(text)
        except ValueError:
            body = None
    body = body if isinstance(body, dict) else None
    return ToolReturn(
        message_id=_str(message.get("id")),
        tool=_str(author.get("name")) if isinstance(author, dict) else None,
        call_id=_str(body.get("call_id")) if body else None,
        body_tool=_str(body.get("tool")) if body else None,
        body=body,
        message=message,
    )


def conversation_nodes(body: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """`GET conversation/<id>`: its id and the messages of its mapping (accepted returns)."""
    if not isinstance(body, dict) or not isinstance(body.get("mapping"), dict):
        return None, []
    nodes = []
    for node_id, node in body["mapping"].items():
        message = node.get("message") if isinstance(node, dict) else None
        if isinstance(message, dict):
            nodes.append({"node_id": node_id, **message})
    return _str(body.get("conversation_id")), nodes


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _role(message: dict[str, Any]) -> str | None:
    author = message.get("author")
    return _str(author.get("role")) if isinstance(author, dict) else None
