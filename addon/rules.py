"""The contract rules: the registry (declared in rules.toml) and the checks, findings as data.

One `Auditor` is fed a session in time order — prepares, conversation requests, tool calls, the
message ids each conversation has shown — and says what breaks the tool return contract
(PROTOCOL.md "The tool return contract", seed 000 §3) as it goes. The recorder feeds it live;
`convtap audit` replays a capture database into a fresh one. Either way: the same findings.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from addon.delta import loads
from addon.models import EXECUTION_TARGET_ADAPTER

SEVERITIES = ("error", "warning", "info")
RULES_FILE = Path(__file__).resolve().parent / "rules.toml"


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    summary: str
    seed: str
    explanation: str
    bad: str
    good: str


@cache
def registry() -> dict[str, Rule]:
    with RULES_FILE.open("rb") as handle:
        data = tomllib.load(handle)
    return {r["id"]: Rule(**r) for r in data["rule"]}


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    message: str
    conversation_id: str | None = None
    call_id: str | None = None
    return_id: str | None = None
    flow_id: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class Call:
    """A tool call as the auditor needs it (a `tool_calls` row, or the live decoder's call)."""

    call_id: str
    recipient: str
    kind: str
    tool: str
    arguments: dict[str, Any] | None
    arguments_text: str
    conversation_id: str | None
    turn_id: str | None
    at: float
    answered_by: str | None = None  # the return message id that answered it first


MISSING = "<missing>"


class Auditor:
    def __init__(self) -> None:
        self.calls: dict[str, Call] = {}
        self.signatures: dict[str, dict[str, dict[str, Any]]] = {}  # turn id -> name -> signature
        self.seen_ids: dict[str | None, set[str]] = {}  # conversation -> message ids shown
        self.prepared: dict[str, float] = {}  # conversation -> time of its latest prepare
        self.challenges: dict[str, str] = {}  # challenge (hashed) -> the flow that used it first
        self.returns = 0
        from addon.responses_rules import ResponsesAuditor

        self.responses = ResponsesAuditor()  # the Responses API's calls and outputs

    @property
    def answers(self) -> int:
        """Returns and Responses API outputs checked so far."""
        return self.returns + self.responses.outputs

    # -- what happens ----------------------------------------------------------------------------

    def prepare(self, conversation_id: str | None, at: float) -> None:
        if conversation_id:
            self.prepared[conversation_id] = at

    def seen(self, conversation_id: str | None, message_ids: Iterable[str]) -> None:
        self.seen_ids.setdefault(conversation_id, set()).update(message_ids)

    def request(self, flow_id: str, body: Any, at: float) -> list[Finding]:
        """A conversation request: its turn's declarations, and the returns it carries."""
        if not isinstance(body, dict):
            return []
        found: list[Finding] = []
        conversation = _str(body.get("conversation_id"))
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        declared = [s for s in body.get("local_function_signatures") or [] if isinstance(s, dict)]
        self.signatures[flow_id] = {str(s.get("name")): s for s in declared}
        where = {"conversation_id": conversation, "flow_id": flow_id}
        challenge = _str(body.get("app_attest_challenge"))
        if challenge:
            first = self.challenges.setdefault(challenge, flow_id)
            if first != flow_id:
                found.append(
                    self._find(
                        "challenge-reused",
                        f"app_attest_challenge was already sent in flow {first}",
                        where,
                        expected="a fresh challenge",
                        actual=challenge,
                    )
                )
        roles = [_role(m) for m in messages]
        if "user" in roles and "handoff" not in self.signatures[flow_id]:
            found.append(
                self._find(
                    "handoff-missing",
                    "a normal turn without the handoff signature",
                    where,
                    expected="handoff",
                    actual=sorted(self.signatures[flow_id]),
                )
            )
        target = _execution_target(body, messages)
        if target is not None:
            try:
                EXECUTION_TARGET_ADAPTER.validate_python(target)
            except ValidationError as exc:
                detail = "; ".join(
                    f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3]
                )
                found.append(
                    self._find(
                        "execution-target",
                        f"conversation_execution_target does not match seed 003: {detail}",
                        where,
                        expected="local_executor {cwd, installation_id, "
                        "mcp_servers, selected_capability_roots} or remote",
                        actual=target,
                    )
                )
        parent = _str(body.get("parent_message_id"))
        returns = [m for m in messages if _role(m) == "tool"]
        if not returns and parent in self.calls and self.calls[parent].kind == "local" and messages:
            returns = messages[:1]  # answering a call without a tool message: check what came
        for message in returns:
            found += self._return(message, body, messages, flow_id, at)
        self.seen(conversation, (m["id"] for m in messages if isinstance(m.get("id"), str)))
        return found

    def call(self, call: Call) -> list[Finding]:
        """A finished call (its arguments are final)."""
        self.calls[call.call_id] = call
        if call.kind != "local":
            return []
        where = {
            "conversation_id": call.conversation_id,
            "call_id": call.call_id,
            "flow_id": call.turn_id,
        }
        declared = self.signatures.get(call.turn_id or "", {})
        signature = declared.get(call.tool)
        if signature is None:
            return [
                self._find(
                    "call-undeclared",
                    f"the model called local.{call.tool}, which the turn did not declare",
                    where,
                    expected=sorted(declared),
                    actual=call.tool,
                )
            ]
        required = [
            p.get("name")
            for p in signature.get("params") or []
            if isinstance(p, dict) and p.get("required")
        ]
        arguments = call.arguments
        missing = [n for n in required if arguments is None or n not in arguments]
        if missing:
            return [
                self._find(
                    "call-arguments",
                    f"local.{call.tool} was called without {', '.join(map(str, missing))}",
                    where,
                    expected=required,
                    actual=arguments if arguments is not None else call.arguments_text,
                )
            ]
        return []

    def finish(self) -> list[Finding]:
        """The end of the capture: what never got an answer."""
        return self.responses.unanswered() + [
            self._find(
                "call-unanswered",
                f"local.{c.tool} got no return",
                {"conversation_id": c.conversation_id, "call_id": c.call_id, "flow_id": c.turn_id},
                expected="one return",
                actual="none",
            )
            for c in self.calls.values()
            if c.kind == "local" and c.answered_by is None
        ]

    # -- the return contract ---------------------------------------------------------------------

    def _return(
        self,
        message: dict[str, Any],
        request: dict[str, Any],
        messages: list[dict[str, Any]],
        flow_id: str,
        at: float,
    ) -> list[Finding]:
        self.returns += 1
        parent = _str(request.get("parent_message_id"))
        conversation = _str(request.get("conversation_id"))
        content = _dict(message.get("content"))
        text = content.get("text")
        body = _object(text)
        call = self.calls.get(parent or "") or self.calls.get(_str(body.get("call_id")) or "")
        return_id = _str(message.get("id"))
        where = {
            "conversation_id": call.conversation_id if call else conversation,
            "call_id": call.call_id if call else None,
            "return_id": return_id,
            "flow_id": flow_id,
        }
        found: list[Finding] = []

        def check(rule: str, ok: bool, what: str, expected: Any, actual: Any) -> None:
            if not ok:
                found.append(self._find(rule, what, where, expected=expected, actual=actual))

        author = _dict(message.get("author"))
        tool = call.tool if call else None
        check(
            "return-single-message",
            len(messages) == 1,
            f"the return request carries {len(messages)} messages",
            1,
            len(messages),
        )
        check(
            "return-author-role",
            author.get("role") == "tool",
            "the return's author.role is not tool",
            "tool",
            author.get("role", MISSING),
        )
        if call is not None:
            check(
                "return-author-name",
                author.get("name") == tool,
                "author.name is not the tool's name",
                tool,
                author.get("name", MISSING),
            )
        for rule, value, wanted in (  # the fields the contract fixes (seed 000 §3)
            ("return-recipient", message.get("recipient", MISSING), "all"),
            ("return-channel", message.get("channel", MISSING), "commentary"),
            ("return-content-type", content.get("content_type", MISSING), "code"),
            ("return-status", message.get("status", MISSING), "finished_successfully"),
        ):
            field = rule.removeprefix("return-").replace("-", "_")
            check(rule, value == wanted, f"{field} is not {wanted}", wanted, value)
        check(
            "return-language",
            "language" not in content,
            "content carries a language key",
            "no language key",
            content.get("language"),
        )
        check(
            "return-body-json",
            bool(body) or text == "{}",
            "content.text is not a JSON object",
            "a JSON object {call_id, result, tool}",
            text if isinstance(text, str) else MISSING,
        )
        if body or text == "{}":
            check(
                "return-body-result",
                "result" in body,
                "the return body has no result",
                "a result key",
                sorted(body),
            )
            if call is not None:
                check(
                    "return-call-id",
                    body.get("call_id") == call.call_id,
                    "the body's call_id is not the call message's id",
                    call.call_id,
                    body.get("call_id", MISSING),
                )
                check(
                    "return-body-tool",
                    body.get("tool") == tool,
                    "the body's tool is not the tool's name",
                    tool,
                    body.get("tool", MISSING),
                )
            else:
                check(
                    "return-body-tool",
                    isinstance(body.get("tool"), str),
                    "the return body has no tool key",
                    "the tool's name",
                    MISSING,
                )
        check(
            "return-end-turn",
            message.get("end_turn") is None,
            "end_turn is not null",
            None,
            message.get("end_turn"),
        )
        weight = message.get("weight", MISSING)
        check(
            "return-weight",
            weight == 1 and not isinstance(weight, bool),
            "weight is not 1",
            1,
            weight,
        )
        metadata = _dict(message.get("metadata"))
        check(
            "return-hidden",
            metadata.get("is_visually_hidden_from_conversation") is True,
            "metadata.is_visually_hidden_from_conversation is not true",
            True,
            metadata.get("is_visually_hidden_from_conversation", MISSING),
        )
        seen = self.seen_ids.get(conversation, set())
        check(
            "return-id-fresh",
            return_id is not None and return_id not in seen,
            "the return's id was already used in the conversation",
            "a new id",
            return_id if return_id is not None else MISSING,
        )
        if call is None:
            check(
                "return-orphan",
                False,
                "the return answers no recorded call",
                "a recorded call's id",
                {"parent_message_id": parent, "call_id": body.get("call_id", MISSING)},
            )
            return found
        check(
            "return-parent",
            parent == call.call_id,
            "parent_message_id is not the call message's id",
            call.call_id,
            parent if parent is not None else MISSING,
        )
        check(
            "return-conversation",
            conversation == call.conversation_id,
            "conversation_id is not the call's conversation",
            call.conversation_id,
            conversation if conversation is not None else MISSING,
        )
        check(
            "return-duplicate",
            call.answered_by is None,
            "the call was already answered",
            "one return",
            f"a second return; the first was {call.answered_by}",
        )
        if call.answered_by is None:
            call.answered_by = return_id or flow_id
        prepared = self.prepared.get(call.conversation_id or "")
        check(
            "prepare-missing",
            prepared is not None and call.at <= prepared <= at,
            "no f/conversation/prepare on the conversation between the call and the return",
            "a prepare after the call",
            "none",
        )
        return found

    def _find(
        self, rule_id: str, message: str, where: dict[str, Any], *, expected: Any, actual: Any
    ) -> Finding:
        return finding(rule_id, message, where, expected=expected, actual=actual)


def finding(
    rule_id: str, message: str, where: dict[str, Any], *, expected: Any, actual: Any
) -> Finding:
    """A finding of a rule, at `where` (conversation, call, return, flow ids)."""
    rule = registry()[rule_id]
    evidence = {"expected": expected, "actual": actual}
    return Finding(rule.id, rule.severity, message, **where, evidence=evidence)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _role(message: dict[str, Any]) -> str | None:
    author = message.get("author")
    return _str(author.get("role")) if isinstance(author, dict) else None


def _object(text: Any) -> dict[str, Any]:
    if not isinstance(text, str):
        return {}
    try:
        value = loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _execution_target(body: dict[str, Any], messages: list[dict[str, Any]]) -> Any:
    if "conversation_execution_target" in body:
        return body["conversation_execution_target"]
    for message in messages:  # seed 003: persisted in the first user message's metadata
        metadata = message.get("metadata")
        if _role(message) == "user" and isinstance(metadata, dict):
            return metadata.get("conversation_execution_target")
    return None
