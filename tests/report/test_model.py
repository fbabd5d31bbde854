"""The live page's data: the same steps as the report's, and a reading that reads and sends only
what changed (counted), however many steps the capture holds."""

from __future__ import annotations

import base64
import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

from convtap.ingest.capture import import_into
from convtap.report.model import HISTORY, LiveModel
from convtap.report.page import write_report
from convtap.report.parts import FIXED, SUMMARY, LiveCapture, LivePage

from tests.report.test_report import RULES, Page, build_capture, fresh_ids
from tests.runner import convtap


def another_session(folder: Path) -> Path:
    """The example session with ids of its own: a conversation of its own, its own turns."""
    (folder / "another.har").write_text(
        fresh_ids((RULES / "return-recipient" / "pass.har").read_text())
    )
    return folder / "another.har"


def data_steps(live: LivePage) -> list[dict[str, Any]]:
    """The steps the live page fetches (its data: gzip blocks, base64, one a line)."""
    _, blocks = live.data()
    assert all(b.endswith("\n") and b.count("\n") == 1 for b in blocks)  # one a line
    return [s for b in blocks for s in json.loads(gzip.decompress(base64.b64decode(b)))]


def steps_of(message: str) -> list[tuple[str, str]]:
    return [(s["c"], s["s"]) for s in json.loads(message)["steps"]]


def test_the_live_page_holds_the_reports_steps_and_parts(tmp_path: Path) -> None:
    db = build_capture(tmp_path, "parts")
    capture = LiveCapture(db)
    live = LivePage(db, "/token/")
    live.read_whole(capture.capture)
    parts = live.parts(capture.capture)
    whole = live.whole(capture.capture, parts)
    static = write_report(db, tmp_path / "report.html").read_text()
    strip = [{k: v for k, v in s.items() if k != "v"} for s in data_steps(live)]
    assert strip == Page(static).steps and len(strip) == 4
    assert {s["v"] for s in data_steps(live)} == {1}  # each step names the reading it is of
    assert live.data()[0] == 1  # the reading the data is of
    for name in FIXED:  # the same summary and pictures in the live page and the static one
        assert parts.html[name].strip() in whole and parts.html[name].strip() in static
    assert 'data-events="/token/events"' in whole and "data-events" not in static
    assert f'data-parts="{parts.tag}"' in whole
    # The live page is a shell: no step in it, its data fetched from the server.
    assert Page(whole).blocks == [] and 'data-src="/token/data"' in whole
    assert "data-src=" not in static and Page(static).blocks
    capture.close()


def test_a_reading_sends_only_the_steps_that_changed(tmp_path: Path) -> None:
    db = build_capture(tmp_path, "parts")
    capture = LiveCapture(db)
    live = LivePage(db, "/token/")
    live.read_whole(capture.capture)
    first = live.parts(capture.capture)
    seen = dict(first.digests)
    assert live.update(1, seen, first) is None  # a page of the latest reading is sent nothing
    before = {(s["c"], s["s"]): s for s in data_steps(live)}

    assert not any(r.error for r in import_into(db, [another_session(tmp_path)]))
    assert capture.changed()
    reading = live.read(capture.capture, reopened=capture.reopened())
    after = {(s["c"], s["s"]) for s in data_steps(live)}
    assert reading.changed == after - set(before) and len(reading.changed) == 2  # its turns
    second = live.parts(capture.capture)
    message = live.update(1, seen, second)
    assert message is not None and message[0] == "update"
    assert sorted(steps_of(message[1])) == sorted(reading.changed)  # nothing else is sent
    assert [name for name, _ in json.loads(message[1])["parts"]] == [SUMMARY, "charts"]
    assert live.update(reading.version, seen, second) is None

    # An update in place (a flow ended later): the one step that shows it, and nothing else.
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE flows SET status = 599 WHERE id = ?", [sorted(reading.changed)[0][1]])
    conn.close()
    assert capture.changed()
    again = live.read(capture.capture, reopened=capture.reopened())
    assert again.changed == {sorted(reading.changed)[0]} and not again.gone
    message = live.update(reading.version, seen, second)
    assert message is not None and len(steps_of(message[1])) == 1
    assert '"status":599' in message[1]
    capture.close()


def test_a_page_far_behind_is_told_to_reload(tmp_path: Path) -> None:
    db = build_capture(tmp_path, "parts")
    model = LiveModel()
    capture = LiveCapture(db)
    model.whole(capture.capture)
    assert model.since(0) == (set(model.where), set())  # from nothing: every step
    assert model.since(model.version) == (set(), set())
    model.version += HISTORY + 1  # readings past what is remembered
    assert model.since(1) is None
    capture.close()


def test_findings_rewritten_by_an_audit_are_read_again(tmp_path: Path) -> None:
    db = build_capture(tmp_path, "audit")
    capture = LiveCapture(db)
    live = LivePage(db, "/token/")
    live.read_whole(capture.capture)
    conn = sqlite3.connect(db)
    with conn:  # the findings of one step gone, the others written again as they were
        conn.execute("DELETE FROM findings WHERE rule = 'return-recipient'")
    conn.close()
    assert capture.changed()
    reading = live.read(capture.capture, reopened=capture.reopened())
    assert len(reading.changed) == 1 and not reading.gone  # the step that showed them
    assert convtap("audit", "--db", str(db)).returncode == 1  # all of them written again
    assert capture.changed()
    reading = live.read(capture.capture, reopened=capture.reopened())
    assert len(reading.changed) == 1  # the same step: the others' findings are as they were
    capture.close()
