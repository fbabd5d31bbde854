"""A Ctrl-C while convtap starts, before any command runs: the program ends quietly with status
130, as a shell says of SIGINT (`convtap.entry` installs it, `cli.common.Command` takes it away
at a command's first line). A leaf module: it loads nothing of convtap."""

from __future__ import annotations

import sys
from types import FrameType


def starting(signum: int, frame: FrameType | None) -> None:
    """SIGINT before a command runs: the program ends, quietly."""
    sys.exit(130)
