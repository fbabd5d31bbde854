"""The store's reads return row types: no public function of a read module is annotated to
return `dict[str, Any]` (alone, in a list, an iterator or a mapping)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re

import pytest

READ_MODULES = ("reads", "report_queries", "trace_queries", "timeline_queries")
# The one read left returning plain rows: shape inference (`convtap diff`) reads every column of
# rows whose columns differ from schema to schema, as the capture has them.
PLAIN_ROWS = {"convtap.store.reads.iter_shape_rows"}
A_DICT = re.compile(r"\bdict\[str, Any\]")


def returns() -> list[tuple[str, str]]:
    found = []
    for name in READ_MODULES:
        module = importlib.import_module(f"convtap.store.{name}")
        for attr, function in vars(module).items():
            if attr.startswith("_") or not inspect.isfunction(function):
                continue
            if function.__module__ != module.__name__:
                continue  # imported from elsewhere
            found.append((f"{module.__name__}.{attr}", str(function.__annotations__["return"])))
    return found


def test_the_read_modules_are_inspected() -> None:
    names = {name for name, _ in returns()}
    assert {"convtap.store.reads.call_ledger", "convtap.store.trace_queries.model_turns",
            "convtap.store.report_queries.decode_errors"} <= names  # fmt: skip


@pytest.mark.parametrize("name, annotation", returns())
def test_no_read_returns_a_dict(name: str, annotation: str) -> None:
    if name in PLAIN_ROWS:
        assert A_DICT.search(annotation), f"{name} returns row types now: drop it from the list"
        return
    assert not A_DICT.search(annotation), f"{name} returns {annotation}"


def test_a_view_reads_its_columns_by_name() -> None:
    from convtap.store.views import CallPlace

    row = {"turn_id": "t", "call_id": "c", "protocol": "responses", "other": 1}
    place = CallPlace.read(row)
    assert place == CallPlace("c", "responses", None, None, None, "t")  # type: ignore[arg-type]
    assert list(place.as_json()) == [f.name for f in dataclasses.fields(CallPlace)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        place.tool = "x"  # type: ignore[misc]
