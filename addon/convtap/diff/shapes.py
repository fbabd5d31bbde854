"""Shapes of a capture, and what changed between two of them (pure).

A capture's shape is, for each kind of object — request bodies per endpoint, messages per
(author role, recipient class, content type), typed events per `type`, delta ops with the paths
they touch, WebSocket payloads per type — the JSON paths seen (array indexes and ids generalised
to `[]` and `*`), the JSON types at each path, how often each path is present, and the values of
string fields with few distinct values (enums such as `channel`, `status`, `content_type`,
`marker`; never ids, tokens or free text). Counts and first/last seen times ride along. Shapes
only grow by counting, so the order in which objects are fed does not change the result.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

ENUM_MAX_VALUES = 12  # more distinct values than this: not an enum
ENUM_MAX_LENGTH = 48
_ID = re.compile(
    r"^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16,}|"
    r"[A-Za-z]+[-_][0-9a-f]{8,}|\d+|<redacted:[0-9a-f]+>)$",
    re.IGNORECASE,
)
# Fields that are never enums, whatever their values look like in a small capture.
_FREE = re.compile(
    r"(^|\.)(id|[a-z_]*_id|text|parts|title|name|description|token|[a-z_]*_time|"
    r"content|prompt|reason|message|cwd|url|query|[a-z_]*token)(\[\])?$"
)


@dataclass
class PathShape:
    count: int = 0  # objects of the kind in which the path is present
    types: Counter[str] = field(default_factory=Counter)
    values: Counter[str] | None = field(default_factory=Counter)  # None: not an enum
    example: Any = None

    def add(self, value: Any, path: str) -> None:
        self.count += 1
        kind = json_type(value)
        self.types[kind] += 1
        if kind not in ("object", "array") and (
            self.example is None or _order(value) < _order(self.example)
        ):
            self.example = value  # the smallest: the same whatever order objects come in
        if self.values is None:
            return
        if kind != "string":
            if kind not in ("null", "boolean"):
                self.values = None
            return
        if (
            _FREE.search(path)
            or len(value) > ENUM_MAX_LENGTH
            or _ID.match(value)
            or (" " in value.strip())
        ):
            self.values = None
            return
        self.values[value] += 1
        if len(self.values) > ENUM_MAX_VALUES:
            self.values = None

    def merge(self, other: PathShape) -> None:
        self.count += other.count
        self.types.update(other.types)
        if self.example is None or (
            other.example is not None and _order(other.example) < _order(self.example)
        ):
            self.example = other.example
        if self.values is None or other.values is None:
            self.values = None
        else:
            self.values.update(other.values)
            if len(self.values) > ENUM_MAX_VALUES:
                self.values = None

    @property
    def enum(self) -> set[str] | None:
        return set(self.values) if self.values else None


@dataclass
class KindShape:
    count: int = 0
    first_seen: float | None = None
    last_seen: float | None = None
    paths: dict[str, PathShape] = field(default_factory=dict)
    example: Any = None  # the object seen first (ties: the smallest), shortened

    def add(
        self, obj: Any, at: float | None, paths: Iterable[tuple[str, Any]] | None = None
    ) -> None:
        self.count += 1
        first = self.first_seen
        if at is not None:
            self.first_seen = at if first is None else min(first, at)
            self.last_seen = at if self.last_seen is None else max(self.last_seen, at)
        example = _trim(obj)
        if (
            self.example is None
            or (at is not None and (first is None or at < first))
            or (at == first and _order(example) < _order(self.example))
        ):
            self.example = example
        seen: dict[str, Any] = {}
        for path, value in paths if paths is not None else walk(obj):
            seen.setdefault(path, value)  # a path counts once per object (arrays repeat it)
        for path, value in seen.items():
            self.paths.setdefault(path, PathShape()).add(value, path)

    def required(self, path: str) -> bool:
        shape = self.paths.get(path)
        return shape is not None and shape.count == self.count


Shapes = dict[str, KindShape]


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def walk(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(generalised path, value) for every value inside a JSON object, itself excluded."""
    if isinstance(value, dict):
        for key, item in value.items():
            name = "*" if _ID.match(str(key)) else str(key)
            path = f"{prefix}.{name}" if prefix else name
            yield path, item
            yield from walk(item, path)
    elif isinstance(value, list):
        for item in value:
            yield f"{prefix}[]", item
            yield from walk(item, f"{prefix}[]")


def pointer_pattern(pointer: str) -> str:
    """A delta's JSON Pointer with indexes and ids generalised: /message/content/parts/*."""
    if not pointer:
        return "/"
    segments = pointer.split("/")[1:]
    return "/" + "/".join("*" if s == "-" or _ID.match(s) else s for s in segments)


def recipient_class(recipient: Any) -> str:
    if not isinstance(recipient, str) or recipient in ("", "all"):
        return "all"
    for prefix in ("local.", "functions."):
        if recipient.startswith(prefix):
            return prefix + "*"
    return recipient


def message_kind(message: dict[str, Any]) -> str:
    author = message.get("author")
    content = message.get("content")
    author = author if isinstance(author, dict) else {}
    content = content if isinstance(content, dict) else {}
    return (f"message:{author.get('role', '?')}:{recipient_class(message.get('recipient'))}:"
            f"{content.get('content_type', '?')}")  # fmt: skip


def add(shapes: Shapes, kind: str, obj: Any, at: float | None) -> None:
    shapes.setdefault(kind, KindShape()).add(obj, at)


def merge(into: Shapes, other: Shapes) -> Shapes:
    for kind, shape in other.items():
        mine = into.setdefault(kind, KindShape())
        mine.count += shape.count
        if mine.example is None or (
            shape.first_seen is not None
            and (mine.first_seen is None or shape.first_seen < mine.first_seen)
        ):
            mine.example = shape.example
        for seen in (shape.first_seen, shape.last_seen):
            if seen is not None:
                mine.first_seen = seen if mine.first_seen is None else min(mine.first_seen, seen)
                mine.last_seen = seen if mine.last_seen is None else max(mine.last_seen, seen)
        for path, path_shape in shape.paths.items():
            mine.paths.setdefault(path, PathShape()).merge(path_shape)
    return into


def _order(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _trim(value: Any, depth: int = 0) -> Any:
    """A small example: long strings cut, deep or wide structures shortened."""
    if isinstance(value, str):
        return value if len(value) <= 80 else value[:79] + "…"
    if isinstance(value, dict):
        if depth >= 3:
            return {"…": len(value)}
        return {k: _trim(v, depth + 1) for k, v in list(value.items())[:12]}
    if isinstance(value, list):
        return [_trim(v, depth + 1) for v in value[:3]]
    return value
