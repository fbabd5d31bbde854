"""convtap's words: every name the wire, the store and the rules share, each written once.

The bottom of the package: the standard library only, imported by every layer (import-linter keeps
it below `models`). Each word is a `StrEnum` member (a `str`: it compares, hashes, formats and is
stored as its value), so a field typed with one of these classes is checked by mypy and a misspelt
member is an error, and the store's SQL is built from the same members (`sql`). The values are
stored in capture databases and printed by `decode` and `audit --format json`: they never change.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

W = TypeVar("W", bound=StrEnum)


class Endpoint(StrEnum):
    """What a flow is, by its method and path (stored as `flows.kind`)."""

    CONVERSATION = "conversation"  # POST f/conversation: a turn
    PREPARE = "prepare"  # POST f/conversation/prepare
    RESUME = "resume"  # POST f/conversation/resume: a turn's next leg
    SENTINEL = "sentinel"  # POST sentinel/chat-requirements
    CONVERSATION_GET = "conversation-get"  # GET conversation/<id>: the tree
    WEBSOCKET = "websocket"  # GET …/ws/user/…: the user socket (turn topics)
    RESPONSES = "responses"  # POST …/responses: the Responses API
    RESPONSES_SOCKET = "responses-socket"  # GET …/responses upgraded: its WebSocket mode


class WireProtocol(StrEnum):
    """Which protocol a call, a return or a decoded stream is of (`tool_calls.protocol`)."""

    CONVERSATION = "f-conversation"  # ChatGPT's f/conversation
    RESPONSES = "responses"  # the public Responses API


class RawKind(StrEnum):
    """What a raw event row holds (`events.event`): SSE text, or one WebSocket frame."""

    SSE = "sse"
    WS_CLIENT = "ws:client"  # a frame the client sent
    WS_SERVER = "ws:server"  # a frame the server sent

    @classmethod
    def frame(cls, from_client: bool) -> RawKind:
        return cls.WS_CLIENT if from_client else cls.WS_SERVER


class Source(StrEnum):
    """Where a flow's events came from (`flows.source`)."""

    LIVE = "live"  # the proxy
    IMPORT = "import"  # a file read by `convtap import`
    REPROCESS = "reprocess"  # a capture decoded again
    SOCKET = "socket"  # a Responses WebSocket turn, recorded as a flow of its own


class Outcome(StrEnum):
    """How a response ended, in the words convtap writes (`flows.outcome`). A flow that failed in
    the proxy carries mitmproxy's own message instead, so the field is `Outcome | str`."""

    COMPLETE = "complete"
    TRUNCATED = "truncated"  # the body ended inside an event
    ERROR = "error"  # no response, or a Responses WebSocket turn's `error`
    FAILED = "failed"  # a Responses WebSocket turn's `response.failed`
    INCOMPLETE = "incomplete"  # its `response.incomplete`
    NEW_RESPONSE = "interrupted: a new response"  # a socket turn another one's start cut
    SOCKET_CUT = "interrupted: the socket closed"  # a socket turn still streaming at the close
    UNANSWERED = "unanswered: the socket closed"  # a socket's request no response began
    PROXY_STOPPED = "interrupted: the proxy stopped before the response ended"


class DecodeErrorKind(StrEnum):
    """What went wrong in a recorded decode error (the `kind` of each of `turns.errors`; listed
    in docs/commands.md, "convtap decode")."""

    MALFORMED_JSON = "malformed-json"
    INVALID_DELTA = "invalid-delta"
    UNKNOWN_ENCODING = "unknown-encoding"
    UNEXPECTED_VALUE = "unexpected-value"
    WS_FRAME = "ws-frame"
    INVALID_UTF8 = "invalid-utf8"
    EVENT_TOO_LARGE = "event-too-large"
    VALUE_TOO_LARGE = "value-too-large"
    TOO_MANY_MESSAGES = "too-many-messages"
    ARGUMENTS_MISMATCH = "arguments-mismatch"
    WRONG_TYPE = "wrong-type"  # a finished message's known field has the wrong type


class Severity(StrEnum):
    """A rule's severity, most severe first (`findings.severity`)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class CallKind(StrEnum):
    """What a tool call addresses (`tool_calls.kind`; docs/protocol.md, "Local tool calls")."""

    LOCAL = "local"  # f/conversation `local.*`: the client runs it
    FUNCTIONS = "functions"  # f/conversation `functions.*`
    BUILTIN = "builtin"  # f/conversation: any other recipient, the server's own tool
    CLIENT = "client"  # Responses API: a call the client executes


# Wire words that are not a field's values.
DONE = "[DONE]"  # the f/conversation stream's last `data:` (docs/protocol.md, rule 8)
RESPONSE_CREATE = "response.create"  # a Responses WebSocket request's `type`
STREAM_HANDOFF = "stream_handoff"  # the f/conversation event that moves a turn onto a socket
MESSAGE_STREAM_COMPLETE = "message_stream_complete"  # the f/conversation turn's end marker
# `convtap mock --replay`'s answer to a request it has no recording for: the Responses error's
# `code`, and how its message (an f/conversation `detail`) begins.
REPLAY_MISS_CODE = "replay_miss"
REPLAY_MISS = "replay miss"


def sql(*words: StrEnum) -> str:
    """Members as an SQL list of string literals (`'a', 'b'`): the store's queries name the
    vocabulary's words through this, never as literals of their own. The values hold no quote."""
    return ", ".join(f"'{w.value}'" for w in words)


def stored(word: type[W], value: object, default: W) -> W:
    """A value read back from a capture as its word: `default` when it is none, or a text the
    vocabulary does not have (a capture edited by hand)."""
    try:
        return word(value) if isinstance(value, str) else default
    except ValueError:
        return default
