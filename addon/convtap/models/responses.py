"""Wire models for the Responses API's client-executed call items (docs/protocol.md, "Responses
API").

The model's calls (`function_call`, `custom_tool_call`, `tool_search_call` with
`execution: "client"`) and the client's answers in the next request's `input`
(`function_call_output`, `custom_tool_call_output`, `tool_search_output`). They follow the
public API reference and openai-python's types (`src/openai/types/responses/`). Unknown fields
are kept, as everywhere.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from pydantic import Field

from convtap.models.conversation import WireModel
from convtap.models.responses_fields import Omittable, ToolSearchExecution
from convtap.models.responses_tools import Tool

# "status: "in_progress" | "completed" | "incomplete"" (the API reference, tool_search_output).
ItemStatus: TypeAlias = Literal["in_progress", "completed", "incomplete"]


class ToolSearchOutput(WireModel):
    """`tool_search_output`: the tools a tool search loaded.

    Deliberate deviation: the API reference documents the item as the server returns it, with
    `id: string` required, but the client's answer in the next request's `input` carries no
    `id` (docs/protocol.md, "The Tool union and tool_search_output"; the public API's input item
    makes it optional), so `id` may be omitted here. A client answering a client tool search
    says `execution: "client"`.
    """

    id: Omittable[str] = None
    call_id: str | None = Field(description="The tool search call's call_id.")
    execution: ToolSearchExecution
    status: ItemStatus
    tools: list[Tool] = Field(description="The loaded tool definitions (the Tool union).")
    type: Literal["tool_search_output"]
    created_by: Omittable[str] = None


class ToolSearchCall(WireModel):
    """`tool_search_call`: the model asks for a tool search (client-run when `execution` is
    "client"; its `arguments` are an object, docs/protocol.md, "Responses API")."""

    type: Literal["tool_search_call"]
    id: str
    call_id: str | None = None
    execution: ToolSearchExecution
    arguments: dict[str, Any]
    status: ItemStatus
    created_by: Omittable[str] = None


class FunctionCall(WireModel):
    """`function_call`: the model calls a function tool (`id` fc_…, `arguments` a string)."""

    type: Literal["function_call"]
    id: str | None = None
    call_id: str = Field(description="What the answer echoes; never the item id.")
    name: str
    arguments: str = Field(description="The arguments, as a JSON string.")
    status: ItemStatus | None = None


class FunctionCallOutput(WireModel):
    """`function_call_output`: the client's answer to a `function_call`.

    docs/protocol.md, "Responses API", pins `output` to a string (rule
    `responses-output-type`), so a list of content is a validation error here.
    """

    type: Literal["function_call_output"]
    call_id: str = Field(description="The call's call_id, never its item id.")
    output: str
    id: str | None = None
    status: ItemStatus | None = None


class CustomToolCall(WireModel):
    """`custom_tool_call`: the model calls a custom tool with free-form `input`."""

    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    id: str | None = None


class CustomToolCallOutput(WireModel):
    """`custom_tool_call_output`: the client's answer to a `custom_tool_call`.

    The public API takes a string or a list of input content parts (`input_text`,
    `input_image`, `input_file`); the parts are kept as plain objects.
    """

    type: Literal["custom_tool_call_output"]
    call_id: str
    output: str | list[dict[str, Any]]
    id: str | None = None
