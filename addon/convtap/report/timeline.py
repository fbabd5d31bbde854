"""Each conversation of a capture as a timeline: its requests (an f/conversation turn, a
Responses API request), and in each the messages, the calls with their returns and lifecycle,
and every finding where it happened. Streamed: one SQL query per kind of row, all in page
order, merged; each call brings its returns and findings along as it is reached.

A finding goes on its call when the call is recorded (on the very return it names, when
there is one), else on the return it names when that return answers no recorded call, else
on its request. Each finding is placed exactly once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, groupby
from typing import Any

import sqlite_utils

from convtap.contract.registry import registry
from convtap.ingest.responses_text import item_line, request_lines
from convtap.store import report_queries as queries
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.responses import ResponsesStream, qualified_name


@dataclass(frozen=True)
class Finding:
    id: int
    rule: str
    severity: str
    message: str
    expected: Any
    actual: Any

    @classmethod
    def of(cls, row: dict[str, Any]) -> Finding:
        evidence = loads_or_none(row["evidence"])
        evidence = evidence if isinstance(evidence, dict) else {}
        return cls(row["id"], row["rule"], row["severity"], row["message"] or "",
                   evidence.get("expected"), evidence.get("actual"))  # fmt: skip


@dataclass(frozen=True)
class Message:
    id: str
    role: str | None
    name: str | None
    recipient: str | None
    channel: str | None
    status: str | None
    content_type: str | None
    text: str
    at: float | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> Message:
        return cls(row["id"], row["role"], row["name"], row["recipient"], row["channel"],
                   row["status"], row["content_type"], row["text"] or "",
                   row["seen_at"])  # fmt: skip


@dataclass
class Return:
    """A tool return (or a Responses output item), the findings made on it, and what shows the
    server took it (the times its lifecycle is read from)."""

    id: str
    message_id: str | None
    protocol: str | None
    flow_id: str | None
    tool: str | None
    body_call_id: str | None
    at: float | None
    message: str | None
    findings: list[Finding] = field(default_factory=list)
    turn_ended_at: float | None = None  # the turn its request opened
    stream_complete: bool = False
    flow_ended_at: float | None = None  # its request's response
    node_seen_at: float | None = None  # when GET conversation/<id> first showed it

    @classmethod
    def of(cls, row: dict[str, Any]) -> Return:
        return cls(row["id"], row["message_id"], row["protocol"], row["flow_id"], row["tool"],
                   row["body_call_id"], row["returned_at"], row["message"],
                   turn_ended_at=row.get("turn_ended_at"),
                   stream_complete=bool(row.get("stream_complete")),
                   flow_ended_at=row.get("flow_ended_at"),
                   node_seen_at=row.get("node_seen_at"))  # fmt: skip

    def names(self, return_id: str | None) -> bool:
        return return_id is not None and return_id in (self.id, self.message_id)

    @property
    def marks(self) -> dict[tuple[str, ...], list[str]]:
        """The offending fields of its findings, each with the rules that name it."""
        marks: dict[tuple[str, ...], list[str]] = {}
        for finding in self.findings:
            rule = registry().get(finding.rule)
            if rule is not None and rule.marks:  # where its field sits in the answer
                marks.setdefault(rule.marks, []).append(finding.rule)
        return marks

    @property
    def accepted_at(self) -> float | None:
        """The first sign the server took it: its continuation completed, it showed in the
        conversation tree, or (Responses) the request carrying it was answered."""
        seen = [self.node_seen_at, self.turn_ended_at if self.stream_complete else None,
                self.flow_ended_at if self.protocol == "responses" else None]  # fmt: skip
        return min((at for at in seen if at is not None), default=None)

    @property
    def continued_at(self) -> float | None:
        return self.flow_ended_at if self.protocol == "responses" else self.turn_ended_at


@dataclass(frozen=True)
class Stage:
    name: str  # called, answered, accepted, continued
    done: bool
    at: float | None  # None when done but its time is not known


@dataclass
class Call:
    call_id: str
    protocol: str | None
    tool: str | None
    kind: str | None
    recipient: str | None
    item_id: str | None
    called_at: float | None
    arguments: str | None  # JSON text, when the arguments parsed
    arguments_text: str
    message: Message | None
    stages: list[Stage]
    returns: list[Return]
    findings: list[Finding]  # those on no particular return
    namespace: str | None = None  # Responses API: the namespace tool of the function called

    @property
    def name(self) -> str | None:
        """The tool called, as a Responses client names it (`crm.lookup`)."""
        return qualified_name(self.namespace, self.tool)

    @property
    def flagged(self) -> bool:
        return bool(self.findings) or any(ret.findings for ret in self.returns)

    @property
    def server_run(self) -> bool:
        """A tool the server runs inside the stream (`web.run`, `python`, an app's function):
        no return is owed by the client (docs/protocol.md, "Local tool calls")."""
        return self.protocol != "responses" and self.kind not in (None, "local")


@dataclass(frozen=True)
class Item:
    kind: str  # message, call, return (answering no recorded call), finding (on a request)
    value: Message | Call | Return | Finding


@dataclass(frozen=True)
class Step:
    """One request of a conversation: an f/conversation turn, or a Responses API request."""

    id: str
    kind: str
    info: dict[str, Any]  # the turn's or the flow's columns; empty when neither is recorded
    items: Iterator[Item]
    exchange: list[str] = field(default_factory=list)  # a Responses request read as a dialogue


@dataclass(frozen=True)
class Conversation:
    id: str
    calls: int
    findings: int
    steps: Iterator[Step]

    @property
    def key(self) -> str:
        """What names it in the live page: an attribute reads back an id with a CR or a NUL in
        it changed (the HTML parser makes them LF and U+FFFD), a digest of it as it is."""
        id_bytes = (self.id or "").encode("utf-8", "surrogatepass")
        return hashlib.blake2b(id_bytes, digest_size=16).hexdigest()


def conversations(capture: sqlite_utils.Database) -> Iterator[Conversation]:
    """Every conversation in the order it was first seen, each a stream of its steps. Consume
    them in order: each is read from the same merged stream as the next."""
    merged = queries.timeline_rows(capture)
    for _, rows in groupby(merged, key=lambda r: (r["conv_at"], r["conv"])):
        yield _conversation(capture, rows)


def _conversation(capture: sqlite_utils.Database, rows: Iterator[dict[str, Any]]) -> Conversation:
    first = next(rows)
    return Conversation(first["conv"], int(first["conv_calls"]), int(first["conv_findings"]),
                        _steps(capture, chain([first], rows)))  # fmt: skip


def _steps(capture: sqlite_utils.Database, rows: Iterable[dict[str, Any]]) -> Iterator[Step]:
    for step_id, group in groupby(rows, key=lambda r: r["step"]):
        info = queries.step_info(capture, step_id)
        kind = "turn" if info.get("turn") else str(info.get("kind") or "request")
        items = (item for row in group if (item := _item(capture, row)) is not None)
        exchange = _exchange(capture, step_id) if kind == "responses" else []
        yield Step(step_id, kind, info, items, exchange)


def _exchange(capture: sqlite_utils.Database, step_id: str) -> list[str]:
    """A Responses request as a conversation reads it: its input, then its answer's items."""
    request, answer, events = queries.step_exchange(capture, step_id)
    body = loads_or_none(request) if request else None
    lines = request_lines(body) if isinstance(body, dict) else []
    stream = ResponsesStream()
    for text in events:
        stream.feed(text.encode("utf-8", "surrogatepass"))
    parsed = loads_or_none(answer) if answer else None
    if isinstance(parsed, dict):
        stream.decoder.response(parsed)
    return lines + [item_line(item) for item in stream.summary().output_items]


def _item(capture: sqlite_utils.Database, row: dict[str, Any]) -> Item | None:
    what = row["what"]
    if what == "message":
        message = Message.of(row)
        if row["call_id"] is not None:
            return Item("call", _call(capture, row["call_id"], message))
        return Item("message", message)
    if what == "call":
        return Item("call", _call(capture, row["call_id"], None))
    if what == "return":
        ret = Return.of(row)
        ret.findings = [Finding.of(f) for f in queries.orphan_findings(capture, ret.id)]
        return Item("return", ret)
    if what == "finding":
        return Item("finding", Finding.of(row))
    return None  # a step's own row: it only makes sure an empty step shows


def _call(capture: sqlite_utils.Database, call_id: str, message: Message | None) -> Call:
    row = queries.call_row(capture, call_id)
    returns = [Return.of(r) for r in queries.call_returns(capture, call_id)]
    loose: list[Finding] = []
    for found in queries.call_findings(capture, call_id):
        # The return the finding names, made by the request it was found in (two returns may
        # share a message id: a duplicate), else any return of that id, else the call itself.
        named = [r for r in returns if r.names(found["return_id"])]
        ret = next((r for r in named if r.flow_id == found["flow_id"]), None)
        ret = ret or (named[0] if named else None)
        (ret.findings if ret else loose).append(Finding.of(found))
    first = returns[0] if returns else None  # the one the ledger follows
    stages = [
        Stage("called", True, row["called_at"]),
        Stage("answered", bool(row["answered"]), first.at if first else None),
        Stage("accepted", bool(row["accepted"]), first.accepted_at if first else None),
        Stage("continued", bool(row["continued"]), first.continued_at if first else None),
    ]
    return Call(row["call_id"], row["protocol"], row["tool"], row["kind"], row["recipient"],
                row["item_id"], row["called_at"], row["arguments"], row["arguments_text"] or "",
                message, stages, returns, loose, row.get("namespace"))  # fmt: skip
