"""A map with a bound: past `limit` entries, the least recently set one is forgotten. Every
long-lived map of a live recorder is one (the recorder runs for days; memory must not grow)."""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Bounded(OrderedDict[K, V]):
    def __init__(self, limit: int | None) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        if key in self:
            self.move_to_end(key)
        super().__setitem__(key, value)
        if self.limit is not None and len(self) > self.limit:
            self.popitem(last=False)
