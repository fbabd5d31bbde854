"""Each request of each conversation as the data the page draws: a step (an f/conversation turn,
a Responses API request) with its messages, its calls (each with its arguments, its returns, its
lifecycle and its findings), its returns that answer no recorded call and the findings on the
request itself, as plain JSON values. The page's own script renders them (only what is in view),
so the page stays small and opens at once whatever the capture's size.

`build_steps` reads any set of steps at once, a few queries per batch, the same for the whole
report as for the few steps a live page is sent when they change. A finding goes on its call
when the call is recorded (on the very return it names, when there is one), else on the first
return of its flow it names when that return answers no recorded call, else on its request: each
finding is placed exactly once.

The shape of a step (a value missing or null when there is none):

    {"c": conversation id ("" for none), "s": step id ("" for none), "kind": "turn" | "responses"
     | a flow's kind | "request", "at": when it started, "first": the earliest of its rows
     (when earlier), "h": {model, client, started, status, outcome, events, legs, ws,
     truncated, errors, failure}, "x": [lines of a Responses exchange], "i": [items in order]}

An item is `{"t": "m"}` a message (id, role, name, to, ch, st, ct, text, at), `{"t": "c"}` a call
(id, proto, tool, kind, to, name, item, at, args, msg: [channel, status], life: four [done, at] for
called, answered, accepted, continued; r: its returns, f: its findings on no particular return;
srv: true for a tool the server runs, which is owed no return), `{"t": "r"}` a return answering no
recorded call, `{"t": "f"}` a finding on the request. A return is {id, mid, flow, at, json, marks:
[[path, rules]], f} (and proto, tool, bcid when it answers no recorded call); a finding {id, rule,
sev, msg, exp, act} (`exp`, `act`: the evidence as JSON text).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

import sqlite_utils

from convtap.contract.registry import registry
from convtap.ingest.responses_text import item_line, request_lines
from convtap.store import timeline_queries as queries
from convtap.store.timeline_rows import (
    AnyFinding,
    AnyReturn,
    CallColumns,
    CallFinding,
    CallReturn,
    CallStages,
    StepFlow,
    StepMessage,
    StepTurn,
)
from convtap.vocab import CallKind, Endpoint, WireProtocol
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.responses import ResponsesStream, qualified_name

BATCH = 500  # steps read together
StepKey = tuple[str, str]  # (conversation key, step id)
Step = dict[str, Any]


def all_steps(capture: sqlite_utils.Database) -> Iterator[tuple[StepKey, Step]]:
    """Every step of the capture in page order: conversations by their earliest row (then their
    key), each one's steps by when they started (then their id); read `BATCH` at a time, so that
    memory stays flat whatever the capture's size."""
    keys = queries.step_keys(capture)
    while batch := list(islice(keys, BATCH)):
        built = build_steps(capture, {step for _, step in batch})
        for key in batch:
            if key in built:
                yield key, built[key]


def build_steps(capture: sqlite_utils.Database, steps: Iterable[str]) -> dict[StepKey, Step]:
    """The steps with these ids, in every conversation they have rows in."""
    rows = queries.step_rows(capture, steps)
    heads: dict[StepKey, Step] = {}
    items: dict[StepKey, list[tuple[tuple[Any, ...], dict[str, Any]]]] = defaultdict(list)
    for turn in rows.turns:
        heads[(turn.conv, turn.step)] = _turn_head(turn)
    flows = {flow.step: flow for flow in rows.flows}
    for flow in flows.values():
        if flow.kind == Endpoint.RESPONSES and flow.previous is not None:
            heads.setdefault((flow.previous, flow.step), _flow_head(capture, flow))
    calls = [m.call_id for m in rows.messages if m.call_id]
    calls += [c.call_id for c in rows.calls]
    built_calls = _calls(capture, calls)
    for m in rows.messages:
        value = built_calls.get(m.call_id) if m.call_id else None
        item = _call_item(value, m) if value is not None else _message(m)
        items[(m.conv, m.step)].append(((m.at or 0.0, "message", m.row_id), item))
    for c in rows.calls:
        if (value := built_calls.get(c.call_id)) is not None:
            items[(c.conv, c.step)].append(((c.at or 0.0, "call", c.row_id), value))
    orphans: dict[int, dict[str, Any]] = {}
    for r in rows.orphans:
        orphans[r.row_id] = item = {"t": "r", **_return(r, orphan=True)}
        items[(r.conv, r.step)].append(((r.returned_at or 0.0, "return", r.row_id), item))
    for fd in rows.findings:
        if fd.orphan in orphans:
            orphans[fd.orphan]["f"].append(_finding(fd))
        else:
            placed = {"t": "f", **_finding(fd)}
            items[(fd.conv, fd.step)].append(((fd.at or 0.0, "finding", fd.row_id), placed))
    for orphan in orphans.values():
        orphan["marks"] = _marks(orphan["json"], orphan["f"])
    for key in items:
        if key not in heads:
            known = flows.get(key[1])
            heads[key] = _flow_head(capture, known) if known else _bare_head()
    return {key: _step(key, head, items.get(key, [])) for key, head in heads.items()}


def _step(key: StepKey, head: Step, items: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> Step:
    items.sort(key=lambda pair: pair[0])
    times = [order[0] for order, _ in items if order[0]]
    at = head.pop("at", None)
    start = at if at is not None else min(times, default=0.0)
    step = {"c": key[0], "s": key[1], **head, "at": start, "i": [item for _, item in items]}
    first = min([start, *times])
    if first != start:  # else the page reads `at`
        step["first"] = first
    return step


def _pruned(value: dict[str, Any]) -> dict[str, Any]:
    """Without its empty values (a step's head, which is mostly empty)."""
    return {k: v for k, v in value.items() if v is not None}


def _turn_head(turn: StepTurn) -> Step:
    head = {
        "model": turn.model, "client": turn.client, "started": turn.started_at,
        "status": turn.status, "outcome": turn.outcome, "events": turn.event_count,
        "legs": turn.legs, "ws": turn.ws_topic, "truncated": turn.truncated or None,
        "errors": turn.errors or None, "failure": turn.failure,
    }  # fmt: skip
    return {"kind": "turn", "at": turn.started_at, "h": _pruned(head)}


def _flow_head(capture: sqlite_utils.Database, flow: StepFlow) -> Step:
    head = {"client": flow.client, "started": flow.started_at, "status": flow.status,
            "outcome": flow.outcome, "failure": flow.failure}  # fmt: skip
    kind = str(flow.kind or "request")
    exchange = _exchange(capture, flow) if kind == Endpoint.RESPONSES else []
    return {"kind": kind, "at": flow.started_at, "h": _pruned(head), "x": exchange or None}


def _bare_head() -> Step:
    return {"kind": "request"}


def _exchange(capture: sqlite_utils.Database, flow: StepFlow) -> list[str]:
    """A Responses request as a conversation reads it: its input, then its answer's items."""
    body = loads_or_none(flow.request_body)
    lines = request_lines(body) if isinstance(body, dict) else []
    stream = ResponsesStream()
    for text in queries.exchange_events(capture, flow.step):
        stream.feed(text.encode("utf-8", "surrogatepass"))
    parsed = loads_or_none(flow.response_body)
    if isinstance(parsed, dict):
        stream.decoder.response(parsed)
    return lines + [item_line(item) for item in stream.summary().output_items]


def _message(m: StepMessage) -> dict[str, Any]:
    return _pruned({"t": "m", "id": m.id, "role": m.role, "name": m.name,
                    "to": m.recipient, "ch": m.channel, "st": m.status,
                    "ct": m.content_type, "text": m.text, "at": m.at})  # fmt: skip


def _call_item(call: dict[str, Any], m: StepMessage) -> dict[str, Any]:
    return {**call, "msg": [m.channel, m.status]}


def _calls(capture: sqlite_utils.Database, call_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each call's item, read `BATCH` at a time."""
    built: dict[str, dict[str, Any]] = {}
    for start in range(0, len(call_ids), BATCH):
        rows = queries.call_rows(capture, call_ids[start : start + BATCH])
        ledger = {row.call_id: row for row in rows.ledger}
        returns: dict[str, list[CallReturn]] = defaultdict(list)
        for r in rows.returns:
            returns[r.call_id].append(r)
        findings: dict[str, list[CallFinding]] = defaultdict(list)
        for fd in rows.findings:
            findings[fd.call_id].append(fd)
        for call in rows.calls:
            call_id = call.call_id
            built[call_id] = _call(call, ledger.get(call_id), returns[call_id],
                                   findings[call_id])  # fmt: skip
    return built


def _call(
    call: CallColumns,
    ledger: CallStages | None,
    return_rows: list[CallReturn],
    finding_rows: list[CallFinding],
) -> dict[str, Any]:
    returns = [_return(r) for r in return_rows]
    loose: list[dict[str, Any]] = []
    for found in finding_rows:
        # The return the finding names, made by the request it was found in (two returns may
        # share a message id: a duplicate), else any return of that id, else the call itself.
        named = [(r, row) for r, row in zip(returns, return_rows, strict=True)
                 if found.return_id is not None
                 and found.return_id in (row.id, row.message_id)]  # fmt: skip
        on = next((r for r, row in named if row.flow_id == found.flow_id), None)
        on = on or (named[0][0] if named else None)
        (on["f"] if on is not None else loose).append(_finding(found))
    for r, row in zip(returns, return_rows, strict=True):
        r["marks"] = _marks(row.message, r["f"])
    first = return_rows[0] if return_rows else None
    done = [bool(getattr(ledger, stage)) if ledger else False
            for stage in ("answered", "accepted", "continued")]  # fmt: skip
    life = [
        [True, call.called_at],
        [done[0], first.returned_at if first else None],
        [done[1], _accepted_at(first) if first else None],
        [done[2], _continued_at(first) if first else None],
    ]
    name = qualified_name(call.namespace, call.tool)
    item: dict[str, Any] = {
        "t": "c", "id": call.call_id, "proto": call.protocol, "tool": call.tool,
        "kind": call.kind, "to": call.recipient, "item": call.item_id,
        "name": name if call.protocol == WireProtocol.RESPONSES else None,
        "at": call.called_at,
        "args": call.arguments or call.arguments_text or None,
        "json": bool(call.arguments) or None, "life": life, "r": returns, "f": loose or None,
        "srv": _server_run(call) or None,
    }  # fmt: skip
    return item


def _server_run(call: CallColumns) -> bool:
    """A tool the server runs inside the stream (`web.run`, `python`, an app's function): no
    return is owed by the client (docs/protocol.md, "Local tool calls")."""
    return call.protocol != WireProtocol.RESPONSES and call.kind not in (None, CallKind.LOCAL)


def _accepted_at(r: CallReturn) -> float | None:
    """The first sign the server took a return: its continuation completed, it showed in the
    conversation tree, or (Responses) the request carrying it was answered."""
    seen = [r.node_seen_at, r.turn_ended_at if r.stream_complete else None,
            r.flow_ended_at if r.protocol == WireProtocol.RESPONSES else None]  # fmt: skip
    return min((at for at in seen if at is not None), default=None)


def _continued_at(r: CallReturn) -> float | None:
    at: float | None = r.flow_ended_at if r.protocol == WireProtocol.RESPONSES else r.turn_ended_at
    return at


def _return(r: AnyReturn, *, orphan: bool = False) -> dict[str, Any]:
    """A return; one answering no recorded call says what it names (its tool, its body's
    call_id, its protocol): a call's returns have those on the call."""
    value: dict[str, Any] = {"id": r.id, "mid": r.message_id, "flow": r.flow_id,
                             "at": r.returned_at, "json": r.message, "f": []}  # fmt: skip
    if orphan:
        value.update(proto=r.protocol, tool=r.tool, bcid=r.body_call_id)
    return value


def _finding(row: AnyFinding) -> dict[str, Any]:
    evidence = loads_or_none(row.evidence)
    evidence = evidence if isinstance(evidence, dict) else {}
    return {"id": row.id, "rule": row.rule, "sev": row.severity,
            "msg": row.message or "", "exp": _json_text(evidence.get("expected")),
            "act": _json_text(evidence.get("actual"))}  # fmt: skip


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _marks(json_text: str | None, findings: list[dict[str, Any]]) -> list[list[Any]]:
    """The offending fields of a return's findings: for each, the path of the deepest part of it
    the return holds (for a missing field, its nearest parent there), with the rules naming it."""
    wanted: dict[tuple[str, ...], list[str]] = {}
    for finding in findings:
        rule = registry().get(finding["rule"])
        if rule is not None and rule.marks:
            wanted.setdefault(rule.marks, []).append(finding["rule"])
    if not wanted:
        return []
    value = loads_or_none(json_text)
    marks: dict[tuple[str, ...], set[str]] = {}
    for field, rules in wanted.items():
        if found := _deepest(value, field):
            marks.setdefault(found, set()).update(rules)
    return [[list(path), sorted(rules)] for path, rules in marks.items()]


def _deepest(value: Any, path: tuple[str, ...]) -> tuple[str, ...]:
    found: tuple[str, ...] = ()
    for key in path:
        if not isinstance(value, dict) or key not in value:
            break
        value, found = value[key], (*found, key)
    return found
