"""The `convtap` command line: parse, make one library call, render."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

import click

from convtap.store import DEFAULT_DB
from convtap.wire.jsonvalue import allow_deep_json

MITM_SCRIPT = resources.files("convtap.proxy") / "script.py"

db_option = click.option(
    "--db", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_DB,
    show_default=True, help="The capture database.",
)  # fmt: skip


class OneLineUsageError(click.UsageError):
    """Bad usage (an unknown option, a value out of range, a directory for a file) said in one
    line, as every other bad input is: `convtap: …` on stderr, exit 2."""

    def show(self, file: Any = None) -> None:
        where = f" (see `{self.ctx.command_path} --help`)" if self.ctx is not None else ""
        say(f"{self.format_message().rstrip('.')}{where}")


class Commands(click.Group):
    """convtap's commands, whose usage errors take one line."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise OneLineUsageError(exc.format_message(), exc.ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # a command's own options (it is made here)
            raise OneLineUsageError(exc.format_message(), exc.ctx) from None


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="convtap")
def main() -> None:
    """convtap: record, decode and audit ChatGPT's f/conversation protocol."""
    allow_deep_json()
    for name in ("stdout", "stderr"):  # started with it closed (`>&-`): what it says goes nowhere
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115


def port_in_use(host: str, port: int) -> str | None:
    """Why `port` cannot be listened on (mitmproxy would stop with its own hint and a new
    database left behind), or None. A check before the proxy starts: a race with another
    program remains, and mitmproxy's own error covers it."""
    if port == 0:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as mitmproxy binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def host_unknown(host: str) -> str | None:
    """Why `host` names no address to listen on, or None ("" is every address)."""
    if not host:
        return None
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError) as exc:
        return str(getattr(exc, "strerror", None) or exc)
    return None


def why_unreadable(path: Path) -> str:
    """Why a file given to read is not one (it is not a regular file)."""
    if os.path.exists(path):
        return "not a regular file (a FIFO, device or socket)"
    return "no such file"


def fail(message: str) -> NoReturn:
    """Bad input or usage: one line on stderr, exit 2."""
    say(message)
    sys.exit(2)


def say(message: str) -> None:
    """`convtap: MESSAGE` on stderr, one line even when a file's name holds a line break. A value
    the message quotes from the input may be a secret (a CI log keeps it): secret-shaped ones are
    blanked."""
    from convtap.redact.patterns import find_secrets

    for start, end, _ in reversed(find_secrets(message)):
        message = f"{message[:start]}<secret>{message[end:]}"
    click.echo(f"convtap: {_CONTROL.sub(lambda m: repr(m.group())[1:-1], message)}", err=True)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def say_unrecorded(db: Path) -> None:
    """One line on stderr when traffic captured for `db` is not in it yet (in its journal):
    what a command shows of it may miss that traffic."""
    from convtap.ingest.capture import unrecorded
    from convtap.store.database import StoreError

    try:
        left = unrecorded(db)
    except (StoreError, OSError):
        return
    if left is None:
        return
    size = f"{left.bytes / 1e6:.1f} MB" if left.bytes >= 100_000 else f"{left.bytes:,} bytes"
    if left.recording:
        click.echo(f"convtap: {size} of traffic is still being recorded into {db} (its recorder"
                   " is catching up): this may miss it", err=True)  # fmt: skip
    else:
        click.echo(f"convtap: {size} of traffic captured for {db} was not recorded into it (its"
                   f" recording stopped first): `convtap record --catch-up --db {db}` records it",
                   err=True)  # fmt: skip


@main.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json for tools (a stable shape).",
)
@click.option("--no-redact", is_flag=True, help="Print secrets (tokens, challenges) in clear.")
@click.option(
    "--ws",
    "ws_path",
    metavar="FRAMES.jsonl",
    help="WebSocket frames, one frame's JSON text per line, continuing the turn.",
)
@click.option(
    "--protocol",
    type=click.Choice(["auto", "f-conversation", "responses"]),
    default="auto",
    show_default=True,
    help="auto tells a Responses API stream from an f/conversation one.",
)
@click.argument("files", nargs=-1, required=True, metavar="FILE [FILE...]")
def decode(
    fmt: str, no_redact: bool, ws_path: str | None, protocol: str, files: tuple[str, ...]
) -> None:
    """Decode a raw f/conversation response body into messages, events and tool calls.

    Several FILEs are one turn: the f/conversation body, then its resume legs. `-` is stdin.

    \b
    Example:
      convtap decode captures/examples/sse/alefita_way_call.sse
      convtap decode --format json body.sse resume.sse --ws frames.jsonl
    """
    from convtap.ingest.decoding import DecodeInputError
    from convtap.ingest.decoding import decode as decode_files
    from convtap.redact.redactor import UnusableKey

    if no_redact:
        click.echo("convtap: --no-redact: secrets are printed in clear", err=True)
    if isinstance(sys.stdout, io.TextIOWrapper):  # a lone surrogate (JSON allows one) as `\udXXX`
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        decode_files(list(files), sys.stdout, fmt=fmt, protocol=protocol, ws_path=ws_path,
                     redact=not no_redact)  # fmt: skip
    except (DecodeInputError, UnusableKey) as exc:
        fail(str(exc))


def read_schema_files(directory: Path, *, check: bool) -> dict[str, str]:
    """The schema files in `directory`, by name. A folder among them is refused, and so is a
    file that is not UTF-8 when only checking (writing replaces it)."""
    present: dict[str, str] = {}
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        if not path.is_file():
            fail(f"{path} is not a file: not a schema file")
        try:
            present[path.name] = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            if check:
                fail(f"{path} is not UTF-8 text: not a schema file (`convtap schemas` replaces it)")
            present[path.name] = ""
        except OSError as exc:
            fail(f"cannot read {path}: {exc.strerror or exc}")
    return present


@main.command()
@click.option("--check", is_flag=True, help="Exit 1 if the files differ from the models.")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("schemas"),
    show_default=True,
    help="Where the schema files live.",
)
def schemas(check: bool, directory: Path) -> None:
    """Write the JSON Schema of every wire model into schemas/ (or check it is current).

    \b
    Example:
      convtap schemas            # after changing addon/models/
      convtap schemas --check    # in CI: fails when schemas/ is stale
    """
    from convtap.models.export import export_schemas

    if os.path.lexists(directory) and not directory.is_dir():  # a FIFO, a symlink loop, ...
        fail(f"{directory} is not a folder")
    wanted = export_schemas()
    present = read_schema_files(directory, check=check)
    stale = sorted(n for n in wanted if present.get(n) != wanted[n])
    extra = sorted(set(present) - set(wanted))
    if check:
        if stale or extra:
            for name in stale:
                click.echo(f"stale or missing: {directory / name}", err=True)
            for name in extra:
                click.echo(f"not produced by any model: {directory / name}", err=True)
            click.echo("convtap: schemas/ is out of date; run `convtap schemas`", err=True)
            sys.exit(1)
        click.echo(f"{len(wanted)} schema files in {directory} match the models")
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name in stale:
            (directory / name).write_text(wanted[name], encoding="utf-8")
        for name in extra:
            (directory / name).unlink()
    except OSError as exc:
        fail(f"cannot write into {directory}: {exc.strerror or exc}")
    click.echo(
        f"wrote {len(stale)}, removed {len(extra)}, {len(wanted)} schema files in {directory}"
    )


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


def _same_file(a: Path, b: Path) -> bool:
    """One file by device and inode (a link too); False when either is not there."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


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
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE.har",
    help="The HAR file to write (replaced if it exists).",
)
@click.option(
    "--blank-words",
    "--shape-only",
    "blank_words",
    is_flag=True,
    help="Replace every natural-language string by a placeholder of the same length; keep ids, "
    "enumerations, numbers and structure (--shape-only is its earlier name).",
)
def export(db: Path, output: Path, blank_words: bool) -> None:
    """Export a capture as a HAR 1.2 file that convtap import, browsers and mitmproxy read.

    Secrets stay redacted as stored. With --blank-words the export still decodes, audits to the
    same findings and diffs without a breaking change, but holds none of the conversation's
    words.

    \b
    Example:
      convtap export --db captures/capture.db --output session.har
      convtap export --blank-words --output blank.har   # to share with a bug report
    """
    from convtap.export.har import export_har
    from convtap.store.database import StoreError

    try:
        count = export_har(db, output, blank_words=blank_words)
    except StoreError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")
    say_unrecorded(db)
    blanked = " (words blanked)" if blank_words else ""
    click.echo(f"exported {count} flows into {output}{blanked}")


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
    from convtap.ingest.capture import ledger
    from convtap.store.database import StoreError

    try:
        rows = ledger(db)
    except StoreError as exc:
        fail(str(exc))
    say_unrecorded(db)
    if fmt == "json":  # `runs_on`: who runs the tool (a server-run one owes no return)
        rows = [{**r, "runs_on": "server" if _server_run(r) else "client"} for r in rows]
        click.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    click.echo(render_ledger(rows, wide=wide))


ID_WIDTH, TOOL_WIDTH = 14, 24  # columns of an id and a tool name in `calls` (120 in all)


def render_ledger(rows: list[dict[str, Any]], *, wide: bool = False) -> str:
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
        called = (
            time.strftime("%H:%M:%S", time.localtime(r["called_at"])) if r["called_at"] else "-"
        )
        tool = r["recipient"]
        if r["protocol"] == "responses":  # a function of a namespace tool: namespace.name
            tool = qualified_name(r.get("namespace"), r["tool"])
        conversation, returned = r["conversation_id"] or "-", r["return_id"] or "-"
        # a tool the server runs in the stream owes no return: never "answered: no"
        stages = (("server-run", "-", "-") if _server_run(r) else
                  (_yes(r["answered"]), _yes(r["accepted"]), _yes(r["continued"])))  # fmt: skip
        table.append((
            cut(tool or "-", TOOL_WIDTH), cut(r["call_id"], ID_WIDTH), cut(conversation, ID_WIDTH),
            called, cut(returned, ID_WIDTH), *stages, str(r["findings"]),
        ))  # fmt: skip
    widths = [max(len(str(line[i])) for line in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _server_run(row: dict[str, Any]) -> bool:
    return row["protocol"] != "responses" and row["kind"] not in (None, "local")


@main.command()
@db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "junit", "sarif", "github"]),
    default="text",
    show_default=True,
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning", "never"]),
    default="error",
    show_default=True,
    help="Exit 1 when a finding at or above this severity exists.",
)
@click.option(
    "--rule", "rules", multiple=True, metavar="ID", help="Report only these rules (repeatable)."
)
@click.option("--wide", is_flag=True, help="Text as long as it is (else it fits 120 columns).")
def audit(db: Path, fmt: str, fail_on: str, rules: tuple[str, ...], wide: bool) -> None:
    """Check every tool return in a capture against the contract and report the findings.

    Exit 0 when no finding is at or above --fail-on, 1 when there is one, 2 on bad usage or an
    unreadable database. The findings table of the database is rewritten with what it finds.

    \b
    Example:
      convtap audit --db captures/capture.db
      convtap audit --format sarif > convtap.sarif      # for code scanning
      convtap audit --format github --fail-on warning   # in a GitHub workflow
    """
    from convtap.contract.formats import render
    from convtap.contract.registry import SEVERITIES, registry
    from convtap.ingest.capture import audit_capture
    from convtap.store.database import StoreError

    unknown = sorted(set(rules) - set(registry()))
    if unknown:
        fail(f"unknown rule {', '.join(unknown)} (see `convtap rules`)")
    try:
        result = audit_capture(db, set(rules) or None)
    except StoreError as exc:
        fail(str(exc))
    say_unrecorded(db)
    output = render(result, fmt, str(db), wide=wide)
    if output:
        click.echo(output)
    if not result.stored:
        say(f"{db} is read-only: the findings were not stored in it")
    if fail_on != "never":
        worst = SEVERITIES.index(fail_on)
        if any(SEVERITIES.index(f.severity) <= worst for f in result.findings):
            sys.exit(1)


@main.command("rules")
@click.argument("rule_id", required=False, metavar="[ID]")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def rules_(rule_id: str | None, fmt: str) -> None:
    """List the contract rules, or explain one.

    \b
    Example:
      convtap rules
      convtap rules return-call-id
    """
    from dataclasses import asdict

    from convtap.contract.registry import registry

    table = registry()
    if rule_id is not None and rule_id not in table:
        fail(f"unknown rule {rule_id} (see `convtap rules`)")
    if fmt == "json":
        if rule_id is not None:
            click.echo(json.dumps(asdict(table[rule_id]), ensure_ascii=False, indent=2))
        else:
            listing = [{"id": r.id, "severity": r.severity, "summary": r.summary}
                       for r in table.values()]  # fmt: skip
            click.echo(json.dumps(listing, ensure_ascii=False, indent=2))
        return
    if rule_id is None:
        width = max(map(len, table))
        for rule in table.values():
            click.echo(f"{rule.id:<{width}}  {rule.severity:<7}  {rule.summary}")
        return
    rule = table[rule_id]
    click.echo(f"{rule.id} ({rule.severity}): {rule.summary}\n")
    click.echo(rule.explanation.strip() + "\n")
    click.echo(f"Source: {rule.seed}\n")
    click.echo(f"Bad:  {json.dumps(json.loads(rule.bad), ensure_ascii=False)}")
    click.echo(f"Good: {json.dumps(json.loads(rule.good), ensure_ascii=False)}")


@main.command()
@click.argument(
    "captures", nargs=-1, metavar="A B", type=click.Path(dir_okay=False, path_type=Path)
)
@click.option(
    "--against-schemas",
    is_flag=True,
    help="Compare one capture with the models in schemas/ instead (drift).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "github"]),
    default="text",
    show_default=True,
)
@click.option(
    "--fail-on",
    type=click.Choice(["breaking", "non-breaking", "any", "never"]),
    default="breaking",
    show_default=True,
    help="Exit 1 when a change at or above this level exists (any: every level).",
)
def diff(captures: tuple[Path, ...], against_schemas: bool, fmt: str, fail_on: str) -> None:
    """What changed in the protocol between A and B (capture databases, anything `convtap
    import` reads, or shapes files written by `convtap shapes`), or what a capture carries that
    the models do not know.

    \b
    Example:
      convtap diff captures/examples/diff/older.har captures/examples/diff/newer.har
      convtap diff --format json old.db new.db
      convtap diff baseline.json capture.db --fail-on breaking --format github   # in CI
      convtap diff --against-schemas captures/capture.db
    """
    from convtap.diff.compare import LEVELS, compare, drift
    from convtap.diff.render import render

    wanted = 1 if against_schemas else 2
    if len(captures) != wanted:
        fail("diff takes two captures, A and B (or one with --against-schemas)")
    shapes = read_shapes_of(captures)
    if against_schemas:
        changes = drift(shapes[0])
        title = f"{captures[0]} against the models in schemas/"
    else:
        changes = compare(shapes[0], shapes[1])
        title = f"{captures[0]} → {captures[1]}"
    click.echo(render(changes, fmt, title))
    if fail_on == "never":
        return
    levels = LEVELS if fail_on == "any" else LEVELS[: LEVELS.index(fail_on) + 1]
    if any(c.level in levels for c in changes):
        sys.exit(1)


def read_shapes_of(sources: tuple[Path, ...]) -> list[Any]:
    """The shapes of each source (a capture or a shapes file), or one line and exit 2."""
    from convtap.diff.baseline import ShapesError
    from convtap.diff.capture import capture_shapes
    from convtap.ingest.readers import CaptureError
    from convtap.store.database import StoreError

    for path in sources:
        if not path.is_file():
            fail(f"cannot read {path}: {why_unreadable(path)}")
    try:
        shapes = [capture_shapes(path) for path in sources]
    except (CaptureError, StoreError, ShapesError) as exc:
        fail(str(exc))
    for path in sources:
        say_unrecorded(path)
    return shapes


@main.command()
@click.argument(
    "sources", nargs=-1, metavar="SOURCE...", type=click.Path(dir_okay=False, path_type=Path)
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the shapes file here (default: standard output).",
)
@click.option(
    "--update",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="BASELINE",
    help="Rewrite this existing shapes file with the shapes of SOURCE... and say what changed.",
)
def shapes(sources: tuple[Path, ...], output: Path | None, update: Path | None) -> None:
    """The shapes of one or more captures, merged, as a shapes file: paths, JSON types, counts
    and enum values, never a value of the session. Commit one as a baseline and `convtap diff`
    later captures against it.

    \b
    Example:
      convtap shapes captures/capture.db --output baseline.json
      convtap shapes --update baseline.json new.db              # refresh the baseline
      convtap shapes --update baseline.json baseline.json new.db   # widen it instead
    """
    from convtap.diff.baseline import is_shapes_file, write_shapes
    from convtap.diff.compare import compare
    from convtap.diff.render import summary
    from convtap.diff.shapes import Shapes, merge
    from convtap.export.files import write_output

    if not sources:
        fail("shapes takes one or more captures (SOURCE...)")
    if output is not None and update is not None:
        fail("--output and --update name the file to write: give one of them")
    if update is not None and not (update.is_file() and is_shapes_file(update)):
        fail(f"--update {update}: not a shapes file (write one with --output first)")
    before = read_shapes_of((update,))[0] if update is not None else None
    merged = Shapes()
    for one in read_shapes_of(sources):
        merge(merged, one)
    target = update or output
    if target is None:
        write_shapes(merged, sys.stdout)
        return
    if update is None and any(_same_file(target, source) for source in sources):
        fail(f"--output {target}: that is one of the sources it reads (use --update)")
    try:
        write_output(target, lambda handle: write_shapes(merged, handle))
    except OSError as exc:
        fail(f"cannot write {target}: {exc.strerror or exc}")
    if before is None:
        click.echo(f"wrote the shapes of {len(merged.kinds)} kinds into {target}", err=True)
        return
    counts = summary(compare(before, merged))
    changed = ", ".join(f"{n} {level}" for level, n in counts.items())
    click.echo(f"updated {target}: {changed} (see `convtap diff` for the list)", err=True)


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
    """
    from convtap.mock.scenario import ScenarioError
    from convtap.mock.server import run

    if math.isnan(delay):
        fail("--delay nan is not a number of seconds")
    if (unknown := host_unknown(host)) is not None:
        fail(f"--host {host}: {unknown}")
    if (busy := port_in_use(host, port)) is not None:
        fail(f"cannot listen on {host}:{port} ({busy}): choose another --port (0 picks a free one)")
    try:
        run(host, port, scenario, gzip=gzip, hold_after=hold_after, die_after=die_after,
            tls=tls, cert_file=cert_file, delay=delay, seed=seed, lenient=lenient)  # fmt: skip
    except ScenarioError as exc:
        fail(str(exc))
    except OSError as exc:  # the certificate file, or a port taken since the check
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


@main.command("mitm-script")
def mitm_script() -> None:
    """Print the path of the script mitmproxy loads to record with convtap.

    \b
    Example:
      mitmdump -s "$(convtap mitm-script)" --set convtap_db=captures/capture.db
      mitmweb -s "$(convtap mitm-script)"
    """
    click.echo(str(MITM_SCRIPT))


if __name__ == "__main__":
    main()
