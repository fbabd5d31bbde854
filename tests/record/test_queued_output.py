"""convtap.record.queued_output: what a process prints never holds up its caller."""

from __future__ import annotations

import threading
import time

from convtap.record.queued_output import QUEUED, QueuedOutput


class Stalled:
    """A stream whose reader stopped reading until `resume` is set."""

    def __init__(self) -> None:
        self.resume = threading.Event()
        self.written: list[str] = []

    def write(self, text: str) -> int:
        self.resume.wait()
        self.written.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def test_a_stalled_reader_costs_lines_not_time() -> None:
    stream = Stalled()
    output = QueuedOutput(stream)
    start = time.monotonic()
    for n in range(QUEUED):
        print(f"line {n}", file=output)  # type: ignore[arg-type]
    assert time.monotonic() - start < 1.0  # never waited for the reader
    assert output.dropped >= QUEUED // 2 - 1 and not output.isatty()
    stream.resume.set()
    output.drain(10)
    text = "".join(stream.written)
    assert text.startswith("line 0\nline 1\n") and text.count("\n") == QUEUED - output.dropped
