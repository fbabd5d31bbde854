"""Both decoders make the one `ToolCall`; each protocol's JSON shape stays its own."""

from __future__ import annotations

import dataclasses
import json

import pytest
from convtap.vocab import CallKind, WireProtocol
from convtap.wire.calls import ToolCall
from convtap.wire.responses import client_call, client_calls
from convtap.wire.turn import tool_call


def test_an_f_conversation_call_is_a_tool_call() -> None:
    message = {
        "id": "m1",
        "author": {"role": "assistant"},
        "recipient": "local.alefita_way",
        "content": {"content_type": "code", "text": '{"message": "oi"}'},
        "status": "finished_successfully",
    }
    call = tool_call(message)
    assert call == ToolCall(WireProtocol.CONVERSATION, "m1", None, None, "local.alefita_way",
                            CallKind.LOCAL, "alefita_way", {"message": "oi"},
                            '{"message": "oi"}', True)  # fmt: skip
    assert list(call.as_json()) == [
        "call_id", "recipient", "kind", "tool", "arguments", "arguments_text", "complete",
    ]  # fmt: skip


def test_a_responses_call_is_a_tool_call() -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup",
            "namespace": "crm", "arguments": '{"id": 7}'}  # fmt: skip
    (call,) = client_calls([item, {"type": "message"}])
    assert (call.protocol, call.kind, call.key, call.tool, call.namespace) == (
        WireProtocol.RESPONSES, CallKind.CLIENT, "call_1", "lookup", "crm",
    )  # fmt: skip
    assert call.as_json() == {
        "type": "function_call", "item_id": "fc_1", "call_id": "call_1", "name": "lookup",
        "namespace": "crm", "execution": "client", "arguments": {"id": 7},
        "arguments_text": '{"id": 7}',
    }  # fmt: skip


def test_a_call_without_a_name_or_a_call_id() -> None:
    call = client_call({"type": "tool_search_call", "id": "tsc_1", "execution": "client",
                        "arguments": {"query": "crm"}})  # fmt: skip
    assert (call.name, call.call_id, call.key) == (None, None, "tsc_1")
    assert json.loads(call.as_json()["arguments_text"]) == {"query": "crm"}


def test_a_call_is_frozen() -> None:
    call = client_call({"type": "custom_tool_call", "call_id": "c", "input": "x"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.tool = "other"  # type: ignore[misc]
    assert call.arguments is None and call.arguments_text == "x"
