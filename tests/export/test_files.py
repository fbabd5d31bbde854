"""`--output` writes into what the user named: a FIFO is written into and stays a FIFO, a
symlink stays a link and its target is replaced, a directory or a device node is refused in one
line and left as it was. (Each was replaced by a renamed temporary file.)"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from tests.runner import convtap

ROOT = Path(__file__).resolve().parents[2]
HAR = ROOT / "captures" / "examples" / "rules" / "handoff-missing" / "fail.har"


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("capture") / "capture.db"
    assert convtap("import", str(HAR), "--db", str(db)).returncode == 0
    return db


def command(name: str, db: Path, output: Path) -> list[str]:
    return [name, "--db", str(db), "--output", str(output)]


@pytest.mark.parametrize("name", ["export", "report"])
def test_a_fifo_is_written_into(name: str, capture: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    ran = convtap(*command(name, capture, fifo))
    reader.join(30)
    assert ran.returncode == 0, ran.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got and got[0].lstrip().startswith(b"{" if name == "export" else b"<!doctype html>")


@pytest.mark.parametrize("name", ["export", "report"])
def test_a_symlink_stays_and_its_target_is_replaced(
    name: str, capture: Path, tmp_path: Path
) -> None:
    target = tmp_path / "real.out"
    target.write_text("old")
    link = tmp_path / "link.out"
    link.symlink_to(target)
    ran = convtap(*command(name, capture, link))
    assert ran.returncode == 0, ran.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() != "old" and target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.out", "real.out"]


@pytest.mark.parametrize("name", ["export", "report"])
@pytest.mark.parametrize("where", ["directory", "/dev/null"])
def test_a_directory_or_a_device_is_refused_in_one_line(
    name: str, where: str, capture: Path, tmp_path: Path
) -> None:
    output = tmp_path if where == "directory" else Path(where)
    before = os.stat(output)
    ran = convtap(*command(name, capture, output))
    assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert "Traceback" not in ran.stderr
    after = os.stat(output)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    if where == "directory":
        assert list(tmp_path.iterdir()) == []
