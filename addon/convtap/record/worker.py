"""The recorder in its own process, fed by the journal, so the proxy only forwards bytes.

Decoding, redaction, the rules and SQLite all cost CPU, and mitmproxy runs every hook and every
stream callable on one event loop under one GIL. So the proxy appends each event to the journal
(`JournalBackend`, one write) and `python -m convtap.record.worker` records it at its own pace
(`record.consumer`), committing its journal position with the rows.

It opens the database first, with the store alone loaded, and says so to the proxy (`--ready-fd`):
a database it may not record into is refused before the proxy listens, and the proxy waits for
that only, not for the recorder, whose modules (decoding, redaction, the rules) load next while
the proxy already forwards and journals.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys

from convtap.journal.backend import DISK_FULL, READY, REFUSED
from convtap.record.queued_output import QueuedOutput
from convtap.store.database import StoreError, StoreFull, Writer, reader_beside
from convtap.wire.jsonvalue import allow_deep_json

NICE = 10  # the recorder process's priority below the proxy's (bench/proxy_bench.py)
# `record --otlp-endpoint` sets it (`telemetry.live.ENDPOINT`): the OpenTelemetry SDK takes a
# quarter of a second to load, so it loads only then.
OTLP_ENDPOINT = "CONVTAP_OTLP_ENDPOINT"


def _stdin_closed(timeout: float) -> bool:
    """Wait up to `timeout` for the proxy's pipe; True once it has closed (the proxy is gone)."""
    ready, _, _ = select.select([sys.stdin.fileno()], [], [], timeout)
    if not ready:
        return False
    return os.read(sys.stdin.fileno(), 4096) == b""


def _tell(ready_fd: int | None, word: bytes, detail: str = "") -> None:
    """Say to the proxy whether the database was opened (once; the descriptor is closed)."""
    if ready_fd is None:
        return
    try:
        os.write(ready_fd, word + detail.encode("utf-8", "replace").replace(b"\n", b" ") + b"\n")
        os.close(ready_fd)
    except OSError:
        pass  # the proxy is gone: the journal is read to its end all the same


def main(argv: list[str] | None = None) -> int:
    """`python -m convtap.record.worker DB`: record what the proxy journals beside DB."""
    parser = argparse.ArgumentParser(prog="convtap.record.worker")
    parser.add_argument("db")
    parser.add_argument("--echo", default="stdout", choices=["stdout", "log", "off"])
    parser.add_argument("--no-redact", action="store_true")
    parser.add_argument("--ready-fd", type=int, help="where to say the database is open")
    args = parser.parse_args(argv)
    # The proxy starts it in a process group of its own (the terminal's Ctrl-C does not reach
    # it); a SIGINT sent to it alone is ignored too. It ends when the journal is closed, or
    # when the proxy is gone (its pipe closes) and the journal is read to its end.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The client's traffic first: the proxy forwards at full speed while the recorder takes
    # what CPU is left (what it has not recorded yet waits in the journal, and is reported).
    os.nice(NICE)
    allow_deep_json()
    # What it prints waits apart: a reader who stops reading (a paused terminal) holds up no
    # recording, and lines past the queue are dropped (the database has every call).
    sys.stdout = stdout = QueuedOutput(sys.stdout)
    sys.stderr = stderr = QueuedOutput(sys.stderr)
    try:
        try:
            writer = Writer(args.db)
        except StoreFull:  # not a refusal: the proxy goes on, the journal keeps what it can
            _tell(args.ready_fd, READY)
            raise
        except StoreError as exc:
            if args.ready_fd is None:
                raise
            _tell(args.ready_fd, REFUSED, str(exc))  # the proxy says why, once
            return 2
        _tell(args.ready_fd, READY)
        # Decoding, redaction and the rules, loaded once the proxy may go on.
        from convtap.record.consumer import JournalConsumer

        consumer = JournalConsumer(args.db, redact=not args.no_redact, echo=args.echo,
                                   writer=writer)  # fmt: skip
        traces = None
        if os.environ.get(OTLP_ENDPOINT):  # each turn's spans, from a thread that only reads
            from convtap.telemetry.live import from_environment

            traces = from_environment(lambda: reader_beside(consumer.writer))
        try:
            consumer.run(_stdin_closed)
        finally:
            consumer.close()
            if traces is not None:
                traces.close()
    except StoreFull as exc:  # the journal keeps what it can; a restart records it
        print(f"convtap: recording stopped: {exc}", file=sys.stderr, flush=True)
        return DISK_FULL
    except StoreError as exc:  # the database cannot be written (locked, damaged): say so
        print(f"convtap: recording stopped: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        if dropped := stdout.dropped + stderr.dropped:
            print(f"convtap: {dropped} lines of the recorder's output were dropped: their"
                  " reader was too slow (`convtap calls` lists every call)",
                  file=sys.__stderr__)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
