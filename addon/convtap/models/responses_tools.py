"""Wire models for the Responses API `Tool` union (docs/protocol.md, "The Tool union and
tool_search_output"; `tool_search_output.tools`).

One class per member of the API reference's `Tool` union, named after its type there and keeping
its field names. A field the reference writes `name?: T` may be omitted but is never null
(`Omittable[T]`); `name?: T | null` may be omitted or null (`T | None = None`). Each stated
constraint (enumeration, range, length) is validated and carries the reference's wording.

`Tool` is the discriminated union of the known members plus `UnknownTool`, the fallback for a
`type` the reference does not list, so a new server tool survives as drift instead of failing.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias, get_args

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    field_validator,
    model_validator,
)

from convtap.models.conversation import WireModel, WireNumber
from convtap.models.responses_containers import (
    CodeInterpreter,
    FunctionShellTool,
    ImageGeneration,
    LocalShell,
    ProgrammaticToolCalling,
)
from convtap.models.responses_fields import (
    Omittable,
    SearchContextSize,
    ToolCaller,
    ToolSearchExecution,
    UriString,
    _AliasedWire,
)

# ── function ─────────────────────────────────────────────────────────────────


class FunctionTool(_AliasedWire):
    """`FunctionTool`: a function in your own code the model can choose to call."""

    name: str
    # The request types mark both required; the API accepts them omitted and defaults them
    # (docs/rules.md, "responses-tools-valid"): a request without them is no error.
    parameters: dict[str, Any] | None = Field(
        default=None, description="JSON schema of the parameters."
    )
    strict: bool | None = None
    type: Literal["function"]
    allowed_callers: list[ToolCaller] | None = None
    async_: Omittable[bool] = Field(default=None, alias="async")
    defer_loading: Omittable[bool] = Field(default=None, description="Loaded via tool search.")
    description: str | None = None
    output_schema: dict[str, Any] | None = None


# ── file search ──────────────────────────────────────────────────────────────


class ComparisonFilter(WireModel):
    """`ComparisonFilter`: compare the attribute `key` to `value` with the operator `type`."""

    key: str
    # "Specifies the comparison operator: eq, ne, gt, gte, lt, lte, in, nin."
    type: Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]
    # "string | number | boolean | Array<string | number>" (bool first: True is not 1).
    value: bool | WireNumber | str | list[WireNumber | str]


class CompoundFilter(WireModel):
    """`CompoundFilter`: combine filters using `and` or `or`."""

    # "Items can be ComparisonFilter or CompoundFilter."
    filters: list[FileSearchFilter]
    # "Type of operation: and or or."
    type: Literal["and", "or"]


def _filter_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "compound" if kind in ("and", "or") else "comparison"


# `and`/`or` make a CompoundFilter; any other operator is checked as a ComparisonFilter.
FileSearchFilter: TypeAlias = Annotated[
    Annotated[ComparisonFilter, Tag("comparison")] | Annotated[CompoundFilter, Tag("compound")],
    Discriminator(_filter_tag),
]
CompoundFilter.model_rebuild()


class HybridSearch(WireModel):
    """`RankingOptions.hybrid_search`: weights of the reciprocal ranking fusion.

    The reference lists only `text_weight` (required); `embedding_weight` is the public API's other
    weight and is accepted but not required here.
    """

    embedding_weight: Omittable[WireNumber] = None
    text_weight: WireNumber = Field(description="Weight of the text in the fusion.")


# "score_threshold?: number": "a number between 0 and 1".
ScoreThreshold: TypeAlias = Annotated[int, Field(ge=0, le=1)] | Annotated[float, Field(ge=0, le=1)]


class RankingOptions(WireModel):
    """`RankingOptions { hybrid_search, ranker, score_threshold }`."""

    hybrid_search: Omittable[HybridSearch] = None
    ranker: Omittable[Literal["auto", "default-2024-11-15"]] = None
    score_threshold: Omittable[ScoreThreshold] = None


class FileSearchTool(WireModel):
    """`FileSearchTool`: searches uploaded files (vector stores)."""

    type: Literal["file_search"]
    vector_store_ids: list[str]
    filters: FileSearchFilter | None = None
    # "This number should be between 1 and 50 inclusive."
    max_num_results: Omittable[Annotated[int, Field(ge=1, le=50)]] = None
    ranking_options: Omittable[RankingOptions] = None


# ── computer ─────────────────────────────────────────────────────────────────


class ComputerTool(WireModel):
    """`ComputerTool { type }`: controls a virtual computer."""

    type: Literal["computer"]


class ComputerUsePreviewTool(WireModel):
    """`ComputerUsePreviewTool`: controls a virtual computer (preview)."""

    display_height: int
    display_width: int
    # "environment: "windows" | "mac" | "linux" | 2 more".
    environment: Literal["windows", "mac", "linux", "ubuntu", "browser"]
    type: Literal["computer_use_preview"]


# ── web search ───────────────────────────────────────────────────────────────


class WebSearchFilters(WireModel):
    """`WebSearchTool.filters` (the reference's `Filters`)."""

    allowed_domains: list[str] | None = None


class WebSearchUserLocation(WireModel):
    """`WebSearchTool.user_location` (the reference's `UserLocation`, `type` optional)."""

    city: str | None = None
    country: str | None = Field(default=None, description="Two-letter ISO code, e.g. US.")
    region: str | None = None
    timezone: str | None = Field(default=None, description="IANA, e.g. America/Los_Angeles.")
    # "type?: "approximate"": always approximate.
    type: Omittable[Literal["approximate"]] = None


class WebSearchTool(WireModel):
    """`WebSearchTool`: searches the Internet for sources related to the prompt."""

    # "One of web_search or web_search_2025_08_26."
    type: Literal["web_search", "web_search_2025_08_26"]
    external_web_access: Omittable[bool] = None
    filters: WebSearchFilters | None = None
    search_context_size: Omittable[SearchContextSize] = None
    user_location: WebSearchUserLocation | None = None


class WebSearchPreviewUserLocation(WireModel):
    """`WebSearchPreviewTool.user_location` (the reference's `UserLocation`, `type` required)."""

    # "type: "approximate"": always approximate.
    type: Literal["approximate"]
    city: str | None = None
    country: str | None = None
    region: str | None = None
    timezone: str | None = None


class WebSearchPreviewTool(WireModel):
    """`WebSearchPreviewTool`: searches the web for relevant results."""

    # "One of web_search_preview or web_search_preview_2025_03_11."
    type: Literal["web_search_preview", "web_search_preview_2025_03_11"]
    search_content_types: Omittable[list[Literal["text", "image"]]] = None
    search_context_size: Omittable[SearchContextSize] = None
    user_location: WebSearchPreviewUserLocation | None = None


# ── MCP ──────────────────────────────────────────────────────────────────────


class McpToolFilter(WireModel):
    """`McpToolFilter { read_only, tool_names }`: which tools are allowed."""

    read_only: Omittable[bool] = None
    tool_names: Omittable[list[str]] = None


class McpToolApprovalFilterAlways(McpToolFilter):
    """`McpToolApprovalFilter.always` (the reference's `Always { read_only, tool_names }`)."""


class McpToolApprovalFilterNever(McpToolFilter):
    """`McpToolApprovalFilter.never` (the reference's `Never { read_only, tool_names }`)."""


class McpToolApprovalFilter(WireModel):
    """`McpToolApprovalFilter { always, never }`: which tools require approval."""

    always: Omittable[McpToolApprovalFilterAlways] = None
    never: Omittable[McpToolApprovalFilterNever] = None


# "Currently supported connector_id values are: ..." (eight connectors).
McpConnectorId: TypeAlias = Literal[
    "connector_dropbox",
    "connector_gmail",
    "connector_googlecalendar",
    "connector_googledrive",
    "connector_microsoftteams",
    "connector_outlookcalendar",
    "connector_outlookemail",
    "connector_sharepoint",
]


class Mcp(WireModel):
    """`Mcp`: tools from a remote Model Context Protocol server."""

    # The JSON Schema carries the one-of rule below too.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [{"required": [key]} for key in ("server_url", "connector_id", "tunnel_id")]
        }
    )

    server_label: str
    type: Literal["mcp"]
    allowed_callers: list[ToolCaller] | None = None
    allowed_tools: list[str] | McpToolFilter | None = None
    authorization: Omittable[str] = None
    connector_id: Omittable[McpConnectorId] = None
    defer_loading: Omittable[bool] = None
    headers: dict[str, str] | None = None
    # "McpToolApprovalFilter { always, never } | "always" | "never" | null".
    require_approval: McpToolApprovalFilter | Literal["always", "never"] | None = None
    server_description: Omittable[str] = None
    server_url: Omittable[UriString] = None
    tunnel_id: Omittable[str] = None

    @model_validator(mode="after")
    def _needs_a_server(self) -> Mcp:
        # "One of server_url, connector_id, or tunnel_id must be provided."
        if self.server_url is None and self.connector_id is None and self.tunnel_id is None:
            raise ValueError("one of server_url, connector_id, or tunnel_id must be provided")
        return self


# ── custom and namespace ─────────────────────────────────────────────────────


class CustomToolInputFormatText(WireModel):
    """`CustomToolInputFormat` `Text { type }`: unconstrained free-form text."""

    type: Literal["text"]


class CustomToolInputFormatGrammar(WireModel):
    """`CustomToolInputFormat` `Grammar { definition, syntax, type }`."""

    definition: str
    syntax: Literal["lark", "regex"]  # "One of lark or regex."
    type: Literal["grammar"]


CustomToolInputFormat: TypeAlias = Annotated[
    CustomToolInputFormatText | CustomToolInputFormatGrammar, Field(discriminator="type")
]


class CustomTool(_AliasedWire):
    """`CustomTool`: processes input using a specified format."""

    name: str
    type: Literal["custom"]
    allowed_callers: list[ToolCaller] | None = None
    async_: Omittable[bool] = Field(default=None, alias="async")
    defer_loading: Omittable[bool] = None
    description: Omittable[str] = None
    format: Omittable[CustomToolInputFormat] = None


class NamespaceFunction(_AliasedWire):
    """`NamespaceTool.tools` `Function { name, type, allowed_callers, 6 more }`."""

    name: str = Field(min_length=1, max_length=128)  # "minLength1 maxLength128"
    type: Literal["function"]
    allowed_callers: list[ToolCaller] | None = None
    async_: Omittable[bool] = Field(default=None, alias="async")
    defer_loading: Omittable[bool] = None
    description: str | None = None
    output_schema: dict[str, Any] | None = None
    parameters: Any = None  # "parameters?: unknown"
    strict: bool | None = None


NamespaceMember: TypeAlias = Annotated[NamespaceFunction | CustomTool, Field(discriminator="type")]


class NamespaceTool(WireModel):
    """`NamespaceTool { description, name, tools, type }`: function/custom tools in a group."""

    description: str
    name: str = Field(min_length=1)  # "minLength1"
    tools: list[NamespaceMember]
    type: Literal["namespace"]


# ── tool search, apply patch ─────────────────────────────────────────────────


class ToolSearchTool(WireModel):
    """`ToolSearchTool`: hosted or BYOT tool search for deferred tools."""

    type: Literal["tool_search"]
    description: str | None = None
    execution: Omittable[ToolSearchExecution] = None
    parameters: Any = None  # "parameters?: unknown"


class ApplyPatchTool(WireModel):
    """`ApplyPatchTool { type, allowed_callers }`: edits files with unified diffs."""

    type: Literal["apply_patch"]
    allowed_callers: list[ToolCaller] | None = None


# ── the union ────────────────────────────────────────────────────────────────

# In the API reference's order.
KNOWN_TOOL_MODELS: tuple[type[WireModel], ...] = (
    FunctionTool,
    FileSearchTool,
    ComputerTool,
    ComputerUsePreviewTool,
    WebSearchTool,
    Mcp,
    CodeInterpreter,
    ProgrammaticToolCalling,
    ImageGeneration,
    LocalShell,
    FunctionShellTool,
    CustomTool,
    NamespaceTool,
    ToolSearchTool,
    WebSearchPreviewTool,
    ApplyPatchTool,
)
# Each `type` value the reference lists, mapped to its model (two models take two values each).
TOOL_MODEL_BY_TYPE: dict[str, type[WireModel]] = {
    value: model
    for model in KNOWN_TOOL_MODELS
    for value in get_args(model.model_fields["type"].annotation)
}

KnownTool: TypeAlias = Annotated[
    FunctionTool
    | FileSearchTool
    | ComputerTool
    | ComputerUsePreviewTool
    | WebSearchTool
    | Mcp
    | CodeInterpreter
    | ProgrammaticToolCalling
    | ImageGeneration
    | LocalShell
    | FunctionShellTool
    | CustomTool
    | NamespaceTool
    | ToolSearchTool
    | WebSearchPreviewTool
    | ApplyPatchTool,
    Field(discriminator="type"),
]


class UnknownTool(WireModel):
    """A tool whose `type` the API reference does not list: kept whole, every field an extra."""

    # The JSON Schema says so too, so that a known tool matches exactly one branch of `Tool`.
    type: str = Field(json_schema_extra={"not": {"enum": [*sorted(TOOL_MODEL_BY_TYPE)]}})

    @field_validator("type")
    @classmethod
    def _not_a_known_type(cls, value: str) -> str:
        if value in TOOL_MODEL_BY_TYPE:
            raise ValueError(f"{value!r} is a known tool type; validate it as its own model")
        return value


def _tool_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if not isinstance(kind, str):
        return None  # no string `type`: an error, never the fallback
    return "known" if kind in TOOL_MODEL_BY_TYPE else "unknown"


# A known `type` is validated strictly by its own model; only an unlisted `type` falls back.
Tool: TypeAlias = Annotated[
    Annotated[KnownTool, Tag("known")] | Annotated[UnknownTool, Tag("unknown")],
    Discriminator(
        _tool_tag,
        custom_error_type="tool_type",
        custom_error_message="a tool is an object with a string 'type'",
    ),
]
TOOL_ADAPTER: TypeAdapter[Tool] = TypeAdapter(Tool)
TOOLS_ADAPTER: TypeAdapter[list[Tool]] = TypeAdapter(list[Tool])
