"""README's own examples run without an error finding: its f/conversation curl example, sent as
written through a real `mitmdump` with the addon to `convtap mock` (the scenario the README
names), is called back and audited; a Responses client that declares only `get_weather` gets
only that call from the default scenario, and answering it leaves the audit clean."""

from __future__ import annotations

import http.client
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from convtap.ingest.capture import audit_capture
from convtap.mock.server import MockServer

from tests.harness import mitmdump

ROOT = Path(__file__).resolve().parents[2]
CURL = re.compile(r"curl -sN \S+/backend-api/f/conversation .*?-d '(\{.*?\})'", re.S)


def post(url: str, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    reply = conn.getresponse()
    data = reply.read()
    conn.close()
    return reply.status, data


def errors(db: Path) -> list[str]:
    return [f"{f.rule}: {f.message}" for f in audit_capture(db).findings if f.severity == "error"]


def test_the_readme_curl_example_is_called_back_with_no_error(tmp_path: Path) -> None:
    (example,) = CURL.findall((ROOT / "README.md").read_text())
    body = json.loads(example)
    with MockServer("alefita_way", seed=1) as mock, mitmdump(tmp_path, f"reverse:{mock.url}") as p:
        status, stream = post(p.url, "/backend-api/f/conversation", body)
        p.stop()
    assert status == 200 and b"local.alefita_way" in stream
    assert p.rows("SELECT tool FROM tool_calls") == [("alefita_way",)]
    assert errors(p.db) == []


def test_the_default_scenario_calls_only_the_declared_function(tmp_path: Path) -> None:
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    with MockServer("alefita_way", seed=1) as mock, mitmdump(tmp_path, f"reverse:{mock.url}") as p:
        _, first = post(p.url, "/v1/responses", {"model": "m", "input": "hi", "tools": tools})
        response = json.loads(first)
        assert [i["type"] for i in response["output"]] == ["function_call"]
        output = {"type": "function_call_output", "call_id": response["output"][0]["call_id"],
                  "output": '{"temp_c": 21}'}  # fmt: skip
        status, _ = post(
            p.url,
            "/v1/responses",
            {"model": "m", "previous_response_id": response["id"], "input": [output]},
        )
        p.stop()
    assert status == 200
    assert [f.rule for f in audit_capture(p.db).findings] == []
