"""An OpenAI Agents SDK agent with function tools of its own, pointed at a base URL: what a
client team runs against `convtap record` + `convtap mock --scenario declared`.

    python agents_client.py BASE_URL {run|streamed} [--previous-response-id] [--conversation]
        [--websocket]

BASE_URL `-` is the one in OPENAI_BASE_URL (what `convtap run --upstream` sets).

With --conversation the run keeps its history in a server-side conversation (`conversation_id`:
each request carries `conversation` and only its new items).

With --websocket the agent runs over the Responses API's WebSocket mode
(`responses_websocket_session`, one socket for the whole run).

Prints one JSON line per tool invocation ({"tool", "arguments"}), then {"final": text}, and the
JSON Schema of every tool ({"schemas": {...}}) so that the test can check the arguments.
Runs in the clients' own virtualenv (openai 3, openai-agents 0.24): no network but BASE_URL.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from typing import Literal

from agents import (
    Agent,
    Runner,
    function_tool,
    responses_websocket_session,
    set_default_openai_api,
    set_default_openai_client,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

SAYING = threading.Lock()


def said(tool: str, **arguments: object) -> None:
    """One line per call, whole: the SDK runs tools in threads, side by side."""
    with SAYING:
        sys.stdout.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")
        sys.stdout.flush()


@function_tool
def lookup_order(order_id: str, include_items: bool) -> str:
    """Look an order up.

    Args:
        order_id: The order's id.
        include_items: Whether to list its items.
    """
    said("lookup_order", order_id=order_id, include_items=include_items)
    return json.dumps({"order_id": order_id, "status": "shipped"})


@function_tool
def convert_price(amount: float, currency: Literal["EUR", "USD", "BRL"], rounded: int) -> str:
    """Convert a price.

    Args:
        amount: How much.
        currency: Into which currency.
        rounded: Decimal places.
    """
    said("convert_price", amount=amount, currency=currency, rounded=rounded)
    return f"{amount * 1.1:.{max(0, min(rounded, 4))}f} {currency}"


async def main(
    base_url: str, mode: str, previous: bool, websocket: bool, conversation: str | None
) -> None:
    set_tracing_disabled(True)  # no traces sent anywhere
    key = "sk-proj-" + "k" * 40
    set_default_openai_client(AsyncOpenAI(base_url=base_url, api_key=key))
    set_default_openai_api("responses")
    agent = Agent(name="shop", instructions="Use the tools.", model="gpt-5.1",
                  tools=[lookup_order, convert_price])  # fmt: skip
    print(json.dumps({"schemas": {t.name: t.params_json_schema for t in agent.tools}}), flush=True)
    prompt = "Look up order A-17 and convert 20 to EUR."
    if websocket:
        async with responses_websocket_session(api_key=key, base_url=base_url) as session:
            if mode == "streamed":
                streamed = session.run_streamed(agent, prompt)
                async for _ in streamed.stream_events():
                    pass
                final = streamed.final_output
            else:
                final = (await session.run(agent, prompt)).final_output
    elif mode == "streamed":
        result = Runner.run_streamed(agent, prompt, auto_previous_response_id=previous,
                                     conversation_id=conversation)  # fmt: skip
        async for _ in result.stream_events():
            pass
        final = result.final_output
    else:
        final = (await Runner.run(agent, prompt, auto_previous_response_id=previous,
                                  conversation_id=conversation)).final_output  # fmt: skip
    print(json.dumps({"final": str(final)}), flush=True)


if __name__ == "__main__":
    base = os.environ["OPENAI_BASE_URL"] if sys.argv[1] == "-" else sys.argv[1]
    asyncio.run(main(base, sys.argv[2], "--previous-response-id" in sys.argv,
                     "--websocket" in sys.argv,
                     "conv_agents" if "--conversation" in sys.argv else None))  # fmt: skip
