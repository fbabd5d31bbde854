"""What the commands do to a capture database as a whole: import into it, read any capture as
one, audit it, list its call ledger. Each is one call for the CLI."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from convtap.contract.audit import AuditResult
from convtap.ingest import findings
from convtap.ingest.readers import DATABASES, CaptureError, TruncatedFile, import_file
from convtap.journal.segments import (
    JournalError,
    check_free,
    committed_positions,
    journal_dir,
    unconsumed,
)
from convtap.record.local import LocalRecorder
from convtap.store.database import (
    StoreError,
    call_ledger,
    close,
    connect,
    count_calls,
    findings_behind,
    flow_ids,
    journal_position,
    mark_findings_behind,
    open_readonly,
    reader_beside,
    remove_if_empty,
    writable,
)
from convtap.store.views import LedgerRow


@dataclass
class FileImport:
    """What importing one file did: flows imported and already there, and why it failed (a
    file cut short has both: the flows before the cut are imported)."""

    path: Path
    imported: int = 0
    skipped: int = 0
    error: str | None = None


def import_into(
    db: Path,
    paths: list[Path],
    *,
    redact: bool = True,
    progress: Callable[[int], None] | None = None,
) -> list[FileImport]:
    """Import files into `db`, each flow committed on its own; then the findings made from the
    whole capture (`ingest.findings`: what an import added may answer, or be answered by, what
    was there). A new database into which nothing could be imported is removed again."""
    new = not db.exists()
    missing = [f for f in (db.parent, *db.parent.parents) if not f.exists()]  # made for it
    local = LocalRecorder(str(db), redact=redact, audit=False)
    results: list[FileImport] = []
    try:
        seen = flow_ids(local.writer.db)
        behind = findings_behind(local.writer.db)  # an import before this one was stopped
        mark_findings_behind(local.writer.db)  # until this one has made them: if it is stopped
        results = _import_files(paths, local, seen, progress)
        local.writer.flush()
        if behind or any(r.imported for r in results):
            reader = reader_beside(local.writer)
            try:
                findings.rebuild(local.writer.db, reader)
            finally:
                reader.conn.close()
        else:
            mark_findings_behind(local.writer.db, behind=False)
    finally:
        local.close()
    if new and not any(r.imported for r in results) and _remove_if_untouched(db):
        for folder in missing:  # the deepest first; one another process uses stays
            try:
                folder.rmdir()
            except OSError:
                break
    return results


def _import_files(
    paths: list[Path],
    local: LocalRecorder,
    seen: set[str],
    progress: Callable[[int], None] | None,
) -> list[FileImport]:
    results: list[FileImport] = []
    for path in paths:
        try:
            imported, skipped = import_file(path, local, seen, progress)
        except TruncatedFile as exc:  # what was before the cut is imported
            results.append(FileImport(path, exc.imported, exc.skipped, error=str(exc)))
        except (CaptureError, StoreError) as exc:
            results.append(FileImport(path, error=str(exc)))
        except OSError as exc:  # a sidecar or a leg that is a folder, or unreadable
            why = f"cannot read {exc.filename or path}: {exc.strerror or exc}"
            results.append(FileImport(path, error=why))
        else:
            results.append(FileImport(path, imported, skipped))
    return results


def _remove_if_untouched(db: Path) -> bool:
    """A new capture this import had nothing to put in goes again, unless someone else wrote
    into it meanwhile (another import's flows, or a recording, which holds the journal); True
    when it went."""
    try:
        check_free(journal_dir(db))
    except JournalError:
        return False  # a recording into it is under way
    return remove_if_empty(db)


@contextmanager
def as_database(path: Path) -> Iterator[Path]:
    """A capture as a database: a database as it is, anything else imported into a temporary
    one for the duration."""
    if path.suffix in DATABASES:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="convtap-") as tmp:
        db = Path(tmp) / "capture.db"
        failed = [r.error for r in import_into(db, [path]) if r.error]
        if failed:
            raise CaptureError(failed[0])
        yield db


def audit_capture(path: Path, rules: set[str] | None = None) -> AuditResult:
    """Audit a capture from scratch; its findings table is replaced by what this finds (unless
    the file is read-only: then nothing in it changes, and the result says so)."""
    stored = writable(path)
    db = connect(path, create=False) if stored else open_readonly(path)
    try:
        found, answers = findings.from_content(db)
        if stored:
            findings.store(db, found)
        calls = count_calls(db)
    finally:
        close(db)
    if rules is not None:
        found = [f for f in found if f.rule in rules]
    return AuditResult(calls, answers, found, stored)


@dataclass
class Unrecorded:
    """Traffic journaled beside a capture that is not in it yet."""

    bytes: int
    recording: bool  # a recording holds the journal (it is catching up), else it stopped


def unrecorded(path: Path) -> Unrecorded | None:
    """What the journal beside a capture holds beyond what its recorder committed, if any.
    Changes nothing (the capture is read read-only; the journal's lock is only tried)."""
    directory = journal_dir(path)
    if not directory.is_dir():
        return None
    db = open_readonly(path)
    try:
        committed, _ = committed_positions(directory, journal_position(db))
    finally:
        db.conn.close()
    left = unconsumed(directory, committed)
    if left == 0:
        return None
    try:
        check_free(directory)
    except JournalError:
        return Unrecorded(left, recording=True)
    return Unrecorded(left, recording=False)


def ledger(path: Path) -> list[LedgerRow]:
    """The call ledger: one row per call, with its return and what became of it."""
    db = open_readonly(path)
    try:
        return call_ledger(db)
    finally:
        db.conn.close()
