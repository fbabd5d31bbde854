"""`convtap record` (the proxy and its recorder, `--catch-up`, `--web`), `convtap serve` (the
live page) and `convtap mitm-script`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from convtap.cli.common import MITM_SCRIPT, db_option, fail, host_unknown, main, port_in_use, say


@main.command()
@click.option(
    "--mode",
    default="regular",
    show_default=True,
    metavar="MODE",
    help="mitmproxy's mode syntax: regular, reverse:http://127.0.0.1:9000, "
    "upstream:http://proxy:3128, ...",
)
@click.option("--listen-host", default="127.0.0.1", show_default=True)
@click.option("--listen-port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@db_option
@click.option("--no-redact", is_flag=True, help="Store secrets in clear (loudly).")
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="NAME=VALUE",
    help="Any other mitmproxy option (confdir, ssl_insecure, ...); repeatable.",
)
@click.option(
    "--catch-up",
    is_flag=True,
    help="No proxy: record what a stopped recording left in the journal beside --db, then exit.",
)
@click.option("--web", is_flag=True, help="Serve the report live on 127.0.0.1 (`convtap serve`).")
@click.option(
    "--web-port", type=click.IntRange(0, 65535), help="The live page's port (default: a free one)."
)
@click.option(
    "--otlp-endpoint",
    metavar="URL",
    help="Send each turn's OpenTelemetry spans over OTLP/HTTP to URL as it ends.",
)
@click.option("--otel-content", is_flag=True, help="With --otlp-endpoint: message content too.")
def record(
    mode: str,
    listen_host: str,
    listen_port: int,
    db: Path,
    no_redact: bool,
    settings: tuple[str, ...],
    catch_up: bool,
    web: bool,
    web_port: int | None,
    otlp_endpoint: str | None,
    otel_content: bool,
) -> None:
    """Run the proxy and record every turn, tool call and tool return into --db.

    Prints how to point a client at the proxy and trust its CA, then one line per tool call and
    tool return as they happen. Ctrl-C flushes the database and exits.

    \b
    Example:
      convtap record                                   # regular proxy on 127.0.0.1:8080
      convtap record --mode reverse:http://127.0.0.1:9000 --listen-port 8081
      convtap record --catch-up      # after a crash: record what the journal still holds
      convtap record --web           # and watch the report live: open the URL it prints
      convtap record --otlp-endpoint http://127.0.0.1:6006/v1/traces   # traces, live
    """
    from mitmproxy.proxy.mode_specs import ProxyMode
    from mitmproxy.tools import cmdline, dump
    from mitmproxy.tools.main import run

    from convtap.journal.segments import JournalError, check_free, journal_dir, remove_if_unused
    from convtap.proxy.addon import ConvtapAddon
    from convtap.record.local import redactor
    from convtap.record.queued_output import QueuedOutput
    from convtap.record.worker import catch_up as record_journal
    from convtap.store.database import StoreError, check_database, open_readonly

    if not catch_up:  # mitmproxy's own startup errors left a new database and its journal
        try:
            ProxyMode.parse(mode)
        except ValueError as exc:
            fail(f"--mode {mode}: {exc} (see `convtap record --help`)")
        if (unknown := host_unknown(listen_host)) is not None:
            fail(f"--listen-host {listen_host}: {unknown}")
    if not catch_up and (busy := port_in_use(listen_host, listen_port)) is not None:
        fail(f"cannot listen on {listen_host}:{listen_port} ({busy}): choose another "
             "--listen-port (0 picks a free one)")  # fmt: skip  # before any file is made
    if web and catch_up:
        fail("--web shows a recording: it cannot go with --catch-up")
    if web_port is not None and not web:
        fail("--web-port goes with --web")
    traces = live_traces_url(otlp_endpoint, otel_content, catch_up)
    web_port = web_port or 0
    if web and (busy := port_in_use("127.0.0.1", web_port)) is not None:
        fail(f"cannot listen on 127.0.0.1:{web_port} ({busy}): choose another --web-port "
             "(0 picks a free one)")  # fmt: skip
    if catch_up and not journal_dir(db).is_dir():  # nothing to do: not even a new database
        try:
            if db.exists():  # but a file that is no capture is said so
                open_readonly(db).conn.close()
        except StoreError as exc:
            fail(str(exc))
        click.echo(f"nothing to catch up: no journal beside {db}")
        return
    new = not db.exists()
    try:
        redactor(not no_redact)  # the key first: an unusable one leaves no database behind
        check_database(db)
        check_free(journal_dir(db))
        if catch_up:
            found = record_journal(db, redact=not no_redact, echo="stdout")
    except (StoreError, JournalError) as exc:
        fail(str(exc))
    if catch_up:
        click.echo(f"recorded what the journal beside {db} held" if found
                   else f"nothing to catch up: no journal beside {db}")  # fmt: skip
        return
    if no_redact:
        click.echo("convtap: --no-redact: secrets will be stored in clear", err=True)
    args = ["--mode", mode, "--listen-host", listen_host, "--listen-port", str(listen_port),
            "-s", str(MITM_SCRIPT), "--set", f"convtap_db={db}",
            "--set", f"convtap_redact={'false' if no_redact else 'true'}",
            "--set", "convtap_echo=stdout", "--set", "convtap_ws_trim=true",
            "--set", "flow_detail=0", "--set", "termlog_verbosity=warn"]  # fmt: skip
    for setting in settings:
        args += ["--set", setting]
    page = start_live_page(db, web_port, new=new) if web else None
    if traces is not None:  # the recorder process the addon starts reads them
        from convtap.telemetry.live import CONTENT, ENDPOINT

        os.environ[ENDPOINT] = traces
        os.environ[CONTENT] = "1" if otel_content else "0"
        click.echo(f"Traces: each turn's spans go to {traces} as it ends")
    sys.stdout = output = QueuedOutput(sys.stdout)  # mitmproxy's lines never hold up the traffic
    asyncio.set_event_loop_policy(QuietCancelPolicy())
    try:
        sys.argv[0] = "convtap"  # mitmproxy says a bad --set value as `ARGV0: why`
        master = run(dump.DumpMaster, cmdline.mitmdump, args)  # what `mitmdump` runs
    except SystemExit as exc:  # mitmproxy refused to start (a --set value): nothing is left
        if exc.code in (0, None):
            raise
        if new:
            from convtap.store.database import remove_if_empty

            remove_if_empty(db)
            remove_if_unused(journal_dir(db))
        sys.exit(2)
    finally:
        if page is not None:
            page.terminate()
            try:
                page.wait(30)
            except subprocess.TimeoutExpired:
                page.kill()
    if output.dropped:
        click.echo(f"convtap: {output.dropped} lines of the proxy's output were dropped: their"
                   " reader was too slow", err=True)  # fmt: skip
    addon = master.addons.get(ConvtapAddon.name)  # type: ignore[no-untyped-call]
    if isinstance(addon, ConvtapAddon) and addon.failed:  # recording stopped: say it last
        say(addon.failed)
        sys.exit(1)


def live_traces_url(endpoint: str | None, content: bool, catch_up: bool) -> str | None:
    """The traces URL `--otlp-endpoint` names, checked (a bad one is one line, exit 2)."""
    if endpoint is None:
        if content:
            fail("--otel-content goes with --otlp-endpoint")
        return None
    if catch_up:
        fail("--otlp-endpoint sends a recording's turns: it cannot go with --catch-up")
    from convtap.telemetry.otlp import EndpointError, traces_url

    try:
        return traces_url(endpoint)
    except EndpointError as exc:
        fail(f"--otlp-endpoint: {exc}")


def start_live_page(db: Path, port: int, *, new: bool) -> subprocess.Popen[str]:
    """`convtap serve` in a process of its own, at a lower priority than the proxy; its URL
    printed once it listens. When it cannot start, a `new` database goes too."""
    page = subprocess.Popen([sys.executable, "-m", "convtap.cli", "serve", "--db", str(db),
                             "--port", str(port)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert page.stdout is not None
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, page.pid, 10)  # the traffic goes first
    url = page.stdout.readline().strip()
    if not url:  # it said why on stderr
        page.wait()
        if new:
            from convtap.store.database import remove_if_empty

            remove_if_empty(db)
        fail("the live page could not start (--web)")
    click.echo(f"Watch live: {url}")
    return page


@main.command()
@db_option
@click.option(
    "--port", default=0, type=click.IntRange(0, 65535), help="The page's port (0: a free one)."
)
def serve(db: Path, port: int) -> None:
    """Serve the report of a capture on 127.0.0.1, kept current while it is recorded into.

    Prints the page's URL (a random token in it: only who has the URL sees the page); new
    calls, returns and findings appear in the open page within a second, its filters kept.
    The capture is only read. Ctrl-C stops it.

    \b
    Example:
      convtap serve --db captures/capture.db         # prints http://127.0.0.1:PORT/TOKEN/
    """
    from convtap.report.live import ListenError
    from convtap.report.live import serve as serve_live
    from convtap.store.database import StoreError

    def ready(url: str) -> None:
        click.echo(url)
        sys.stdout.flush()

    try:
        serve_live(db, port, ready)
    except StoreError as exc:
        fail(str(exc))
    except ListenError as exc:
        fail(f"{exc}: choose another --port")


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


@main.command("mitm-script")
def mitm_script() -> None:
    """Print the path of the script mitmproxy loads to record with convtap.

    \b
    Example:
      mitmdump -s "$(convtap mitm-script)" --set convtap_db=captures/capture.db
      mitmweb -s "$(convtap mitm-script)"
    """
    click.echo(str(MITM_SCRIPT))
