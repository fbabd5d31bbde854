"""What every command shares: the command group (each command's module loaded only when it runs),
its one-line usage errors, `fail` and `say`, the `--db` option and the checks of a port, a host
and a file to read."""

from __future__ import annotations

import importlib
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from convtap.journal import DEFAULT_DB
from convtap.starting import starting
from convtap.wire.jsonvalue import allow_deep_json

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


# Every command: the module (in `convtap.cli`) that defines it, and its help's first sentence,
# which `convtap --help` lists without loading the module (a test checks both against the
# commands themselves). A command starts with only what it needs loaded: `convtap decode` starts
# without the proxy, the store or the recorder.
COMMANDS: dict[str, tuple[str, str]] = {
    "audit": ("auditing", "Check every tool return in a capture against the contract and report "
              "the findings."),
    "calls": ("captures", "The call ledger: one row per tool call, with its return and what "
              "became of it."),
    "datasette-metadata": ("captures", "Print Datasette metadata with convtap's canned queries, "
                           "for a Datasette without convtap's plugin (with it, every capture has "
                           "them, whatever its name)."),
    "decode": ("protocol", "Decode a raw f/conversation response body into messages, events and "
               "tool calls."),
    "demo": ("mocking", "Run the main job end to end on 127.0.0.1: the mock, the recorder in front "
             "of it, the reference client answering a tool call correctly and then wrongly; print "
             "the call ledger."),
    "diff": ("protocol", "What changed in the protocol between A and B (capture databases, "
             "anything `convtap import` reads, or shapes files written by `convtap shapes`), or "
             "what a capture carries that the models do not know."),
    "export": ("captures", "Export a capture as a HAR 1.2 file that convtap import, browsers and "
               "mitmproxy read, or its OpenTelemetry traces (GenAI semantic conventions) as "
               "OTLP/JSON or over OTLP/HTTP."),
    "import": ("captures", "Import mitmproxy flow files (.mitm), HAR files and raw .sse bodies "
               "into --db."),
    "mitm-script": ("recording", "Print the path of the script mitmproxy loads to record with "
                    "convtap."),
    "mock": ("mocking", "Play the server's side on 127.0.0.1: prepare, sentinel, f/conversation, "
             "resume, GET conversation/<id>, the user WebSocket and the Responses API (over HTTP "
             "and WebSocket mode), as a scenario says."),
    "record": ("recording", "Run the proxy and record every turn, tool call and tool return into "
               "--db."),
    "report": ("captures", "Write one self-contained HTML page of a capture: a summary, each "
               "conversation's turns with every call, its return and its findings, filters and "
               "the rules explained."),
    "reprocess": ("captures", "Decode a capture again, from its raw events, with this version's "
                  "decoder."),
    "rules": ("auditing", "List the contract rules, or explain one."),
    "run": ("running", "Run COMMAND with its clients recorded into --db, then sum up the capture "
            "in one line."),
    "schemas": ("protocol", "Write the JSON Schema of every wire model into schemas/ (or check it "
                "is current)."),
    "serve": ("recording", "Serve the report of a capture on 127.0.0.1, kept current while it is "
              "recorded into."),
    "shapes": ("protocol", "The shapes of one or more captures, merged, as a shapes file: paths, "
               "JSON types, counts and enum values, never a value of the session."),
}  # fmt: skip


class Command(click.Command):
    """A convtap command: it runs with Python's own Ctrl-C (a KeyboardInterrupt), which
    `convtap.entry` holds back while the program starts."""

    def invoke(self, ctx: click.Context) -> Any:
        if signal.getsignal(signal.SIGINT) is starting:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        return super().invoke(ctx)


class Commands(click.Group):
    """convtap's commands, whose usage errors take one line. Each is loaded from its module
    (`COMMANDS`) when it is asked for; the list in `--help` is the table's."""

    command_class = Command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            try:
                importlib.import_module(f"convtap.cli.{COMMANDS[cmd_name][0]}")  # it registers it
            except KeyboardInterrupt:  # still loading, as in `convtap.entry`: quietly, 130
                sys.exit(130)
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.NoSuchCommand as exc:  # "did you mean" among every command, loaded or not
            raise click.NoSuchCommand(exc.command_name, possibilities=COMMANDS, ctx=ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click lists them, from the table: no command's module is loaded for `--help`."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit))
                for name in self.list_commands(ctx)]  # fmt: skip
        with formatter.section("Commands"):
            formatter.write_dl(rows)

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
    import socket  # (only the commands that listen load it)

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
    import socket

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


def same_file(a: Path, b: Path) -> bool:
    """One file by device and inode (a link too); False when either is not there."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
