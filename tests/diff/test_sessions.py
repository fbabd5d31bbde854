"""Protocol, not session: captures that differ in content only diff to nothing, on both
protocols; one planted protocol change is found once, at its root; no free text is printed."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

from convtap.diff.capture import capture_shapes
from convtap.diff.compare import compare
from convtap.diff.render import render
from convtap.diff.shapes import IDENTIFIER, Shapes, add, is_user_data, merge
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.diff.sessions import (
    CALENDAR,
    WEATHER,
    conversation_session,
    first_turn_only,
    handoff_session,
    not_streamed,
    older_with_title,
    one_response,
    over_socket,
    responses_session,
    shorthand_input,
)

FORMATS = ("text", "json", "markdown", "github")
FREE_KEYS = ("prompt", "instructions", "about", "answer", "output", "title")


def shapes_of(tmp_path: Path, name: str, log: dict[str, Any]) -> Shapes:
    path = tmp_path / f"{name}.har"
    path.write_text(json.dumps(log, ensure_ascii=False))
    return capture_shapes(path)


def strings(value: Any) -> set[str]:
    if isinstance(value, str):  # the JSON inside (a body, an SSE event's data) read too
        inner = [line[6:] if line.startswith("data: ") else line for line in value.split("\n")]
        found = {value}
        for text in inner:
            with contextlib.suppress(ValueError):
                found |= strings(json.loads(text)) if text[:1] in "{[" and text else set()
        return found
    if isinstance(value, dict):
        return {s for k, v in value.items() for s in strings(k) | strings(v)}
    if isinstance(value, list):
        return {s for v in value for s in strings(v)}
    return set()


def free_text(value: Any) -> set[str]:
    """Every string of a capture longer than an identifier could be."""
    return {
        s.strip() for s in strings(value) if len(s.strip()) > 8 and not IDENTIFIER.match(s.strip())
    }


def outputs(shapes: tuple[Shapes, Shapes]) -> dict[str, str]:
    changes = compare(*shapes)
    return {fmt: render(changes, fmt, "A → B") for fmt in FORMATS}


def test_two_responses_sessions_doing_different_work_diff_to_nothing(tmp_path: Path) -> None:
    weather = shapes_of(tmp_path, "weather", responses_session(WEATHER))
    calendar = shapes_of(tmp_path, "calendar", responses_session(CALENDAR))
    assert compare(weather, calendar) == []
    assert compare(calendar, weather) == []


def test_two_conversation_sessions_doing_different_work_diff_to_nothing(tmp_path: Path) -> None:
    one = shapes_of(tmp_path, "one", older_with_title())
    other = shapes_of(tmp_path, "other", conversation_session())
    assert compare(one, other) == []
    assert compare(other, one) == []


def test_responses_over_sse_and_over_a_websocket_diff_to_nothing(tmp_path: Path) -> None:
    posted = shapes_of(tmp_path, "posted", responses_session(WEATHER))
    socket = shapes_of(tmp_path, "socket", over_socket(responses_session(CALENDAR)))
    assert "request:responses" in socket.kinds  # the socket's creates are its requests
    assert compare(posted, socket) == []
    assert compare(socket, posted) == []


def test_an_input_string_or_untyped_message_is_the_message_it_stands_for(tmp_path: Path) -> None:
    typed = shapes_of(tmp_path, "typed", responses_session(WEATHER))
    shorthand = shapes_of(tmp_path, "short", shorthand_input(responses_session(CALENDAR)))
    assert compare(typed, shorthand) == []
    assert compare(shorthand, typed) == []


def test_a_new_status_set_by_a_delta_op_is_one_change_at_the_message(tmp_path: Path) -> None:
    log = older_with_title()
    for e in log["log"]["entries"]:
        content = e["response"]["content"]
        content["text"] = content["text"].replace(
            '"o": "replace", "v": "finished_successfully"', '"o": "replace", "v": "finished_late"'
        )
    changes = compare(shapes_of(tmp_path, "a", older_with_title()), shapes_of(tmp_path, "b", log))
    added = [(c.check, c.kind, c.path, c.example) for c in changes if c.level != "info"]
    assert added == [("enum-value-added", "message:assistant:all:text", "status", "finished_late")]


def test_requests_of_a_protocol_one_side_has_no_traffic_of_are_not_compared(
    tmp_path: Path,
) -> None:
    both = merge(
        shapes_of(tmp_path, "chat", older_with_title()),
        shapes_of(tmp_path, "api", responses_session(WEATHER)),
    )
    api = shapes_of(tmp_path, "other", responses_session(CALENDAR))
    for changes in (compare(both, api), compare(api, both)):
        assert [(c.check, c.kind) for c in changes] == [
            ("not-seen", "family:conversation"),
            ("not-seen", "family:turns"),
        ]
        assert "request:conversation" in changes[0].kinds


def test_a_turn_handed_off_to_the_socket_is_read_as_its_stream(tmp_path: Path) -> None:
    inline = shapes_of(tmp_path, "inline", handoff_session(over_socket=False))
    socket = shapes_of(tmp_path, "socket", handoff_session(over_socket=True))
    for changes in (compare(inline, socket), compare(socket, inline)):
        assert [(c.check, c.kind) for c in changes] == [("not-seen", "family:websocket")]
    complete = '\\"type\\": \\"message_stream_complete\\"'
    renamed = handoff_session(True, (complete, complete.replace("message_", "turn_")))
    changes = compare(socket, shapes_of(tmp_path, "renamed", renamed))
    added = [(c.check, c.kind) for c in changes if c.level != "info"]
    assert added == [("kind-added", "event:turn_stream_complete")]


def test_responses_answered_as_json_are_compared(tmp_path: Path) -> None:
    weather = shapes_of(tmp_path, "weather", not_streamed(responses_session(WEATHER)))
    calendar = shapes_of(tmp_path, "calendar", not_streamed(responses_session(CALENDAR)))
    assert compare(weather, calendar) == []
    tiered = not_streamed(responses_session(CALENDAR), {"service_tier": "flex"})
    changes = compare(weather, shapes_of(tmp_path, "tiered", tiered))
    assert [(c.check, c.kind, c.path) for c in changes] == [
        ("path-added", "response:responses", "service_tier")
    ]


def test_a_new_output_item_type_is_one_change_whichever_event_carries_it(tmp_path: Path) -> None:
    log = responses_session(WEATHER)
    for e in log["log"]["entries"]:
        content = e["response"]["content"]
        content["text"] = content["text"].replace('"type": "function_call"', '"type": "shell_v9"')
    weather = shapes_of(tmp_path, "weather", responses_session(WEATHER))
    changes = compare(weather, shapes_of(tmp_path, "new", log))
    [added] = [c for c in changes if c.check == "path-added"]
    assert added.path == "response.output[]{shell_v9}"
    assert added.kinds == (
        "event:response.completed",
        "event:response.output_item.added",
        "event:response.output_item.done",
    )
    assert [c.check for c in changes] == ["not-seen", "path-added"]


def test_events_of_an_item_type_count_against_the_responses_that_made_one(
    tmp_path: Path,
) -> None:
    calls = shapes_of(tmp_path, "call", one_response(responses_session(WEATHER), 0))
    says = shapes_of(tmp_path, "text", one_response(responses_session(CALENDAR), 1))
    for changes in (compare(calls, says), compare(says, calls)):
        assert [c for c in changes if c.level == "breaking"] == []
        families = [c.kind for c in changes if c.kind.startswith("family:")]
        assert families == ["family:responses function_call", "family:responses message"]
    log = responses_session(CALENDAR)
    for e in log["log"]["entries"]:  # the server stops streaming text deltas
        events = e["response"]["content"]["text"].split("\n\n")
        kept = [x for x in events if "response.output_text.delta" not in x]
        e["response"]["content"]["text"] = "\n\n".join(kept)
    changes = compare(
        shapes_of(tmp_path, "all", responses_session(WEATHER)), shapes_of(tmp_path, "cut", log)
    )
    assert [(c.check, c.kind) for c in changes] == [
        ("kind-removed", "event:response.output_text.delta")
    ]


def test_a_tool_return_in_a_request_is_a_message_type_not_fields_gone_optional(
    tmp_path: Path,
) -> None:
    prompt_only = shapes_of(tmp_path, "prompt", first_turn_only(older_with_title()))
    with_return = shapes_of(tmp_path, "return", conversation_session())
    changes = compare(prompt_only, with_return)
    assert [c for c in changes if c.level == "breaking"] == []
    typed = {(c.kind, c.path) for c in changes if c.check == "path-added"}
    assert ("request:conversation", "messages[]{tool:all:code}") in typed
    assert ("event:input_message", "input_message{tool:all:code}") in typed
    assert not [c for c in changes if c.path.startswith("messages[].")]


def test_a_change_to_the_shared_response_object_is_one_line(tmp_path: Path) -> None:
    weather = shapes_of(tmp_path, "weather", responses_session(WEATHER))
    calendar = shapes_of(tmp_path, "calendar", responses_session(CALENDAR, drop_tools=True))
    [change] = compare(weather, calendar)
    assert (change.check, change.level, change.path) == (
        "path-removed",
        "breaking",
        "response.tools",
    )
    assert change.kinds == (
        "event:response.completed",
        "event:response.created",
        "event:response.in_progress",
    )
    assert "in all 6 in A, in none of 6 in B" in change.detail
    text = render([change], "text", "A → B").splitlines()
    assert text[1].endswith("event:response.{completed,created,in_progress} response.tools")


def test_a_removed_subtree_is_reported_at_its_root_once(tmp_path: Path) -> None:
    one = shapes_of(tmp_path, "one", older_with_title())
    other = shapes_of(tmp_path, "other", conversation_session(drop_signatures=True))
    assert [(c.check, c.kind, c.path) for c in compare(one, other)] == [
        ("path-removed", "request:conversation", "local_function_signatures")
    ]


def test_no_free_text_of_either_session_is_printed(tmp_path: Path) -> None:
    logs = (responses_session(WEATHER), responses_session(CALENDAR, drop_tools=True))
    shapes = (shapes_of(tmp_path, "a", logs[0]), shapes_of(tmp_path, "b", logs[1]))
    texts = free_text(logs[0]) | free_text(logs[1])
    assert "You are a helpful assistant that reports weather updates." in texts
    for fmt, out in outputs(shapes).items():
        assert not [t for t in texts if t in out], fmt
    assert max(map(len, outputs(shapes)["text"].splitlines())) <= 100


def test_user_data_is_declared_for_both_protocols() -> None:
    assert is_user_data("request:responses", "tools[]{function}.parameters")
    assert is_user_data("event:response.completed", "response.instructions")
    assert is_user_data("event:response.output_item.done", "item{function_call}.arguments")
    assert is_user_data("request:responses", "input[]{function_call_output}.output")
    assert is_user_data("event:response.output_text.delta", "delta")
    assert is_user_data("message:user:all:text", "content.parts")
    assert is_user_data("request:conversation", "messages[].content.parts")
    assert is_user_data("event:title_generation", "title")
    assert is_user_data("delta:append", "/message/content/parts/*")
    assert not is_user_data("event:response.completed", "response.status")
    assert not is_user_data("request:responses", "tools[]{function}.name")


# -- the property: user data never matters and is never shown --------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3)
    ),
    max_leaves=8,
)
texts = st.text(min_size=0, max_size=60)
content = st.fixed_dictionaries(
    {
        "prompt": texts,
        "instructions": texts,
        "about": texts,
        "answer": texts,
        "output": texts,
        "title": texts,
        "tool": st.from_regex(r"\A[a-z_]{1,20}\Z"),
        "schema": st.dictionaries(st.text(max_size=12), json_values, max_size=4),
        "arguments": json_values.map(json.dumps),
        "metadata": st.dictionaries(st.text(max_size=12), st.text(max_size=20), max_size=3),
    }
)


def session_shapes(c: dict[str, Any]) -> tuple[Shapes, list[Any]]:
    """One session of each protocol, fed as objects (no files: many examples run)."""
    shapes = Shapes()
    log = responses_session(c)
    objects: list[Any] = []
    for e in log["log"]["entries"]:
        body = json.loads(e["request"]["postData"]["text"])
        add(shapes, "request:responses", body, "requests")
        objects.append(body)
        for line in e["response"]["content"]["text"].split("\n"):
            if line.startswith("data: "):
                event = json.loads(line[6:])
                add(shapes, f"event:{event['type']}", event, "responses", e["startedDateTime"])
                objects.append(event)
    message = {
        "author": {"role": "user"},
        "recipient": "all",
        "status": "finished_successfully",
        "content": {"content_type": "text", "parts": [c["prompt"], c["answer"]]},
    }
    title = {"type": "title_generation", "title": c["title"], "conversation_id": "c-1"}
    add(shapes, "message:user:all:text", message, "turns")
    add(shapes, "event:title_generation", title, "conversation")
    request = {
        "action": "next",
        "messages": [message],
        "local_function_signatures": [
            {"name": c["tool"], "description": c["about"], "type": "function", "params": []}
        ],
    }
    add(shapes, "request:conversation", request, "requests")
    return shapes, [*objects, message, title, request]


@settings(max_examples=40, deadline=None)
@given(content, content)
def test_captures_differing_only_in_user_data_diff_to_nothing(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    (one, first), (other, second) = session_shapes(a), session_shapes(b)
    assert compare(one, other) == []
    planted = session_shapes(a)[0]
    add(
        planted,
        "event:title_generation",
        {"type": "title_generation", "title": b["title"], "conversation_id": "c-2", "kind": "auto"},
        "conversation",
    )
    changes = compare(one, planted)
    assert [(c.check, c.path) for c in changes] == [("path-added", "kind")]
    shown = "\n".join(outputs((one, planted)).values()) + "\n".join(outputs((one, other)).values())
    leaked = [t for t in free_text(first) | free_text(second) if t in shown]
    assert not leaked
    chosen = [v.strip() for c in (a, b) for k, v in c.items() if k in FREE_KEYS]
    named = " ".join(planted.kinds)  # a text that is part of a kind's name ("title_gen")
    assert not [v for v in chosen if len(v) > 8 and v in shown and v not in named]
    assert not re.search(r"[^\x00-\x7f→…]", shown.replace("A → B", ""))
