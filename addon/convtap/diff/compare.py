"""`convtap diff`: what changed between two captures, or between a capture and the models.

Every change is one entry with a stable check id (in the style of oasdiff), a level from the
point of view of a client and of convtap's own decoder, the kind and path it concerns, and the
evidence: how often it was seen in each capture, against how often it could have been.

What counts as a change follows three rules (docs/commands.md, "convtap diff"):

- protocol, not session: user data is compared by presence and type only (shapes.py);
- evidence, not sampling: what A had in every context and B lacks in some is a removal; what A
  had only sometimes and B never shows is `not-seen`; a family of contexts one capture has none
  of (no Responses traffic at all) is one `not-seen` line, its kinds not compared;
- one change, one line: a subtree is reported at its root (the paths under a missing object have
  no parent to be counted against), and the same change on the same path in several kinds of
  one prefix (the `response` of each `response.*` event) is one change that lists them.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from convtap.diff.shapes import KindShape, PathShape, Shapes, is_context, is_user_data
from convtap.models.export import export_schemas
from convtap.vocab import MESSAGE_STREAM_COMPLETE, STREAM_HANDOFF
from convtap.wire.delta import OPS
from convtap.wire.responses import EVENT_TYPES as RESPONSES_EVENT_TYPES

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
        MESSAGE_STREAM_COMPLETE,
        "conversation_detail_metadata",
        STREAM_HANDOFF,
        "streaming_parent_patch",
        "moderation",
        "safety_review_update",
        "toast",
    }
)
UNITS = {"requests": "requests", "turns": "turns", "": "objects"}  # else: "<family> flows"


@dataclass(frozen=True)
class Change:
    check: str
    level: str
    kind: str
    path: str
    detail: str
    example: Any  # an enum value, a JSON type or None: never a value of the session
    kinds: tuple[str, ...] = ()  # every kind it was seen in (one, or a shared object's many)


def change(check: str, kind: str, path: str, detail: str, example: Any) -> Change:
    return Change(check, CHECKS[check][0], kind, path, detail, example, (kind,))


@dataclass
class _Found:
    """A change before the same one in other kinds is folded into it."""

    check: str
    kind: str
    path: str
    example: Any = None
    seen: list[int] = field(default_factory=lambda: [0, 0, 0, 0])  # A seen, A of, B seen, B of
    unit: str = ""


# -- comparing ---------------------------------------------------------------------------------


def compare(a: Shapes, b: Shapes) -> list[Change]:
    """Everything that changed from shapes A to shapes B, in a stable order."""
    found: list[_Found] = []
    unseen: dict[tuple[str, str], list[str]] = {}  # (family, side having it) -> kinds
    for kind in sorted(set(a.kinds) | set(b.kinds)):
        old, new = a.kinds.get(kind), b.kinds.get(kind)
        family = (old or new).family  # type: ignore[union-attr]
        of_a, of_b = _contexts(a, family), _contexts(b, family)
        unit = UNITS.get(family, f"{family} flows")
        delta = kind.startswith("delta:")
        protocol = _protocol(kind, family)
        if old is None and new is not None:
            if of_a == 0:
                unseen.setdefault((family, "B"), []).append(kind)
            elif _contexts(a, protocol) == 0:  # a request of a protocol A has no traffic of
                unseen.setdefault((protocol, "B"), []).append(kind)
            else:
                check = "op-added" if delta else "kind-added"
                found.append(_Found(check, kind, "", None, [0, of_a, new.contexts, of_b], unit))
        elif new is None and old is not None:
            if of_b == 0:
                unseen.setdefault((family, "A"), []).append(kind)
            elif _contexts(b, protocol) == 0:
                unseen.setdefault((protocol, "A"), []).append(kind)
            else:
                always = old.contexts >= of_a
                check = ("op-removed" if delta else "kind-removed") if always else "not-seen"
                found.append(_Found(check, kind, "", None, [old.contexts, of_a, 0, of_b], unit))
        elif old is not None and new is not None:
            found += _compare_kind(kind, old, new)
    changes = [_change(f) for f in _fold(_without_message_ops(found))]
    for (family, side), kinds in sorted(unseen.items()):
        other = "B" if side == "A" else "A"
        have = (a if side == "A" else b).contexts.get(family, 0) or "some"
        unit = UNITS.get(family, f"{family} flows")
        detail = f"{side} has {have} {unit}, {other} none: {len(kinds)} kinds not compared"
        level = CHECKS["not-seen"][0]
        changes.append(
            Change("not-seen", level, f"family:{family}", "", detail, None, tuple(kinds))
        )
    return changes


def _without_message_ops(found: list[_Found]) -> list[_Found]:
    """A delta op's change at `/message/…` that a message kind shows at the same field (a new
    `status` set by `replace`): the message's line says it, with the message's kind."""
    at_messages = {
        (f.check, f.path, json.dumps(f.example)) for f in found if f.kind.startswith("message:")
    }
    return [
        f
        for f in found
        if not (
            f.kind.startswith("delta:")
            and f.path.startswith("/message/")
            and (f.check, f.path[len("/message/") :].replace("/", "."), json.dumps(f.example))
            in at_messages
        )
    ]


def _protocol(kind: str, family: str) -> str:
    """The family whose traffic a kind belongs to: a request's is its protocol's flows."""
    if family != "requests":
        return family
    return "responses" if kind == "request:responses" else "conversation"


def _contexts(shapes: Shapes, family: str) -> int:
    """The contexts of a family; shapes built without any (in tests) count each kind's own."""
    counted = shapes.contexts.get(family, 0)
    own = [k.contexts for k in shapes.kinds.values() if k.family == family]
    return counted or max(own, default=0)


def _types(shape: PathShape) -> str:
    return "|".join(sorted(shape.types))


def _compare_kind(kind: str, a: KindShape, b: KindShape) -> list[_Found]:
    found: list[_Found] = []
    for path in sorted(set(a.paths) | set(b.paths)):
        old, new = a.paths.get(path), b.paths.get(path)
        parent = (old or new).parent  # type: ignore[union-attr]
        of_a, of_b = a.holders(parent, path), b.holders(parent, path)
        if of_a == 0 or of_b == 0:
            continue  # under an object one side never had: reported at that object
        if old is None and new is not None:
            found.append(_Found("path-added", kind, path, _types(new), [0, of_a, new.count, of_b]))
        elif new is None and old is not None:
            always = not is_context(path) and old.count >= of_a and not _only_null(old)
            check = "path-removed" if always else "not-seen"
            check = "field-defaulted" if always and is_defaulted(kind, path) else check
            found.append(_Found(check, kind, path, _types(old), [old.count, of_a, 0, of_b]))
        elif old is not None and new is not None:
            found += _compare_path(kind, path, old, new, [old.count, of_a, new.count, of_b])
    return found


# kind -> the fields the server defaults when they are left out (defaults.toml)
DEFAULTED: dict[str, tuple[str, ...]] = {
    kind: tuple(paths)
    for kind, paths in tomllib.loads(
        resources.files("convtap.diff").joinpath("defaults.toml").read_text(encoding="utf-8")
    )["defaults"].items()
}


def is_defaulted(kind: str, path: str) -> bool:
    """A field the server fills in when a client of this kind of request leaves it out."""
    return any(path == p or path.endswith("." + p) for p in DEFAULTED.get(kind, ()))


def _only_null(shape: PathShape) -> bool:
    """A field only ever null: its absence says no more than its null did (the server sends
    either for nothing)."""
    return set(shape.types) == {"null"}


def _compare_path(
    kind: str, path: str, old: PathShape, new: PathShape, seen: list[int]
) -> list[_Found]:
    found: list[_Found] = []
    fresh = sorted(set(new.types) - set(old.types))
    if _only_null(old):
        fresh = []  # A never showed the field's type: nothing to compare B's with
    elif fresh == ["null"] and is_user_data(kind, path):
        fresh = []  # a user who gave no value (instructions: null) says nothing of the wire
    if fresh:
        example = f"{_types(old)} → {'|'.join(fresh)}"
        found.append(_Found("type-changed", kind, path, example, list(seen)))
    if not is_context(path):
        a_always, b_always = seen[0] >= seen[1], seen[2] >= seen[3]
        if a_always and not b_always and not _only_null(old):
            check = "field-defaulted" if is_defaulted(kind, path) else "became-optional"
            found.append(_Found(check, kind, path, None, list(seen)))
        elif b_always and not a_always and seen[3] > 1:
            found.append(_Found("became-required", kind, path, None, list(seen)))
    old_enum, new_enum = old.enum, new.enum
    if old_enum is not None and new_enum is not None:
        for value in sorted(new_enum - old_enum):
            found.append(_Found("enum-value-added", kind, path, value, list(seen)))
        for value in sorted(old_enum - new_enum):
            found.append(_Found("enum-value-removed", kind, path, value, list(seen)))
    return found


def _fold(found: list[_Found]) -> list[tuple[_Found, list[str]]]:
    """The same change at the same path of kinds of one prefix (`event:`): one, with its kinds.
    An output item is one path whichever event carries it: `item` of `response.output_item.*`,
    an element of `response.output` of `response.*`."""
    folded: dict[tuple[str, str, str, str], tuple[_Found, list[str]]] = {}
    for f in found:
        shared = f.path != ""  # a whole kind is a change of its own
        where = f.kind.split(":", 1)[0] if shared else f.kind
        path = f.path
        if where == "event" and path.startswith(_OUTPUT_ITEM):
            path = "item" + path[len(_OUTPUT_ITEM) :]
        key = (f.check, where, path, json.dumps(f.example))
        if key not in folded:
            folded[key] = (_Found(f.check, f.kind, f.path, f.example, list(f.seen), f.unit), [])
        first, kinds = folded[key]
        if kinds:
            first.seen = [x + y for x, y in zip(first.seen, f.seen, strict=True)]
        if f.kind not in kinds:
            kinds.append(f.kind)
    return list(folded.values())


_OUTPUT_ITEM = "response.output[]"


def _change(item: tuple[_Found, list[str]]) -> Change:
    f, kinds = item
    a_seen, of_a, b_seen, of_b = f.seen
    unit = f" {f.unit}" if f.unit else ""
    typed = f"({f.example})" if f.example else ""
    details = {
        "kind-added": f"new: in {b_seen} of B's {of_b}{unit}",
        "op-added": f"new: in {b_seen} of B's {of_b}{unit}",
        "kind-removed": f"in every one of A's {of_a}{unit}, in none of B's {of_b}",
        "op-removed": f"in every one of A's {of_a}{unit}, in none of B's {of_b}",
        "not-seen": f"in {a_seen} of A's {of_a}{unit}, in none of B's {of_b} {typed}".rstrip(),
        "path-added": f"new {typed}: in {b_seen} of {of_b} in B",
        "path-removed": f"in all {of_a} in A, in none of {of_b} in B {typed}".rstrip(),
        "field-defaulted": f"in all {of_a} in A, in {b_seen} of {of_b} in B: a server default",
        "became-optional": f"in all {of_a} in A, missing in {of_b - b_seen} of {of_b} in B",
        "became-required": f"in {a_seen} of {of_a} in A, in all {of_b} in B",
        "type-changed": f"types {f.example}",
        "enum-value-added": f"new value {f.example!r}",
        "enum-value-removed": f"value {f.example!r} not seen any more",
    }
    if is_context(f.path):  # items, not fields: how many, not how often
        details["not-seen"] = f"seen {a_seen} times in A, never in B {typed}".rstrip()
        details["path-added"] = f"new {typed}: seen {b_seen} times in B"
    level = CHECKS[f.check][0]
    return Change(f.check, level, kinds[0], f.path, details[f.check], f.example, tuple(kinds))


# -- drift against schemas/ ----------------------------------------------------------------------

SCHEMA_FOR_KIND = {
    "request:conversation": "ConversationRequestBody",
    "request:prepare": "PrepareRequestBody",
}


def drift(shapes: Shapes) -> list[Change]:
    """What a capture carries that the models (their JSON Schema, as in schemas/) do not know."""
    schemas = export_schemas()
    changes: list[Change] = []
    for kind in sorted(shapes.kinds):
        shape = shapes.kinds[kind]
        if kind.startswith("delta:"):
            op = kind.split(":", 1)[1]
            if op not in OPS:
                changes.append(change("unknown-op", kind, "", f"op {op!r}", op))
            continue
        if kind.startswith("event:"):
            event = kind.split(":", 1)[1]
            known = event in KNOWN_EVENT_TYPES or event in RESPONSES_EVENT_TYPES
            if event != "(untyped)" and not known:
                changes.append(
                    change("unknown-event-type", kind, "", f"event type {event!r}", event)
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
            node = _schema_at(schema, schema, re.sub(r"\{[^}]*\}", "", path))
            if node is None:
                reported.append(path)
                changes.append(
                    change(
                        "unknown-field",
                        kind,
                        path,
                        f"{name} does not declare {path}",
                        "|".join(sorted(shape.paths[path].types)),
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
