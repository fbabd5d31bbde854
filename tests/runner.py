"""The `convtap` command run in this process with click's CliRunner, as a user would type it
(commands that serve or spawn processes are still run as subprocesses by their tests)."""

from __future__ import annotations

from dataclasses import dataclass

from click.testing import CliRunner
from convtap.cli import main


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str
    stdout_bytes: bytes


def convtap(*args: str, stdin: bytes | str | None = None) -> Ran:
    """Run a command; an exception that escapes it fails the test (a traceback is a bug)."""
    result = CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr, result.stdout_bytes)
