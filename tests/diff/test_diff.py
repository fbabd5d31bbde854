"""Shapes and `convtap diff`: every check id, order independence, the JSON contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from convtap.diff.capture import capture_shapes
from convtap.diff.compare import CHECKS, LEVELS, compare, drift
from convtap.diff.shapes import Shapes, add

from tests.runner import convtap

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "captures" / "examples" / "diff"
OLDER, NEWER = EXAMPLES / "older.har", EXAMPLES / "newer.har"


@pytest.fixture(scope="module")
def older() -> Shapes:
    return capture_shapes(OLDER)


@pytest.fixture(scope="module")
def newer() -> Shapes:
    return capture_shapes(NEWER)


def checks(changes: list) -> set[str]:  # type: ignore[type-arg]
    return {c.check for c in changes}


def test_a_capture_diffed_with_itself_has_no_changes(older: Shapes) -> None:
    assert compare(older, older) == []


def test_shapes_do_not_depend_on_the_order_of_flows(tmp_path: Path, older: Shapes) -> None:
    har = json.loads(OLDER.read_text())
    har["log"]["entries"].reverse()
    reversed_har = tmp_path / "reversed.har"
    reversed_har.write_text(json.dumps(har))
    assert capture_shapes(reversed_har) == older


def test_the_worked_example(older: Shapes, newer: Shapes) -> None:
    changes = compare(older, newer)
    assert checks(changes) == {
        "op-added",
        "type-changed",
        "path-removed",
        "enum-value-added",
        "kind-added",
        "path-added",
        "enum-value-removed",
    }
    added = [c for c in changes if c.check == "enum-value-added"]
    assert [(c.kind, c.path, c.example) for c in added] == [
        ("event:message_marker", "marker", "first_visible_token")
    ]
    assert [c.kind for c in changes if c.check == "op-added"] == ["delta:merge"]
    back = compare(newer, older)
    assert {"path-removed", "path-added"} <= checks(back)
    # the merge op and the thoughts message came in one of newer's two turns: not a removal
    assert [(c.check, c.kind) for c in back if not c.path and c.kind != "event:message_marker"] == [
        ("not-seen", "delta:merge"),
        ("not-seen", "message:assistant:all:thoughts"),
    ]


def test_a_field_the_server_defaults_left_out_is_not_breaking() -> None:
    """A client that stops sending `strict` (the API defaults it) or a return's `weight`: the
    server sees no change (diff/defaults.toml); another field left out still breaks."""
    tool = {"type": "function", "name": "f", "parameters": {}, "strict": True}
    a, b, c = Shapes(), Shapes(), Shapes()
    for n in range(3):
        add(a, "request:responses", {"model": "m", "tools": [tool], "store": True})
        lax = {k: v for k, v in tool.items() if k != "strict"}
        add(b, "request:responses", {"model": "m", "tools": [lax]})
        add(c, "request:responses", {"tools": [tool], "store": True} if n else {"tools": [tool]})
    changes = [(ch.check, ch.level, ch.path) for ch in compare(a, b)]
    assert ("field-defaulted", "info", "tools[]{function}.strict") in changes
    assert ("field-defaulted", "info", "store") in changes
    assert ("path-removed", "breaking", "model") not in changes  # `model` stayed
    assert [(ch.check, ch.path) for ch in compare(a, c) if ch.level == "breaking"] == [
        ("path-removed", "model")
    ]
    assert ("field-defaulted", "info", "store") in [(ch.check, ch.level, ch.path)
                                                    for ch in compare(a, c)]  # fmt: skip


def test_became_optional_and_became_required() -> None:
    always, sometimes = Shapes(), Shapes()
    for n in range(3):
        add(always, "event:x", {"type": "x", "extra": n})
        add(sometimes, "event:x", {"type": "x", **({"extra": n} if n else {})})
    assert [(c.check, c.path) for c in compare(always, sometimes)] == [("became-optional", "extra")]
    assert [(c.check, c.path) for c in compare(sometimes, always)] == [("became-required", "extra")]


def test_a_field_only_ever_null_is_not_removed_by_its_absence() -> None:
    null, some, none = Shapes(), Shapes(), Shapes()
    for n in range(3):
        add(null, "event:x", {"type": "x", "expires_at": None})
        add(some, "event:x", {"type": "x", **({"expires_at": None} if n else {})})
        add(none, "event:x", {"type": "x"})
    assert compare(null, some) == []
    assert [(c.check, c.level) for c in compare(null, none)] == [("not-seen", "info")]
    timed = Shapes()
    for n in range(3):
        add(timed, "event:x", {"type": "x", "expires_at": n})
    assert [c.check for c in compare(timed, none)] == ["path-removed"]


def test_ids_and_free_text_are_never_enums() -> None:
    a, b = Shapes(), Shapes()
    add(a, "event:x", {"type": "x", "message_id": "m-1", "title": "Um", "status": "ok"})
    add(b, "event:x", {"type": "x", "message_id": "m-2", "title": "Dois", "status": "done"})
    assert [(c.check, c.path, c.example) for c in compare(a, b)] == [
        ("enum-value-added", "status", "done"),
        ("enum-value-removed", "status", "ok"),
    ]


def test_drift_against_the_models(newer: Shapes) -> None:
    found = drift(newer)
    assert {"unknown-op", "unknown-enum-value", "unknown-field"} <= checks(found)
    assert [c.example for c in found if c.check == "unknown-enum-value"] == ["thoughts"]
    shapes = Shapes()
    add(shapes, "event:brand_new_event", {"type": "brand_new_event"})
    add(shapes, "event:message_marker", {"type": "message_marker"})
    assert [(c.check, c.kind) for c in drift(shapes)] == [
        ("unknown-event-type", "event:brand_new_event")
    ]


def test_every_check_id_has_a_level_and_a_test() -> None:
    source = Path(__file__).read_text()
    for check, (level, why) in CHECKS.items():
        assert level in LEVELS and why
        assert f'"{check}"' in source, f"no test produces {check}"


def test_json_contract_and_exit_status() -> None:
    proc = convtap("diff", "--format", "json", str(OLDER), str(NEWER))
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    # thinking_effort's type changed to an object: its new `level` is not a change of its own
    assert out["summary"] == {"breaking": 3, "non-breaking": 3, "info": 2}
    keys = {"check", "level", "kind", "path", "detail", "example", "kinds"}
    assert all(set(c) == keys for c in out["changes"])
    assert convtap("diff", "--fail-on", "never", str(OLDER), str(NEWER)).returncode == 0
    assert convtap("diff", "--fail-on", "any", str(OLDER), str(OLDER)).returncode == 0
    assert convtap("diff", "--fail-on", "non-breaking", str(NEWER), str(OLDER)).returncode == 1
    assert convtap("diff", str(OLDER)).returncode == 2
    assert convtap("diff", str(OLDER), str(EXAMPLES / "missing.har")).returncode == 2


def test_markdown_and_against_schemas_from_the_command_line() -> None:
    proc = convtap("diff", "--format", "markdown", str(OLDER), str(NEWER))
    assert "| breaking | `op-added` | `delta:merge` |" in proc.stdout
    drifted = convtap("diff", "--against-schemas", "--format", "json", str(NEWER))
    assert drifted.returncode == 1
    assert {c["check"] for c in json.loads(drifted.stdout)["changes"]} >= {"unknown-op"}


def test_the_docs_list_every_check_with_its_level() -> None:
    import re

    # README.md links to docs/commands.md, which holds the table
    docs = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md"))])
    tables = docs.split("| check | level | why |")
    assert len(tables) == 2, "exactly one table of the diff's checks in README.md and docs/"
    table = tables[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z-]+)` \| (breaking|non-breaking|info) \|", table, re.M)
    documented = dict(rows)
    assert len(rows) == len(documented)
    assert documented == {check: level for check, (level, _) in CHECKS.items()}


def test_the_declared_checks_are_the_checks_the_diff_makes() -> None:
    """checks.toml and the code are one to one: every id `compare` can report is declared (with
    a level and a why), and every declared one is reported somewhere."""
    import re

    import convtap.diff.compare as compare_module

    source = Path(compare_module.__file__).read_text()
    ids = re.findall(r'"([a-z]+(?:-[a-z]+)+)"', source)  # every hyphenated string literal
    ends = ("-added", "-removed", "-changed", "-optional", "-required", "-seen", "-defaulted")
    used = {word for word in ids if word.endswith(ends) or word.startswith("unknown-")}
    assert used == set(CHECKS)
    assert all(level in LEVELS and why for level, why in CHECKS.values())


def test_drift_knows_every_standard_responses_event_type(tmp_path: Path) -> None:
    """A Responses capture diffed against the models: its standard event types are known; a
    made-up one is `unknown-event-type`."""
    from convtap.ingest.capture import import_into

    db = tmp_path / "responses.db"
    import_into(db, [ROOT / "captures" / "examples" / "responses" / "function_call.sse"])
    shapes = capture_shapes(db)
    events = [kind for kind in shapes.kinds if kind.startswith("event:response.")]
    assert len(events) >= 5, sorted(shapes)
    assert not [c for c in drift(shapes) if c.check == "unknown-event-type"]
    add(shapes, "event:response.brand_new", {"type": "response.brand_new"})
    assert [c.kind for c in drift(shapes) if c.check == "unknown-event-type"] == [
        "event:response.brand_new"
    ]


def test_a_kind_always_seen_is_removed_one_seen_sometimes_is_not_seen() -> None:
    a, b = Shapes(), Shapes()
    for turn in ("t1", "t2"):
        a.contexts["conversation"] += 1
        b.contexts["conversation"] += 1
        add(a, "event:always", {"type": "always"}, "conversation", turn)
        add(a, "delta:merge", {}, "conversation", turn)
        add(b, "event:other", {"type": "other"}, "conversation", turn)
    add(a, "event:sometimes", {"type": "sometimes"}, "conversation", "t1")
    found = [(c.check, c.kind, c.detail) for c in compare(a, b) if c.level != "non-breaking"]
    assert found == [
        ("op-removed", "delta:merge", "in every one of A's 2 conversation flows, in none of B's 2"),
        (
            "kind-removed",
            "event:always",
            "in every one of A's 2 conversation flows, in none of B's 2",
        ),
        ("not-seen", "event:sometimes", "in 1 of A's 2 conversation flows, in none of B's 2"),
    ]
    b.contexts.clear()  # B has no f/conversation flow at all: one line, nothing compared
    b.kinds.clear()
    assert [(c.check, c.kind, c.kinds) for c in compare(a, b)] == [
        ("not-seen", "family:conversation", ("delta:merge", "event:always", "event:sometimes"))
    ]


def test_item_types_are_contexts_counted_against_their_arrays() -> None:
    """Which tools a user declares is the session's: a tool type A had and B lacks is not seen,
    never a removal, and the fields of a type one side never had are not compared."""
    a, b = Shapes(), Shapes()
    for n in range(2):
        add(a, "request:responses", {"tools": [{"type": "function", "name": f"f{n}"}]})
        add(b, "request:responses", {"tools": [{"type": "file_search", "vector_store_ids": []}]})
    found = [(c.check, c.path, c.detail) for c in compare(a, b)]
    assert found == [
        ("path-added", "tools[]{file_search}", "new (object): seen 2 times in B"),
        ("not-seen", "tools[]{function}", "seen 2 times in A, never in B (object)"),
    ]


@pytest.mark.parametrize(
    "value",
    ["call_Qx7RkP2m9z", "resp_68a1c0ffee", "2026-08-27T19:51:00Z", "12", "Famous People List",
     "a" * 49, "São", "6a1c3b2e-0d4f-4c1a-9a55-2f1b7c9e8d10"],
)  # fmt: skip
def test_ids_times_and_text_are_no_enum_values_whatever_the_field(value: str) -> None:
    shapes = Shapes()
    add(shapes, "event:x", {"type": "x", "state": value})
    assert shapes.kinds["event:x"].paths["state"].enum is None
    add(shapes, "event:y", {"type": "y", "state": "in_progress"})
    assert shapes.kinds["event:y"].paths["state"].enum == {"in_progress"}
