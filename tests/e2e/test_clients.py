"""Real clients, tools the mock has never seen: the OpenAI Agents SDK (streamed and not), the
plain `openai` client (streamed or not, stateless or with previous_response_id) and an
f/conversation client, each through `convtap record` in front of
`convtap mock --scenario declared`. Every tool runs once with arguments that fit its schema,
and the audit finds no error; a client answering with the item id gets the rule that says so."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from convtap.mock.refclient import RefClient
from convtap.mock.server import MockServer
from jsonschema import Draft202012Validator

from tests.harness import capture_bytes, mitmdump, record
from tests.runner import convtap

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = Path(__file__).resolve().parent / "clients"


def clients_python() -> Path:
    found = Path(os.environ.get("CONVTAP_CLIENTS_PYTHON", ROOT / ".venv-clients/bin/python"))
    if not found.exists():
        pytest.skip("the SDK clients' virtualenv is missing: `make test` creates .venv-clients")
    return found


def recorded(
    tmp_path: Path, run: Any, *, lenient: bool = False
) -> tuple[Path, list[dict[str, Any]]]:
    """Run `run(base_url)` against record + mock declared; the capture and the audit.
    `lenient`: the mock takes what the real API refuses (a faulty client runs to its end)."""
    db = tmp_path / "capture.db"
    mock_server = MockServer("declared", seed=5, lenient=lenient)
    with mock_server as mock, record(db, mock.port, tmp_path) as rec:
        run(f"http://127.0.0.1:{rec.port}")
        rec.proc.send_signal(signal.SIGINT)
        out = rec.wait(120)
    assert rec.proc.returncode == 0, out[-2000:]
    audit = convtap("audit", "--db", str(db), "--format", "json", "--fail-on", "never")
    return db, json.loads(audit.stdout)["findings"]


def run_client(script: str, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run([str(clients_python()), str(CLIENTS / script), *args],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def check_tools(lines: list[dict[str, Any]]) -> None:
    """Each declared tool ran exactly once, with arguments its schema accepts; then an answer."""
    schemas = next(line["schemas"] for line in lines if "schemas" in line)
    runs = [line for line in lines if "tool" in line]
    assert sorted(run["tool"] for run in runs) == sorted(schemas)
    for run in runs:
        Draft202012Validator(schemas[run["tool"]]).validate(run["arguments"])
    assert any("final" in line for line in lines)


def errors(findings: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(f["rule"], f["message"]) for f in findings if f["severity"] == "error"]


@pytest.mark.parametrize("mode", ["run", "streamed"])
def test_an_agents_sdk_agent_runs_to_the_end(tmp_path: Path, mode: str) -> None:
    lines: list[dict[str, Any]] = []

    def run(base: str) -> None:
        lines.extend(run_client("agents_client.py", base + "/v1", mode))

    db, findings = recorded(tmp_path, run)
    check_tools(lines)
    assert errors(findings) == []
    calls = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert sorted(c["tool"] for c in calls) == ["convert_price", "lookup_order"]
    assert all(c["answered"] and c["protocol"] == "responses" for c in calls)
    assert b"sk-proj-kkkk" not in capture_bytes(db)  # the API key is not stored


@pytest.mark.parametrize("mode", ["run", "streamed"])
def test_an_agents_sdk_agent_in_a_server_side_conversation_gets_no_error(
    tmp_path: Path, mode: str
) -> None:
    """`conversation_id`: each request carries `conversation` and only its new items, the
    outputs without the calls they answer (the server holds them)."""
    lines: list[dict[str, Any]] = []

    def run(base: str) -> None:
        lines.extend(run_client("agents_client.py", base + "/v1", mode, "--conversation"))

    db, findings = recorded(tmp_path, run)
    check_tools(lines)
    assert errors(findings) == [] and findings == []
    with sqlite3.connect(db) as conn:
        bodies = [json.loads(b) for (b,) in conn.execute(
            "SELECT request_body FROM flows WHERE kind = 'responses'")]  # fmt: skip
    assert all(body.get("conversation") == "conv_agents" for body in bodies)
    calls = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert sorted(c["tool"] for c in calls) == ["convert_price", "lookup_order"]
    assert all(c["answered"] for c in calls)


@pytest.mark.parametrize(
    "flags", [[], ["--stream"], ["--previous"], ["--stream", "--previous"]], ids=str
)
def test_the_openai_client_runs_to_the_end(tmp_path: Path, flags: list[str]) -> None:
    lines: list[dict[str, Any]] = []

    def run(base: str) -> None:
        lines.extend(run_client("openai_client.py", base + "/v1", *flags))

    _, findings = recorded(tmp_path, run)
    check_tools(lines)
    assert errors(findings) == []


@pytest.mark.parametrize("flags", [["--rich"], ["--rich", "--previous", "--stream"]], ids=str)
def test_the_openai_client_answering_with_input_content_gets_no_error(
    tmp_path: Path, flags: list[str]
) -> None:
    """A function_call_output whose output is a list of input_text and input_image items (the
    SDK's type, which the real API takes): no error, every call answered."""
    lines: list[dict[str, Any]] = []

    def run(base: str) -> None:
        lines.extend(run_client("openai_client.py", base + "/v1", *flags))

    db, findings = recorded(tmp_path, run)
    check_tools(lines)
    assert errors(findings) == []
    calls = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert calls and all(c["answered"] for c in calls)


def test_a_client_answering_with_the_item_id_is_caught(tmp_path: Path) -> None:
    def run(base: str) -> None:
        run_client("openai_client.py", base + "/v1", "--faulty")

    _, findings = recorded(tmp_path, run, lenient=True)
    assert {rule for rule, _ in errors(findings)} == {"responses-output-call-id"}


def socket_kinds(db: Path) -> list[tuple[str, str | None]]:
    """(kind, source) of every flow: the sockets and the turns made over them."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT DISTINCT kind, source FROM flows ORDER BY 1, 2").fetchall()


@pytest.mark.parametrize("mode", ["run", "streamed"])
def test_an_agents_sdk_agent_runs_over_websocket_mode(tmp_path: Path, mode: str) -> None:
    """`responses_websocket_session`: the whole run over one socket, through the recorder:
    every call listed with its output, answered and accepted, and no error in the audit."""
    lines: list[dict[str, Any]] = []

    def run(base: str) -> None:
        lines.extend(run_client("agents_client.py", base + "/v1", mode, "--websocket"))

    db, findings = recorded(tmp_path, run)
    check_tools(lines)
    assert errors(findings) == []
    calls = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert sorted(c["tool"] for c in calls) == ["convert_price", "lookup_order"]
    assert all(c["answered"] and c["accepted"] and c["protocol"] == "responses" for c in calls)
    assert socket_kinds(db) == [("responses", "socket"), ("responses-socket", "live")]


@pytest.mark.parametrize("flags", [["--previous"], []], ids=["previous", "stateless"])
def test_the_openai_client_runs_over_websocket_mode(tmp_path: Path, flags: list[str]) -> None:
    """`client.responses.connect()`: creates and their responses over one socket."""
    lines: list[dict[str, Any]] = []

    def run(base: str) -> None:
        lines.extend(run_client("openai_client.py", base + "/v1", "--websocket", *flags))

    db, findings = recorded(tmp_path, run)
    check_tools(lines)
    assert errors(findings) == []
    calls = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert len(calls) == 2 and all(c["answered"] and c["accepted"] for c in calls)


def test_a_wrong_call_id_over_the_socket_is_caught(tmp_path: Path) -> None:
    def run(base: str) -> None:
        run_client("openai_client.py", base + "/v1", "--websocket", "--previous", "--faulty")

    _, findings = recorded(tmp_path, run, lenient=True)
    assert {rule for rule, _ in errors(findings)} == {"responses-output-call-id"}


def test_a_wrong_call_id_over_the_socket_is_refused_as_the_real_api_does(tmp_path: Path) -> None:
    """The mock (strict, as the real API) answers the faulty create with an error frame,
    status 400: the client stops; the recording shows the refused turn, and the finding."""
    outcome: list[subprocess.CompletedProcess[str]] = []

    def run(base: str) -> None:
        args = [str(clients_python()), str(CLIENTS / "openai_client.py"), base + "/v1",
                "--websocket", "--previous", "--faulty"]  # fmt: skip
        outcome.append(subprocess.run(args, capture_output=True, text=True, timeout=120))

    db, findings = recorded(tmp_path, run)
    assert outcome[0].returncode != 0 and "refused the create" in outcome[0].stderr
    with sqlite3.connect(db) as conn:
        refused = conn.execute(
            "SELECT status, outcome FROM flows WHERE source = 'socket' AND status = 400"
        ).fetchall()
    assert refused == [(400, "error")]
    assert "responses-output-call-id" in {rule for rule, _ in errors(findings)}


def test_an_f_conversation_client_with_tools_the_mock_never_saw(tmp_path: Path) -> None:
    declared = [
        {"name": "handoff", "description": "Hand off to Work mode.", "type": "kwargs",
         "params": [{"name": "prompt", "required": True,
                     "type": {"type": "string", "description": "what to do"}}]},
        {"name": "open_ticket", "description": "Open a support ticket.", "type": "kwargs",
         "params": [{"name": "title", "required": True,
                     "type": {"type": "string", "description": "the title"}},
                    {"name": "priority", "required": True,
                     "type": {"type": "string", "description": "how urgent",
                              "enum": ["low", "high"]}}]},
        {"name": "attach_log", "description": "Attach a log.", "type": "kwargs",
         "params": [{"name": "path", "required": True,
                     "type": {"type": "string", "description": "where"}}]},
    ]  # fmt: skip
    made = []

    def run(base: str) -> None:
        made.extend(RefClient(base).run_declared(declared))

    db, findings = recorded(tmp_path, run)
    assert [call.tool for call in made] == ["open_ticket", "attach_log"]
    assert made[0].arguments is not None and made[0].arguments["priority"] in ("low", "high")
    assert errors(findings) == []
    calls = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert [(c["tool"], c["answered"], c["accepted"]) for c in calls] == [
        ("open_ticket", True, True),
        ("attach_log", True, True),
    ]


@pytest.mark.parametrize("transport", ["http", "websocket"])
def test_the_codex_cli_runs_against_the_mock(tmp_path: Path, transport: str) -> None:
    """The Codex CLI (npm @openai/codex), pointed at the recorder as a model provider, with no
    network, over HTTP and over WebSocket mode (`supports_websockets`): it runs to the end,
    every function tool it declares is called and answered once, and the audit finds no error.
    Its `function_call_output` of its own (a goal objective, no call_id) draws only the warning
    that says what it is."""
    codex = clients_python().parent.parent / "codex" / "node_modules" / ".bin" / "codex"
    if not codex.exists():
        pytest.skip("the Codex CLI is not installed (make test installs it where npm is)")
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    done: list[subprocess.CompletedProcess[str]] = []

    def run(base: str) -> None:
        config = ["-c", "model_provider=mock", "-c", 'model_providers.mock.name="mock"',
                  "-c", f'model_providers.mock.base_url="{base}/v1"',
                  "-c", 'model_providers.mock.wire_api="responses"',
                  "-c", 'model_providers.mock.env_key="OPENAI_API_KEY"']  # fmt: skip
        if transport == "websocket":
            config += ["-c", "model_providers.mock.supports_websockets=true"]
        env = {**os.environ, "CODEX_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test"}
        done.append(subprocess.run(
            [str(codex), "exec", "--skip-git-repo-check", "-s", "read-only", "-m", "gpt-5.1",
             *config, "say hi"],
            cwd=tmp_path / "work", env=env, capture_output=True, text=True, timeout=120,
        ))  # fmt: skip

    db, findings = recorded(tmp_path, run)
    assert done[0].returncode == 0, done[0].stderr[-2000:]
    assert "every tool you declared was called once" in done[0].stdout
    calls = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert len(calls) >= 3 and all(c["answered"] for c in calls)
    assert len({c["tool"] for c in calls}) == len(calls)  # each tool once
    assert errors(findings) == []
    named = [f for f in findings if f["rule"] == "responses-output-names-tool"]
    assert all(f["evidence"]["actual"]["namespace"] == "agent" for f in named)
    kinds = {kind for kind, _ in socket_kinds(db)}
    assert ("responses-socket" in kinds) == (transport == "websocket")


def test_a_socket_session_saved_by_mitmproxy_imports_to_the_same_calls(tmp_path: Path) -> None:
    """mitmproxy's own flow file of a WebSocket-mode session (`save_stream_file`), imported:
    the same calls, answered and accepted, as recorded live."""
    flows = tmp_path / "flows.mitm"
    with (
        MockServer("declared", seed=5) as mock,
        mitmdump(tmp_path, f"reverse:{mock.url}", f"save_stream_file={flows}") as proxy,
    ):
        run_client("openai_client.py", proxy.url + "/v1", "--websocket", "--previous")
        proxy.stop()

    def calls(db: Path) -> list[tuple[str, int, int]]:
        listed = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
        return sorted((c["tool"], c["answered"], c["accepted"]) for c in listed)

    imported = tmp_path / "imported.db"
    done = convtap("import", str(flows), "--db", str(imported))
    assert done.returncode == 0, done.stderr
    assert calls(imported) == calls(proxy.db) == [("get_weather", 1, 1), ("schedule", 1, 1)]
