"""The rule registry: every rule's failing and passing fixture, the observed return, the docs."""

from __future__ import annotations

import json
import re
from pathlib import Path

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
