"""Where a finding happened, in words that stay the same when the same client makes the same
mistake again: the session (a conversation or Responses chain, numbered in the order the
capture's sessions began), the place of the request or the call in it, and the tool called.
Ids never appear: the mock, like the real server, mints new ones every run.

SARIF fingerprints and JUnit case names are made of these (`convtap.contract.formats`), so
that code scanning keeps one alert per mistake across CI runs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import sqlite_utils

from convtap.contract.formats import Place
from convtap.store.trace_queries import every_call, model_turns
from convtap.telemetry.spans import PROTOCOLS, Traces
from convtap.wire.responses import qualified_name


@dataclass
class Places:
    """The place of every request (`flows`) and call (`calls`) of a capture."""

    flows: dict[str, Place]
    calls: dict[str, Place]


def places(capture: sqlite_utils.Database) -> Places:
    traces = Traces(capture)
    sessions: dict[str, int] = {}  # trace key -> its number, from 1
    requests: Counter[str] = Counter()
    flows: dict[str, Place] = {}
    for row in model_turns(capture):
        key = traces.of_turn(row)
        session = sessions.setdefault(key, len(sessions) + 1)
        requests[key] += 1
        flows[row.id] = Place(session, f"request {requests[key]}", None)
    calls: dict[str, Place] = {}
    made: Counter[str] = Counter()
    for call in every_call(capture):
        protocol = PROTOCOLS.get(call.protocol, call.protocol)
        key = traces.of_flow(protocol, call.turn_id)
        session = sessions.setdefault(key, len(sessions) + 1)
        made[key] += 1
        tool = call.recipient if protocol == "f/conversation" else None
        tool = tool or qualified_name(call.namespace, call.tool) or call.tool
        calls[call.call_id] = Place(session, f"call {made[key]}", tool)
    return Places(flows, calls)
