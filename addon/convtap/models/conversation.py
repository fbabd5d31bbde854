"""Wire models for local tool calls and their returns (docs/protocol.md, "Local tool calls" and
"The tool return contract", whose "TypeScript types" they follow).

Each class is named after its TypeScript type there and keeps its field names.
Every model keeps unknown fields (``extra="allow"``) so server drift survives and stays
visible, and ``to_wire()`` reproduces the wire JSON it was validated from.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, model_validator


class WireModel(BaseModel):
    """Base of every wire model: unknown fields kept, dumps that round-trip the wire."""

    model_config = ConfigDict(extra="allow")

    def to_wire(self) -> dict[str, Any]:
        """The wire JSON: only the fields that were set (explicit nulls included) plus extras."""
        return self.model_dump(mode="json", exclude_unset=True)


# ── enums (the "real enums" of the TypeScript types) ─────────────────────────

# SupportedEncodingEnum = { V1: 'v1' } (a literal enum in the client's own source).
SupportedEncoding: TypeAlias = Literal["v1"]
# f/* request action; only 'next' observed in the builder.
ConversationAction: TypeAlias = Literal["next"]
# prepare: 'sent'; conversation: 'success' | 'failure' (prepareResponse == null ? ...).
ClientPrepareState: TypeAlias = Literal["sent", "success", "failure"]
# "Channels": null = normal message; 'commentary' = tool trail; 'analysis' = hidden;
# 'final' = closing.
ConversationChannel: TypeAlias = Literal["conversation", "commentary", "analysis", "final"] | None
ConversationRole: TypeAlias = Literal["user", "assistant", "tool", "system"]
# TS: 'in_progress' | 'finished_successfully' | 'incomplete' | string (open).
MessageStatus: TypeAlias = Annotated[
    str,
    Field(description="Open set; observed: 'in_progress', 'finished_successfully', 'incomplete'."),
]
# null = intermediate; true = turn-closing; false = non-closing.
MessageEndTurn: TypeAlias = bool | None
# TS: 'all' | `local.${string}` | 'web.run' | 'handoff' | string (open).
MessageRecipient: TypeAlias = Annotated[
    str,
    Field(
        description="Open set; observed: 'all' (returns, normal), 'local.<tool>' (tool calls), "
        "'web.run' (server web tool), 'handoff' (the app tool)."
    ),
]
MessageContentType: TypeAlias = Literal["text", "code"]
# Only 'kwargs' observed.
LocalFunctionSignatureKind: TypeAlias = Literal["kwargs"]
# TS `number`: int | float so that 1 stays 1 and 1.5 stays 1.5 on the way back out.
WireNumber: TypeAlias = int | float


# ── message anatomy ──────────────────────────────────────────────────────────


class MessageContent(WireModel):
    """`content`: 'text' carries `parts`; 'code' carries `text` (+ `language` on model calls)."""

    content_type: MessageContentType
    parts: list[str] | None = None
    text: str | None = None
    language: Literal["json"] | None = Field(default=None, description="Model call only.")


class MessageAuthor(WireModel):
    metadata: dict[str, Any]
    name: str | None
    role: ConversationRole


class ConversationMessage(WireModel):
    """A node of the conversation tree as it travels on the wire."""

    author: MessageAuthor
    # "Channels": null (absent) for normal messages, so absence is allowed.
    channel: ConversationChannel = None
    content: MessageContent
    # null on the hidden system message a real stream begins with (and on legacy streams).
    create_time: WireNumber | None = Field(description="Unix seconds, float (Date.now()/1000).")
    end_turn: MessageEndTurn
    id: str = Field(description="uuid; the call_id source for local tool returns.")
    metadata: dict[str, Any]
    recipient: MessageRecipient
    status: MessageStatus
    # The call message of "Local tool calls" has no update_time.
    update_time: WireNumber | None = None
    weight: WireNumber = Field(description="1 observed.")


# ── the model's call ("Local tool calls") ──────────────────────────────────────


class LocalToolCallAuthor(MessageAuthor):
    """`MessageAuthor & { name: null }`."""

    name: None


class LocalToolCallContent(MessageContent):
    """`MessageContent & { content_type: 'code'; language: 'json'; text: string }`."""

    content_type: Literal["code"]
    language: Literal["json"]
    text: str


class LocalToolCallArgs(WireModel):
    """The arguments the model emitted (the call's `content.text`, parsed): any keys."""


class LocalToolCallMessage(ConversationMessage):
    """The model's call of a client-declared tool, addressed to `local.<tool_name>`.

    Its `id` is the call_id the client echoes in the return (docs/protocol.md, "Local tool
    calls").
    """

    author: LocalToolCallAuthor
    recipient: MessageRecipient = Field(pattern=r"^local\.")
    channel: Literal["commentary"]
    content: LocalToolCallContent
    # The TS type pins status to 'in_progress' (the value at emission); the same message is
    # later patched to e.g. 'finished_successfully', so status stays the open MessageStatus.
    status: MessageStatus

    @property
    def tool_name(self) -> str:
        """The tool being called: the recipient without its `local.` prefix."""
        return self.recipient.removeprefix("local.")

    def arguments(self) -> LocalToolCallArgs:
        """The call's JSON arguments, parsed from `content.text`."""
        return LocalToolCallArgs.model_validate_json(self.content.text)


# ── the client return ("The tool return contract") ──────────────────────────────


class ToolResult(WireModel):
    """`ToolResultBody.result`: any keys; `message` is what the model reads verbatim."""

    message: str | None = None
    accepted: bool | None = Field(default=None, description="Handoff shape.")
    thread_id: str | None = Field(default=None, description="Handoff shape.")


class ToolResultBody(WireModel):
    """The parsed JSON of a return's `content.text`: JSON.stringify({call_id, result, tool})."""

    call_id: str = Field(description="MUST be the tool-call message.id (never invented).")
    result: ToolResult
    tool: str


class ToolReturnAuthor(MessageAuthor):
    """`MessageAuthor & { name: string; role: 'tool' }`."""

    name: str
    role: Literal["tool"]


class ToolReturnContent(MessageContent):
    """`MessageContent & { content_type: 'code'; language?: undefined }`.

    The return content carries no `language` field at all, not even null (docs/protocol.md,
    "The tool return contract", item 7).
    """

    content_type: Literal["code"]
    # The return is built from JSON.stringify(...), so its text is always there.
    text: str
    language: None = Field(default=None, description="Must be absent on a return.")

    @model_validator(mode="before")
    @classmethod
    def _reject_language(cls, data: Any) -> Any:
        if isinstance(data, dict) and "language" in data:
            raise ValueError("a tool return's content carries no 'language' field")
        return data


# The fields of a tool return that the contract fixes (docs/protocol.md, "The tool return
# contract"), by path. The model below
# holds a return to them, and so do the audit's rules (convtap.contract.returns): one table.
TOOL_RETURN_FIXED: dict[tuple[str, ...], Any] = {
    ("author", "role"): "tool",
    ("recipient",): "all",
    ("channel",): "commentary",
    ("content", "content_type"): "code",
    ("status",): "finished_successfully",
    ("end_turn",): None,
    ("weight",): 1,
}


def is_fixed_value(actual: Any, wanted: Any) -> bool:
    """`actual` is the value the contract fixes (`true` is not 1; an absent end_turn is null)."""
    if wanted is None:
        return actual is None
    return bool(actual == wanted) and isinstance(actual, bool) == isinstance(wanted, bool)


class ToolReturnMessage(ConversationMessage):
    """The tool record the client sends back in a new conversation request (docs/protocol.md,
    "The tool return contract").

    The builder sets `metadata.is_visually_hidden_from_conversation: true`, but the record
    observed on the wire has `metadata: {}`; that flag is checked by a rule, not by this model.
    """

    author: ToolReturnAuthor
    recipient: Literal["all"]
    channel: Literal["commentary"]
    content: ToolReturnContent

    @model_validator(mode="after")
    def _fixed_fields(self) -> ToolReturnMessage:
        for path, wanted in TOOL_RETURN_FIXED.items():
            value: Any = self
            for key in path:
                value = getattr(value, key)
            if not is_fixed_value(value, wanted):
                raise ValueError(f"{'.'.join(path)} must be {wanted!r} on a tool return")
        return self

    def result_body(self) -> ToolResultBody:
        """The return's body, parsed from `content.text`."""
        return ToolResultBody.model_validate_json(self.content.text)


# ── declaration ("Local tool calls") ───────────────────────────────────────────


class LocalParamSchema(WireModel):
    description: str
    type: Literal["string"] = Field(description="'string' observed (message/prompt/reason).")


class LocalFunctionParamSpec(WireModel):
    name: str
    required: bool
    type: LocalParamSchema


class LocalFunctionSignature(WireModel):
    """One entry of `local_function_signatures`: a tool the client declares and executes."""

    description: str
    name: str
    params: list[LocalFunctionParamSpec]
    type: LocalFunctionSignatureKind


# ── requests that carry these ────────────────────────────────────────────────


class ConversationRequestBody(WireModel):
    """The body of a conversation request (a normal turn or a tool return)."""

    action: ConversationAction
    local_function_signatures: list[LocalFunctionSignature] | None = Field(
        default=None, description="handoff expected in normal turns."
    )
    messages: list[ConversationMessage]
    model: str = Field(description="e.g. 'gpt-5-6-thinking'.")
    supported_encodings: list[SupportedEncoding]
    thinking_effort: str = Field(description="Open set; observed: 'standard', 'extended'.")
    timezone: str
    timezone_offset_min: WireNumber
    client_prepare_state: ClientPrepareState
    app_attest_challenge: str = Field(description="One-time.")
    conversation_id: str | None = Field(default=None, description="Omitted on the first turn.")
    parent_message_id: str | None = Field(default=None, description="Omitted on the first turn.")


class PartialQueryContent(WireModel):
    """`partial_query.content`."""

    content_type: Literal["text"]
    parts: list[str]


class PartialQuery(WireModel):
    """`PrepareRequestBody.partial_query`: what the user is typing."""

    content: PartialQueryContent
    id: str | None = None


class PrepareRequestBody(WireModel):
    """The prepare request (typing throttle / warm-up)."""

    action: ConversationAction
    client_prepare_state: Literal["sent"]
    partial_query: PartialQuery | None = Field(default=None, description="Only while typing.")
    model: str
    thinking_effort: str
    timezone: str
    timezone_offset_min: WireNumber
    conversation_id: str | None = None
