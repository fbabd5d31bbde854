"""The `convtap` command line: parse, make one library call, render.

One module per family of commands (`recording`, `running`, `captures`, `auditing`, `protocol`,
`mocking`), each registering its commands on `main` (`common`), which loads a command's module
only when that command runs (`common.COMMANDS` names them); what a command does lives in the
library below, so the tests call it too. The CLI may import every layer; none imports it.
"""

from convtap.cli.common import main

__all__ = ["main"]
