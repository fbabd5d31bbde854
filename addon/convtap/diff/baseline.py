"""Shapes files: a capture's shapes alone, to commit as a baseline and diff against.

The file is JSON, keys sorted, two-space indented, one trailing newline, so that the same shapes
write the same bytes and a refreshed baseline reviews as a small diff in a pull request:

    {
      "contexts": {FAMILY: N, ...},
      "convtap_shapes": 1,
      "kinds": {KIND: {"contexts": N, "count": N, "family": FAMILY,
                       "paths": {PATH: {"count": N, "parent": PATH, "types": {TYPE: N},
                                        "values": {VALUE: N} | null}}}}
    }

`convtap_shapes` is the format's version (a reader refuses one it does not know). There are
counts, JSON types, paths and enum values only: no session value (userdata.toml).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from convtap.diff.shapes import FORMAT_KEY, FORMAT_VERSION, KindShape, PathShape, Shapes
from convtap.wire.jsonvalue import loads

SNIFF_BYTES = 4096  # `convtap_shapes` sorts after `contexts`, a handful of families
MAX_BYTES = 64 * 1024 * 1024  # a bound on what is read whole: real baselines are kilobytes


class ShapesError(Exception):
    """A file that says it is a shapes file but cannot be read as one."""


def to_json(shapes: Shapes) -> dict[str, Any]:
    kinds = {
        name: {
            "contexts": kind.contexts,
            "count": kind.count,
            "family": kind.family,
            "paths": {
                path: {
                    "count": shape.count,
                    "parent": shape.parent,
                    "types": dict(shape.types),
                    "values": None if shape.values is None else dict(shape.values),
                }
                for path, shape in kind.paths.items()
            },
        }
        for name, kind in shapes.kinds.items()
    }
    return {"contexts": dict(shapes.contexts), FORMAT_KEY: FORMAT_VERSION, "kinds": kinds}


def write_shapes(shapes: Shapes, out: TextIO) -> None:
    out.write(json.dumps(to_json(shapes), indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def is_shapes_file(path: Path) -> bool:
    """Whether a file says it is a shapes file (by its content: any name will do)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") and f'"{FORMAT_KEY}"'.encode() in head


def read_shapes(path: Path) -> Shapes:
    try:
        if path.stat().st_size > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES // 2**20} MB")
        data = loads(path.read_bytes())
        return from_json(data)
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ShapesError(f"{path} is not a readable shapes file: {_reason(exc)}") from None


def from_json(data: Any) -> Shapes:
    if not isinstance(data, dict) or data.get(FORMAT_KEY) != FORMAT_VERSION:
        found = data.get(FORMAT_KEY) if isinstance(data, dict) else None
        raise ValueError(f"format version {found!r}, expected {FORMAT_VERSION}")
    shapes = Shapes(contexts=_counts(data["contexts"]))
    for name, kind in _mapping(data["kinds"]).items():
        shape = KindShape(_text(kind["family"]), _count(kind["count"]), _count(kind["contexts"]))
        for path, p in _mapping(kind["paths"]).items():
            values = None if p["values"] is None else _counts(p["values"])
            shape.paths[str(path)] = PathShape(
                _text(p["parent"]), _count(p["count"]), _counts(p["types"]), values
            )
        shapes.kinds[str(name)] = shape
    return shapes


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, found {type(value).__name__}")
    return value


def _counts(value: Any) -> Counter[str]:
    return Counter({str(k): _count(v) for k, v in _mapping(value).items()})


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"expected a count, found {json.dumps(value)[:20]}")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, found {type(value).__name__}")
    return value


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!r}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
