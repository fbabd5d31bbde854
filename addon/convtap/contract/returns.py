"""The f/conversation rules (docs/protocol.md, "The tool return contract", "Across a session"
and "Execution target"): one function per rule id, each given the facts of one kind of event.

- `ReturnFacts`: a tool return the client sent, with the call it answers (if any was recorded);
- `CallFacts`: a finished local call, with what its turn declared;
- `RequestFacts`: a conversation request (its declarations, challenge, execution target);
- `OpenCall`: a local call still unanswered at the end of the capture.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from convtap.contract.happenings import MadeCall
from convtap.contract.registry import MISSING, Violation, Where, as_dict, check
from convtap.models import EXECUTION_TARGET_ADAPTER, TOOL_RETURN_FIXED, is_fixed_value


@dataclass(frozen=True)
class ReturnFacts:
    message: dict[str, Any]  # the tool message
    messages: list[dict[str, Any]]  # every message of the request
    parent: str | None  # the request's parent_message_id
    conversation: str | None  # the request's conversation_id
    call: MadeCall | None  # the call it answers, when one was recorded
    body: dict[str, Any] | None  # content.text as a JSON object
    seen_ids: Set[str]  # message ids the conversation showed before
    prepared: float | None  # the latest prepare on the call's conversation
    at: float
    where: Where
    answered_by: str | None = None  # the return that answered the call first, if one did

    @property
    def content(self) -> dict[str, Any]:
        return as_dict(self.message.get("content"))

    @property
    def tool(self) -> str | None:
        return self.call.call.tool if self.call else None


@dataclass(frozen=True)
class CallFacts:
    call: MadeCall
    # what the call's turn declared, by name; None when the capture lacks the turn's request (a
    # stream imported alone, a capture begun in a resumed leg)
    declared: dict[str, dict[str, Any]] | None
    where: Where


@dataclass(frozen=True)
class RequestFacts:
    body: dict[str, Any]
    roles: list[str | None]
    declared: dict[str, dict[str, Any]]
    challenge_first_flow: str | None  # the flow that sent this challenge first, when another
    execution_target: Any
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class OpenCall:
    call: MadeCall
    answered_by: str | None  # the return that answered it first
    where: Where


# -- the return record (docs/protocol.md, "The tool return contract") --------------------------


@check("return-single-message", ReturnFacts)
def single_message(r: ReturnFacts) -> Violation | None:
    count = len(r.messages)
    if count == 1:
        return None
    return Violation(f"the return request carries {count} messages", 1, count)


def _get(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return MISSING
        value = value[key]
    return value


def _fixed(rule_id: str, path: tuple[str, ...], *, defaulted: bool = False) -> None:
    """A rule that holds one field of the return to the value TOOL_RETURN_FIXED gives it;
    `defaulted`: the field may be left out (the server gives it that value)."""
    wanted = TOOL_RETURN_FIXED[path]
    name = ".".join(path)

    def fixed_field(r: ReturnFacts) -> Violation | None:
        actual = _get(r.message, path)
        if actual == MISSING and (defaulted or wanted is None):
            return None
        if is_fixed_value(actual, wanted):
            return None
        shown = "null" if wanted is None else wanted
        return Violation(f"{name} is not {shown}", wanted, actual)

    fixed_field.__name__ = rule_id.replace("-", "_")
    check(rule_id, ReturnFacts)(fixed_field)


_fixed("return-author-role", ("author", "role"))


@check("return-author-name", ReturnFacts)
def author_name(r: ReturnFacts) -> Violation | None:
    name = _get(r.message, ("author", "name"))
    if r.call is None or name == r.tool:
        return None
    return Violation("author.name is not the tool's name", r.tool, name)


_fixed("return-recipient", ("recipient",))
_fixed("return-channel", ("channel",))
_fixed("return-content-type", ("content", "content_type"))


@check("return-language", ReturnFacts)
def no_language(r: ReturnFacts) -> Violation | None:
    if "language" not in r.content:
        return None
    return Violation("content carries a language key", "no language key", r.content["language"])


@check("return-body-json", ReturnFacts)
def body_json(r: ReturnFacts) -> Violation | None:
    if r.body is not None:
        return None
    text = r.content.get("text")
    return Violation(
        "content.text is not a JSON object",
        "a JSON object {call_id, result, tool}",
        text if isinstance(text, str) else MISSING,
    )


@check("return-call-id", ReturnFacts)
def body_call_id(r: ReturnFacts) -> Violation | None:
    if r.body is None or r.call is None or r.body.get("call_id") == r.call.where.call_id:
        return None
    return Violation(
        "the body's call_id is not the call message's id",
        r.call.where.call_id,
        r.body.get("call_id", MISSING),
    )


@check("return-body-tool", ReturnFacts)
def body_tool(r: ReturnFacts) -> Violation | None:
    if r.body is None:
        return None
    if r.call is None:  # no call to compare with: the key must at least name a tool
        if isinstance(r.body.get("tool"), str):
            return None
        return Violation("the return body has no tool key", "the tool's name", MISSING)
    if r.body.get("tool") == r.tool:
        return None
    return Violation("the body's tool is not the tool's name", r.tool, r.body.get("tool", MISSING))


@check("return-body-result", ReturnFacts)
def body_result(r: ReturnFacts) -> Violation | None:
    if r.body is None or "result" in r.body:
        return None
    return Violation("the return body has no result", "a result key", sorted(r.body))


@check("return-parent", ReturnFacts)
def parent(r: ReturnFacts) -> Violation | None:
    if r.call is None or r.parent == r.call.where.call_id:
        return None
    return Violation(
        "parent_message_id is not the call message's id",
        r.call.where.call_id,
        r.parent if r.parent is not None else MISSING,
    )


# Left out, the server stores its defaults (docs/rules.md, "return-status", "return-weight").
_fixed("return-status", ("status",), defaulted=True)
_fixed("return-end-turn", ("end_turn",))
_fixed("return-weight", ("weight",), defaulted=True)


@check("return-hidden", ReturnFacts)
def hidden(r: ReturnFacts) -> Violation | None:
    flag = _get(r.message, ("metadata", "is_visually_hidden_from_conversation"))
    if flag is True:
        return None
    return Violation("metadata.is_visually_hidden_from_conversation is not true", True, flag)


@check("return-conversation", ReturnFacts)
def conversation(r: ReturnFacts) -> Violation | None:
    if r.call is None or r.conversation == r.call.where.conversation_id:
        return None
    return Violation(
        "conversation_id is not the call's conversation",
        r.call.where.conversation_id,
        r.conversation if r.conversation is not None else MISSING,
    )


@check("return-id-fresh", ReturnFacts)
def id_fresh(r: ReturnFacts) -> Violation | None:
    return_id = r.message.get("id")
    if isinstance(return_id, str) and return_id not in r.seen_ids:
        return None
    return Violation(
        "the return's id was already used in the conversation",
        "a new id",
        return_id if isinstance(return_id, str) else MISSING,
    )


# -- across the session ------------------------------------------------------------------------


@check("call-unanswered", OpenCall)
def unanswered(o: OpenCall) -> Violation | None:
    if o.call.call.kind != "local" or o.answered_by is not None:
        return None
    return Violation(f"local.{o.call.call.tool} got no return", "one return", "none")


@check("return-duplicate", ReturnFacts)
def duplicate(r: ReturnFacts) -> Violation | None:
    if r.call is None or r.answered_by is None:
        return None
    return Violation(
        "the call was already answered",
        "one return",
        f"a second return; the first was {r.answered_by}",
    )


@check("return-orphan", ReturnFacts)
def orphan(r: ReturnFacts) -> Violation | None:
    if r.call is not None:
        return None
    body = r.body or {}
    return Violation(
        "the return answers no recorded call",
        "a recorded call's id",
        {"parent_message_id": r.parent, "call_id": body.get("call_id", MISSING)},
    )


@check("call-undeclared", CallFacts)
def undeclared(c: CallFacts) -> Violation | None:
    call = c.call.call
    if call.kind != "local" or c.declared is None or call.tool in c.declared:
        return None
    return Violation(
        f"the model called local.{call.tool}, which the turn did not declare",
        sorted(c.declared),
        call.tool,
    )


@check("call-arguments", CallFacts)
def arguments(c: CallFacts) -> Violation | None:
    call = c.call.call
    signature = (c.declared or {}).get(call.tool)
    if call.kind != "local" or signature is None:
        return None
    params = signature.get("params")
    listed = params if isinstance(params, list) else []
    named = [p for p in listed if isinstance(p, dict) and isinstance(p.get("name"), str)]
    required = [p["name"] for p in named if p.get("required")]
    args = call.arguments
    missing = [name for name in required if args is None or name not in args]
    if not missing:
        return None
    return Violation(
        f"local.{call.tool} was called without {', '.join(map(str, missing))}",
        required,
        args if args is not None else call.arguments_text,
    )


@check("challenge-reused", RequestFacts)
def challenge_reused(q: RequestFacts) -> Violation | None:
    if q.challenge_first_flow is None:
        return None
    return Violation(
        f"app_attest_challenge was already sent in flow {q.challenge_first_flow}",
        "a fresh challenge",
        q.body.get("app_attest_challenge"),
    )


@check("handoff-missing", RequestFacts)
def handoff_missing(q: RequestFacts) -> Violation | None:
    # a client that declares no local function (a browser) runs no local tool: nothing to hand off
    if "user" not in q.roles or "handoff" in q.declared or not q.declared:
        return None
    return Violation("a normal turn without the handoff signature", "handoff", sorted(q.declared))


@check("execution-target", RequestFacts)
def execution_target(q: RequestFacts) -> Violation | None:
    if q.execution_target is None:
        return None
    try:
        EXECUTION_TARGET_ADAPTER.validate_python(q.execution_target)
    except ValidationError as exc:
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        return Violation(
            f"conversation_execution_target has neither the local_executor nor the remote shape: "
            f"{detail}",
            "local_executor {cwd, installation_id, mcp_servers, selected_capability_roots} "
            "or remote",
            q.execution_target,
        )
    return None


@check("prepare-missing", ReturnFacts)
def prepare_missing(r: ReturnFacts) -> Violation | None:
    if r.call is None or (r.prepared is not None and r.call.at <= r.prepared <= r.at):
        return None
    return Violation(
        "no f/conversation/prepare on the conversation between the call and the return",
        "a prepare after the call",
        "none",
    )
