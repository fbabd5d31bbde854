"""Request bodies and captures for tests, built the way a client builds them (docs/protocol.md,
"Local tool calls" and "The tool return contract")."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The examples of docs/protocol.md; the two signatures the mock declares ship inside the package.
SEED_DIRS = (ROOT / "captures" / "examples" / "seed", ROOT / "addon" / "convtap" / "mock" / "seed")
SSE = Path(__file__).resolve().parent.parent / "captures" / "examples" / "sse"
CONV = "6a1c3b2e-0d4f-4c1a-9a55-2f1b7c9e8d10"
CALL_ID = "b6d6e3a6-af6f-4a78-a649-8e3935182fcc"
USER_ID = "7f3e9a1b-2c4d-4e6f-8a0b-1c2d3e4f5a6b"


def seed(name: str) -> Any:
    return json.loads(seed_file(f"{name}.json").read_text())


def seed_file(name: str) -> Path:
    return next(d / name for d in SEED_DIRS if (d / name).exists())


def user_turn(
    text: str = "use o alefita way", conversation_id: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "action": "next",
        "messages": [{"id": USER_ID, "author": {"role": "user"},
                      "content": {"content_type": "text", "parts": [text]},
                      "metadata": {}, "create_time": 1787848260.0}],
        "model": "gpt-5-6-thinking",
        "local_function_signatures": [seed("signature_handoff"), seed("signature_alefita_way")],
        "supported_encodings": ["v1"],
        "client_prepare_state": "success",
        "app_attest_challenge": "challenge-" + uuid.uuid4().hex,
        "timezone": "America/Sao_Paulo",
        "timezone_offset_min": 180,
        "thinking_effort": "standard",
    }  # fmt: skip
    if conversation_id:
        body["conversation_id"] = conversation_id
    return body


def tool_return(
    call_id: str = CALL_ID, conversation_id: str = CONV, **changes: Any
) -> dict[str, Any]:
    """The observed return record, as the client's builder sends it (hidden flag set)."""
    message = seed("return_message")
    message["id"] = str(uuid.uuid4())
    body = {
        "call_id": call_id,
        "result": {"message": "segundo eco do caminho"},
        "tool": "alefita_way",
    }
    message["content"]["text"] = json.dumps(body)
    message["metadata"] = {"is_visually_hidden_from_conversation": True}
    message.update(changes)
    request = user_turn(conversation_id=conversation_id)
    request.update(messages=[message], parent_message_id=call_id)
    return request


def har_entry(
    url: str,
    request: dict[str, Any],
    response: bytes,
    at: str,
    content_type: str = "text/event-stream",
) -> dict[str, Any]:
    text = json.dumps(request)
    return {
        "startedDateTime": at, "time": 12,
        "request": {"method": "POST", "url": url, "httpVersion": "HTTP/1.1",
                    "headers": [{"name": "content-type", "value": "application/json"},
                                {"name": "authorization", "value": "Bearer sk-canary-auth"},
                                {"name": "user-agent", "value": "test-client/1.0"}],
                    "cookies": [], "queryString": [], "headersSize": -1, "bodySize": len(text),
                    "postData": {"mimeType": "application/json", "text": text}},
        "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1",
                     "headers": [{"name": "content-type", "value": content_type}],
                     "cookies": [], "content": {"size": len(response), "mimeType": content_type,
                                                "text": response.decode()},
                     "redirectURL": "", "headersSize": -1, "bodySize": len(response)},
        "cache": {}, "timings": {"send": 1, "wait": 10, "receive": 1},
    }  # fmt: skip


def call_and_return_har() -> dict[str, Any]:
    """The example session as a HAR: the turn that calls alefita_way, then the return."""
    url = "https://chatgpt.com/backend-api/f/conversation"
    return {"log": {"version": "1.2", "creator": {"name": "test", "version": "1"}, "entries": [
        har_entry(url, user_turn(), (SSE / "alefita_way_call.sse").read_bytes(),
                  "2026-08-27T19:51:00.000Z"),
        har_entry(url, tool_return(), (SSE / "alefita_way_continuation.sse").read_bytes(),
                  "2026-08-27T19:51:30.000Z"),
    ]}}  # fmt: skip
