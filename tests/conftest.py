"""Test-wide setup: convtap's per-installation redaction key goes into a throw-away config
directory, for this process and every convtap process the tests start.

A test that starts a process (mitmdump, the recorder, a server, a client, a browser) is marked
`process` (every test under `e2e/` is); `make check` runs the others, and fails one that starts
a process unmarked (`CONVTAP_NO_PROCESSES=1`), so that the marks stay true."""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="convtap-tests-config-")
os.environ.pop("CONVTAP_REDACT_KEY", None)

E2E = Path(__file__).resolve().parent / "e2e"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E in Path(item.path).parents:
            item.add_marker(pytest.mark.process)


def _refuse(*args: Any, **kwargs: Any) -> Any:
    pytest.fail("this test starts a process: mark it `process` (make check leaves those out)")


@pytest.fixture(autouse=True)
def _no_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under `make check`, starting a process fails a test not marked `process`."""
    if os.environ.get("CONVTAP_NO_PROCESSES") != "1" or request.node.get_closest_marker("process"):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "_execute_child", _refuse)
        patch.setattr(os, "fork", _refuse)
        patch.setattr(multiprocessing.process.BaseProcess, "start", _refuse)
        yield
