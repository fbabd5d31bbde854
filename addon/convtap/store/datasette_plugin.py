"""convtap's Datasette plugin: the canned queries and the tables described, on every database
Datasette serves that is a capture (whatever its file's name), none on the others.

Datasette finds it by the `datasette` entry point in convtap's package metadata. It imports
Datasette and `canned` only, so `pip install --no-deps convtap` in Datasette's environment is
enough (convtap's own dependencies need not fit beside Datasette's).
"""

from __future__ import annotations

from typing import Any

from datasette import hookimpl

from convtap.store.canned import QUERIES, database_metadata, is_capture_file

_CAPTURES: dict[str, bool] = {}  # file path → whether it is a capture; one entry per file served


def _is_capture(datasette: Any, database: str | None) -> bool:
    db = datasette.databases.get(database) if database is not None else None
    path = getattr(db, "path", None)
    if not path:
        return False  # an in-memory database is no capture
    if path not in _CAPTURES:
        _CAPTURES[path] = is_capture_file(path)
    return _CAPTURES[path]


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
