"""`convtap diff`'s output: text (100 columns), JSON (a contract), markdown, GitHub annotations.

A change carries no value of the session (compare.py), so nothing here needs to hide one."""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict
from typing import Any

from convtap.diff.compare import LEVELS, Change

WIDTH = 100
INDENT = " " * 34  # under the check id
GITHUB = {"breaking": "error", "non-breaking": "warning", "info": "notice"}


def summary(changes: list[Change]) -> dict[str, int]:
    return {level: sum(c.level == level for c in changes) for level in LEVELS}


def to_json(changes: list[Change]) -> dict[str, Any]:
    """`convtap diff --format json` (a contract: keys are only ever added)."""
    return {"summary": summary(changes), "changes": [asdict(c) for c in changes]}


def kinds_label(change: Change) -> str:
    """`event:response.created`, or `event:response.{completed,created}` for a shared object."""
    kinds = list(change.kinds) or [change.kind]
    if len(kinds) == 1 or change.kind.startswith("family:"):
        return change.kind
    prefix = kinds[0]
    for kind in kinds[1:]:
        while not kind.startswith(prefix):
            prefix = prefix[:-1]
    cut = max(prefix.rfind("."), prefix.rfind(":")) + 1
    return f"{prefix[:cut]}{{{','.join(k[cut:] for k in kinds)}}}"


def render(changes: list[Change], fmt: str, title: str) -> str:
    if fmt == "json":
        return json.dumps(to_json(changes), ensure_ascii=False, indent=2, default=str)
    if fmt == "github":
        return "\n".join(_github(c) for c in _ordered(changes))
    counts = summary(changes)
    total = ", ".join(f"{n} {level}" for level, n in counts.items())
    if fmt == "markdown":
        lines = [
            f"## {_cell(title)}",
            "",
            total,
            "",
            "| level | check | kind | path | detail | example |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for c in _ordered(changes):
            example = "" if c.example is None else f"`{_cell(str(c.example))}`"
            path = _cell(c.path or "-")
            lines.append(
                f"| {c.level} | `{c.check}` | `{_cell(kinds_label(c))}` | `{path}` | "
                f"{_cell(c.detail)} | {example} |"
            )
        return "\n".join(lines)
    lines = textwrap.wrap(title, WIDTH, break_on_hyphens=False) or [""]
    for c in _ordered(changes):
        head = f"  {c.level:<12} {c.check:<18} {kinds_label(c)}"
        if len(head) + 1 + len(c.path) <= WIDTH:
            lines.append(f"{head} {c.path}".rstrip())
        else:  # a long path on a line of its own, its end kept
            lines.append(_fit(head))
            room = WIDTH - len(INDENT)
            lines.append(INDENT + (c.path if len(c.path) <= room else "…" + c.path[1 - room :]))
        lines += textwrap.wrap(c.detail, WIDTH, initial_indent=INDENT, subsequent_indent=INDENT)
    lines.append(total)
    return "\n".join(lines)


def _ordered(changes: list[Change]) -> list[Change]:
    return [c for level in LEVELS for c in changes if c.level == level]


def _fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"


def _cell(text: str) -> str:
    """Text in one table cell: a field name from a capture may hold `|` or a line break."""
    return text.replace("|", "\\|").replace("\r", "\\r").replace("\n", "\\n")


def _github(c: Change) -> str:
    message = f"{kinds_label(c)} {c.path}".rstrip() + f": {c.detail}"
    message = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return f"::{GITHUB[c.level]} title=convtap diff {c.check}::{message}"
