"""Findings as people and CI tools read them: text, JSON, JUnit XML, SARIF 2.1.0, GitHub.

SARIF and JUnit are read by tools that follow a finding from one CI run to the next (code
scanning opens an alert for a fingerprint it has not seen, and closes one it no longer sees), so
what names a finding there holds no id the server mints: a SARIF fingerprint is made of the rule,
the tool, the place of the call (or request) in its session (`Place`) and the evidence with every
id taken out; a JUnit case is named by the place. The same client making the same mistakes in two
runs gives the same fingerprints and the same case names. The file a SARIF result points at is
named relative to a root (`--sarif-root`), as GitHub requires, and a run stays within GitHub's
upload limits (`SARIF_MAX_RESULTS`: the most severe are kept, the rest counted).
"""

from __future__ import annotations

import hashlib
import json
import re
import textwrap
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from xml.etree import ElementTree

from convtap.contract.audit import AuditResult
from convtap.contract.registry import SEVERITIES, Finding, Rule, registry
from convtap.vocab import Severity

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
# GitHub code scanning's limits on an upload: past them it rejects the file.
SARIF_MAX_RESULTS = 25_000  # results per run (it shows the 5,000 most severe)
SARIF_MAX_RULES = 25_000  # rules per run
SARIF_MAX_TAGS = 20  # tags per rule
FINGERPRINT = "convtap/v2"  # v1 held the conversation, call and return ids: it changed each run
# Ids a server or client mints: UUIDs, and OpenAI's prefixed ids (call_…, resp_…, fc_…, msg_…).
MINTED = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\b(?:call|resp|fc|msg|conv|rs|ctc|ts|tsc|item|ws|SOCKET)_[A-Za-z0-9]{6,}\b"
    r"|\b[0-9a-f]{24,}\b"
)


@dataclass(frozen=True)
class Place:
    """Where a finding happened, in words that stay the same from run to run: its session's
    number (in the order the capture's sessions began), the request or call in it ("call 2"),
    and the tool called."""

    session: int
    where: str
    tool: str | None = None

    def words(self) -> str:
        tool = f" ({self.tool})" if self.tool else ""
        return f"session {self.session} {self.where}{tool}"


PlaceOf = Callable[[Finding], "Place | None"]


def _nowhere(finding: Finding) -> Place | None:
    return None


def convtap_version() -> str:
    try:
        return version("convtap")
    except PackageNotFoundError:
        return "0.0.0"


WIDTH = 120  # columns the text formats fit (`wide`: as long as their values are)


def render(
    result: AuditResult, fmt: str, source: str, *, wide: bool = False,
    place_of: PlaceOf = _nowhere,
) -> str:  # fmt: skip
    """`source` names the capture (for SARIF: relative to the root); `place_of` says where
    each finding happened (SARIF and JUnit name findings so)."""
    if fmt == "json":
        return json.dumps(result.to_json(), ensure_ascii=False, indent=2)
    if fmt == "junit":
        return junit(result, source, place_of)
    if fmt == "sarif":
        return json.dumps(sarif(result, source, place_of), ensure_ascii=False, indent=2)
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


def _stable_name(finding: Finding, place: Place | None) -> str:
    """A finding's name without ids: its place, else what it is about."""
    if place is not None:
        return place.words()
    if finding.call_id:
        return "a call"
    return "a return with no recorded call" if finding.return_id else "a request"


def junit(result: AuditResult, source: str, place_of: PlaceOf = _nowhere) -> str:
    """One test suite per rule, one test case per finding (a failure for errors), and a passing
    case for every rule that found nothing. A case is named by where its finding happened
    (`Place`), never by an id, so that a CI run's cases are the last run's; the ids are in its
    text."""
    by_rule: dict[str, list[Finding]] = defaultdict(list)
    for finding in result.findings:
        by_rule[finding.rule].append(finding)
    root = ElementTree.Element("testsuites", name=f"convtap audit {source}")
    total = failures = 0
    for rule in registry().values():
        findings = by_rule.get(rule.id, [])
        failed = sum(f.severity == Severity.ERROR for f in findings)
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
        named: Counter[str] = Counter()
        for f in findings:
            name = _stable_name(f, place_of(f))
            named[name] += 1
            if named[name] > 1:  # the same rule twice at one place
                name = f"{name} #{named[name]}"
            case = ElementTree.SubElement(suite, "testcase", classname=rule.id, name=name)
            body = f"{f.message} ({_subject(f)})\n{json.dumps(f.evidence, ensure_ascii=False)}"
            if f.severity == Severity.ERROR:
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
        "properties": {"tags": ["protocol", "tool-return"][:SARIF_MAX_TAGS]},
    }


def unminted(value: Any, ids: set[str]) -> Any:
    """`value` with every id in it (those in `ids`, and anything that looks minted) replaced by
    `<id>`."""
    if isinstance(value, str):
        for known in ids:
            value = value.replace(known, "<id>")
        return MINTED.sub("<id>", value)
    if isinstance(value, dict):
        return {unminted(k, ids): unminted(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [unminted(v, ids) for v in value]
    return value


def fingerprint(finding: Finding, place: Place | None) -> str:
    """What stays the same when the same client makes the same mistake: the rule, the tool,
    the place in the session, the evidence with its ids taken out."""
    ids = {i for i in (finding.conversation_id, finding.call_id, finding.return_id,
                       finding.flow_id) if i}  # fmt: skip
    evidence = unminted(finding.evidence, ids)
    parts = [finding.rule, _stable_name(finding, place),
             json.dumps(evidence, sort_keys=True, ensure_ascii=False)]  # fmt: skip
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def sarif(result: AuditResult, source: str, place_of: PlaceOf = _nowhere) -> dict[str, Any]:
    """SARIF 2.1.0 with `source` (the capture, relative to the root) as the artifact."""
    rules = list(registry().values())[:SARIF_MAX_RULES]
    index = {rule.id: n for n, rule in enumerate(rules)}
    ranked = sorted(range(len(result.findings)),
                    key=lambda n: SEVERITIES.index(result.findings[n].severity))  # fmt: skip
    kept = set(ranked[:SARIF_MAX_RESULTS])  # the most severe, in the audit's order
    location = {"uri": source, "uriBaseId": "%SRCROOT%"}
    results = []
    for f in (f for n, f in enumerate(result.findings) if n in kept):
        place = place_of(f)
        names = [p for p in (f.conversation_id, f.call_id, f.return_id) if p]
        results.append({
            "ruleId": f.rule,
            "ruleIndex": index[f.rule],
            "level": SARIF_LEVEL[f.severity],
            "message": {"text": f"{f.message} ({_subject(f)})"},
            "locations": [{
                "physicalLocation": {"artifactLocation": location},
                "logicalLocations": [
                    {"name": "/".join(names) or (f.flow_id or "capture"), "kind": "object"}
                ],
            }],
            "partialFingerprints": {FINGERPRINT: fingerprint(f, place)},
            "properties": {
                "place": None if place is None else place.words(),
                "conversation_id": f.conversation_id,
                "call_id": f.call_id,
                "return_id": f.return_id,
                "flow_id": f.flow_id,
                "evidence": f.evidence,
            },
        })  # fmt: skip
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "convtap",
                "version": convtap_version(),
                "rules": [_sarif_rule(r) for r in rules],
            }
        },
        "artifacts": [{"location": location}],
        "results": results,
    }
    if len(kept) < len(ranked):
        run["properties"] = {"omitted_results": len(ranked) - len(kept)}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def github(result: AuditResult) -> str:
    """GitHub Actions workflow commands: one annotation per finding."""
    command = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
    lines = []
    for f in result.findings:
        message = f"{f.message} ({_subject(f)}); evidence: {json.dumps(f.evidence)}"
        lines.append(f"::{command[f.severity]} title=convtap {f.rule}::{_escape(message)}")
    return "\n".join(lines)


def _escape(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
