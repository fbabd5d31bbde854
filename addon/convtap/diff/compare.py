"""`convtap diff`: what changed between two captures, or between a capture and the models.

Every change is one entry with a stable check id (in the style of oasdiff), a level from the
point of view of a client and of convtap's own decoder, the kind and path it concerns, and an
example value from the capture that shows it.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from convtap.diff.shapes import KindShape, Shapes, add, message_kind, pointer_pattern
from convtap.ingest.capture import as_database
from convtap.models.export import export_schemas
from convtap.store.database import iter_shape_rows, open_readonly
from convtap.wire.delta import OPS
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.responses import EVENT_TYPES as RESPONSES_EVENT_TYPES
from convtap.wire.sse import SSEParser

LEVELS = ("breaking", "non-breaking", "info")

# check id -> (level, why): declared in checks.toml, the table of docs/commands.md ("convtap diff").
CHECKS: dict[str, tuple[str, str]] = {
    check["id"]: (check["level"], check["why"])
    for check in tomllib.loads(
        resources.files("convtap.diff").joinpath("checks.toml").read_text(encoding="utf-8")
    )["check"]
}

KNOWN_EVENT_TYPES = frozenset(
    {  # docs/protocol.md, "Delta encoding v1", rule 7
        "resume_conversation_token",
        "input_message",
        "message_marker",
        "title_generation",
        "server_ste_metadata",
        "message_stream_complete",
        "conversation_detail_metadata",
        "stream_handoff",
        "streaming_parent_patch",
        "moderation",
        "safety_review_update",
        "toast",
    }
)


@dataclass(frozen=True)
class Change:
    check: str
    level: str
    kind: str
    path: str
    detail: str
    example: Any


def change(check: str, kind: str, path: str, detail: str, example: Any) -> Change:
    return Change(check, CHECKS[check][0], kind, path, detail, example)


# -- shapes of a capture ---------------------------------------------------------------------------


def capture_shapes(path: Path) -> Shapes:
    """The shapes of a capture database, or of anything `convtap import` reads (imported into a
    temporary database first). Rows are streamed, never loaded whole."""
    with as_database(path) as db:
        return database_shapes(db)


def database_shapes(path: Path) -> Shapes:
    db = open_readonly(path)
    shapes: Shapes = {}
    flow: str | None = None
    state = _FlowState()
    try:
        for source, row in iter_shape_rows(db):
            if source == "request":
                add(
                    shapes,
                    f"request:{row['kind']}",
                    loads_or_none(row["request_body"]),
                    row["started_at"],
                )
            elif source == "message":
                message = loads_or_none(row["json"])
                if isinstance(message, dict):
                    add(shapes, message_kind(message), message, row["first_seen_at"])
            else:
                if row["flow_id"] != flow:
                    flow, state = row["flow_id"], _FlowState()
                state.feed(shapes, row["event"], row["data"], row["at"])
    finally:
        db.conn.close()
    return shapes


class _FlowState:
    """One flow's raw events: SSE framing and the sticky delta record (rule 2), or WS frames."""

    def __init__(self) -> None:
        self.parser = SSEParser()
        self.record = ("", "add")  # p, o

    def feed(self, shapes: Shapes, source: str, data: str, at: float | None) -> None:
        if source.startswith("ws:"):
            frame = loads_or_none(data)
            for item in frame if isinstance(frame, list) else []:
                if isinstance(item, dict):
                    self._ws_item(shapes, item, at)
            return
        for event in self.parser.feed(data.encode()):
            if event.data == "[DONE]":
                continue
            obj = loads_or_none(event.data)
            if event.event == "delta" and isinstance(obj, dict):
                self._delta(shapes, obj, at)
            elif event.event != "delta_encoding" and isinstance(obj, dict):
                kind = obj.get("type")
                add(
                    shapes, f"event:{kind}" if isinstance(kind, str) else "event:(untyped)", obj, at
                )

    def _delta(self, shapes: Shapes, delta: dict[str, Any], at: float | None) -> None:
        p, o = delta.get("p", self.record[0]), delta.get("o", self.record[1])
        if not isinstance(p, str) or not isinstance(o, str):
            return
        self.record = (p, o)
        value = delta.get("v")
        ops = [(p, o, value)]
        if o == "patch" and isinstance(value, list):
            ops += [
                (p + str(s.get("p", "")), str(s.get("o")), s.get("v"))
                for s in value
                if isinstance(s, dict)
            ]
        for path, op, v in ops:
            shape = shapes.setdefault(f"delta:{op}", KindShape())
            shape.add({"p": path, "o": op}, at, [(pointer_pattern(path), v)])

    def _ws_item(self, shapes: Shapes, item: dict[str, Any], at: float | None) -> None:
        payload = item.get("payload")
        if not isinstance(payload, dict):
            kind = "reply" if "reply" in item else str(item.get("type"))
            add(shapes, f"ws:{kind}", item, at)
            return
        inner = payload.get("payload")
        kind = str(payload.get("type"))
        if isinstance(inner, dict) and isinstance(inner.get("type"), str):
            kind += f":{inner['type']}"
        add(shapes, f"ws:{kind}", payload, at)


# -- comparing ---------------------------------------------------------------------------------


def compare(a: Shapes, b: Shapes) -> list[Change]:
    """Everything that changed from capture A to capture B, in a stable order."""
    changes: list[Change] = []
    for kind in sorted(set(a) | set(b)):
        delta = kind.startswith("delta:")
        if kind not in a:
            check = "op-added" if delta else "kind-added"
            changes.append(
                change(check, kind, "", f"{kind} appears ({b[kind].count} seen)", b[kind].example)
            )
            continue
        if kind not in b:
            check = "op-removed" if delta else "kind-removed"
            changes.append(
                change(
                    check,
                    kind,
                    "",
                    f"{kind} no longer appears ({a[kind].count} seen before)",
                    a[kind].example,
                )
            )
            continue
        changes += _compare_kind(kind, a[kind], b[kind])
    return changes


def _compare_kind(kind: str, a: KindShape, b: KindShape) -> list[Change]:
    changes: list[Change] = []
    reported: list[str] = []  # added or removed paths: their descendants add nothing

    def under(path: str) -> bool:
        return any(path.startswith(p + ".") or path.startswith(p + "[") for p in reported)

    for path in sorted(set(a.paths) | set(b.paths)):
        if under(path):
            continue
        old, new = a.paths.get(path), b.paths.get(path)
        if old is None and new is not None:
            reported.append(path)
            changes.append(change("path-added", kind, path, f"{path} appears", new.example))
        elif new is None and old is not None:
            reported.append(path)
            changes.append(
                change("path-removed", kind, path, f"{path} no longer arrives", old.example)
            )
        elif old is not None and new is not None:
            fresh = sorted(set(new.types) - set(old.types))
            if fresh:
                changes.append(
                    change(
                        "type-changed",
                        kind,
                        path,
                        f"{path} was {'|'.join(sorted(old.types))}, now also {'|'.join(fresh)}",
                        new.example,
                    )
                )
            if a.required(path) and not b.required(path):
                changes.append(
                    change(
                        "became-optional",
                        kind,
                        path,
                        f"{path} is missing in {b.count - new.count} of {b.count}",
                        None,
                    )
                )
            elif b.required(path) and not a.required(path) and b.count > 1:
                changes.append(
                    change(
                        "became-required", kind, path, f"{path} is now always present", new.example
                    )
                )
            old_enum, new_enum = old.enum, new.enum
            if old_enum is not None and new_enum is not None:
                for value in sorted(new_enum - old_enum):
                    changes.append(
                        change(
                            "enum-value-added", kind, path, f"new value {value!r} at {path}", value
                        )
                    )
                for value in sorted(old_enum - new_enum):
                    changes.append(
                        change(
                            "enum-value-removed",
                            kind,
                            path,
                            f"value {value!r} no longer seen at {path}",
                            value,
                        )
                    )
    return changes


# -- drift against schemas/ ----------------------------------------------------------------------

SCHEMA_FOR_KIND = {
    "request:conversation": "ConversationRequestBody",
    "request:prepare": "PrepareRequestBody",
}


def drift(shapes: Shapes) -> list[Change]:
    """What a capture carries that the models (their JSON Schema, as in schemas/) do not know."""
    schemas = export_schemas()
    changes: list[Change] = []
    for kind in sorted(shapes):
        shape = shapes[kind]
        if kind.startswith("delta:"):
            op = kind.split(":", 1)[1]
            if op not in OPS:
                changes.append(change("unknown-op", kind, "", f"op {op!r}", shape.example))
            continue
        if kind.startswith("event:"):
            event = kind.split(":", 1)[1]
            known = event in KNOWN_EVENT_TYPES or event in RESPONSES_EVENT_TYPES
            if event != "(untyped)" and not known:
                changes.append(
                    change("unknown-event-type", kind, "", f"event type {event!r}", shape.example)
                )
            continue
        name = "ConversationMessage" if kind.startswith("message:") else SCHEMA_FOR_KIND.get(kind)
        if name is None:
            continue
        schema = json.loads(schemas[f"{name}.json"])
        reported: list[str] = []
        for path in sorted(shape.paths):
            if any(path.startswith(p + ".") or path.startswith(p + "[") for p in reported):
                continue
            node = _schema_at(schema, schema, path)
            if node is None:
                reported.append(path)
                changes.append(
                    change(
                        "unknown-field",
                        kind,
                        path,
                        f"{name} does not declare {path}",
                        shape.paths[path].example,
                    )
                )
                continue
            allowed = _enum(schema, node)
            found = shape.paths[path].enum
            if allowed is not None and found:
                for value in sorted(found - allowed):
                    changes.append(
                        change(
                            "unknown-enum-value",
                            kind,
                            path,
                            f"{value!r} is not one of {name}'s values at {path}",
                            value,
                        )
                    )
    return changes


def _resolve(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _options(root: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    node = _resolve(root, node)
    branches = node.get("anyOf") or node.get("oneOf") or node.get("allOf")
    if branches:
        return [o for b in branches for o in _options(root, b)]
    return [node]


def _schema_at(root: dict[str, Any], node: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The schema that declares `path` (dots and [] as shapes write it), or None. An object
    without declared properties (a free-form record such as metadata) declares everything."""
    if not path:
        return node
    head, _, rest = path.partition(".")
    name, brackets = head.rstrip("[]"), head.count("[]")
    for option in _options(root, node):
        if option.get("type") == "object" and not option.get("properties") and name:
            return option  # a free-form object
        child = option.get("properties", {}).get(name)
        if child is None:
            continue
        for _ in range(brackets):
            items = [o.get("items") for o in _options(root, child) if o.get("items")]
            if not items:
                break
            child = items[0]
        found = _schema_at(root, child, rest)
        if found is not None:
            return found
    return None


def _enum(root: dict[str, Any], node: dict[str, Any]) -> set[str] | None:
    values: set[str] = set()
    for option in _options(root, node):
        if "enum" in option:
            values |= {v for v in option["enum"] if isinstance(v, str)}
        elif "const" in option:
            values.add(option["const"])
        elif option.get("type") not in ("null", None):
            return None  # an open string: anything goes
    return values or None


# -- reporting -----------------------------------------------------------------------------------


def summary(changes: list[Change]) -> dict[str, int]:
    return {level: sum(c.level == level for c in changes) for level in LEVELS}


def to_json(changes: list[Change]) -> dict[str, Any]:
    """`convtap diff --format json` (a contract)."""
    return {"summary": summary(changes), "changes": [asdict(c) for c in changes]}


def render(changes: list[Change], fmt: str, title: str) -> str:
    if fmt == "json":
        return json.dumps(to_json(changes), ensure_ascii=False, indent=2, default=str)
    counts = summary(changes)
    if fmt == "markdown":
        lines = [
            f"## {title}",
            "",
            f"{counts['breaking']} breaking, {counts['non-breaking']} non-breaking, "
            f"{counts['info']} info",
            "",
            "| level | check | kind | path | detail | example |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for c in changes:
            example = json.dumps(c.example, ensure_ascii=False, default=str).replace("|", "\\\\|")
            detail = c.detail.replace("|", "\\\\|")
            lines.append(
                f"| {c.level} | `{c.check}` | `{c.kind}` | `{c.path or '-'}` | "
                f"{detail} | `{example[:60]}` |"
            )
        return "\n".join(lines)
    lines = [title]
    for level in LEVELS:
        for c in (c for c in changes if c.level == level):
            where = f"{c.kind} {c.path}".strip()
            example = json.dumps(c.example, ensure_ascii=False, default=str)
            lines.append(f"  {c.level:<12} {c.check:<19} {where}: {c.detail}")
            if c.example is not None:
                lines.append(f"  {'':<12} {'':<19} e.g. {example[:100]}")
    lines.append(
        f"{counts['breaking']} breaking, {counts['non-breaking']} non-breaking, "
        f"{counts['info']} info"
    )
    return "\n".join(lines)
