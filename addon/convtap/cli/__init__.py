"""The `convtap` command line: parse, make one library call, render.

One module per family of commands (`recording`, `running`, `captures`, `auditing`, `protocol`,
`mocking`), each registering its commands on `main` (`common`); what a command does lives in the
library below, so the tests call it too. The CLI may import every layer; none imports it.
"""

from convtap.cli import auditing, captures, mocking, protocol, recording, running
from convtap.cli.common import main

__all__ = ["auditing", "captures", "main", "mocking", "protocol", "recording", "running"]
