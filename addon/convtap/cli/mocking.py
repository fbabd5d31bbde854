"""`convtap mock` (the local upstream) and `convtap demo` (the main job, end to end)."""

from __future__ import annotations

import math
from pathlib import Path

import click

from convtap.cli.captures import render_ledger
from convtap.cli.common import fail, host_unknown, main, port_in_use


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="0 picks a free port.",
)
@click.option(
    "--scenario",
    default="alefita_way",
    show_default=True,
    help="A scenario that ships with convtap (plain, alefita_way, handoff, websocket, "
    "resume, weather, declared) or the path of a scenario file.",
)
@click.option(
    "--seed",
    type=int,
    metavar="N",
    help="Make chunk splits and made-up tool arguments the same on every run.",
)
@click.option("--gzip", is_flag=True, help="Content-Encoding: gzip, flushed per event.")
@click.option(
    "--hold-after",
    type=click.IntRange(min=1),
    metavar="N",
    help="Hold each stream after N events until POST /_mock/go.",
)
@click.option(
    "--die-after",
    type=click.IntRange(min=1),
    metavar="N",
    help="Drop the connection after N events.",
)
@click.option("--tls", is_flag=True, help="Serve HTTPS with a throw-away CA.")
@click.option(
    "--cert-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write that CA's certificate (PEM) for clients to trust.",
)
@click.option(
    "--delay",
    type=click.FloatRange(0, 60),  # NaN is no number of seconds: refused below
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="Pause between chunks.",
)
@click.option(
    "--lenient",
    is_flag=True,
    help="Take Responses API requests the real API refuses (an output naming no call, an "
    "unknown previous_response_id, a call left unanswered), so the audit sees the mistake.",
)
@click.option(
    "--replay",
    "capture",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="CAPTURE",
    help="Serve the server's side recorded in CAPTURE (a capture database, or any file "
    "`convtap import` reads) instead of a scenario.",
)
@click.option(
    "--timing",
    type=click.Choice(["fast", "recorded"]),
    help="With --replay: send at once (fast, the default) or keep the recorded gaps.",
)
def mock(
    host: str,
    port: int,
    scenario: str,
    gzip: bool,
    hold_after: int | None,
    die_after: int | None,
    tls: bool,
    cert_file: Path | None,
    delay: float,
    seed: int | None,
    lenient: bool,
    capture: Path | None,
    timing: str | None,
) -> None:
    """Play the server's side on 127.0.0.1: prepare, sentinel, f/conversation, resume,
    GET conversation/<id>, the user WebSocket and the Responses API (over HTTP and WebSocket
    mode), as a scenario says.

    Like the real server it accepts any f/conversation tool return, and refuses (HTTP 400, or
    an error frame) the Responses API requests the real API refuses, unless --lenient;
    GET /_mock/received shows what it got.

    \b
    Example:
      convtap mock --scenario alefita_way --port 9000
      convtap mock --scenario declared --seed 1 --port 9000   # calls the tools you declare
      convtap record --mode reverse:http://127.0.0.1:9000 --listen-port 8081
      convtap mock --replay captures/session.db --port 9000   # answer as it was recorded
    """
    from convtap.mock.scenario import ScenarioError
    from convtap.mock.server import run

    if math.isnan(delay):
        fail("--delay nan is not a number of seconds")
    if (unknown := host_unknown(host)) is not None:
        fail(f"--host {host}: {unknown}")
    if (busy := port_in_use(host, port)) is not None:
        fail(f"cannot listen on {host}:{port} ({busy}): choose another --port (0 picks a free one)")
    if capture is not None:
        return replay(host, port, capture, timing or "fast", tls, cert_file)
    if timing is not None:
        fail("--timing goes with --replay")
    try:
        run(host, port, scenario, gzip=gzip, hold_after=hold_after, die_after=die_after,
            tls=tls, cert_file=cert_file, delay=delay, seed=seed, lenient=lenient)  # fmt: skip
    except ScenarioError as exc:
        fail(str(exc))
    except OSError as exc:  # the certificate file, or a port taken since the check
        fail(f"cannot serve: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""))


def replay(
    host: str, port: int, capture: Path, timing: str, tls: bool, cert_file: Path | None
) -> None:
    """`mock --replay`: what a scenario would change is refused (one line, exit 2)."""
    import tempfile

    from convtap.ingest.readers import CaptureError
    from convtap.mock.recorded import ReplayError
    from convtap.mock.replay import run as run_replay
    from convtap.store.database import StoreError

    context = click.get_current_context()
    scenario_only = ("scenario", "seed", "gzip", "hold_after", "die_after", "delay", "lenient")
    default = click.core.ParameterSource.DEFAULT
    given = [n for n in scenario_only if context.get_parameter_source(n) is not default]
    if given:
        fail(f"--{given[0].replace('_', '-')} plays a scenario: it cannot go with --replay")
    if tls and cert_file is None:
        cert_file = Path(tempfile.mkdtemp(prefix="convtap-mock-")) / "ca.pem"
    try:
        run_replay(host, port, capture, timing, tls=tls, cert_file=cert_file)
    except (StoreError, ReplayError, CaptureError) as exc:
        fail(f"--replay: {exc}")
    except OSError as exc:
        fail(f"cannot serve: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""))


@main.command()
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("captures") / "demo.db",
    show_default=True,
    help="Where the demo session is recorded (replaced on each run).",
)
def demo(db: Path) -> None:
    """Run the main job end to end on 127.0.0.1: the mock, the recorder in front of it, the
    reference client answering a tool call correctly and then wrongly; print the call ledger."""
    from convtap.contract.formats import render
    from convtap.ingest.capture import audit_capture, ledger
    from convtap.mock.demo import DemoError, run_demo
    from convtap.record.local import redactor
    from convtap.store.database import StoreError

    try:
        redactor()  # an unusable key is said before anything starts
        run_demo(db, click.echo)
    except (DemoError, StoreError) as exc:
        fail(str(exc))
    result = audit_capture(db)
    click.echo(f"== the audit (convtap audit --db {db})")
    click.echo(render(result, "text", str(db)))
    click.echo(f"\n== the call ledger (convtap calls --db {db})")
    click.echo(render_ledger(ledger(db)))
    click.echo(f"\nThe session is in {db.resolve()}")
    from convtap.report.page import report_path, write_report

    path = write_report(db, report_path(db))
    click.echo(f"The report is in {path.resolve()}")
