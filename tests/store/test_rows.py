"""A call's row is made from the contract's call by one constructor, for both protocols; a
return's row likewise from a return."""

from __future__ import annotations

from convtap.contract.happenings import ClientCallsMade, MadeCall
from convtap.contract.registry import Where
from convtap.store.rows import UNSET, ToolCallRow, ToolReturnRow
from convtap.vocab import CallKind, WireProtocol
from convtap.wire.responses import client_calls
from convtap.wire.session import ToolReturn
from convtap.wire.turn import tool_call


def test_an_f_conversation_call_row() -> None:
    call = tool_call({"id": "m1", "author": {"role": "assistant"}, "recipient": "local.echo",
                      "content": {"text": "{}"}, "status": "in_progress"})  # fmt: skip
    assert call is not None
    row = ToolCallRow.of(MadeCall(call, Where("c1", "m1", None, "t1"), 2.5), "{}", "{}")
    assert (row.call_id, row.protocol, row.turn_id, row.conversation_id, row.tool) == (
        "m1", WireProtocol.CONVERSATION, "t1", "c1", "echo",
    )  # fmt: skip
    assert (row.complete, row.called_at, row.kind) == (0, 2.5, CallKind.LOCAL)
    assert row.item_id is UNSET and row.namespace is UNSET  # columns of the Responses API


def test_a_responses_call_row_is_keyed_by_its_call_id_else_its_item_id() -> None:
    items = [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
              "namespace": "ns", "arguments": "{}"},
             {"type": "tool_search_call", "id": "tsc_1", "execution": "client",
              "arguments": {}}]  # fmt: skip
    made = ClientCallsMade("flow", "resp_1", tuple(client_calls(items)), 3.0).made()
    rows = [ToolCallRow.of(m, None, m.call.arguments_text) for m in made]
    assert [(r.call_id, r.item_id, r.tool, r.namespace) for r in rows] == [
        ("call_1", "fc_1", "f", "ns"),
        ("tsc_1", "tsc_1", "tool_search_call", None),  # no name: the type names it
    ]
    assert {(r.turn_id, r.conversation_id, r.complete) for r in rows} == {("flow", "resp_1", 1)}


def test_an_f_conversation_return_row_keeps_its_body_tool_and_parent() -> None:
    ret = ToolReturn("m2", "echo", "m1", "echo", None, {})
    row = ToolReturnRow.of(ret, WireProtocol.CONVERSATION, Where("c1", flow_id="f1"), 1, "{}",
                           4.0, "m0")  # fmt: skip
    assert (row.id, row.flow_id, row.conversation_id, row.message_id, row.tool) == (
        "f1:1", "f1", "c1", "m2", "echo",
    )  # fmt: skip
    assert (row.body_call_id, row.body_tool, row.parent_message_id) == ("m1", "echo", "m0")
    assert (row.message, row.returned_at, row.call_id) == ("{}", 4.0, UNSET)


def test_a_responses_return_row_writes_no_body_tool_nor_parent() -> None:
    ret = ToolReturn("fco_1", "function_call_output", "call_1", None, None, {})
    row = ToolReturnRow.of(ret, WireProtocol.RESPONSES, Where("resp_1", flow_id="f2"), 0, "{}",
                           5.0)  # fmt: skip
    assert (row.id, row.protocol, row.tool, row.body_call_id) == (
        "f2:0", WireProtocol.RESPONSES, "function_call_output", "call_1",
    )  # fmt: skip
    assert row.body_tool is UNSET and row.parent_message_id is UNSET
    names, _ = row.columns()
    assert "body_tool" not in names and "parent_message_id" not in names
