"""The Responses API end to end: a real mitmdump with the addon, the mock's `/v1/responses`
upstream, and the reference client's `run_responses` (a `function_call` and a client
`tool_search_call`, answered with `previous_response_id`)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from convtap.mock.refclient import RefClient
from convtap.mock.refresponses import ResponsesSummary, responses_request
from convtap.mock.server import MockServer
from convtap.wire.responses import decode_responses
from convtap.wire.sse import SSEParser

from tests.harness import Proxy, mitmdump

RESPONSES = "/v1/responses"
EXAMPLE = Path(__file__).resolve().parents[2] / "captures/examples/responses/function_call.sse"


def event_types(body: bytes) -> list[str]:
    """The event types in order, a run of one type (argument deltas) counted once, after
    checking that every event carries its sequence_number, 0, 1, 2, ..."""
    parser = SSEParser()
    events = [json.loads(event.data) for event in parser.feed(body)]
    assert not parser.close()  # nothing cut off
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    types = [e["type"] for e in events]
    return [kind for n, kind in enumerate(types) if n == 0 or types[n - 1] != kind]


def calls_rows(proxy: Proxy) -> list[tuple[Any, ...]]:
    return proxy.rows(
        "SELECT call_id, item_id, recipient, conversation_id, tool FROM tool_calls "
        "WHERE protocol = 'responses' ORDER BY item_id"
    )


def expected_calls(summary: ResponsesSummary) -> list[tuple[Any, ...]]:
    return sorted(
        (c.call_id, c.item_id, c.type, summary.response_id, c.name or c.type) for c in summary.calls
    )


def assert_calls_recorded(proxy: Proxy, summary: ResponsesSummary) -> None:
    assert proxy.rows("SELECT count(*) FROM flows WHERE kind = 'responses'") == [(2,)]
    assert sorted(calls_rows(proxy)) == expected_calls(summary)


# -- the mock on its own -----------------------------------------------------------------------


def test_the_mock_streams_calls_shaped_like_the_example_with_fresh_ids() -> None:
    with MockServer("plain", seed=3) as mock:
        client = RefClient(mock.url, timeout=5)
        first, raw = client.responses(responses_request())
        again, _ = client.responses(responses_request(), path="/backend-api/codex/responses")
        final, _ = client.responses(responses_request(stream=False))
    assert event_types(raw) == event_types(EXAMPLE.read_bytes())
    assert b"[DONE]" not in raw and first.status == "completed" and not first.errors
    calls = first.tool_calls()
    assert [(c.recipient, c.name) for c in calls] == [
        ("function_call", "get_weather"),
        ("tool_search_call", None),
    ]
    prefixes = [("fc_", "call_"), ("tsc_", "call_")]
    for call, (item, call_id) in zip(calls, prefixes, strict=True):
        assert call.item_id and call.item_id.startswith(item)
        assert call.call_id and call.call_id.startswith(call_id)
    assert calls[0].arguments == {"city": "São Paulo", "unit": "celsius"}
    ids = {first.response_id, again.response_id, final.response_id}
    assert len(ids) == 3 and all(i and i.startswith("resp_") for i in ids)
    item_ids = {c.item_id for d in (first, again, final) for c in d.tool_calls()}
    assert len(item_ids) == 6  # fresh per response
    assert [c.recipient for c in final.tool_calls()] == ["function_call", "tool_search_call"]


def test_the_lenient_mock_answers_outputs_whatever_their_call_id() -> None:
    with MockServer("alefita_way", lenient=True) as mock:
        summary = RefClient(mock.url, timeout=5).run_responses(faulty=True)
        received = mock.received
    assert "21 °C" in summary.text and summary.final_response_id != summary.response_id
    assert [r["path"] for r in received] == [RESPONSES, RESPONSES]
    assert [r["body"] for r in received] == list(summary.sent)
    fc = summary.calls[0]
    assert received[1]["body"]["input"][0]["call_id"] == fc.item_id  # the faulty answer
    assert received[1]["body"]["previous_response_id"] == summary.response_id


def post_json(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_the_mock_refuses_what_the_real_api_refuses() -> None:
    """HTTP 400 with the API's error body: an output naming no call of the previous response,
    an unknown previous_response_id, a call of the previous response left without its output.
    The right answer, and an output naming a tool instead of a call (the Codex CLI), are taken."""
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    with MockServer("declared", seed=1) as mock:
        url = mock.url + RESPONSES
        status, first = post_json(url, {"model": "m", "tools": tools, "input": "weather?"})
        (call,) = [i for i in first["output"] if i["type"] == "function_call"]
        chained = {"model": "m", "previous_response_id": first["id"]}

        def answer(*items: dict[str, Any], **body: Any) -> tuple[int, dict[str, Any]]:
            return post_json(url, {**chained, "input": list(items), **body})

        def output(call_id: str) -> dict[str, Any]:
            return {"type": "function_call_output", "call_id": call_id, "output": "21"}

        refusals = {
            "item id": answer(output(call["id"])),
            "unknown previous": answer(output(call["call_id"]), previous_response_id="resp_no"),
            "no output": answer({"role": "user", "content": "and?"}),
        }
        goal = {"type": "function_call_output", "name": "goal_objective", "namespace": "agent",
                "output": "done"}  # fmt: skip
        taken = answer(output(call["call_id"]), goal)
    assert status == 200 and taken[0] == 200
    assert {name: code for name, (code, _) in refusals.items()} == dict.fromkeys(refusals, 400)
    messages = {name: body["error"]["message"] for name, (_, body) in refusals.items()}
    assert (
        messages["item id"]
        == f"No tool call found for function call output with call_id {call['id']}."
    )
    assert refusals["unknown previous"][1]["error"]["code"] == "previous_response_not_found"
    assert messages["no output"] == f"No tool output found for function call {call['call_id']}."


def test_the_mock_takes_what_the_real_api_takes() -> None:
    """Outputs for calls the server holds (a `conversation`'s, an `item_reference`'s), a list
    output, and a server tool search echoed as history: HTTP 200, as from the real API."""
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    with MockServer("declared", seed=1) as mock:
        url = mock.url + RESPONSES

        def called() -> dict[str, Any]:
            _, first = post_json(url, {"model": "m", "tools": tools, "input": "weather?"})
            (call,) = [i for i in first["output"] if i["type"] == "function_call"]
            return call

        def output(call: dict[str, Any], value: Any = "21") -> dict[str, Any]:
            return {"type": "function_call_output", "call_id": call["call_id"], "output": value}

        search = {"type": "tool_search_call", "call_id": None, "execution": "server",
                  "arguments": {}, "status": "completed"}  # fmt: skip
        found = {**search, "type": "tool_search_output", "tools": []}
        call = called()
        listed = [{"type": "input_text", "text": "21"}]
        taken = {
            "conversation": post_json(url, {"model": "m", "conversation": "conv_1",
                                            "input": [output(call)]}),
            "reference": post_json(url, {"model": "m", "input": [
                {"type": "item_reference", "id": call["id"]}, output(called())]}),
            "echo": post_json(url, {"model": "m", "input": [search, found, call,
                                                            output(call, listed)]}),
        }  # fmt: skip
        invented = {**call, "call_id": "call_nowhere"}
        refused = post_json(url, {"model": "m", "conversation": "conv_1",
                                  "input": [output(invented)]})  # fmt: skip
    assert {name: code for name, (code, _) in taken.items()} == dict.fromkeys(taken, 200)
    assert refused[0] == 400  # a call the server never made: still no call found


def test_the_mock_gzips_responses_streams() -> None:
    with MockServer("plain", gzip=True) as mock:
        summary = RefClient(mock.url, timeout=5).run_responses()
        sent = mock.sent
    assert "21 °C" in summary.text
    assert [path for path, _ in sent] == [RESPONSES, RESPONSES]
    assert decode_responses([summary.bodies[0]]).response_id == summary.response_id


# -- through the proxy -------------------------------------------------------------------------


def test_a_responses_session_is_recorded_and_paired(tmp_path: Path) -> None:
    with (
        MockServer("alefita_way", seed=7) as mock,
        mitmdump(tmp_path, f"reverse:{mock.url}") as proxy,
    ):
        summary = RefClient(proxy.url).run_responses()
        # the client got exactly the bytes the mock sent, for both streams
        assert mock.sent == [(RESPONSES, body) for body in summary.bodies]
        proxy.stop()
    assert "21 °C" in summary.text
    assert [c.type for c in summary.calls] == ["function_call", "tool_search_call"]
    assert_calls_recorded(proxy, summary)
    returns = proxy.rows(
        "SELECT tool, body_call_id, call_id, conversation_id FROM tool_returns "
        "WHERE protocol = 'responses' ORDER BY tool"
    )
    fc, ts = summary.calls
    assert returns == [
        ("function_call_output", fc.call_id, fc.call_id, summary.response_id),
        ("tool_search_output", ts.call_id, ts.call_id, summary.response_id),
    ]
    assert proxy.rows("SELECT rule, call_id, message FROM findings") == []


def test_an_output_naming_the_item_id_is_a_finding(tmp_path: Path) -> None:
    lenient = MockServer("alefita_way", lenient=True)  # the real API would refuse it (400)
    with lenient as mock, mitmdump(tmp_path, f"reverse:{mock.url}") as proxy:
        summary = RefClient(proxy.url).run_responses(faulty=True)
        proxy.stop()
    assert_calls_recorded(proxy, summary)
    fc, ts = summary.calls
    returns = proxy.rows(
        "SELECT tool, body_call_id, call_id FROM tool_returns "
        "WHERE protocol = 'responses' ORDER BY tool"
    )
    assert returns == [
        ("function_call_output", fc.item_id, None),  # names no call: left unpaired
        ("tool_search_output", ts.call_id, ts.call_id),
    ]
    findings = proxy.rows("SELECT rule, call_id FROM findings")
    assert ("responses-output-call-id", fc.item_id) in findings
    assert all(call_id != ts.call_id for _, call_id in findings)


@pytest.mark.parametrize("path", [RESPONSES, "/backend-api/codex/responses"])
def test_json_responses_record_the_same_calls(tmp_path: Path, path: str) -> None:
    with MockServer("alefita_way") as mock, mitmdump(tmp_path, f"reverse:{mock.url}") as proxy:
        summary = RefClient(proxy.url).run_responses(stream=False, path=path)
        assert mock.sent == []  # no event stream: two JSON bodies
        proxy.stop()
    assert all(body.lstrip().startswith(b"{") for body in summary.bodies)
    assert "21 °C" in summary.text
    assert_calls_recorded(proxy, summary)
    paired = proxy.rows(
        "SELECT call_id FROM tool_returns WHERE protocol = 'responses' ORDER BY call_id"
    )
    assert paired == sorted((c.call_id,) for c in summary.calls)
    assert proxy.rows("SELECT rule, call_id FROM findings") == []
