"""Instruction counts of parts of a benchmark, from valgrind's callgrind: on a shared machine they
stay the same from run to run where CPU time does not.

A benchmark script runs itself again under `valgrind --tool=callgrind` (`counted`), and each part
to be counted is called through `measured(fn)`: callgrind counts only inside `operator.call` (a
C function nothing else of convtap's calls) and writes one profile after each, so each part is
counted apart, none of the setup around it. Where valgrind is not installed, `counted` says so
and returns nothing.
"""

from __future__ import annotations

import operator
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
_SUMMARY = re.compile(rb"^summary:\s*(\d+)", re.M)


def valgrind() -> str | None:
    """The valgrind to count with, or None when it is not installed."""
    return shutil.which("valgrind")


def measured(fn: Callable[[], T]) -> T:
    """`fn()`, counted apart when the process runs under `counted`."""
    return operator.call(fn)  # type: ignore[no-any-return]


def counted(script: Path, *args: str) -> list[int] | None:
    """Run `script` with `args` under callgrind: the instructions of each `measured` call it
    made, in order. None when valgrind is not there; a failure of the script is raised."""
    found = valgrind()
    if found is None:
        return None
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
        out = Path(tmp) / "cg.out"
        command = [
            found, "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=_operator_call",
            "--dump-after=_operator_call", f"--callgrind-out-file={out}",
            sys.executable, str(script), *args,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same sets and dicts in every run
        ran = subprocess.run(command, capture_output=True, env=env, check=False)
        if ran.returncode != 0:
            said = ran.stderr.decode(errors="replace")[-2000:]
            raise RuntimeError(f"{script.name} under callgrind failed: {said}")
        parts = sorted(Path(tmp).glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        counts = []
        for part in parts:
            found_summary = _SUMMARY.search(part.read_bytes())
            counts.append(int(found_summary.group(1)) if found_summary else 0)
        return counts
