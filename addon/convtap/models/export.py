"""JSON Schema export of the top-level wire models (the files under `schemas/`)."""

from __future__ import annotations

import json

from pydantic import BaseModel

from convtap.models.conversation import (
    ConversationMessage,
    ConversationRequestBody,
    LocalFunctionSignature,
    LocalToolCallArgs,
    LocalToolCallMessage,
    PrepareRequestBody,
    ToolResultBody,
    ToolReturnMessage,
)
from convtap.models.execution import (
    ExecutionLocationFlags,
    FirstUserMessageMetadata,
    HandoffParams,
    HandoffSignature,
    LocalExecutionTarget,
    RemoteExecutionTarget,
)
from convtap.models.responses import (
    CustomToolCall,
    CustomToolCallOutput,
    FunctionCall,
    FunctionCallOutput,
    ToolSearchCall,
    ToolSearchOutput,
)

EXPORTED: tuple[type[BaseModel], ...] = (
    ConversationMessage,
    ConversationRequestBody,
    CustomToolCall,
    CustomToolCallOutput,
    ExecutionLocationFlags,
    FirstUserMessageMetadata,
    FunctionCall,
    FunctionCallOutput,
    HandoffParams,
    HandoffSignature,
    LocalExecutionTarget,
    LocalFunctionSignature,
    LocalToolCallArgs,
    LocalToolCallMessage,
    PrepareRequestBody,
    RemoteExecutionTarget,
    ToolResultBody,
    ToolReturnMessage,
    ToolSearchCall,
    ToolSearchOutput,
)


def schema_text(model: type[BaseModel]) -> str:
    """The exact text of one schema file: sorted keys, indent 2, trailing newline."""
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"


def export_schemas() -> dict[str, str]:
    """Map each exported model's file name (`<ModelName>.json`) to its schema file text."""
    return {f"{model.__name__}.json": schema_text(model) for model in EXPORTED}
