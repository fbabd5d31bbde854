"""A capture convtap did not leave as it is (edited by hand, damaged) is refused by every command
in one line naming the table, column and row, exit 2, with nothing changed and nothing left
behind: every command opens a capture through the store, which checks it first
(`store.check`). A generator of damage (any table dropped, any column of a row made NULL or of
another type, a header list of another shape) shows the check catches each; each command is run
on the damages the issue found and on a sample of the rest."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from convtap.store.check import REQUIRED
from convtap.store.database import DamagedCapture, open_readonly
from convtap.store.schema import TABLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.runner import convtap

RULES = Path(__file__).resolve().parents[2] / "captures" / "examples" / "rules"


@dataclass(frozen=True)
class Damage:
    name: str
    sql: str
    table: str
    column: str | None = None
    refused: bool = True  # False: a NULL where convtap may leave one (the capture is as it was)
    named: str = ""  # what the refusal names: the table's column and row, unless said here

    @property
    def said(self) -> str:
        return self.named or (f"{self.table}.{self.column} of row " if self.column else self.table)


def one_row(table: str, column: str) -> str:
    """A row whose value in `column` is not NULL (the first row, if there is none)."""
    return (f'coalesce((SELECT min(rowid) FROM "{table}" WHERE "{column}" IS NOT NULL), '
            f'(SELECT min(rowid) FROM "{table}"))')  # fmt: skip


def damages() -> Iterator[Damage]:
    for table in TABLES:
        yield Damage(f"drop table {table}", f'DROP TABLE "{table}"', table)
    yield Damage("drop view call_ledger", "DROP VIEW call_ledger", "call_ledger")
    for table, (columns, key) in TABLES.items():
        for column, kind in columns.items():
            if column == key and kind is int:
                continue  # the rowid itself: SQLite holds it an integer, never NULL
            row = one_row(table, column)
            # An event's text is NULL where `raw` holds its bytes, and the other way round: one
            # of the two made NULL too leaves the event nothing (whichever the check names).
            held = (table, column) in (("events", "data"), ("events", "raw"))
            required = column in REQUIRED[table] or held
            yield Damage(f"{table}.{column} = NULL", f'UPDATE "{table}" SET "{column}" = NULL '
                         f"WHERE rowid = {row}", table, column, refused=required,
                         named="events." if held else "")  # fmt: skip
            # (a TEXT column takes a number as its text: bytes are what it cannot hold)
            wrong = {str: "x'ff'", int: "'yesterday'", float: "'yesterday'", bytes: "'text'"}[kind]
            yield Damage(f"{table}.{column} = {wrong}", f'UPDATE "{table}" SET "{column}" = '
                         f"{wrong} WHERE rowid = {row}", table, column)  # fmt: skip
    for column in ("request_headers", "response_headers"):
        for shape in ('{"a": 1}', '[["a", "b", "c"]]', "[[1, 2]]", "[not json"):
            yield Damage(f"flows.{column} = {shape}", f"UPDATE flows SET {column} = '{shape}' "
                         f"WHERE rowid = {one_row('flows', column)}", "flows", column)  # fmt: skip


DAMAGES = list(damages())
# What the issue found giving tracebacks, through the commands it named and every other.
FOUND = [
    d
    for d in DAMAGES
    if d.name
    in (
        "drop table messages",
        "flows.started_at = 'yesterday'",
        'flows.request_headers = {"a": 1}',
        "tool_calls.call_id = NULL",
        "events.at = 'yesterday'",
    )
]
COMMANDS = ["calls", "audit", "report", "export", "reprocess", "import", "diff", "shapes"]


def with_usage(folder: Path) -> Path:
    """A Responses API session whose answer reports its usage (a `usage` row)."""
    har = json.loads((RULES / "responses-output-call-id" / "pass.har").read_text())
    content = har["log"]["entries"][0]["response"]["content"]
    usage = {"input_tokens": 200, "input_tokens_details": {"cached_tokens": 150},
             "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 5}}  # fmt: skip
    content["text"] = content["text"].replace(
        '"status": "completed", "output"',
        f'"status": "completed", "model": "gpt-5.1", "usage": {json.dumps(usage)}, "output"',
    )
    path = folder / "usage.har"
    path.write_text(json.dumps(har))
    return path


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both protocols' examples, every rule's failing one, audited: a row in every table."""
    folder = tmp_path_factory.mktemp("capture")
    db = folder / "capture.db"
    hars = [*sorted(RULES.glob("*/fail.har")), with_usage(folder)]
    assert convtap("import", *map(str, hars), "--db", str(db)).returncode == 0
    with closing(sqlite3.connect(db)) as conn:
        empty = [t for t in TABLES if not conn.execute(f'SELECT 1 FROM "{t}"').fetchone()]
    assert empty == []
    return db


def damaged(capture: Path, damage: Damage, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "damaged.db"
    shutil.copy(capture, db)
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(damage.sql)
        conn.commit()
    return db


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.name)
def test_every_damage_is_named(capture: Path, tmp_path: Path, damage: Damage) -> None:
    db = damaged(capture, damage, tmp_path)
    if not damage.refused:
        open_readonly(db).conn.close()  # a NULL convtap may leave itself
        return
    with pytest.raises(DamagedCapture) as refused:
        open_readonly(db)
    said = str(refused.value)
    assert said.startswith(f"{db} is not as convtap left it: ") and "\n" not in said
    assert damage.said in said


def run(command: str, db: Path, folder: Path) -> tuple[int, str]:
    args = {
        "report": ["report", "--db", str(db), "--output", str(folder / "report.html")],
        "export": ["export", "--db", str(db), "--output", str(folder / "export.har")],
        "import": ["import", str(db), "--db", str(folder / "merged.db")],
        "diff": ["diff", "--against-schemas", str(db)],
        "shapes": ["shapes", str(db)],
    }.get(command, [command, "--db", str(db)])
    ran = convtap(*args)  # an exception escaping it fails the test: a traceback is a bug
    return ran.returncode, ran.stderr


def files(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def assert_refused_or_read(
    capture: Path, damage: Damage, command: str, folder: Path
) -> tuple[int, str]:
    db = damaged(capture, damage, folder)
    before = files(folder)
    code, said = run(command, db, folder)
    if not damage.refused:
        assert code in (0, 1), said  # read as it is (audit: 1 for its findings)
        return code, said
    assert code == 2, said
    (line,) = said.splitlines()
    assert line.startswith(f"convtap: {db} is not as convtap left it: ") and damage.said in line
    assert files(folder) == before  # nothing changed, nothing left behind
    return code, said


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("damage", FOUND, ids=lambda d: d.name)
def test_every_command_refuses_a_damaged_capture_in_one_line(
    capture: Path, tmp_path: Path, damage: Damage, command: str
) -> None:
    assert_refused_or_read(capture, damage, command, tmp_path)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(DAMAGES), st.sampled_from(COMMANDS), st.integers(0, 10**9))
def test_any_damage_through_any_command(
    capture: Path, tmp_path: Path, damage: Damage, command: str, case: int
) -> None:
    assert_refused_or_read(capture, damage, command, tmp_path / str(case))
