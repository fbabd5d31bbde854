"""The mock's Responses API (`POST /v1/responses`, `…/codex/responses`, and WebSocket mode on
the same paths): a script as data, and a server that plays it with the real API's objects and
event sequence (`convtap.mock.response_objects`), so that the official SDKs parse its answers
unchanged (docs/protocol.md, "Responses API", "What the mock sends").

A script says what a response does when a request carries no tool output (`on_request`) and when
it does (`on_outputs`). Steps:

    {"call": "get_weather", "arguments": {...}}   a function_call of that name, when the
                                                    request declares that function
    {"tool_search": {"query": "..."}}              a client tool_search_call, when the request
                                                    declares a client `tool_search` tool
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

Never invented: a step that names a tool the request did not declare calls nothing (the real
API never calls a tool the client did not offer). Both kinds of client work: stateless ones that
send the whole input again (the calls made are read from it) and ones that send
`previous_response_id`. Like the real server it remembers the responses it stored (`store`, true
by default) for every connection, and a `store: false` response only in the cache of the socket
that made it (`SocketCache`); it refuses what the real API refuses (`refusal`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from convtap.contract.responses import is_reference, is_server_search, names_a_tool
from convtap.contract.tools import tool_problems
from convtap.mock import response_objects as objects
from convtap.mock.arguments import arguments_for
from convtap.mock.serverturn import FrozenData
from convtap.wire.bounded import Bounded
from convtap.wire.responses import client_calls

JSON = Any
CALLS = ("function_call", "custom_tool_call", "tool_search_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output", "tool_search_output")
REMEMBERED = 10_000  # stored responses the server remembers
SOCKET_CACHE = 64  # responses one socket's cache holds (the oldest forgotten)


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


@dataclass
class Remembered:
    """A response the server keeps: what it answered, the input it was given, the tools called
    so far in its chain and the client calls the next request must answer."""

    response: dict[str, JSON]
    input: list[JSON]
    called: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)


SocketCache = Bounded[str, Remembered]


def socket_cache() -> SocketCache:
    """A new socket's cache of the responses it made."""
    return Bounded(SOCKET_CACHE)


NOTHING_DECLARED = "No tool of this scenario was declared, so none is called."


class ResponsesServer:
    """Plays a script; remembers the responses it stored, and the chains they continue."""

    def __init__(self, script: ResponsesScript, seed: int = 0, lenient: bool = False) -> None:
        self.script, self.seed, self.lenient = script, seed, lenient
        self.stored: Bounded[str, Remembered] = Bounded(REMEMBERED)
        self.conversations: Bounded[str, list[str]] = Bounded(REMEMBERED)  # id -> tools called

    def find(self, response_id: str, cache: SocketCache | None = None) -> Remembered | None:
        """A response a request may continue: in this socket's cache, or stored."""
        if cache is not None and response_id in cache:
            return cache[response_id]
        return self.stored.get(response_id)

    def delete(self, response_id: str) -> bool:
        return self.stored.pop(response_id, None) is not None

    def refusal(
        self, body: dict[str, JSON], cache: SocketCache | None = None
    ) -> dict[str, JSON] | None:
        """What the real API answers with HTTP 400 to this request body, or None when it takes
        it (docs/protocol.md, "Responses API"): a tool it does not take; an unknown
        `previous_response_id` (a `store: false` one another socket made included); an output
        whose call_id names no call of the previous response (or of the input); a call of the
        previous response left without its output. A refused continuation evicts the response
        it named from the socket's cache. `lenient` takes everything (so that a recording shows
        the client's mistake to the audit instead)."""
        if self.lenient:
            return None
        refused = self._refusal(body, cache)
        previous = body.get("previous_response_id")
        if refused is not None and cache is not None and isinstance(previous, str):
            cache.pop(previous, None)
        return refused

    def _refusal(self, body: dict[str, JSON], cache: SocketCache | None) -> dict[str, JSON] | None:
        tools = body.get("tools")
        problems = tool_problems(tools) if isinstance(tools, list) else []
        if problems:
            first = problems[0]
            return _error(first.api_message(), first.param, first.code)
        items = [i for i in _input(body) if isinstance(i, dict)]
        previous = body.get("previous_response_id")
        owed: list[str] = []
        if isinstance(previous, str):
            remembered = self.find(previous, cache)
            if remembered is None:
                return _error(f"Previous response with id '{previous}' not found.",
                              "previous_response_id", "previous_response_not_found")  # fmt: skip
            owed = list(remembered.calls)
        replayed = _owed(items)
        # the server holds calls beyond these: a conversation's, those item_references name
        held = body.get("conversation") is not None or any(is_reference(i) for i in items)
        made = self._made(cache) if held else set()
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

    def _made(self, cache: SocketCache | None) -> set[str]:
        known = [*self.stored.values(), *(cache.values() if cache is not None else ())]
        return {call_id for remembered in known for call_id in remembered.calls}

    def answer(
        self, body: dict[str, JSON], cache: SocketCache | None = None
    ) -> tuple[dict[str, JSON], list[str]]:
        """The response object for a request body, and its event stream."""
        response, events = self.answer_events(body, cache)
        return response, [objects.sse_event(event) for event in events]

    def answer_events(
        self, body: dict[str, JSON], cache: SocketCache | None = None
    ) -> tuple[dict[str, JSON], list[dict[str, JSON]]]:
        """The response object for a request body, and its events (WebSocket mode sends each
        as one frame). A warm-up (`generate: false`, or `prewarm: true`) generates nothing: its
        response only prepares the state a later turn names by `previous_response_id`."""
        items = [i for i in _input(body) if isinstance(i, dict)]
        previous = body.get("previous_response_id")
        remembered = self.find(previous, cache) if isinstance(previous, str) else None
        conversation = _conversation_id(body)  # a server-side conversation: its chain goes on
        called = list(remembered.called) if remembered is not None else []
        if conversation is not None:
            called += self.conversations.get(conversation, [])
        called += [_call_name(i) for i in items if i.get("type") in CALLS]
        output: list[dict[str, JSON]] = []
        if body.get("generate") is not False and body.get("prewarm") is not True:
            outputs = [i for i in items if i.get("type") in OUTPUTS]
            turn = self.script.on_outputs if outputs else self.script.on_request
            for step in turn.steps:
                output += self._items(step, body, called, outputs)
            output = output or [objects.message(NOTHING_DECLARED)]
        response_id = objects.new_id("resp_")
        if conversation is not None:
            self.conversations[conversation] = called
        response = objects.response_object(response_id, body, output, previous)
        kept = Remembered(response, list(_input(body)), called, _owed(output))
        if response["store"]:
            self.stored[response_id] = kept
        if cache is not None:  # a socket keeps what it made, stored or not
            cache[response_id] = kept
        return response, objects.events(response)

    def _items(
        self, step: ResponsesStep, body: dict[str, JSON], called: list[str],
        outputs: list[dict[str, JSON]],
    ) -> list[dict[str, JSON]]:  # fmt: skip
        functions = _declared_functions(body)
        if isinstance(step, CallFunction):
            if step.call not in functions:
                return []  # never invented: the client did not declare it
            called.append(step.call)
            arguments = json.dumps(step.arguments, ensure_ascii=False)
            return [objects.function_call(step.call, arguments, functions[step.call])]
        if isinstance(step, SearchTools):
            if not any(_client_search(t) for t in _listed_tools(body)):
                return []
            called.append("tool_search")
            return [objects.tool_search_call(step.tool_search)]
        if isinstance(step, SayText):
            return [objects.message(_fill(step.say, outputs))]
        return self._declared_calls(step, body, called)

    def _declared_calls(
        self, step: CallDeclaredTools, body: dict[str, JSON], called: list[str]
    ) -> list[dict[str, JSON]]:
        items = []
        for tool in _tools(body):
            name = _tool_name(tool)
            if name in called:
                continue
            called.append(name)
            if tool.get("type") == "function":
                arguments = arguments_for(tool.get("parameters"), self.seed, name)
                text = json.dumps(arguments, ensure_ascii=False)
                items.append(objects.function_call(name, text))
            elif tool.get("type") == "custom":
                items.append(objects.custom_tool_call(name, f"input for {name}"))
            else:
                query = arguments_for(tool.get("parameters"), self.seed, name)
                items.append(objects.tool_search_call(query if isinstance(query, dict) and query
                                                      else {"query": "tools"}))  # fmt: skip
        return items or [objects.message(step.otherwise)]

    def compact(self, body: dict[str, JSON], cache: SocketCache | None = None) -> dict[str, JSON]:
        """`POST /v1/responses/compact`: the window (the chain's input and output, then the
        request's input) compacted. Call `refusal` first."""
        window: list[JSON] = []
        previous = body.get("previous_response_id")
        remembered = self.find(previous, cache) if isinstance(previous, str) else None
        if remembered is not None:
            window += [*remembered.input, *remembered.response["output"]]
        window += _input(body)
        if isinstance(body.get("input"), str):
            window.append({"type": "message", "role": "user", "content": body["input"]})
        items = [i for i in window if isinstance(i, dict)]
        return objects.compacted(objects.new_id("resp_"), items)


def _conversation_id(body: dict[str, JSON]) -> str | None:
    """The `conversation` a request continues: its id, or an object with one."""
    value = body.get("conversation")
    value = value.get("id") if isinstance(value, dict) else value
    return value if isinstance(value, str) else None


def _owed(items: list[dict[str, JSON]]) -> list[str]:
    """The call ids the client must answer: its calls, as the recorder reads them."""
    return [call.call_id for call in client_calls(items) if call.call_id]


def _error(message: str, param: str | None, code: str | None = None) -> dict[str, JSON]:
    """The real API's error body (its `code` null where the API sends none)."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": param,
                      "code": code}}  # fmt: skip


def _input(body: dict[str, JSON]) -> list[JSON]:
    value = body.get("input")
    return value if isinstance(value, list) else []


def _listed_tools(body: dict[str, JSON]) -> list[dict[str, JSON]]:
    tools = body.get("tools")
    return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def _declared_functions(body: dict[str, JSON]) -> dict[str, str | None]:
    """The functions a request declares, by name, each with its namespace (None at the top)."""
    found: dict[str, str | None] = {}
    for tool in _listed_tools(body):
        if tool.get("type") == "function" and isinstance(tool.get("name"), str):
            found.setdefault(tool["name"], None)
        elif tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            for inner in tool["tools"]:
                if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                    found.setdefault(inner["name"], str(tool.get("name")))
    return found


def _tools(body: dict[str, JSON]) -> list[dict[str, JSON]]:
    """The tools a client runs and the model may call now: functions and custom tools (not
    those deferred to a tool search), and a client-executed tool search."""
    return [t for t in _listed_tools(body) if _client_runs(t)]


def _client_runs(tool: dict[str, JSON]) -> bool:
    if tool.get("type") in ("function", "custom"):
        return isinstance(tool.get("name"), str) and tool.get("defer_loading") is not True
    return _client_search(tool)


def _client_search(tool: dict[str, JSON]) -> bool:
    return tool.get("type") == "tool_search" and tool.get("execution") == "client"


def _tool_name(tool: dict[str, JSON]) -> str:
    return str(tool.get("name") or tool.get("type"))


def _call_name(item: dict[str, JSON]) -> str:
    return "tool_search" if item.get("type") == "tool_search_call" else str(item.get("name"))


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
