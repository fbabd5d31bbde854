"""The live page's pieces: the report rendered whole once, then again as the parts a growing
capture changes (the summary, each conversation), each from the report's own template (its
`summary` and `conversation` blocks), so that the live page and `convtap report` never differ.

A capture is read live: it is opened again when a recording starts writing it (a capture
nobody wrote when it was opened is read as immutable, see `store.database.open_readonly`), and
`PRAGMA data_version` tells, without reading a table, whether anything was committed since.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import sqlite_utils

from convtap.report.page import FILTERS, TEMPLATE, environment, page, script, script_src, visible
from convtap.report.timeline import conversations
from convtap.store import report_queries as queries
from convtap.store.database import open_readonly

SCRIPT = resources.files("convtap.report") / "live.js"
SCRIPT_SRC = script_src(FILTERS, SCRIPT)  # the live page's scripts
SUMMARY = "summary"
FIXED = (SUMMARY, "charts")  # the template's blocks that are one section each, keyed by its id


class LiveCapture:
    """A capture opened read-only, and whether it changed since the last look."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._wal = Path(f"{db}-wal")
        self.capture = self._open()

    def _open(self) -> sqlite_utils.Database:
        """The capture opened again; what is known of it changes only once that worked (a
        failed reopen leaves the last connection, and is tried again at the next look)."""
        immutable = not self._wal.exists()  # as open_readonly decides
        capture = open_readonly(self.db)
        self._immutable, self._file = immutable, self._file_state()
        self._version = queries.data_version(capture)
        return capture

    def _file_state(self) -> tuple[int, int, int]:
        found = self.db.stat()
        return found.st_ino, found.st_size, found.st_mtime_ns

    def changed(self) -> bool:
        """Whether something was committed since the last call (or a recording began)."""
        if self._immutable and (self._wal.exists() or self._file_state() != self._file):
            # A writer came (and may be gone already): read the capture as it is now.
            capture = self._open()
            self.capture.conn.close()
            self.capture = capture
            return True
        version = queries.data_version(self.capture)
        if version == self._version:
            return False
        self._version = version
        return True

    def close(self) -> None:
        self.capture.conn.close()


@dataclass
class Seen:
    """What one page shows: the digest of each part it was sent, and the order of its
    conversations (a few bytes a conversation)."""

    digests: dict[str, bytes] = field(default_factory=dict)
    order: tuple[str, ...] = ()


@dataclass(frozen=True)
class Parts:
    """The parts of the page at one reading of the capture; `version` counts readings."""

    version: int
    html: dict[str, str]
    digests: dict[str, bytes]
    order: tuple[str, ...]  # the conversations' keys, in page order
    tools: tuple[str, ...]

    def seen(self) -> Seen:
        """What a page rendered at this reading shows."""
        return Seen(dict(self.digests), self.order)

    def update(self, seen: Seen) -> str | None:
        """The JSON message bringing a page from `seen` to these parts (`seen` moves with it),
        or None when it shows them already."""
        changed = [key for key, digest in self.digests.items() if seen.digests.get(key) != digest]
        order = list(self.order) if self.order != seen.order else None
        if not changed and order is None:
            return None
        seen.digests.update((key, self.digests[key]) for key in changed)
        seen.order = self.order
        parts = [[key, self.html[key]] for key in changed]
        return json.dumps({"parts": parts, "order": order, "tools": self.tools})


class LivePage:
    """Renders a capture's live page and its parts from the report's template."""

    def __init__(self, db: Path, events: str) -> None:
        self.db = db
        self.events = events
        self.template = environment().from_string(TEMPLATE.read_text(encoding="utf-8"))
        self._script = script(SCRIPT)
        self._macros: dict[str, Any] = {}

    def _context(self, capture: sqlite_utils.Database, version: int) -> dict[str, Any]:
        live = {"events": f"{self.events}?v={version}", "script": self._script}
        return {**page(capture, self.db), "live": live, "script_src": SCRIPT_SRC}

    def whole(self, capture: sqlite_utils.Database, version: int) -> str:
        """The page, as `convtap report` writes it, with the live script that keeps it current
        from the parts of `version` on."""
        with queries.one_reading(capture):
            module = self.template.make_module(self._context(capture, version))
        self._macros = {name: value for name, value in vars(module).items()
                        if isinstance(value, jinja2.runtime.Macro)}  # fmt: skip
        return str(module)

    def parts(self, capture: sqlite_utils.Database, version: int) -> Parts:
        """Each part of the page, rendered alone (a block cannot see the template's macros
        unless given them: they come from a whole page rendered first)."""
        if not self._macros:
            self.whole(capture, version)
        html: dict[str, str] = {}
        order: list[str] = []
        repeats: Counter[str] = Counter()  # a key stays unique as the page's script makes it
        with queries.one_reading(capture):
            context = {**self._context(capture, version), **self._macros}
            for name in FIXED:  # sections with an id of their own, in every page
                html[name] = self._block(name, context)
            for conv in conversations(capture):
                key = f"conv:{conv.key}"
                repeats[key] += 1
                key = f"{key}#{repeats[key] - 1}" if repeats[key] > 1 else key
                html[key] = self._block("conversation", {**context, "conv": conv})
                order.append(key)
            tools = tuple(visible(tool) for tool in queries.tools(capture))  # as the page shows
        digests = {key: hashlib.blake2b(text.encode(), digest_size=16).digest()
                   for key, text in html.items()}  # fmt: skip
        return Parts(version, html, digests, tuple(order), tools)

    def _block(self, name: str, context: dict[str, Any]) -> str:
        return "".join(self.template.blocks[name](self.template.new_context(context)))
