"""The wire itself: `convtap decode`, `convtap schemas`, `convtap diff` and `convtap shapes`."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import click

from convtap.cli.common import fail, main, same_file, say_unrecorded, why_unreadable
from convtap.vocab import WireProtocol


@main.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json for tools (a stable shape).",
)
@click.option("--no-redact", is_flag=True, help="Print secrets (tokens, challenges) in clear.")
@click.option(
    "--ws",
    "ws_path",
    metavar="FRAMES.jsonl",
    help="WebSocket frames, one frame's JSON text per line, continuing the turn.",
)
@click.option(
    "--protocol",
    type=click.Choice(["auto", *(p.value for p in WireProtocol)]),
    default="auto",
    show_default=True,
    help="auto tells a Responses API stream from an f/conversation one.",
)
@click.argument("files", nargs=-1, required=True, metavar="FILE [FILE...]")
def decode(
    fmt: str, no_redact: bool, ws_path: str | None, protocol: str, files: tuple[str, ...]
) -> None:
    """Decode a raw f/conversation response body into messages, events and tool calls.

    Several FILEs are one turn: the f/conversation body, then its resume legs. `-` is stdin.

    \b
    Example:
      convtap decode captures/examples/sse/alefita_way_call.sse
      convtap decode --format json body.sse resume.sse --ws frames.jsonl
    """
    from convtap.heap import keep_freed_memory
    from convtap.ingest.decoding import DecodeInputError
    from convtap.ingest.decoding import decode as decode_files
    from convtap.redact.redactor import UnusableKey

    if no_redact:
        click.echo("convtap: --no-redact: secrets are printed in clear", err=True)
    keep_freed_memory()
    if isinstance(sys.stdout, io.TextIOWrapper):  # a lone surrogate (JSON allows one) as `\udXXX`
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        decode_files(list(files), sys.stdout, fmt=fmt, protocol=protocol, ws_path=ws_path,
                     redact=not no_redact)  # fmt: skip
    except (DecodeInputError, UnusableKey) as exc:
        fail(str(exc))


def read_schema_files(directory: Path, *, check: bool) -> dict[str, str]:
    """The schema files in `directory`, by name. A folder among them is refused, and so is a
    file that is not UTF-8 when only checking (writing replaces it)."""
    present: dict[str, str] = {}
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        if not path.is_file():
            fail(f"{path} is not a file: not a schema file")
        try:
            present[path.name] = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            if check:
                fail(f"{path} is not UTF-8 text: not a schema file (`convtap schemas` replaces it)")
            present[path.name] = ""
        except OSError as exc:
            fail(f"cannot read {path}: {exc.strerror or exc}")
    return present


@main.command()
@click.option("--check", is_flag=True, help="Exit 1 if the files differ from the models.")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("schemas"),
    show_default=True,
    help="Where the schema files live.",
)
def schemas(check: bool, directory: Path) -> None:
    """Write the JSON Schema of every wire model into schemas/ (or check it is current).

    \b
    Example:
      convtap schemas            # after changing addon/models/
      convtap schemas --check    # in CI: fails when schemas/ is stale
    """
    from convtap.models.export import export_schemas

    if os.path.lexists(directory) and not directory.is_dir():  # a FIFO, a symlink loop, ...
        fail(f"{directory} is not a folder")
    wanted = export_schemas()
    present = read_schema_files(directory, check=check)
    stale = sorted(n for n in wanted if present.get(n) != wanted[n])
    extra = sorted(set(present) - set(wanted))
    if check:
        if stale or extra:
            for name in stale:
                click.echo(f"stale or missing: {directory / name}", err=True)
            for name in extra:
                click.echo(f"not produced by any model: {directory / name}", err=True)
            click.echo("convtap: schemas/ is out of date; run `convtap schemas`", err=True)
            sys.exit(1)
        click.echo(f"{len(wanted)} schema files in {directory} match the models")
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name in stale:
            (directory / name).write_text(wanted[name], encoding="utf-8")
        for name in extra:
            (directory / name).unlink()
    except OSError as exc:
        fail(f"cannot write into {directory}: {exc.strerror or exc}")
    click.echo(
        f"wrote {len(stale)}, removed {len(extra)}, {len(wanted)} schema files in {directory}"
    )


@main.command()
@click.argument(
    "captures", nargs=-1, metavar="A B", type=click.Path(dir_okay=False, path_type=Path)
)
@click.option(
    "--against-schemas",
    is_flag=True,
    help="Compare one capture with the models in schemas/ instead (drift).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "github"]),
    default="text",
    show_default=True,
)
@click.option(
    "--fail-on",
    type=click.Choice(["breaking", "non-breaking", "any", "never"]),
    default="breaking",
    show_default=True,
    help="Exit 1 when a change at or above this level exists (any: every level).",
)
def diff(captures: tuple[Path, ...], against_schemas: bool, fmt: str, fail_on: str) -> None:
    """What changed in the protocol between A and B (capture databases, anything `convtap
    import` reads, or shapes files written by `convtap shapes`), or what a capture carries that
    the models do not know.

    \b
    Example:
      convtap diff captures/examples/diff/older.har captures/examples/diff/newer.har
      convtap diff --format json old.db new.db
      convtap diff baseline.json capture.db --fail-on breaking --format github   # in CI
      convtap diff --against-schemas captures/capture.db
    """
    from convtap.diff.compare import LEVELS, compare, drift
    from convtap.diff.render import render

    wanted = 1 if against_schemas else 2
    if len(captures) != wanted:
        fail("diff takes two captures, A and B (or one with --against-schemas)")
    shapes = read_shapes_of(captures)
    if against_schemas:
        changes = drift(shapes[0])
        title = f"{captures[0]} against the models in schemas/"
    else:
        changes = compare(shapes[0], shapes[1])
        title = f"{captures[0]} → {captures[1]}"
    click.echo(render(changes, fmt, title))
    if fail_on == "never":
        return
    levels = LEVELS if fail_on == "any" else LEVELS[: LEVELS.index(fail_on) + 1]
    if any(c.level in levels for c in changes):
        sys.exit(1)


def read_shapes_of(sources: tuple[Path, ...]) -> list[Any]:
    """The shapes of each source (a capture or a shapes file), or one line and exit 2."""
    from convtap.diff.baseline import ShapesError
    from convtap.diff.capture import capture_shapes
    from convtap.ingest.readers import CaptureError
    from convtap.store.database import StoreError

    for path in sources:
        if not path.is_file():
            fail(f"cannot read {path}: {why_unreadable(path)}")
    try:
        shapes = [capture_shapes(path) for path in sources]
    except (CaptureError, StoreError, ShapesError) as exc:
        fail(str(exc))
    for path in sources:
        say_unrecorded(path)
    return shapes


@main.command()
@click.argument(
    "sources", nargs=-1, metavar="SOURCE...", type=click.Path(dir_okay=False, path_type=Path)
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the shapes file here (default: standard output).",
)
@click.option(
    "--update",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="BASELINE",
    help="Rewrite this existing shapes file with the shapes of SOURCE... and say what changed.",
)
def shapes(sources: tuple[Path, ...], output: Path | None, update: Path | None) -> None:
    """The shapes of one or more captures, merged, as a shapes file: paths, JSON types, counts
    and enum values, never a value of the session. Commit one as a baseline and `convtap diff`
    later captures against it.

    \b
    Example:
      convtap shapes captures/capture.db --output baseline.json
      convtap shapes --update baseline.json new.db              # refresh the baseline
      convtap shapes --update baseline.json baseline.json new.db   # widen it instead
    """
    from convtap.diff.baseline import is_shapes_file, write_shapes
    from convtap.diff.compare import compare
    from convtap.diff.render import summary
    from convtap.diff.shapes import Shapes, merge
    from convtap.export.files import write_output

    if not sources:
        fail("shapes takes one or more captures (SOURCE...)")
    if output is not None and update is not None:
        fail("--output and --update name the file to write: give one of them")
    if update is not None and not (update.is_file() and is_shapes_file(update)):
        fail(f"--update {update}: not a shapes file (write one with --output first)")
    before = read_shapes_of((update,))[0] if update is not None else None
    merged = Shapes()
    for one in read_shapes_of(sources):
        merge(merged, one)
    target = update or output
    if target is None:
        write_shapes(merged, sys.stdout)
        return
    if update is None and any(same_file(target, source) for source in sources):
        fail(f"--output {target}: that is one of the sources it reads (use --update)")
    try:
        write_output(target, lambda handle: write_shapes(merged, handle))
    except OSError as exc:
        fail(f"cannot write {target}: {exc.strerror or exc}")
    if before is None:
        click.echo(f"wrote the shapes of {len(merged.kinds)} kinds into {target}", err=True)
        return
    counts = summary(compare(before, merged))
    changed = ", ".join(f"{n} {level}" for level, n in counts.items())
    click.echo(f"updated {target}: {changed} (see `convtap diff` for the list)", err=True)
