"""The timeline's rows are read by column name into frozen tuples: a field the query lacks
(a capture of an older schema) reads None, a column no field names is left out."""

from __future__ import annotations

import sqlite3

import pytest
from convtap.store.timeline_rows import CallStages, StepCall, read_as


def test_fields_are_read_by_name_whatever_the_columns_order() -> None:
    db = sqlite3.connect(":memory:")
    cursor = db.execute("SELECT 1.5 AS at, 'c1' AS call_id, 7 AS row_id, 'x' AS extra, "
                        "'' AS conv, 's1' AS step")  # fmt: skip
    (call,) = read_as(StepCall, cursor)
    assert call == StepCall(step="s1", conv="", row_id=7, call_id="c1", at=1.5)
    assert call.call_id == "c1"
    with pytest.raises(AttributeError):
        call.at = 2.0  # type: ignore[misc]


def test_a_missing_column_reads_none() -> None:
    db = sqlite3.connect(":memory:")
    (stages,) = read_as(CallStages, db.execute("SELECT 'c1' AS call_id, 1 AS answered"))
    assert stages == CallStages("c1", 1, None, None)


def test_columns_in_field_order_are_taken_whole() -> None:
    db = sqlite3.connect(":memory:")
    cursor = db.execute("SELECT 'c1' AS call_id, 1 AS answered, 0 AS accepted, 1 AS continued")
    assert read_as(CallStages, cursor) == [CallStages("c1", 1, 0, 1)]
