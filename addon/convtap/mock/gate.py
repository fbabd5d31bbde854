"""The go-ahead for the mock's `hold_after`: streams parked at their hold point until released."""

from __future__ import annotations

import asyncio
import threading


class Gate:
    """The go-ahead for `hold_after`: `go()` releases every stream parked at its hold point or,
    when none is, lets the next one through. Safe to query from any thread."""

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []
        self._banked = 0
        self._cond = threading.Condition()
        self.holding = 0

    async def wait(self) -> None:
        if self._banked:
            self._banked -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        with self._cond:
            self.holding += 1
            self._cond.notify_all()
        await future

    def go(self) -> int:
        released, self._waiters = self._waiters, []
        for future in released:
            if not future.done():
                future.set_result(None)
        with self._cond:
            self.holding -= len(released)
        if not released:
            self._banked += 1
        return len(released)

    def wait_held(self, count: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.holding >= count, timeout)
