"""What convtap says about a Responses stream never shows a Python `None` (a call without a
call_id, a search without a name), and a function named like its namespace (a deferred function
loaded by a tool search) is named once: in `decode`, the `record` lines, the findings, `calls`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from convtap.ingest.capture import audit_capture, import_into

from tests.runner import convtap


def event(obj: dict[str, Any]) -> str:
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n"


def body() -> str:
    deferred = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "status": "completed",
        "name": "get_exchange_rate",
        "namespace": "get_exchange_rate",
        "arguments": "{}",
    }
    search = {"type": "tool_search_call", "id": "tsc_1", "call_id": None, "execution": "client",
              "arguments": {"query": "rates"}, "status": "completed"}  # fmt: skip
    done = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "output": [deferred, search],
    }
    return "".join([
        event({"type": "response.created",
               "response": {**done, "status": "in_progress", "output": []}}),
        *(event({"type": "response.output_item.done", "output_index": n, "item": item})
          for n, item in enumerate(done["output"])),
        event({"type": "response.completed", "response": done}),
    ])  # fmt: skip


def test_nothing_said_shows_none_and_a_namespace_is_named_once(tmp_path: Path) -> None:
    stream = tmp_path / "answer.sse"
    stream.write_text(body())
    decoded = convtap("decode", str(stream))
    assert decoded.returncode == 0
    db = tmp_path / "capture.db"
    import_into(db, [stream])
    with sqlite3.connect(db) as conn:  # what the recorder found as it imported
        found_live = [row[0] for row in conn.execute("SELECT message FROM findings")]
    findings = [*found_live, *(f.message for f in audit_capture(db).findings)]
    calls = convtap("calls", "--db", str(db), "--wide")
    said = "\n".join([decoded.stdout, *findings, calls.stdout])
    assert "tool_search_call" in said and found_live  # the search and its finding are there
    assert "None" not in said
    assert "get_exchange_rate" in said and "get_exchange_rate.get_exchange_rate" not in said
