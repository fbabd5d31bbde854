"""convtap's Datasette plugin: the canned queries and the tables described, on every database
Datasette serves that is a capture (whatever its file's name), none on the others.

It gives SQL `convtap_event(data, raw)` (an events row's text: `data` is NULL when its bytes
are compressed) and `convtap_message(json, text, json_without_text)` (a message's whole JSON).

Datasette finds it by the `datasette` entry point in convtap's package metadata. It imports
Datasette, `canned` and `compact` only, so `pip install --no-deps convtap` in Datasette's
environment is enough (convtap's own dependencies need not fit beside Datasette's).
"""

from __future__ import annotations

import os
from typing import Any

from datasette import hookimpl

from convtap.store.canned import QUERIES, database_metadata, is_capture_file
from convtap.store.compact import add_sql_functions

# file path → (its modification time, whether it is a capture): one entry per file served,
# read again when the file changes (a file being made into a capture while Datasette runs).
_CAPTURES: dict[str, tuple[int, bool]] = {}


def _is_capture(datasette: Any, database: str | None) -> bool:
    db = datasette.databases.get(database) if database is not None else None
    path = getattr(db, "path", None)
    if not path:
        return False  # an in-memory database is no capture
    try:
        changed = os.stat(path).st_mtime_ns
    except OSError:
        return False
    known = _CAPTURES.get(path)
    if known is None or known[0] != changed:
        known = _CAPTURES[path] = (changed, is_capture_file(path))
    return known[1]


@hookimpl
def canned_queries(datasette: Any, database: str, actor: Any) -> dict[str, Any]:
    if not _is_capture(datasette, database):
        return {}
    return {name: dict(query) for name, query in QUERIES.items()}


@hookimpl
def get_metadata(datasette: Any, key: Any, database: str | None, table: Any) -> dict[str, Any]:
    captures = {name: database_metadata() for name in list(datasette.databases)
                if _is_capture(datasette, name)}  # fmt: skip
    return {"databases": captures} if captures else {}


@hookimpl
def prepare_connection(conn: Any) -> None:
    add_sql_functions(conn)
