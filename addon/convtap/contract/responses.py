"""The Responses API's rules (docs/protocol.md, "Responses API"): outputs answer the client
calls of the response they continue, by `call_id`; tool definitions fit the `Tool` union.

Facts: `OutputFacts` (an output item of a request's `input`, with the call it answers),
`ToolsFacts` (a list of tool definitions), `OpenClientCall` (a call left unanswered).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from convtap.contract.registry import MISSING, Finding, Violation, Where, as_str, check, run_checks
from convtap.models import TOOLS_ADAPTER
from convtap.wire.bounded import Bounded
from convtap.wire.jsonvalue import REDACTED
from convtap.wire.responses import CLIENT_CALLS, OUTPUTS, qualified_name


@dataclass(frozen=True)
class OutputFacts:
    item: dict[str, Any]  # function_call_output, custom_tool_call_output or tool_search_output
    call: dict[str, Any] | None  # the client call it answers, if its call_id names one
    by_item: dict[str, Any] | None  # the call whose item id (fc_...) it names instead
    candidates: list[str]  # the call_ids it could have answered
    where: Where
    # it may answer a call the server holds and the capture does not show (a conversation's, a
    # response's from before the capture)
    hidden: bool = False


@dataclass(frozen=True)
class ToolsFacts:
    tools: list[Any]
    what: str  # whose tools: the request's, a tool_search_output's
    where: Where


@dataclass(frozen=True)
class OpenClientCall:
    call: dict[str, Any]
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


@check("responses-output-call-id", OutputFacts)
def output_call_id(o: OutputFacts) -> Violation | None:
    if o.call is not None or names_a_tool(o.item):
        return None  # `responses-output-names-tool` says what the second is
    if is_server_search(o.item):
        return None  # the server's own output, echoed: `responses-tool-search` judges it
    if o.by_item is not None:
        return Violation(
            f"call_id is the item id of {o.by_item.get('name')}'s call; the call's call_id "
            "is expected",
            o.by_item.get("call_id"),
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
    call = o.call
    if is_server_search(o.item) and (call is None or is_server_search(call)):
        return None  # a server search's output, echoed back as history
    answers_client_search = (
        call is not None
        and call.get("type") == "tool_search_call"
        and call.get("execution") == "client"
    )
    # `execution` is optional on the input item: without it, it answers the client search it names
    if answers_client_search and o.item.get("execution", "client") == "client":
        return None
    return Violation(
        "a tool_search_output must answer a client tool_search_call and say execution: client",
        {"answers": "a client tool_search_call", "execution": "client"},
        {
            "answers": call.get("type") if call else None,
            "execution": o.item.get("execution", MISSING),
        },
    )


def without_redacted(value: Any) -> Any:
    """A value without the object members redaction replaced whole (an mcp tool's
    `authorization`, a network policy's `domain_secrets`): what they held is not known, and the
    recorder audits what it stores."""
    if isinstance(value, dict):
        return {
            key: without_redacted(item)
            for key, item in value.items()
            if not (isinstance(item, str) and REDACTED.fullmatch(item))
        }
    if isinstance(value, list):
        return [without_redacted(item) for item in value]
    return value


@check("responses-tools-valid", ToolsFacts)
def tools_valid(t: ToolsFacts) -> list[Violation]:
    found = []
    for n, tool in enumerate(t.tools):
        try:
            TOOLS_ADAPTER.validate_python([without_redacted(tool)])
        except ValidationError as exc:
            detail = "; ".join(
                f"{'.'.join(map(str, e['loc'][1:]))}: {e['msg']}" for e in exc.errors()[:3]
            )
            name = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
            found.append(
                Violation(
                    f"tool {n} ({name}) of {t.what} does not validate: {detail}",
                    "a member of the Responses API's Tool union",
                    tool,
                )
            )
    return found


@check("responses-call-unanswered", OpenClientCall)
def call_unanswered(o: OpenClientCall) -> Violation | None:
    if o.call["answered"]:
        return None
    return Violation(
        f"{o.call.get('type')} {o.call.get('name')} got no output",
        "an output with this call_id",
        "none",
    )


class ResponsesAuditor:
    """What the Responses API rules need to know: each response's client calls."""

    def __init__(self, limit: int | None = None) -> None:
        self.calls: Bounded[str, dict[str, Any]] = Bounded(limit)  # call_id -> client call
        self.items: Bounded[str, dict[str, Any]] = Bounded(limit)  # item id (fc_...) -> call
        self.by_response: Bounded[str | None, list[dict[str, Any]]] = Bounded(limit)
        self.outputs = 0

    def response(
        self, flow_id: str, response_id: str | None, calls: list[dict[str, Any]], at: float
    ) -> list[Finding]:
        """A response's client calls, which the next requests must answer by `call_id`."""
        for call in calls:
            record = {**call, "response_id": response_id, "flow_id": flow_id, "answered": False}
            if call.get("call_id"):
                self.calls[call["call_id"]] = record
            if call.get("item_id"):
                self.items[call["item_id"]] = record
            known = self.by_response.get(response_id)
            if known is None:
                known = self.by_response[response_id] = []
            known.append(record)
        return []

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
        candidates = self._candidates(previous, items)
        # The server may hold calls the capture does not show: a conversation's, those of a
        # response before the capture began, the items a reference names.
        held = body.get("conversation") is not None
        hidden = (
            held
            or (previous is not None and previous not in self.by_response)
            or any(is_reference(i) and i.get("id") not in self.items for i in items)
        )
        for item in items:
            if item.get("type") == "additional_tools" and isinstance(item.get("tools"), list):
                what = "an additional_tools item's tools"  # tools declared in the input
                found += run_checks(ToolsFacts(item["tools"], what, where))
            if item.get("type") not in OUTPUTS:
                continue
            self.outputs += 1
            call_id = as_str(item.get("call_id"))
            here = Where(previous, call_id, as_str(item.get("id")), flow_id)
            call = candidates.get(call_id or "")
            if call is None and held:  # the conversation holds every call it made
                call = self.calls.get(call_id or "")
            by_item = self.items.get(call_id or "") if call is None else None
            # a call_id the capture shows for another response is wrong in any case
            unseen = hidden and (call_id or "") not in self.calls
            facts = OutputFacts(item, call, by_item, list(candidates), here, unseen)
            found += run_checks(facts)
            if call is not None:
                call["answered"] = True
            if item.get("type") == "tool_search_output" and isinstance(item.get("tools"), list):
                what = "the tool_search_output's tools"
                found += run_checks(ToolsFacts(item["tools"], what, here))
        return found

    def _candidates(
        self, previous: str | None, items: list[dict[str, Any]]
    ) -> dict[str, dict[str, Any]]:
        """The calls a request's outputs may answer, by call_id: those of the response it
        continues, those replayed in its input, and those its item_references name."""
        found: dict[str, dict[str, Any]] = {}
        if previous is not None:
            found.update(
                (r["call_id"], r) for r in self.by_response.get(previous, []) if r.get("call_id")
            )
        for item in items:
            call_id = item.get("call_id")
            if item.get("type") in CLIENT_CALLS and isinstance(call_id, str) and call_id:
                found[call_id] = self.calls.get(call_id, {**item, "item_id": item.get("id")})
            elif is_reference(item) and isinstance(item.get("id"), str):
                referenced = self.items.get(item["id"])
                if referenced is not None and referenced.get("call_id"):
                    found[referenced["call_id"]] = referenced
        return found

    def unanswered(self) -> list[Finding]:
        """The end of the capture: client calls that never got an output."""
        calls = {id(r): r for calls in self.by_response.values() for r in calls}.values()
        found: list[Finding] = []
        for r in calls:
            where = Where(r.get("response_id"), r.get("call_id"), None, r.get("flow_id"))
            found += run_checks(OpenClientCall(r, where))
        return found
