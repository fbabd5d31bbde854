"""The Responses API's rules (docs/protocol.md, "Responses API"): outputs answer the client
calls of the chain they continue, by `call_id`; no item is sent twice into a chain; tool
definitions are what the API takes; one response at a time on a socket's lane.

Facts: `OutputFacts` (an output item of a request's `input`, with the call it answers),
`ItemFacts` (an input item with an id), `ToolsFacts` (a list of tool definitions),
`OpenClientCall` (a call left unanswered), `RepeatedOrphan` (an output that answered no call,
sent again), `SocketCreate` (a `response.create` on a socket). `chains.ResponsesAuditor` gathers
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convtap.contract.happenings import MadeCall
from convtap.contract.registry import MISSING, Violation, Where, check
from convtap.contract.tools import tool_problems
from convtap.wire.responses import qualified_name


@dataclass(frozen=True)
class OutputFacts:
    item: dict[str, Any]  # function_call_output, custom_tool_call_output or tool_search_output
    call: MadeCall | None  # the client call it answers, if its call_id names one
    by_item: MadeCall | None  # the call whose item id (fc_...) it names instead
    candidates: list[str]  # the call_ids it could have answered
    where: Where
    # it may answer a call the server holds and the capture does not show (a conversation's, a
    # response's from before the capture)
    hidden: bool = False
    # the call it names, made by a response outside the chain its previous_response_id names
    elsewhere: MadeCall | None = None
    previous: str | None = None  # the request's previous_response_id


@dataclass(frozen=True)
class ItemFacts:
    item: dict[str, Any]  # an input item that carries an `id`
    held_by: str | None  # the response of the chain that already holds an item of that id
    where: Where


@dataclass(frozen=True)
class RepeatedOrphan:
    item: dict[str, Any]  # the output, as first sent
    requests: list[str]  # the flows that sent it, in order
    where: Where


@dataclass(frozen=True)
class SocketCreate:
    lane: str | None  # its `stream_id`
    busy: str | None  # the socket turn still in flight on that lane when it came
    where: Where


@dataclass(frozen=True)
class ToolsFacts:
    tools: list[Any]
    what: str  # whose tools: the request's, a tool_search_output's
    where: Where


@dataclass(frozen=True)
class OpenClientCall:
    call: MadeCall
    answered: bool  # an output answered it
    where: Where


# What a function or custom tool call output's `output` list may hold (the SDK's
# `ResponseFunctionCallOutputItemListParam`, `OutputOutputContentList`).
OUTPUT_CONTENT = ("input_text", "input_image", "input_file")


def is_server_search(item: dict[str, Any]) -> bool:
    """A server-executed tool search's item: history a stateless client echoes back."""
    return item.get("type") in ("tool_search_call", "tool_search_output") and (
        item.get("execution") == "server"
    )


def is_reference(item: dict[str, Any]) -> bool:
    """An `item_reference`, whose `type` is optional (the SDK's `ItemReference`)."""
    return item.get("type") == "item_reference" or ("type" not in item and "role" not in item)


def names_a_tool(item: dict[str, Any]) -> bool:
    """An output with no call_id that names a tool instead (Codex CLI 0.171's
    `function_call_output` of `agent.goal_objective`): it answers no call, by design. A null
    call_id is none (the SDK's type makes it optional and nullable)."""
    return item.get("call_id") is None and isinstance(item.get("name"), str)


def _server_search(made: MadeCall) -> bool:
    """A server-executed tool search's call (replayed in an input)."""
    return made.call.recipient == "tool_search_call" and made.call.execution == "server"


@check("responses-output-call-id", OutputFacts)
def output_call_id(o: OutputFacts) -> Violation | None:
    if o.call is not None or names_a_tool(o.item) or o.elsewhere is not None:
        return None  # `responses-output-names-tool` and `responses-chain-broken` say those
    if is_server_search(o.item):
        return None  # the server's own output, echoed: `responses-tool-search` judges it
    if o.by_item is not None:
        return Violation(
            f"call_id is the item id of {o.by_item.call.name}'s call; the call's call_id "
            "is expected",
            o.by_item.call.call_id,
            o.item.get("call_id") or MISSING,
        )
    if o.hidden:
        return None  # a call the capture may not show
    return Violation(
        "call_id names no call of the response it answers",
        sorted(o.candidates),
        o.item.get("call_id") or MISSING,
    )


@check("responses-output-names-tool", OutputFacts)
def output_names_tool(o: OutputFacts) -> Violation | None:
    if not names_a_tool(o.item):
        return None
    name = qualified_name(o.item.get("namespace"), o.item["name"])
    return Violation(
        f"{o.item.get('type')} answers no call: it has no call_id and names the tool {name}",
        "a call_id naming a client call of the response it answers",
        {key: o.item[key] for key in ("name", "namespace") if key in o.item},
    )


@check("responses-output-type", OutputFacts)
def output_type(o: OutputFacts) -> Violation | None:
    kind, output = o.item.get("type"), o.item.get("output", MISSING)
    if kind not in ("function_call_output", "custom_tool_call_output") or isinstance(output, str):
        return None
    if isinstance(output, list) and all(
        isinstance(part, dict) and part.get("type") in OUTPUT_CONTENT for part in output
    ):
        return None
    return Violation(
        f"{kind}.output is neither a string nor a list of input content",
        f"a string, or a list of {', '.join(OUTPUT_CONTENT)} items",
        output,
    )


@check("responses-tool-search", OutputFacts)
def tool_search(o: OutputFacts) -> Violation | None:
    if o.item.get("type") != "tool_search_output":
        return None
    call = o.call or o.elsewhere  # a call outside the chain: `responses-chain-broken` says so
    if is_server_search(o.item) and (call is None or _server_search(call)):
        return None  # a server search's output, echoed back as history
    answers_client_search = (
        call is not None
        and call.call.recipient == "tool_search_call"
        and call.call.execution == "client"
    )
    # `execution` is optional on the input item: without it, it answers the client search it names
    if answers_client_search and o.item.get("execution", "client") == "client":
        return None
    return Violation(
        "a tool_search_output must answer a client tool_search_call and say execution: client",
        {"answers": "a client tool_search_call", "execution": "client"},
        {
            "answers": call.call.recipient if call else None,
            "execution": o.item.get("execution", MISSING),
        },
    )


@check("responses-tools-valid", ToolsFacts)
def tools_valid(t: ToolsFacts) -> list[Violation]:
    return [
        Violation(
            f"tool {p.index} ({p.kind}) of {t.what} is refused: {p.detail}",
            "a member of the Responses API's Tool union",
            t.tools[p.index],
        )
        for p in tool_problems(t.tools)
    ]


@check("responses-call-unanswered", OpenClientCall)
def call_unanswered(o: OpenClientCall) -> Violation | None:
    if o.answered:
        return None
    call = o.call.call
    kind, name = call.recipient, call.name
    label = name if name and name != kind else call.key
    return Violation(
        f"{kind} {label} got no output" if label else f"{kind} got no output",
        "an output with this call_id",
        "none",
    )


@check("responses-chain-broken", OutputFacts)
def chain_broken(o: OutputFacts) -> Violation | None:
    if o.elsewhere is None:
        return None
    made_by = o.elsewhere.where.conversation_id
    said = "no previous_response_id" if o.previous is None else f"previous_response_id {o.previous}"
    return Violation(
        f"the output answers {o.elsewhere.call.name or o.elsewhere.call.recipient}'s call of "
        f"response {made_by}, which is neither in the input nor in the chain {said} names",
        {"previous_response_id": made_by},
        {"previous_response_id": o.previous},
    )


@check("responses-item-duplicate", ItemFacts)
def item_duplicate(i: ItemFacts) -> Violation | None:
    if i.held_by is None:
        return None
    return Violation(
        f"{i.item.get('type')} {i.item.get('id')} is sent again: response {i.held_by} of the "
        "chain previous_response_id names already holds it",
        "only the items the chain does not hold",
        i.item.get("id"),
    )


@check("responses-orphan-repeated", RepeatedOrphan)
def orphan_repeated(r: RepeatedOrphan) -> Violation | None:
    if len(r.requests) < 2:
        return None
    return Violation(
        f"{r.item.get('type')} with call_id {r.item.get('call_id')} answered no call and was "
        f"sent again in {len(r.requests) - 1} later request(s): drop it from the history",
        "the orphan output removed from the client's history (or its call restored before it)",
        {"requests": r.requests},
    )


@check("responses-socket-overlap", SocketCreate)
def socket_overlap(s: SocketCreate) -> Violation | None:
    if s.busy is None:
        return None
    lane = "the socket" if s.lane is None else f"lane {s.lane}"
    return Violation(
        f"a response.create on {lane} while turn {s.busy} is still in flight",
        "one response in flight per socket lane: wait for response.completed (or an error)",
        {"in_flight": s.busy},
    )
