"""What Datasette shows of a capture (convtap's canned queries, the tables described) and how a
capture is told from any other SQLite file. Plain data and the standard library only: the
Datasette plugin (`datasette_plugin`) imports this module and nothing else of convtap's, so
that convtap installs into Datasette's environment without its own dependencies.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from convtap.vocab import CallKind, sql

APPLICATION_ID = 0x636F6E76  # "conv": `PRAGMA application_id` of every convtap capture
# What a capture made before the application id was set always has.
CAPTURE_TABLES = frozenset({"flows", "events", "turns", "tool_calls", "tool_returns", "findings"})

DESCRIPTION = (
    "A convtap capture: the f/conversation and Responses API traffic recorded, its tool calls "
    "and returns, and the findings of the audit. The canned queries are below the tables."
)

# Each canned query: a title, its SQL, and what it shows. A return pairs with its call as the
# store pairs them (`tool_returns.call_id`, set by the store's LINK statements; the
# `call_ledger` view follows it), for both protocols.
QUERIES: dict[str, dict[str, str]] = {
    "open_calls": {
        "title": "Open calls: calls the client must answer that got no return or output",
        "description": "f/conversation local calls and Responses API client calls (function, "
        "custom, tool search, …) with no return paired to them, the newest first.",
        "sql": f"""select call_id, protocol, tool, namespace, conversation_id,
  datetime(called_at, 'unixepoch') as called_at, complete
from call_ledger
where kind in ({sql(CallKind.LOCAL, CallKind.CLIENT)}) and not answered
order by called_at desc""",
    },
    "unaccepted_returns": {
        "title": "Returns the server has not shown as accepted yet",
        "description": "Answered calls whose return no completed continuation, conversation "
        "tree or (Responses API) complete answer took: those the server refused too.",
        # `accepted` is NULL where the ledger has nothing to judge by (a Responses API output
        # the server refused has no turn): not accepted either.
        "sql": """select call_id, protocol, tool, return_id, conversation_id,
  datetime(returned_at, 'unixepoch') as returned_at
from call_ledger
where answered and accepted is not 1
order by returned_at desc""",
    },
    "returns_per_client": {
        "title": "Tool returns and outputs per client (user agent)",
        "description": "The user agent of the request that carried each return: its turn's "
        "(f/conversation) or its flow's (a Responses API request).",
        "sql": """select coalesce(t.client, f.client, '(unknown)') as client, r.protocol,
  count(*) as returns, sum(r.call_id is null) as orphans,
  count(distinct r.conversation_id) as conversations
from tool_returns r
left join turns t on t.id = r.flow_id
left join flows f on f.id = r.flow_id
group by 1, 2
order by returns desc""",
    },
    "findings_by_rule": {
        "title": "Findings by rule",
        "description": "`convtap rules RULE` says what each rule checks and why.",
        "sql": """select rule, severity, count(*) as findings,
  count(distinct conversation_id) as conversations
from findings
group by rule, severity
order by findings desc""",
    },
    "search_messages": {
        "title": "Search message text",
        "description": "Full-text search (SQLite FTS5 syntax) over every message's text; an empty "
        "search finds nothing.",
        # Datasette runs the query with an empty :q when its page opens, and FTS5 refuses an
        # empty or blank query: that one is the empty phrase, which matches no row.
        "sql": """select m.id, m.role, m.recipient, m.conversation_id,
  snippet(messages_fts, 0, '[', ']', '…', 12) as match
from messages_fts join messages m on m.rowid = messages_fts.rowid
where messages_fts match (case when coalesce(trim(:q), '') = '' then '""' else :q end)
order by rank limit 100""",
    },
    "cost_by_model": {
        "title": "Cost and prompt cache per model",
        "description": "Responses API answers per model: tokens, the share of input read from "
        "the prompt cache, and the cost in USD as genai-prices prices it (unknown when one "
        "answer is: see usage.pricing). f/conversation reports no usage.",
        "sql": """select coalesce(model, '(none)') as model, count(*) as answers,
  sum(input_tokens) as input_tokens, sum(cached_tokens) as cached_tokens,
  round(1.0 * sum(cached_tokens) / nullif(sum(input_tokens), 0), 4) as cache_hit_ratio,
  sum(output_tokens) as output_tokens, sum(reasoning_tokens) as reasoning_tokens,
  case when count(cost_usd) = count(*) then round(sum(cost_usd), 6) else 'unknown' end
    as cost_usd,
  count(*) - count(cost_usd) as unpriced
from usage
group by 1
order by sum(cost_usd) desc""",
    },
    "cost_by_chain": {
        "title": "Cost and prompt cache per conversation or chain",
        "description": "Responses API answers grouped by their server-side conversation, "
        "else by their chain (the first response their previous_response_id links lead back "
        "to): tokens, cache-hit ratio and cost in USD (unknown when one answer is).",
        "sql": """with recursive back(flow_id, at, depth) as (
  select flow_id, flow_id, 0 from usage
  union all
  select back.flow_id, p.flow_id, back.depth + 1
  from back join flows f on f.id = back.at
  join usage p on p.response_id = json_extract(f.request_body, '$.previous_response_id')
  where back.depth < 10000 and p.flow_id != back.flow_id
),
first as (
  select b.flow_id, (select at from back x where x.flow_id = b.flow_id
    order by depth desc limit 1) as root
  from back b group by b.flow_id
),
chained as (
  select u.*, coalesce(
    case json_type(rf.request_body, '$.conversation')
      when 'text' then json_extract(rf.request_body, '$.conversation')
      when 'object' then json_extract(rf.request_body, '$.conversation.id') end,
    'chain ' || coalesce(r.response_id, first.root)) as chain
  from usage u join first on first.flow_id = u.flow_id
  left join usage r on r.flow_id = first.root
  left join flows rf on rf.id = first.root
)
select chain, count(*) as answers, group_concat(distinct model) as models,
  datetime(min(answered_at), 'unixepoch') as first_answered_at,
  sum(input_tokens) as input_tokens, sum(cached_tokens) as cached_tokens,
  round(1.0 * sum(cached_tokens) / nullif(sum(input_tokens), 0), 4) as cache_hit_ratio,
  sum(output_tokens) as output_tokens, sum(reasoning_tokens) as reasoning_tokens,
  case when count(cost_usd) = count(*) then round(sum(cost_usd), 6) else 'unknown' end
    as cost_usd
from chained
group by chain
order by min(answered_at)""",
    },
}

TABLES: dict[str, str] = {
    "flows": "One row per recognised request: kind, redacted URL, headers and JSON bodies, "
    "client (user agent), outcome, convtap's own failure if any.",
    "events": "Each raw SSE event or WebSocket frame of a flow, in order, with its arrival "
    "time (redacted). Its text: convtap_event(data, raw) (data is NULL when raw holds its bytes "
    "zlib-compressed).",
    "turns": "One row per f/conversation turn: conversation, parent message, model, client, "
    "encoding, done / complete / truncated, event count, legs, decode errors.",
    "tool_signatures": "Each local_function_signatures entry a turn declared.",
    "messages": "Each message in its final state (JSON and queryable columns; its text once, "
    "in text: the whole JSON is convtap_message(json, text, json_without_text)); full-text "
    "search in messages_fts.",
    "tool_calls": "Each call: an assistant message to a recipient other than all, or a "
    "Responses API client call (protocol = responses).",
    "tool_returns": "Each tool message or Responses API output a client sent, paired with its "
    "call (call_id) by parent_message_id, else by the call_id in its body.",
    "conversation_nodes": "Each node seen in GET conversation/<id>.",
    "findings": "Each contract finding: written live by the recorder, rewritten by convtap audit.",
    "call_ledger": "Each call with its first return: answered → accepted → continued.",
    "usage": "Each Responses API answer that reported its usage: model, input (cached) and "
    "output (reasoning) tokens, and its cost in USD priced by genai-prices (cost_usd NULL: "
    "unknown, pricing says why).",
    "meta": "convtap's own bookkeeping: the schema version and the journal position.",
}


def database_metadata() -> dict[str, Any]:
    """What Datasette's metadata says of one capture: its description and its tables'."""
    return {
        "description": DESCRIPTION,
        "tables": {name: {"description": text} for name, text in TABLES.items()},
    }


def metadata(name: str) -> dict[str, Any]:
    """A Datasette metadata document for one capture served as `name`, its canned queries
    included: for a Datasette without convtap's plugin (`datasette DB -m FILE`)."""
    queries = {key: dict(query) for key, query in QUERIES.items()}
    return {"databases": {name: {**database_metadata(), "queries": queries}}}


def is_capture(conn: sqlite3.Connection) -> bool:
    """convtap's own database: marked with its application id (SQLite's header field for
    telling one application's files from another's), or made by a convtap from before the mark
    (then it has convtap's tables). Another application's file is neither."""
    marked = int(conn.execute("PRAGMA application_id").fetchone()[0])
    if marked:
        return marked == APPLICATION_ID
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return names >= CAPTURE_TABLES


def is_capture_file(path: str | Path) -> bool:
    """Whether the SQLite file at `path` is a capture, read without changing it; False for
    what cannot be read as SQLite."""
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        return is_capture(conn)
    except sqlite3.Error:
        return False
    finally:
        conn.close()
