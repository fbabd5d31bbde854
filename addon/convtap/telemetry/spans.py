"""A capture as OpenTelemetry spans, in the GenAI semantic conventions (the `gen_ai.*`
attributes as the conventions' own repository has them: `gen_ai.provider.name`, which replaced
`gen_ai.system`).

- **One trace per conversation or chain.** An f/conversation turn's trace is its conversation's;
  a Responses API request's is its server-side `conversation`'s, else its chain's: the first
  response its `previous_response_id` links lead back to. Over HTTP and WebSocket mode alike.
- **A `chat` span per model turn** (kind CLIENT, named `chat {model}`): operation, provider
  (`openai`), request and response model, response id, usage (input, cached, output and
  reasoning tokens), finish reasons, time to the first event, the server, the client, and
  convtap's own: the protocol, the transport, the flow, and the answer's cost
  (`convtap.cost.usd`, or `convtap.cost.pricing` saying why it is unknown).
- **An `execute_tool` span per client tool call that was answered** (kind INTERNAL, a child of
  the chat span that made the call): from the call's completion to the start of the request
  that carried its output, which it links to. No SDK tracer sees this: how long the client took
  to run the tool.
- **Findings as span events** (`convtap.finding`: rule id, severity, message): on the call's
  tool span, else on the chat span of the flow they were found on.

Ids are derived from the capture's own (a hash of the conversation, the flow, the call), so the
same capture exported twice, or exported after it was sent live, gives the same traces.
Message content goes only with `content` (the conventions' opt-in), and is what the capture
stores: redacted (`convtap.telemetry.content`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from functools import cache
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

import sqlite_utils
from opentelemetry.sdk.environment_variables import OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from convtap.store.trace_queries import (
    answered_calls,
    findings_of_call,
    findings_of_flow,
    flow_chain_link,
    model_turns,
    turn_conversation,
)
from convtap.store.views import AnsweredCall, ModelTurn, StoredFinding
from convtap.telemetry import content as message_content
from convtap.telemetry.cost import PROVIDER
from convtap.vocab import WireProtocol
from convtap.wire.bounded import Bounded
from convtap.wire.responses import qualified_name

NS = 1_000_000_000
MEMO = 100_000  # flows whose trace is remembered (past it, asked of the capture again)
# The calls' tables name f/conversation so; the spans as the turns' do.
PROTOCOLS = {WireProtocol.CONVERSATION: "f/conversation"}
MAX_FINDINGS = 128  # events on one span (the SDK's own default limit)


def _version() -> str:
    try:
        return metadata.version("convtap")
    except metadata.PackageNotFoundError:
        return "unknown"


SCOPE = InstrumentationScope("convtap", _version())


def resource() -> Resource:
    """`service.name` convtap (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES add to it, as
    in any OpenTelemetry SDK): one while they stay the same, so that every span shares it."""
    return _resource(os.environ.get(OTEL_RESOURCE_ATTRIBUTES), os.environ.get(OTEL_SERVICE_NAME))


@cache
def _resource(attributes: str | None, service: str | None) -> Resource:
    return Resource.create({"service.name": "convtap", "service.version": _version()})


def trace_id(key: str) -> int:
    return int.from_bytes(hashlib.sha256(b"convtap trace " + key.encode()).digest()[:16]) or 1


def span_id(key: str) -> int:
    return int.from_bytes(hashlib.sha256(b"convtap span " + key.encode()).digest()[:8]) or 1


def _context(trace: str, span: str) -> SpanContext:
    return SpanContext(trace_id(trace), span_id(span), is_remote=False,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))  # fmt: skip


def _ns(seconds: float) -> int:
    return int(seconds * NS)


class Traces:
    """Which trace a turn belongs to (see the module's docstring), remembered for the turns
    seen (bounded) and asked of the capture for the others."""

    def __init__(self, capture: sqlite_utils.Database) -> None:
        self.capture = capture
        self.known: Bounded[str, str] = Bounded(MEMO)

    def of_turn(self, row: ModelTurn) -> str:
        """The trace of a `model_turns` row."""
        if row.protocol == "f/conversation":
            key = f"conversation {row.conversation_id or row.id}"
        else:
            key = self._of_request(row.id, row.conversation_id)
        self.known[row.id] = key
        return key

    def of_flow(self, protocol: str, flow_id: str) -> str:
        """The trace of a turn known by its flow alone (a call's)."""
        if (key := self.known.get(flow_id)) is not None:
            return key
        if protocol == "f/conversation":
            key = f"conversation {turn_conversation(self.capture, flow_id) or flow_id}"
        else:
            key = self._of_request(flow_id, flow_chain_link(self.capture, flow_id)[0])
        self.known[flow_id] = key
        return key

    def _of_request(self, flow_id: str, conversation: str | None) -> str:
        """A Responses request's trace: its conversation's, else its chain's first flow's."""
        if conversation:
            return f"conversation {conversation}"
        seen: set[str] = set()
        current = flow_id
        while current not in seen:
            seen.add(current)
            if current != flow_id and (key := self.known.get(current)) is not None:
                return key
            found, previous = flow_chain_link(self.capture, current)
            if found:
                return f"conversation {found}"
            if previous is None:
                break
            current = previous
        return f"chain {current}"


def chat_span(
    row: ModelTurn, trace: str, findings: list[StoredFinding], content: dict[str, str]
) -> ReadableSpan:
    """The `chat` span of a `model_turns` row."""
    model = row.request_model or row.response_model
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": model,
        "gen_ai.response.model": row.response_model,
        "gen_ai.response.id": row.response_id,
        "gen_ai.conversation.id": row.conversation_id,
        "gen_ai.request.stream": None if row.stream is None else bool(row.stream),
        "gen_ai.usage.input_tokens": row.input_tokens,
        "gen_ai.usage.output_tokens": row.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": row.cached_tokens,
        "gen_ai.usage.reasoning.output_tokens": row.reasoning_tokens,
        "gen_ai.response.finish_reasons": _finish(row.finish_reason),
        "openai.api.type": "responses" if row.protocol == WireProtocol.RESPONSES else None,
        "user_agent.original": row.client,
        "convtap.protocol": row.protocol,
        "convtap.transport": row.transport,
        "convtap.flow.id": row.id,
        "convtap.cost.usd": row.cost_usd,
        "convtap.cost.pricing": row.pricing,
        **_server(row.host, row.url),
        **content,
    }
    if row.first_at is not None:
        attributes["gen_ai.response.time_to_first_chunk"] = max(row.first_at - row.started_at, 0.0)
    status = Status(StatusCode.UNSET)
    failed = row.status is not None and row.status >= 400
    if failed or row.outcome not in (None, "complete"):
        attributes["error.type"] = str(row.status) if failed else "_OTHER"
        status = Status(StatusCode.ERROR, row.outcome or f"HTTP {row.status}")
    start, end = row.started_at, max(row.ended_at, row.started_at)
    return ReadableSpan(
        name=f"chat {model}" if model else "chat",
        context=_context(trace, row.id),
        resource=resource(),
        attributes={k: v for k, v in attributes.items() if v is not None},
        events=_events(findings, start, end),
        kind=SpanKind.CLIENT,
        instrumentation_scope=SCOPE,
        status=status,
        start_time=_ns(start),
        end_time=_ns(end),
    )


def tool_span(
    row: AnsweredCall, trace: str, findings: list[StoredFinding], content: dict[str, str]
) -> ReadableSpan:
    """The `execute_tool` span of an `answered_calls` row."""
    protocol = PROTOCOLS.get(row.protocol, row.protocol)
    tool, responses = row.tool, row.protocol == WireProtocol.RESPONSES
    if responses:
        tool = qualified_name(row.namespace, row.tool) or row.tool
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool or "unknown",
        "gen_ai.tool.call.id": row.call_id,
        # run by the client: the conventions' "function" (an "extension" runs agent-side)
        "gen_ai.tool.type": "function",
        "convtap.protocol": protocol,
        "convtap.call.kind": row.kind,
        "convtap.call.type": row.recipient if responses else None,
        "convtap.flow.id": row.return_flow_id,
        **content,
    }
    start, end = row.called_at, max(row.returned_at, row.called_at)
    answer = _context(trace, row.return_flow_id)
    return ReadableSpan(
        name=f"execute_tool {tool}" if tool else "execute_tool",
        context=_context(trace, f"call {row.call_id}"),
        parent=_context(trace, row.turn_id),
        resource=resource(),
        attributes={k: v for k, v in attributes.items() if v is not None},
        events=_events(findings, start, end),
        links=[Link(answer, {"convtap.link": "the request that carried the output"})],
        kind=SpanKind.INTERNAL,
        instrumentation_scope=SCOPE,
        start_time=_ns(start),
        end_time=_ns(end),
    )


def _finish(reason: str | None) -> list[str] | None:
    """Why the answer ended, in the conventions' words where they have one: a Responses
    answer `completed` is `stop`; an incomplete one says why (`max_output_tokens`, ...)."""
    if not reason:
        return None
    return ["stop" if reason == "completed" else reason]


def _server(host: str | None, url: str | None) -> dict[str, Any]:
    if not host:
        return {}
    try:
        parts = urlsplit(url or "")
        port = parts.port or {"http": 80, "ws": 80, "https": 443, "wss": 443}.get(parts.scheme)
    except ValueError:
        port = None
    return {"server.address": host, "server.port": port}


def _events(findings: list[StoredFinding], start: float, end: float) -> list[Event]:
    """Findings as span events, at the time they were made (within the span)."""
    return [
        Event("convtap.finding", {
            "convtap.rule.id": f.rule, "convtap.finding.severity": f.severity,
            "convtap.finding.message": f.message or "",
        }, timestamp=_ns(min(max(f.created_at or start, start), end)))
        for f in findings[:MAX_FINDINGS]
    ]  # fmt: skip


def capture_spans(
    capture: sqlite_utils.Database, *, since: float | None = None, content: bool = False,
    traces: Traces | None = None, skip: Callable[[str], bool] = lambda key: False,
) -> Iterator[ReadableSpan]:  # fmt: skip
    """Every span of a capture (what ended at or after `since`): the chat spans in the order
    their turns started, then the tool spans in the order they were answered. `skip(key)` leaves
    out a span already sent (its key: the flow id, or `call CALL_ID`)."""
    traces = traces or Traces(capture)
    for turn in model_turns(capture, since):
        trace = traces.of_turn(turn)
        if skip(turn.id):
            continue
        findings = findings_of_flow(capture, turn.id)
        extra = message_content.of_turn(capture, turn) if content else {}
        yield chat_span(turn, trace, findings, extra)
    for call in answered_calls(capture, since):
        if skip(f"call {call.call_id}"):
            continue
        trace = traces.of_flow(PROTOCOLS.get(call.protocol, call.protocol), call.turn_id)
        extra = message_content.of_call(call) if content else {}
        yield tool_span(call, trace, findings_of_call(capture, call.call_id), extra)
