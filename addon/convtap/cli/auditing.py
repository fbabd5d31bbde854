"""`convtap audit` and `convtap rules`: the contract, checked and explained."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from convtap.cli.common import db_option, fail, main, say, say_unrecorded
from convtap.vocab import Severity


@main.command()
@db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "junit", "sarif", "github"]),
    default="text",
    show_default=True,
)
@click.option(
    "--fail-on",
    type=click.Choice([Severity.ERROR.value, Severity.WARNING.value, "never"]),
    default=Severity.ERROR.value,
    show_default=True,
    help="Exit 1 when a finding at or above this severity exists.",
)
@click.option(
    "--rule", "rules", multiple=True, metavar="ID", help="Report only these rules (repeatable)."
)
@click.option("--wide", is_flag=True, help="Text as long as it is (else it fits 120 columns).")
@click.option(
    "--sarif-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="SARIF names the capture relative to this folder (default: the working directory).",
)
def audit(
    db: Path, fmt: str, fail_on: str, rules: tuple[str, ...], wide: bool, sarif_root: Path | None
) -> None:
    """Check every tool return in a capture against the contract and report the findings.

    Exit 0 when no finding is at or above --fail-on, 1 when there is one, 2 on bad usage or an
    unreadable database. The findings table of the database is rewritten with what it finds.

    \b
    Example:
      convtap audit --db captures/capture.db
      convtap audit --format sarif > convtap.sarif      # for code scanning
      convtap audit --format sarif --sarif-root "$GITHUB_WORKSPACE" > convtap.sarif
      convtap audit --format github --fail-on warning   # in a GitHub workflow
    """
    from convtap.contract.formats import render
    from convtap.contract.registry import SEVERITIES, registry
    from convtap.ingest.capture import audit_capture
    from convtap.store.database import StoreError

    unknown = sorted(set(rules) - set(registry()))
    if unknown:
        fail(f"unknown rule {', '.join(unknown)} (see `convtap rules`)")
    if sarif_root is not None and fmt != "sarif":
        fail("--sarif-root goes with --format sarif")
    if sarif_root is not None and not sarif_root.is_dir():
        fail(f"--sarif-root {sarif_root}: no such folder")
    source, place_of = str(db), None
    try:
        result = audit_capture(db, set(rules) or None)
        if fmt in ("sarif", "junit"):  # findings named by their place, never by an id
            from convtap.export.traces import finding_places, sarif_uri

            place_of = finding_places(db)
            if fmt == "sarif":
                source = sarif_uri(db, sarif_root or Path.cwd())
    except StoreError as exc:
        fail(str(exc))
    say_unrecorded(db)
    if place_of is None:
        output = render(result, fmt, source, wide=wide)
    else:
        output = render(result, fmt, source, wide=wide, place_of=place_of)
    if output:
        click.echo(output)
    if not result.stored:
        say(f"{db} is read-only: the findings were not stored in it")
    if fail_on != "never":
        worst = SEVERITIES.index(fail_on)
        if any(SEVERITIES.index(f.severity) <= worst for f in result.findings):
            sys.exit(1)


@main.command("rules")
@click.argument("rule_id", required=False, metavar="[ID]")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def rules_(rule_id: str | None, fmt: str) -> None:
    """List the contract rules, or explain one.

    \b
    Example:
      convtap rules
      convtap rules return-call-id
    """
    from dataclasses import asdict

    from convtap.contract.registry import registry

    table = registry()
    if rule_id is not None and rule_id not in table:
        fail(f"unknown rule {rule_id} (see `convtap rules`)")
    if fmt == "json":
        if rule_id is not None:
            click.echo(json.dumps(asdict(table[rule_id]), ensure_ascii=False, indent=2))
        else:
            listing = [{"id": r.id, "severity": r.severity, "summary": r.summary}
                       for r in table.values()]  # fmt: skip
            click.echo(json.dumps(listing, ensure_ascii=False, indent=2))
        return
    if rule_id is None:
        width = max(map(len, table))
        for rule in table.values():
            click.echo(f"{rule.id:<{width}}  {rule.severity:<7}  {rule.summary}")
        return
    rule = table[rule_id]
    click.echo(f"{rule.id} ({rule.severity}): {rule.summary}\n")
    click.echo(rule.explanation.strip() + "\n")
    click.echo(f"Source: {rule.seed}\n")
    click.echo(f"Bad:  {json.dumps(json.loads(rule.bad), ensure_ascii=False)}")
    click.echo(f"Good: {json.dumps(json.loads(rule.good), ensure_ascii=False)}")
