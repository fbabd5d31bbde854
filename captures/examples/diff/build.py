"""Builds the worked example of `convtap diff`: `python captures/examples/diff/build.py`.

`older.har` is the example session of docs/protocol.md as it streamed (the turn that calls
alefita_way, the return, its continuation). `newer.har` is the same session after a server
change: a new field in message metadata, a new marker value in place of an old one, a reasoning
message with a new content type, a new delta op, a request field that stopped being sent, and a
field whose type changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SSE = HERE.parent / "sse"
SEED = HERE.parent / "seed"
API = "https://chatgpt.com/backend-api/f/conversation"
CALL_ID = "b6d6e3a6-af6f-4a78-a649-8e3935182fcc"
CONV = "6a1c3b2e-0d4f-4c1a-9a55-2f1b7c9e8d10"


def seed(name: str) -> Any:
    """An example of docs/protocol.md (`captures/examples/seed/`); the two signatures ship
    inside the package (the mock declares them)."""
    path = SEED / f"{name}.json"
    if not path.exists():
        path = HERE.parents[2] / "addon" / "convtap" / "mock" / "seed" / f"{name}.json"
    return json.loads(path.read_text())


def requests() -> tuple[dict[str, Any], dict[str, Any]]:
    user = {
        "id": "7f3e9a1b-2c4d-4e6f-8a0b-1c2d3e4f5a6b",
        "author": {"role": "user"},
        "content": {"content_type": "text", "parts": ["use o alefita way"]},
        "metadata": {},
    }
    turn = {
        "action": "next",
        "messages": [user],
        "model": "gpt-5-6-thinking",
        "local_function_signatures": [seed("signature_handoff"), seed("signature_alefita_way")],
        "supported_encodings": ["v1"],
        "client_prepare_state": "success",
        "app_attest_challenge": "attest-one",
        "thinking_effort": "standard",
        "timezone": "America/Sao_Paulo",
        "timezone_offset_min": 180,
    }
    ret = seed("return_message")
    ret["metadata"] = {"is_visually_hidden_from_conversation": True}
    back = {
        **turn,
        "messages": [ret],
        "conversation_id": CONV,
        "parent_message_id": CALL_ID,
        "app_attest_challenge": "attest-two",
    }
    return turn, back


def entry(request: dict[str, Any], sse: str, at: str) -> dict[str, Any]:
    text = json.dumps(request, ensure_ascii=False)
    return {
        "startedDateTime": at,
        "time": 800,
        "request": {
            "method": "POST",
            "url": API,
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "cookies": [],
            "queryString": [],
            "headersSize": -1,
            "bodySize": len(text),
            "postData": {"mimeType": "application/json", "text": text},
        },
        "response": {
            "status": 200,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "text/event-stream"}],
            "cookies": [],
            "content": {"size": len(sse), "mimeType": "text/event-stream", "text": sse},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": len(sse),
        },
        "cache": {},
        "timings": {"send": 1, "wait": 798, "receive": 1},
    }


def har(turn: dict[str, Any], back: dict[str, Any], call: str, cont: str) -> dict[str, Any]:
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "convtap example", "version": "1"},
            "entries": [
                entry(turn, call, "2026-08-27T19:51:00.000Z"),
                entry(back, cont, "2026-08-27T19:51:30.000Z"),
            ],
        }
    }


def newer(turn: dict[str, Any], back: dict[str, Any], call: str, cont: str) -> tuple[Any, ...]:
    for request in (turn, back):
        del request["timezone_offset_min"]  # a field that stopped being sent
        request["thinking_effort"] = {"level": "standard"}  # a field whose type changed
    call = call.replace('"is_complete": true', '"is_complete": true, "finish_reason": "tool"')
    call = call.replace('"marker": "user_visible_token"', '"marker": "first_visible_token"')
    call = call.replace(
        '"content_type": "text", "parts": [""]}, "status": "in_progress", '
        '"end_turn": null, "weight": 1.0, "metadata": {"cot_version": "v5", '
        '"resolved_model_slug": "gpt-5-6-thinking"}, "recipient": "all", '
        '"channel": "analysis"',
        '"content_type": "thoughts", "parts": [""]}, "status": "in_progress", '
        '"end_turn": null, "weight": 1.0, "metadata": {"cot_version": "v5", '
        '"resolved_model_slug": "gpt-5-6-thinking"}, "recipient": "all", '
        '"channel": "analysis"',
        1,
    )
    merge = {"p": "/message/metadata", "o": "merge", "v": {"stream_version": 2}}
    call = call.replace("data: [DONE]", f"event: delta\ndata: {json.dumps(merge)}\n\ndata: [DONE]")
    return turn, back, call, cont


def main() -> None:
    call = (SSE / "alefita_way_call.sse").read_text()
    cont = (SSE / "alefita_way_continuation.sse").read_text()
    turn, back = requests()
    (HERE / "older.har").write_text(json.dumps(har(turn, back, call, cont), indent=1) + "\n")
    new = newer(*requests(), call, cont)
    assert new[2] != call
    (HERE / "newer.har").write_text(json.dumps(har(*new), indent=1) + "\n")


if __name__ == "__main__":
    main()
