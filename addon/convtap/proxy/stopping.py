"""Ctrl-C at any moment of `convtap record`: from its first line to mitmproxy's last, a SIGINT is
a request to stop that the proxy honours as soon as it runs, and never a `KeyboardInterrupt` in
the middle of loading a module or of starting the proxy (its recorder process, in a process
group of its own, never gets it: the proxy asks it to finish).

mitmproxy installs its own SIGINT handler only once its addons are loaded and configured (the
recorder process is started by then); until then the handler here remembers the request, and
`RecordingMaster` shuts the proxy down the moment it starts running. Imports nothing but the
standard library at first: it is installed before anything heavy is loaded.
"""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mitmproxy.tools.dump import DumpMaster


class StopRequest:
    """SIGINT remembered instead of raised (`install`), until mitmproxy takes the signal over."""

    requested = False

    @classmethod
    def install(cls) -> Any:
        """Remember SIGINT from now on; the handler it replaces (put back by the caller)."""
        cls.requested = False
        return signal.signal(signal.SIGINT, cls._remember)

    @classmethod
    def _remember(cls, signum: int, frame: Any) -> None:
        cls.requested = True

    @staticmethod
    def raised() -> None:
        """Ctrl-C raises `KeyboardInterrupt` again (a command that runs in this process)."""
        signal.signal(signal.SIGINT, signal.default_int_handler)

    @staticmethod
    def ignored() -> None:
        """Ctrl-C does nothing more: what is left is the way out (the proxy has stopped)."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def recording_master() -> type[DumpMaster]:
    """mitmdump's master, which stops as soon as it runs when Ctrl-C came while it started."""
    from mitmproxy.tools.dump import DumpMaster

    class RecordingMaster(DumpMaster):
        async def run(self) -> None:
            if StopRequest.requested:  # after `run` clears `should_exit`: a clean stop
                asyncio.get_running_loop().call_soon(self.should_exit.set)
            await super().run()

    return RecordingMaster
