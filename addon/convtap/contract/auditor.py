"""The audit as a session happens: fed what happened (`contract.happenings`: prepares,
conversation requests, tool calls, the message ids each conversation has shown, Responses API
calls and requests) in time order, through one entry (`Auditor.handle`), it keeps what the rules
need to know (the calls, what each turn declared, the challenges, the prepares) and runs the
checks.

The recorder feeds it live; `convtap audit`, an import's end and a restarted recorder feed it a
capture read back by the store. Either way: the same findings (docs/protocol.md, "The tool
return contract" and "Across a session").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from convtap.contract.chains import ResponsesAuditor
from convtap.contract.happenings import (
    CallMade,
    ClientCallsMade,
    ConversationRequest,
    Happening,
    MadeCall,
    MessagesShown,
    Prepared,
    ReplayMissed,
    RequestRefused,
    ResponsesRequest,
    SessionEnded,
    SocketCreate,
    SocketTurn,
    is_refusal,
)
from convtap.contract.registry import Finding, Verdict, Where, run_checks
from convtap.contract.registry import checks as registered_checks
from convtap.contract.replay import MissFacts
from convtap.contract.returns import CallFacts, OpenCall, RequestFacts, ReturnFacts
from convtap.vocab import CallKind
from convtap.wire.bounded import Bounded
from convtap.wire.calls import ToolCall
from convtap.wire.session import ToolReturn, TurnRequest, answered_call, read_return

__all__ = ["Auditor", "MadeCall", "checks", "is_refusal"]

PENDING = 1000  # requests whose answer has not come yet, whose marks a refusal undoes


def checks() -> dict[str, Callable[[Any], Verdict]]:
    """Every rule's check by id: those of `returns` and `responses`, imported above."""
    return registered_checks()


class Auditor:
    """`limit` bounds every map (a live recorder forgets the oldest calls, turns and
    conversations past it); `convtap audit` runs unbounded over the whole capture."""

    def __init__(self, limit: int | None = None) -> None:
        self.calls: Bounded[str, MadeCall] = Bounded(limit)
        self.answered: Bounded[str, str] = Bounded(
            limit
        )  # call id -> the return that answered first
        self.signatures: Bounded[str, dict[str, dict[str, Any]]] = Bounded(limit)  # per turn
        self.seen_ids: Bounded[str | None, set[str]] = Bounded(limit)  # per conversation
        self.prepared: Bounded[str, float] = Bounded(limit)  # conversation -> latest prepare
        self.challenges: Bounded[str, str] = Bounded(limit)  # challenge -> its first flow
        self.returns = 0
        # flow -> what its request marked (its conversation, the ids it showed first, the calls
        # it answered first), undone if the server refuses it
        self.marks: Bounded[str, tuple[str | None, list[str], list[str]]] = Bounded(PENDING)
        self.responses = ResponsesAuditor(limit)  # the Responses API's calls and outputs
        self.requests: Bounded[str, None] = Bounded(limit)  # flows whose request was audited
        self.creates: Bounded[str, None] = Bounded(limit)  # socket turns whose create was
        self.misses: Bounded[str, None] = Bounded(limit)  # flows whose replay miss was

    def handle(self, happening: Happening) -> list[Finding]:
        """What happened next; the findings it makes. A request of a flow or a call already
        audited is not audited again (see `contract.happenings`)."""
        match happening:
            case Prepared(conversation_id, at):
                self.prepare(conversation_id, at)
            case ConversationRequest(flow_id, body, request, at):
                if self._first_request(flow_id):
                    return self.request(flow_id, body, at, request)
            case RequestRefused(flow_id):
                self.refused(flow_id)
            case ReplayMissed(flow_id, message):
                if flow_id not in self.misses:
                    self.misses[flow_id] = None
                    return run_checks(MissFacts(message, Where(flow_id=flow_id)))
            case MessagesShown(conversation_id, message_ids):
                self.seen(conversation_id, message_ids)
            case CallMade(call):
                if call.where.call_id not in self.calls:
                    return self.call(call)
            case ClientCallsMade(flow_id, response_id):
                known = self.responses.calls, self.responses.items
                made = [m for m in happening.made() if not _known_client_call(m.call, *known)]
                return self.responses.response(flow_id, response_id, made)
            case ResponsesRequest(flow_id, body, at):
                if self._first_request(flow_id):
                    return self.responses.request(flow_id, body, at)
            case SocketCreate(flow_id, previous, lane, busy):
                if self._first_create(flow_id):
                    return self.responses.socket_create(flow_id, previous, lane, busy)
            case SocketTurn(flow_id, socket, body, at, ended_at):
                if self._first_create(flow_id):
                    return self.responses.socket_turn(flow_id, socket, body, at, ended_at)
            case SessionEnded():
                return self.finish()
        return []

    def _first_request(self, flow_id: str) -> bool:
        if flow_id in self.requests:
            return False
        self.requests[flow_id] = None
        return True

    def _first_create(self, flow_id: str) -> bool:
        if flow_id in self.creates:
            return False
        self.creates[flow_id] = None
        return True

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

    def request(self, flow_id: str, body: Any, at: float, request: TurnRequest) -> list[Finding]:
        """A conversation request (its body, as the recorder read it): its turn's
        declarations, and the returns it carries."""
        if not isinstance(body, dict):
            return []
        conversation = request.conversation_id
        messages = request.messages
        declared = {str(s.get("name")): s for s in request.signatures}
        self.signatures[flow_id] = declared
        challenge = request.challenge
        first = self.challenges.setdefault(challenge, flow_id) if challenge else flow_id
        found = run_checks(
            RequestFacts(
                body=body,
                roles=request.roles,
                declared=declared,
                challenge_first_flow=first if first != flow_id else None,
                execution_target=request.execution_target,
                where=Where(conversation_id=conversation, flow_id=flow_id),
            )
        )
        parent = request.parent_message_id
        returns = request.returns
        answered = self.calls.get(parent) if parent is not None else None
        local = answered is not None and answered.call.kind == CallKind.LOCAL
        if not returns and local and messages:
            returns = [read_return(messages[0])]  # a call answered by no tool message
        known = self.seen_ids.get(conversation, set())
        fresh = [message_id for message_id in request.message_ids if message_id not in known]
        first_answers: list[str] = []
        for ret in returns:
            call = answered_call(parent, ret.call_id, self.calls)
            if call is not None and (key := _key(call)) not in self.answered:
                first_answers.append(key)
            found += self._return(ret, messages, parent, conversation, flow_id, at)
        self.seen(conversation, request.message_ids)
        self.marks[flow_id] = (conversation, fresh, first_answers)
        return found

    def refused(self, flow_id: str) -> None:
        """The server refused a conversation request: the returns it carried answered no call,
        and its message ids are still free (a retry of the same return is no duplicate)."""
        conversation, fresh, answered = self.marks.pop(flow_id, (None, [], []))
        self.seen_ids.get(conversation, set()).difference_update(fresh)
        for key in answered:
            self.answered.pop(key, None)

    def call(self, call: MadeCall) -> list[Finding]:
        """A finished call (its arguments are final)."""
        self.calls[_key(call)] = call
        declared = self.signatures.get(call.where.flow_id or "")
        return run_checks(CallFacts(call, declared, call.where))

    def finish(self) -> list[Finding]:
        """The end of the capture: what never got an answer."""
        found = self.responses.unanswered()
        for c in self.calls.values():
            found += run_checks(OpenCall(c, self.answered.get(_key(c)), c.where))
        return found

    def _return(
        self,
        ret: ToolReturn,
        messages: list[dict[str, Any]],
        parent: str | None,
        conversation: str | None,
        flow_id: str,
        at: float,
    ) -> list[Finding]:
        self.returns += 1
        call = answered_call(parent, ret.call_id, self.calls)
        return_id = ret.message_id
        first = self.answered.get(_key(call)) if call is not None else None
        facts = ReturnFacts(
            message=ret.message,
            messages=messages,
            parent=parent,
            conversation=conversation,
            call=call,
            body=ret.body,
            seen_ids=self.seen_ids.get(conversation, set()),
            prepared=self.prepared.get(call.where.conversation_id or "") if call else None,
            at=at,
            where=Where(
                call.where.conversation_id if call else conversation,
                call.where.call_id if call else None,
                return_id,
                flow_id,
            ),
            answered_by=first,
        )
        found = run_checks(facts)
        if call is not None and first is None:
            self.answered[_key(call)] = return_id or flow_id
        return found


def _key(call: MadeCall) -> str:
    """An f/conversation call's id (the id of the message that made it)."""
    return call.where.call_id or ""


def _known_client_call(
    call: ToolCall, by_call_id: Bounded[str, Any], by_item: Bounded[str, Any]
) -> bool:
    """A Responses API client call the auditor holds already, by its call_id or its item id."""
    call_id, item_id = call.call_id, call.item_id
    return bool(call_id and call_id in by_call_id) or bool(item_id and item_id in by_item)
