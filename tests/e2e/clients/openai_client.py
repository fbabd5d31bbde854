"""The plain `openai` client on the Responses API, answering every call it is asked to make:
streamed or not, stateless (the whole input again) or with previous_response_id, over HTTP or
over WebSocket mode (`client.responses.connect()`, --websocket); with --rich, answering with a list
of input content (text and an image) instead of a string; with --faulty, answering function calls
with their item id (fc_...) instead of their call_id.

    python openai_client.py BASE_URL [--stream] [--previous] [--websocket] [--rich] [--faulty]
        [--changed-tool]

BASE_URL `-` is the one in OPENAI_BASE_URL (what `convtap run --upstream` sets); with
--changed-tool, get_weather's parameters have one property more (a replayed capture misses).

Prints one JSON line per call it ran ({"tool", "arguments"}) and {"final": text}.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from openai import OpenAI

# A 1x1 PNG: what a tool that returns an image sends in a `function_call_output` list.
PIXEL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="  # noqa: E501
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "get_weather", "strict": True,
     "description": "Weather for a city.",
     "parameters": {"type": "object", "additionalProperties": False,
                    "required": ["city", "unit"],
                    "properties": {"city": {"type": "string"},
                                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}},
    {"type": "function", "name": "schedule", "strict": False,
     "description": "Put something in the calendar.",
     "parameters": {"type": "object", "required": ["title", "slots"],
                    "properties": {"title": {"type": "string"},
                                   "slots": {"type": "array", "minItems": 1, "items": {
                                       "type": "object", "required": ["day", "hour"],
                                       "properties": {"day": {"type": "string", "format": "date"},
                                                      "hour": {"type": "integer", "minimum": 8,
                                                               "maximum": 18}}}}}}},
]  # fmt: skip


def over_socket(connection: Any, **create: Any) -> Any:
    """One response over the socket: a `response.create`, then its events up to the end."""
    connection.send({"type": "response.create", **create})
    for event in connection:
        if event.type == "error":
            raise SystemExit(f"the server refused the create: {event.error}")
        if event.type in ("response.completed", "response.failed", "response.incomplete"):
            return event.response
    raise SystemExit("the socket closed before the response ended")


def main(base_url: str, stream: bool, previous: bool, websocket: bool, rich: bool,
         faulty: bool) -> None:  # fmt: skip
    client = OpenAI(base_url=base_url, api_key="sk-proj-" + "o" * 40)
    print(json.dumps({"schemas": {t["name"]: t["parameters"] for t in TOOLS}}), flush=True)
    if websocket:
        with client.responses.connect() as connection:
            run(client, connection, stream, previous, rich, faulty)
    else:
        run(client, None, stream, previous, rich, faulty)


def run(client: OpenAI, connection: Any, stream: bool, previous: bool, rich: bool,
        faulty: bool) -> None:  # fmt: skip
    items: list[Any] = [{"role": "user", "content": "Weather in Lisboa, and book a meeting."}]
    previous_id = None
    for _ in range(4):
        if connection is not None:
            create = {"model": "gpt-5.1", "input": items, "tools": TOOLS}
            response = over_socket(connection, **create, **(
                {"previous_response_id": previous_id} if previous_id else {}))  # fmt: skip
        elif stream:
            with client.responses.stream(model="gpt-5.1", input=items, tools=TOOLS,
                                         previous_response_id=previous_id) as events:  # fmt: skip
                for _event in events:
                    pass
                response = events.get_final_response()
        else:
            response = client.responses.create(model="gpt-5.1", input=items, tools=TOOLS,
                                               previous_response_id=previous_id)  # fmt: skip
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            print(json.dumps({"final": response.output_text}), flush=True)
            return
        outputs = []
        for call in calls:
            arguments = json.loads(call.arguments)
            print(json.dumps({"tool": call.name, "arguments": arguments}), flush=True)
            answer = call.id if faulty else call.call_id  # the classic bug: the item's id
            text = json.dumps({"ok": True, "tool": call.name})
            output: Any = text
            if rich:  # the SDK's ResponseFunctionCallOutputItemListParam
                output = [{"type": "input_text", "text": text},
                          {"type": "input_image", "image_url": PIXEL, "detail": "low"}]  # fmt: skip
            outputs.append({"type": "function_call_output", "call_id": answer, "output": output})
        if previous:
            previous_id, items = response.id, outputs
        else:
            items = [*items, *[c.model_dump(exclude_none=True) for c in calls], *outputs]
    raise SystemExit("the model never answered")


if __name__ == "__main__":
    flags = sys.argv[2:]
    if "--changed-tool" in flags:
        TOOLS[0]["parameters"]["properties"]["country"] = {"type": "string"}
        TOOLS[0]["parameters"]["required"].append("country")
    base = os.environ["OPENAI_BASE_URL"] if sys.argv[1] == "-" else sys.argv[1]
    main(base, "--stream" in flags, "--previous" in flags, "--websocket" in flags,
         "--rich" in flags, "--faulty" in flags)  # fmt: skip
