"""What the auditor is fed: frozen records of what happened in a session, in time order.

There is one way into the auditor (`Auditor.handle`), and these are its words, whoever speaks:
the recorder makes them as it decodes (live, and for `import` and `reprocess`), the store reads
them back from a capture (`convtap audit`, and a recorder restarted after a crash, which knows
what the capture already holds). A happening the auditor was fed already (the same flow's
request, the same call) is known by its key and not audited again, so that feeding a session
twice in part, as a restarted recorder does, gives the findings of feeding it once.

Plain data and the standard library: the store and the recorder import it without the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convtap.contract.registry import Where
from convtap.vocab import REPLAY_MISS, REPLAY_MISS_CODE
from convtap.wire.calls import ToolCall
from convtap.wire.session import TurnRequest


@dataclass(frozen=True, slots=True)
class MadeCall:
    """A call as the contract knows it: the decoder's call (`wire.calls.ToolCall`, either
    protocol), where it was made and when. `where.conversation_id` is the f/conversation
    conversation, or the Responses response that made it; `where.flow_id` the flow of its turn.
    Whether it was answered is the auditor's to track, not the call's."""

    call: ToolCall
    where: Where
    at: float


@dataclass(frozen=True, slots=True)
class Prepared:
    """An `f/conversation/prepare` on a conversation."""

    conversation_id: str | None
    at: float


@dataclass(frozen=True, slots=True)
class ConversationRequest:
    """An f/conversation request: its body as the recorder stored it (redacted), and the same
    body read (`wire.session.read_turn_request`)."""

    flow_id: str
    body: Any
    request: TurnRequest
    at: float


def is_refusal(status: int | None) -> bool:
    """The server refused the request (an HTTP error): what it carried did not land."""
    return status is not None and status >= 400


@dataclass(frozen=True, slots=True)
class RequestRefused:
    """The server answered a conversation request with an HTTP error: what it carried did not
    land."""

    flow_id: str


@dataclass(frozen=True, slots=True)
class ReplayMissed:
    """`convtap mock --replay` had no recorded answer for a flow's request (`replay_miss`)."""

    flow_id: str
    message: str


def replay_miss(status: int | None, body: Any) -> str | None:
    """The message of a replay miss, when `body` (an error body, or a socket's error frame)
    answering with `status` is one: a Responses error whose code is `replay_miss`, or an
    f/conversation `detail` that begins with "replay miss"."""
    if status != 400 or not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict) and error.get("code") == REPLAY_MISS_CODE:
        return str(error.get("message") or REPLAY_MISS)
    detail = body.get("detail")
    if isinstance(detail, str) and detail.startswith(REPLAY_MISS):
        return detail
    return None


@dataclass(frozen=True, slots=True)
class MessagesShown:
    """Message ids a conversation's stream showed."""

    conversation_id: str | None
    message_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CallMade:
    """A finished f/conversation call (its arguments are final)."""

    call: MadeCall


@dataclass(frozen=True, slots=True)
class ClientCallsMade:
    """A Responses API response's client calls (function_call, custom_tool_call, client
    tool_search_call), which the next requests must answer."""

    flow_id: str
    response_id: str | None
    calls: tuple[ToolCall, ...]
    at: float

    def made(self) -> list[MadeCall]:
        """The calls as the contract keeps them: made by this response, in this flow."""
        return [
            MadeCall(c, Where(self.response_id, c.call_id, None, self.flow_id), self.at)
            for c in self.calls
        ]


@dataclass(frozen=True, slots=True)
class ResponsesRequest:
    """A Responses API request (its body as stored): the outputs and tools it carries."""

    flow_id: str
    body: Any
    at: float


@dataclass(frozen=True, slots=True)
class SocketCreate:
    """A `response.create` on a Responses API socket, as the recorder saw it: `busy` is the turn
    still in flight on its lane (`stream_id`), if one is."""

    flow_id: str
    previous_response_id: str | None
    lane: str | None
    busy: str | None


@dataclass(frozen=True, slots=True)
class SocketTurn:
    """A socket's turn read back from a capture (its create's body at `at`, its end at
    `ended_at`): the auditor tells from its lane's turns which was in flight."""

    flow_id: str
    socket: str
    body: Any
    at: float
    ended_at: float | None


@dataclass(frozen=True, slots=True)
class SessionEnded:
    """The end of the capture, or of the recording: what never got an answer."""


Happening = (
    Prepared
    | ConversationRequest
    | RequestRefused
    | ReplayMissed
    | MessagesShown
    | CallMade
    | ClientCallsMade
    | ResponsesRequest
    | SocketCreate
    | SocketTurn
    | SessionEnded
)
