"""The store's reads return row types: no public function of a read module is annotated to
return `dict[str, Any]` or `sqlite3.Row` (alone, in a list, an iterator or a mapping, or under
an alias), its annotation resolved as Python reads it."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sqlite3
import typing
from typing import Any

import pytest

READ_MODULES = ("reads", "report_queries", "trace_queries", "timeline_queries")
# The reads left returning plain rows: shape inference (`convtap diff`) reads every column of
# rows whose columns differ from schema to schema, as the capture has them; the live page
# compares the last rows of any table it watches, whatever their columns, with what it saw.
PLAIN_ROWS = {"convtap.store.reads.iter_shape_rows", "convtap.store.timeline_queries.watched_rows"}


def plain(hint: Any) -> bool:
    """A `dict[str, Any]` or a `sqlite3.Row` is the hint or inside it."""
    if hint is sqlite3.Row:
        return True
    args = typing.get_args(hint)
    if typing.get_origin(hint) is dict and args == (str, Any):
        return True
    return any(plain(arg) for arg in args)


def test_a_plain_row_is_found_under_an_alias() -> None:
    rows = dict[str, list[sqlite3.Row]]
    assert plain(rows) and plain(list[dict[str, Any]]) and plain(typing.Iterator[sqlite3.Row])
    assert not plain(list[tuple[str, int]]) and not plain(dict[str, int])


def returns() -> list[tuple[str, Any]]:
    found = []
    for name in READ_MODULES:
        module = importlib.import_module(f"convtap.store.{name}")
        for attr, function in vars(module).items():
            if attr.startswith("_") or not inspect.isfunction(function):
                continue
            if function.__module__ != module.__name__:
                continue  # imported from elsewhere
            hint = typing.get_type_hints(function)["return"]
            found.append((f"{module.__name__}.{attr}", hint))
    return found


def test_the_read_modules_are_inspected() -> None:
    names = {name for name, _ in returns()}
    assert {"convtap.store.reads.call_ledger", "convtap.store.trace_queries.model_turns",
            "convtap.store.report_queries.decode_errors"} <= names  # fmt: skip


@pytest.mark.parametrize("name, hint", returns())
def test_no_read_returns_a_dict_or_a_plain_row(name: str, hint: Any) -> None:
    if name in PLAIN_ROWS:
        assert plain(hint), f"{name} returns row types now: drop it from the list"
        return
    assert not plain(hint), f"{name} returns {hint}"


def test_a_view_reads_its_columns_by_name() -> None:
    from convtap.store.views import CallPlace

    row = {"turn_id": "t", "call_id": "c", "protocol": "responses", "other": 1}
    place = CallPlace.read(row)
    assert place == CallPlace("c", "responses", None, None, None, "t")  # type: ignore[arg-type]
    assert list(place.as_json()) == [f.name for f in dataclasses.fields(CallPlace)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        place.tool = "x"  # type: ignore[misc]
