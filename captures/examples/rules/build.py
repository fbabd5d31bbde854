"""Builds the rule fixtures: `python captures/examples/rules/build.py`.

Every rule of addon/convtap/contract/rules.toml gets `<id>/fail.har` (a session that breaks it) and
`<id>/pass.har` (one that keeps it). All are the example session of docs/protocol.md — the turn
that calls `local.alefita_way`, a prepare, the return, its continuation, `GET conversation/<id>`
— with one change each. `convtap import` reads them like any browser's HAR export.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
import tomllib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
RULES = EXAMPLES.parent.parent / "addon" / "convtap" / "contract" / "rules.toml"
API = "https://chatgpt.com/backend-api/"
CONV = "6a1c3b2e-0d4f-4c1a-9a55-2f1b7c9e8d10"  # the conversation of sse/alefita_way_call.sse
CALL_ID = "b6d6e3a6-af6f-4a78-a649-8e3935182fcc"  # docs/protocol.md, "Local tool calls"
USER_ID = "7f3e9a1b-2c4d-4e6f-8a0b-1c2d3e4f5a6b"
RETURN_ID = "b65539dc-d45f-4b37-b735-a11ac75aafed"  # docs/protocol.md, "The tool return contract"
T0 = datetime(2026, 8, 27, 19, 51, tzinfo=UTC).timestamp()

Session = dict[str, Any]


EXAMPLES_SEED = EXAMPLES / "seed"


def seed(name: str) -> Any:
    """An example of docs/protocol.md (`captures/examples/seed/`); the two signatures ship
    inside the package (the mock declares them)."""
    path = EXAMPLES_SEED / f"{name}.json"
    if not path.exists():
        path = HERE.parents[2] / "addon" / "convtap" / "mock" / "seed" / f"{name}.json"
    return json.loads(path.read_text())


def base() -> Session:
    """The session as the contract wants it, as plain data the mutations below change."""
    ret = seed("return_message")
    ret["metadata"] = {"is_visually_hidden_from_conversation": True}  # the client's builder
    return {
        "signatures": [seed("signature_handoff"), seed("signature_alefita_way")],
        "target": seed("execution_target_local"),
        "return": ret,
        "return_body": seed("return_body"),
        "return_request": {"conversation_id": CONV, "parent_message_id": CALL_ID},
        "extra_messages": [],
        "challenges": ["attest-challenge-one", "attest-challenge-two"],
        "prepare_before_return": True,
        "returns": 1,
    }


def user_request(s: Session) -> dict[str, Any]:
    user = {
        "id": USER_ID,
        "author": {"role": "user", "name": None, "metadata": {}},
        "content": {"content_type": "text", "parts": ["use o alefita way"]},
        "metadata": {"conversation_execution_target": s["target"]},
        "create_time": T0,
    }
    return {
        "action": "next",
        "messages": [user],
        "model": "gpt-5-6-thinking",
        "local_function_signatures": s["signatures"],
        "supported_encodings": ["v1"],
        "client_prepare_state": "success",
        "app_attest_challenge": s["challenges"][0],
        "thinking_effort": "standard",
        "timezone": "America/Sao_Paulo",
        "timezone_offset_min": 180,
    }


def return_request(s: Session, n: int) -> dict[str, Any]:
    message = copy.deepcopy(s["return"])
    if n:
        message["id"] = f"{RETURN_ID[:-1]}{n}"
    if isinstance(message.get("content"), dict) and "text" in message["content"]:
        body = s["return_body"]
        message["content"]["text"] = body if isinstance(body, str) else json.dumps(body)
    request = user_request(s)
    request["messages"] = [message, *s["extra_messages"]]
    request["app_attest_challenge"] = (
        s["challenges"][1 + n] if 1 + n < len(s["challenges"]) else f"attest-challenge-{n + 2}"
    )
    for key, value in s["return_request"].items():
        request[key] = value
    return request


def entry(
    method: str, url: str, at: float, request: Any, response: Any, content_type: str
) -> dict[str, Any]:
    text = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
    req: dict[str, Any] = {
        "method": method,
        "url": url,
        "httpVersion": "HTTP/1.1",
        "headers": [
            {"name": "content-type", "value": "application/json"},
            {"name": "user-agent", "value": "fixture-client/1.0"},
        ],
        "cookies": [],
        "queryString": [],
        "headersSize": -1,
        "bodySize": 0,
    }
    if request is not None:
        body = json.dumps(request, ensure_ascii=False)
        req["postData"] = {"mimeType": "application/json", "text": body}
        req["bodySize"] = len(body.encode())
    started = datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
    return {
        "startedDateTime": started,
        "time": 500,
        "request": req,
        "response": {
            "status": 200,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": content_type}],
            "cookies": [],
            "content": {"size": len(text.encode()), "mimeType": content_type, "text": text},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": len(text.encode()),
        },
        "cache": {},
        "timings": {"send": 1, "wait": 498, "receive": 1},
    }


def har(s: Session) -> dict[str, Any]:
    call = (EXAMPLES / "sse" / "alefita_way_call.sse").read_text()
    continuation = (EXAMPLES / "sse" / "alefita_way_continuation.sse").read_text()
    prepare = {"action": "next", "client_prepare_state": "sent", "model": "gpt-5-6-thinking"}
    sse, js = "text/event-stream", "application/json"
    entries = [
        entry(
            "POST",
            API + "sentinel/chat-requirements/prepare",
            T0,
            {"p": "gAAAA-fixture"},
            {"token": "gAAAA-sentinel-fixture", "prepare_token": "prep-fixture"},
            js,
        ),
        entry(
            "POST",
            API + "f/conversation/prepare",
            T0 + 1,
            prepare,
            {"status": "ok", "conduit_token": "conduit-fixture-1"},
            js,
        ),
        entry("POST", API + "f/conversation", T0 + 2, user_request(s), call, sse),
    ]
    at = T0 + 10
    for n in range(s["returns"]):
        if s["prepare_before_return"]:
            entries.append(
                entry(
                    "POST",
                    API + "f/conversation/prepare",
                    at,
                    {**prepare, "conversation_id": CONV},
                    {"status": "ok", "conduit_token": f"conduit-fixture-{n + 2}"},
                    js,
                )
            )
        entries.append(
            entry("POST", API + "f/conversation", at + 1, return_request(s, n), continuation, sse)
        )
        at += 10
    if s["returns"]:
        tree = {
            "conversation_id": CONV,
            "current_node": RETURN_ID,
            "mapping": {
                CALL_ID: {
                    "id": CALL_ID,
                    "message": seed("call_message"),
                    "parent": USER_ID,
                    "children": [RETURN_ID],
                },
                RETURN_ID: {
                    "id": RETURN_ID,
                    "message": return_request(s, 0)["messages"][0],
                    "parent": CALL_ID,
                    "children": [],
                },
            },
        }
        entries.append(entry("GET", API + f"conversation/{CONV}", at, None, tree, js))
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "convtap fixtures", "version": "1"},
            "entries": entries,
        }
    }


def ret(**changes: Any) -> Callable[[Session], None]:
    def change(s: Session) -> None:
        for key, value in changes.items():
            if value is DELETE:
                s["return"].pop(key, None)
            else:
                s["return"][key] = value

    return change


def body(**changes: Any) -> Callable[[Session], None]:
    def change(s: Session) -> None:
        for key, value in changes.items():
            if value is DELETE:
                s["return_body"].pop(key, None)
            else:
                s["return_body"][key] = value

    return change


def content(**changes: Any) -> Callable[[Session], None]:
    def change(s: Session) -> None:
        s["return"]["content"].update(changes)

    return change


def setting(key: str, value: Any) -> Callable[[Session], None]:
    def change(s: Session) -> None:
        s[key] = value

    return change


DELETE = object()
OTHER = "00000000-0000-4000-8000-000000000000"


def drop_handoff(s: Session) -> None:
    s["signatures"] = [x for x in s["signatures"] if x["name"] != "handoff"]


def drop_alefita(s: Session) -> None:
    s["signatures"] = [x for x in s["signatures"] if x["name"] != "alefita_way"]


def require_mood(s: Session) -> None:
    s["signatures"][1]["params"].append(
        {"name": "mood", "required": True, "type": {"description": "A mood.", "type": "string"}}
    )


def extra_message(s: Session) -> None:
    s["extra_messages"] = [
        {
            "id": OTHER,
            "author": {"role": "user"},
            "content": {"content_type": "text", "parts": ["e agora?"]},
        }
    ]


FAIL: dict[str, Callable[[Session], None]] = {
    "return-single-message": extra_message,
    "return-author-role": lambda s: s["return"]["author"].update(role="user"),
    "return-author-name": lambda s: s["return"]["author"].update(name="alefita"),
    "return-recipient": ret(recipient="alefita_way"),
    "return-channel": ret(channel=None),
    "return-content-type": content(content_type="text"),
    "return-language": content(language="json"),
    "return-body-json": setting("return_body", "segundo eco do caminho"),
    "return-call-id": body(call_id=OTHER),
    "return-body-tool": body(tool=DELETE),
    "return-body-result": body(result=DELETE),
    "return-parent": lambda s: s["return_request"].update(parent_message_id=USER_ID),
    "return-status": ret(status="in_progress"),
    "return-end-turn": ret(end_turn=True),
    "return-weight": ret(weight=0),
    "return-hidden": ret(metadata={}),
    "return-conversation": lambda s: s["return_request"].update(conversation_id=OTHER),
    "return-id-fresh": ret(id=USER_ID),
    "call-unanswered": setting("returns", 0),
    "return-duplicate": setting("returns", 2),
    "return-orphan": lambda s: (
        s["return_request"].update(parent_message_id=OTHER),
        body(call_id=OTHER)(s),
    ),
    "call-undeclared": drop_alefita,
    "call-arguments": require_mood,
    "challenge-reused": setting("challenges", ["attest-once", "attest-once"]),
    "handoff-missing": drop_handoff,
    "execution-target": lambda s: s["target"].update(cwd=5, kind="local_executor"),
    "prepare-missing": setting("prepare_before_return", False),
}

# Near misses that must pass (the default passing fixture is the base session).
PASS: dict[str, Callable[[Session], None]] = {
    "return-weight": ret(weight=1.0),
    "return-end-turn": ret(end_turn=DELETE),
    "execution-target": setting("target", {"kind": "remote", "region": "us"}),
    "return-parent": body(call_id=CALL_ID),
}


def responses_fixtures() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """The responses-* rules: (failing, passing) HAR sessions of the Responses API."""
    spec = importlib.util.spec_from_file_location(
        "responses_examples", EXAMPLES / "responses" / "build.py"
    )
    assert spec is not None and spec.loader is not None
    r = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(r)
    good = r.session(r.request(), r.answer())
    bad_search = {
        "type": "tool_search_output",
        "call_id": r.TS_CALL,
        "execution": "server",
        "status": "completed",
        "tools": [],
    }
    bad_tool = {"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 80}
    goal = {  # what the Codex CLI 0.171 sends: no call_id, a tool named instead
        "type": "function_call_output",
        "id": "fco_1",
        "name": "goal_objective",
        "namespace": "agent",
        "output": "done",
    }
    resent = r.answer(extra=(r.function_call(r.ARGS),))  # back-filled: the chain holds it
    nulled = {**r.answer(), "previous_response_id": None}  # a relay that nulls the id
    orphan = {"type": "function_call_output", "call_id": "call_gone", "output": "{}"}
    later = {"model": "gpt-5.1", "previous_response_id": "resp_68a1beef",
             "input": [{"role": "user", "content": "try again"}]}  # fmt: skip
    return {
        "responses-output-call-id": (r.session(r.request(), r.answer(fc_call_id=r.FC_ITEM)), good),
        "responses-item-duplicate": (r.session(r.request(), resent), good),
        "responses-chain-broken": (r.session(r.request(), nulled), good),
        "responses-orphan-repeated": (
            r.session(
                r.request(),
                r.answer(extra=(orphan,)),
                {**later, "input": [orphan, *later["input"]]},
            ),
            r.session(r.request(), r.answer(), later),
        ),
        "responses-socket-overlap": (r.socket_session(overlap=True), r.socket_session()),
        "responses-output-type": (r.session(r.request(), r.answer(output={"temp_c": 21})), good),
        "responses-output-names-tool": (r.session(r.request(), r.answer(extra=(goal,))), good),
        "responses-tool-search": (r.session(r.request(), r.answer(search=bad_search)), good),
        "responses-tools-valid": (r.session(r.request([bad_tool]), r.answer()), good),
        "responses-call-unanswered": (r.session(r.request(), None), good),
        "replay-miss": (replay_missed(r.session(r.request(), r.answer())), good),
    }


def replay_missed(session: dict[str, Any]) -> dict[str, Any]:
    """The session with its second request answered as `convtap mock --replay` answers a
    request that nothing it recorded matches."""
    missed = copy.deepcopy(session)
    response = missed["log"]["entries"][1]["response"]
    text = json.dumps({"error": {
        "message": "replay miss: POST /v1/responses matches no recorded request left; the "
        "nearest, #2 (POST /v1/responses, flow 0b9e7c1a-4f3d-4e2a-9c8b-7a6d5e4f3a2b), differs at "
        "input[]{function_call_output}.output", "type": "invalid_request_error", "param": None,
        "code": "replay_miss"}})  # fmt: skip
    response.update(status=400, statusText="Bad Request")
    response["headers"] = [{"name": "content-type", "value": "application/json"}]
    response["content"] = {"size": len(text), "mimeType": "application/json", "text": text}
    response["bodySize"] = len(text)
    return missed


def main() -> None:
    ids = [r["id"] for r in tomllib.loads(RULES.read_text())["rule"]]
    responses = responses_fixtures()
    assert set(ids) == set(FAIL) | set(responses), set(ids) ^ (set(FAIL) | set(responses))
    for path in HERE.iterdir():
        if path.is_dir():
            shutil.rmtree(path)
    for rule_id, (failing, passing) in responses.items():
        folder = HERE / rule_id
        folder.mkdir()
        for name, har_data in (("fail", failing), ("pass", passing)):
            text = json.dumps(har_data, ensure_ascii=False, indent=1) + "\n"
            (folder / f"{name}.har").write_text(text)
    for rule_id in FAIL:
        folder = HERE / rule_id
        folder.mkdir()
        for name, change in (("fail", FAIL[rule_id]), ("pass", PASS.get(rule_id))):
            session = base()
            if change is not None:
                change(session)
            text = json.dumps(har(session), ensure_ascii=False, indent=1) + "\n"
            (folder / f"{name}.har").write_text(text)


if __name__ == "__main__":
    main()
