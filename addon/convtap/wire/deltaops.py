"""Delta encoding v1's ops applied to a decoded state (docs/protocol.md, "Delta encoding v1",
rules 4 and 5): JSON Pointer paths, `add`, `replace`, `remove`, `append`, `truncate` and `patch`,
each checked before it changes anything (an op that cannot apply raises `InvalidDelta`, which
the decoder in `wire.delta` records as a decode error) and told to the string sources
(`wire.provenance`) when a reader follows strings."""

from __future__ import annotations

from typing import Any

from convtap.wire.jsonvalue import JSON
from convtap.wire.provenance import Leaf, Place, StringSources

OPS = frozenset({"add", "replace", "remove", "append", "truncate", "patch"})


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class InvalidDelta(ValueError):
    """A delta that cannot apply; the decoder turns it into a DecodeError."""


def copied(value: JSON) -> JSON:
    """A copy of a decoded JSON value (what `copy.deepcopy` makes of one: its containers new,
    its scalars shared, since none can change), several times faster."""
    if type(value) is dict:
        return {key: copied(item) for key, item in value.items()}
    if type(value) is list:
        return [copied(item) for item in value]
    return value


def pointer(path: str) -> list[str]:
    """Rule 5: JSON Pointer (RFC 6901) segments; `~1` is decoded before `~0`."""
    if path == "":
        return []
    if path[0] != "/":
        raise InvalidDelta("a path must be empty or start with '/'")
    return [s.replace("~1", "/").replace("~0", "~") for s in path[1:].split("/")]


def _is_index(segment: str) -> bool:
    return segment.isascii() and segment.isdigit()


# Who applies an op, for `wire.provenance`: its sources (None: not followed), the channel, the
# event and where its value sits in the event's data.
Origin = tuple[StringSources | None, int, int, Leaf]


def patch(root: JSON, path: str, ops: JSON, origin: Origin) -> JSON:
    """Rule 4 `patch`: sub-ops relative to the patch path, applied whole or not at all (the
    caller undoes what `origin`'s sources were told when it raises)."""
    if not isinstance(ops, list):
        raise InvalidDelta("patch value must be a list of operations")
    holder = {0: copied(root)} if root is not MISSING else {}
    sources, channel, event, leaf = origin
    for n, sub in enumerate(ops):
        if not isinstance(sub, dict) or not isinstance(sub.get("p"), str) or "o" not in sub:
            raise InvalidDelta(f"sub-op {n} needs its own p and o")  # they inherit nothing
        o = sub["o"]
        inner: Origin = (sources, channel, event, (*leaf, n, "v"))
        if o == "patch":
            holder[0] = patch(holder.get(0, MISSING), path + sub["p"], sub.get("v", MISSING),
                               inner)  # fmt: skip
        elif isinstance(o, str) and o in OPS:
            apply(holder, 0, pointer(path + sub["p"]), o, sub.get("v", MISSING), inner)
        else:
            raise InvalidDelta(f"sub-op {n}: unknown op {o!r}")
    return holder.get(0, MISSING) if holder else MISSING


def apply(
    roots: dict[int, JSON], channel: int, segments: list[str], op: str, value: JSON,
    origin: Origin | None = None,
) -> tuple[Any, Any, list[str]] | None:  # fmt: skip
    """Apply one op, checking everything before changing anything so that a failure leaves the
    state untouched. Returns the appended-to string's place when the op appended text."""
    if value is MISSING and op != "remove":
        raise InvalidDelta("missing value v")
    keys: list[Any] = [channel, *segments]
    container: Any = roots
    depth = 0
    while depth < len(keys) - 1:  # walk what exists
        child = _get(container, keys[depth])
        if child is MISSING or child is None:
            break
        if not isinstance(child, dict | list):
            where = "/" + "/".join(segments[:depth])
            raise InvalidDelta(f"{where} is a {_kind(child)}, not a container")
        container = child
        depth += 1
    if depth < len(keys) - 1:
        # Rule 5: create the missing containers, once we know the op can apply to a new one.
        _check_bounds(container, keys[depth], remove=False)
        for key in keys[depth + 1 :]:
            _check_new_container_key(key)
        _check_op(op, MISSING, value)
        for key, next_key in zip(keys[depth:-1], keys[depth + 1 :], strict=True):
            fresh: Any = [] if _is_index(next_key) or next_key == "-" else {}
            _set(container, key, fresh)
            container = fresh
        target = MISSING
    else:
        target = _get(container, keys[-1])
        _check_op(op, target, value)
        if op in ("add", "replace", "remove") or target is MISSING:
            _check_bounds(container, keys[-1], remove=op == "remove")
    place = None
    if origin is not None:  # the op will apply: its sources (when followed) are told
        sources, shadow_channel, event, leaf = origin
        if sources is not None:
            place = sources.at(roots, channel, shadow_channel, segments, event, leaf)
    return _perform(container, keys[-1], op, target, value, place)


def _get(container: Any, key: Any) -> JSON:
    if isinstance(container, dict):
        return container.get(key, MISSING)
    if not _is_index(key):
        if key == "-":
            return MISSING
        raise InvalidDelta(f"{key!r} is not an array index")
    index = int(key)
    return container[index] if index < len(container) else MISSING


def _check_bounds(container: Any, key: Any, *, remove: bool) -> None:
    """An array index names an item, or (except for remove) the end of the array."""
    if not isinstance(container, list):
        return  # object keys: remove of a missing key is caught by _check_op
    size = len(container)
    if key == "-":
        if remove:
            raise InvalidDelta("'-' names no item to remove")
        return
    if int(key) > (size - 1 if remove else size):
        raise InvalidDelta(f"index {key} is out of range for an array of {size}")


def _check_new_container_key(key: str) -> None:
    if not (_is_index(key) or key == "-"):
        return  # an object key: a new {} takes it
    if key not in ("0", "-"):
        raise InvalidDelta(f"index {key} is out of range for a new array")


def _check_op(op: str, target: JSON, value: JSON) -> None:
    if op in ("add", "replace"):
        return
    if op == "remove":
        if target is MISSING:
            raise InvalidDelta("nothing to remove")
    elif op == "append":
        if isinstance(target, str):
            if isinstance(value, dict | list):
                raise InvalidDelta(f"cannot append a {_kind(value)} onto a string")
        elif isinstance(target, dict):
            if not isinstance(value, dict):
                raise InvalidDelta(f"cannot append a {_kind(value)} onto an object")
        elif not (isinstance(target, list) or target is MISSING or target is None):
            raise InvalidDelta(f"cannot append onto a {_kind(target)}")
    elif op == "truncate":
        if type(value) is not int or value < 0:
            raise InvalidDelta(f"truncate needs a non-negative integer, not {value!r}")
        if not isinstance(target, str | list):
            raise InvalidDelta(f"cannot truncate a {_kind(target)}")


def _set(container: Any, key: Any, value: JSON) -> None:
    if isinstance(container, dict):
        container[key] = value
    elif key == "-" or int(key) == len(container):
        container.append(value)
    else:
        container[int(key)] = value


def _perform(
    container: Any, key: Any, op: str, target: JSON, value: JSON, place: Place | None
) -> tuple[Any, Any, list[str]] | None:
    """Rule 4, once _check_op and _check_settable have passed. `place` is told first (it reads
    the state before the op)."""
    is_list = isinstance(container, list)
    if is_list:
        key = len(container) if key == "-" else int(key)
    if op == "add" and is_list:
        if place is not None:
            place.insert(value)
        container.insert(key, value)  # on an array index, add inserts
    elif op in ("add", "replace"):
        if place is not None:
            place.set(value)
        _set(container, key, value)
    elif op == "remove":
        if place is not None:
            place.remove()
        del container[key]
    elif op == "truncate":
        kept = _utf16_prefix(target, value) if isinstance(target, str) else target[:value]
        if place is not None:
            if isinstance(kept, str):
                place.truncate_text(len(kept))
            else:
                place.truncate_items(len(kept))
        container[key] = kept
    elif isinstance(target, str):
        text = _as_text(value)
        if place is not None:
            place.append_text(target, text)
        container[key] = target + text
        return container, key, [container[key]]
    elif isinstance(target, list):
        if isinstance(value, list):
            if place is not None:
                place.extend(value)
            target.extend(value)  # onto an array, append concatenates one level
        else:
            if place is not None:
                place.push(value)
            target.append(value)
    elif isinstance(target, dict):
        assert isinstance(value, dict)  # (`_check_op`)
        if place is not None:
            place.merge(value)
        target.update(value)  # shallow merge, new keys win: how /message/metadata grows
    else:
        if place is not None:
            place.set(value)
        _set(container, key, value)  # onto missing or null, append sets
        if isinstance(value, str):
            return container, key, [value]
    return None


def _as_text(value: JSON) -> str:
    """`v` as text, as JavaScript's `+` would write a scalar."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _utf16_prefix(text: str, units: int) -> str:
    """The first `units` UTF-16 code units of `text`, as JavaScript's string slicing counts."""
    if text.isascii() or all(ord(ch) < 0x10000 for ch in text):
        return text[:units]
    encoded = text.encode("utf-16-le", "surrogatepass")[: 2 * units]
    return encoded.decode("utf-16-le", "surrogatepass")


def _kind(value: JSON) -> str:
    if value is MISSING:
        return "missing value"
    if value is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), "number"
    )
