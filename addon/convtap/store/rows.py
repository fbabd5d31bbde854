"""What the recorder writes: one frozen row type per table, checked against the schema when this
module loads (a misspelt or missing column fails at import, not as a row that vanishes).

A row is an `upsert` (its primary key's row is created or updated) or an `insert` (ignored
when its key is already there). A column left `UNSET` is not written: an update keeps what is
there (a flow's request, then its response, then our own failure on it, are three writes of
one row). `None` writes NULL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, Self

from convtap.store.schema import TABLES
from convtap.vocab import CallKind, Endpoint, Outcome, RawKind, Severity, Source, WireProtocol

if TYPE_CHECKING:
    from convtap.contract.happenings import MadeCall
    from convtap.contract.registry import Finding, Where
    from convtap.wire.session import ToolReturn

# The vocabulary's words are stored as their text.
_STORED_AS = {w.__name__: "str" for w in (CallKind, Endpoint, Outcome, WireProtocol, RawKind,
                                          Severity, Source)}  # fmt: skip


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True, slots=True)
class Row:
    TABLE: ClassVar[str]
    KIND: ClassVar[str] = "upsert"
    FLOW: ClassVar[str | None] = None  # the column that names the flow the row derives from

    def columns(self) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        """The columns this row writes, and their values."""
        names, read = _readers.get(type(self)) or _reader(type(self))
        values = read(self)
        if not any(value is UNSET for value in values):
            return names, values
        kept = [n for n, value in enumerate(values) if value is not UNSET]
        return tuple(names[n] for n in kept), tuple(values[n] for n in kept)

    @classmethod
    def read(cls, row: Mapping[str, Any]) -> Self:
        """A row as a read gives it (`SELECT *`): every column of the type, None for a column
        the row lacks."""
        names, _ = _readers.get(cls) or _reader(cls)
        return cls(*(row.get(name) for name in names))

    def flow(self) -> str | None:
        """The flow the row derives from (where a failure to write it is told)."""
        value = getattr(self, self.FLOW) if self.FLOW else None
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class FlowRow(Row):
    TABLE = "flows"
    id: str
    kind: Endpoint | None = UNSET
    method: str | None = UNSET
    url: str | None = UNSET
    host: str | None = UNSET
    path: str | None = UNSET
    status: int | None = UNSET
    client: str | None = UNSET
    request_headers: str | None = UNSET
    request_body: str | None = UNSET
    response_headers: str | None = UNSET
    response_body: str | None = UNSET
    conversation_id: str | None = UNSET
    turn_id: str | None = UNSET
    started_at: float | None = UNSET
    ended_at: float | None = UNSET
    outcome: Outcome | str | None = UNSET
    source: Source | None = UNSET
    failure: str | None = UNSET

    FLOW = "id"


@dataclass(frozen=True, slots=True)
class EventRow(Row):
    """One row of raw events: an SSE chunk's completed events, or one WebSocket frame."""

    TABLE = "events"
    KIND = "insert"
    FLOW = "flow_id"
    flow_id: str
    seq: int
    at: float
    event: RawKind
    count: int
    data: str | None  # its text; bytes that are not UTF-8 as lone surrogates (`surrogateescape`)
    raw: bytes | None = UNSET  # set by the store (`compact.event_columns`), with `data`


@dataclass(frozen=True, slots=True)
class TurnRow(Row):
    TABLE = "turns"
    id: str
    conversation_id: str | None
    parent_message_id: str | None
    model: str | None
    client: str | None
    challenge: str | None
    execution_target: str | None
    message_ids: str | None
    encoding: str | None
    done: int
    stream_complete: int
    truncated: int
    event_count: int
    legs: int
    ws_topic: str | None
    errors: str | None
    started_at: float
    ended_at: float

    FLOW = "id"


@dataclass(frozen=True, slots=True)
class ToolSignatureRow(Row):
    TABLE = "tool_signatures"
    turn_id: str
    name: str
    signature: str | None

    FLOW = "turn_id"


@dataclass(frozen=True, slots=True)
class MessageRow(Row):
    TABLE = "messages"
    id: str
    conversation_id: str | None
    turn_id: str
    role: str | None
    name: str | None
    recipient: str | None
    channel: str | None
    content_type: str | None
    status: str | None
    text: str | None
    json: str | None
    first_seen_at: float
    updated_at: float
    json_without_text: int = 0  # 1: `json` is `compact.message_without_text`, `text` put back

    FLOW = "turn_id"


@dataclass(frozen=True, slots=True)
class ToolCallRow(Row):
    TABLE = "tool_calls"
    call_id: str
    protocol: WireProtocol
    turn_id: str
    conversation_id: str | None
    recipient: str | None
    kind: CallKind | None
    tool: str | None
    arguments: str | None
    arguments_text: str | None
    complete: int
    called_at: float
    item_id: str | None = UNSET  # Responses API: the call item's own id (fc_...)
    namespace: str | None = UNSET  # Responses API: the namespace tool of the called function

    FLOW = "turn_id"

    @classmethod
    def of(cls, made: MadeCall, arguments: str | None, arguments_text: str) -> ToolCallRow:
        """The one way to a call's row: the call, where and when it was made, its arguments as
        stored (the caller's redaction of `call.arguments`, and of its text). A Responses call
        is keyed by its call_id, else its item id, and named by its type when it has no name."""
        call, where = made.call, made.where
        responses = call.protocol == WireProtocol.RESPONSES
        return cls(
            call_id=(call.key if responses else call.call_id) or "",
            protocol=call.protocol,
            turn_id=where.flow_id or "",
            conversation_id=where.conversation_id,
            recipient=call.recipient,
            kind=call.kind,
            tool=(call.tool or call.recipient) if responses else call.tool,
            arguments=arguments,
            arguments_text=arguments_text,
            complete=int(call.complete),
            called_at=made.at,
            item_id=call.item_id if responses else UNSET,
            namespace=call.namespace if responses else UNSET,
        )


@dataclass(frozen=True, slots=True)
class ToolReturnRow(Row):
    TABLE = "tool_returns"
    FLOW = "flow_id"
    id: str
    protocol: WireProtocol
    flow_id: str
    conversation_id: str | None
    message_id: str | None
    tool: str | None
    body_call_id: str | None
    message: str | None
    returned_at: float
    parent_message_id: str | None = UNSET
    body_tool: str | None = UNSET
    call_id: str | None = UNSET  # set by the store when it pairs the return with its call

    @classmethod
    def of(
        cls, ret: ToolReturn, protocol: WireProtocol, where: Where, n: int, message: str | None,
        at: float, parent_message_id: str | None = UNSET,
    ) -> ToolReturnRow:  # fmt: skip
        """The one way to a return's row: the return, the `n`th its request carries (`where`:
        that request, and the conversation it continues), its message as stored (the caller's
        redaction of `ret.message`), when it was sent. Only an f/conversation return has a body
        naming a tool, and a parent message."""
        conversation = protocol == WireProtocol.CONVERSATION
        return cls(
            id=f"{where.flow_id}:{n}", protocol=protocol, flow_id=where.flow_id or "",
            conversation_id=where.conversation_id, message_id=ret.message_id, tool=ret.tool,
            body_call_id=ret.call_id, message=message, returned_at=at,
            parent_message_id=parent_message_id,
            body_tool=ret.body_tool if conversation else UNSET,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ConversationNodeRow(Row):
    TABLE = "conversation_nodes"
    FLOW = "flow_id"
    conversation_id: str | None
    node_id: str
    message_id: str | None
    role: str | None
    flow_id: str
    seen_at: float


@dataclass(frozen=True, slots=True)
class FindingRow(Row):
    TABLE = "findings"
    KIND = "insert"
    FLOW = "flow_id"
    rule: str
    severity: Severity
    message: str
    conversation_id: str | None
    call_id: str | None
    return_id: str | None
    flow_id: str | None
    evidence: str | None
    created_at: float
    id: int | None = UNSET  # given by SQLite

    @classmethod
    def of(cls, finding: Finding, evidence: str | None, at: float) -> FindingRow:
        """The row of a finding (`evidence`: its evidence as the row keeps it, as JSON)."""
        where = finding.where
        return cls(
            rule=finding.rule, severity=finding.severity, message=finding.message,
            conversation_id=where.conversation_id, call_id=where.call_id,
            return_id=where.return_id, flow_id=where.flow_id, evidence=evidence, created_at=at,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class UsageRow(Row):
    TABLE = "usage"
    FLOW = "flow_id"
    flow_id: str
    response_id: str | None
    model: str | None
    service_tier: str | None
    finish_reason: str | None
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cost_usd: float | None  # None: unknown (`pricing` says why)
    pricing: str
    answered_at: float


ROW_TYPES: tuple[type[Row], ...] = (
    FlowRow,
    EventRow,
    TurnRow,
    ToolSignatureRow,
    MessageRow,
    ToolCallRow,
    ToolReturnRow,
    ConversationNodeRow,
    FindingRow,
    UsageRow,
)


def check_against_schema(row_type: type[Row]) -> None:
    """A row type has exactly its table's columns, each of the column's type (or None)."""
    columns, _ = TABLES[row_type.TABLE]
    fields = {f.name: str(f.type) for f in dataclasses.fields(row_type)}
    if set(fields) != set(columns):
        missing, extra = set(columns) - set(fields), set(fields) - set(columns)
        raise TypeError(f"{row_type.__name__} does not match table {row_type.TABLE}: "
                        f"missing {sorted(missing)}, unknown {sorted(extra)}")  # fmt: skip
    for name, kind in columns.items():
        first = fields[name].split(" | ")[0]
        if _STORED_AS.get(first, first) != kind.__name__:
            raise TypeError(f"{row_type.__name__}.{name} is {fields[name]}, "
                            f"the column is {kind.__name__}")  # fmt: skip


# A row type's columns, and what reads its values (in C), made once per row type.
_readers: dict[type[Row], tuple[tuple[str, ...], Callable[[Row], tuple[Any, ...]]]] = {}


def _reader(row_type: type[Row]) -> tuple[tuple[str, ...], Callable[[Row], tuple[Any, ...]]]:
    names = tuple(f.name for f in dataclasses.fields(row_type))
    get = attrgetter(*names)
    read = get if len(names) > 1 else lambda row: (get(row),)
    _readers[row_type] = names, read
    return names, read


for _row_type in ROW_TYPES:
    check_against_schema(_row_type)
if {t.TABLE for t in ROW_TYPES} != set(TABLES):
    raise TypeError("a table has no row type")  # every table is written through one
