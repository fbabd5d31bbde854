"""What the store's reads return beside the tables' own row types (`store.rows`): one frozen
type per view or query a command reads, made from the query's row by `read`, given to a JSON
output by `as_json` (the keys in the order the query names its columns)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from convtap.vocab import CallKind, WireProtocol


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One call of the `call_ledger` view: the call, its first return, what became of it."""

    call_id: str
    protocol: WireProtocol
    tool: str | None
    namespace: str | None  # Responses API: the namespace tool of the called function
    kind: CallKind | None
    recipient: str | None
    conversation_id: str | None
    turn_id: str | None
    called_at: float | None
    complete: bool
    return_id: str | None
    returned_at: float | None
    answered: bool
    accepted: bool
    continued: bool
    findings: int  # findings on the call

    @classmethod
    def read(cls, row: Mapping[str, Any]) -> LedgerRow:
        values: dict[str, Any] = {name: row.get(name) for name in _LEDGER}
        for flag in ("complete", "answered", "accepted", "continued"):
            values[flag] = bool(values[flag])
        return cls(**values)

    @property
    def server_run(self) -> bool:
        """A tool the server runs in the stream (f/conversation, not `local`): it owes no
        return."""
        return self.protocol != WireProtocol.RESPONSES and self.kind not in (None, CallKind.LOCAL)

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _LEDGER}


_LEDGER = tuple(f.name for f in dataclasses.fields(LedgerRow))


class View:
    """A query's row as a frozen value: `read` takes the columns named like its fields (None
    for one the row lacks), `as_json` gives them back in that order."""

    __slots__ = ()

    @classmethod
    def read(cls, row: Mapping[str, Any]) -> Self:
        return cls(*(row.get(name) for name in _names(cls)))

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _names(type(self))}


_NAMES: dict[type, tuple[str, ...]] = {}


def _names(view: type) -> tuple[str, ...]:
    names = _NAMES.get(view)
    if names is None:
        names = _NAMES[view] = tuple(f.name for f in dataclasses.fields(view))
    return names


@dataclass(frozen=True, slots=True)
class DecodeErrorView(View):
    """A decode error of a turn, as the report lists it."""

    turn_id: str
    conversation_id: str | None
    event_index: int | None
    kind: str | None
    detail: str | None


@dataclass(frozen=True, slots=True)
class RequestTime(View):
    """When a model turn started, sent its first event and ended; its usage (a Responses
    answer's `usage` as stored, else the text of the last event that carries one)."""

    id: str
    protocol: str  # the report's words: `f/conversation`, `responses`
    started_at: float | None
    ended_at: float | None
    first_at: float | None
    usage: str | None
    usage_event: str | None


@dataclass(frozen=True, slots=True)
class StoredFinding(View):
    """A finding as the traces put it on a span."""

    rule: str
    severity: str
    message: str | None
    call_id: str | None
    flow_id: str | None
    created_at: float | None


@dataclass(frozen=True, slots=True)
class CallPlace(View):
    """A call in the order made: what names it and the turn that made it."""

    call_id: str
    protocol: WireProtocol
    tool: str | None
    namespace: str | None
    recipient: str | None
    turn_id: str


@dataclass(frozen=True, slots=True)
class MessageText(View):
    """A message of an f/conversation turn: who said it, to whom, its text."""

    role: str | None
    recipient: str | None
    text: str | None


@dataclass(frozen=True, slots=True)
class AnswerCost(View):
    """An answer's usage and cost (`usage` table), in the order answered."""

    flow_id: str
    answered_at: float | None
    model: str | None
    input_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    pricing: str | None


@dataclass(frozen=True, slots=True)
class CaptureCost(View):
    """The whole capture's usage: answers, how many were priced, the token sums and the cost
    of the priced ones."""

    answers: int
    priced: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cost_usd: float


@dataclass(frozen=True, slots=True)
class ModelTurn(View):
    """A model turn that ended: an f/conversation turn or a Responses API request, with its
    answer's usage (None where it reported none); a `chat` span of the traces."""

    id: str  # its flow's
    protocol: str  # the traces' words: `f/conversation`, `responses`
    transport: str  # http, http+websocket, websocket
    conversation_id: str | None
    request_model: str | None
    started_at: float
    ended_at: float
    first_at: float | None  # its first event
    status: int | None
    outcome: str | None
    host: str | None
    url: str | None
    client: str | None
    previous_response_id: Any  # as the request's JSON has it
    stream: Any
    response_id: str | None
    response_model: str | None
    finish_reason: str | None
    input_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    pricing: str | None


@dataclass(frozen=True, slots=True)
class AnsweredCall(View):
    """A call with its first answer (an `execute_tool` span of the traces): when the request
    that carried the answer started, and the answer as stored (`result`)."""

    call_id: str
    protocol: WireProtocol
    tool: str | None
    namespace: str | None
    kind: CallKind | None
    recipient: str | None
    turn_id: str  # the turn that made it
    called_at: float
    arguments: str | None
    return_flow_id: str
    returned_at: float
    result: str | None
