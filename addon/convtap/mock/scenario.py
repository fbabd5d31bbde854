"""Scenarios: the server side of a conversation, as the mock server plays it.

Pure (only `load_scenario` reads a file): a request body in, the turn's SSE events out
(rendered by `convtap.mock.serverturn`). A scenario is a small JSON file
under `captures/scenarios/<name>.json`; it says what the model does, never which ids it uses:
ids (conversation, messages, turn) are fresh uuid4s per request, made here in code.

    {
      "description": "one line: what this scenario shows",
      "model": "gpt-5-6-thinking",          // optional: resolved_model_slug in metadata
      "title": "Caminho de Alefita",        // optional: a title_generation event on turn one
      "piece_size": 7,                      // optional: characters per streamed text frame
      "on_user": TURN,                      // the answer to a request carrying a user message
      "on_tool_return": TURN                // optional: the answer to a tool return
    }
    TURN = {
      "delivery": "sse" | "websocket",      // websocket: stream_handoff, rest on the user socket
      "cut_after_events": 14,               // optional: the body breaks inside the first bare
                                            // continuation frame at or after this event offset
      "steps": [STEP, ...]
    }
    STEP = {"think": "text"}                             // an analysis message (hidden)
         | {"call": "alefita_way", "arguments": {...}}   // a local.<tool> call
         | {"say": "text", "echo_return": true}          // the final answer; echo_return
                                                         // appends what the return carried

Like the real server (docs/protocol.md, "Local tool calls", "Acceptance"), a scenario accepts ANY
tool return, even one that breaks the contract, stores it in the conversation and continues. The
wire shapes follow docs/protocol.md, "Delta encoding v1", and `captures/examples/sse/build.py`.
"""

from __future__ import annotations

import copy
import json
import stat
import time
import uuid
from collections.abc import Callable, Mapping, MutableMapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from pydantic import Field, ValidationError

from convtap.mock.arguments import arguments_for, signature_schema
from convtap.mock.responses import ResponsesScript
from convtap.mock.serverturn import (
    JSON,
    ROOT_NODE,
    Call,
    CallDeclared,
    Conversation,
    FrozenData,
    IdFactory,
    PlayedTurn,
    Say,
    ScenarioError,
    Step,
    TurnScript,
    TurnWriter,
    dispatched_count,
    new_message,
    ws_frames,
)

__all__ = [
    "ROOT_NODE",
    "SCENARIOS",
    "Conversation",
    "PlayedTurn",
    "Scenario",
    "ScenarioError",
    "UnknownConversation",
    "dispatched_count",
    "load_scenario",
    "ws_frames",
]

SCENARIOS = resources.files("convtap.mock") / "scenarios"
MAX_MESSAGES = 1000  # messages one f/conversation request may carry (the client sends one)


class UnknownConversation(ScenarioError):
    """The request names a conversation this server never started."""


_DEFAULT_RETURN_TURN = TurnScript(steps=[Say(say="Ok.")])


class Scenario(FrozenData):
    name: str = ""
    description: str
    model: str = "gpt-5-6-thinking"
    title: str | None = None
    piece_size: int = Field(default=7, ge=1)
    on_user: TurnScript
    on_tool_return: TurnScript | None = None
    responses: ResponsesScript | None = None  # the Responses API's side, when it has one

    def play(
        self,
        request: Mapping[str, JSON],
        conversations: MutableMapping[str, Conversation],
        *,
        conduit_token: str,
        new_id: IdFactory = lambda: str(uuid.uuid4()),
        now: Callable[[], float] = time.time,
        seed: int = 0,
    ) -> PlayedTurn:
        """Answer one f/conversation request body (a `ConversationRequestBody`),
        updating the conversation it belongs to (a new one when it names none)."""
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ScenarioError("the request carries no messages")
        if not all(isinstance(m, dict) for m in messages):
            raise ScenarioError("every message must be a JSON object")
        if len(messages) > MAX_MESSAGES:  # each is stored and echoed: the loop's time is bounded
            raise ScenarioError(f"the mock takes at most {MAX_MESSAGES:,} messages a request")
        cid = request.get("conversation_id")
        first_turn = cid is None
        if cid is None:  # conversation_id is omitted on the first turn
            conversation = Conversation(new_id())
            conversations[conversation.id] = conversation
        elif isinstance(cid, str) and cid in conversations:
            conversation = conversations[cid]
        else:
            raise UnknownConversation(f"conversation {cid!r} not found")
        stamp = now()
        parent = request.get("parent_message_id")
        if not isinstance(parent, str) or parent not in conversation.mapping:
            parent = conversation.current_node
        if first_turn:
            system = new_message(new_id(), "system", stamp, text="", weight=0.0)
            system["metadata"] = {"is_visually_hidden_from_conversation": True}
            conversation.add(system, parent)
            parent = system["id"]
        inputs: list[dict[str, JSON]] = []
        for raw in messages:
            stored = _store_input(raw, conversation, new_id, stamp)
            conversation.add(stored, parent)
            parent = stored["id"]
            inputs.append(stored)
        tool_input = next((m for m in inputs if _role(m) == "tool"), None)
        script = self.on_user
        if tool_input is not None:  # any return is accepted and continued, as the server does
            script = self.on_tool_return or _DEFAULT_RETURN_TURN
        declared = request.get("local_function_signatures")
        if isinstance(declared, list):
            named = [s for s in declared if isinstance(s, dict) and isinstance(s.get("name"), str)]
            conversation.declared = [s for s in named if s["name"] != "handoff"]
            conversation.declared_names = {s["name"] for s in named}
        script = _resolve_declared(script, conversation, seed)
        writer = TurnWriter(
            conversation,
            stamp,
            new_id,
            model=self.model,
            title=self.title,
            piece_size=self.piece_size,
        )
        return writer.write(script, inputs, conduit_token, first_turn, tool_input)


def _resolve_declared(script: TurnScript, conversation: Conversation, seed: int) -> TurnScript:
    """`call_declared` steps become the call of the next declared tool not called yet (its
    arguments made from its parameters), or the words said when none is left; a `call` of a
    tool the client did not declare says so instead (never invented: the server calls only the
    local tools the client declares)."""
    steps: list[Step] = []
    for step in script.steps:
        if isinstance(step, Call) and step.call not in conversation.declared_names:
            steps.append(Say(say=undeclared_text(step.call)))
            continue
        if not isinstance(step, CallDeclared):
            steps.append(step)
            continue
        left = [s for s in conversation.declared if s["name"] not in conversation.called]
        if not left:
            steps.append(Say(say=step.otherwise))
            continue
        name = str(left[0]["name"])
        conversation.called.append(name)
        arguments = arguments_for(signature_schema(left[0]), seed, name)
        steps.append(Call(call=name, arguments=arguments))
    return script.model_copy(update={"steps": steps})


def undeclared_text(tool: str) -> str:
    return (f"This scenario calls the local tool {tool}, which this client did not declare in "
            "local_function_signatures: no call is made.")  # fmt: skip


def _role(message: Mapping[str, JSON]) -> JSON:
    author = message.get("author")
    return author.get("role") if isinstance(author, dict) else None


def _store_input(
    raw: dict[str, JSON], conversation: Conversation, new_id: IdFactory, stamp: float
) -> dict[str, JSON]:
    """The input message as the server keeps it: as sent, with a fresh id if it has none or
    reuses one, and the defaults a client may leave out."""
    stored = copy.deepcopy(raw)
    mid = stored.get("id")
    if not isinstance(mid, str) or mid in conversation.mapping:
        stored["id"] = new_id()
    for key, default in (("create_time", stamp), ("update_time", None), ("metadata", {})):
        stored.setdefault(key, default)
    stored.setdefault("status", "finished_successfully")
    return stored


def scenario_names() -> list[str]:
    """The scenarios that ship with convtap."""
    return sorted(p.name.removesuffix(".json") for p in SCENARIOS.iterdir()
                  if p.name.endswith(".json"))  # fmt: skip


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A scenario by name (one that ships with convtap) or by the path of a scenario file."""
    path: Path | Traversable = Path(name_or_path)
    if isinstance(name_or_path, str) and name_or_path in scenario_names():
        path = SCENARIOS / f"{name_or_path}.json"
    if isinstance(path, Path) and path.exists():
        _refuse_what_is_no_scenario_file(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, IsADirectoryError):
        known = ", ".join(scenario_names())
        raise ScenarioError(f"no scenario {name_or_path!r} (known: {known})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"cannot read {path}: {exc}") from exc
    except ValueError as exc:
        raise ScenarioError(f"{path}: not JSON: {exc}") from exc
    except RecursionError:
        raise ScenarioError(f"{path}: not JSON convtap reads (nested too deep)") from None
    if isinstance(data, dict):
        data.setdefault("name", path.name.removesuffix(".json"))
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(f"{path}: {problems(exc)}") from None


def _refuse_what_is_no_scenario_file(path: Path) -> None:
    """A FIFO would be waited on and a device read forever: a scenario is a regular file, and
    a small one."""
    found = path.stat()
    if stat.S_ISDIR(found.st_mode):
        return  # said as no scenario of that name
    if not stat.S_ISREG(found.st_mode):
        raise ScenarioError(f"cannot read {path}: not a regular file (a FIFO, device or socket)")
    if found.st_size > MAX_SCENARIO_BYTES:
        raise ScenarioError(f"cannot read {path}: larger than a scenario can be "
                            f"({MAX_SCENARIO_BYTES:,} bytes)")  # fmt: skip


MAX_SCENARIO_BYTES = 16 * 1024 * 1024
PROBLEMS_SAID = 3  # a scenario's validation problems said, in one line; the rest counted


def problems(exc: ValidationError) -> str:
    """Pydantic's errors, short: where and what for the first few, in one line."""
    errors = exc.errors(include_url=False, include_input=False)
    said = [f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in errors]
    more = len(said) - PROBLEMS_SAID
    tail = f"; and {more} more" if more > 0 else ""
    return f"not a scenario ({'; '.join(s[:120] for s in said[:PROBLEMS_SAID])}{tail})"
