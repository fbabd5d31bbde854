"""Wire models for the Work submode (docs/protocol.md, "Execution target", and its types).

The handoff signature the app declares, the execution target persisted in the first user
message's metadata, and the sidebar's execution-location labels and feature flags.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter

from convtap.models.conversation import (
    LocalFunctionParamSpec,
    LocalFunctionSignature,
    LocalParamSchema,
    WireModel,
)

# ── handoff (the local function signature that starts work) ─────────────────


class HandoffParams(WireModel):
    """The arguments of a handoff call (the call's `content.text`, parsed)."""

    prompt: str = Field(description="Brief instruction for Work.")
    reason: str = Field(description="User-facing reason.")


class HandoffPromptSchema(LocalParamSchema):
    description: Literal["A brief instruction describing what Work mode should do for the user."]


class HandoffReasonSchema(LocalParamSchema):
    description: Literal["A short user-facing reason why continuing in Work mode would help."]


class HandoffPromptParam(LocalFunctionParamSpec):
    name: Literal["prompt"]
    required: Literal[True]
    type: HandoffPromptSchema


class HandoffReasonParam(LocalFunctionParamSpec):
    name: Literal["reason"]
    required: Literal[True]
    type: HandoffReasonSchema


class HandoffSignature(LocalFunctionSignature):
    """`LocalFunctionSignature & { name: 'handoff'; params: [prompt, reason] }`.

    The top-level description is server-provided text and is not pinned.
    """

    name: Literal["handoff"]
    # The TS intersection narrows the params array to an exact two-element tuple.
    params: tuple[HandoffPromptParam, HandoffReasonParam]  # type: ignore[assignment]


# ── the execution target (persisted in the first user message metadata) ──────


class LocalExecutionTarget(WireModel):
    """The app's embedded executor: the agent runs on this computer."""

    kind: Literal["local_executor"]
    cwd: str
    installation_id: str
    mcp_servers: dict[str, Any] = Field(description="{} observed for the plain chat handoff.")
    selected_capability_roots: list[Any]


class RemoteExecutionTarget(WireModel):
    """The site-side equivalent (workCloudAccess); not exercised, so any other keys."""

    kind: Literal["remote"]


ExecutionTarget: TypeAlias = Annotated[
    LocalExecutionTarget | RemoteExecutionTarget, Field(discriminator="kind")
]
# Validates a bare ExecutionTarget (a union is not a model, so it needs an adapter).
EXECUTION_TARGET_ADAPTER: TypeAdapter[LocalExecutionTarget | RemoteExecutionTarget] = TypeAdapter(
    ExecutionTarget
)


# ── persistence + labels ─────────────────────────────────────────────────────


class FirstUserMessageMetadata(WireModel):
    """`metadata` of the first user message; later turns derive their target from it."""

    conversation_execution_target: ExecutionTarget


# TS: 'tpp' | 'non-tpp' | string (open); 'tpp' marks Work tasks in the sidebar.
ConversationOrigin: TypeAlias = Annotated[
    str, Field(description="Open set; observed: 'tpp' (Work tasks), 'non-tpp'.")
]
# The thread hover card: 'local' = "Runs on your computer", 'cloud' = "Runs in the cloud".
ExecutionLocationLabel: TypeAlias = Literal["local", "cloud"]


class ExecutionLocationFlags(WireModel):
    """The feature flags that gate each execution location."""

    workLocalAccess: bool
    workCloudAccess: bool
    codexLocalAccess: bool
    localBackend: bool
