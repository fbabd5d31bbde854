"""The rule registry: every rule's failing and passing fixture, the observed return, the docs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from convtap.contract.registry import SEVERITIES, registry
from convtap.ingest.capture import audit_capture, import_into

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "captures" / "examples" / "rules"
PROTOCOL_RULES = [
    "return-single-message", "return-author-role", "return-author-name", "return-recipient",
    "return-channel", "return-content-type", "return-language", "return-body-json",
    "return-call-id", "return-body-tool", "return-body-result", "return-parent", "return-status",
    "return-end-turn", "return-weight", "return-hidden", "return-conversation", "return-id-fresh",
    "call-unanswered", "return-duplicate", "return-orphan", "call-undeclared", "call-arguments",
    "challenge-reused", "handoff-missing", "execution-target", "prepare-missing",
    "responses-output-call-id", "responses-output-names-tool", "responses-output-type",
    "responses-tool-search", "responses-tools-valid", "responses-call-unanswered",
    "responses-item-duplicate", "responses-chain-broken", "responses-orphan-repeated",
    "responses-socket-overlap", "replay-miss",
]  # fmt: skip


def audit_fixture(har: Path, tmp_path: Path) -> list[str]:
    db = tmp_path / f"{har.parent.name}-{har.stem}.db"
    import_into(db, [har])
    return [f.rule for f in audit_capture(db).findings]


def test_the_registry_holds_exactly_the_contract_rules() -> None:
    rules = registry()
    assert list(rules) == PROTOCOL_RULES
    for rule in rules.values():
        assert rule.severity in SEVERITIES
        assert rule.summary and rule.explanation.strip() and rule.seed
        json.loads(rule.bad)
        json.loads(rule.good)
    warnings = {r.id for r in rules.values() if r.severity == "warning"}
    assert warnings == {
        "return-hidden", "call-unanswered", "handoff-missing", "execution-target",
        "prepare-missing", "responses-call-unanswered", "responses-output-names-tool",
    }  # fmt: skip


@pytest.mark.parametrize("rule_id", PROTOCOL_RULES)
def test_every_rule_fires_on_its_failing_fixture_and_not_on_its_passing_one(
    rule_id: str, tmp_path: Path
) -> None:
    folder = FIXTURES / rule_id
    failing = audit_fixture(folder / "fail.har", tmp_path)
    assert rule_id in failing
    passing = audit_fixture(folder / "pass.har", tmp_path)
    assert rule_id not in passing
    assert passing == [], f"a passing fixture should be clean: {passing}"


def test_the_observed_return_record_passes_every_error_rule(tmp_path: Path) -> None:
    """The record of docs/protocol.md, "The tool return contract", as printed there (metadata
    {}), answering the call of "Local tool calls"."""
    har = json.loads((FIXTURES / "return-hidden" / "fail.har").read_text())
    seed_return = json.loads((ROOT / "captures" / "examples" / "seed" / "return_message.json")
                             .read_text())  # fmt: skip
    request = json.loads(har["log"]["entries"][4]["request"]["postData"]["text"])
    assert request["messages"] == [seed_return]  # the fixture carries that record as is
    path = tmp_path / "seed.har"
    path.write_text(json.dumps(har))
    assert audit_fixture(path, tmp_path) == ["return-hidden"]  # a warning, no error


def test_the_docs_document_every_rule_as_the_registry_says() -> None:
    """The rules table (in docs/rules.md since README.md links to it) lists every rule with its
    severity, once."""
    docs = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md"))])
    tables = docs.split("| rule | severity | what must hold |")
    assert len(tables) == 2, "exactly one rules table in README.md and docs/"
    table = tables[1].split("\n\n", 1)[0]
    rows = re.findall(
        r"^\| \[?`([a-z-]+)`\]?(?:\(#[a-z-]+\))? \| (error|warning|info) \|", table, re.M
    )
    assert len(rows) == len(dict(rows))
    assert dict(rows) == {r.id: r.severity for r in registry().values()}


def test_a_rule_marks_a_field_of_the_answer_it_checks() -> None:
    """`marks` (the field the report highlights) is declared only by rules checked on an answer
    (a return, a Responses output, a request's tools), and every rule named after a field of
    the return has one that names it."""
    from convtap.contract import registry as reg
    from convtap.contract.responses import OutputFacts, ToolsFacts
    from convtap.contract.returns import ReturnFacts

    facts = {rule_id: kind for rule_id, (kind, _) in reg._CHECKS.items()}
    marked = {rule.id: rule.marks for rule in registry().values() if rule.marks}
    assert marked, "no rule marks a field"
    for rule_id in marked:
        assert issubclass(facts[rule_id], ReturnFacts | OutputFacts | ToolsFacts), rule_id
    for field in ("recipient", "channel", "status", "weight", "end-turn", "language"):
        assert marked[f"return-{field}"][-1] == field.replace("-", "_")


def test_no_error_on_what_the_real_api_accepts() -> None:
    """A function tool without `strict` (the API defaults it), and the Codex CLI's output that
    names a tool instead of a call: no error; the second has its own warning, and only that."""
    from convtap.contract.auditor import Auditor

    auditor = Auditor()
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    goal = {"type": "function_call_output", "id": "fco_1", "name": "goal_objective",
            "namespace": "agent", "output": "done"}  # fmt: skip
    body = {"model": "gpt-5.1", "tools": [tool], "input": [goal]}
    found = auditor.responses.request("f1", body, 1.0)
    assert [(f.rule, f.severity) for f in found] == [("responses-output-names-tool", "warning")]
    assert "agent.goal_objective" in found[0].message
    wrong = {"type": "function_call_output", "call_id": "call_nowhere", "output": "x"}
    found = auditor.responses.request("f2", {**body, "input": [wrong]}, 2.0)
    assert [f.rule for f in found] == ["responses-output-call-id"]  # that rule keeps its meaning


def test_tools_declared_in_an_additional_tools_item_are_checked() -> None:
    from convtap.contract.auditor import Auditor

    bad = {"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 80}
    good = {"type": "function", "name": "f", "parameters": None}
    items = [{"type": "additional_tools", "tools": [good, bad]}]
    found = Auditor().responses.request("f1", {"model": "gpt-5.1", "input": items}, 1.0)
    assert [f.rule for f in found] == ["responses-tools-valid"]
    assert "tool 1 (file_search) of an additional_tools item's tools" in found[0].message


# -- what the real Responses API accepts gets no error (the SDK's input item types as oracle) ----

FUNCTION_CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup",
                 "arguments": "{}", "status": "completed"}  # fmt: skip


def audited(*steps: tuple[str, Any]) -> list[tuple[str, str]]:
    """(rule, severity) of every finding of a session: ("response", (id, [calls])) is a
    response's output items, ("request", body) a request; the end of the capture included."""
    from convtap.contract.auditor import Auditor
    from convtap.contract.happenings import ClientCallsMade
    from convtap.wire.responses import client_calls

    auditor = Auditor()
    found = []
    for n, (kind, value) in enumerate(steps):
        if kind == "response":
            response_id, items = value
            made = ClientCallsMade(f"r{n}", response_id, tuple(client_calls(items)), n).made()
            found += auditor.responses.response(f"r{n}", response_id, made)
        else:
            found += auditor.responses.request(f"q{n}", value, n)
    found += auditor.finish()
    return [(f.rule, f.severity) for f in found]


@pytest.mark.parametrize(
    "output",
    [
        "plain text",
        [{"type": "input_text", "text": "21 °C"}],
        [
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=",
             "detail": "auto"},
            {"type": "input_file", "file_id": "file-1"},
            {"type": "input_file", "filename": "a.txt", "file_data": "data:text/plain;base64,YQ=="},
        ],
        [],
    ],
)  # fmt: skip
def test_a_function_call_output_may_be_a_string_or_a_list_of_input_content(output: Any) -> None:
    answer = {"type": "function_call_output", "call_id": "call_1", "output": output}
    steps = [("response", ("resp_1", [FUNCTION_CALL])),
             ("request", {"previous_response_id": "resp_1", "input": [answer]})]  # fmt: skip
    assert audited(*steps) == []


@pytest.mark.parametrize("output", [{"ok": True}, 21, None, ["text"], [{"type": "output_text"}]])
def test_a_function_call_output_of_another_shape_is_still_an_error(output: Any) -> None:
    answer = {"type": "function_call_output", "call_id": "call_1", "output": output}
    steps = [("response", ("resp_1", [FUNCTION_CALL])),
             ("request", {"previous_response_id": "resp_1", "input": [answer]})]  # fmt: skip
    assert audited(*steps) == [("responses-output-type", "error")]


@pytest.mark.parametrize("conversation", ["conv_1", {"id": "conv_1"}])
def test_an_output_in_a_conversation_answers_a_call_the_server_holds(conversation: Any) -> None:
    """With `conversation`, the server keeps the items: the call is not replayed, and the
    conversation may have begun before the capture."""
    answer = {"type": "function_call_output", "call_id": "call_1", "output": "x"}
    elsewhere = {"type": "function_call_output", "call_id": "call_before", "output": "x"}
    steps = [("response", ("resp_1", [FUNCTION_CALL])),
             ("request", {"conversation": conversation, "input": [answer, elsewhere]})]  # fmt: skip
    assert audited(*steps) == []
    by_item = {"type": "function_call_output", "call_id": "fc_1", "output": "x"}
    steps[1] = ("request", {"conversation": conversation, "input": [by_item]})
    assert ("responses-output-call-id", "error") in audited(*steps)  # the item id: still wrong


def test_outputs_answer_calls_replayed_beside_a_previous_response_and_by_reference() -> None:
    mine = {**FUNCTION_CALL, "id": "fc_2", "call_id": "call_2"}
    answers = [{"type": "function_call_output", "call_id": c, "output": "x"}
               for c in ("call_2", "call_1")]  # fmt: skip
    with_previous = {"previous_response_id": "resp_1", "input": [mine, *answers]}
    assert audited(("response", ("resp_1", [FUNCTION_CALL])), ("request", with_previous)) == []
    referenced = {"store": True, "input": [{"type": "item_reference", "id": "fc_1"}, answers[1]]}
    assert audited(("response", ("resp_1", [FUNCTION_CALL])), ("request", referenced)) == []
    untyped = {"input": [{"id": "fc_1"}, answers[1]]}  # an item_reference's type is optional
    assert audited(("response", ("resp_1", [FUNCTION_CALL])), ("request", untyped)) == []


def test_a_server_tool_search_echoed_as_history_is_no_answer_to_check() -> None:
    """A stateless client (openai-agents' Runner) sends back the server's own tool_search_call
    and tool_search_output, both `execution: "server"`."""
    search = {"type": "tool_search_call", "id": "tsc_1", "call_id": None, "execution": "server",
              "arguments": {"query": "calendar"}, "status": "completed"}  # fmt: skip
    found = {"type": "tool_search_output", "id": "tso_1", "call_id": None, "execution": "server",
             "status": "completed", "tools": []}  # fmt: skip
    answer = {"type": "function_call_output", "call_id": "call_1", "output": "x"}
    body = {"input": [{"role": "user", "content": "hi"}, search, found, FUNCTION_CALL, answer]}
    assert audited(("request", body)) == []


def test_a_tool_search_output_without_execution_answers_a_client_search() -> None:
    """`execution` is optional on the input item (the SDK's type)."""
    search = {"type": "tool_search_call", "id": "tsc_1", "call_id": "call_S1",
              "execution": "client", "arguments": {}, "status": "completed"}  # fmt: skip
    answer = {"type": "tool_search_output", "call_id": "call_S1", "status": "completed",
              "tools": []}  # fmt: skip
    steps = [("response", ("resp_1", [search])),
             ("request", {"previous_response_id": "resp_1", "input": [answer]})]  # fmt: skip
    assert audited(*steps) == []


def test_a_capture_begun_mid_session_judges_only_the_calls_it_shows() -> None:
    """The response previous_response_id names is not in the capture: its calls are unknown,
    but a call_id the capture shows for another response, or an item id, is still wrong."""
    answer = {"type": "function_call_output", "call_id": "call_0", "output": "x"}
    assert audited(("request", {"previous_response_id": "resp_0", "input": [answer]})) == []
    stale = {**answer, "call_id": "call_1"}
    item = {**answer, "call_id": "fc_1"}
    for wrong in (stale, item):
        steps = [("response", ("resp_1", [FUNCTION_CALL])),
                 ("request", {"previous_response_id": "resp_1", "input": [out_1()]}),
                 ("request", {"previous_response_id": "resp_2", "input": [wrong]})]  # fmt: skip
        assert audited(*steps) == [("responses-output-call-id", "error")]


def out_1() -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": "call_1", "output": "x"}


CODE_INTERPRETER = {
    "type": "code_interpreter",
    "container": {
        "type": "auto",
        "network_policy": {
            "type": "allowlist",
            "allowed_domains": ["api.example.com"],
            "domain_secrets": [
                {"domain": "api.example.com", "name": "EXAMPLE_KEY", "value": "s3cr3t-1"}
            ],
        },
    },
}
MCP = {"type": "mcp", "server_label": "crm", "server_url": "https://mcp.example.com/mcp",
       "authorization": "tok_abc123456", "headers": {"Authorization": "Bearer abc123"}}  # fmt: skip


def test_tools_whose_secrets_were_redacted_still_validate(tmp_path: Path) -> None:
    """The recorder audits the body it stores, where a network policy's domain_secrets (an
    array) is one `<redacted:…>` string: the tool the client sent was valid, so is the record."""
    har = json.loads((FIXTURES / "responses-tools-valid" / "pass.har").read_text())
    request = har["log"]["entries"][0]["request"]["postData"]
    body = json.loads(request["text"])
    request["text"] = json.dumps({**body, "tools": [CODE_INTERPRETER, MCP]})
    path = tmp_path / "secrets.har"
    path.write_text(json.dumps(har))
    assert "responses-tools-valid" not in audit_fixture(path, tmp_path)
    redacted = {**CODE_INTERPRETER["container"]["network_policy"],  # type: ignore[index]
                "domain_secrets": "<redacted:0123456789ab>"}  # fmt: skip
    bad = {"type": "code_interpreter", "container": {"type": "auto", "memory_limit": "2g",
           "network_policy": redacted}}  # fmt: skip
    found = audited(("request", {"tools": [bad]}))
    assert found == [("responses-tools-valid", "error")]  # what is left is still checked


def test_a_return_retried_after_the_server_refused_it_is_no_duplicate(tmp_path: Path) -> None:
    """The first send of the return got a 503: it answered nothing, and the same record sent
    again (after a fresh prepare and challenge) is the one answer. Live and replayed alike."""
    import sqlite3

    har = json.loads((FIXTURES / "return-hidden" / "pass.har").read_text())
    entries = har["log"]["entries"]
    prepare, answer = entries[3], entries[4]
    refused = json.loads(json.dumps(answer))
    refused["response"]["status"] = 503
    refused["response"]["content"]["text"] = '{"detail": "upstream overloaded"}'
    refused["response"]["content"]["mimeType"] = "application/json"
    retry = json.loads(json.dumps(answer))
    body = json.loads(retry["request"]["postData"]["text"])
    retry["request"]["postData"]["text"] = json.dumps({**body, "app_attest_challenge": "fresh"})
    again = json.loads(json.dumps(prepare))
    for entry, second in ((refused, "12"), (again, "13"), (retry, "14")):
        entry["startedDateTime"] = entry["startedDateTime"][:17] + second + "Z"
    har["log"]["entries"] = [*entries[:3], prepare, refused, again, retry, *entries[5:]]
    path = tmp_path / "retry.har"
    path.write_text(json.dumps(har))
    db = tmp_path / "retry.db"
    import_into(db, [path])
    with sqlite3.connect(db) as conn:  # what the recorder found, live
        assert conn.execute("SELECT rule FROM findings").fetchall() == []
    assert audit_capture(db).findings == []  # and the capture replayed


def test_what_a_refusal_undoes_is_kept_for_a_bounded_number_of_requests() -> None:
    from convtap.contract.auditor import PENDING, Auditor
    from convtap.wire.session import read_turn_request

    auditor = Auditor()
    for n in range(PENDING + 3):
        body = {"conversation_id": "c1", "messages": [{"id": f"m{n}", "author": {"role": "user"}}]}
        auditor.request(f"f{n}", body, float(n), read_turn_request(body))
    assert len(auditor.marks) == PENDING and "f0" not in auditor.marks
    auditor.refused("f0")  # forgotten: nothing to undo
    auditor.refused(f"f{PENDING + 2}")
    assert "m0" in auditor.seen_ids["c1"] and f"m{PENDING + 2}" not in auditor.seen_ids["c1"]


def test_a_call_whose_turn_request_the_capture_lacks_is_not_called_undeclared(
    tmp_path: Path,
) -> None:
    """A stream imported without its request (`X.sse` alone): what the turn declared is not
    known, so the call is neither undeclared nor missing an argument."""
    stream = ROOT / "captures" / "examples" / "sse" / "alefita_way_call.sse"
    alone = tmp_path / "alone.sse"
    alone.write_bytes(stream.read_bytes())
    db = tmp_path / "alone.db"
    import_into(db, [alone])
    assert [f.rule for f in audit_capture(db).findings] == ["call-unanswered"]
    declared_nothing = tmp_path / "declared.sse"
    declared_nothing.write_bytes(stream.read_bytes())
    (tmp_path / "declared.request.json").write_text(json.dumps({"action": "next", "messages": []}))
    db = tmp_path / "declared.db"
    import_into(db, [declared_nothing])
    assert "call-undeclared" in [f.rule for f in audit_capture(db).findings]


@pytest.mark.parametrize("output", ["done", [{"type": "input_text", "text": "done"}], {"ok": 1}])
def test_a_custom_tool_call_output_is_held_to_the_same_shapes(output: Any) -> None:
    call = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "apply_patch",
            "input": "*** Begin Patch"}  # fmt: skip
    answer = {"type": "custom_tool_call_output", "call_id": "call_c", "output": output}
    steps = [("response", ("resp_1", [call])),
             ("request", {"previous_response_id": "resp_1", "input": [answer]})]  # fmt: skip
    wrong = [("responses-output-type", "error")] if isinstance(output, dict) else []
    assert audited(*steps) == wrong


def test_an_output_naming_a_tool_with_a_null_call_id_is_the_same_warning() -> None:
    """The SDK's FunctionCallOutput makes call_id Optional: a client that writes the Codex CLI's
    goal output with `"call_id": null` sends what the server takes from the Codex CLI."""
    goal = {"type": "function_call_output", "call_id": None, "id": "fco_1",
            "name": "goal_objective", "namespace": "agent", "output": "done"}  # fmt: skip
    assert audited(("request", {"input": [goal]})) == [("responses-output-names-tool", "warning")]


def test_handoff_is_expected_only_of_a_client_that_declares_local_functions() -> None:
    """A browser declares no local function (a 2026-04 ChatGPT Plus capture, accepted by the
    server): no handoff to expect. A client that declares one and leaves handoff out still draws
    the warning."""
    from convtap.contract.auditor import Auditor
    from convtap.wire.session import read_turn_request

    user = {"id": "u1", "author": {"role": "user"}, "content": {"content_type": "text",
                                                                "parts": ["hi"]}}  # fmt: skip

    def rules(body: dict[str, Any]) -> list[str]:
        return [f.rule for f in Auditor().request("f", body, 1.0, read_turn_request(body))]

    assert "handoff-missing" not in rules({"messages": [user]})
    assert "handoff-missing" not in rules({"messages": [user], "local_function_signatures": []})
    declared = [{"name": "alefita_way", "parameters": {"type": "object"}}]
    assert "handoff-missing" in rules({"messages": [user], "local_function_signatures": declared})


def test_a_text_answer_does_not_hide_an_output_that_answers_nothing() -> None:
    """The previous response held no call: an output naming a call that exists nowhere is
    judged all the same."""
    answer = {"type": "function_call_output", "call_id": "call_nowhere", "output": "x"}
    steps = [("request", {"input": "hi"}), ("response", ("resp_text", [])),
             ("request", {"previous_response_id": "resp_text", "input": [answer]})]  # fmt: skip
    assert audited(*steps) == [("responses-output-call-id", "error")]


@pytest.mark.parametrize(
    "rule_id",
    ["responses-item-duplicate", "responses-chain-broken", "responses-orphan-repeated",
     "responses-socket-overlap"],
)  # fmt: skip
def test_the_field_rules_find_the_same_live_and_in_the_audit(rule_id: str, tmp_path: Path) -> None:
    """What the recorder finds as it records a fixture is what `convtap audit` finds from the
    capture afterwards (the same facts: live from the traffic, afterwards from the rows)."""
    import sqlite3

    for name in ("fail", "pass"):
        db = tmp_path / f"{name}.db"
        import_into(db, [FIXTURES / rule_id / f"{name}.har"])
        with sqlite3.connect(db) as conn:
            live = sorted(row[0] for row in conn.execute("SELECT rule FROM findings"))
        assert live == sorted(f.rule for f in audit_capture(db).findings)
        assert (rule_id in live) == (name == "fail")
