"""What `convtap report` reads from a capture, as rows: the summary's counts, the lists (tools,
decode errors, failures) and what the charts draw (the timeline's rows are `timeline_queries`').
The report's SQL, kept in the store layer so that the report package speaks none.

Streamed like the page: each query runs when its function is called and its rows are read as
they are consumed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlite_utils

from convtap.store.rows import FlowRow
from convtap.store.views import DecodeErrorView, RequestTime
from convtap.vocab import Endpoint, RawKind, WireProtocol, sql

# -- the summary and the lists ---------------------------------------------------------------


# The vocabulary's words as SQL literals.
_RESPONSES, _SSE = sql(Endpoint.RESPONSES), sql(RawKind.SSE)
_BY_API = sql(WireProtocol.RESPONSES)  # a call's or a return's protocol


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
        "conversations": count(CONVERSATION_COUNT),
        "calls": count("SELECT count(*) FROM tool_calls"),
        "responses_calls": count(f"SELECT count(*) FROM tool_calls WHERE protocol = {_BY_API}"),
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


def decode_errors(capture: sqlite_utils.Database, most: int) -> Iterator[DecodeErrorView]:
    """The first `most` decode errors of the turns, in the order the turns started."""
    return map(DecodeErrorView.read, capture.query(f"{DECODE_ERRORS} LIMIT ?", [most]))


def failures(capture: sqlite_utils.Database, most: int) -> Iterator[FlowRow]:
    """The first `most` flows convtap itself failed on (their id, kind, path, started_at and
    failure; no other column is read), in time order."""
    return map(FlowRow.read, capture.query(f"{FAILURES} LIMIT ?", [most]))


# -- SQL -------------------------------------------------------------------------------------

LEDGER_COUNTS = "SELECT sum(answered), sum(accepted), sum(continued) FROM call_ledger"

FINDINGS_BY_RULE = "SELECT rule, severity, count(*) FROM findings GROUP BY rule, severity"

CLIENTS = """SELECT client, sum(source = 'flow'), sum(source = 'turn') FROM (
    SELECT client, 'flow' AS source FROM flows UNION ALL SELECT client, 'turn' FROM turns)
WHERE client IS NOT NULL GROUP BY client ORDER BY 2 DESC, 1"""

# A Responses output's `tool` is its item type (function_call_output): no tool's name.
TOOLS = f"""SELECT tool FROM tool_calls WHERE tool IS NOT NULL
UNION SELECT tool FROM tool_returns WHERE call_id IS NULL AND tool IS NOT NULL
    AND protocol IS NOT {_BY_API} ORDER BY 1"""

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

# A Responses request continues the response it names: it is part of that response's chain.
PREVIOUS = """(CASE WHEN json_valid(f.request_body)
    AND json_type(f.request_body, '$.previous_response_id') = 'text'
    THEN json_extract(f.request_body, '$.previous_response_id') END)"""

CONVERSATION_COUNT = f"""SELECT count(*) FROM (
    SELECT conversation_id AS key FROM turns UNION SELECT conversation_id FROM messages
    UNION SELECT conversation_id FROM tool_calls UNION SELECT conversation_id FROM tool_returns
    UNION SELECT conversation_id FROM findings
    UNION SELECT {PREVIOUS} FROM flows f WHERE f.kind = {_RESPONSES}
) WHERE key IS NOT NULL AND key != ''"""


# -- the charts ------------------------------------------------------------------------------


def request_count(capture: sqlite_utils.Database) -> int:
    """How many requests `request_times` yields (its two tables' rows, without reading them)."""
    sql = "SELECT (SELECT count(*) FROM turns) + (SELECT count(*) FROM flows WHERE kind = ?)"
    return int(capture.execute(sql, ("responses",)).fetchone()[0])


def request_times(capture: sqlite_utils.Database) -> Iterator[RequestTime]:
    """Each f/conversation turn and Responses API request in the order it started: its id,
    protocol, started_at, ended_at, first_at (its first event's arrival, None without one), and
    for the Responses API what carries its usage: the JSON answer's `usage`, else the usage the
    recorder took from its answer (`usage`), or the last raw event naming a usage
    (`usage_event`, SSE text)."""
    return map(
        RequestTime.read, capture.query(f"{_request_times(capture)} ORDER BY started_at, id")
    )


def _request_times(capture: sqlite_utils.Database) -> str:
    """`REQUEST_TIMES` for this capture: one made before schema 4 has no `raw` column, and its
    `data` is the text; one made before schema 6 has no `usage` table."""
    text = (
        "e.data" if "raw" not in capture["events"].columns_dict else "convtap_event(e.data, e.raw)"
    )
    recorded = RECORDED_USAGE if capture["usage"].exists() else "NULL"
    return REQUEST_TIMES.format(event_text=text, recorded_usage=recorded)


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


# Events come in the order they arrived: the first is the one with the lowest seq (found in the
# primary key, where min(at) would read every event of the flow).
FIRST_EVENT = "(SELECT e.at FROM events e WHERE e.flow_id = {} ORDER BY e.seq LIMIT 1)"

REQUEST_TIMES = f"""SELECT t.id, 'f/conversation' AS protocol, t.started_at, t.ended_at,
    {FIRST_EVENT.format("t.id")} AS first_at, NULL AS usage, NULL AS usage_event
FROM turns t
UNION ALL
SELECT f.id, 'responses', f.started_at, f.ended_at, {FIRST_EVENT.format("f.id")},
    coalesce(
        CASE WHEN json_valid(f.response_body) AND json_type(f.response_body, '$.usage') = 'object'
             THEN json_extract(f.response_body, '$.usage') END,
        {{recorded_usage}}),
    (SELECT {{event_text}} AS usage_event FROM events e
     WHERE e.flow_id = f.id AND e.event = {_SSE} AND usage_event LIKE '%"usage"%'
     ORDER BY e.seq DESC LIMIT 1)
FROM flows f WHERE f.kind = {_RESPONSES}"""

# The usage the recorder took from an answer (the `usage` table), as the API spells it: what a
# WebSocket-mode turn has, whose answer is stored without it and whose events are frames.
RECORDED_USAGE = """(SELECT json_object('input_tokens', u.input_tokens,
    'input_tokens_details', json_object('cached_tokens', u.cached_tokens),
    'output_tokens', u.output_tokens,
    'output_tokens_details', json_object('reasoning_tokens', u.reasoning_tokens))
    FROM usage u WHERE u.flow_id = f.id)"""

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
