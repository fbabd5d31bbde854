"""The `convtap` command's entry point: the command line (`convtap.cli`), with a Ctrl-C that
comes while it is still being loaded, before any command runs, ending it quietly (status 130,
as a shell says of SIGINT) rather than with a traceback from the middle of an import."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from convtap.cli import main as command_line
    except KeyboardInterrupt:
        sys.exit(130)
    command_line()
