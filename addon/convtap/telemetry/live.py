"""`convtap record --otlp-endpoint URL`: each turn's spans sent as it ends, from a thread of the
recorder process, never in the proxy's way.

The thread reads what the recorder committed (its own connection, asking SQLite every half
second whether anything was: `PRAGMA data_version`), makes the spans of the turns that ended
and the calls that were answered since its last look (`convtap.telemetry.spans`, the same
spans `convtap export --otlp-endpoint` sends, with the same ids), and sends them. What it
remembers is bounded (the spans sent, 100,000 keys; a look takes at most 4,096 spans, the rest
at the next). A receiver that is slow, refuses or is gone costs only spans: a batch that fails
is dropped and counted, said once when it starts failing and counted again at the end; the
proxy forwards and the recorder records as ever, and `convtap export --otlp-endpoint` can send
the whole capture later.

The recorder learns the endpoint from its environment (`CONVTAP_OTLP_ENDPOINT`, and
`CONVTAP_OTEL_CONTENT=1` for content), which `convtap record` sets for the processes it starts.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from itertools import islice

import sqlite_utils
from opentelemetry.sdk.trace import ReadableSpan

from convtap.store.trace_queries import data_version
from convtap.telemetry.otlp import Sender
from convtap.telemetry.spans import Traces, capture_spans
from convtap.wire.bounded import Bounded

ENDPOINT = "CONVTAP_OTLP_ENDPOINT"
CONTENT = "CONVTAP_OTEL_CONTENT"
INTERVAL = 0.5  # seconds between two looks at the capture
TIMEOUT = 3.0  # seconds one batch may take to send, retries included
LOOK = 4096  # spans one look takes at most
SENT = 100_000  # spans remembered as sent (a turn that ends is looked at for a minute)
SLACK = 60.0  # seconds before the last end seen that a look goes back to (ends come late)


def span_key(span: ReadableSpan) -> str:
    """What a span is known by among those sent: its flow, or its call."""
    attributes = span.attributes or {}
    if attributes.get("gen_ai.operation.name") == "execute_tool":
        return f"call {attributes.get('gen_ai.tool.call.id')}"
    return str(attributes.get("convtap.flow.id"))


class LiveTraces:
    """The thread that sends each turn's spans as it ends (see the module's docstring)."""

    def __init__(
        self, url: str, connect: Callable[[], sqlite_utils.Database], *, content: bool = False,
        say: Callable[[str], None] | None = None,
    ) -> None:  # fmt: skip
        self.sender = Sender(url, TIMEOUT)
        self.connect = connect
        self.content = content
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.sent: Bounded[str, None] = Bounded(SENT)
        self.since: float | None = None
        self.version: int | None = None
        self.warned = False
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="convtap-otlp", daemon=True)

    def start(self) -> LiveTraces:
        self.thread.start()
        return self

    def close(self) -> None:
        """The last turns' spans, then a count of what could not be sent."""
        self.stopping.set()
        self.thread.join(INTERVAL + 4 * TIMEOUT)
        self.sender.close()
        if self.sender.lost:
            total = self.sender.lost + self.sender.sent
            self.say(f"convtap: {self.sender.lost} of {total} spans could not be sent to "
                     f"{self.sender.url} ({self.sender.reason}); the capture has every turn: "
                     "`convtap export --otlp-endpoint` sends them")  # fmt: skip

    def _run(self) -> None:
        db: sqlite_utils.Database | None = None
        traces: Traces | None = None
        try:
            while True:
                stopping = self.stopping.wait(INTERVAL)
                try:
                    if db is None:
                        db = self.connect()
                        traces = Traces(db)
                    assert traces is not None
                    while self.look(db, traces, final=stopping):
                        pass  # a look that took its fill: the rest at once
                except Exception as exc:
                    self._failing(f"the capture could not be read for traces: {exc}")
                if stopping:
                    return
        finally:
            if db is not None:
                with contextlib.suppress(Exception):
                    db.conn.close()

    def look(self, db: sqlite_utils.Database, traces: Traces, *, final: bool = False) -> bool:
        """Send what is new since the last look; True when it took all it may take at once."""
        version = data_version(db)
        if version == self.version and not final:
            return False
        since = None if self.since is None else self.since - SLACK
        fresh = capture_spans(db, since=since, content=self.content, traces=traces,
                              skip=self.sent.__contains__)  # fmt: skip
        spans = list(islice(fresh, LOOK))
        if len(spans) < LOOK:
            self.version = version
        if not spans:
            return False
        for span in spans:
            self.sent[span_key(span)] = None
        ends = [span.end_time for span in spans if span.end_time]
        if ends:
            self.since = max(self.since or 0.0, max(ends) / 1e9)
        if not self.sender.send(spans):
            self._failing(f"{self.sender.url} did not take them ({self.sender.reason})")
        return len(spans) == LOOK

    def _failing(self, why: str) -> None:
        if not self.warned:
            self.warned = True
            self.say(f"convtap: traces are not getting through: {why}; they are dropped and "
                     "counted, the recording goes on")  # fmt: skip


def from_environment(connect: Callable[[], sqlite_utils.Database]) -> LiveTraces | None:
    """The live traces the environment asks for (`CONVTAP_OTLP_ENDPOINT`), started; None when
    it asks for none."""
    url = os.environ.get(ENDPOINT)
    if not url:
        return None
    content = os.environ.get(CONTENT) == "1"
    return LiveTraces(url, connect, content=content).start()
