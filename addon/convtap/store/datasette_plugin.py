"""convtap's Datasette plugin: the canned queries and the tables described, on every database
Datasette serves that is a capture (whatever its file's name), none on the others; for
Datasette 0.65 and for Datasette 1.0 (alpha), each through its own interface and neither's
deprecated one.

- **Datasette 1.0** keeps queries and descriptions in its internal database: once it starts
  (the `startup` hook), each capture it serves gets the queries (`Datasette.add_query`, stored
  queries) and its tables' descriptions (`set_database_metadata`, `set_resource_metadata`),
  where `get_metadata` (deprecated since 1.0a14) and `canned_queries` (gone) were.
- **Datasette 0.65** asks for them on every request: the `canned_queries` and `get_metadata`
  hooks, the interface it has.

Which one is used is told by the hooks Datasette declares and, for metadata, by its version
(1.0a14 moved it). On both it gives
SQL `convtap_event(data, raw)` (an events row's text: `data` is NULL when its bytes are
compressed) and `convtap_message(json, text, json_without_text)` (a message's whole JSON).

Datasette finds it by the `datasette` entry point in convtap's package metadata. It imports
Datasette, `canned` and `compact` only, so `pip install --no-deps convtap` in Datasette's
environment is enough (convtap's own dependencies need not fit beside Datasette's).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from datasette import hookimpl, hookspecs
from datasette.version import __version__ as datasette_version

from convtap.store.canned import DESCRIPTION, QUERIES, TABLES, database_metadata, is_capture_file
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


def _metadata_is_stored(version: str) -> bool:
    """Datasette 1.0a14 and later keep metadata in their internal database (`get_metadata` is
    deprecated there)."""
    major, _, rest = version.partition(".")
    if not major.isdigit() or int(major) < 1:
        return False
    alpha = rest.partition("a")[2]
    return not (rest.startswith("0a") and alpha.isdigit() and int(alpha) < 14)


# Told before Datasette's app exists (plugins load while it is imported): its hooks, its version.
STORES_QUERIES = not hasattr(hookspecs, "canned_queries")  # stored queries replaced the hook
STORES_METADATA = _metadata_is_stored(datasette_version)

if STORES_QUERIES or STORES_METADATA:

    @hookimpl
    def startup(datasette: Any) -> Callable[[], Awaitable[None]]:
        async def describe_captures() -> None:
            for name in list(datasette.databases):
                if _is_capture(datasette, name):
                    await _describe(datasette, name)

        return describe_captures


async def _describe(datasette: Any, database: str) -> None:
    """One capture's queries and descriptions, into Datasette 1.0's internal database."""
    if STORES_QUERIES:
        for name, query in QUERIES.items():
            await datasette.add_query(
                database, name, query["sql"], title=query["title"],
                description=query["description"], source="plugin",
            )  # fmt: skip
    if STORES_METADATA:
        await datasette.set_database_metadata(database, "description", DESCRIPTION)
        for table, text in TABLES.items():
            await datasette.set_resource_metadata(database, table, "description", text)


if not STORES_QUERIES:

    @hookimpl
    def canned_queries(datasette: Any, database: str, actor: Any) -> dict[str, Any]:
        if not _is_capture(datasette, database):
            return {}
        return {name: dict(query) for name, query in QUERIES.items()}


if not STORES_METADATA:

    @hookimpl
    def get_metadata(datasette: Any, key: Any, database: str | None, table: Any) -> dict[str, Any]:
        captures = {name: database_metadata() for name in list(datasette.databases)
                    if _is_capture(datasette, name)}  # fmt: skip
        return {"databases": captures} if captures else {}


@hookimpl
def prepare_connection(conn: Any) -> None:
    add_sql_functions(conn)
