"""What the store says when it cannot go on: the standard library only (the Datasette plugin's
reads raise them too)."""

from __future__ import annotations


class StoreError(Exception):
    """The database cannot be opened or is not a convtap capture."""


class DamagedRow(StoreError):
    """A row of the capture cannot be read back (its compressed bytes are damaged)."""


class DamagedCapture(StoreError):
    """A capture that is not as convtap left it (edited by hand, damaged): which table, column
    and row is said, and nothing is read or changed."""


class StoreFull(StoreError):
    """The disk (or the file's size limit) is full: nothing more can be written."""
