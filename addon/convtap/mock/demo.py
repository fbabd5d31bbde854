"""`convtap demo`: the main job end to end, on 127.0.0.1 only, and it exits by itself.

It starts `convtap mock` (the server's side) and `convtap record` in front of it (reverse proxy
mode), drives the reference client through the `alefita_way` tool call once correctly and once
with a faulty return, then through a Responses API call once correctly and once answered with the
item id, stops the recorder as Ctrl-C would, and prints the audit and the call ledger.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from convtap.mock.refclient import RefClient
from convtap.store.database import StoreError, open_readonly

LISTENING = re.compile(r"listening at (https?://)?[\d.]+:(\d+)")


class DemoError(Exception):
    """A part of the demo did not start (what it said is echoed above)."""


@contextmanager
def service(args: list[str], name: str, echo: Callable[[str], None]) -> Iterator[int]:
    """Run a convtap subcommand; yield the port it listens on; stop it with SIGINT."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "convtap.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    port = None
    for line in proc.stdout:
        echo(f"[{name}] {line.rstrip()}")
        if (match := LISTENING.search(line)) is not None:
            port = int(match.group(2))
            break
    if port is None:
        proc.wait(10)
        raise DemoError(f"the demo's {name} did not start (exit status {proc.returncode})")

    def forward() -> None:
        for rest in proc.stdout or ():
            echo(f"[{name}] {rest.rstrip()}")

    reader = threading.Thread(target=forward, daemon=True)
    reader.start()
    try:
        yield port
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        reader.join(5)


def _check_replaceable(db: Path) -> None:
    """The demo replaces a capture (or an empty file) at its path, and nothing else: another
    application's database, a FIFO, a symlink to nothing are refused, left as they are."""
    if db.is_file() and not db.is_symlink() and db.stat().st_size == 0:
        return
    try:
        open_readonly(db).conn.close()
    except StoreError as exc:
        raise DemoError(f"{exc}: the demo replaces only a convtap capture (--db)") from None


def run_demo(db: Path, echo: Callable[[str], None] = print) -> None:
    if os.path.lexists(db):
        _check_replaceable(db)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    # --lenient: the real API refuses an output answered with the item id (HTTP 400); the demo
    # shows the audit finding the mistake, so its mock takes it.
    mock_args = ["mock", "--port", "0", "--scenario", "alefita_way", "--lenient"]
    with service(mock_args, "mock", echo) as mock:
        record = [
            "record",
            "--mode",
            f"reverse:http://127.0.0.1:{mock}",
            "--listen-port",
            "0",
            "--db",
            str(db),
        ]
        with service(record, "record", echo) as proxy:
            client = RefClient(f"http://127.0.0.1:{proxy}")
            for faulty in (False, True):
                label = "a faulty return" if faulty else "a correct return"
                echo(f"\n== reference client: the alefita_way tool call, answered with {label}")
                summary = client.run(faulty=faulty)
                echo(f"   conversation {summary.conversation_id}, call {summary.call_id}")
                echo(f"   return {summary.return_id}, accepted by the server: {summary.accepted}")
                echo(f"   continuation: {summary.continuation_text}")
            for faulty in (False, True):
                label = "the item id (fc_...)" if faulty else "the call id"
                echo(
                    f"\n== reference client on the Responses API: a function call and a client "
                    f"tool search, answered with {label}"
                )
                answer = client.run_responses(faulty=faulty)
                for call in answer.calls:
                    echo(
                        f"   {call.type} {call.name or ''} item {call.item_id} call_id "
                        f"{call.call_id}"
                    )
                echo(f"   answer: {answer.text}")
    echo("")
