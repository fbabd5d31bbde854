"""Test-wide setup: convtap's per-installation redaction key goes into a throw-away config
directory, for this process and every convtap process the tests start.

A test that starts a process (mitmdump, the recorder, a server, a client, a browser) is marked
`process` (every test under `e2e/` is); `make check` runs the others, and fails one that starts
a process unmarked (`CONVTAP_NO_PROCESSES=1`), so that the marks stay true. There, the quick
loop, each Hypothesis property tries a quarter of the examples it asks for (at least
`CHECK_EXAMPLES`); `make test` tries them all.

`demo_capture` is the demo's capture, made once per test process for the tests that only read
it."""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from convtap.wire.jsonvalue import allow_deep_json
from hypothesis import settings

# The recursion limit convtap's commands run with, from the start: a command run in-process sets
# it, and a change in the middle of a Hypothesis test is warned about.
allow_deep_json()
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="convtap-tests-config-")
os.environ.pop("CONVTAP_REDACT_KEY", None)

E2E = Path(__file__).resolve().parent / "e2e"


CHECK_EXAMPLES = 10  # the fewest examples a property tries under `make check`
CHECK_SHARE = 4  # under `make check`, a property tries 1/CHECK_SHARE of its examples


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker more than the machine has cores. Most tests wait on a process they
    started (mitmdump, a client, a browser) for part of their time, so one worker a core leaves
    the cores idle then (the suite on 2 cores: 279 s with 2 workers, 229 s with 3)."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    quick = os.environ.get("CONVTAP_NO_PROCESSES") == "1"
    for item in items:
        if E2E in Path(item.path).parents:
            item.add_marker(pytest.mark.process)
        if quick:
            _fewer_examples(getattr(item, "obj", None))


def _fewer_examples(test: Any) -> None:
    """A Hypothesis test's own settings (where `@settings` puts them, read as it runs), with a
    share of its examples: the same properties, searched less deeply."""
    test = getattr(test, "__func__", test)  # a method: its function
    chosen = getattr(test, "_hypothesis_internal_use_settings", None)
    if chosen is None or getattr(test, "_convtap_fewer", False):
        return
    fewer = max(CHECK_EXAMPLES, chosen.max_examples // CHECK_SHARE)
    test._hypothesis_internal_use_settings = settings(chosen, max_examples=fewer)
    test._convtap_fewer = True


@pytest.fixture(scope="session")
def demo_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`convtap demo`'s capture (f/conversation and the Responses API, a client answering
    with mistakes), made once per test process: read it, never write into it."""
    from tests.runner import convtap

    db = tmp_path_factory.mktemp("demo") / "demo.db"
    assert convtap("demo", "--db", str(db)).returncode == 0
    return db


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
