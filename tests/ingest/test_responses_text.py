"""`convtap decode` reads a Responses exchange as a conversation: reasoning summaries, the
assistant's text with its phase, calls with their namespace, in order."""

from __future__ import annotations

import json
from pathlib import Path

from convtap.ingest.responses_text import fold, item_line, request_lines

from tests.runner import convtap


def test_decode_shows_the_answer_as_a_conversation(tmp_path: Path) -> None:
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Check the order first."}],
    }
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "phase": "final_answer",
        "content": [{"type": "output_text", "text": "Order A-17\nhas shipped."}],
    }
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "lookup",
        "namespace": "crm",
        "arguments": '{"id": 7}',
        "caller": {"type": "program"},
    }
    response = {"id": "resp_1", "status": "completed", "output": [reasoning, call, message]}
    events = [{"type": "response.created", "response": {**response, "output": []}},
              {"type": "response.completed", "response": response}]  # fmt: skip
    body = tmp_path / "answer.sse"
    body.write_text("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events))
    lines = convtap("decode", str(body)).stdout.splitlines()
    assert lines[1:4] == [
        "── reasoning: Check the order first.",
        '── ⚙ function_call crm.lookup · call_id call_1 · by program: {"id": 7}',
        "── assistant (final_answer): Order A-17 has shipped.",
    ]


def test_a_request_reads_in_order_with_its_instructions_folded() -> None:
    body = {"model": "gpt-5.1", "previous_response_id": "resp_1", "instructions": "One.\nTwo.",
            "input": [{"type": "function_call_output", "name": "goal_objective",
                       "namespace": "agent", "output": "done"}]}  # fmt: skip
    assert request_lines(body) == [
        "model gpt-5.1 · after resp_1",
        "── instructions: One.",
        "── ↩ function_call_output · no call (agent.goal_objective): done",
    ]
    assert request_lines({"model": "m", "input": "hi"})[1] == "── user: hi"
    assert item_line({"type": "brand_new", "id": "x_1"}) == "── brand_new · id x_1"
    assert fold("a" * 200, 10) == "a" * 9 + "…"
