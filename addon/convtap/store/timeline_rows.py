"""What the report's timeline reads (`timeline_queries`), one frozen type per kind of row. They
are named tuples, not `views`' dataclasses: the report writer makes one for every row of the
capture, and a tuple is made from the query's row in one step. `read_as` picks each query's
columns by name, once per query, so a column the capture lacks (an older schema) reads None."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from operator import itemgetter
from typing import Any, NamedTuple, TypeVar

from convtap.vocab import CallKind, WireProtocol


class StepTurn(NamedTuple):
    """An f/conversation turn with its flow's request: what a step's head shows."""

    step: str
    conv: str
    model: str | None
    client: str | None
    started_at: float | None
    ended_at: float | None
    done: int | None
    stream_complete: int | None
    truncated: int | None
    event_count: int | None
    legs: int | None
    ws_topic: str | None
    encoding: str | None
    errors: int  # how many decode errors
    kind: str | None
    path: str | None
    status: int | None
    outcome: str | None
    failure: str | None


class StepFlow(NamedTuple):
    """A request that is a step (a Responses request, or one of no turn); a Responses
    request's bodies, and the response it continues (`previous`)."""

    step: str
    previous: str | None
    kind: str | None
    client: str | None
    started_at: float | None
    ended_at: float | None
    path: str | None
    status: int | None
    outcome: str | None
    failure: str | None
    request_body: str | None
    response_body: str | None


class StepMessage(NamedTuple):
    """A message of a step; `call_id` when it is a recorded call."""

    step: str
    conv: str
    row_id: int
    id: str
    role: str | None
    name: str | None
    recipient: str | None
    channel: str | None
    status: str | None
    content_type: str | None
    text: str | None
    at: float | None
    call_id: str | None


class StepCall(NamedTuple):
    """A call of a step that is no message (a Responses call)."""

    step: str
    conv: str
    row_id: int
    call_id: str
    at: float | None


class CallColumns(NamedTuple):
    """The columns of a call the page shows."""

    call_id: str
    protocol: WireProtocol
    tool: str | None
    namespace: str | None  # None in a capture of a schema before it
    kind: CallKind | None
    recipient: str | None
    item_id: str | None
    called_at: float | None
    arguments: str | None
    arguments_text: str | None


class CallStages(NamedTuple):
    """What became of a call (`call_ledger`)."""

    call_id: str
    answered: int | None
    accepted: int | None
    continued: int | None


class StepReturn(NamedTuple):
    """A return of a step that answers no recorded call."""

    step: str
    conv: str
    row_id: int
    id: str
    message_id: str | None
    protocol: WireProtocol | None
    flow_id: str | None
    tool: str | None
    body_call_id: str | None
    returned_at: float | None
    message: str | None


class CallReturn(NamedTuple):
    """A return of a call, with the times of its request's end and of the conversation tree
    showing it."""

    call_id: str
    id: str
    message_id: str | None
    protocol: WireProtocol | None
    flow_id: str | None
    tool: str | None
    body_call_id: str | None
    returned_at: float | None
    message: str | None
    turn_ended_at: float | None
    stream_complete: int | None
    flow_ended_at: float | None
    node_seen_at: float | None


class StepFinding(NamedTuple):
    """A finding of a step's request on no recorded call; `orphan`: the rowid of the return it
    is on, if any."""

    step: str
    conv: str
    row_id: int
    at: float | None
    orphan: int | None
    id: int
    rule: str
    severity: str
    message: str | None
    evidence: str | None
    call_id: str | None
    return_id: str | None
    flow_id: str | None


class CallFinding(NamedTuple):
    """A finding naming a call."""

    id: int
    rule: str
    severity: str
    message: str | None
    evidence: str | None
    call_id: str
    return_id: str | None
    flow_id: str | None


AnyReturn = StepReturn | CallReturn
AnyFinding = StepFinding | CallFinding


class StepRows(NamedTuple):
    """The rows of a batch of steps, by kind."""

    turns: list[StepTurn]
    flows: list[StepFlow]
    messages: list[StepMessage]
    calls: list[StepCall]  # with no message
    orphans: list[StepReturn]  # returns answering no recorded call
    findings: list[StepFinding]  # on no recorded call


class CallRows(NamedTuple):
    """What a batch of calls' items are read from."""

    calls: list[CallColumns]
    ledger: list[CallStages]
    returns: list[CallReturn]  # the first first
    findings: list[CallFinding]


T = TypeVar("T", bound=tuple[Any, ...])


def read_as(view: type[T], cursor: sqlite3.Cursor) -> list[T]:
    """The cursor's rows as `view`s: each field from the column of its name, None when the
    query has none."""
    names = [d[0] for d in cursor.description]
    fields: tuple[str, ...] = view._fields  # type: ignore[attr-defined]
    make: Callable[[Any], T] = view._make  # type: ignore[attr-defined]
    places = [names.index(f) if f in names else len(names) for f in fields]
    if len(places) == len(names) and places == list(range(len(names))):
        return [make(row) for row in cursor]
    get = itemgetter(*places)
    if all(p < len(names) for p in places):
        return [make(get(row)) for row in cursor]
    return [make(get((*row, None))) for row in cursor]
