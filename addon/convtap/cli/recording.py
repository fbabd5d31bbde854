"""`convtap record` (the proxy and its recorder, `--catch-up`, `--web`), `convtap serve` (the
live page) and `convtap mitm-script`."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from convtap.cli.common import db_option, fail, host_unknown, main, port_in_use, say
from convtap.proxy import MITM_SCRIPT
from convtap.proxy.stopping import StopRequest  # loaded with the command: see `record`


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
    previous = StopRequest.install()  # first: a Ctrl-C from here on stops the recording cleanly
    click.get_current_context().call_on_close(lambda: signal.signal(signal.SIGINT, previous))
    from convtap.launch.recording import ProxyRefused, ProxySettings, RecordError
    from convtap.launch.recording import catch_up as record_journal
    from convtap.launch.recording import record as record_proxy

    traces = check_options(mode, listen_host, listen_port, catch_up, web, web_port,
                           otlp_endpoint, otel_content)  # fmt: skip
    try:
        if catch_up:
            found = record_journal(db, redact=not no_redact)
            click.echo(f"recorded what the journal beside {db} held" if found
                       else f"nothing to catch up: no journal beside {db}")  # fmt: skip
            return
        proxy = ProxySettings(mode, listen_host, listen_port, db, not no_redact, settings,
                              (web_port or 0) if web else None, traces, otel_content)  # fmt: skip
        stopped = record_proxy(proxy, click.echo, say)
    except RecordError as exc:
        fail(str(exc))
    except ProxyRefused:  # it said why
        sys.exit(2)
    if stopped.dropped:
        say(f"{stopped.dropped} lines of the proxy's output were dropped: their reader was too"
            " slow")  # fmt: skip
    if stopped.failed:  # recording stopped: say it last
        say(stopped.failed)
        sys.exit(1)


def check_options(
    mode: str,
    listen_host: str,
    listen_port: int,
    catch_up: bool,
    web: bool,
    web_port: int | None,
    otlp_endpoint: str | None,
    otel_content: bool,
) -> str | None:
    """The options that cannot go together or name no proxy, each one line, exit 2, before any
    file is made (mitmproxy's own start-up errors would leave a new database and its journal);
    the traces URL."""
    from mitmproxy.proxy.mode_specs import ProxyMode

    if not catch_up:
        try:
            ProxyMode.parse(mode)
        except ValueError as exc:
            fail(f"--mode {mode}: {exc} (see `convtap record --help`)")
        if (unknown := host_unknown(listen_host)) is not None:
            fail(f"--listen-host {listen_host}: {unknown}")
    if not catch_up and (busy := port_in_use(listen_host, listen_port)) is not None:
        fail(f"cannot listen on {listen_host}:{listen_port} ({busy}): choose another "
             "--listen-port (0 picks a free one)")  # fmt: skip
    if web and catch_up:
        fail("--web shows a recording: it cannot go with --catch-up")
    if web_port is not None and not web:
        fail("--web-port goes with --web")
    traces = live_traces_url(otlp_endpoint, otel_content, catch_up)
    if web and (busy := port_in_use("127.0.0.1", web_port or 0)) is not None:
        fail(f"cannot listen on 127.0.0.1:{web_port or 0} ({busy}): choose another --web-port "
             "(0 picks a free one)")  # fmt: skip
    return traces


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


@main.command("mitm-script")
def mitm_script() -> None:
    """Print the path of the script mitmproxy loads to record with convtap.

    \b
    Example:
      mitmdump -s "$(convtap mitm-script)" --set convtap_db=captures/capture.db
      mitmweb -s "$(convtap mitm-script)"
    """
    click.echo(str(MITM_SCRIPT))
