"""The audit as a session happens: fed prepares, conversation requests, tool calls and the
message ids each conversation has shown, in time order, it keeps what the rules need to know
(the calls, what each turn declared, the challenges, the prepares) and runs the checks.

The recorder feeds it live; `convtap audit` replays a capture into a fresh one. Either way: the
same findings (PROTOCOL.md "The tool return contract", seed 000 §3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from convtap.contract.registry import Finding, Verdict, Where, as_dict, as_str, run_checks
from convtap.contract.registry import checks as registered_checks
from convtap.contract.responses import ResponsesAuditor
from convtap.contract.returns import Call, CallFacts, OpenCall, RequestFacts, ReturnFacts
from convtap.wire.bounded import Bounded
from convtap.wire.jsonvalue import loads_or_none

__all__ = ["Auditor", "Call", "checks"]


def checks() -> dict[str, Callable[[Any], Verdict]]:
    """Every rule's check by id: those of `returns` and `responses`, imported above."""
    return registered_checks()


class Auditor:
    """`limit` bounds every map (a live recorder forgets the oldest calls, turns and
    conversations past it); `convtap audit` runs unbounded over the whole capture."""

    def __init__(self, limit: int | None = None) -> None:
        self.calls: Bounded[str, Call] = Bounded(limit)
        self.signatures: Bounded[str, dict[str, dict[str, Any]]] = Bounded(limit)  # per turn
        self.seen_ids: Bounded[str | None, set[str]] = Bounded(limit)  # per conversation
        self.prepared: Bounded[str, float] = Bounded(limit)  # conversation -> latest prepare
        self.challenges: Bounded[str, str] = Bounded(limit)  # challenge -> its first flow
        self.returns = 0
        self.responses = ResponsesAuditor(limit)  # the Responses API's calls and outputs

    @property
    def answers(self) -> int:
        """Returns and Responses API outputs checked so far."""
        return self.returns + self.responses.outputs

    def prepare(self, conversation_id: str | None, at: float) -> None:
        if conversation_id:
            self.prepared[conversation_id] = at

    def seen(self, conversation_id: str | None, message_ids: Iterable[str]) -> None:
        known = self.seen_ids.get(conversation_id)
        if known is None:
            known = self.seen_ids[conversation_id] = set()
        known.update(message_ids)

    def request(self, flow_id: str, body: Any, at: float) -> list[Finding]:
        """A conversation request: its turn's declarations, and the returns it carries."""
        if not isinstance(body, dict):
            return []
        conversation = as_str(body.get("conversation_id"))
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        declared = {
            str(s.get("name")): s
            for s in body.get("local_function_signatures") or []
            if isinstance(s, dict)
        }
        self.signatures[flow_id] = declared
        challenge = as_str(body.get("app_attest_challenge"))
        first = self.challenges.setdefault(challenge, flow_id) if challenge else flow_id
        found = run_checks(
            RequestFacts(
                body=body,
                roles=[_role(m) for m in messages],
                declared=declared,
                challenge_first_flow=first if first != flow_id else None,
                execution_target=_execution_target(body, messages),
                where=Where(conversation_id=conversation, flow_id=flow_id),
            )
        )
        parent = as_str(body.get("parent_message_id"))
        returns = [m for m in messages if _role(m) == "tool"]
        answered = self.calls.get(parent) if parent is not None else None
        if not returns and answered is not None and answered.kind == "local" and messages:
            returns = messages[:1]  # answering a call without a tool message: check what came
        for message in returns:
            found += self._return(message, messages, parent, conversation, flow_id, at)
        self.seen(conversation, (m["id"] for m in messages if isinstance(m.get("id"), str)))
        return found

    def call(self, call: Call) -> list[Finding]:
        """A finished call (its arguments are final)."""
        self.calls[call.call_id] = call
        where = Where(call.conversation_id, call.call_id, None, call.turn_id)
        return run_checks(CallFacts(call, self.signatures.get(call.turn_id or "", {}), where))

    def finish(self) -> list[Finding]:
        """The end of the capture: what never got an answer."""
        found = self.responses.unanswered()
        for c in self.calls.values():
            found += run_checks(OpenCall(c, Where(c.conversation_id, c.call_id, None, c.turn_id)))
        return found

    def _return(
        self,
        message: dict[str, Any],
        messages: list[dict[str, Any]],
        parent: str | None,
        conversation: str | None,
        flow_id: str,
        at: float,
    ) -> list[Finding]:
        self.returns += 1
        text = as_dict(message.get("content")).get("text")
        parsed = loads_or_none(text) if isinstance(text, str) else None
        body = parsed if isinstance(parsed, dict) else None
        body_call_id = as_str((body or {}).get("call_id"))
        call = self.calls.get(parent or "") or self.calls.get(body_call_id or "")
        return_id = as_str(message.get("id"))
        facts = ReturnFacts(
            message=message,
            messages=messages,
            parent=parent,
            conversation=conversation,
            call=call,
            body=body,
            seen_ids=self.seen_ids.get(conversation, set()),
            prepared=self.prepared.get(call.conversation_id or "") if call else None,
            at=at,
            where=Where(
                call.conversation_id if call else conversation,
                call.call_id if call else None,
                return_id,
                flow_id,
            ),
        )
        found = run_checks(facts)
        if call is not None and call.answered_by is None:
            call.answered_by = return_id or flow_id
        return found


def _role(message: dict[str, Any]) -> str | None:
    return as_str(as_dict(message.get("author")).get("role"))


def _execution_target(body: dict[str, Any], messages: list[dict[str, Any]]) -> Any:
    if "conversation_execution_target" in body:
        return body["conversation_execution_target"]
    for message in messages:  # seed 003: persisted in the first user message's metadata
        metadata = message.get("metadata")
        if _role(message) == "user" and isinstance(metadata, dict):
            return metadata.get("conversation_execution_target")
    return None
