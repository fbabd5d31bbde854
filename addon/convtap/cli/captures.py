"""Commands on a capture file: `import`, `export`, `reprocess`, `calls`, `report` and
`datasette-metadata`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from convtap.cli.common import db_option, fail, main, say, say_unrecorded, why_unreadable
from convtap.vocab import WireProtocol

if TYPE_CHECKING:
    from convtap.store.views import LedgerRow


@main.command("import")
@click.argument(
    "files",
    nargs=-1,
    required=True,
    metavar="FILE...",
    type=click.Path(dir_okay=False, path_type=Path),
)
@db_option
@click.option("--no-redact", is_flag=True, help="Store secrets in clear (loudly).")
def import_(files: tuple[Path, ...], db: Path, no_redact: bool) -> None:
    """Import mitmproxy flow files (.mitm), HAR files and raw .sse bodies into --db.

    They go through the same pipeline as live traffic; flows already in the database are
    skipped, so importing a file twice adds nothing.

    \b
    Example:
      convtap import session.har --db captures/audit.db
      convtap import flows.mitm body.sse
    """
    from convtap.ingest.capture import import_into
    from convtap.store.database import StoreError

    for path in files:
        if not path.is_file():
            fail(f"cannot read {path}: {why_unreadable(path)}")
    try:
        total = sum(p.stat().st_size for p in files)
        with click.progressbar(length=total, label="importing", file=sys.stderr,
                               hidden=not sys.stderr.isatty()) as bar:  # fmt: skip
            results = import_into(db, list(files), redact=not no_redact, progress=bar.update)
    except StoreError as exc:
        fail(str(exc))
    for result in results:
        if result.error is None or result.imported or result.skipped:
            click.echo(f"imported {result.imported} flows from {result.path} into {db} "
                       f"({result.skipped} already there)")  # fmt: skip
        if result.error:
            say(result.error)
    if any(result.error for result in results):
        sys.exit(2)


@main.command("export")
@db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["har", "otlp"]),
    default="har",
    show_default=True,
    help="har: a HAR 1.2 file; otlp: the capture's traces as OTLP/JSON (stdout without --output).",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="The file to write (replaced if it exists); required for har.",
)
@click.option(
    "--blank-words",
    "--shape-only",
    "blank_words",
    is_flag=True,
    help="har: replace every natural-language string by a placeholder of the same length; keep "
    "ids, enumerations, numbers and structure (--shape-only is its earlier name).",
)
@click.option(
    "--otlp-endpoint",
    metavar="URL",
    help="Send the capture's traces over OTLP/HTTP to URL (its /v1/traces when it has no path).",
)
@click.option(
    "--otel-content",
    is_flag=True,
    help="otlp: put message content on the spans (as stored: redacted); none without it.",
)
def export(
    db: Path,
    fmt: str,
    output: Path | None,
    blank_words: bool,
    otlp_endpoint: str | None,
    otel_content: bool,
) -> None:
    """Export a capture as a HAR 1.2 file that convtap import, browsers and mitmproxy read, or
    its OpenTelemetry traces (GenAI semantic conventions) as OTLP/JSON or over OTLP/HTTP.

    Secrets stay redacted as stored. With --blank-words the HAR still decodes, audits to the
    same findings and diffs without a breaking change, but holds none of the conversation's
    words. A trace is one conversation or Responses chain: a chat span per model turn, an
    execute_tool span per answered client call, findings as span events.

    \b
    Example:
      convtap export --db captures/capture.db --output session.har
      convtap export --blank-words --output blank.har   # to share with a bug report
      convtap export --format otlp --output traces.json
      convtap export --otlp-endpoint http://127.0.0.1:6006/v1/traces   # Arize Phoenix
    """
    from convtap.store.database import StoreError
    from convtap.telemetry.otlp import EndpointError, traces_url

    if otlp_endpoint is not None:
        try:
            traces_url(otlp_endpoint)
        except EndpointError as exc:
            fail(f"--otlp-endpoint: {exc}")
        fmt = "otlp"
    if fmt == "har" and output is None:
        fail("--output FILE.har is needed for a HAR export")
    if fmt == "otlp" and blank_words:
        fail("--blank-words goes with --format har")
    if fmt == "har" and otel_content:
        fail("--otel-content goes with --format otlp or --otlp-endpoint")
    try:
        if fmt == "har":
            assert output is not None
            _export_har(db, output, blank_words)
        else:
            _export_otlp(db, output, otlp_endpoint, otel_content)
    except StoreError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")


def _export_har(db: Path, output: Path, blank_words: bool) -> None:
    from convtap.export.har import export_har

    count = export_har(db, output, blank_words=blank_words)
    say_unrecorded(db)
    blanked = " (words blanked)" if blank_words else ""
    click.echo(f"exported {count} flows into {output}{blanked}")


def _export_otlp(db: Path, output: Path | None, endpoint: str | None, content: bool) -> None:
    from convtap.export.traces import send_traces, write_traces

    if endpoint is None or output is not None:  # without --output, the JSON is all stdout gets
        count = write_traces(db, output, content=content)
        say_unrecorded(db)
        if output is not None:
            click.echo(f"exported {count} spans into {output}")
    if endpoint is not None:
        sender = send_traces(db, endpoint, content=content)
        say_unrecorded(db)
        if sender.lost:
            click.echo(f"convtap: {sender.lost} of {sender.lost + sender.sent} spans were not "
                       f"sent to {sender.url}: {sender.reason}", err=True)  # fmt: skip
            sys.exit(1)
        click.echo(f"sent {sender.sent} spans to {sender.url}")


@main.command()
@db_option
def reprocess(db: Path) -> None:
    """Decode a capture again, from its raw events, with this version's decoder.

    Flows and raw events stay; turns, messages, calls, returns and findings are rebuilt.
    """
    from convtap.ingest.replay import reprocess_db
    from convtap.store.database import StoreError

    try:
        count = reprocess_db(db)
    except StoreError as exc:
        fail(str(exc))
    click.echo(f"reprocessed {count} flows in {db}")


@main.command()
@db_option
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--wide", is_flag=True, help="Ids and tool names whole (else the table fits 120 columns)."
)
def calls(db: Path, fmt: str, wide: bool) -> None:
    """The call ledger: one row per tool call, with its return and what became of it.

    \b
    Example:
      convtap calls --db captures/capture.db
    """
    from convtap.export.traces import ledger_usage
    from convtap.ingest.capture import ledger
    from convtap.store.database import StoreError
    from convtap.telemetry.cost import answer_usage

    try:
        rows = ledger(db)
        usage = ledger_usage(db) if fmt == "json" else {}
    except StoreError as exc:
        fail(str(exc))
    say_unrecorded(db)
    if fmt == "json":  # `runs_on`: who runs the tool (a server-run one owes no return)
        shown = [
            {**r.as_json(), "runs_on": "server" if r.server_run else "client",
             # what the answer that made the call used and cost
             "answer_usage": answer_usage(usage.get(r.call_id))}
            for r in rows
        ]  # fmt: skip
        click.echo(json.dumps(shown, ensure_ascii=False, indent=2))
        return
    click.echo(render_ledger(rows, wide=wide))


ID_WIDTH, TOOL_WIDTH = 14, 24  # columns of an id and a tool name in `calls` (120 in all)


def render_ledger(rows: list[LedgerRow], *, wide: bool = False) -> str:
    from convtap.wire.responses import qualified_name

    """The ledger as a table that fits 120 columns: ids and tool names cut (`…`) unless
    `wide`; `--format json` has them whole."""
    if not rows:
        return "no tool calls recorded"

    def cut(text: str, width: int) -> str:
        return text if wide or len(text) <= width else text[: width - 1] + "…"

    header = ("tool", "call id", "conversation", "called at", "return id", "answered",
              "accepted", "continued", "findings")  # fmt: skip
    table = [header]
    for r in rows:
        called = time.strftime("%H:%M:%S", time.localtime(r.called_at)) if r.called_at else "-"
        tool = r.recipient
        if r.protocol == WireProtocol.RESPONSES:  # a namespace tool's function: its full name
            tool = qualified_name(r.namespace, r.tool)
        conversation, returned = r.conversation_id or "-", r.return_id or "-"
        # a tool the server runs in the stream owes no return: never "answered: no"
        stages = (("server-run", "-", "-") if r.server_run else
                  (_yes(r.answered), _yes(r.accepted), _yes(r.continued)))  # fmt: skip
        table.append((
            cut(tool or "-", TOOL_WIDTH), cut(r.call_id, ID_WIDTH), cut(conversation, ID_WIDTH),
            called, cut(returned, ID_WIDTH), *stages, str(r.findings),
        ))  # fmt: skip
    widths = [max(len(str(line[i])) for line in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


def _yes(value: bool) -> str:
    return "yes" if value else "no"


@main.command()
@db_option
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the page (default: beside the database, .html added to its name).",
)
def report(db: Path, output: Path | None) -> None:
    """Write one self-contained HTML page of a capture: a summary, each conversation's turns
    with every call, its return and its findings, filters and the rules explained.

    The page loads nothing from the network: open it from disk or attach it to a CI run.
    Prints the path written.

    \b
    Example:
      convtap report --db captures/capture.db        # writes captures/capture.db.html
      convtap report --db ci.db --output convtap-report.html
    """
    from convtap.report.page import ReportError, report_path, write_report
    from convtap.store.database import StoreError

    try:
        path = write_report(db, output or report_path(db))
    except (StoreError, ReportError) as exc:
        fail(str(exc))
    say_unrecorded(db)
    click.echo(str(path))


@main.command("datasette-metadata")
@click.option(
    "--name",
    default="capture",
    show_default=True,
    help="The database's name in Datasette: its file's name without .db.",
)
def datasette_metadata(name: str) -> None:
    """Print Datasette metadata with convtap's canned queries, for a Datasette without
    convtap's plugin (with it, every capture has them, whatever its name).

    \b
    Example:
      convtap datasette-metadata --name demo > metadata.json
      datasette captures/demo.db -m metadata.json
    """
    from convtap.store.canned import metadata

    click.echo(json.dumps(metadata(name), indent=2, ensure_ascii=False))
