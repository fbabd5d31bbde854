"""The reads commands share: the call ledger, the flows and their raw events in order, the
auditor's happenings read back from a capture (`audit_timeline`), what shape inference reads,
and the findings table made anew. `store.database` gives these names too."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any

import sqlite_utils

from convtap.contract.happenings import (
    CallMade,
    ClientCallsMade,
    ConversationRequest,
    Happening,
    MadeCall,
    MessagesShown,
    Prepared,
    ReplayMissed,
    RequestRefused,
    ResponsesRequest,
    SocketTurn,
    is_refusal,
    replay_miss,
)
from convtap.contract.registry import Where
from convtap.store.rows import EventRow, FlowRow
from convtap.store.views import LedgerRow
from convtap.vocab import REPLAY_MISS_CODE, CallKind, Endpoint, Source, WireProtocol, sql
from convtap.wire.calls import ToolCall
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.session import read_turn_request


def call_ledger(db: sqlite_utils.Database) -> list[LedgerRow]:
    """One row per call, in the order they were made, with its return and what became of it."""
    return [
        LedgerRow.read(r) for r in db.query("SELECT * FROM call_ledger ORDER BY called_at, call_id")
    ]


def flow_ids(db: sqlite_utils.Database) -> set[str]:
    """The ids of the flows a database holds (an import skips them). Read through the
    connection the process writes with: opening the file again and closing it would drop
    that connection's POSIX locks, and another process could then delete the WAL under it."""
    return {row[0] for row in db.execute("SELECT id FROM flows")}


# `flows.source` of a Responses API turn made over a WebSocket (one `response.create` and the
# response that answers it): derived from the socket flow's frames, never replayed or exported
# by itself.
SOCKET_TURN = Source.SOCKET


def iter_flows(db: sqlite_utils.Database) -> Iterator[FlowRow]:
    """The flows that came over the wire, in time order (not the turns derived from a socket)."""
    query = "SELECT * FROM flows WHERE source IS NOT ? ORDER BY started_at, rowid"
    for row in db.query(query, [SOCKET_TURN]):
        yield FlowRow.read(row)


def iter_events(db: sqlite_utils.Database, flow_id: str) -> Iterator[EventRow]:
    """A flow's raw events in order (`store.compact` reads their text and bytes)."""
    for row in db.query("SELECT * FROM events WHERE flow_id = ? ORDER BY seq", [flow_id]):
        yield EventRow.read(row)


def audit_timeline(db: sqlite_utils.Database) -> Iterator[Happening]:
    """What `convtap audit` feeds the auditor: the happenings the recorder fed it live, read back
    from the capture, streamed in time order. At the same instant (an imported `.sse` body's
    request, calls and messages share one), flows come in the order they were stored, and within
    a flow its prepare or request comes first, then its calls, then the message ids its stream
    showed (the order of `_TIMELINE`)."""

    def stream(order: int, sql: str) -> Iterator[tuple[float, int, int, dict[str, Any]]]:
        for row in db.query(f"{sql} ORDER BY at, rank"):
            yield row["at"] or 0.0, row["rank"], order, row

    sources = [stream(order, sql) for order, (sql, _) in enumerate(_TIMELINE)]
    for at, _, order, row in heapq.merge(*sources, key=lambda r: r[:3]):
        yield from _TIMELINE[order][1](db, at, row)


def _prepared(db: sqlite_utils.Database, at: float, row: dict[str, Any]) -> Iterator[Happening]:
    body = loads_or_none(_request_body(db, row["rank"]))
    conversation = body.get("conversation_id") if isinstance(body, dict) else None
    yield Prepared(conversation if isinstance(conversation, str) else None, at)


def _requested(db: sqlite_utils.Database, at: float, row: dict[str, Any]) -> Iterator[Happening]:
    body = loads_or_none(_request_body(db, row["rank"]))
    if row["kind"] != Endpoint.CONVERSATION:
        if row["source"] == SOCKET_TURN:  # a socket's turn: its flow names the socket
            yield SocketTurn(row["id"], row["turn_id"], body, at, row["ended_at"])
        yield ResponsesRequest(row["id"], body, at)
        if row["conversation_id"] is not None:  # the response that answered it, known before
            yield ClientCallsMade(row["id"], row["conversation_id"], (), at)  # its calls come
        return
    yield ConversationRequest(row["id"], body, read_turn_request(body), at)
    if is_refusal(row["status"]):
        yield RequestRefused(row["id"])


def _called(db: sqlite_utils.Database, at: float, row: dict[str, Any]) -> Iterator[Happening]:
    if row["protocol"] == WireProtocol.RESPONSES:
        call = ToolCall(WireProtocol.RESPONSES, row["call_id"], row["item_id"], row["namespace"],
                        row["recipient"], CallKind.CLIENT, row["tool"] or "", None, "", True,
                        "client")  # fmt: skip
        yield ClientCallsMade(row["turn_id"], row["conversation_id"], (call,), at)
    else:
        yield CallMade(call_from_row(row))


def _shown(db: sqlite_utils.Database, at: float, row: dict[str, Any]) -> Iterator[Happening]:
    yield MessagesShown(row["conversation_id"], (row["id"],))


def _missed(db: sqlite_utils.Database, at: float, row: dict[str, Any]) -> Iterator[Happening]:
    if (miss := replay_miss(row["status"], loads_or_none(row["response_body"]))) is not None:
        yield ReplayMissed(row["id"], miss)


def _request_body(db: sqlite_utils.Database, rowid: int) -> Any:
    """A flow's request body, read once its turn comes (sorted with them, they filled memory)."""
    return db.execute("SELECT request_body FROM flows WHERE rowid = ?", (rowid,)).fetchone()[0]


# The vocabulary's words as SQL literals.
_PREPARE, _RESPONSES = sql(Endpoint.PREPARE), sql(Endpoint.RESPONSES)
_REQUESTS = sql(Endpoint.CONVERSATION, Endpoint.RESPONSES)
# A replay miss's body: LIKE's `_` matches any one character, so the Responses error's code
# (`replay_miss`) and an f/conversation `detail` (`replay miss: ...`) both; `replay_miss` decides.
_MISSED = f"'%{REPLAY_MISS_CODE}%'"

# The timeline's sources, in the order happenings of one instant and one flow come: each query
# (its time `at` and the `rank` of the flow it belongs to) and what its rows stand for.
_TIMELINE: list[
    tuple[str, Callable[[sqlite_utils.Database, float, dict[str, Any]], Iterator[Happening]]]
] = [
    (f"SELECT started_at AS at, rowid AS rank FROM flows WHERE kind = {_PREPARE}", _prepared),
    ("SELECT started_at AS at, rowid AS rank, id, kind, status, conversation_id, turn_id, "
     f"source, ended_at FROM flows WHERE kind IN ({_REQUESTS})", _requested),
    ("SELECT c.called_at AS at, coalesce(f.rowid, 0) AS rank, c.* FROM tool_calls c "
     "LEFT JOIN flows f ON f.id = c.turn_id", _called),
    ("SELECT m.first_seen_at AS at, coalesce(f.rowid, 0) AS rank, m.id, m.conversation_id "
     "FROM messages m LEFT JOIN flows f ON f.id = m.turn_id", _shown),
    ("SELECT coalesce(ended_at, started_at) AS at, rowid AS rank, id, status, response_body "
     f"FROM flows WHERE status = 400 AND response_body LIKE {_MISSED}", _missed),
]  # fmt: skip


def call_from_row(row: dict[str, Any]) -> MadeCall:
    """An f/conversation call as the auditor was fed it, from its `tool_calls` row."""
    arguments = loads_or_none(row["arguments"])
    call = ToolCall(
        protocol=WireProtocol.CONVERSATION, call_id=row["call_id"], item_id=None, namespace=None,
        recipient=row["recipient"] or "", kind=row["kind"] or CallKind.BUILTIN,
        tool=row["tool"] or "", arguments=arguments if isinstance(arguments, dict) else None,
        arguments_text=row["arguments_text"] or "", complete=bool(row["complete"]),
    )  # fmt: skip
    where = Where(row["conversation_id"], row["call_id"], None, row["turn_id"])
    return MadeCall(call, where, row["called_at"] or 0.0)


def iter_shape_rows(db: sqlite_utils.Database) -> Iterator[tuple[str, dict[str, Any]]]:
    """What shape inference reads, streamed: request bodies, Responses answers sent as JSON,
    final messages, raw events (in order within each flow, with the flow's kind); messages in
    order of their turn."""
    for row in db.query("SELECT kind, request_body, started_at FROM flows "
                        "WHERE request_body IS NOT NULL"):  # fmt: skip
        yield "request", row
    for row in db.query("SELECT kind, response_body FROM flows "
                        f"WHERE response_body IS NOT NULL AND kind = {_RESPONSES}"):  # fmt: skip
        yield "response", row  # a Responses answer not streamed: its JSON body
    # every column: what `message_value` and `event_text` read differs by schema
    for row in db.query("SELECT * FROM messages ORDER BY turn_id"):
        yield "message", row
    for row in db.query("SELECT e.*, f.kind AS flow_kind "
                        "FROM events e LEFT JOIN flows f ON f.id = e.flow_id "
                        "ORDER BY e.flow_id, e.seq"):  # fmt: skip
        yield "event", row


def count_calls(db: sqlite_utils.Database) -> int:
    return int(db.execute("SELECT count(*) FROM tool_calls").fetchone()[0])


def turn_conversations(db: sqlite_utils.Database, turn_ids: set[str]) -> dict[str, str]:
    """The conversation the server assigned to each of these turns (those it named one)."""
    found: dict[str, str] = {}
    for turn_id in turn_ids:
        row = db.execute("SELECT conversation_id FROM turns WHERE id = ?", [turn_id]).fetchone()
        if row is not None and row[0] is not None:
            found[turn_id] = row[0]
    return found
