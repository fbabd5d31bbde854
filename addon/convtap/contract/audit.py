"""`convtap audit`: a session replayed into a fresh auditor, in time order, gives the findings.

The timeline is plain data (what a capture recorded, read by `convtap.record`); this module
never opens a database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from convtap.contract.auditor import Auditor, is_refusal
from convtap.contract.registry import SEVERITIES, Finding
from convtap.contract.returns import Call
from convtap.wire.session import read_turn_request


@dataclass(frozen=True)
class Prepared:
    conversation_id: str | None
    at: float


@dataclass(frozen=True)
class CallMade:
    call: Call


@dataclass(frozen=True)
class ConversationRequest:
    flow_id: str
    body: Any
    at: float
    status: int | None = None  # the HTTP status the server answered with


@dataclass(frozen=True)
class ClientCallMade:
    """A Responses API client call (function_call, custom_tool_call, client tool_search_call)."""

    flow_id: str
    response_id: str | None
    call: dict[str, Any]
    at: float


@dataclass(frozen=True)
class ResponsesRequest:
    flow_id: str
    body: Any
    at: float
    response_id: str | None = None  # the response that answered it, when the capture knows
    socket: str | None = None  # the socket a WebSocket-mode turn came over
    ended_at: float | None = None  # when its response ended


@dataclass(frozen=True)
class MessageShown:
    conversation_id: str | None
    message_id: str


Happening = (
    Prepared | CallMade | ConversationRequest | ClientCallMade | ResponsesRequest | MessageShown
)


@dataclass
class AuditResult:
    calls: int
    returns: int
    findings: list[Finding]
    stored: bool = True  # the findings went into the capture's findings table

    def summary(self) -> dict[str, Any]:
        counts = {severity: 0 for severity in SEVERITIES}
        for finding in self.findings:
            counts[finding.severity] += 1
        return {"calls": self.calls, "returns": self.returns, "findings": counts}

    def to_json(self) -> dict[str, Any]:
        """`convtap audit --format json` (a contract)."""
        return {"summary": self.summary(), "findings": [asdict(f) for f in self.findings]}


def audit(timeline: Iterable[Happening]) -> tuple[list[Finding], int]:
    """Every finding of a session, and how many returns and outputs were checked."""
    auditor = Auditor()
    findings = replay(auditor, timeline)
    findings += auditor.finish()
    return findings, auditor.answers


def replay(auditor: Auditor, timeline: Iterable[Happening]) -> list[Finding]:
    """Feed a session to an auditor (which then knows it); the findings on the way."""
    findings: list[Finding] = []
    for item in timeline:
        match item:
            case Prepared(conversation_id, at):
                auditor.prepare(conversation_id, at)
            case CallMade(call):
                findings += auditor.call(call)
            case ConversationRequest(flow_id, body, at, status):
                findings += auditor.request(flow_id, body, at, read_turn_request(body))
                if is_refusal(status):
                    auditor.refused(flow_id)
            case ClientCallMade(flow_id, response_id, call, at):
                findings += auditor.responses.response(flow_id, response_id, [call], at)
            case ResponsesRequest(flow_id, body, at, response_id, socket, ended_at):
                if socket is not None:
                    findings += auditor.responses.socket_turn(flow_id, socket, body, at, ended_at)
                findings += auditor.responses.request(flow_id, body, at)
                if response_id is not None:  # known before its calls come, with or without any
                    auditor.responses.response(flow_id, response_id, [], at)
            case MessageShown(conversation_id, message_id):
                auditor.seen(conversation_id, [message_id])
    return findings
