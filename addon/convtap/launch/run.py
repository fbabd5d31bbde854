"""`convtap run -- COMMAND`: the recorder started in front of a command, the command run with
its clients pointed at it, the capture summed up when it ends.

The recorder is `convtap record` (the same process a user starts, on a free port), in a process
group of its own: the terminal's Ctrl-C never reaches it mid-import. The command runs in a group
of its own too, given the terminal when `run` has it, so that Ctrl-C goes to the command first,
and a SIGINT or SIGTERM sent to `run` is passed on to it. Once the command has ended, the
recorder is stopped as Ctrl-C stops it (it records what the journal still holds), and one line
sums up the capture.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

from convtap.contract.registry import SEVERITIES
from convtap.ingest.capture import audit_capture
from convtap.launch.env import CertificateError, regular_env, reverse_env, write_bundle

LISTENING = re.compile(r"proxy listening at [\d.]+:(\d+)")
TRUST = re.compile(r"trust the CA for HTTPS: (.+?) \(or open")
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
CA_WAIT = 30.0  # seconds mitmproxy may take to write a new CA once it listens


class LaunchError(Exception):
    """The recorder could not start: what it said (one line), and its exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Recorder:
    """A running `convtap record`: its process, its port, the CA it made, its output relayed."""

    proc: subprocess.Popen[str]
    port: int
    ca: Path
    relay: threading.Thread
    said: list[str] = field(default_factory=list)

    def wait_for_ca(self, timeout: float = CA_WAIT) -> None:
        """mitmproxy writes a new CA just after it starts listening: until it is there whole (or
        the recorder stopped, or `timeout` passed; then reading it says why). The file is there
        before its certificate is: one read in between would trust nothing."""
        deadline = time.monotonic() + timeout
        while not _whole_pem(self.ca) and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)

    def stop(self) -> int:
        """Stop it as Ctrl-C does and wait until it has recorded everything; its status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        status = self.proc.wait()
        self.relay.join(30)
        return status


def _whole_pem(path: Path) -> bool:
    try:
        return b"-----END CERTIFICATE-----" in path.read_bytes()
    except OSError:
        return False


def record_args(db: Path, upstream: str | None, web: bool) -> list[str]:
    args = [sys.executable, "-m", "convtap.cli", "record", "--listen-port", "0", "--db", str(db)]
    if upstream is not None:
        args += ["--mode", f"reverse:{upstream}"]
    return args + (["--web"] if web else [])


def start_recorder(db: Path, upstream: str | None, web: bool, out: IO[str]) -> Recorder:
    """`convtap record` on a free port, once it listens; what it says after its banner (the
    live page's URL, warnings, the call lines) goes to `out`. A recorder that stops before it
    listens raises `LaunchError` with its last line."""
    proc = subprocess.Popen(record_args(db, upstream, web), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                            process_group=0)  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    port = ca = None
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Watch live:"):
                out.write(line)
            if (match := LISTENING.search(line)) is not None:
                port = int(match.group(1))
            if (match := TRUST.search(line)) is not None:
                ca = Path(match.group(1))
            if port is not None and ca is not None:
                break
    except BaseException:  # Ctrl-C while it starts: its group never sees the terminal's
        proc.send_signal(signal.SIGINT)
        proc.wait()
        raise
    if port is None or ca is None:
        status = proc.wait()
        said = [line.strip() for line in lines if line.strip()]
        raise LaunchError(said[-1] if said else "the recorder did not start", status or 1)
    relay = threading.Thread(target=_relay, args=(proc.stdout, out), daemon=True)
    relay.start()
    return Recorder(proc, port, ca, relay)


def _relay(source: IO[str], out: IO[str]) -> None:
    banner = True
    for line in source:
        if banner and line.startswith("  "):  # the rest of the banner: `run` did the wiring
            continue
        banner = False
        with contextlib.suppress(OSError, ValueError):
            out.write(line)
            out.flush()


@contextlib.contextmanager
def command_env(recorder: Recorder, upstream: str | None) -> Iterator[dict[str, str]]:
    """The command's environment; a CA bundle it names lives in a temporary folder, removed
    when the command has ended."""
    if upstream is not None:
        yield reverse_env(os.environ, recorder.port)
        return
    recorder.wait_for_ca()
    with tempfile.TemporaryDirectory(prefix="convtap-run-") as tmp:
        bundle = write_bundle(Path(tmp) / "ca-bundle.pem", recorder.ca)
        yield regular_env(os.environ, recorder.port, bundle)


def run_command(command: Sequence[str], env: dict[str, str]) -> int:
    """Run `command` in a process group of its own, holding the terminal while it runs when
    `run` holds it; SIGINT, SIGTERM and SIGHUP sent to `run` are passed on to its group. Its
    exit status (128 + N when signal N ended it, as a shell says)."""
    pending: list[int] = []  # what came before the command was there to take it
    group: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        if not group:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group[0], signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    terminal = None
    try:
        child = subprocess.Popen(list(command), env=env, process_group=0)
        group.append(child.pid)
        terminal = _foreground(child.pid)
        for signum in pending:
            forward(signum, None)
        status = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if terminal is not None:
            _take_terminal(terminal, os.getpgrp())
    return 128 - status if status < 0 else status


def _foreground(pgid: int) -> int | None:
    """Give the terminal to the group `pgid` when this process's group holds it: the file
    descriptor of the terminal, or None."""
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                _take_terminal(fd, pgid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGCONT)  # had it read the terminal before: go on
                return fd
    return None


def _take_terminal(fd: int, pgid: int) -> None:
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may ask
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, pgid)
    finally:
        signal.signal(signal.SIGTTOU, previous)


@contextlib.contextmanager
def signals_held(say: Callable[[str], None]) -> Iterator[None]:
    """While the recorder finishes: Ctrl-C and SIGTERM only say that it is finishing (stopping
    it now would leave the journal to `--catch-up`)."""

    def hold(signum: int, frame: Any) -> None:
        say("the recorder is finishing the capture; it stops once everything is recorded")

    previous = {signum: signal.signal(signum, hold) for signum in FORWARDED}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@dataclass(frozen=True)
class Summary:
    """What the capture holds once the recorder is done: its calls, the outputs (and returns)
    that answered them, its findings by severity."""

    calls: int
    outputs: int
    findings: dict[str, int]
    path: Path

    def line(self) -> str:
        counts = ", ".join(f"{n} {severity}" for severity, n in self.findings.items())
        return (f"convtap run: {self.calls} calls, {self.outputs} outputs, findings: {counts};"
                f" capture {self.path}")  # fmt: skip

    def reaches(self, fail_on: str) -> bool:
        """Whether a finding is at or above `fail_on` (`never`: none is)."""
        if fail_on == "never":
            return False
        worst = SEVERITIES.index(fail_on)
        return any(
            n for severity, n in self.findings.items() if SEVERITIES.index(severity) <= worst
        )


def line_break(stream: IO[str]) -> str:
    """What the summary line needs before it to start a line of its own on `stream` (this
    process's stdout, which the command shared): nothing when the command's output ended with a
    line break, which a file shows by its last byte; a line break when it did not, or when this
    cannot be known (a pipe: a line left open would be glued to the summary). A terminal is
    taken to be at a line's start: its user sees an open line, and a blank one would be noise."""
    with contextlib.suppress(OSError, ValueError):
        fd = stream.fileno()
        if os.isatty(fd):
            return ""
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "\n"
        end = os.lseek(fd, 0, os.SEEK_CUR)
        if end == 0:
            return ""
        with open(f"/proc/self/fd/{fd}", "rb") as written:  # (stdout may be open write-only)
            return "" if os.pread(written.fileno(), 1, end - 1) == b"\n" else "\n"
    return "\n"


def summarize(db: Path) -> Summary:
    """The capture audited as `convtap audit` audits it (a capture the command never reached
    holds nothing)."""
    if not db.exists():
        return Summary(0, 0, dict.fromkeys(SEVERITIES, 0), db)
    counts = audit_capture(db).summary()
    return Summary(counts["calls"], counts["returns"], counts["findings"], db)


__all__ = [
    "CertificateError",
    "LaunchError",
    "Recorder",
    "Summary",
    "command_env",
    "run_command",
    "signals_held",
    "start_recorder",
    "summarize",
]
