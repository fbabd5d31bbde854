"""The Responses API's rules (seed 004, PROTOCOL.md "Responses API"): outputs answer the
client calls of the response they continue, by `call_id`."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from addon.responses import CLIENT_CALLS as CLIENT_CALL_TYPES
from addon.responses import OUTPUTS as OUTPUT_TYPES
from addon.rules import MISSING, Finding, _str, finding


class ResponsesAuditor:
    def __init__(self) -> None:
        self.calls: dict[str, dict[str, Any]] = {}  # call_id -> client call
        self.items: dict[str, dict[str, Any]] = {}  # item id (fc_...) -> client call
        self.by_response: dict[str | None, list[dict[str, Any]]] = {}
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
            self.by_response.setdefault(response_id, []).append(record)
        return []

    def request(self, flow_id: str, body: Any, at: float) -> list[Finding]:
        if not isinstance(body, dict):
            return []
        from addon.models import TOOLS_ADAPTER

        found: list[Finding] = []
        where: dict[str, Any] = {
            "conversation_id": _str(body.get("previous_response_id")),
            "flow_id": flow_id,
        }
        tools = body.get("tools")
        if isinstance(tools, list):
            found += self._tools_valid(TOOLS_ADAPTER, tools, where, "the request's tools")
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        previous = _str(body.get("previous_response_id"))
        if previous is not None:
            candidates = {
                r["call_id"]: r for r in self.by_response.get(previous, []) if r.get("call_id")
            }
        else:  # stateless: the calls are replayed in the same input
            candidates = {
                i["call_id"]: self.calls.get(i["call_id"], {**i, "item_id": i.get("id")})
                for i in items
                if i.get("type") in CLIENT_CALL_TYPES and i.get("call_id")
            }
        for item in items:
            kind = item.get("type")
            if kind not in OUTPUT_TYPES:
                continue
            self.outputs += 1
            call_id = _str(item.get("call_id"))
            here = {**where, "call_id": call_id, "return_id": _str(item.get("id"))}
            call = candidates.get(call_id or "")
            if call is None:
                by_item = self.items.get(call_id or "")
                detail = (
                    f"call_id is the item id of {by_item.get('name')}'s call; the call's "
                    "call_id is expected"
                    if by_item
                    else "call_id names no call of the response it answers"
                )
                found.append(
                    finding(
                        "responses-output-call-id",
                        detail,
                        here,
                        expected=by_item.get("call_id") if by_item else sorted(candidates),
                        actual=call_id or MISSING,
                    )
                )
            else:
                call["answered"] = True
            if kind == "function_call_output" and not isinstance(item.get("output"), str):
                found.append(
                    finding(
                        "responses-output-type",
                        "function_call_output.output is not a string",
                        here,
                        expected="a string",
                        actual=item.get("output", MISSING),
                    )
                )
            if kind == "tool_search_output":
                client_search = (
                    call is not None
                    and call.get("type") == "tool_search_call"
                    and call.get("execution") == "client"
                )
                if not client_search or item.get("execution") != "client":
                    found.append(
                        finding(
                            "responses-tool-search",
                            "a tool_search_output "
                            "must answer a client tool_search_call and say "
                            "execution: client",
                            here,
                            expected={
                                "answers": "a client tool_search_call",
                                "execution": "client",
                            },
                            actual={
                                "answers": call.get("type") if call else None,
                                "execution": item.get("execution", MISSING),
                            },
                        )
                    )
                if isinstance(item.get("tools"), list):
                    found += self._tools_valid(
                        TOOLS_ADAPTER, item["tools"], here, "the tool_search_output's tools"
                    )
        return found

    def _tools_valid(
        self, adapter: Any, tools: list[Any], where: dict[str, Any], what: str
    ) -> list[Finding]:
        found = []
        for n, tool in enumerate(tools):
            try:
                adapter.validate_python([tool])
            except ValidationError as exc:
                detail = "; ".join(
                    f"{'.'.join(map(str, e['loc'][1:]))}: {e['msg']}" for e in exc.errors()[:3]
                )
                name = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
                found.append(
                    finding(
                        "responses-tools-valid",
                        f"tool {n} ({name}) of {what} does not validate: {detail}",
                        where,
                        expected="a member of seed 004's Tool union",
                        actual=tool,
                    )
                )
        return found

    def unanswered(self) -> list[Finding]:
        """The end of the capture: client calls that never got an output."""
        calls = {id(r): r for calls in self.by_response.values() for r in calls}.values()
        return [
            finding(
                "responses-call-unanswered",
                f"{r.get('type')} {r.get('name')} got no output",
                {
                    "conversation_id": r.get("response_id"),
                    "call_id": r.get("call_id"),
                    "flow_id": r.get("flow_id"),
                },
                expected="an output with this call_id",
                actual="none",
            )
            for r in calls
            if not r["answered"]
        ]
