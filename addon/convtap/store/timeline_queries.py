"""What the report's timeline reads from a capture, by step: the steps in page order, and the
rows of any set of them (their requests, messages, calls with their returns and findings, returns
answering no recorded call, findings on a request), a few queries for a whole batch.

A step is one request of a conversation (an f/conversation turn, a Responses API request), named
by its conversation's key (its id, `''` for none) and its own id (`''` for rows of no request). A
row belongs to the step its own columns name, so that a step can be read again alone when one of
its rows changes (the live page).

The capture has no index on some columns a step is found by (a call's turn, a return's or a
finding's flow): `shadow_indexes` makes them in the connection's temporary database, as pairs
(value, rowid), which `extend_shadow_indexes` brings up to date with rows added since. The
capture itself is only read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import sqlite_utils

from convtap.store.compact import event_text
from convtap.store.timeline_rows import (
    CallColumns,
    CallFinding,
    CallReturn,
    CallRows,
    CallStages,
    StepCall,
    StepFinding,
    StepFlow,
    StepMessage,
    StepReturn,
    StepRows,
    StepTurn,
    read_as,
)
from convtap.vocab import Endpoint, RawKind, sql
from convtap.wire.jsonvalue import dumps

# (shadow table, capture table, the column it indexes)
SHADOWS = (
    ("convtap_messages_by_turn", "messages", "turn_id"),
    ("convtap_calls_by_turn", "tool_calls", "turn_id"),
    ("convtap_returns_by_flow", "tool_returns", "flow_id"),
    ("convtap_returns_by_message", "tool_returns", "message_id"),
    ("convtap_findings_by_flow", "findings", "flow_id"),
)


def shadow_indexes(capture: sqlite_utils.Database) -> dict[str, int]:
    """(Re)make every shadow index from the capture as it is; the last rowid each table held."""
    last: dict[str, int] = {}
    for shadow, table, column in SHADOWS:
        capture.execute(f"DROP TABLE IF EXISTS temp.{shadow}")
        capture.execute(f"CREATE TEMP TABLE {shadow} (k TEXT NOT NULL, rid INTEGER NOT NULL)")
        capture.execute(f"CREATE INDEX temp.{shadow}_k ON {shadow} (k)")
        last[table] = _extend(capture, shadow, table, column, 0)
    return last


def extend_shadow_indexes(capture: sqlite_utils.Database, after: dict[str, int]) -> None:
    """Add the rows each table gained past the rowid `after` names (a step's column is set when
    its row is made: an upsert keeps it)."""
    for shadow, table, column in SHADOWS:
        _extend(capture, shadow, table, column, after.get(table, 0))


def _extend(
    capture: sqlite_utils.Database, shadow: str, table: str, column: str, after: int
) -> int:
    capture.execute(f"INSERT INTO temp.{shadow} SELECT coalesce({column}, ''), rowid "
                    f"FROM main.{table} WHERE rowid > ?", [after])  # fmt: skip
    return int(capture.execute(f"SELECT coalesce(max(rowid), 0) FROM main.{table}").fetchone()[0])


# -- the steps -------------------------------------------------------------------------------

# A Responses request continues the response it names; its outputs answer that response's calls.
# The vocabulary's words as SQL literals.
_RESPONSES, _SSE = sql(Endpoint.RESPONSES), sql(RawKind.SSE)

PREVIOUS = """(CASE WHEN json_valid(f.request_body)
    AND json_type(f.request_body, '$.previous_response_id') = 'text'
    THEN json_extract(f.request_body, '$.previous_response_id') END)"""

ON_A_CALL = "EXISTS (SELECT 1 FROM tool_calls c WHERE c.call_id = fd.call_id)"
ON_AN_ORPHAN = """r.call_id IS NULL AND r.flow_id = fd.flow_id
    AND (fd.return_id IN (r.id, r.message_id) OR (fd.return_id IS NULL
         AND fd.call_id = r.body_call_id))"""
ORPHAN_OF_FINDING = f"""EXISTS (SELECT 1 FROM temp.convtap_returns_by_flow y
    JOIN tool_returns r ON r.rowid = y.rid WHERE y.k = fd.flow_id AND {ON_AN_ORPHAN})"""

# Every step, in page order: conversations by their earliest row (then their key), each one's
# steps by when they started (their turn's or their flow's start, else their earliest row's; then
# their id). Sorted by SQLite, which spills to a temporary file past its cache: read as a stream.
STEP_KEYS = f"""WITH step AS (SELECT conv, step, min(at) AS first FROM (
    SELECT coalesce(conversation_id, '') AS conv, id AS step, started_at AS at FROM turns
    UNION ALL SELECT {PREVIOUS}, f.id, f.started_at FROM flows f
        WHERE f.kind = {_RESPONSES} AND {PREVIOUS} IS NOT NULL
    UNION ALL SELECT coalesce(conversation_id, ''), coalesce(turn_id, ''), first_seen_at
        FROM messages
    UNION ALL SELECT coalesce(c.conversation_id, ''), coalesce(c.turn_id, ''), c.called_at
        FROM tool_calls c WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = c.call_id)
    UNION ALL SELECT coalesce(conversation_id, ''), coalesce(flow_id, ''), returned_at
        FROM tool_returns WHERE call_id IS NULL
    UNION ALL SELECT coalesce(fd.conversation_id, ''), coalesce(fd.flow_id, ''),
        (SELECT started_at FROM flows WHERE id = fd.flow_id)
        FROM findings fd WHERE NOT {ON_A_CALL} AND NOT {ORPHAN_OF_FINDING}
) GROUP BY conv, step)
SELECT conv, step FROM (
    SELECT conv, step, coalesce(min(first) OVER (PARTITION BY conv), 0.0) AS conv_first,
        coalesce((SELECT started_at FROM turns WHERE id = step),
                 (SELECT started_at FROM flows WHERE id = step), first, 0.0) AS start
    FROM step)
ORDER BY conv_first, conv, start, step"""


def step_keys(capture: sqlite_utils.Database) -> Iterator[tuple[str, str]]:
    """Every step (conversation key, step id) in page order, streamed."""
    return ((str(c), str(s)) for c, s in capture.execute(STEP_KEYS))


# -- the rows of a batch of steps ------------------------------------------------------------

V = TypeVar("V", bound=tuple[Any, ...])

IN_STEPS = "IN (SELECT value FROM json_each(:steps))"

STEP_TURNS = f"""SELECT t.id AS step, coalesce(t.conversation_id, '') AS conv, t.model, t.client,
    t.started_at, t.ended_at, t.done, t.stream_complete, t.truncated, t.event_count, t.legs,
    t.ws_topic, t.encoding,
    CASE WHEN json_valid(t.errors) AND json_type(t.errors) = 'array'
         THEN json_array_length(t.errors) ELSE 0 END AS errors,
    f.kind, f.path, f.status, f.outcome, f.failure
FROM turns t LEFT JOIN flows f ON f.id = t.id WHERE t.id {IN_STEPS}"""

STEP_FLOWS = f"""SELECT f.id AS step, {PREVIOUS} AS previous, f.kind, f.client, f.started_at,
    f.ended_at, f.path, f.status, f.outcome, f.failure,
    CASE WHEN f.kind = {_RESPONSES} THEN f.request_body END AS request_body,
    CASE WHEN f.kind = {_RESPONSES} THEN f.response_body END AS response_body
FROM flows f WHERE f.id {IN_STEPS}"""

STEP_MESSAGES = f"""SELECT x.k AS step, coalesce(m.conversation_id, '') AS conv, m.rowid AS row_id,
    m.id, m.role, m.name, m.recipient, m.channel, m.status, m.content_type, m.text,
    m.first_seen_at AS at, c.call_id
FROM temp.convtap_messages_by_turn x JOIN messages m ON m.rowid = x.rid
LEFT JOIN tool_calls c ON c.call_id = m.id WHERE x.k {IN_STEPS}"""

STEP_CALLS = f"""SELECT x.k AS step, coalesce(c.conversation_id, '') AS conv, c.rowid AS row_id,
    c.call_id, c.called_at AS at
FROM temp.convtap_calls_by_turn x JOIN tool_calls c ON c.rowid = x.rid
WHERE x.k {IN_STEPS} AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = c.call_id)"""

RETURN_COLUMNS = """r.id, r.message_id, r.protocol, r.flow_id, r.tool, r.body_call_id,
    r.returned_at, r.message"""

STEP_ORPHANS = f"""SELECT x.k AS step, coalesce(r.conversation_id, '') AS conv, r.rowid AS row_id,
    {RETURN_COLUMNS}
FROM temp.convtap_returns_by_flow x JOIN tool_returns r ON r.rowid = x.rid
WHERE x.k {IN_STEPS} AND r.call_id IS NULL"""

# The findings of the steps' flows that are on no recorded call: each on the first return of its
# flow that it names and that answers no recorded call (`orphan`, that return's rowid), else on
# the request itself.
STEP_FINDINGS = f"""SELECT x.k AS step, coalesce(fd.conversation_id, '') AS conv,
    fd.id AS row_id, (SELECT started_at FROM flows WHERE id = fd.flow_id) AS at,
    (SELECT min(r.rowid) FROM temp.convtap_returns_by_flow y JOIN tool_returns r
     ON r.rowid = y.rid WHERE y.k = fd.flow_id AND {ON_AN_ORPHAN}) AS orphan, fd.*
FROM temp.convtap_findings_by_flow x JOIN findings fd ON fd.rowid = x.rid
WHERE x.k {IN_STEPS} AND NOT {ON_A_CALL} ORDER BY fd.id"""

IN_CALLS = "IN (SELECT value FROM json_each(:calls))"

CALLS = f"SELECT * FROM tool_calls WHERE call_id {IN_CALLS}"
LEDGER = f"""SELECT call_id, answered, accepted, continued FROM call_ledger
WHERE call_id {IN_CALLS}"""

RETURNS = f"""SELECT r.call_id, {RETURN_COLUMNS}, t.ended_at AS turn_ended_at, t.stream_complete,
    a.ended_at AS flow_ended_at,
    (SELECT min(n.seen_at) FROM conversation_nodes n
     WHERE n.conversation_id = r.conversation_id AND n.node_id = r.message_id) AS node_seen_at
FROM tool_returns r LEFT JOIN turns t ON t.id = r.flow_id LEFT JOIN flows a ON a.id = r.flow_id
WHERE r.call_id {IN_CALLS} ORDER BY r.returned_at, r.id"""

CALL_FINDINGS = f"SELECT * FROM findings WHERE call_id {IN_CALLS} ORDER BY id"

EXCHANGE_EVENTS = f"SELECT * FROM events WHERE flow_id = ? AND event = {_SSE} ORDER BY seq"


def _cursor(capture: sqlite_utils.Database, sql: str, **lists: Iterable[str]) -> sqlite3.Cursor:
    """A cursor over `sql`, each list of values given as one JSON array parameter (`json_each`:
    one prepared statement whatever the batch's size)."""
    params = {name: dumps(sorted(set(values))) for name, values in lists.items()}
    cursor = capture.conn.cursor()
    cursor.row_factory = None  # plain tuples, made into views by `read_as`
    return cursor.execute(sql, params)


def _query(
    capture: sqlite_utils.Database, view: type[V], sql: str, **lists: Iterable[str]
) -> list[V]:
    return read_as(view, _cursor(capture, sql, **lists))


def _firsts(capture: sqlite_utils.Database, sql: str, **lists: Iterable[str]) -> set[str]:
    """The first column of each row of `sql`."""
    return {row[0] for row in _cursor(capture, sql, **lists)}


def step_rows(capture: sqlite_utils.Database, steps: Iterable[str]) -> StepRows:
    """The rows of the steps named (by step id, whatever their conversation), by kind: `turns`,
    `flows`, `messages`, `calls` (with no message), `orphans` (returns answering no recorded
    call), `findings` (on no recorded call; `orphan` names the return one is on)."""
    wanted = list(steps)
    return StepRows(
        turns=_query(capture, StepTurn, STEP_TURNS, steps=wanted),
        flows=_query(capture, StepFlow, STEP_FLOWS, steps=wanted),
        messages=_query(capture, StepMessage, STEP_MESSAGES, steps=wanted),
        calls=_query(capture, StepCall, STEP_CALLS, steps=wanted),
        orphans=_query(capture, StepReturn, STEP_ORPHANS, steps=wanted),
        findings=_query(capture, StepFinding, STEP_FINDINGS, steps=wanted),
    )


def call_rows(capture: sqlite_utils.Database, calls: Iterable[str]) -> CallRows:
    """The calls named, with what their lifecycle is read from: `calls` (their columns),
    `ledger` (answered, accepted, continued), `returns` (the first first, with the times of
    its request's end and of the conversation tree showing it), `findings` naming them."""
    wanted = list(calls)
    return CallRows(
        calls=_query(capture, CallColumns, CALLS, calls=wanted),
        ledger=_query(capture, CallStages, LEDGER, calls=wanted),
        returns=_query(capture, CallReturn, RETURNS, calls=wanted),
        findings=_query(capture, CallFinding, CALL_FINDINGS, calls=wanted),
    )


def exchange_events(capture: sqlite_utils.Database, flow_id: str) -> Iterator[str]:
    """A Responses request's raw stream, as text, streamed."""
    return (event_text(row) for row in capture.query(EXCHANGE_EVENTS, [flow_id]))


# -- what changed (the live page) ------------------------------------------------------------

# Each table whose rows a step shows: what of a row is looked at (its rowid, then what it is: a
# rowid that holds something else now was rewritten, then what it says), and how many of its last
# rows are looked at again for an update in place (the recorder updates rows it has just written:
# a turn or a flow ending, a return paired with its call).
WATCHED = {
    "turns": "rowid, id, *",
    "flows": """rowid, id, kind, status, outcome, started_at, ended_at, failure, client,
        length(response_body)""",
    "messages": "rowid, id, *",
    "tool_calls": "rowid, call_id, *",
    "tool_returns": "rowid, id, *",
    "findings": """rowid, rule || ' ' || coalesce(call_id, '') || ' ' || coalesce(flow_id, '')
        || ' ' || coalesce(return_id, ''), *""",
    "conversation_nodes": """rowid, conversation_id || ' ' || node_id, conversation_id, node_id,
        message_id, seen_at""",
}
HOT = 500


def last_rowid(capture: sqlite_utils.Database, table: str) -> int:
    return int(capture.execute(f"SELECT coalesce(max(rowid), 0) FROM {table}").fetchone()[0])


def watched_rows(capture: sqlite_utils.Database, table: str, after: int) -> list[sqlite3.Row]:
    """The watched columns of each row of `table` past rowid `after`, in rowid order."""
    cursor = capture.conn.cursor()
    cursor.row_factory = sqlite3.Row
    sql = f"SELECT {WATCHED[table]} FROM {table} WHERE rowid > ? ORDER BY rowid"
    return cursor.execute(sql, [after]).fetchall()


CALL_STEPS = f"""SELECT coalesce(m.turn_id, c.turn_id, '') FROM tool_calls c
LEFT JOIN messages m ON m.id = c.call_id WHERE c.call_id {IN_CALLS}"""
FLOW_CALLS = """SELECT r.call_id FROM temp.convtap_returns_by_flow x
JOIN tool_returns r ON r.rowid = x.rid
WHERE x.k IN (SELECT value FROM json_each(:keys)) AND r.call_id IS NOT NULL"""
MESSAGE_CALLS = FLOW_CALLS.replace("convtap_returns_by_flow", "convtap_returns_by_message")
CALL_FINDING_FLOWS = f"SELECT coalesce(flow_id, '') FROM findings WHERE call_id {IN_CALLS}"


def call_steps(capture: sqlite_utils.Database, calls: Iterable[str]) -> set[str]:
    """The steps the calls named are shown in (their message's turn, else their own turn), and
    the flows of the findings naming them (a finding moves when its call is recorded)."""
    wanted = list(calls)
    return _firsts(capture, CALL_STEPS, calls=wanted) | _firsts(
        capture, CALL_FINDING_FLOWS, calls=wanted
    )


def calls_answered_in(capture: sqlite_utils.Database, flows: Iterable[str]) -> set[str]:
    """The calls answered by returns sent in these flows (whose end, or whose continuation's,
    is part of those calls' lifecycle)."""
    return _firsts(capture, FLOW_CALLS, keys=flows)


def calls_answered_by(capture: sqlite_utils.Database, messages: Iterable[str]) -> set[str]:
    """The calls answered by returns with these message ids (shown in a conversation tree)."""
    return _firsts(capture, MESSAGE_CALLS, keys=messages)
