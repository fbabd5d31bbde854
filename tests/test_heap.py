"""`convtap decode`'s process keeps the heap it frees (glibc's trim threshold raised)."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest
from convtap.heap import keep_freed_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's tunable")
def test_glibc_takes_the_threshold() -> None:
    assert keep_freed_memory() is True


@pytest.mark.process
def test_decode_still_decodes_with_it(tmp_path: Path) -> None:
    body = tmp_path / "b.sse"
    body.write_text('data: {"type": "title_generation", "title": "t"}\n\ndata: [DONE]\n\n')
    ran = subprocess.run([sys.executable, "-m", "convtap", "decode", "--format", "json", str(body)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert '"title_generation"' in ran.stdout
