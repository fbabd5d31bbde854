"""What a flow says about the session: endpoint kinds, turn requests, tool returns, tree nodes.

Pure functions over parsed JSON (docs/protocol.md, "Endpoints", "Local tool calls", and "The tool
return contract"). Pairing a return with its call and tracking acceptance happen in the store, over
everything recorded so far, so that imported and live captures pair the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from convtap.vocab import Endpoint
from convtap.wire.jsonvalue import loads

__all__ = ["Endpoint"]  # its home is `convtap.vocab`; imported from here too

T = TypeVar("T")
API = "/backend-api/"
_CONVERSATION_GET = re.compile(r"^/backend-api/conversation/([0-9A-Za-z-]+)$")


# The kinds whose response is an event stream the recorder decodes.
STREAMED = frozenset({Endpoint.CONVERSATION, Endpoint.RESUME, Endpoint.RESPONSES})
# The kinds that are WebSocket connections: their frames are recorded.
SOCKETS = frozenset({Endpoint.WEBSOCKET, Endpoint.RESPONSES_SOCKET})


def endpoint_kind(method: str, path: str) -> Endpoint | None:
    """The kind of a request by method and path (query excluded), or None when it is not ours.

    Matches docs/protocol.md, "Endpoints", exactly, so `f/conversation/prepare` is never taken for
    the conversation, and `conversation` (no `f/`) is the legacy form of the same request.
    """
    path = path.split("?", 1)[0].rstrip("/")
    if method == "POST":
        if path.endswith("/responses"):  # /v1/responses, /backend-api/codex/responses
            return Endpoint.RESPONSES
        if path in (API + "f/conversation", API + "conversation"):
            return Endpoint.CONVERSATION
        if path in (API + "f/conversation/prepare", API + "conversation/prepare"):
            return Endpoint.PREPARE
        if path in (API + "f/conversation/resume", API + "conversation/resume"):
            return Endpoint.RESUME
        if path.startswith(API + "sentinel/chat-requirements"):
            return Endpoint.SENTINEL
    if method == "GET":
        if _CONVERSATION_GET.match(path) and not path.endswith("/init"):
            return Endpoint.CONVERSATION_GET
        if "/ws/user/" in path:
            return Endpoint.WEBSOCKET
        if path.endswith("/responses"):  # docs/protocol.md, "Responses API": WebSocket mode
            return Endpoint.RESPONSES_SOCKET
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
    """A `tool` message in a conversation request: what the client returned (docs/protocol.md, "The
    tool return contract")."""

    message_id: str | None
    tool: str | None  # author.name
    call_id: str | None  # the call_id inside content.text, when it is a JSON object
    body_tool: str | None  # the `tool` key inside content.text
    body: dict[str, Any] | None  # content.text parsed, when it is a JSON object
    message: dict[str, Any]


@dataclass
class TurnRequest:
    """A `f/conversation` request body as the recorder and the rules read it: parsed once,
    by the recorder, and handed to the audit."""

    conversation_id: str | None = None
    parent_message_id: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)  # the objects among them
    signatures: list[dict[str, Any]] = field(default_factory=list)
    execution_target: Any = None  # as sent (a rule checks its shape)
    model: str | None = None
    challenge: str | None = None
    returns: list[ToolReturn] = field(default_factory=list)

    @property
    def message_ids(self) -> list[str]:
        return [m["id"] for m in self.messages if isinstance(m.get("id"), str)]

    @property
    def roles(self) -> list[str | None]:
        return [_role(m) for m in self.messages]


def read_turn_request(body: Any) -> TurnRequest:
    if not isinstance(body, dict):
        return TurnRequest()
    listed = body.get("messages")
    messages = [m for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []
    signatures = body.get("local_function_signatures")
    return TurnRequest(
        conversation_id=_str(body.get("conversation_id")),
        parent_message_id=_str(body.get("parent_message_id")),
        messages=messages,
        signatures=[s for s in signatures if isinstance(s, dict)]
        if isinstance(signatures, list)
        else [],
        execution_target=_execution_target(body, messages),
        model=_str(body.get("model")),
        challenge=_str(body.get("app_attest_challenge")),
        returns=[read_return(m) for m in messages if _role(m) == "tool"],
    )


def _execution_target(body: dict[str, Any], messages: list[dict[str, Any]]) -> Any:
    """docs/protocol.md, "Execution target": the request's own field when it has one, else
    what the first user message's metadata carries (where it persists)."""
    if "conversation_execution_target" in body:
        return body["conversation_execution_target"]
    for message in messages:
        metadata = message.get("metadata")
        if _role(message) == "user" and isinstance(metadata, dict):
            return metadata.get("conversation_execution_target")
    return None


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


def answered_call(
    parent_message_id: str | None, body_call_id: str | None, calls: Mapping[str, T]
) -> T | None:
    """The call a return answers: the one its request's `parent_message_id` names, else the one
    the `call_id` in its body names (docs/protocol.md, "The tool return contract", items 9 and
    12). The one pairing rule: the live lines, the audit and the store (`store.schema.LINK`, the
    same rule in SQL, checked against this function by a test) all pair this way."""
    for key in (parent_message_id, body_call_id):
        if key is not None and key in calls:
            return calls[key]
    return None


def conversation_nodes(body: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """`GET conversation/<id>`: its id and the messages of its mapping (accepted returns), each
    with its `node_id`, and its `id` and `role` when they are strings (else None)."""
    if not isinstance(body, dict) or not isinstance(body.get("mapping"), dict):
        return None, []
    nodes = []
    for node_id, node in body["mapping"].items():
        message = node.get("message") if isinstance(node, dict) else None
        if isinstance(message, dict):
            nodes.append({**message, "node_id": node_id, "id": _str(message.get("id")),
                          "role": _role(message)})  # fmt: skip
    return _str(body.get("conversation_id")), nodes


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _role(message: dict[str, Any]) -> str | None:
    author = message.get("author")
    return _str(author.get("role")) if isinstance(author, dict) else None
