"""`convtap export --format otlp` and `--otlp-endpoint`: a capture's traces (see
`convtap.telemetry.spans`) as an OTLP/JSON file, or sent to an OTLP/HTTP receiver.

The capture is read read-only, its spans built and written or sent a batch at a time; a file
appears only once it is whole (`convtap.export.files`).
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

import sqlite_utils

from convtap.contract.formats import Place, PlaceOf
from convtap.contract.registry import Finding
from convtap.export.files import is_part_of, write_output
from convtap.store.database import StoreError, open_readonly
from convtap.store.trace_queries import call_usage
from convtap.store.views import AnswerCost
from convtap.telemetry.otlp import Sender, write_json
from convtap.telemetry.places import places
from convtap.telemetry.spans import capture_spans

T = TypeVar("T")
SEND_TIMEOUT = 10.0  # seconds a batch may take, retries included


def write_traces(db_path: Path, output: Path | None, *, content: bool = False) -> int:
    """The capture's spans as OTLP/JSON into `output` (stdout when None); how many."""
    if output is not None and is_part_of(output, db_path):
        raise StoreError(f"{output} is the capture itself: choose another file")

    def write(db: sqlite_utils.Database) -> int:
        spans = capture_spans(db, content=content)
        if output is None:
            return write_json(spans, sys.stdout)
        return write_output(output, lambda handle: write_json(spans, handle))

    return _reading(db_path, write)


def send_traces(db_path: Path, url: str, *, content: bool = False) -> Sender:
    """The capture's spans to the OTLP/HTTP endpoint `url`: the sender, which counts what went
    (`sent`) and what did not (`lost`, and why: `reason`)."""
    sender = Sender(url, SEND_TIMEOUT)
    try:
        _reading(db_path, lambda db: sender.send(capture_spans(db, content=content)))
    finally:
        sender.close()
    return sender


def _reading(db_path: Path, work: Callable[[sqlite_utils.Database], T]) -> T:
    db = open_readonly(db_path)
    try:
        return work(db)
    except sqlite3.DatabaseError as exc:  # a damaged page: nothing is written
        raise StoreError(f"{db_path} cannot be read: {exc}") from exc
    finally:
        db.conn.close()


def ledger_usage(db_path: Path) -> dict[str, AnswerCost]:
    """For each call of the capture, the usage row of the answer that made it."""
    return _reading(db_path, call_usage)


def finding_places(db_path: Path) -> PlaceOf:
    """Where each finding of the capture happened, in words that hold from run to run: its
    call's place, else its request's (`convtap.telemetry.places`)."""
    known = _reading(db_path, places)

    def place_of(finding: Finding) -> Place | None:
        if finding.call_id and finding.call_id in known.calls:
            return known.calls[finding.call_id]
        return known.flows.get(finding.flow_id or "")

    return place_of


def sarif_uri(db_path: Path, root: Path) -> str:
    """The capture's path relative to `root`, as a URI reference (GitHub refuses an absolute
    one); its file's name alone when it lies outside `root`."""
    target, base = db_path.resolve(), root.resolve()
    relative = target.relative_to(base) if target.is_relative_to(base) else Path(target.name)
    return quote(relative.as_posix())
