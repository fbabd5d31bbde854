"""What `convtap report` reads from a capture, as rows: the summary's counts, the lists (tools,
decode errors, failures), every conversation's timeline, and what the charts draw. The report's
SQL, kept in the store layer so that the report package speaks none.

Streamed like the page: each query runs when its function is called and its rows are read as
they are consumed. The timeline is one query per kind of row, all in page order, merged; a
step's columns, a call with its returns and findings, and the findings on a return answering no
recorded call are read one at a time as the page reaches them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlite_utils

from convtap.store.compact import event_text

# -- the summary and the lists ---------------------------------------------------------------


def summary_counts(capture: sqlite_utils.Database) -> dict[str, int]:
    """The counts at the top of the page, each 0 when there is nothing to count: flows, turns,
    conversations, calls, responses_calls, returns, answered, accepted, continued (from the
    call ledger), decode_errors and failures."""

    def count(sql: str) -> int:
        return int(capture.execute(sql).fetchone()[0] or 0)

    answered, accepted, continued = capture.execute(LEDGER_COUNTS).fetchone()
    return {
        "flows": count("SELECT count(*) FROM flows"),
        "turns": count("SELECT count(*) FROM turns"),
        "conversations": count(f"{CONVERSATIONS} SELECT count(*) FROM conv WHERE key != ''"),
        "calls": count("SELECT count(*) FROM tool_calls"),
        "responses_calls": count("SELECT count(*) FROM tool_calls WHERE protocol = 'responses'"),
        "returns": count("SELECT count(*) FROM tool_returns"),
        "answered": int(answered or 0),
        "accepted": int(accepted or 0),
        "continued": int(continued or 0),
        "decode_errors": count(DECODE_ERROR_COUNT),
        "failures": count("SELECT count(*) FROM flows WHERE failure IS NOT NULL"),
    }


def findings_by_rule(capture: sqlite_utils.Database) -> Iterator[tuple[str, str, int]]:
    """(rule id, severity, findings) for each rule and severity found, in no particular order."""
    return capture.execute(FINDINGS_BY_RULE)


def clients(capture: sqlite_utils.Database) -> Iterator[tuple[str, int, int]]:
    """(user agent, flows, turns) for each client, the one with the most flows first."""
    return ((str(c), int(f), int(t)) for c, f, t in capture.execute(CLIENTS))


def tools(capture: sqlite_utils.Database) -> Iterator[str]:
    """The name of every tool called, or returned to with no recorded call, in name order."""
    return (row[0] for row in capture.execute(TOOLS))


def decode_errors(capture: sqlite_utils.Database) -> Iterator[dict[str, Any]]:
    """Each decode error of each turn (turn_id, conversation_id, event_index, kind, detail), in
    the order the turns started."""
    return capture.query(DECODE_ERRORS)


def failures(capture: sqlite_utils.Database) -> Iterator[dict[str, Any]]:
    """Each flow convtap itself failed on (id, kind, path, started_at, failure), in time order."""
    return capture.query(FAILURES)


# -- the timeline ----------------------------------------------------------------------------


def timeline_rows(capture: sqlite_utils.Database) -> Iterator[dict[str, Any]]:
    """Every row of every conversation, in page order (`ORDER`). Each names its conversation
    (`conv`, first seen at `conv_at`, with `conv_calls` and `conv_findings`) and its `step`, and
    is, by `what`: a step's own row, a message (with `call_id` when it is a call), a call with no
    message, a return answering no recorded call, or a finding on a request."""
    return heapq.merge(*(capture.query(sql) for sql in STREAMS), key=_order)


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[name] for name in ORDER)


def step_exchange(
    capture: sqlite_utils.Database, step_id: str
) -> tuple[str | None, str | None, Iterator[str]]:
    """A Responses request's body, its JSON answer (when not streamed, or a socket's turn), and
    its raw stream's text, streamed."""
    row = next(capture.query(EXCHANGE, [step_id]), None)
    if row is None:
        return None, None, iter(())
    events = (event_text(r) for r in capture.query(EXCHANGE_EVENTS, [step_id]))
    return row["request_body"], row["response_body"], events


EXCHANGE = "SELECT request_body, response_body FROM flows WHERE id = ? AND kind = 'responses'"
EXCHANGE_EVENTS = "SELECT * FROM events WHERE flow_id = ? AND event = 'sse' ORDER BY seq"


def step_info(capture: sqlite_utils.Database, step_id: str) -> dict[str, Any]:
    """A step's columns: its turn's (`turn` 1), else its flow's (`turn` 0), else empty."""
    info = next(capture.query(STEP_TURN, [step_id]), None)
    return info or next(capture.query(STEP_FLOW, [step_id]), None) or {}


def call_row(capture: sqlite_utils.Database, call_id: str) -> dict[str, Any]:
    """A recorded call's columns, with `answered`, `accepted` and `continued` from its ledger."""
    return next(capture.query(CALL, {"id": call_id}))


def call_returns(capture: sqlite_utils.Database, call_id: str) -> Iterator[dict[str, Any]]:
    """The returns answering a call, the first first, each with the times its lifecycle is read
    from (turn_ended_at, stream_complete, flow_ended_at, node_seen_at)."""
    return capture.query(RETURNS, [call_id])


def call_findings(capture: sqlite_utils.Database, call_id: str) -> Iterator[dict[str, Any]]:
    """The findings naming a call, in the order they were made."""
    return capture.query(CALL_FINDINGS, [call_id])


def orphan_findings(capture: sqlite_utils.Database, return_id: str) -> Iterator[dict[str, Any]]:
    """The findings on a return that answers no recorded call, in the order they were made."""
    return capture.query(ORPHAN_FINDINGS, [return_id])


# -- SQL -------------------------------------------------------------------------------------

LEDGER_COUNTS = "SELECT sum(answered), sum(accepted), sum(continued) FROM call_ledger"

FINDINGS_BY_RULE = "SELECT rule, severity, count(*) FROM findings GROUP BY rule, severity"

CLIENTS = """SELECT client, sum(source = 'flow'), sum(source = 'turn') FROM (
    SELECT client, 'flow' AS source FROM flows UNION ALL SELECT client, 'turn' FROM turns)
WHERE client IS NOT NULL GROUP BY client ORDER BY 2 DESC, 1"""

# A Responses output's `tool` is its item type (function_call_output): no tool's name.
TOOLS = """SELECT tool FROM tool_calls WHERE tool IS NOT NULL
UNION SELECT tool FROM tool_returns WHERE call_id IS NULL AND tool IS NOT NULL
    AND protocol IS NOT 'responses' ORDER BY 1"""

ERRORS = """(CASE WHEN json_valid(t.errors) AND json_type(t.errors) = 'array'
    THEN t.errors ELSE '[]' END)"""

DECODE_ERROR_COUNT = f"SELECT sum(json_array_length({ERRORS})) FROM turns t"

DECODE_ERRORS = f"""SELECT t.id AS turn_id, t.conversation_id,
    CASE WHEN e.type = 'object' THEN json_extract(e.value, '$.event_index') END AS event_index,
    CASE WHEN e.type = 'object' THEN json_extract(e.value, '$.kind') END AS kind,
    CASE WHEN e.type = 'object' THEN json_extract(e.value, '$.detail') ELSE e.value END AS detail
FROM turns t, json_each({ERRORS}) e
ORDER BY t.started_at, t.id, e.key"""

FAILURES = """SELECT id, kind, path, started_at, failure FROM flows WHERE failure IS NOT NULL
ORDER BY started_at, id"""

# A Responses request continues the response it names; its outputs answer that response's calls.
PREVIOUS = """(CASE WHEN json_valid(f.request_body)
    AND json_type(f.request_body, '$.previous_response_id') = 'text'
    THEN json_extract(f.request_body, '$.previous_response_id') END)"""

ON_A_CALL = "EXISTS (SELECT 1 FROM tool_calls c WHERE c.call_id = fd.call_id)"
ON_AN_ORPHAN = """r.call_id IS NULL AND r.flow_id = fd.flow_id
    AND (fd.return_id IN (r.id, r.message_id) OR (fd.return_id IS NULL
         AND fd.call_id = r.body_call_id))"""

# Each conversation with the time it was first seen (which orders the page), its calls and
# its findings.
CONVERSATIONS = f"""WITH conv AS (
SELECT key, coalesce(min(at), 0.0) AS first_at, sum(calls) AS calls, sum(findings) AS findings
FROM (
    SELECT coalesce(conversation_id, '') AS key, started_at AS at, 0 AS calls, 0 AS findings
    FROM turns
    UNION ALL SELECT coalesce(conversation_id, ''), first_seen_at, 0, 0 FROM messages
    UNION ALL SELECT coalesce(conversation_id, ''), called_at, 1, 0 FROM tool_calls
    UNION ALL SELECT coalesce(conversation_id, ''), returned_at, 0, 0 FROM tool_returns
    UNION ALL SELECT coalesce(fd.conversation_id, ''), fl.started_at, 0, 1
    FROM findings fd LEFT JOIN flows fl ON fl.id = fd.flow_id
    UNION ALL SELECT {PREVIOUS}, f.started_at, 0, 0 FROM flows f
    WHERE f.kind = 'responses' AND {PREVIOUS} IS NOT NULL
) GROUP BY key)
"""

# Page order. Within a step, rows of one time and kind keep the order they were recorded in.
ORDER = ("conv_at", "conv", "step_at", "step", "rank", "at", "what", "row_id")


def _stream(what: str, source: str, where: str, key: str, step: str, at: str, row_id: str,
            columns: str) -> str:  # fmt: skip
    """Rows of one kind, each with where it goes (conversation, step) and when, in page order.
    CROSS JOIN keeps the source the outer loop, so that SQLite indexes `conv` (a plain JOIN
    may scan the source once per conversation)."""
    step_at = f"""coalesce((SELECT started_at FROM turns WHERE id = {step}),
        (SELECT started_at FROM flows WHERE id = {step}), {at}, 0.0)"""
    return f"""{CONVERSATIONS}
SELECT conv.first_at AS conv_at, conv.key AS conv, conv.calls AS conv_calls,
       conv.findings AS conv_findings, {step_at} AS step_at, coalesce({step}, '') AS step,
       {0 if what == "step" else 1} AS rank, coalesce({at}, 0.0) AS at, '{what}' AS what,
       {row_id} AS row_id, {columns}
FROM {source} CROSS JOIN conv ON conv.key = coalesce({key}, '')
WHERE {where}
ORDER BY {", ".join(ORDER)}"""


RETURN_COLUMNS = """r.id, r.message_id, r.protocol, r.flow_id, r.tool, r.body_call_id,
    r.returned_at, r.message"""

STREAMS = [
    _stream("step", "turns t", "1", "t.conversation_id", "t.id", "t.started_at", "t.rowid",
            "NULL"),
    _stream("step", "flows f", f"f.kind = 'responses' AND {PREVIOUS} IS NOT NULL", PREVIOUS,
            "f.id", "f.started_at", "f.rowid", "NULL"),
    _stream("message", "messages m LEFT JOIN tool_calls c ON c.call_id = m.id", "1",
            "m.conversation_id", "m.turn_id", "m.first_seen_at", "m.rowid",
            """m.id, m.role, m.name, m.recipient, m.channel, m.status, m.content_type, m.text,
            m.first_seen_at AS seen_at, c.call_id"""),
    _stream("call", "tool_calls c", "NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = c.call_id)",
            "c.conversation_id", "c.turn_id", "c.called_at", "c.rowid", "c.call_id"),
    _stream("return", "tool_returns r", "r.call_id IS NULL", "r.conversation_id", "r.flow_id",
            "r.returned_at", "r.rowid", RETURN_COLUMNS),
    _stream("finding", "findings fd", f"""NOT {ON_A_CALL}
            AND NOT EXISTS (SELECT 1 FROM tool_returns r WHERE {ON_AN_ORPHAN})""",
            "fd.conversation_id", "fd.flow_id",
            "(SELECT started_at FROM flows WHERE id = fd.flow_id)", "fd.id", "fd.*"),
]  # fmt: skip

CALL = """SELECT c.*, l.answered, l.accepted, l.continued
FROM tool_calls c JOIN (SELECT * FROM call_ledger WHERE call_id = :id) l ON l.call_id = c.call_id
WHERE c.call_id = :id"""

RETURNS = f"""SELECT {RETURN_COLUMNS}, t.ended_at AS turn_ended_at, t.stream_complete,
    a.ended_at AS flow_ended_at,
    (SELECT min(n.seen_at) FROM conversation_nodes n
     WHERE n.conversation_id = r.conversation_id AND n.node_id = r.message_id) AS node_seen_at
FROM tool_returns r LEFT JOIN turns t ON t.id = r.flow_id LEFT JOIN flows a ON a.id = r.flow_id
WHERE r.call_id = ? ORDER BY r.returned_at, r.id"""

CALL_FINDINGS = "SELECT * FROM findings WHERE call_id = ? ORDER BY id"

ORPHAN_FINDINGS = f"""SELECT fd.* FROM findings fd JOIN tool_returns r ON r.id = ?
WHERE NOT {ON_A_CALL} AND {ON_AN_ORPHAN} ORDER BY fd.id"""

STEP_TURN = """SELECT 1 AS turn, t.id, f.kind, t.model, t.client, t.started_at, t.ended_at,
    t.done, t.stream_complete, t.truncated, t.event_count, t.legs, t.ws_topic, t.encoding,
    CASE WHEN json_valid(t.errors) AND json_type(t.errors) = 'array'
         THEN json_array_length(t.errors) ELSE 0 END AS errors,
    f.path, f.status, f.outcome, f.failure
FROM turns t LEFT JOIN flows f ON f.id = t.id WHERE t.id = ?"""

STEP_FLOW = """SELECT 0 AS turn, id, kind, NULL AS model, client, started_at, ended_at,
    NULL AS done, NULL AS stream_complete, NULL AS truncated, NULL AS event_count, NULL AS legs,
    NULL AS ws_topic, NULL AS encoding, 0 AS errors, path, status, outcome, failure
FROM flows WHERE id = ?"""


# -- the charts ------------------------------------------------------------------------------


def request_count(capture: sqlite_utils.Database) -> int:
    """How many requests `request_times` yields (its two tables' rows, without reading them)."""
    sql = "SELECT (SELECT count(*) FROM turns) + (SELECT count(*) FROM flows WHERE kind = ?)"
    return int(capture.execute(sql, ("responses",)).fetchone()[0])


def request_times(capture: sqlite_utils.Database) -> Iterator[dict[str, Any]]:
    """Each f/conversation turn and Responses API request in the order it started: its id,
    protocol, started_at, ended_at, first_at (its first event's arrival, None without one), and
    for the Responses API what carries its usage: the JSON answer's `usage` (`usage`) or the
    last raw event naming a usage (`usage_event`, SSE text)."""
    return capture.query(f"{_request_times(capture)} ORDER BY started_at, id")


def _request_times(capture: sqlite_utils.Database) -> str:
    """`REQUEST_TIMES` for this capture: one made before schema 4 has no `raw` column, and its
    `data` is the text."""
    text = (
        "e.data" if "raw" not in capture["events"].columns_dict else "convtap_event(e.data, e.raw)"
    )
    return REQUEST_TIMES.format(event_text=text)


def activity_span(capture: sqlite_utils.Database) -> tuple[float | None, float | None]:
    """The first and the last time a call was made or a finding was found in."""
    low, high = capture.execute(f"SELECT min(at), max(at) FROM ({ACTIVITY})").fetchone()
    return low, high


def activity(
    capture: sqlite_utils.Database, start: float, width: float, buckets: int
) -> Iterator[tuple[int, int, int]]:
    """(bucket, calls, findings) for each bucket of `width` seconds from `start` that has any;
    the last bucket takes whatever lies past the others."""
    sql = f"""SELECT min(CAST((at - :start) / :width AS INTEGER), :last) AS bucket,
        sum(what = 'call'), sum(what = 'finding') FROM ({ACTIVITY}) GROUP BY bucket ORDER BY 1"""
    params = {"start": start, "width": width, "last": buckets - 1}
    return ((int(b), int(c), int(f)) for b, c, f in capture.execute(sql, params))


FIRST_EVENT = "(SELECT min(e.at) FROM events e WHERE e.flow_id = {})"

REQUEST_TIMES = f"""SELECT t.id, 'f/conversation' AS protocol, t.started_at, t.ended_at,
    {FIRST_EVENT.format("t.id")} AS first_at, NULL AS usage, NULL AS usage_event
FROM turns t
UNION ALL
SELECT f.id, 'responses', f.started_at, f.ended_at, {FIRST_EVENT.format("f.id")},
    CASE WHEN json_valid(f.response_body) AND json_type(f.response_body, '$.usage') = 'object'
         THEN json_extract(f.response_body, '$.usage') END,
    (SELECT {{event_text}} AS usage_event FROM events e
     WHERE e.flow_id = f.id AND e.event = 'sse' AND usage_event LIKE '%"usage"%'
     ORDER BY e.seq DESC LIMIT 1)
FROM flows f WHERE f.kind = 'responses'"""

# A finding happened when the request it was found in started (an audit rewrites created_at).
ACTIVITY = """SELECT called_at AS at, 'call' AS what FROM tool_calls WHERE called_at IS NOT NULL
UNION ALL SELECT coalesce((SELECT started_at FROM flows WHERE id = fd.flow_id), fd.created_at),
    'finding' FROM findings fd"""


# -- the live page ---------------------------------------------------------------------------


def data_version(capture: sqlite_utils.Database) -> int:
    """A number that changes when another connection commits into the capture: a cheap look,
    no table read (SQLite's `PRAGMA data_version`)."""
    return int(capture.execute("PRAGMA data_version").fetchone()[0])


@contextmanager
def one_reading(capture: sqlite_utils.Database) -> Iterator[None]:
    """Every query inside reads the capture as it was at the first one (one read transaction),
    however a recording writes into it meanwhile."""
    capture.execute("BEGIN")
    try:
        yield
    finally:
        capture.execute("COMMIT")
