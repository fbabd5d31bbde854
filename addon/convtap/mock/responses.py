"""The mock's Responses API (`POST /v1/responses`, `…/codex/responses`): a script as data, and a
server that plays it with the real API's objects and event sequence, so that the official SDKs
parse its answers unchanged (docs/protocol.md, "Responses API").

A script says what a response does when a request carries no tool output (`on_request`) and when
it does (`on_outputs`). Steps:

    {"call": "get_weather", "arguments": {...}}   a function_call of that name
    {"tool_search": {"query": "..."}}              a client tool_search_call
    {"call_declared": "all", "otherwise": "..."}   a call of every tool the request declares
                                                    (functions, custom tools, and a client tool
                                                    search when the request enables one) that
                                                    was not called yet; `otherwise` is said when
                                                    none is left
    {"say": "It is {temp_c} °C; {tools_found} tools found."}
                                                    an assistant message; {name} is a value of
                                                    the function outputs' JSON, {tools_found}
                                                    the tools a tool_search_output carried,
                                                    {outputs} how many outputs came

Both kinds of client work: stateless ones that send the whole input again (the calls made are
read from it) and ones that send `previous_response_id` (the server remembers its responses).
Like the real server it accepts any output; the audit says what was wrong.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any, Literal

from pydantic import Field

from convtap.contract.responses import is_reference, is_server_search, names_a_tool
from convtap.mock.arguments import arguments_for
from convtap.mock.serverturn import FrozenData
from convtap.wire.bounded import Bounded
from convtap.wire.responses import client_calls
from convtap.wire.sse import SSEEvent, format_event

JSON = Any
CALLS = ("function_call", "custom_tool_call", "tool_search_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output", "tool_search_output")
REMEMBERED = 10_000  # responses whose calls the server remembers


class CallFunction(FrozenData):
    call: str = Field(min_length=1)
    arguments: dict[str, JSON]


class SearchTools(FrozenData):
    tool_search: dict[str, JSON]


class CallDeclaredTools(FrozenData):
    call_declared: Literal["all"]
    otherwise: str = "Every tool you declared has been called once."


class SayText(FrozenData):
    say: str


ResponsesStep = CallFunction | SearchTools | CallDeclaredTools | SayText


class ResponsesTurn(FrozenData):
    steps: list[ResponsesStep] = Field(min_length=1)


class ResponsesScript(FrozenData):
    on_request: ResponsesTurn
    on_outputs: ResponsesTurn


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def sse_event(obj: dict[str, JSON]) -> str:
    return format_event(SSEEvent(str(obj["type"]), json.dumps(obj, ensure_ascii=False)))


class ResponsesServer:
    """Plays a script; remembers, per response, the tools called so far in its chain and the
    client calls it made (which the next request must answer)."""

    def __init__(self, script: ResponsesScript, seed: int = 0, lenient: bool = False) -> None:
        self.script, self.seed, self.lenient = script, seed, lenient
        self.called: Bounded[str, list[str]] = Bounded(REMEMBERED)  # response id -> tool names
        self.calls: Bounded[str, list[str]] = Bounded(REMEMBERED)  # response id -> call ids

    def refusal(self, body: dict[str, JSON]) -> dict[str, JSON] | None:
        """What the real API answers with HTTP 400 to this request body, or None when it takes
        it (docs/protocol.md, "Responses API"): an unknown `previous_response_id`; an output
        whose call_id names no call of the previous response (or of the input); a call of the
        previous response left without its output. `lenient` takes everything (so that a
        recording shows the client's mistake to the audit instead)."""
        if self.lenient:
            return None
        items = [i for i in _input(body) if isinstance(i, dict)]
        previous = body.get("previous_response_id")
        owed: list[str] = []
        if isinstance(previous, str):
            if previous not in self.calls:
                return _error(f"Previous response with id '{previous}' not found.",
                              "previous_response_id", "previous_response_not_found")  # fmt: skip
            owed = list(self.calls[previous])
        replayed = _owed(items)
        # the server holds calls beyond these: a conversation's, those item_references name
        held = body.get("conversation") is not None or any(is_reference(i) for i in items)
        made = {call_id for calls in self.calls.values() for call_id in calls} if held else set()
        answered = set()
        for item in items:
            if item.get("type") not in OUTPUTS or names_a_tool(item) or is_server_search(item):
                continue  # naming a tool instead of a call (the Codex CLI), a search's echo: taken
            call_id = item.get("call_id")
            if call_id not in owed and call_id not in replayed and call_id not in made:
                return _error(f"No tool call found for function call output with call_id "
                              f"{call_id}.", "input")  # fmt: skip
            answered.add(call_id)
        for call_id in [*owed, *replayed]:
            if call_id not in answered:
                return _error(f"No tool output found for function call {call_id}.", "input")
        return None

    def answer(self, body: dict[str, JSON]) -> tuple[dict[str, JSON], list[str]]:
        """The response object for a request body, and its event stream."""
        response, events = self.answer_events(body)
        return response, [sse_event(event) for event in events]

    def answer_events(self, body: dict[str, JSON]) -> tuple[dict[str, JSON], list[dict[str, JSON]]]:
        """The response object for a request body, and its events (WebSocket mode sends each
        as one frame). A warm-up (`generate: false`, or `prewarm: true`) generates nothing: its
        response only prepares the state a later turn names by `previous_response_id`."""
        if body.get("generate") is False or body.get("prewarm") is True:
            response_id = new_id("resp_")
            self.called[response_id], self.calls[response_id] = [], []
            return (response := _response(response_id, body, [], None)), _events(response)
        items = [i for i in _input(body) if isinstance(i, dict)]
        outputs = [i for i in items if i.get("type") in OUTPUTS]
        previous = body.get("previous_response_id")
        conversation = _conversation_id(body)  # a server-side conversation: its chain goes on
        chain = previous if isinstance(previous, str) else conversation
        called = list(self.called.get(chain, [])) if chain is not None else []
        called += [_call_name(i) for i in items if i.get("type") in CALLS]
        turn = self.script.on_outputs if outputs else self.script.on_request
        output: list[dict[str, JSON]] = []
        for step in turn.steps:
            output += self._items(step, body, called, outputs)
        response_id = new_id("resp_")
        self.called[response_id] = called
        if conversation is not None:
            self.called[conversation] = called
        self.calls[response_id] = _owed(output)
        response = _response(response_id, body, output, previous)
        return response, _events(response)

    def _items(
        self, step: ResponsesStep, body: dict[str, JSON], called: list[str],
        outputs: list[dict[str, JSON]],
    ) -> list[dict[str, JSON]]:  # fmt: skip
        if isinstance(step, CallFunction):
            called.append(step.call)
            return [_function_call(step.call, json.dumps(step.arguments, ensure_ascii=False))]
        if isinstance(step, SearchTools):
            called.append("tool_search")
            return [_tool_search_call(step.tool_search)]
        if isinstance(step, SayText):
            return [_message(_fill(step.say, outputs))]
        items = []
        for tool in _tools(body):
            name = _tool_name(tool)
            if name in called:
                continue
            called.append(name)
            if tool.get("type") == "function":
                arguments = arguments_for(tool.get("parameters"), self.seed, name)
                items.append(_function_call(name, json.dumps(arguments, ensure_ascii=False)))
            elif tool.get("type") == "custom":
                items.append(_custom_tool_call(name, f"input for {name}"))
            else:
                query = arguments_for(tool.get("parameters"), self.seed, name)
                items.append(_tool_search_call(query if isinstance(query, dict) and query
                                               else {"query": "tools"}))  # fmt: skip
        return items or [_message(step.otherwise)]


def _conversation_id(body: dict[str, JSON]) -> str | None:
    """The `conversation` a request continues: its id, or an object with one."""
    value = body.get("conversation")
    value = value.get("id") if isinstance(value, dict) else value
    return value if isinstance(value, str) else None


def _owed(items: list[dict[str, JSON]]) -> list[str]:
    """The call ids the client must answer: its calls, as the recorder reads them."""
    return [str(call["call_id"]) for call in client_calls(items) if call["call_id"]]


def _error(message: str, param: str | None, code: str | None = None) -> dict[str, JSON]:
    """The real API's error body."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": param,
                      "code": code}}  # fmt: skip


def _input(body: dict[str, JSON]) -> list[JSON]:
    value = body.get("input")
    return value if isinstance(value, list) else []


def _tools(body: dict[str, JSON]) -> list[dict[str, JSON]]:
    """The tools a client runs: functions, custom tools, and a client-executed tool search."""
    tools = body.get("tools")
    listed = tools if isinstance(tools, list) else []
    return [t for t in listed if isinstance(t, dict) and _client_runs(t)]


def _client_runs(tool: dict[str, JSON]) -> bool:
    if tool.get("type") in ("function", "custom"):
        return isinstance(tool.get("name"), str)
    return tool.get("type") == "tool_search" and tool.get("execution") == "client"


def _tool_name(tool: dict[str, JSON]) -> str:
    return str(tool.get("name") or tool.get("type"))


def _call_name(item: dict[str, JSON]) -> str:
    return "tool_search" if item.get("type") == "tool_search_call" else str(item.get("name"))


def _function_call(name: str, arguments: str) -> dict[str, JSON]:
    return {"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"),
            "name": name, "arguments": arguments, "status": "completed"}  # fmt: skip


def _custom_tool_call(name: str, text: str) -> dict[str, JSON]:
    return {"type": "custom_tool_call", "id": new_id("ctc_"), "call_id": new_id("call_"),
            "name": name, "input": text, "status": "completed"}  # fmt: skip


def _tool_search_call(arguments: dict[str, JSON]) -> dict[str, JSON]:
    return {"type": "tool_search_call", "id": new_id("tsc_"), "call_id": new_id("call_"),
            "execution": "client", "arguments": arguments, "status": "completed"}  # fmt: skip


def _message(text: str) -> dict[str, JSON]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "message", "id": new_id("msg_"), "role": "assistant",
            "status": "completed", "content": [part]}  # fmt: skip


def _fill(template: str, outputs: list[dict[str, JSON]]) -> str:
    values: dict[str, JSON] = {"outputs": len(outputs), "tools_found": 0}
    for item in outputs:
        if item.get("type") == "function_call_output":
            try:
                parsed = json.loads(item.get("output") or "")
            except (TypeError, ValueError):
                parsed = None
            if isinstance(parsed, dict):
                values.update({k: v for k, v in parsed.items() if isinstance(k, str)})
        elif item.get("type") == "tool_search_output" and isinstance(item.get("tools"), list):
            values["tools_found"] += len(item["tools"])

    class Missing(dict[str, JSON]):
        def __missing__(self, key: str) -> str:
            return "?"

    return template.format_map(Missing(values))


def _response(
    response_id: str, body: dict[str, JSON], output: list[dict[str, JSON]], previous: JSON
) -> dict[str, JSON]:
    """A response object with every field the real API sends."""
    words = sum(len(json.dumps(item)) for item in output) // 4
    tools = body.get("tools")
    return {
        "id": response_id, "object": "response", "created_at": int(time.time()),
        "status": "completed", "background": False, "error": None, "incomplete_details": None,
        "instructions": body.get("instructions"), "max_output_tokens": None,
        "max_tool_calls": None, "model": body.get("model") or "gpt-5.1", "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": previous if isinstance(previous, str) else None,
        "reasoning": {"effort": None, "summary": None}, "service_tier": "default",
        "store": True, "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": tools if isinstance(tools, list) else [], "top_logprobs": 0, "top_p": 1.0,
        "truncation": "disabled",
        "usage": {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": words, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 40 + words},
        "user": None, "metadata": {},
    }  # fmt: skip


def _events(response: dict[str, JSON]) -> list[dict[str, JSON]]:
    """The real API's event sequence for a response, each with its sequence_number."""
    events: list[dict[str, JSON]] = []

    def add(kind: str, **fields: JSON) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    start = {**response, "status": "in_progress", "output": [], "usage": None}
    add("response.created", response=start)
    add("response.in_progress", response=start)
    for index, item in enumerate(response["output"]):
        where = {"output_index": index, "item_id": item["id"]}
        kind = item["type"]
        if kind == "function_call":
            add("response.output_item.added", output_index=index,
                item={**item, "arguments": "", "status": "in_progress"})  # fmt: skip
            text = item["arguments"]
            for n in range(0, len(text), 7):
                add("response.function_call_arguments.delta", **where, delta=text[n : n + 7])
            add("response.function_call_arguments.done", **where, arguments=text)
        elif kind == "custom_tool_call":
            add("response.output_item.added", output_index=index,
                item={**item, "input": "", "status": "in_progress"})  # fmt: skip
            add("response.custom_tool_call_input.delta", **where, delta=item["input"])
            add("response.custom_tool_call_input.done", **where, input=item["input"])
        elif kind == "message":
            add("response.output_item.added", output_index=index,
                item={**item, "status": "in_progress", "content": []})  # fmt: skip
            part = item["content"][0]
            place = {**where, "content_index": 0}
            add("response.content_part.added", **place, part={**part, "text": ""})
            text = part["text"]
            for n in range(0, len(text), 8):
                add("response.output_text.delta", **place, delta=text[n : n + 8], logprobs=[])
            add("response.output_text.done", **place, text=text, logprobs=[])
            add("response.content_part.done", **place, part=part)
        else:
            add("response.output_item.added", output_index=index, item=item)
        add("response.output_item.done", output_index=index, item=item)
    add("response.completed", response=response)
    return events
