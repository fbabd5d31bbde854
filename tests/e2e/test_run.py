"""`convtap run -- COMMAND` around real clients, and `convtap mock --replay` of what it recorded.

Each client runs through `convtap run` against `convtap mock --scenario declared`, then through
`convtap run` again against `convtap mock --replay` of that capture: the same output, a clean
audit, and `convtap diff` of the two captures shows no change. A client whose tool changed gets a
replay miss naming the path, and the finding `replay-miss`, live and audited alike. Exit statuses,
Ctrl-C and the regular proxy (curl over HTTPS, trusting the CA bundle `run` made) too.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from convtap.mock.server import MockServer

from tests.e2e.test_clients import CLIENTS, clients_python
from tests.harness import record
from tests.runner import convtap

CONVTAP = [sys.executable, "-m", "convtap.cli"]
SUMMARY = re.compile(
    r"convtap run: (\d+) calls, (\d+) outputs, findings: (\d+) error, (\d+) warning, (\d+) info;"
    r" capture (.+)$",
    re.M,
)


def convtap_run(
    db: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CONVTAP, "run", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip


@contextmanager
def replaying(capture: Path, *flags: str) -> Iterator[str]:
    """`convtap mock --replay CAPTURE` on a free port; its URL."""
    proc = subprocess.Popen([*CONVTAP, "mock", "--replay", str(capture), "--port", "0", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"listening at (\S+)", line)
    assert match is not None, line + (proc.stderr.read() if proc.stderr else "")
    try:
        yield match.group(1)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def client(script: str, *args: str) -> list[str]:
    """A test client reading its base URL from OPENAI_BASE_URL (`-`)."""
    return [str(clients_python()), str(CLIENTS / script), "-", *args]


def said(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """The client's JSON lines (the summary line is not one)."""
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def summary(done: subprocess.CompletedProcess[str]) -> tuple[int, ...]:
    found = SUMMARY.findall(done.stdout)
    assert len(found) == 1, done.stdout + done.stderr
    return tuple(int(n) for n in found[0][:5])


def findings(db: Path) -> list[dict[str, Any]]:
    done = convtap("audit", "--db", str(db), "--format", "json", "--fail-on", "never")
    result: list[dict[str, Any]] = json.loads(done.stdout)["findings"]
    return result


def no_change(a: Path, b: Path) -> None:
    done = convtap("diff", str(a), str(b), "--format", "json", "--fail-on", "any")
    assert json.loads(done.stdout)["changes"] == [] and done.returncode == 0, done.stdout


PING_TOOL = {"type": "function", "name": "ping", "parameters": {"type": "object", "properties": {}}}
PING = {"model": "gpt-5.1", "input": "hi", "tools": [PING_TOOL]}
JSON = "content-type: application/json"

CLIENT_RUNS = [
    ("openai_client.py", []),
    ("openai_client.py", ["--stream"]),
    ("openai_client.py", ["--stream", "--previous"]),
    ("openai_client.py", ["--websocket", "--previous"]),
    ("agents_client.py", ["run"]),
    ("agents_client.py", ["streamed"]),
    ("agents_client.py", ["run", "--websocket"]),
]


Recorded = tuple[Path, subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def recorded_by_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Recorded]:
    """A client run by `convtap run` against `convtap mock --scenario declared`: its capture and
    what `run` said. Made once per client and flags: the tests that share a capture only read
    it (`convtap mock --replay` opens it read-only)."""
    made: dict[tuple[str, ...], Recorded] = {}

    def recorded(script: str, *flags: str) -> Recorded:
        if (script, *flags) not in made:
            db = tmp_path_factory.mktemp("recorded") / "recorded.db"
            with MockServer("declared", seed=5) as mock:
                done = convtap_run(db, "--upstream", mock.url, "--", *client(script, *flags))
            assert done.returncode == 0, done.stderr[-3000:]
            made[(script, *flags)] = db, done
        return made[(script, *flags)]

    return recorded


@pytest.mark.parametrize(("script", "flags"), CLIENT_RUNS, ids=lambda v: " ".join(v) or "json")
def test_a_client_recorded_by_run_replays_to_the_same_end(
    tmp_path: Path, recorded_by_run: Callable[..., Recorded], script: str, flags: list[str]
) -> None:
    recorded, first = recorded_by_run(script, *flags)
    replayed = tmp_path / "replayed.db"
    calls, outputs, errors, _, _ = summary(first)
    assert calls == outputs == 2 and errors == 0
    with replaying(recorded) as url:
        second = convtap_run(replayed, "--upstream", url, "--", *client(script, *flags))
    assert second.returncode == 0, second.stderr[-3000:]
    assert said(second) == said(first) and any("final" in line for line in said(first))
    assert summary(second) == summary(first)
    assert [f for f in findings(replayed) if f["severity"] == "error"] == []
    no_change(recorded, replayed)


def test_a_changed_tool_definition_is_a_replay_miss_naming_its_path(
    tmp_path: Path, recorded_by_run: Callable[..., Recorded]
) -> None:
    recorded, _ = recorded_by_run("openai_client.py", "--stream")
    replayed = tmp_path / "replayed.db"
    with replaying(recorded) as url:
        second = convtap_run(replayed, "--upstream", url, "--",
                             *client("openai_client.py", "--stream", "--changed-tool"))  # fmt: skip
    assert second.returncode == 1  # the client's own status: it was refused
    assert "replay miss" in second.stderr and "tools[]{function}.parameters" in second.stderr
    assert "country" not in second.stderr  # paths only: nothing of the tool's schema
    assert summary(second)[2] == 1  # the finding, counted in the summary
    missed = [f for f in findings(replayed) if f["rule"] == "replay-miss"]
    assert len(missed) == 1 and "tools[]{function}.parameters" in missed[0]["message"]


@pytest.mark.parametrize("flags", [["--stream"], ["--websocket", "--previous"]], ids=str)
def test_a_replay_miss_is_the_same_finding_live_and_audited(
    tmp_path: Path, recorded_by_run: Callable[..., Recorded], flags: list[str]
) -> None:
    """Recorded through `convtap record`: the finding the recorder made live is the one
    `convtap audit` makes from the capture (over HTTP, and over WebSocket mode's error frame)."""
    recorded, _ = recorded_by_run("openai_client.py", *flags)
    replayed = tmp_path / "replayed.db"
    with replaying(recorded) as url, record(replayed, int(url.rsplit(":", 1)[1]), tmp_path) as rec:
        env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{rec.port}/v1"}
        done = subprocess.run(client("openai_client.py", *flags, "--changed-tool"), env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        rec.proc.send_signal(signal.SIGINT)
        rec.wait(120)
    assert done.returncode != 0 and "replay miss" in done.stderr
    with sqlite3.connect(replayed) as conn:
        live = conn.execute("SELECT rule, message FROM findings ORDER BY rule").fetchall()
    audited = sorted((f["rule"], f["message"]) for f in findings(replayed))
    assert ("replay-miss" in {rule for rule, _ in live}) and audited == sorted(live)


def test_curl_through_the_regular_proxy_over_https_then_replayed(tmp_path: Path) -> None:
    """No --upstream: curl finds the proxy in https_proxy and trusts it through CURL_CA_BUNDLE
    (the system's CAs and mitmproxy's); the mock's own CA is trusted by mitmproxy (its
    config.yaml). The replay answers curl with the same JSON."""
    home = tmp_path / "home"
    (home / ".mitmproxy").mkdir(parents=True)
    body = json.dumps(PING)
    recorded, replayed = tmp_path / "recorded.db", tmp_path / "replayed.db"
    with MockServer("declared", seed=5, tls=True) as mock:
        assert mock.cert_file is not None
        (home / ".mitmproxy" / "config.yaml").write_text(
            f"ssl_verify_upstream_trusted_ca: {mock.cert_file}\n")  # fmt: skip
        env = {**os.environ, "HOME": str(home)}
        env.pop("NO_PROXY", None)
        env.pop("no_proxy", None)
        first = convtap_run(recorded, "--", "curl", "-sS", f"{mock.url}/v1/responses", "-H",
                            "content-type: application/json", "-d", body, env=env)  # fmt: skip
    assert first.returncode == 0, first.stderr
    answer = first.stdout.split("convtap run:")[0]
    assert json.loads(answer)["output"][0]["name"] == "ping"
    assert summary(first)[:2] == (1, 0)
    with replaying(recorded) as url:
        script = f'curl -sS "$CONVTAP_BASE_URL/v1/responses" -H "{JSON}" -d "$BODY"'
        second = convtap_run(replayed, "--upstream", url, "--", "sh", "-c", script,
                             env={**os.environ, "BODY": body})  # fmt: skip
    assert second.returncode == 0, second.stderr
    # the JSON as the capture stores it (its keys sorted, compact): the same value
    assert json.loads(second.stdout.split("convtap run:")[0]) == json.loads(answer)
    no_change(recorded, replayed)


def test_the_exit_status_is_the_commands_else_the_findings(tmp_path: Path) -> None:
    """A call left unanswered is a warning: --fail-on decides; a failing command's status wins."""
    db = tmp_path / "capture.db"
    body = json.dumps(PING)
    post = f'curl -sS -o /dev/null "$OPENAI_BASE_URL/responses" -H "{JSON}" -d "$BODY"'
    env = {**os.environ, "BODY": body}
    with MockServer("declared", seed=5) as mock:
        warned = convtap_run(db, "--upstream", mock.url, "--", "sh", "-c", post, env=env)
        assert warned.returncode == 0 and summary(warned)[3] == 1, warned.stderr
        strict = convtap_run(db, "--upstream", mock.url, "--fail-on", "warning", "--", "true")
        assert strict.returncode == 1
        never = convtap_run(db, "--upstream", mock.url, "--fail-on", "never", "--", "true")
        assert never.returncode == 0
        failed = convtap_run(db, "--upstream", mock.url, "--fail-on", "warning", "--", "sh", "-c",
                             f"{post}; exit 3", env=env)  # fmt: skip
        assert failed.returncode == 3 and summary(failed)[3] == 2


CTRL_C_CLIENT = """
import json, os, signal, sys, time, urllib.request
got = []
signal.signal(signal.SIGINT, lambda *a: got.append(a[0]))
def post():
    body = {"model": "gpt-5.1", "input": "hi", "tools": [
        {"type": "function", "name": "ping", "parameters": {"type": "object", "properties": {}}}]}
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/responses",
        data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    urllib.request.urlopen(request).read()
post()
print("ready", flush=True)
while not got:
    time.sleep(0.05)
post()
print("interrupted", flush=True)
sys.exit(130)
"""


def test_ctrl_c_goes_to_the_command_and_nothing_is_lost(tmp_path: Path) -> None:
    """SIGINT to `convtap run` reaches COMMAND, which makes one more request on its way out:
    both are in the capture, and run exits with COMMAND's status."""
    db = tmp_path / "capture.db"
    with MockServer("declared", seed=5) as mock:
        proc = subprocess.Popen([*CONVTAP, "run", "--db", str(db), "--upstream", mock.url, "--",
                                 sys.executable, "-c", CTRL_C_CLIENT], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in out
    assert SUMMARY.search(out) is not None and SUMMARY.findall(out)[0][0] == "2"
    calls = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert [c["tool"] for c in calls] == ["ping", "ping"]


CODEX = """cd "$1" && exec "$2" exec --skip-git-repo-check -s read-only -m gpt-5.1 \\
  -c model_provider=mock -c 'model_providers.mock.name="mock"' \\
  -c "model_providers.mock.base_url=\\"$OPENAI_BASE_URL\\"" \\
  -c 'model_providers.mock.wire_api="responses"' \\
  -c 'model_providers.mock.env_key="OPENAI_API_KEY"' \\
  $3 'say hi'
"""


@pytest.mark.parametrize("transport", ["http", "websocket"])
def test_the_codex_cli_run_by_run_replays_to_the_same_end(tmp_path: Path, transport: str) -> None:
    """`convtap run -- codex exec …` as docs/commands.md shows it (the base URL from
    OPENAI_BASE_URL, through a shell), then against the replay: the same answer, no change."""
    codex = clients_python().parent.parent / "codex" / "node_modules" / ".bin" / "codex"
    if not codex.exists():
        pytest.skip("the Codex CLI is not installed (make test installs it where npm is)")
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    script = tmp_path / "codex.sh"
    script.write_text(CODEX)
    socket = "-c model_providers.mock.supports_websockets=true" if transport == "websocket" else ""
    command = ["sh", str(script), str(tmp_path / "work"), str(codex), socket]
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test"}
    recorded, replayed = tmp_path / "recorded.db", tmp_path / "replayed.db"
    with MockServer("declared", seed=5) as mock:
        first = convtap_run(recorded, "--upstream", mock.url, "--", *command, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "every tool you declared was called once" in first.stdout
    assert summary(first)[0] >= 3 and summary(first)[2] == 0
    with replaying(recorded) as url:
        second = convtap_run(replayed, "--upstream", url, "--", *command, env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "every tool you declared was called once" in second.stdout
    assert summary(second) == summary(first)
    no_change(recorded, replayed)


REF_CLIENT = """
import json, os, sys
from convtap.mock.refclient import RefClient
proxy = os.environ.get("HTTP_PROXY")
base = os.environ.get("CONVTAP_BASE_URL") or sys.argv[1]
r = RefClient(base, proxy=None if "CONVTAP_BASE_URL" in os.environ else proxy).run()
print(json.dumps({"tool": r.tool, "text": r.continuation_text, "accepted": r.accepted,
                  "websocket": r.websocket, "resumes": r.resumes}))
"""


@pytest.mark.parametrize("scenario", ["alefita_way", "resume", "websocket"])
def test_an_f_conversation_client_replays_its_legs_and_its_websocket(
    tmp_path: Path, scenario: str
) -> None:
    """The reference client: prepare, sentinel, f/conversation, its resume leg, the WebSocket
    handoff (through the regular proxy, which sees the user socket) and GET conversation/<id>."""
    recorded, replayed = tmp_path / "recorded.db", tmp_path / "replayed.db"
    regular = scenario == "websocket"

    def command(url: str) -> list[str]:
        return [sys.executable, "-c", REF_CLIENT, url]

    with MockServer(scenario, seed=3) as mock:
        args = [] if regular else ["--upstream", mock.url]
        first = convtap_run(recorded, *args, "--", *command(mock.url))
    assert first.returncode == 0, first.stderr[-3000:]
    (line,) = said(first)
    assert (
        line["accepted"]
        and line["websocket"] == regular
        and line["resumes"] == (scenario == "resume")
    )
    with replaying(recorded) as url:
        args = [] if regular else ["--upstream", url]
        second = convtap_run(replayed, *args, "--", *command(url))
    assert second.returncode == 0, second.stderr[-3000:]
    assert said(second) == said(first)
    assert summary(second) == summary(first) and summary(first)[:3] == (1, 1, 0)
    no_change(recorded, replayed)


def test_web_serves_the_live_page_while_the_command_runs(tmp_path: Path) -> None:
    done = convtap_run(tmp_path / "capture.db", "--web", "--", "true")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^Watch live: http://127\.0\.0\.1:\d+/\S+/$", done.stderr, re.M)
    assert summary(done) == (0, 0, 0, 0, 0)


@pytest.mark.parametrize("into", ["file", "pipe"])
def test_the_summary_starts_a_line_of_its_own(tmp_path: Path, into: str) -> None:
    """After a command whose last line has no line break, the summary is still a line of its own;
    in a file, after one that ends with a line break, it follows with no blank line between."""
    for printed, expected in (("no break", ["no break"]), ("broken\n", ["broken"])):
        argv = [*CONVTAP, "run", "--db", str(tmp_path / "c.db"), "--", "printf", printed]
        if into == "file":
            out = tmp_path / "out.txt"
            with out.open("w") as stdout:
                subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, timeout=300, check=True)
            lines = out.read_text().splitlines()
        else:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
            lines = [line for line in done.stdout.splitlines() if line]  # a pipe: maybe a blank one
        assert lines[:-1] == expected and lines[-1].startswith("convtap run: 0 calls"), lines


def test_a_no_proxy_that_names_an_api_host_is_said(tmp_path: Path) -> None:
    env = {**os.environ, "NO_PROXY": "localhost,.openai.com"}
    done = convtap_run(tmp_path / "c.db", "--", "true", env=env)
    assert done.returncode == 0, done.stderr
    assert "NO_PROXY sends api.openai.com around the recorder" in done.stderr
    assert "chatgpt.com around" not in done.stderr
