"""What a capture's traces and costs are read from, as rows: each model turn (an f/conversation
turn, a Responses API request over HTTP or a turn of WebSocket mode) with its times, model and
usage; each answered client call with when the request that carried its output started; the
findings of a flow or a call; and the cost of each answer, conversation, chain and capture.
`convtap.telemetry` makes spans of them; this module is the SQL.

Each query streams its rows. `since` keeps what ended (or was answered) at or after a time: the
live export asks for what is new since its last look.
"""

from __future__ import annotations

from collections.abc import Iterator

import sqlite_utils

from convtap.store.compact import event_text
from convtap.store.views import (
    AnswerCost,
    AnsweredCall,
    CallPlace,
    CaptureCost,
    MessageText,
    ModelTurn,
    StoredFinding,
)
from convtap.vocab import Endpoint, RawKind, Source, sql

# The vocabulary's words as SQL literals.
_RESPONSES, _SOCKET = sql(Endpoint.RESPONSES), sql(Source.SOCKET)

FIRST_EVENT = "(SELECT min(e.at) FROM events e WHERE e.flow_id = {})"
# A turn of WebSocket mode has no events of its own: its first is the socket's first server
# frame from the moment its create was sent.
FIRST_FRAME = f"""(SELECT min(e.at) FROM events e WHERE e.flow_id = f.turn_id
    AND e.event = {sql(RawKind.WS_SERVER)} AND e.at >= f.started_at)"""
FINISH = """(SELECT json_extract(m.json, '$.metadata.finish_details.type') FROM messages m
    WHERE m.turn_id = t.id AND m.role = 'assistant' AND json_valid(m.json)
    ORDER BY m.updated_at DESC LIMIT 1)"""
# A server-side conversation (`conversation`: an id, or an object with one).
CONVERSATION = """CASE json_type(f.request_body, '$.conversation')
    WHEN 'text' THEN json_extract(f.request_body, '$.conversation')
    WHEN 'object' THEN json_extract(f.request_body, '$.conversation.id') END"""

MODEL_TURNS = f"""SELECT * FROM (
SELECT t.id, 'f/conversation' AS protocol,
    CASE WHEN t.ws_topic IS NOT NULL THEN 'http+websocket' ELSE 'http' END AS transport,
    t.conversation_id, t.model AS request_model, t.started_at, t.ended_at,
    {FIRST_EVENT.format("t.id")} AS first_at, f.status, f.outcome, f.host, f.url, t.client,
    NULL AS previous_response_id, 1 AS stream, NULL AS response_id, NULL AS response_model,
    {FINISH} AS finish_reason, NULL AS input_tokens, NULL AS cached_tokens,
    NULL AS output_tokens, NULL AS reasoning_tokens, NULL AS cost_usd, NULL AS pricing
FROM turns t LEFT JOIN flows f ON f.id = t.id
UNION ALL
SELECT f.id, 'responses', CASE f.source WHEN {_SOCKET} THEN 'websocket' ELSE 'http' END,
    {CONVERSATION}, json_extract(f.request_body, '$.model'), f.started_at, f.ended_at,
    CASE f.source WHEN {_SOCKET} THEN {FIRST_FRAME} ELSE {FIRST_EVENT.format("f.id")} END,
    f.status, f.outcome, f.host, f.url, f.client,
    json_extract(f.request_body, '$.previous_response_id'),
    CASE f.source WHEN {_SOCKET} THEN 1 ELSE json_extract(f.request_body, '$.stream') END,
    u.response_id, u.model, u.finish_reason, u.input_tokens, u.cached_tokens, u.output_tokens,
    u.reasoning_tokens, u.cost_usd, u.pricing
FROM flows f LEFT JOIN {{usage}} u ON u.flow_id = f.id WHERE f.kind = {_RESPONSES}
) WHERE ended_at IS NOT NULL AND (:since IS NULL OR ended_at >= :since)
ORDER BY started_at, id"""

ANSWERED_CALLS = """SELECT c.call_id, c.protocol, c.tool, c.namespace, c.kind, c.recipient,
    c.turn_id,
    c.called_at, c.arguments, r.flow_id AS return_flow_id, r.returned_at, r.message AS result
FROM tool_calls c JOIN tool_returns r ON r.id = (
    SELECT id FROM tool_returns WHERE call_id = c.call_id ORDER BY returned_at, id LIMIT 1)
WHERE c.called_at IS NOT NULL AND r.returned_at IS NOT NULL
    AND (:since IS NULL OR r.returned_at >= :since)
ORDER BY r.returned_at, c.call_id"""

FINDING = "SELECT rule, severity, message, call_id, flow_id, created_at FROM findings f"
ANSWERED = "EXISTS (SELECT 1 FROM tool_returns r WHERE r.call_id = f.call_id)"
# A flow's findings but those on a call that was answered (they go on the call's tool span);
# one on an unanswered call found on no flow goes on the turn that made the call.
FINDINGS_OF_FLOW = f"""{FINDING} WHERE (f.flow_id = :flow OR (f.flow_id IS NULL AND EXISTS (
    SELECT 1 FROM tool_calls c WHERE c.call_id = f.call_id AND c.turn_id = :flow)))
    AND NOT (f.call_id IS NOT NULL AND {ANSWERED}) ORDER BY f.created_at, f.id"""
FINDINGS_OF_CALL = f"{FINDING} WHERE f.call_id = ? ORDER BY f.created_at, f.id"


def model_turns(capture: sqlite_utils.Database, since: float | None = None) -> Iterator[ModelTurn]:
    """Every model turn that ended (at or after `since`), in the order they started."""
    query = MODEL_TURNS.format(usage=_usage(capture))
    return map(ModelTurn.read, capture.query(query, {"since": since}))


def answered_calls(
    capture: sqlite_utils.Database, since: float | None = None
) -> Iterator[AnsweredCall]:
    """Every client call that was answered (at or after `since`), in the order of their
    answers."""
    return map(AnsweredCall.read, capture.query(ANSWERED_CALLS, {"since": since}))


def findings_of_flow(capture: sqlite_utils.Database, flow_id: str) -> list[StoredFinding]:
    """The findings made on one flow, but those on a call that was answered (see
    `FINDINGS_OF_FLOW`)."""
    return [StoredFinding.read(r) for r in capture.query(FINDINGS_OF_FLOW, {"flow": flow_id})]


def findings_of_call(capture: sqlite_utils.Database, call_id: str) -> list[StoredFinding]:
    """The findings on one call."""
    return [StoredFinding.read(r) for r in capture.query(FINDINGS_OF_CALL, [call_id])]


def flow_chain_link(capture: sqlite_utils.Database, flow_id: str) -> tuple[str | None, str | None]:
    """A Responses request's server-side conversation and the flow of the response it
    continues (`previous_response_id`, when that response is in the capture)."""
    row = capture.execute(
        f"""SELECT {CONVERSATION}, (SELECT u.flow_id FROM {_usage(capture)} u
            WHERE u.response_id = json_extract(f.request_body, '$.previous_response_id'))
        FROM flows f WHERE f.id = ?""",
        [flow_id],
    ).fetchone()
    return (row[0], row[1]) if row else (None, None)


def turn_conversation(capture: sqlite_utils.Database, turn_id: str) -> str | None:
    """An f/conversation turn's conversation."""
    row = capture.execute("SELECT conversation_id FROM turns WHERE id = ?", [turn_id]).fetchone()
    return row[0] if row else None


# -- cost ------------------------------------------------------------------------------------

# What stands for `usage` in a capture made before it (schema 6), read as it is: no rows.
NO_USAGE = """(SELECT NULL AS flow_id, NULL AS response_id, NULL AS model, NULL AS service_tier,
    NULL AS finish_reason, NULL AS input_tokens, NULL AS cached_tokens, NULL AS output_tokens,
    NULL AS reasoning_tokens, NULL AS cost_usd, NULL AS pricing, NULL AS answered_at WHERE 0)"""


def _usage(capture: sqlite_utils.Database) -> str:
    return "usage" if capture["usage"].exists() else NO_USAGE


USAGE_COLUMNS = """u.model, u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens,
    u.cost_usd, u.pricing"""


def call_usage(capture: sqlite_utils.Database) -> dict[str, AnswerCost]:
    """For each call, the usage and cost of the answer that made it (Responses API calls)."""
    sql = f"""SELECT c.call_id, u.flow_id, u.answered_at, {USAGE_COLUMNS} FROM tool_calls c
        JOIN {_usage(capture)} u ON u.flow_id = c.turn_id"""
    return {row["call_id"]: AnswerCost.read(row) for row in capture.query(sql)}


# -- content (`--otel-content`) --------------------------------------------------------------


def request_body(capture: sqlite_utils.Database, flow_id: str) -> str | None:
    """A flow's request body as stored (redacted)."""
    row = capture.execute("SELECT request_body FROM flows WHERE id = ?", [flow_id]).fetchone()
    return row[0] if row else None


def response_text(capture: sqlite_utils.Database, flow_id: str) -> str | None:
    """A flow's answer as stored: its JSON body, else its raw events' text, in order."""
    row = capture.execute("SELECT response_body FROM flows WHERE id = ?", [flow_id]).fetchone()
    if row and row[0]:
        return str(row[0])
    events = capture.query("SELECT data, raw FROM events WHERE flow_id = ? ORDER BY seq", [flow_id])
    return "".join(event_text(event) for event in events) or None


def turn_messages(capture: sqlite_utils.Database, turn_id: str) -> list[MessageText]:
    """An f/conversation turn's messages, in the order first seen."""
    sql = """SELECT role, recipient, text FROM messages WHERE turn_id = ?
        ORDER BY first_seen_at, rowid"""
    return [MessageText.read(r) for r in capture.query(sql, [turn_id])]


def data_version(capture: sqlite_utils.Database) -> int:
    """A number that changes when another connection commits into the capture (no table is
    read: SQLite's `PRAGMA data_version`)."""
    return int(capture.execute("PRAGMA data_version").fetchone()[0])


def every_call(capture: sqlite_utils.Database) -> Iterator[CallPlace]:
    """Every call in the order made."""
    sql = """SELECT call_id, protocol, tool, namespace, recipient, turn_id FROM tool_calls
        ORDER BY called_at, rowid"""
    return map(CallPlace.read, capture.query(sql))


def answer_count(capture: sqlite_utils.Database) -> int:
    """How many answers reported their usage."""
    return int(capture.execute(f"SELECT count(*) FROM {_usage(capture)}").fetchone()[0])


def answer_costs(capture: sqlite_utils.Database) -> Iterator[AnswerCost]:
    """Each answer's usage and cost in the order answered."""
    sql = f"""SELECT u.flow_id, u.answered_at, {USAGE_COLUMNS} FROM {_usage(capture)} u
        ORDER BY u.answered_at, u.flow_id"""
    return map(AnswerCost.read, capture.query(sql))


def capture_cost(capture: sqlite_utils.Database) -> CaptureCost:
    """The whole capture's: answers, priced (how many have a cost), the four token sums and
    cost_usd (the sum of the priced ones)."""
    sql = f"""SELECT count(*) AS answers, count(cost_usd) AS priced,
        coalesce(sum(input_tokens), 0) AS input_tokens,
        coalesce(sum(cached_tokens), 0) AS cached_tokens,
        coalesce(sum(output_tokens), 0) AS output_tokens,
        coalesce(sum(reasoning_tokens), 0) AS reasoning_tokens,
        coalesce(sum(cost_usd), 0) AS cost_usd FROM {_usage(capture)}"""
    return CaptureCost.read(next(iter(capture.query(sql))))
