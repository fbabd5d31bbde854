"""Findings as people and CI tools read them: text, JSON, JUnit XML, SARIF 2.1.0, GitHub."""

from __future__ import annotations

import json
import textwrap
from collections import defaultdict
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from xml.etree import ElementTree

from convtap.contract.audit import AuditResult
from convtap.contract.registry import SEVERITIES, Finding, Rule, registry

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def convtap_version() -> str:
    try:
        return version("convtap")
    except PackageNotFoundError:
        return "0.0.0"


WIDTH = 120  # columns the text formats fit (`wide`: as long as their values are)


def render(result: AuditResult, fmt: str, source: str, *, wide: bool = False) -> str:
    if fmt == "json":
        return json.dumps(result.to_json(), ensure_ascii=False, indent=2)
    if fmt == "junit":
        return junit(result, source)
    if fmt == "sarif":
        return json.dumps(sarif(result, source), ensure_ascii=False, indent=2)
    if fmt == "github":
        return github(result)
    return text(result, wide=wide)


def _subject(finding: Finding) -> str:
    if finding.call_id:
        line = f"call {finding.call_id}"
        return line + (f" → return {finding.return_id}" if finding.return_id else "")
    if finding.return_id:
        return f"return {finding.return_id} (no recorded call)"
    return f"request {finding.flow_id}"


def text(result: AuditResult, *, wide: bool = False) -> str:
    """Grouped by conversation, then by call (or request), most severe first; lines fit
    `WIDTH` columns (a long message wraps under itself) unless `wide`."""
    column = max(len(rule_id) for rule_id in registry())  # every rule id aligns
    indent = " " * (4 + 8 + column + 1)

    def fit(line: str) -> list[str]:
        if wide or len(line) <= WIDTH:
            return [line]
        return textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_on_hyphens=False)

    grouped: dict[str, dict[str, list[Finding]]] = defaultdict(lambda: defaultdict(list))
    for finding in result.findings:
        grouped[finding.conversation_id or "(no conversation yet)"][_subject(finding)].append(
            finding
        )
    lines: list[str] = []
    for conversation, subjects in grouped.items():
        lines.append(f"conversation {conversation}")
        for subject, findings in subjects.items():
            lines.append(f"  {subject}")
            for f in sorted(findings, key=lambda f: SEVERITIES.index(f.severity)):
                lines += fit(f"    {f.severity:<7} {f.rule:<{column}} {f.message}")
                evidence = f.evidence
                if "expected" in evidence:
                    expected, got = _short(evidence["expected"]), _short(evidence["actual"])
                    lines += fit(f"{indent}expected {expected}, got {got}")
        lines.append("")
    summary = result.summary()
    counts = ", ".join(
        f"{n} {s}{'s' if n != 1 and s != 'info' else ''}" for s, n in summary["findings"].items()
    )
    lines.append(f"{summary['calls']} calls, {summary['returns']} returns audited: {counts}")
    return "\n".join(lines)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def junit(result: AuditResult, source: str) -> str:
    """One test suite per rule, one test case per finding (a failure for errors), and a passing
    case for every rule that found nothing."""
    by_rule: dict[str, list[Finding]] = defaultdict(list)
    for finding in result.findings:
        by_rule[finding.rule].append(finding)
    root = ElementTree.Element("testsuites", name=f"convtap audit {source}")
    total = failures = 0
    for rule in registry().values():
        findings = by_rule.get(rule.id, [])
        failed = sum(f.severity == "error" for f in findings)
        suite = ElementTree.SubElement(
            root,
            "testsuite",
            name=rule.id,
            tests=str(max(len(findings), 1)),
            failures=str(failed),
            errors="0",
            skipped="0",
        )
        total += max(len(findings), 1)
        failures += failed
        if not findings:
            ElementTree.SubElement(suite, "testcase", classname=rule.id, name=rule.summary)
        for f in findings:
            case = ElementTree.SubElement(suite, "testcase", classname=rule.id, name=_subject(f))
            body = f"{f.message}\n{json.dumps(f.evidence, ensure_ascii=False)}"
            if f.severity == "error":
                failure = ElementTree.SubElement(case, "failure", type=f.rule, message=f.message)
                failure.text = body
            else:
                ElementTree.SubElement(case, "system-out").text = f"{f.severity}: {body}"
    root.set("tests", str(total))
    root.set("failures", str(failures))
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(root, "unicode")


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": "".join(part.title() for part in rule.id.split("-")),
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.explanation.strip()},
        "help": {"text": f"{rule.explanation.strip()}\n\nSource: {rule.seed}"},
        "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
        "properties": {"tags": ["protocol", "tool-return"]},
    }


def sarif(result: AuditResult, source: str) -> dict[str, Any]:
    rules = list(registry().values())
    index = {rule.id: n for n, rule in enumerate(rules)}
    results = []
    for f in result.findings:
        names = [p for p in (f.conversation_id, f.call_id, f.return_id) if p]
        results.append(
            {
                "ruleId": f.rule,
                "ruleIndex": index[f.rule],
                "level": SARIF_LEVEL[f.severity],
                "message": {"text": f"{f.message} ({_subject(f)})"},
                "locations": [
                    {
                        "physicalLocation": {"artifactLocation": {"uri": source}},
                        "logicalLocations": [
                            {"name": "/".join(names) or (f.flow_id or "capture"), "kind": "object"}
                        ],
                    }
                ],
                "partialFingerprints": {
                    "convtap/v1": "/".join(
                        [
                            f.rule,
                            *(
                                p or "-"
                                for p in (f.conversation_id, f.call_id, f.return_id, f.flow_id)
                            ),
                        ]
                    ),
                },
                "properties": {
                    "conversation_id": f.conversation_id,
                    "call_id": f.call_id,
                    "return_id": f.return_id,
                    "flow_id": f.flow_id,
                    "evidence": f.evidence,
                },
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "convtap",
                        "version": convtap_version(),
                        "rules": [_sarif_rule(r) for r in rules],
                    }
                },
                "artifacts": [{"location": {"uri": source}}],
                "results": results,
            }
        ],
    }


def github(result: AuditResult) -> str:
    """GitHub Actions workflow commands: one annotation per finding."""
    command = {"error": "error", "warning": "warning", "info": "notice"}
    lines = []
    for f in result.findings:
        message = f"{f.message} ({_subject(f)}); evidence: {json.dumps(f.evidence)}"
        lines.append(f"::{command[f.severity]} title=convtap {f.rule}::{_escape(message)}")
    return "\n".join(lines)


def _escape(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
