"""A tool the server runs inside the stream (a code message to `python`, answered by the tool in
the same stream) is shown as run by the server, never as a client call left unanswered: in
`convtap calls` (text and JSON), the report and so the live page (which renders the same parts),
and the audit owes it nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from convtap.ingest.capture import audit_capture, import_into
from convtap.report.page import write_report

from tests.report.test_report import Page
from tests.runner import convtap

CONV = "6a1c3b2e-0d4f-4c1a-9a55-2f1b7c9e8d10"


def message(mid: str, role: str, content: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"id": mid, "author": {"role": role, "name": fields.pop("name", None), "metadata": {}},
            "create_time": 1787848260.0, "update_time": None, "content": content,
            "status": "finished_successfully", "end_turn": None, "weight": 1.0, "metadata": {},
            "recipient": "all", "channel": None, **fields}  # fmt: skip


def stream() -> str:
    code = message("b1", "assistant", {"content_type": "code", "language": "python",
                                       "text": "print(6 * 7)"}, recipient="python")  # fmt: skip
    ran = message("b2", "tool", {"content_type": "execution_output", "text": "42"},
                  name="python")  # fmt: skip
    said = message("b3", "assistant", {"content_type": "text", "parts": ["42."]}, end_turn=True,
                   channel="final")  # fmt: skip
    events = ['event: delta_encoding\ndata: "v1"\n\n']
    for m in (code, ran, said):
        add = {"p": "", "o": "add", "v": {"message": m, "conversation_id": CONV}, "c": 0}
        events.append(f"event: delta\ndata: {json.dumps(add)}\n\n")
    done = {"type": "message_stream_complete", "conversation_id": CONV}
    return "".join(events) + f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n"


def test_a_server_run_tool_is_shown_as_run_by_the_server(tmp_path: Path) -> None:
    body = tmp_path / "python.sse"
    body.write_text(stream())
    db = tmp_path / "capture.db"
    import_into(db, [body])
    rows = json.loads(convtap("calls", "--db", str(db), "--format", "json").stdout)
    assert [(r["tool"], r["kind"], r["runs_on"]) for r in rows] == [("python", "builtin", "server")]
    text = convtap("calls", "--db", str(db)).stdout
    assert "server-run" in text and " no " not in text
    page = Page(write_report(db, tmp_path / "report.html").read_text())
    (call,) = [item for item in page.items if item["t"] == "c"]
    assert call["srv"] is True  # the page says it: "run by the server: no return owed"
    assert [f.rule for f in audit_capture(db).findings] == []
