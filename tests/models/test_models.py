"""Tests for convtap.models: the documented examples validate and round-trip; the literals bite."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from convtap.models import (
    EXECUTION_TARGET_ADAPTER,
    EXPORTED,
    ConversationMessage,
    ConversationRequestBody,
    ExecutionLocationFlags,
    FirstUserMessageMetadata,
    HandoffParams,
    HandoffSignature,
    LocalExecutionTarget,
    LocalFunctionSignature,
    LocalToolCallMessage,
    PrepareRequestBody,
    RemoteExecutionTarget,
    ToolResultBody,
    ToolReturnMessage,
    WireModel,
    export_schemas,
)
from pydantic import BaseModel, ValidationError

from tests.seeds import SEED_DIRS, seed_file

EXAMPLES: list[tuple[str, type[WireModel]]] = [
    ("signature_handoff.json", HandoffSignature),
    ("signature_handoff.json", LocalFunctionSignature),
    ("signature_alefita_way.json", LocalFunctionSignature),
    ("call_message.json", LocalToolCallMessage),
    ("call_message.json", ConversationMessage),
    ("return_message.json", ToolReturnMessage),
    ("return_message.json", ConversationMessage),
    ("return_body.json", ToolResultBody),
    ("execution_target_local.json", LocalExecutionTarget),
]


def load(name: str) -> Any:
    return json.loads(seed_file(name).read_text(encoding="utf-8"))


def canonical(value: Any) -> str:
    # Key order is not part of JSON; int vs float is, and sort_keys keeps that visible.
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def assert_round_trip(model: type[WireModel], wire: Any) -> WireModel:
    parsed = model.model_validate(wire)
    out = parsed.to_wire()
    assert out == wire
    assert canonical(out) == canonical(wire)
    return parsed


# ── the examples of docs/protocol.md ──────────────────────────────────────────


@pytest.mark.parametrize(("name", "model"), EXAMPLES)
def test_seed_example_round_trips(name: str, model: type[WireModel]) -> None:
    assert_round_trip(model, load(name))


def test_seed_files_are_pretty_printed_verbatim() -> None:
    for path in sorted(p for d in SEED_DIRS for p in d.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"


def test_return_body_is_the_parsed_return_text() -> None:
    ret = ToolReturnMessage.model_validate(load("return_message.json"))
    assert ret.result_body().to_wire() == load("return_body.json")


def test_call_id_is_the_call_message_id() -> None:
    call = LocalToolCallMessage.model_validate(load("call_message.json"))
    body = ToolResultBody.model_validate(load("return_body.json"))
    assert body.call_id == call.id
    assert call.tool_name == body.tool == "alefita_way"
    assert call.arguments().to_wire() == {"message": "segundo eco do caminho"}


def test_call_message_without_update_time_keeps_it_absent() -> None:
    call = LocalToolCallMessage.model_validate(load("call_message.json"))
    assert call.update_time is None
    assert "update_time" not in call.to_wire()


def test_execution_target_example_discriminates_to_local() -> None:
    wire = load("execution_target_local.json")
    target = EXECUTION_TARGET_ADAPTER.validate_python(wire)
    assert isinstance(target, LocalExecutionTarget)
    assert target.cwd == "<diretório da conversa>"
    assert target.to_wire() == wire


def test_handoff_params_from_a_handoff_call() -> None:
    params = HandoffParams.model_validate_json('{"prompt": "build it", "reason": "needs files"}')
    assert params.to_wire() == {"prompt": "build it", "reason": "needs files"}


# ── unknown fields and explicit nulls survive ────────────────────────────────


def test_unknown_fields_survive_at_every_level() -> None:
    wire = load("call_message.json")
    wire["brand_new"] = {"nested": [1, None, 2.5]}
    wire["author"]["extra_author"] = True
    wire["content"]["extra_content"] = None
    parsed = assert_round_trip(LocalToolCallMessage, wire)
    assert parsed.model_extra == {"brand_new": {"nested": [1, None, 2.5]}}


def test_unknown_param_schema_keys_survive() -> None:
    wire = load("signature_alefita_way.json")
    wire["params"][0]["type"]["enum"] = ["a", "b"]
    wire["strict"] = False
    assert_round_trip(LocalFunctionSignature, wire)


def test_tool_result_keeps_handoff_shape_and_unknown_keys() -> None:
    wire = {
        "call_id": "a7da448b-589d-4bf1-bc4a-e378d2629f25",
        "result": {"accepted": True, "thread_id": "t-1", "something_else": [1]},
        "tool": "handoff",
    }
    assert_round_trip(ToolResultBody, wire)


def test_explicit_null_optionals_round_trip() -> None:
    wire = load("return_message.json")
    assert wire["update_time"] is None
    assert_round_trip(ToolReturnMessage, wire)
    message = load("call_message.json")
    message["channel"] = None
    assert_round_trip(ConversationMessage, message)


def test_conversation_request_body_with_a_return() -> None:
    wire = {
        "action": "next",
        "local_function_signatures": [load("signature_handoff.json")],
        "messages": [load("return_message.json")],
        "model": "gpt-5-6-thinking",
        "supported_encodings": ["v1"],
        "thinking_effort": "extended",
        "timezone": "America/Sao_Paulo",
        "timezone_offset_min": 180,
        "client_prepare_state": "success",
        "app_attest_challenge": "challenge",
        "conversation_id": "c-1",
        "parent_message_id": "b6d6e3a6-af6f-4a78-a649-8e3935182fcc",
        "conversation_execution_target": load("execution_target_local.json"),
    }
    body = assert_round_trip(ConversationRequestBody, wire)
    assert isinstance(body, ConversationRequestBody)
    assert body.timezone_offset_min == 180
    assert isinstance(body.timezone_offset_min, int)


def test_prepare_request_body_with_partial_query() -> None:
    wire = {
        "action": "next",
        "client_prepare_state": "sent",
        "partial_query": {"content": {"content_type": "text", "parts": ["hel"]}, "id": "q-1"},
        "model": "gpt-5-6-thinking",
        "thinking_effort": "standard",
        "timezone": "UTC",
        "timezone_offset_min": 0,
    }
    assert_round_trip(PrepareRequestBody, wire)
    with pytest.raises(ValidationError):
        PrepareRequestBody.model_validate({**wire, "client_prepare_state": "success"})


def test_first_user_message_metadata_and_flags() -> None:
    wire = {
        "conversation_execution_target": {"kind": "remote", "region": "x"},
        "other_metadata": 1,
    }
    meta = assert_round_trip(FirstUserMessageMetadata, wire)
    assert isinstance(meta, FirstUserMessageMetadata)
    assert isinstance(meta.conversation_execution_target, RemoteExecutionTarget)
    flags = {
        "workLocalAccess": True,
        "workCloudAccess": False,
        "codexLocalAccess": True,
        "localBackend": False,
    }
    assert_round_trip(ExecutionLocationFlags, flags)


# ── negative cases ───────────────────────────────────────────────────────────


def test_return_addressed_to_a_tool_is_rejected() -> None:
    wire = load("return_message.json")
    wire["recipient"] = "local.x"
    with pytest.raises(ValidationError):
        ToolReturnMessage.model_validate(wire)


def test_return_with_language_is_rejected() -> None:
    wire = load("return_message.json")
    wire["content"]["language"] = "json"
    with pytest.raises(ValidationError):
        ToolReturnMessage.model_validate(wire)


def test_return_from_a_non_tool_author_is_rejected() -> None:
    wire = load("return_message.json")
    wire["author"]["role"] = "assistant"
    with pytest.raises(ValidationError):
        ToolReturnMessage.model_validate(wire)


def test_return_without_hidden_flag_validates_and_with_it_round_trips() -> None:
    wire = load("return_message.json")
    ToolReturnMessage.model_validate(wire)
    wire["metadata"] = {"is_visually_hidden_from_conversation": True}
    assert_round_trip(ToolReturnMessage, wire)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("recipient",), "all"),
        (("recipient",), "web.run"),
        (("channel",), "final"),
        (("content", "language"), None),
        (("content", "content_type"), "text"),
        (("author", "name"), "alefita_way"),
    ],
)
def test_call_message_breaches_are_rejected(path: tuple[str, ...], value: Any) -> None:
    wire = copy.deepcopy(load("call_message.json"))
    target = wire
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValidationError):
        LocalToolCallMessage.model_validate(wire)


def test_call_message_later_status_is_accepted() -> None:
    wire = load("call_message.json")
    wire["status"] = "finished_successfully"
    assert_round_trip(LocalToolCallMessage, wire)


def test_execution_target_discriminates_and_rejects_unknown_kind() -> None:
    local = EXECUTION_TARGET_ADAPTER.validate_python(load("execution_target_local.json"))
    remote = EXECUTION_TARGET_ADAPTER.validate_python({"kind": "remote", "anything": [1]})
    assert isinstance(local, LocalExecutionTarget)
    assert isinstance(remote, RemoteExecutionTarget)
    assert remote.to_wire() == {"kind": "remote", "anything": [1]}
    with pytest.raises(ValidationError):
        EXECUTION_TARGET_ADAPTER.validate_python({"kind": "cloud_executor"})
    with pytest.raises(ValidationError):
        EXECUTION_TARGET_ADAPTER.validate_python({"kind": "local_executor", "cwd": "/x"})


@pytest.mark.parametrize("missing", ["tool", "call_id", "result"])
def test_tool_result_body_requires_its_root_keys(missing: str) -> None:
    wire = load("return_body.json")
    del wire[missing]
    with pytest.raises(ValidationError):
        ToolResultBody.model_validate(wire)


def test_handoff_signature_rejects_other_tools_and_changed_params() -> None:
    with pytest.raises(ValidationError):
        HandoffSignature.model_validate(load("signature_alefita_way.json"))
    swapped = load("signature_handoff.json")
    swapped["params"].reverse()
    with pytest.raises(ValidationError):
        HandoffSignature.model_validate(swapped)
    optional = load("signature_handoff.json")
    optional["params"][0]["required"] = False
    with pytest.raises(ValidationError):
        HandoffSignature.model_validate(optional)


def test_param_schema_type_and_signature_kind_are_pinned() -> None:
    wire = load("signature_alefita_way.json")
    wire["params"][0]["type"]["type"] = "integer"
    with pytest.raises(ValidationError):
        LocalFunctionSignature.model_validate(wire)
    wire = load("signature_alefita_way.json")
    wire["type"] = "positional"
    with pytest.raises(ValidationError):
        LocalFunctionSignature.model_validate(wire)


def test_request_body_rejects_unknown_encoding() -> None:
    with pytest.raises(ValidationError):
        ConversationRequestBody.model_validate(
            {
                "action": "next",
                "messages": [],
                "model": "m",
                "supported_encodings": ["v2"],
                "thinking_effort": "standard",
                "timezone": "UTC",
                "timezone_offset_min": 0,
                "client_prepare_state": "success",
                "app_attest_challenge": "c",
            }
        )


# ── schema export ────────────────────────────────────────────────────────────


def test_export_schemas_is_deterministic_and_parses() -> None:
    first = export_schemas()
    assert first == export_schemas()
    assert list(first) == [f"{model.__name__}.json" for model in EXPORTED]
    assert len(set(first)) == len(EXPORTED)
    for name, text in first.items():
        assert text.endswith("}\n")
        schema = json.loads(text)
        assert schema["title"] == name.removesuffix(".json")
        assert text == json.dumps(schema, indent=2, sort_keys=True) + "\n"


def test_exported_models_keep_unknown_fields() -> None:
    for model in EXPORTED:
        assert issubclass(model, BaseModel)
        assert model.model_config.get("extra") == "allow"
        assert model.model_json_schema().get("additionalProperties") is True
