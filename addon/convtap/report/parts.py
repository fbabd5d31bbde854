"""The live page's pieces: the page as `convtap report` writes it but without its data (a shell:
the markup, the summary and the pictures, the scripts), with the live script; the data of the
latest reading, fetched by the page once its scripts run (`LivePage.data`); the summary and the
pictures rendered alone (the template's `summary` and `charts` blocks), told apart by digest;
and the message that brings a page from the reading it shows to the latest (`LivePage.update`).

A capture is read live: it is opened again when a recording starts writing it (a capture
nobody wrote when it was opened is read as immutable, see `store.database.open_readonly`), and
`PRAGMA data_version` tells, without reading a table, whether anything was committed since.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
import sqlite_utils
from markupsafe import Markup

from convtap.report.model import LiveModel, Reading
from convtap.report.page import (
    SCRIPTS,
    TEMPLATE,
    environment,
    page,
    script,
    script_src,
    summary_parts,
)
from convtap.store import report_queries as queries
from convtap.store.database import open_readonly

SCRIPT = resources.files("convtap.report") / "live.js"
SCRIPT_SRC = script_src(*SCRIPTS, SCRIPT)  # the live page's scripts
SUMMARY = "summary"
FIXED = (SUMMARY, "charts")  # the template's blocks that are one section each, keyed by its id


class LiveCapture:
    """A capture opened read-only, and whether it changed since the last look."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._wal = Path(f"{db}-wal")
        self.capture = self._open()
        self._reopened = False

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
            self._reopened = True
            return True
        version = queries.data_version(self.capture)
        if version == self._version:
            return False
        self._version = version
        return True

    def reopened(self) -> bool:
        """Whether the capture was opened again since the last call (what the connection held
        is gone: it must be read whole)."""
        found, self._reopened = self._reopened, False
        return found

    def close(self) -> None:
        self.capture.conn.close()


@dataclass(frozen=True)
class Parts:
    """The summary and the pictures at one reading, each by its section's id."""

    html: dict[str, str]
    digests: dict[str, bytes]

    @property
    def tag(self) -> str:
        """The parts' digests in one word: a page names the parts it shows by it."""
        joined = b"".join(self.digests[name] for name in sorted(self.digests))
        return hashlib.blake2b(joined, digest_size=12).hexdigest()


class LivePage:
    """Keeps a capture's data for the live page, and renders the page and its messages."""

    def __init__(self, db: Path, root: str) -> None:
        self.db = db
        self.root = root  # the page's path: its events and its data are under it
        self.template = environment().from_string(TEMPLATE.read_text(encoding="utf-8"))
        self._script = script(SCRIPT)
        self.model = LiveModel()

    def read_whole(self, capture: sqlite_utils.Database) -> Reading:
        """Read every step into the model, at one reading of the capture."""
        with queries.one_reading(capture):
            return self.model.whole(capture)

    def read(self, capture: sqlite_utils.Database, *, reopened: bool = False) -> Reading:
        """Read what changed into the model, at one reading of the capture (`reopened`: on a
        connection opened since the last reading)."""
        with queries.one_reading(capture):
            return self.model.update(capture, reopened=reopened)

    def parts(self, capture: sqlite_utils.Database) -> Parts:
        """The summary and the pictures as they are now (read whole: see `Live._parts`)."""
        with queries.one_reading(capture):
            context = {**page(capture, self.db), **summary_parts(capture)}
            html = {name: self._block(name, context) for name in FIXED}
        return _parts(html)

    def whole(self, capture: sqlite_utils.Database, parts: Parts) -> str:
        """The page, as `convtap report` writes it but without its data (the page fetches it:
        `data`), with the parts given (not read again, named by their tag) and the live script
        that keeps it current. It is small whatever the capture's size, so that the browser
        runs the scripts at once, not after reading every step."""
        with queries.one_reading(capture):
            context = {**page(capture, self.db), "script_src": SCRIPT_SRC}
        context["parts"] = {name: Markup(html) for name, html in parts.html.items()}
        context["live"] = {"events": f"{self.root}events", "data": f"{self.root}data",
                           "parts": parts.tag, "script": self._script}  # fmt: skip
        return self.template.render(context)

    def data(self) -> tuple[int, list[str]]:
        """The page's data at the model's latest reading: that reading, and every block (one a
        line). The blocks' text is never changed in place, so the list stays of that reading
        while it is sent, however the model moves on meanwhile."""
        return self.model.version, list(self.model.data())

    def _block(self, name: str, context: dict[str, Any]) -> str:
        return "".join(self.template.blocks[name](self.template.new_context(context)))

    def update(
        self, version: int, digests: dict[str, bytes], parts: Parts
    ) -> tuple[str, str] | None:
        """The message bringing a page from the model's reading `version` and the parts of
        `digests` to the latest (`digests` moves with it): `("update", JSON)`, `("reload", "{}")`
        when that reading is forgotten, or None when the page shows the latest already."""
        since = self.model.since(version)
        if since is None:
            return "reload", "{}"
        changed, gone = since
        fixed = [name for name in FIXED if digests.get(name) != parts.digests[name]]
        if not changed and not gone and not fixed:
            return None
        digests.update((name, parts.digests[name]) for name in fixed)
        steps = [text for key in changed if (text := self.model.step_json(key)) is not None]
        head = orjson.dumps({"v": self.model.version, "gone": [list(k) for k in gone],
                             "parts": [[name, parts.html[name]] for name in fixed]})  # fmt: skip
        return "update", (head[:-1] + b',"steps":[' + b",".join(steps) + b"]}").decode()


def _parts(html: dict[str, str]) -> Parts:
    digests = {key: hashlib.blake2b(text.encode(), digest_size=16).digest()
               for key, text in html.items()}  # fmt: skip
    return Parts(html, digests)
