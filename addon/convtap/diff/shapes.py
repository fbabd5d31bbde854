"""Shapes of a capture (pure): what `convtap diff` compares and `convtap shapes` writes.

A capture's shape is, for each kind of object — request bodies per endpoint, messages per
(author role, recipient class, content type), typed events per `type`, delta ops with the paths
they touch, WebSocket payloads per type — the JSON paths seen, the JSON types at each path, how
often each is present, and the values of identifier-like string fields with few distinct values
(enums such as `channel`, `status`, `content_type`, `marker`). Paths are generalised: array items
are `[]`, ids `*`, and an object with a string `type` carries it, `output[]{function_call}`, so
that each item type is a context of its own. User data (userdata.toml) is a leaf: its presence
and type are kept, nothing under it, and none of its values.

Presence is counted per instance against the instances of the parent (the kind's objects for a
top-level key), so that "always there" means "in every object that could hold it". A kind also
counts the contexts it appeared in (flows, turns: see `capture`) against the contexts of its
family in the capture, which is what tells "no longer sent" from "not produced this time".

Shapes keep no session value, only counts, so the order objects come in changes nothing, and a
shapes file (`to_json`, `from_json`) holds the same as the capture it came from.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

FORMAT_KEY = "convtap_shapes"  # the format version field of a shapes file
FORMAT_VERSION = 1
ENUM_MAX_VALUES = 12  # more distinct values than this: not an enum
ENUM_MAX_LENGTH = 48
_ID = re.compile(
    r"^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16,}|"
    r"[A-Za-z]+[-_](?=[0-9a-zA-Z]*[0-9])[0-9a-zA-Z]{8,}|\d+|<redacted:[0-9a-f]+>)$",
    re.IGNORECASE,
)
# What an enum value looks like: a short identifier (a status, a marker, a content type).
IDENTIFIER = re.compile(rf"^[A-Za-z][A-Za-z0-9_.:/+-]{{0,{ENUM_MAX_LENGTH - 1}}}$")
# Fields that are never enums, whatever their values look like in a small capture.
_FREE = re.compile(
    r"(^|\.)(id|[a-z_]*_id|ids|[a-z_]*_ids|text|parts|title|name|description|token|"
    r"[a-z_]*_time|[a-z_]*_at|content|prompt|reason|message|cwd|url|query|[a-z_]*token|"
    r"[a-z_]*_key|timezone|recipient|user|safety_identifier|server_label|namespace|"
    r"filename|obfuscation|model|[a-z_]*model_slug)(\[\])?$"
)


def _load_user_data() -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    text = resources.files("convtap.diff").joinpath("userdata.toml").read_text(encoding="utf-8")
    return [(tuple(e["kinds"]), tuple(e["paths"])) for e in tomllib.loads(text)["user_data"]]


USER_DATA = _load_user_data()


@functools.lru_cache(maxsize=8192)  # a bound: kinds x paths of a capture repeat
def is_user_data(kind: str, path: str) -> bool:
    """Whether the value at `path` of a `kind` object is user data (userdata.toml)."""
    for kinds, patterns in USER_DATA:
        if not any(fnmatch.fnmatchcase(kind, k) for k in kinds):
            continue
        for pattern in patterns:
            if pattern.startswith("/"):
                if fnmatch.fnmatchcase(path, pattern):
                    return True
            elif not pattern.startswith("**."):
                if path == pattern:
                    return True
            else:
                tail = pattern[3:]
                if path == tail or path.endswith(tail if tail[0] == "{" else "." + tail):
                    return True
    return False


@dataclass
class PathShape:
    parent: str  # the path of the object that holds it ("" for a top-level key)
    count: int = 0  # instances
    types: Counter[str] = field(default_factory=Counter)
    values: Counter[str] | None = field(default_factory=Counter)  # None: not an enum

    def add(self, value: Any, enum_ok: bool) -> None:
        self.count += 1
        kind = json_type(value)
        self.types[kind] += 1
        if self.values is None or kind in ("null", "boolean"):
            return
        if kind != "string" or not enum_ok or _ID.match(value) or not IDENTIFIER.match(value):
            self.values = None
            return
        self.values[value] += 1
        if len(self.values) > ENUM_MAX_VALUES:
            self.values = None

    def merge(self, other: PathShape) -> None:
        self.count += other.count
        self.types.update(other.types)
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
    family: str = ""  # what a context of this kind is: "requests", "turns", a flow kind
    count: int = 0  # objects
    contexts: int = 0  # contexts (flows, turns) it appeared in
    paths: dict[str, PathShape] = field(default_factory=dict)
    last_context: str | None = field(default=None, compare=False, repr=False)

    def add(self, kind: str, obj: Any, context: str | None = None) -> None:
        self.count += 1
        if context is None or context != self.last_context:
            self.contexts += 1
        self.last_context = context
        for path, parent, value, leaf in walk(obj, kind):
            shape = self.paths.get(path)
            if shape is None:
                shape = self.paths[path] = PathShape(parent)
            shape.add(value, not leaf and not _FREE.search(path))

    def add_value(self, path: str, value: Any, leaf: bool) -> None:
        """One value at a path of its own (a delta op's pointer), counted as an object's key."""
        shape = self.paths.setdefault(path, PathShape(""))
        shape.add(value, not leaf and not _FREE.search(path.replace("/", ".")))

    def holders(self, parent: str, path: str) -> int:
        """How many values at `parent` could hold `path`: objects for a key, arrays for an
        item; the kind's objects for a top-level key."""
        if not parent:
            return self.count
        shape = self.paths.get(parent)
        if shape is None:
            return 0
        return shape.types["array" if re.sub(r"\{[^}]*\}$", "", path).endswith("[]") else "object"]


@dataclass
class Shapes:
    kinds: dict[str, KindShape] = field(default_factory=dict)
    contexts: Counter[str] = field(default_factory=Counter)  # family -> contexts seen

    def kind(self, kind: str, family: str) -> KindShape:
        shape = self.kinds.get(kind)
        if shape is None:
            shape = self.kinds[kind] = KindShape(family)
        return shape


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


def walk(value: Any, kind: str, prefix: str = "") -> Iterator[tuple[str, str, Any, bool]]:
    """(generalised path, parent path, value, is user data) for every value inside a JSON
    object, itself excluded; nothing under user data."""
    if isinstance(value, dict):
        for key, item in value.items():
            name = "*" if _ID.match(str(key)) else str(key)
            path = f"{prefix}.{name}" if prefix else name
            leaf = is_user_data(kind, path)  # user data is never typed: its `type` is the user's
            path = path if leaf else _typed(path, item)
            yield path, prefix, item, leaf
            if not leaf:
                yield from walk(item, kind, path)
    elif isinstance(value, list):
        for item in value:
            path = f"{prefix}[]"
            leaf = is_user_data(kind, path)
            path = path if leaf else _typed(path, item)
            yield path, prefix, item, leaf
            if not leaf:
                yield from walk(item, kind, path)


def _typed(path: str, value: Any) -> str:
    """An object's path with its type: its string `type`, or an f/conversation message's role,
    recipient class and content type (a user's prompt and a tool's return carry other fields)."""
    if not isinstance(value, dict):
        return path
    kind = value.get("type")
    if kind is None and isinstance(value.get("author"), dict) and "content" in value:
        kind = message_kind(value).removeprefix("message:")
    if isinstance(kind, str) and IDENTIFIER.match(kind) and not _ID.match(kind):
        return f"{path}{{{kind}}}"
    return path


def is_context(path: str) -> bool:
    """An array's item or a typed object: a context (an item type), not a field of its parent,
    or a delta op's pointer, whose absence says what the session did, not what the protocol is."""
    return path.startswith("/") or path.endswith(("[]", "}"))


def pointer_pattern(pointer: str) -> str:
    """A delta's JSON Pointer with indexes and ids generalised: /message/content/parts/*."""
    if not pointer:
        return "/"
    segments = pointer.split("/")[1:]
    return "/" + "/".join("*" if s == "-" or _ID.match(s) else s for s in segments)


def recipient_class(recipient: Any) -> str:
    """`all`, or the class of a named recipient: which tool a session calls is user data."""
    if not isinstance(recipient, str) or recipient in ("", "all"):
        return "all"
    for prefix in ("local.", "functions."):
        if recipient.startswith(prefix):
            return prefix + "*"
    return "*"


def message_kind(message: dict[str, Any]) -> str:
    author = message.get("author")
    content = message.get("content")
    author = author if isinstance(author, dict) else {}
    content = content if isinstance(content, dict) else {}
    return (f"message:{author.get('role', '?')}:{recipient_class(message.get('recipient'))}:"
            f"{content.get('content_type', '?')}")  # fmt: skip


def add(shapes: Shapes, kind: str, obj: Any, family: str = "", context: str | None = None) -> None:
    """One object of `kind`; `context` names the flow or turn it came in (None: its own)."""
    shapes.kind(kind, family).add(kind, obj, context)


def merge(into: Shapes, other: Shapes) -> Shapes:
    into.contexts.update(other.contexts)
    for kind, shape in other.kinds.items():
        mine = into.kind(kind, shape.family)
        mine.count += shape.count
        mine.contexts += shape.contexts
        for path, path_shape in shape.paths.items():
            mine.paths.setdefault(path, PathShape(path_shape.parent)).merge(path_shape)
    return into


def differences(
    kind: str, a: Any, b: Any, same: Callable[[Any, Any], bool], prefix: str = ""
) -> Iterator[str]:
    """The paths, written as shapes write them, where two JSON values of a `kind` differ:
    a key one has and the other not, a value or a type that differs, an array of another
    length. User data is compared whole and named by its root, so that no path says anything
    of it (a changed tool schema is `tools[]{function}.parameters`). `same` compares two
    scalars (a placeholder may stand for any string). Values are never part of a path."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            name = "*" if _ID.match(str(key)) else str(key)
            path = f"{prefix}.{name}" if prefix else name
            yield from _differences_at(kind, a, b, key, path, same)
    elif isinstance(a, list) and isinstance(b, list):
        path = f"{prefix}[]"
        leaf = is_user_data(kind, path)
        if len(a) != len(b) or (leaf and not _same_value(a, b, same)):
            yield path if leaf else prefix or "[]"
        if not leaf:
            for x, y in zip(a, b, strict=False):
                if _typed(path, x) != _typed(path, y):
                    yield _typed(path, x)
                else:
                    yield from differences(kind, x, y, same, _typed(path, x))
    elif not _same_value(a, b, same):
        yield prefix or "(the whole body)"


def _differences_at(
    kind: str, a: dict[str, Any], b: dict[str, Any], key: str, path: str, same: Any
) -> Iterator[str]:
    if key not in a or key not in b:
        yield path if is_user_data(kind, path) else _typed(path, a.get(key, b.get(key)))
    elif isinstance(a[key], str) and same(a[key], b[key]):
        return  # equal, or a placeholder that stands for whatever b holds there
    elif is_user_data(kind, path):
        if not _same_value(a[key], b[key], same):
            yield path
    elif _typed(path, a[key]) != _typed(path, b[key]) or json_type(a[key]) != json_type(b[key]):
        yield path
    else:
        yield from differences(kind, a[key], b[key], same, _typed(path, a[key]))


def _same_value(a: Any, b: Any, same: Callable[[Any, Any], bool]) -> bool:
    """Whether two JSON values are equal, their scalars (and any value a string of a stands
    for) compared by `same`."""
    if isinstance(a, str):
        return same(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k], same) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_value(x, y, same) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return same(a, b)
