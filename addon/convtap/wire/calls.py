"""A tool call, one shape for both protocols: what the model asked a tool to do.

f/conversation's call is an assistant message addressed to a tool (`wire.turn.tool_call`); the
Responses API's is an output item the client must execute (`wire.responses.client_call`). Both
decoders make a `ToolCall`; the contract keeps it with where and when it was made, and the store
writes its row from it (`store.rows.ToolCallRow.of`). `as_json` is the call in each protocol's
`convtap decode --format json` shape (a contract: those shapes differ and stay as they are).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convtap.vocab import CallKind, WireProtocol


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call. For f/conversation, `call_id` is the message id (the stream carries no other),
    `recipient` the message's (`local.alefita_way`) and `tool` the name after its prefix. For the
    Responses API, `recipient` is the item's type (`function_call`, `custom_tool_call`,
    `tool_search_call`), `tool` the item's `name` ("" when it has none), `call_id` and `item_id`
    the item's (either may be missing), `namespace` the namespace tool a function belongs to."""

    protocol: WireProtocol
    call_id: str | None
    item_id: str | None
    namespace: str | None
    recipient: str
    kind: CallKind
    tool: str
    arguments: Any  # the arguments as parsed JSON (f/conversation: an object, else None)
    arguments_text: str  # the arguments as the stream spelt them
    complete: bool
    execution: str | None = None  # the Responses item's `execution` (`client`)

    @property
    def name(self) -> str | None:
        """The tool's name as the wire gave it (None: a Responses item without one)."""
        return self.tool or None

    @property
    def key(self) -> str | None:
        """The id a Responses call is known by: its call_id, else its item id."""
        return self.call_id or self.item_id

    def as_json(self) -> dict[str, Any]:
        """The call in its protocol's `decode --format json` shape."""
        if self.protocol == WireProtocol.RESPONSES:
            return {
                "type": self.recipient,
                "item_id": self.item_id,
                "call_id": self.call_id,
                "name": self.name,
                "namespace": self.namespace,  # a function of a namespace tool
                "execution": self.execution,
                "arguments": self.arguments,
                "arguments_text": self.arguments_text,
            }
        return {
            "call_id": self.call_id,
            "recipient": self.recipient,
            "kind": self.kind,
            "tool": self.tool,
            "arguments": self.arguments,
            "arguments_text": self.arguments_text,
            "complete": self.complete,
        }
