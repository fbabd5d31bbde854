"""Tests for convtap.models.responses*: the Tool union, its fallback and the call items.

The fixtures live in captures/examples/responses/: one valid and (where a constraint can be
broken) one invalid instance per tool `type`, and a client `tool_search_output`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from convtap.models import (
    KNOWN_TOOL_MODELS,
    TOOL_ADAPTER,
    TOOL_MODEL_BY_TYPE,
    TOOLS_ADAPTER,
    CodeInterpreter,
    ComparisonFilter,
    CompoundFilter,
    ContainerReference,
    CustomToolCall,
    CustomToolCallOutput,
    FileSearchTool,
    FunctionCall,
    FunctionCallOutput,
    FunctionShellTool,
    FunctionTool,
    LocalEnvironment,
    Mcp,
    NamespaceTool,
    ToolSearchCall,
    ToolSearchOutput,
    UnknownTool,
    WebSearchPreviewTool,
    WebSearchTool,
    WireModel,
)
from pydantic import ValidationError

EXAMPLES = Path(__file__).resolve().parents[2] / "captures" / "examples" / "responses"
VALID = EXAMPLES / "tools" / "valid"
INVALID = EXAMPLES / "tools" / "invalid"

# Tools whose only field is `type`: with unknown fields allowed, nothing of theirs can break.
TYPE_ONLY = {"computer", "local_shell", "programmatic_tool_calling"}

# Each invalid fixture and the one error it must raise: (path inside the tool, error type).
INVALID_BECAUSE: dict[str, tuple[tuple[str | int, ...], str]] = {
    "apply_patch": (("allowed_callers", 0), "literal_error"),
    "code_interpreter": (("container", "CodeInterpreterToolAuto", "memory_limit"), "literal_error"),
    "computer_use_preview": (("environment",), "literal_error"),
    "custom": (("format", "grammar", "syntax"), "literal_error"),
    "file_search": (("max_num_results",), "less_than_equal"),
    "function": (("name",), "missing"),
    "image_generation": (("partial_images",), "less_than_equal"),
    "mcp": (("require_approval", "literal['always','never']"), "literal_error"),
    "namespace": (("tools", 0, "function", "name"), "string_too_long"),
    "shell": (
        (
            "environment",
            "container_auto",
            "network_policy",
            "allowlist",
            "domain_secrets",
            0,
            "name",
        ),
        "string_too_short",
    ),
    "tool_search": (("execution",), "literal_error"),
    "web_search": (("search_context_size",), "literal_error"),
    "web_search_2025_08_26": (("user_location", "type"), "literal_error"),
    "web_search_preview": (("user_location", "type"), "missing"),
    "web_search_preview_2025_03_11": (("search_content_types", 0), "literal_error"),
}


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def canonical(value: Any) -> str:
    # Key order is not part of JSON; int vs float is, and sort_keys keeps that visible.
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def valid(name: str) -> Any:
    return load(VALID / f"{name}.json")


def tool_round_trip(wire: Any) -> WireModel:
    tool = TOOL_ADAPTER.validate_python(wire)
    assert canonical(tool.to_wire()) == canonical(wire)
    return tool


def item_round_trip(model: type[WireModel], wire: Any) -> WireModel:
    item = model.model_validate(wire)
    assert canonical(item.to_wire()) == canonical(wire)
    return item


def names(folder: Path) -> list[str]:
    return sorted(path.stem for path in folder.glob("*.json"))


# ── the fixtures ─────────────────────────────────────────────────────────────


def test_every_tool_type_has_a_valid_fixture() -> None:
    assert len(KNOWN_TOOL_MODELS) == 16
    assert names(VALID) == sorted(TOOL_MODEL_BY_TYPE)


def test_every_breakable_tool_type_has_an_invalid_fixture() -> None:
    assert names(INVALID) == sorted(set(TOOL_MODEL_BY_TYPE) - TYPE_ONLY) == sorted(INVALID_BECAUSE)
    for kind in TYPE_ONLY:
        assert set(TOOL_MODEL_BY_TYPE[kind].model_fields) == {"type"}


def test_fixtures_are_pretty_printed() -> None:
    for path in [
        *sorted((EXAMPLES / "tools").rglob("*.json")),
        EXAMPLES / "tool_search_output.json",
    ]:
        text = path.read_text(encoding="utf-8")
        assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n", path


@pytest.mark.parametrize("name", names(VALID))
def test_valid_tool_is_its_own_class_and_round_trips(name: str) -> None:
    wire = valid(name)
    model = TOOL_MODEL_BY_TYPE[wire["type"]]
    assert wire["type"] == name
    tool = tool_round_trip(wire)
    assert type(tool) is model
    assert type(TOOL_ADAPTER.validate_json(json.dumps(wire))) is model
    assert canonical(model.model_validate(wire).to_wire()) == canonical(wire)


@pytest.mark.parametrize("name", names(INVALID))
def test_invalid_tool_raises_for_its_stated_reason(name: str) -> None:
    wire = load(INVALID / f"{name}.json")
    with pytest.raises(ValidationError) as caught:
        TOOL_ADAPTER.validate_python(wire)
    where, kind = INVALID_BECAUSE[name]
    found = {(error["loc"], error["type"]) for error in caught.value.errors()}
    assert (("known", name, *where), kind) in found
    with pytest.raises(ValidationError):
        TOOL_MODEL_BY_TYPE[name].model_validate(wire)


def test_tool_search_output_fixture() -> None:
    wire = load(EXAMPLES / "tool_search_output.json")
    output = item_round_trip(ToolSearchOutput, wire)
    assert isinstance(output, ToolSearchOutput)
    assert output.execution == "client"
    assert [type(tool) for tool in output.tools] == [FunctionTool, NamespaceTool, Mcp]


def test_json_schema_agrees_with_the_fixtures() -> None:
    schema = ToolSearchOutput.model_json_schema()
    base = load(EXAMPLES / "tool_search_output.json")
    jsonschema.validate(base, schema)
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted(VALID.glob("*.json")):
        assert validator.is_valid({**base, "tools": [load(path)]}), path
    for path in sorted(INVALID.glob("*.json")):
        assert not validator.is_valid({**base, "tools": [load(path)]}), path
    assert validator.is_valid({**base, "tools": [{"type": "brand_new", "x": 1}]})


# ── the fallback ─────────────────────────────────────────────────────────────


def test_unknown_type_becomes_unknown_tool_and_round_trips() -> None:
    wire = {"type": "hologram", "depth": 3, "nested": {"a": [1, 2.5, None]}}
    tool = tool_round_trip(wire)
    assert isinstance(tool, UnknownTool)
    assert tool.type == "hologram"
    assert tool.model_extra == {"depth": 3, "nested": {"a": [1, 2.5, None]}}


def test_known_type_with_bad_fields_is_an_error_not_the_fallback() -> None:
    with pytest.raises(ValidationError):
        TOOL_ADAPTER.validate_python({"type": "file_search"})
    with pytest.raises(ValidationError):
        UnknownTool.model_validate({"type": "file_search", "vector_store_ids": []})


@pytest.mark.parametrize("wire", [{"name": "f"}, {"type": 3}, {"type": None}, "function", None])
def test_a_tool_needs_a_string_type(wire: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        TOOL_ADAPTER.validate_python(wire)
    assert caught.value.errors()[0]["type"] == "tool_type"


def test_tools_list_mixes_known_and_unknown() -> None:
    wire = [valid("function"), {"type": "hologram"}, valid("web_search_2025_08_26")]
    tools = TOOLS_ADAPTER.validate_python(wire)
    assert [type(tool) for tool in tools] == [FunctionTool, UnknownTool, WebSearchTool]
    assert TOOLS_ADAPTER.dump_python(tools, mode="json", exclude_unset=True) == wire


def test_dated_type_values_share_a_class() -> None:
    assert TOOL_MODEL_BY_TYPE["web_search_2025_08_26"] is WebSearchTool
    assert TOOL_MODEL_BY_TYPE["web_search_preview_2025_03_11"] is WebSearchPreviewTool


# ── constraint boundaries ────────────────────────────────────────────────────


def with_value(name: str, path: tuple[str | int, ...], value: Any) -> Any:
    wire = copy.deepcopy(valid(name))
    target = wire
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return wire


BOUNDARIES: list[tuple[str, tuple[str | int, ...], Any, bool]] = [
    # "between 1 and 50 inclusive"
    ("file_search", ("max_num_results",), 0, False),
    ("file_search", ("max_num_results",), 1, True),
    ("file_search", ("max_num_results",), 50, True),
    ("file_search", ("max_num_results",), 51, False),
    # "a number between 0 and 1"
    ("file_search", ("ranking_options", "score_threshold"), -0.01, False),
    ("file_search", ("ranking_options", "score_threshold"), 0, True),
    ("file_search", ("ranking_options", "score_threshold"), 1, True),
    ("file_search", ("ranking_options", "score_threshold"), 1.01, False),
    # "minimum0 maximum3"
    ("image_generation", ("partial_images",), -1, False),
    ("image_generation", ("partial_images",), 0, True),
    ("image_generation", ("partial_images",), 3, True),
    ("image_generation", ("partial_images",), 4, False),
    # "minimum0 maximum100"
    ("image_generation", ("output_compression",), -1, False),
    ("image_generation", ("output_compression",), 0, True),
    ("image_generation", ("output_compression",), 100, True),
    ("image_generation", ("output_compression",), 101, False),
    # namespace function name "minLength1 maxLength128"; namespace name "minLength1"
    ("namespace", ("tools", 0, "name"), "", False),
    ("namespace", ("tools", 0, "name"), "f", True),
    ("namespace", ("tools", 0, "name"), "f" * 128, True),
    ("namespace", ("tools", 0, "name"), "f" * 129, False),
    ("namespace", ("name",), "", False),
    # skill_id "minLength1 maxLength64"; version "a positive integer or 'latest'"
    ("shell", ("environment", "skills", 0, "skill_id"), "s" * 64, True),
    ("shell", ("environment", "skills", 0, "skill_id"), "s" * 65, False),
    ("shell", ("environment", "skills", 0, "skill_id"), "", False),
    ("shell", ("environment", "skills", 0, "version"), "12", True),
    ("shell", ("environment", "skills", 0, "version"), "0", False),
    ("shell", ("environment", "skills", 0, "version"), "v2", False),
    # inline skill data "minLength1"; media_type "Must be application/zip."
    ("shell", ("environment", "skills", 1, "source", "data"), "", False),
    ("shell", ("environment", "skills", 1, "source", "media_type"), "application/gzip", False),
    # domain secret "minLength1" (domain, value)
    ("code_interpreter", ("container", "network_policy", "domain_secrets", 0, "domain"), "", False),
    ("code_interpreter", ("container", "network_policy", "domain_secrets", 0, "value"), "", False),
    # enumerations
    ("mcp", ("connector_id",), "connector_sharepoint", True),
    ("mcp", ("connector_id",), "connector_slack", False),
    ("image_generation", ("quality",), "xhigh", True),
    ("image_generation", ("quality",), "ultra", False),
    ("image_generation", ("model",), "gpt-image-9", True),  # "(string & {})": open
    ("image_generation", ("size",), "1536x864", True),  # "(string & {})": open
    ("file_search", ("ranking_options", "ranker"), "bm25", False),
    ("file_search", ("filters", "filters", 0, "type"), "like", False),
    ("file_search", ("filters", "type"), "xor", False),
    ("web_search", ("user_location", "type"), "approximate", True),
    # "One of server_url, connector_id, or tunnel_id must be provided."; "formaturi"
    ("mcp", ("server_url",), "not a uri", False),
]


@pytest.mark.parametrize(("name", "path", "value", "ok"), BOUNDARIES)
def test_constraint_boundaries(
    name: str, path: tuple[str | int, ...], value: Any, ok: bool
) -> None:
    wire = with_value(name, path, value)
    if ok:
        tool_round_trip(wire)
    else:
        with pytest.raises(ValidationError):
            TOOL_ADAPTER.validate_python(wire)


@pytest.mark.parametrize("present", ["server_url", "connector_id", "tunnel_id"])
def test_mcp_needs_one_of_its_server_fields(present: str) -> None:
    wire = {"type": "mcp", "server_label": "s"}
    with pytest.raises(ValidationError, match="one of server_url, connector_id, or tunnel_id"):
        TOOL_ADAPTER.validate_python(wire)
    value = {"server_url": "https://x.example", "connector_id": "connector_gmail"}.get(
        present, "tun_1"
    )
    assert type(tool_round_trip({**wire, present: value})) is Mcp


def test_server_url_is_kept_verbatim() -> None:
    wire = {"type": "mcp", "server_label": "s", "server_url": "https://x.example"}
    assert tool_round_trip(wire).to_wire()["server_url"] == "https://x.example"


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("file_search", "max_num_results"),  # "max_num_results?: number"
        ("web_search", "search_context_size"),
        ("custom", "format"),
        ("function", "async"),
    ],
)
def test_optional_non_nullable_field_rejects_null(name: str, field: str) -> None:
    with pytest.raises(ValidationError, match="may be omitted, but not null"):
        TOOL_ADAPTER.validate_python({**valid(name), field: None})
    wire = valid(name)
    del wire[field]
    assert field not in tool_round_trip(wire).to_wire()


def test_nullable_fields_accept_null() -> None:
    # "filters?: ... | null", "allowed_callers?: ... | null", "parameters: ... | null"
    tool_round_trip({**valid("file_search"), "filters": None})
    tool_round_trip({**valid("apply_patch"), "allowed_callers": None})
    tool_round_trip({**valid("function"), "parameters": None, "strict": None})
    with pytest.raises(ValidationError):  # a function tool's name is required
        TOOL_ADAPTER.validate_python({"type": "function", "parameters": None})


def test_a_function_tool_may_omit_parameters() -> None:
    """The request type marks `parameters` required; the API and the Open Responses spec take a
    function without it (docs/rules.md, "responses-tools-valid"), so the model does too."""
    wire = {"type": "function", "name": "ping"}
    assert tool_round_trip(wire).to_wire() == wire


def test_a_function_tool_may_omit_strict() -> None:
    """The types mark `strict` required; the API accepts a function tool without it (it
    defaults it), so the model does too, and the dump leaves it out as it came."""
    wire = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    assert tool_round_trip(wire).to_wire() == wire


# ── shapes inside the tools ──────────────────────────────────────────────────


def test_comparison_values_keep_their_json_types() -> None:
    for value in [True, 0, 1, 2.5, "x", ["a", 1, 1.5]]:
        parsed = ComparisonFilter.model_validate({"key": "k", "type": "eq", "value": value})
        assert canonical(parsed.to_wire()["value"]) == canonical(value)
        assert type(parsed.value) is type(value)


def test_compound_filters_nest() -> None:
    tool = tool_round_trip(valid("file_search"))
    assert isinstance(tool, FileSearchTool)
    assert isinstance(tool.filters, CompoundFilter)
    inner = tool.filters.filters
    assert isinstance(inner[0], ComparisonFilter)
    assert isinstance(inner[1], CompoundFilter)


def test_code_interpreter_container_id_string() -> None:
    tool = tool_round_trip({"type": "code_interpreter", "container": "cntr_123"})
    assert isinstance(tool, CodeInterpreter)
    assert tool.container == "cntr_123"


def test_shell_environment_forms() -> None:
    local = {
        "type": "shell",
        "environment": {
            "type": "local",
            "skills": [{"name": "n", "description": "d", "path": "/skills/n"}],
        },
    }
    reference = {
        "type": "shell",
        "environment": {"type": "container_reference", "container_id": "cntr_1"},
    }
    first, second = tool_round_trip(local), tool_round_trip(reference)
    assert isinstance(first, FunctionShellTool)
    assert isinstance(first.environment, LocalEnvironment)
    assert isinstance(second, FunctionShellTool)
    assert isinstance(second.environment, ContainerReference)
    with pytest.raises(ValidationError):
        TOOL_ADAPTER.validate_python({"type": "shell", "environment": {"type": "vm"}})


def test_mcp_allowed_tools_and_require_approval_forms() -> None:
    base = {"type": "mcp", "server_label": "s", "tunnel_id": "tun_1"}
    for allowed in [["a", "b"], {"read_only": True}, {}, None]:
        tool_round_trip({**base, "allowed_tools": allowed})
    for approval in ["always", "never", {"never": {"tool_names": ["a"]}}, None]:
        tool_round_trip({**base, "require_approval": approval})


def test_async_alias_round_trips_and_unknown_fields_survive_inside() -> None:
    wire = valid("custom")
    wire["format"]["flags"] = ["x"]
    wire["brand_new"] = {"n": 1}
    tool = tool_round_trip(wire)
    assert tool.to_wire()["async"] is True
    assert "async_" not in tool.to_wire()


# ── the call items ───────────────────────────────────────────────────────────

FUNCTION_CALL = {
    "type": "function_call",
    "id": "fc_68b2d4e1f0a9",
    "call_id": "call_q8ZkT1xYw3",
    "name": "get_weather",
    "arguments": '{"city":"Lisboa"}',
    "status": "completed",
}
TOOL_SEARCH_CALL = {
    "type": "tool_search_call",
    "id": "tsc_68b2d4e1f0a9",
    "call_id": "call_q8ZkT1xYw3",
    "execution": "client",
    "arguments": {"query": "weather"},
    "status": "completed",
}


def test_function_call_and_its_output() -> None:
    call = item_round_trip(FunctionCall, FUNCTION_CALL)
    assert isinstance(call, FunctionCall)
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "18°C"}
    item_round_trip(FunctionCallOutput, output)
    item_round_trip(FunctionCall, {k: v for k, v in FUNCTION_CALL.items() if k != "id"})
    with pytest.raises(ValidationError):
        FunctionCall.model_validate({**FUNCTION_CALL, "arguments": {"city": "Lisboa"}})
    with pytest.raises(ValidationError):
        # docs/protocol.md, "Responses API": function_call_output.output is a string.
        FunctionCallOutput.model_validate({**output, "output": [{"type": "input_text"}]})
    with pytest.raises(ValidationError):
        FunctionCallOutput.model_validate({"type": "function_call_output", "output": "x"})


def test_custom_tool_call_and_its_output() -> None:
    call = {"type": "custom_tool_call", "call_id": "call_1", "name": "run_sql", "input": "SELECT 1"}
    item_round_trip(CustomToolCall, call)
    item_round_trip(
        CustomToolCallOutput,
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "1"},
    )
    parts = [{"type": "input_text", "text": "1"}]
    item_round_trip(
        CustomToolCallOutput,
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": parts},
    )
    with pytest.raises(ValidationError):
        CustomToolCall.model_validate({**call, "input": {"sql": "SELECT 1"}})


def test_tool_search_call_and_output() -> None:
    call = item_round_trip(ToolSearchCall, TOOL_SEARCH_CALL)
    assert isinstance(call, ToolSearchCall)
    output = load(EXAMPLES / "tool_search_output.json")
    assert output["call_id"] == call.call_id
    with pytest.raises(ValidationError):
        ToolSearchCall.model_validate({**TOOL_SEARCH_CALL, "arguments": '{"query": "weather"}'})
    with pytest.raises(ValidationError):
        ToolSearchCall.model_validate({**TOOL_SEARCH_CALL, "execution": "remote"})
    for field, value in [("status", "done"), ("execution", "local"), ("type", "tool_search")]:
        with pytest.raises(ValidationError):
            ToolSearchOutput.model_validate({**output, field: value})
    with pytest.raises(ValidationError):
        ToolSearchOutput.model_validate({**output, "tools": [load(INVALID / "mcp.json")]})
    item_round_trip(ToolSearchOutput, {**output, "call_id": None, "created_by": "user_1"})


def test_tool_search_output_id_may_be_omitted_but_not_null() -> None:
    # Deviation from the API reference (`id: string`): a client's answer carries no id
    # (docs/protocol.md, "The Tool union and tool_search_output").
    answer = load(EXAMPLES / "tool_search_output.json")
    del answer["id"]
    assert "id" not in item_round_trip(ToolSearchOutput, answer).to_wire()
    with pytest.raises(ValidationError):
        ToolSearchOutput.model_validate({**answer, "id": None})
