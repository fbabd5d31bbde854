"""A map with a bound: past `limit` entries, the least recently set one is forgotten. Every
long-lived map of a live recorder is one (the recorder runs for days; memory must not grow)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
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


class Kept(list[V]):
    """A list that keeps its first `limit` items and counts the rest (`total`); `listener`, when
    set, sees every item (so that a caller can stream them all)."""

    def __init__(self, limit: int, listener: Callable[[V], object] | None = None) -> None:
        super().__init__()
        self.limit = limit
        self.total = 0
        self.listener = listener

    def append(self, item: V) -> None:
        self.total += 1
        if self.listener is not None:
            self.listener(item)
        if len(self) < self.limit:
            super().append(item)

    def extend(self, items: Iterable[V]) -> None:
        if self.listener is not None:
            for item in items:
                self.append(item)
            return
        items = list(items)
        self.total += len(items)
        room = self.limit - len(self)
        if room > 0:
            super().extend(items[:room])

    @property
    def dropped(self) -> int:
        return self.total - len(self)
