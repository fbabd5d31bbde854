"""Freed memory kept by the process for its next use, where glibc's malloc would hand it back.

glibc gives the top of its heap back to the system whenever more than 128 KiB of it is free
(`M_TRIM_THRESHOLD`). A stream decoded a piece at a time allocates about that much for each
piece (the piece, its events' JSON, the folded copy the hint search reads) and frees it, so,
depending on what else sits on the heap, it may shrink after every piece and grow again at the
next: the same pages faulted in anew (`convtap decode` of 26 MB of typed events: 50,000 minor
faults and 0.04 s of CPU where it has 6,000). Raising the threshold keeps them. A process's
peak memory does not change (only what is freed stays mapped, and is used again); elsewhere
than glibc this does nothing. A leaf module: it loads nothing of convtap."""

from __future__ import annotations

import sys

M_TRIM_THRESHOLD = -1  # glibc's <malloc.h>
KEPT = 64 << 20  # bytes of free heap kept before any is given back


def keep_freed_memory() -> bool:
    """For the rest of this process (a command that reads a stream, then ends): whether the
    threshold was raised."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # (2 ms of CPU to load: the page faults cost 20 times that)

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # no such function (musl's does nothing)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_TRIM_THRESHOLD, KEPT))  # (glibc answers 1 when it took the value)
