"""The rule registry: what each rule is (declared in rules.toml) and the function that checks it.

A rule's text (id, severity, summary, explanation, source passage, bad and good examples) is
data in `rules.toml`; its check is one function registered under the same id with
`@check(id, Facts)`. The auditor hands each check the facts of one kind (a return, a call, a
request, ...) and turns what it reports into findings, in registry order. `ruledoc` writes the
rules as docs/rules.md.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from typing import Any, NamedTuple, Protocol, TypeVar

from convtap.vocab import Severity

# Most severe first, as plain text (a key orjson writes: it refuses an enum member as a key).
SEVERITIES: tuple[str, ...] = tuple(s.value for s in Severity)


MISSING = "<missing>"  # how evidence says a key was absent (a JSON string: evidence is JSON)


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    summary: str
    seed: str  # the passage of docs/protocol.md the rule comes from (the field keeps its name)
    explanation: str
    bad: str
    good: str
    marks: tuple[str, ...] = ()  # the field of the answer it checks, marked in the report


@cache
def registry() -> dict[str, Rule]:
    """Every rule by id, in report order."""
    text = resources.files("convtap.contract").joinpath("rules.toml").read_text(encoding="utf-8")
    rules = tomllib.loads(text)["rule"]
    return {
        r["id"]: Rule(
            **{**r, "severity": Severity(r["severity"]), "marks": tuple(r.get("marks", ()))}
        )
        for r in rules
    }


@dataclass(frozen=True)
class Where:
    """Where a finding happened: the ids a person looks up."""

    conversation_id: str | None = None
    call_id: str | None = None
    return_id: str | None = None
    flow_id: str | None = None


@dataclass(frozen=True)
class Finding:
    """What a check found: the rule, its severity, a one-line message, where it happened and
    the evidence (expected against actual)."""

    rule: str
    severity: Severity
    message: str
    where: Where = Where()
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def conversation_id(self) -> str | None:
        return self.where.conversation_id

    @property
    def call_id(self) -> str | None:
        return self.where.call_id

    @property
    def return_id(self) -> str | None:
        return self.where.return_id

    @property
    def flow_id(self) -> str | None:
        return self.where.flow_id

    def to_json(self) -> dict[str, Any]:
        """As `convtap audit --format json` gives it (a contract: the ids beside the rule)."""
        return {"rule": self.rule, "severity": self.severity, "message": self.message,
                **asdict(self.where), "evidence": self.evidence}  # fmt: skip


class Violation(NamedTuple):
    """What a check reports: a one-line message and the evidence, expected against actual."""

    message: str
    expected: Any
    actual: Any


class Facts(Protocol):
    """What a check is given: one kind of event of a session, and where it happened."""

    @property
    def where(self) -> Where: ...


Verdict = Violation | Iterable[Violation] | None
F = TypeVar("F", bound=Facts)
_CHECKS: dict[str, tuple[type[Any], Callable[[Any], Verdict]]] = {}


def check(
    rule_id: str, facts: type[F]
) -> Callable[[Callable[[F], Verdict]], Callable[[F], Verdict]]:
    """Register `func` as the check of `rule_id`, run on every `facts` the auditor sees."""

    def register(func: Callable[[F], Verdict]) -> Callable[[F], Verdict]:
        if rule_id in _CHECKS:
            raise ValueError(f"rule {rule_id} has two checks")
        _CHECKS[rule_id] = (facts, func)
        _checks_for.cache_clear()
        return func

    return register


def checks() -> dict[str, Callable[[Any], Verdict]]:
    """Every registered check by rule id (the test holds them one to one with `registry()`)."""
    return {rule_id: func for rule_id, (_, func) in _CHECKS.items()}


@cache
def _checks_for(kind: type[Any]) -> list[tuple[Rule, Callable[[Any], Verdict]]]:
    return [
        (rule, _CHECKS[rule.id][1])
        for rule in registry().values()
        if rule.id in _CHECKS and issubclass(kind, _CHECKS[rule.id][0])
    ]


def run_checks(facts: Facts, only: Iterable[str] | None = None) -> list[Finding]:
    """The findings of every check registered for this kind of facts, in registry order."""
    wanted = None if only is None else set(only)
    found: list[Finding] = []
    for rule, func in _checks_for(type(facts)):
        if wanted is not None and rule.id not in wanted:
            continue
        verdict = func(facts)
        for violation in [verdict] if isinstance(verdict, Violation) else verdict or ():
            found.append(finding(rule.id, violation, facts.where))
    return found


def finding(rule_id: str, violation: Violation, where: Where) -> Finding:
    rule = registry()[rule_id]
    evidence = {"expected": violation.expected, "actual": violation.actual}
    return Finding(rule.id, rule.severity, violation.message, where, evidence)


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
