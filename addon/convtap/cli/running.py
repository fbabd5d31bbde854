"""`convtap run -- COMMAND`: a command run with its clients recorded and audited."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from convtap.cli.common import db_option, fail, main, say


@main.command(context_settings={"allow_interspersed_args": False})
@db_option
@click.option(
    "--upstream",
    metavar="URL",
    help="Reverse mode in front of URL: COMMAND gets OPENAI_BASE_URL and CONVTAP_BASE_URL.",
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning", "never"]),
    default="error",
    show_default=True,
    help="Exit 1 when a finding is at least this severe (and COMMAND exited 0).",
)
@click.option("--web", is_flag=True, help="Serve the report live on 127.0.0.1 (`convtap serve`).")
@click.argument(
    "command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- COMMAND [ARG]..."
)
def run(db: Path, upstream: str | None, fail_on: str, web: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND with its clients recorded into --db, then sum up the capture in one line.

    Without --upstream, a regular proxy on a free 127.0.0.1 port: COMMAND gets HTTPS_PROXY,
    HTTP_PROXY and a CA bundle that trusts mitmproxy's CA (SSL_CERT_FILE, REQUESTS_CA_BUNDLE,
    CURL_CA_BUNDLE, NODE_EXTRA_CA_CERTS, CODEX_CA_CERTIFICATE). Ctrl-C goes to COMMAND; the
    recorder finishes the capture either way. Exit status: COMMAND's when it is not 0, else 1
    when a finding reaches --fail-on, else 0.

    \b
    Example:
      convtap run -- pytest tests/agents
      convtap run --upstream http://127.0.0.1:9000 -- python my_agent.py
      convtap run --db captures/ci.db --fail-on warning -- ./run-evals.sh
    """
    from convtap.launch.env import bypassed
    from convtap.launch.run import (
        CertificateError,
        LaunchError,
        command_env,
        line_break,
        run_command,
        signals_held,
        start_recorder,
        summarize,
    )
    from convtap.store.database import StoreError

    if (why := not_runnable(command[0])) is not None:
        fail(f"{command[0]}: {why}")
    if upstream is not None:
        check_upstream(upstream)
    try:
        recorder = start_recorder(db, upstream, web, sys.stderr)
    except LaunchError as exc:
        click.echo(str(exc), err=True)
        sys.exit(exc.status)
    status = 0
    try:
        with command_env(recorder, upstream) as env:
            for host in [] if upstream is not None else bypassed(env):
                say(f"NO_PROXY sends {host} around the recorder: its traffic is not recorded")
            status = run_command(command, env)
    except CertificateError as exc:
        say(str(exc))
        status = 2
    finally:
        with signals_held(say):
            stopped = recorder.stop()
    if stopped != 0:
        say(f"the recorder stopped with status {stopped}: the capture may lack the end of the run")
    try:
        summary = summarize(db)
    except StoreError as exc:
        fail(str(exc))
    sys.stdout.flush()
    click.echo(line_break(sys.stdout) + summary.line())
    sys.stdout.flush()
    if status != 0:
        sys.exit(status)
    sys.exit(1 if stopped != 0 or summary.reaches(fail_on) else 0)


def not_runnable(program: str) -> str | None:
    """Why `program` cannot be run (a shell would say "command not found"), or None."""
    if os.sep in program:
        path = Path(program)
        if not path.is_file():
            return "no such file"
        return None if os.access(path, os.X_OK) else "not executable"
    return None if shutil.which(program) is not None else "command not found"


def check_upstream(upstream: str) -> None:
    """An --upstream mitmproxy cannot be a reverse proxy for is one line, exit 2."""
    from mitmproxy.proxy.mode_specs import ProxyMode

    if "://" not in upstream:
        fail(f"--upstream {upstream}: not a URL (http://HOST:PORT)")
    try:
        ProxyMode.parse(f"reverse:{upstream}")
    except ValueError as exc:
        fail(f"--upstream {upstream}: {exc}")
