"""What the Responses API rules need to know of a session: each response's client calls, the
chain its `previous_response_id` links it into and the items that chain holds, the outputs that
answered no call, and what is in flight on each socket lane. Fed in time order (live by the
recorder, by `convtap audit` from the capture), it gives the facts to the checks of
`contract.responses`.

Every response is known, with or without calls, so that every output is judged whatever the
response it continues held (docs/rules.md, "responses-output-call-id").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from convtap.contract.happenings import MadeCall
from convtap.contract.registry import Finding, Where, as_str, run_checks
from convtap.contract.responses import (
    ItemFacts,
    OpenClientCall,
    OutputFacts,
    RepeatedOrphan,
    SocketCreate,
    ToolsFacts,
    is_reference,
)
from convtap.wire.bounded import Bounded
from convtap.wire.responses import CLIENT_CALLS, OUTPUTS, client_call

CHAIN_WALKED = 10_000  # responses walked back along one chain (a longer one is cut there)
ORPHAN_RULES = ("responses-output-call-id", "responses-chain-broken")


@dataclass
class Orphan:
    """An output that answered no call, and the requests that sent it."""

    item: dict[str, Any]
    where: Where
    requests: list[str] = field(default_factory=list)


class ResponsesAuditor:
    """`limit` bounds every map (a live recorder forgets the oldest past it)."""

    def __init__(self, limit: int | None = None) -> None:
        self.calls: Bounded[str, MadeCall] = Bounded(limit)  # call_id -> client call
        self.items: Bounded[str, MadeCall] = Bounded(limit)  # item id (fc_...) -> call
        self.by_response: Bounded[str | None, list[MadeCall]] = Bounded(limit)
        self.answered: Bounded[CallKey, None] = Bounded(limit)  # the calls an output answered
        self.parents: Bounded[str, str | None] = Bounded(limit)  # response -> its previous
        self.held: Bounded[str, set[str]] = Bounded(limit)  # response -> the item ids it holds
        # flow -> its request's previous_response_id and input item ids, until its response
        self.pending: Bounded[str, tuple[str | None, list[str]]] = Bounded(limit)
        self.orphans: Bounded[tuple[str, str], Orphan] = Bounded(limit)
        self.lanes: Bounded[tuple[str, str | None], tuple[str, float]] = Bounded(limit)
        self.outputs = 0

    def response(
        self, flow_id: str, response_id: str | None, calls: Sequence[MadeCall]
    ) -> list[Finding]:
        """A response, and its client calls, which the next requests must answer by
        `call_id`; a response without calls is known too (the chain goes through it)."""
        if response_id is not None and response_id not in self.parents:
            previous, ids = self.pending.pop(flow_id, (None, []))
            self.parents[response_id] = previous
            self.held[response_id] = set(ids)
        known = self.by_response.get(response_id)
        if known is None:
            known = self.by_response[response_id] = []
        for made in calls:
            call = made.call
            if call.call_id:
                self.calls[call.call_id] = made
            if call.item_id:
                self.items[call.item_id] = made
                if response_id is not None:
                    self.held.setdefault(response_id, set()).add(call.item_id)
            known.append(made)
        return []

    def chain(self, previous: str | None) -> list[str]:
        """The responses a request continues: the one it names, then each one's previous."""
        found: list[str] = []
        seen: set[str] = set()
        while previous is not None and previous not in seen and len(found) < CHAIN_WALKED:
            found.append(previous)
            seen.add(previous)
            previous = self.parents.get(previous)
        return found

    def request(self, flow_id: str, body: Any, at: float) -> list[Finding]:
        if not isinstance(body, dict):
            return []
        previous = as_str(body.get("previous_response_id"))
        where = Where(conversation_id=previous, flow_id=flow_id)
        found: list[Finding] = []
        tools = body.get("tools")
        if isinstance(tools, list):
            found += run_checks(ToolsFacts(tools, "the request's tools", where))
        given = body.get("input")  # a string, a list of items, or anything a client sends
        items = [i for i in given if isinstance(i, dict)] if isinstance(given, list) else []
        chain = self.chain(previous)
        found += self._duplicates(items, chain, previous, flow_id)
        self.pending[flow_id] = (previous, [i["id"] for i in items if _item_id(i)])
        candidates = self._candidates(previous, items, at)
        # The server may hold calls the capture does not show: a conversation's, those of a
        # response before the capture began, the items a reference names.
        held = body.get("conversation") is not None
        hidden = (
            held
            or (previous is not None and previous not in self.by_response)
            or any(is_reference(i) and i.get("id") not in self.items for i in items)
        )
        in_chain = set(chain)
        for item in items:
            if item.get("type") == "additional_tools" and isinstance(item.get("tools"), list):
                what = "an additional_tools item's tools"  # tools declared in the input
                found += run_checks(ToolsFacts(item["tools"], what, where))
            if item.get("type") in OUTPUTS:
                found += self._output(item, candidates, held, hidden, in_chain, previous, flow_id)
        return found

    def _output(
        self, item: dict[str, Any], candidates: dict[str, MadeCall], held: bool,
        hidden: bool, in_chain: set[str], previous: str | None, flow_id: str,
    ) -> list[Finding]:  # fmt: skip
        self.outputs += 1
        call_id = as_str(item.get("call_id"))
        here = Where(previous, call_id, as_str(item.get("id")), flow_id)
        call = candidates.get(call_id or "")
        if call is None and held:  # the conversation holds every call it made
            call = self.calls.get(call_id or "")
        by_item = self.items.get(call_id or "") if call is None else None
        known = self.calls.get(call_id or "") if call is None else None
        # broken only where the chain is known: a response outside the capture may hold the call
        chain_known = previous is None or previous in self.parents
        outside = known is not None and known.where.conversation_id not in in_chain
        elsewhere = known if outside and chain_known else None
        # a call_id the capture shows for another response is wrong in any case
        unseen = hidden and known is None
        found = run_checks(
            OutputFacts(item, call, by_item, list(candidates), here, unseen, elsewhere, previous)
        )
        if call is not None:
            self.answered[_key(call)] = None
        if any(f.rule in ORPHAN_RULES for f in found):
            orphan = self.orphans.setdefault((str(item.get("type")), call_id or ""),
                                             Orphan(item, here))  # fmt: skip
            orphan.requests.append(flow_id)
        if item.get("type") == "tool_search_output" and isinstance(item.get("tools"), list):
            found += run_checks(ToolsFacts(item["tools"], "the tool_search_output's tools", here))
        return found

    def _duplicates(
        self, items: list[dict[str, Any]], chain: list[str], previous: str | None, flow_id: str
    ) -> list[Finding]:
        """Items re-sent into a chain that already holds them (the server: "Duplicate item
        found with id …")."""
        found: list[Finding] = []
        for item in items:
            if not _item_id(item):
                continue
            held_by = next((r for r in chain if item["id"] in self.held.get(r, ())), None)
            where = Where(previous, as_str(item.get("call_id")), item["id"], flow_id)
            found += run_checks(ItemFacts(item, held_by, where))
        return found

    def _candidates(
        self, previous: str | None, items: list[dict[str, Any]], at: float
    ) -> dict[str, MadeCall]:
        """The calls a request's outputs may answer, by call_id: those of the response it
        continues, those replayed in its input, and those its item_references name."""
        found: dict[str, MadeCall] = {}
        if previous is not None:
            found.update(
                (r.call.call_id, r) for r in self.by_response.get(previous, []) if r.call.call_id
            )
        for item in items:
            call_id = item.get("call_id")
            if item.get("type") in CLIENT_CALLS and isinstance(call_id, str) and call_id:
                replayed = MadeCall(client_call(item, None), Where(call_id=call_id), at)
                found[call_id] = self.calls.get(call_id, replayed)
            elif is_reference(item) and isinstance(item.get("id"), str):
                referenced = self.items.get(item["id"])
                if referenced is not None and referenced.call.call_id:
                    found[referenced.call.call_id] = referenced
        return found

    def socket_create(
        self, flow_id: str, previous: str | None, lane: str | None, busy: str | None
    ) -> list[Finding]:
        """A `response.create` on a socket; `busy` is the turn still in flight on its lane."""
        where = Where(conversation_id=previous, flow_id=flow_id)
        return run_checks(SocketCreate(lane, busy, where))

    def socket_turn(
        self, flow_id: str, socket: str, body: Any, started: float, ended: float | None
    ) -> list[Finding]:
        """A socket's turn read back from a capture (its create at `started`, its end at
        `ended`): in flight on its lane is a turn of the same lane that ended after it began."""
        body = body if isinstance(body, dict) else {}
        lane = as_str(body.get("stream_id"))
        before = self.lanes.get((socket, lane))
        busy = before[0] if before is not None and before[1] > started else None
        end = ended if ended is not None else started
        if before is None or end > before[1]:
            self.lanes[(socket, lane)] = (flow_id, end)
        return self.socket_create(flow_id, as_str(body.get("previous_response_id")), lane, busy)

    def unanswered(self) -> list[Finding]:
        """The end of the capture: client calls that never got an output, and orphans sent
        again and again."""
        calls = {id(r): r for calls in self.by_response.values() for r in calls}.values()
        found: list[Finding] = []
        for r in calls:
            found += run_checks(OpenClientCall(r, _key(r) in self.answered, r.where))
        for orphan in self.orphans.values():
            found += run_checks(RepeatedOrphan(orphan.item, orphan.requests, orphan.where))
        return found


# A call as the auditor knows it: the response and flow that made it, its call_id and item id
# (a call replayed in a request's input has no flow).
CallKey = tuple[str | None, str | None, str | None, str | None]


def _key(made: MadeCall) -> CallKey:
    return made.where.conversation_id, made.where.flow_id, made.call.call_id, made.call.item_id


def _item_id(item: dict[str, Any]) -> bool:
    """An input item that carries an id of its own (an item_reference names one instead)."""
    return isinstance(item.get("id"), str) and bool(item["id"]) and not is_reference(item)
