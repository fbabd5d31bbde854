"""A capture's traces: `convtap export --format otlp` parsed by opentelemetry-proto as an
`ExportTraceServiceRequest`, spans that follow the GenAI conventions over HTTP, WebSocket mode
and f/conversation, and the same spans at a real receiver (Arize Phoenix, its own virtualenv,
read back through its REST API), sent by `export --otlp-endpoint` and live by `record
--otlp-endpoint`, which a dead endpoint costs spans and nothing else."""

from __future__ import annotations

import base64
import json
import os
import signal
import sqlite3
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from convtap.mock.server import MockServer
from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.e2e.test_clients import run_client
from tests.harness import free_port, record, wait_for
from tests.runner import convtap

ROOT = Path(__file__).resolve().parents[2]
CLIENT_RUNS = (["--stream", "--previous"], ["--websocket", "--previous"])


def sdk_session(tmp_path: Path, *flags: str) -> tuple[Path, str]:
    """The real `openai` client through `convtap record` (`flags` added) in front of the mock:
    a chain over HTTP (streamed) and one over WebSocket mode; the capture and what record said."""
    db = tmp_path / "capture.db"
    with MockServer("declared", seed=5) as mock, record(db, mock.port, tmp_path, *flags) as rec:
        for args in CLIENT_RUNS:
            run_client("openai_client.py", f"http://127.0.0.1:{rec.port}/v1", *args)
        rec.proc.send_signal(signal.SIGINT)
        said = rec.wait(120)
    assert rec.proc.returncode == 0, said[-2000:]
    return db, said


def exported(db: Path, *flags: str) -> list[dict[str, Any]]:
    """`convtap export --format otlp`: its spans, the request parsed by opentelemetry-proto."""
    ran = convtap("export", "--format", "otlp", "--db", str(db), *flags)
    assert ran.returncode == 0, ran.stderr
    document = json.loads(ran.stdout)
    request = ExportTraceServiceRequest()
    Parse(json.dumps(as_protobuf_json(json.loads(ran.stdout))), request)  # no unknown field
    assert len(request.resource_spans) == 1
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert len(request.resource_spans[0].scope_spans[0].spans) == len(spans)
    for parsed, span in zip(request.resource_spans[0].scope_spans[0].spans, spans, strict=True):
        assert parsed.trace_id.hex() == span["traceId"] and len(parsed.trace_id) == 16
        assert parsed.span_id.hex() == span["spanId"] and len(parsed.span_id) == 8
    return [flat(span) for span in spans]


def as_protobuf_json(value: Any) -> Any:
    """OTLP/JSON back into protobuf's JSON mapping (ids in base64) for its parser."""
    if isinstance(value, list):
        return [as_protobuf_json(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {k: base64.b64encode(bytes.fromhex(v)).decode()
            if k in ("traceId", "spanId", "parentSpanId") else as_protobuf_json(v)
            for k, v in value.items()}  # fmt: skip


def flat(span: dict[str, Any]) -> dict[str, Any]:
    """A span with its attributes (and its events') as a plain dict."""
    return {**span, "attributes": attributes(span.get("attributes", [])),
            "events": [{**e, "attributes": attributes(e.get("attributes", []))}
                       for e in span.get("events", [])]}  # fmt: skip


def attributes(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        ((kind, value),) = pair["value"].items()
        if kind == "arrayValue":
            value = [next(iter(v.values())) for v in value.get("values", [])]
        elif kind == "intValue":
            value = int(value)
        found[pair["key"]] = value
    return found


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


@pytest.fixture(scope="module")
def sdk_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sdk_session(tmp_path_factory.mktemp("sdk"))[0]


@pytest.mark.process  # its capture: `convtap record` and the SDK's client
def test_a_chat_span_per_model_turn_over_http_and_websocket(sdk_capture: Path) -> None:
    spans = exported(sdk_capture)
    chats = [s for s in spans if s["attributes"]["gen_ai.operation.name"] == "chat"]
    usage = {flow: (model, i, c, o, r, cost) for flow, model, i, c, o, r, cost in rows(
        sdk_capture, "SELECT flow_id, model, input_tokens, cached_tokens, output_tokens, "
                     "reasoning_tokens, cost_usd FROM usage")}  # fmt: skip
    flows = {flow for (flow,) in rows(sdk_capture, "SELECT id FROM flows WHERE kind = 'responses'")}
    assert {s["attributes"]["convtap.flow.id"] for s in chats} == flows == set(usage)
    assert {s["attributes"]["convtap.transport"] for s in chats} == {"http", "websocket"}
    for span in chats:
        a = span["attributes"]
        model, i, c, o, r, cost = usage[a["convtap.flow.id"]]
        assert span["name"] == f"chat {a['gen_ai.request.model']}" and span["kind"] == 3  # CLIENT
        assert a["gen_ai.provider.name"] == "openai" and "gen_ai.system" not in a
        assert a["gen_ai.response.model"] == model
        assert a["gen_ai.response.id"].startswith("resp_")
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.cache_read.input_tokens"],
                a["gen_ai.usage.output_tokens"],
                a["gen_ai.usage.reasoning.output_tokens"]) == (i, c, o, r)  # fmt: skip
        assert a["convtap.cost.usd"] == pytest.approx(cost) and cost > 0
        assert a["gen_ai.response.finish_reasons"] == ["stop"]
        total = (int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])) / 1e9
        assert 0 <= a["gen_ai.response.time_to_first_chunk"] <= total
    # one trace per chain: each client run chains its requests by previous_response_id
    assert len({s["traceId"] for s in chats}) == len(CLIENT_RUNS)


@pytest.mark.process  # its capture: `convtap record` and the SDK's client
def test_an_execute_tool_span_per_answered_call_from_the_call_to_the_request_with_its_output(
    sdk_capture: Path,
) -> None:
    spans = exported(sdk_capture)
    by_id = {s["spanId"]: s for s in spans}
    tools = [s for s in spans if s["attributes"]["gen_ai.operation.name"] == "execute_tool"]
    answered = rows(
        sdk_capture,
        """SELECT c.call_id, c.tool, c.turn_id, c.called_at, r.flow_id,
        r.returned_at FROM tool_calls c JOIN tool_returns r ON r.call_id = c.call_id""",
    )
    assert len(tools) == len(answered) > 0
    calls = {call_id: rest for call_id, *rest in answered}
    for span in tools:
        a = span["attributes"]
        tool, turn, called, answer, returned = calls[a["gen_ai.tool.call.id"]]
        assert span["name"] == f"execute_tool {tool}" and a["gen_ai.tool.name"] == tool
        assert a["gen_ai.tool.type"] == "function" and span["kind"] == 1  # INTERNAL
        parent = by_id[span["parentSpanId"]]  # the chat span of the turn that made the call
        assert parent["attributes"]["convtap.flow.id"] == turn
        assert parent["traceId"] == span["traceId"]
        (link,) = span["links"]
        assert by_id[link["spanId"]]["attributes"]["convtap.flow.id"] == answer
        assert int(span["startTimeUnixNano"]) == pytest.approx(called * 1e9, abs=1e3)
        assert int(span["endTimeUnixNano"]) == pytest.approx(returned * 1e9, abs=1e3)


def test_f_conversation_turns_and_findings_as_span_events(demo_capture: Path) -> None:
    spans = exported(demo_capture)
    chats = [s for s in spans if s["attributes"]["gen_ai.operation.name"] == "chat"]
    turns = {t for (t,) in rows(demo_capture, "SELECT id FROM turns")}
    conversation = [s for s in chats if s["attributes"]["convtap.protocol"] == "f/conversation"]
    assert {s["attributes"]["convtap.flow.id"] for s in conversation} == turns
    models = dict(rows(demo_capture, "SELECT id, model FROM turns"))
    for span in conversation:  # no usage on this protocol: no tokens, no price
        a = span["attributes"]
        assert a["gen_ai.request.model"] == models[a["convtap.flow.id"]]
        assert "gen_ai.usage.input_tokens" not in a and "convtap.cost.usd" not in a
    events = sorted(
        (e["attributes"]["convtap.rule.id"], e["attributes"]["convtap.finding.severity"])
        for s in spans for e in s["events"] if e["name"] == "convtap.finding"
    )  # fmt: skip
    assert events == sorted(rows(demo_capture, "SELECT rule, severity FROM findings"))
    assert events  # the demo's client makes mistakes


def test_no_content_unless_asked_and_then_only_what_is_stored(demo_capture: Path) -> None:
    keys = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result")  # fmt: skip
    assert not [k for s in exported(demo_capture) for k in keys if k in s["attributes"]]
    spans = exported(demo_capture, "--otel-content")
    found = {k for s in spans for k in keys if k in s["attributes"]}
    assert found == set(keys)
    stored = {a for (a,) in rows(demo_capture, "SELECT arguments FROM tool_calls")}
    for span in spans:
        a = span["attributes"]
        if "gen_ai.tool.call.arguments" in a:
            assert a["gen_ai.tool.call.arguments"] in stored
        for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
            for message in json.loads(a.get(key, "[]")):
                assert message["role"] and isinstance(message["parts"], list)


@pytest.mark.process  # its capture: `convtap record` and the SDK's client
def test_the_same_capture_gives_the_same_ids(sdk_capture: Path, tmp_path: Path) -> None:
    ids = [(s["traceId"], s["spanId"], s.get("parentSpanId")) for s in exported(sdk_capture)]
    again = [(s["traceId"], s["spanId"], s.get("parentSpanId")) for s in exported(sdk_capture)]
    assert ids == again and len(set(ids)) == len(ids)


# -- a real receiver ------------------------------------------------------------------------


def phoenix_binary() -> Path:
    found = Path(os.environ.get("CONVTAP_PHOENIX", ROOT / ".venv-phoenix/bin/phoenix"))
    if not found.exists():
        pytest.skip("Arize Phoenix's virtualenv is missing: `make test` creates .venv-phoenix")
    return found


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Arize Phoenix on 127.0.0.1 (its database in a temporary folder): its base URL."""
    port, grpc = free_port(), free_port()
    folder = tmp_path_factory.mktemp("phoenix")
    env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(grpc), "PHOENIX_WORKING_DIR": str(folder),
           "PHOENIX_TELEMETRY_ENABLED": "false"}  # fmt: skip
    log = (folder / "phoenix.log").open("wb")
    process = subprocess.Popen([phoenix_binary(), "serve"], env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        assert wait_for(lambda: _healthy(base), timeout=120), (folder / "phoenix.log").read_text()
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
        log.close()


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/healthz", timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def received(base: str, project: str, count: int) -> list[dict[str, Any]]:
    """The spans Phoenix holds for `project`, once it holds `count` (it writes them in the
    background)."""
    found: list[dict[str, Any]] = []

    def enough() -> bool:
        nonlocal found
        try:
            with urllib.request.urlopen(f"{base}/v1/projects/{project}/spans?limit=1000",
                                        timeout=10) as answer:  # fmt: skip
                found = json.loads(answer.read())["data"]
        except OSError:
            return False
        return len(found) >= count

    wait_for(enough, timeout=60)
    return found


def same_spans(phoenix_spans: list[dict[str, Any]], spans: list[dict[str, Any]]) -> None:
    """What Phoenix read is what the OTLP/JSON export says: ids, parents, names, attributes."""
    expected = {s["spanId"]: s for s in spans}
    assert sorted(s["context"]["span_id"] for s in phoenix_spans) == sorted(expected)
    for span in phoenix_spans:
        mine = expected[span["context"]["span_id"]]
        assert span["context"]["trace_id"] == mine["traceId"]
        assert span["parent_id"] == mine.get("parentSpanId")
        assert span["name"] == mine["name"]
        for key in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.tool.call.id",
                    "gen_ai.usage.output_tokens", "gen_ai.request.model"):  # fmt: skip
            assert span["attributes"].get(key) == mine["attributes"].get(key)
        assert [e["attributes"].get("convtap.rule.id") for e in span["events"]] == [
            e["attributes"]["convtap.rule.id"] for e in mine["events"]
        ]


@pytest.mark.process  # Phoenix runs as a process
def test_export_sends_the_spans_to_phoenix(
    phoenix: str, demo_capture: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=exported")
    ran = convtap("export", "--db", str(demo_capture), "--otlp-endpoint", phoenix)
    assert ran.returncode == 0, ran.stderr
    spans = exported(demo_capture)
    assert ran.stdout.strip() == f"sent {len(spans)} spans to {phoenix}/v1/traces"
    same_spans(received(phoenix, "exported", len(spans)), spans)


@pytest.mark.process
def test_record_sends_each_turn_live_to_phoenix(
    phoenix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=live")
    db, said = sdk_session(tmp_path, "--otlp-endpoint", f"{phoenix}/v1/traces")
    assert f"each turn's spans go to {phoenix}/v1/traces" in said
    assert "not getting through" not in said and "could not be sent" not in said
    spans = exported(db)
    same_spans(received(phoenix, "live", len(spans)), spans)


@pytest.mark.process
def test_a_dead_endpoint_costs_spans_and_nothing_else(tmp_path: Path, sdk_capture: Path) -> None:
    """The same session with its traces going nowhere records the same rows; the loss is said
    once while it lasts and counted at the end."""
    dead = f"http://127.0.0.1:{free_port()}/v1/traces"  # nothing listens there
    db, said = sdk_session(tmp_path, "--otlp-endpoint", dead)
    for table in ("flows", "tool_calls", "tool_returns", "usage", "events"):
        count = f"SELECT count(*) FROM {table}"
        assert rows(db, count) == rows(sdk_capture, count), table
    assert said.count("traces are not getting through") == 1
    spans = len(exported(db))
    assert f"{spans} of {spans} spans could not be sent to {dead}" in said


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["export", "--otlp-endpoint", "ftp://x"], "--otlp-endpoint: ftp://x is no http"),
        (["export", "--otlp-endpoint", "http://127.0.0.1:99999"], "is no URL"),
        (["export", "--format", "otlp", "--blank-words"], "--blank-words goes with --format har"),
        (["export", "--otel-content", "--output", "x.har"], "--otel-content goes with"),
        (["export"], "--output FILE.har is needed"),
        (["record", "--otlp-endpoint", "nowhere"], "--otlp-endpoint: nowhere is no http"),
        (["record", "--otel-content"], "--otel-content goes with --otlp-endpoint"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    ran = convtap(*args, "--db", str(tmp_path / "none.db"))
    assert ran.returncode == 2 and says in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1 and "Traceback" not in ran.stderr
    assert list(tmp_path.iterdir()) == []
