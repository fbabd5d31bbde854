"""A capture as convtap leaves it, checked when a command opens one, before it reads a row or
changes a byte: every table there with its columns, every value of its column's type, the
columns convtap always fills filled (the row types say which: `store.rows`), and each header
list a list of [name, value] pairs. A capture that is not (edited by hand, damaged) is one
`DamagedCapture` naming the table, the column and the row, whichever command opened it; the
readers behind it never meet such a value, so none of them needs a check of its own.

One query per table, which SQLite answers from each row's header alone for the types (a large
text or blob is not read). A capture of an earlier schema is read as it is: its columns are
checked as they are (NULL anywhere), and those a later schema added may be missing.
"""

from __future__ import annotations

import dataclasses
import functools
import sqlite3
from pathlib import Path

import orjson

from convtap.store.errors import DamagedCapture
from convtap.store.rows import ROW_TYPES, Row
from convtap.store.schema import ADDED_IN, SCHEMA_VERSION, TABLES

# SQLite's storage classes each column's values may have (`typeof`); a float column holds an
# integral value as an integer when it was written as one.
STORAGE = {str: ("text",), int: ("integer",), float: ("real", "integer"), bytes: ("blob",)}
WHAT = {str: "text", int: "an integer", float: "a number", bytes: "bytes"}
HEADERS = ("request_headers", "response_headers")  # flows: JSON lists of [name, value] pairs
VIEWS = ("call_ledger",)
SHOWN = 40  # characters of a wrong value quoted in the message


def required(row_type: type[Row]) -> set[str]:
    """The columns a row type always writes: its fields without a default or a None."""
    return {
        f.name
        for f in dataclasses.fields(row_type)
        if f.default is dataclasses.MISSING and "None" not in str(f.type)
    }


REQUIRED = {row_type.TABLE: required(row_type) for row_type in ROW_TYPES}


def check_capture(conn: sqlite3.Connection, path: Path, version: int) -> None:
    """Raise `DamagedCapture` for the first thing in the capture convtap did not leave so."""
    conn.create_function(PAIRS, 1, header_pairs, deterministic=True)
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    for table in TABLES:
        if table not in names and version >= ADDED_IN.get(table, 1):
            raise DamagedCapture(f"{path} is not as convtap left it: it has no table {table}")
    for view in VIEWS:
        if view not in names:
            raise DamagedCapture(f"{path} is not as convtap left it: it has no view {view}")
    for table, (columns, _) in TABLES.items():
        if table not in names:
            continue  # (one a later schema added)
        present = {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}
        for column in columns:
            if column not in present and version >= SCHEMA_VERSION:
                raise DamagedCapture(
                    f"{path} is not as convtap left it: table {table} has no column {column}"
                )
        current = version >= SCHEMA_VERSION
        _check_rows(conn, path, table, [c for c in columns if c in present], current)


def _conditions(table: str, columns: list[str], current: bool) -> dict[str, str]:
    """Per column, what each of its values satisfies in a capture as convtap leaves it (one of
    an earlier schema: its columns were not all filled then)."""
    kinds, _ = TABLES[table]
    found = {}
    for column in columns:
        allowed = [*STORAGE[kinds[column]]]
        if column not in REQUIRED[table] or not current:
            allowed.append("null")
        listed = ", ".join(f"'{kind}'" for kind in allowed)
        condition = f'typeof("{column}") IN ({listed})'
        if table == "flows" and column in HEADERS:
            condition += f' AND ("{column}" IS NULL OR {_pairs(column)})'
        if table == "events" and column == "data" and current:  # its text, or its bytes in `raw`
            held = ' OR "raw" IS NOT NULL' if "raw" in columns else ""
            condition += f' AND ("data" IS NOT NULL{held})'
        found[column] = condition
    return found


def _pairs(column: str) -> str:
    """SQL: the column is a JSON list of [text, text] pairs (`header_pairs`: in SQL's JSON
    functions the test took ten times as long)."""
    return f'{PAIRS}("{column}")'


PAIRS = "convtap_header_pairs"


@functools.lru_cache(maxsize=1024)  # most flows of a capture carry the same few header lists
def header_pairs(text: object) -> bool:
    """Whether `text` is a JSON list of [name, value] pairs of strings."""
    try:
        value = orjson.loads(text) if isinstance(text, str) else None
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, list) and all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
        for pair in value
    )


def _check_rows(
    conn: sqlite3.Connection, path: Path, table: str, columns: list[str], current: bool
) -> None:
    conditions = _conditions(table, columns, current)
    if not conditions:
        return
    wrong = " OR ".join(f"NOT ({condition})" for condition in conditions.values())
    found = conn.execute(f'SELECT rowid FROM "{table}" WHERE {wrong} LIMIT 1').fetchone()
    if found is None:
        return
    rowid = found[0]
    for column, condition in conditions.items():
        sql = f'SELECT NOT ({condition}), "{column}" FROM "{table}" WHERE rowid = ?'
        bad, value = conn.execute(sql, (rowid,)).fetchone()
        if bad:
            raise DamagedCapture(
                f"{path} is not as convtap left it: {table}.{column} of row {rowid} is "
                f"{_shown(value)}, not {_expected(table, column, current)}"
            )


def _shown(value: object) -> str:
    if value is None:
        return "NULL"
    text = repr(value if not isinstance(value, bytes) else bytes(value[:SHOWN]))
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def _expected(table: str, column: str, current: bool) -> str:
    if table == "flows" and column in HEADERS:
        return "a JSON list of [name, value] pairs"
    if table == "events" and column == "data" and current:
        return "text, or NULL where raw holds the event's bytes"
    kind = WHAT[TABLES[table][0][column]]
    return kind if column in REQUIRED[table] and current else f"{kind} or NULL"
