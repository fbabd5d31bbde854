"""`convtap shapes` and shapes files: written stable, diffed on either side, refreshed with
--update, refused in one line when bad, never changed when only read."""

from __future__ import annotations

import json
from pathlib import Path

from tests.diff.sessions import CALENDAR, WEATHER, responses_session
from tests.runner import convtap

ROOT = Path(__file__).resolve().parents[2]
OLDER = ROOT / "captures" / "examples" / "diff" / "older.har"
NEWER = ROOT / "captures" / "examples" / "diff" / "newer.har"


def test_a_baseline_is_stable_and_diffs_as_its_capture_on_either_side(tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    assert convtap("shapes", str(OLDER), "--output", str(base)).returncode == 0
    first = base.read_bytes()
    assert convtap("shapes", str(OLDER), "--output", str(base)).returncode == 0
    assert base.read_bytes() == first  # byte for byte
    data = json.loads(first)
    assert data["convtap_shapes"] == 1 and first.endswith(b"}\n")
    assert b"use o alefita way" not in first and b"segundo eco" not in first
    direct = convtap("diff", "--format", "json", str(OLDER), str(NEWER))
    left = convtap("diff", "--format", "json", str(base), str(NEWER))
    assert left.returncode == direct.returncode == 1
    assert json.loads(left.stdout)["changes"] == json.loads(direct.stdout)["changes"]
    newer = tmp_path / "newer.json"
    convtap("shapes", str(NEWER), "--output", str(newer))
    right = convtap("diff", "--format", "json", str(OLDER), str(newer))
    assert json.loads(right.stdout)["changes"] == json.loads(direct.stdout)["changes"]
    assert convtap("diff", str(base), str(OLDER)).returncode == 0
    assert base.read_bytes() == first  # read, never changed


def test_github_annotations_for_ci(tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    convtap("shapes", str(OLDER), "--output", str(base))
    ran = convtap("diff", str(base), str(NEWER), "--fail-on", "breaking", "--format", "github")
    assert ran.returncode == 1
    assert "::error title=convtap diff op-added::delta:merge: new: in 1 of B" in ran.stdout
    assert all(line.startswith(("::error", "::warning", "::notice")) for line in
               ran.stdout.splitlines())  # fmt: skip


def test_update_refreshes_or_widens_a_baseline(tmp_path: Path) -> None:
    weather, calendar = tmp_path / "weather.har", tmp_path / "calendar.har"
    weather.write_text(json.dumps(responses_session(WEATHER)))
    calendar.write_text(json.dumps(responses_session(CALENDAR, drop_tools=True)))
    base = tmp_path / "baseline.json"
    convtap("shapes", str(weather), "--output", str(base))
    ran = convtap("shapes", "--update", str(base), str(calendar))
    assert ran.returncode == 0 and "1 breaking" in ran.stderr
    assert convtap("diff", str(base), str(calendar), "--fail-on", "any").returncode == 0
    widened = convtap("shapes", "--update", str(base), str(base), str(weather))
    assert widened.returncode == 0
    counts = json.loads(base.read_text())["kinds"]["request:responses"]["count"]
    assert counts == 4  # two requests of each


def test_bad_shapes_files_are_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"contexts": {}, "convtap_shapes": 1, "kinds": {"x": {"count": "many"}}}')
    before = bad.read_bytes()
    for args in (["diff", str(bad), str(OLDER)], ["diff", str(OLDER), str(bad)],
                 ["shapes", str(bad), "--output", str(tmp_path / "out.json")]):  # fmt: skip
        ran = convtap(*args)
        assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1, args
        assert "not a readable shapes file" in ran.stderr
    assert bad.read_bytes() == before and not (tmp_path / "out.json").exists()
    deep = tmp_path / "deep.json"
    deep.write_text('{"contexts": {}, "convtap_shapes": 1, "x": ' + "[" * 5000 + "]" * 5000 + "}")
    ran = convtap("diff", str(deep), str(OLDER))
    assert ran.returncode == 2 and "nested deeper than" in ran.stderr
    future = tmp_path / "future.json"
    future.write_text('{"contexts": {}, "convtap_shapes": 99, "kinds": {}}')
    assert "format version 99" in convtap("diff", str(future), str(OLDER)).stderr
    har = tmp_path / "capture.har"
    har.write_text(OLDER.read_text())
    ran = convtap("shapes", "--update", str(har), str(OLDER))
    assert ran.returncode == 2 and "not a shapes file" in ran.stderr
    assert har.read_text() == OLDER.read_text()
    assert convtap("shapes").returncode == 2
    both = convtap("shapes", str(OLDER), "--output", "x.json", "--update", str(har))
    assert both.returncode == 2
    assert convtap("shapes", str(OLDER), "--output", str(tmp_path)).returncode == 2
