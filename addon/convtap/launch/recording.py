"""`convtap record`: mitmproxy started with convtap's addon (`mitmdump -s script.py`), the live
page and the traces beside it; or, `--catch-up`, no proxy and the journal recorded in this
process.

The CLI checks the options and renders what is said here; this module does the work. Every
check that can refuse runs before a file is made (the redaction key, the database, the room for
the journal); a proxy that refuses to start (a bad `--set` value: mitmproxy says why itself)
leaves no new database or journal behind. The caller installs `StopRequest` before importing
this module: a Ctrl-C while mitmproxy loads is a request to stop, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mitmproxy.tools import cmdline
from mitmproxy.tools.main import run

from convtap.journal.segments import JournalError, check_free, journal_dir, remove_if_unused
from convtap.proxy import MITM_SCRIPT
from convtap.proxy.addon import ConvtapAddon
from convtap.proxy.stopping import StopRequest, recording_master
from convtap.record.queued_output import QueuedOutput
from convtap.redact.redactor import UnusableKey, chosen
from convtap.store.database import StoreError, check_database, open_readonly, remove_if_empty


class RecordError(Exception):
    """Recording cannot start (the redaction key, the database, the journal, the live page):
    one line saying why; nothing new is left behind."""


class ProxyRefused(Exception):
    """mitmproxy refused to start (it said why itself); nothing new is left behind."""


@dataclass(frozen=True)
class ProxySettings:
    """What `convtap record` runs: the proxy's mode and address, the capture, redaction on or
    off, any other mitmproxy options (`NAME=VALUE`), the live page's port (None: no page; 0: a
    free one) and where each turn's spans go (None: nowhere)."""

    mode: str
    listen_host: str
    listen_port: int
    db: Path
    redact: bool
    settings: tuple[str, ...]
    web_port: int | None
    traces: str | None
    otel_content: bool

    def mitmdump_args(self) -> list[str]:
        """mitmdump's command line: convtap's script loaded, its options set."""
        args = ["--mode", self.mode, "--listen-host", self.listen_host,
                "--listen-port", str(self.listen_port), "-s", str(MITM_SCRIPT),
                "--set", f"convtap_db={self.db}",
                "--set", f"convtap_redact={'true' if self.redact else 'false'}",
                "--set", "convtap_echo=stdout", "--set", "convtap_ws_trim=true",
                "--set", "flow_detail=0", "--set", "termlog_verbosity=warn"]  # fmt: skip
        for setting in self.settings:
            args += ["--set", setting]
        return args


@dataclass(frozen=True)
class Stopped:
    """How the proxy stopped: lines of its output dropped (their reader was too slow), and why
    the recording stopped on its own, when it did."""

    dropped: int
    failed: str | None


def prepare(db: Path, *, redact: bool) -> None:
    """The checks before a byte is written: the key first (an unusable one leaves no database
    behind), then the database, then the room for its journal."""
    try:
        chosen(redact)
        check_database(db)
        check_free(journal_dir(db))
    except (UnusableKey, StoreError, JournalError) as exc:
        raise RecordError(str(exc)) from None


def catch_up(db: Path, *, redact: bool) -> bool:
    """Record what a stopped recording left in the journal beside `db`, in this process (Ctrl-C
    stops it; the journal keeps what is left), the call lines on stdout. False when there is no
    journal: then no database is made either (a file that is no capture is said so)."""
    from convtap.record.consumer import catch_up as record_journal

    if not journal_dir(db).is_dir():
        try:
            if db.exists():
                open_readonly(db).conn.close()
        except StoreError as exc:
            raise RecordError(str(exc)) from None
        return False
    prepare(db, redact=redact)
    StopRequest.raised()
    if StopRequest.requested:
        raise KeyboardInterrupt
    try:
        return record_journal(db, redact=redact, echo="stdout")
    except (UnusableKey, StoreError, JournalError) as exc:
        raise RecordError(str(exc)) from None


def record(
    proxy: ProxySettings, echo: Callable[[str], None], warn: Callable[[str], None]
) -> Stopped:
    """Run the proxy until it stops (Ctrl-C, or its recorder died): what it records goes into
    `proxy.db`. `echo` says the live page's URL and where the traces go, `warn` that secrets
    are kept in clear; the proxy's own lines go to stdout through a queue that never holds up
    the traffic."""
    new = not proxy.db.exists()
    prepare(proxy.db, redact=proxy.redact)
    if not proxy.redact:
        warn("--no-redact: secrets will be stored in clear")
    page = None
    try:
        if proxy.web_port is not None:
            page = start_live_page(proxy.db, proxy.web_port, echo)
        if proxy.traces is not None:  # the recorder process the addon starts reads them
            from convtap.telemetry.live import CONTENT, ENDPOINT

            os.environ[ENDPOINT] = proxy.traces
            os.environ[CONTENT] = "1" if proxy.otel_content else "0"
            echo(f"Traces: each turn's spans go to {proxy.traces} as it ends")
        sys.stdout = output = QueuedOutput(sys.stdout)  # mitmproxy's lines never hold the traffic
        asyncio.set_event_loop_policy(QuietCancelPolicy())
        sys.argv[0] = "convtap"  # mitmproxy says a bad --set value as `ARGV0: why`
        master = run(recording_master(), cmdline.mitmdump, proxy.mitmdump_args())
    except RecordError:
        if new:
            _remove_new(proxy.db)
        raise
    except SystemExit as exc:  # mitmproxy refused to start (a --set value): nothing is left
        if exc.code in (0, None):
            raise
        if new:
            _remove_new(proxy.db)
        raise ProxyRefused from None
    finally:
        StopRequest.ignored()  # the proxy has stopped: what is left is the way out
        if page is not None:
            _stop(page)
    addon = master.addons.get(ConvtapAddon.name)  # type: ignore[no-untyped-call]
    failed = addon.failed if isinstance(addon, ConvtapAddon) and addon.failed else None
    return Stopped(output.dropped, failed)


def start_live_page(db: Path, port: int, echo: Callable[[str], None]) -> subprocess.Popen[str]:
    """`convtap serve` in a process of its own, at a lower priority than the proxy; its URL
    said once it listens (`RecordError` when it cannot start: it said why on stderr). In a
    process group of its own, which the terminal's Ctrl-C does not reach: it is stopped once
    the recorder has finished."""
    page = subprocess.Popen([sys.executable, "-m", "convtap.cli", "serve", "--db", str(db),
                             "--port", str(port)], stdout=subprocess.PIPE, text=True,
                            process_group=0)  # fmt: skip
    assert page.stdout is not None
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, page.pid, 10)  # the traffic goes first
    url = page.stdout.readline().strip()
    if not url:
        page.wait()
        raise RecordError("the live page could not start (--web)")
    echo(f"Watch live: {url}")
    return page


def _stop(page: subprocess.Popen[str]) -> None:
    page.terminate()
    try:
        page.wait(30)
    except subprocess.TimeoutExpired:
        page.kill()


def _remove_new(db: Path) -> None:
    """A database this run made, and its journal, when nothing was recorded into them."""
    remove_if_empty(db)
    remove_if_unused(journal_dir(db))


class QuietCancelPolicy(asyncio.DefaultEventLoopPolicy):
    """Loops that do not print a connection's cancellation. When the proxy stops with clients
    connected (its recorder died, or Ctrl-C), the loop cancels each connection's task, and
    Python 3.11's streams then print a CancelledError traceback per connection. mitmproxy puts
    back the loop's own handler when it stops, so the handler is set as the loop is made."""

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        loop.set_exception_handler(_quiet_cancelled)
        return loop


def _quiet_cancelled(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if not isinstance(context.get("exception"), asyncio.CancelledError):
        loop.default_exception_handler(context)
