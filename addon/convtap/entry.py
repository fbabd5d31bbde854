"""The `convtap` command's entry point: the command line (`convtap.cli`), with a Ctrl-C that
comes while it is still starting, before any command runs, ending it quietly (status 130, as a
shell says of SIGINT) rather than with a traceback from the middle of an import or click's
"Aborted!". From its first line on, a command has Python's own Ctrl-C (`cli.common.Command`)."""

from __future__ import annotations

import signal

from convtap.starting import starting


def main() -> None:
    signal.signal(signal.SIGINT, starting)
    from convtap.cli import main as command_line

    command_line()
