"""Spans out, by the official OpenTelemetry SDK's own encoder and exporter: as OTLP/JSON (one
`ExportTraceServiceRequest`, written as it is encoded, a batch at a time) or over OTLP/HTTP
(protobuf, `OTLPSpanExporter`, a batch per request).

OTLP/JSON is protobuf's JSON mapping with the deviations the OTLP specification makes: trace
and span ids are hex, not base64, and enumerations are integers. The exporter reads the usual
`OTEL_EXPORTER_OTLP_HEADERS` (a receiver's API key, say) and `OTEL_EXPORTER_OTLP_CERTIFICATE`.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

BATCH = 512  # spans encoded, written or sent at once
IDS = ("traceId", "spanId", "parentSpanId")
EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp.proto.http",
                    "opentelemetry.exporter.otlp.proto.http.trace_exporter")  # fmt: skip


class EndpointError(ValueError):
    """A URL that is no OTLP/HTTP endpoint."""


def traces_url(url: str) -> str:
    """The traces URL of an OTLP/HTTP endpoint: `url` as given, or with `/v1/traces` added
    when it has no path (as OTEL_EXPORTER_OTLP_ENDPOINT is read)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port out of range)
    except ValueError as exc:
        raise EndpointError(f"{url} is no URL ({exc})") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointError(f"{url} is no http:// or https:// URL")
    if parts.path in ("", "/"):
        parts = parts._replace(path="/v1/traces")
    return urlunsplit(parts)


def batches(spans: Iterable[ReadableSpan], size: int = BATCH) -> Iterator[list[ReadableSpan]]:
    it = iter(spans)
    while batch := list(islice(it, size)):
        yield batch


def write_json(spans: Iterable[ReadableSpan], handle: TextIO) -> int:
    """Every span, as one OTLP/JSON `ExportTraceServiceRequest` into `handle`; how many. All
    of convtap's spans share one resource and one scope."""
    count = 0
    for batch in batches(spans):
        request = MessageToDict(encode_spans(batch), use_integers_for_enums=True)
        for resource_spans in request["resourceSpans"]:
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    if count == 0:
                        head = {"resource": resource_spans.get("resource", {}),
                                "scope": scope_spans.get("scope", {})}  # fmt: skip
                        handle.write('{"resourceSpans": [{"resource": '
                                     f'{json.dumps(head["resource"])}, "scopeSpans": [{{"scope": '
                                     f'{json.dumps(head["scope"])}, "spans": [\n')  # fmt: skip
                    else:
                        handle.write(",\n")
                    handle.write(json.dumps(hex_ids(span), ensure_ascii=False))
                    count += 1
    handle.write("\n]}]}]}\n" if count else '{"resourceSpans": []}\n')
    return count


def hex_ids(span: dict[str, Any]) -> dict[str, Any]:
    """A span's ids (and its links') in hex, as OTLP/JSON has them."""
    for key in IDS:
        if key in span:
            span[key] = base64.b64decode(span[key]).hex()
    for link in span.get("links", []):
        hex_ids(link)
    return span


class Sender:
    """Spans over OTLP/HTTP to one endpoint; what failed is counted with the last reason."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = traces_url(url)
        self.exporter = OTLPSpanExporter(endpoint=self.url, timeout=timeout)
        self.sent = 0
        self.lost = 0
        self.reason: str | None = None
        self._said = _Said()
        for name in EXPORTER_LOGGERS:  # its reasons come to `reason`, not to stderr
            logger = logging.getLogger(name)
            logger.addHandler(self._said)
            logger.propagate = False

    def send(self, spans: Iterable[ReadableSpan]) -> bool:
        """Send them, a batch at a time; False when a batch failed."""
        ok = True
        for batch in batches(spans):
            self._said.last = None
            try:
                result = self.exporter.export(batch)
            except Exception as exc:
                result, self._said.last = SpanExportResult.FAILURE, str(exc)
            if result is SpanExportResult.SUCCESS:
                self.sent += len(batch)
            else:
                self.lost += len(batch)
                self.reason = self._said.last or "the endpoint refused them"
                ok = False
        return ok

    def close(self) -> None:
        self.exporter.shutdown()  # type: ignore[no-untyped-call]
        for name in EXPORTER_LOGGERS:
            logging.getLogger(name).removeHandler(self._said)


class _Said(logging.Handler):
    """The last thing the exporter logged (why a batch failed)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage().splitlines()[0][:300]
