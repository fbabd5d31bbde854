"""A call's row is made from the contract's call by one constructor, for both protocols."""

from __future__ import annotations

from convtap.contract.happenings import ClientCallsMade, MadeCall
from convtap.contract.registry import Where
from convtap.store.rows import UNSET, ToolCallRow
from convtap.vocab import CallKind, WireProtocol
from convtap.wire.responses import client_calls
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
