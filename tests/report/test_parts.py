"""The live page's parts: rendered from the report's template, told apart by digest, and sent to
a page as what differs from what it shows (the latest, however many readings it missed)."""

from __future__ import annotations

import json
from pathlib import Path

from convtap.ingest.capture import import_into
from convtap.report.page import write_report
from convtap.report.parts import FIXED, SUMMARY, LiveCapture, LivePage, Seen

from tests.report.test_report import RULES, build_capture


def test_each_part_is_the_page_s_own_html(tmp_path: Path) -> None:
    db = build_capture(tmp_path, "parts")
    capture = LiveCapture(db)
    live = LivePage(db, "/token/events")
    whole = live.whole(capture.capture, 0)
    parts = live.parts(capture.capture, 0)
    assert len(parts.order) == 2 and set(parts.html) == {*FIXED, *parts.order}
    static = write_report(db, tmp_path / "report.html").read_text()
    for html in parts.html.values():  # the same bytes in the live page and the static one
        assert html.strip() in whole and html.strip() in static
    assert 'data-events="/token/events?v=0"' in whole and "data-events" not in static
    capture.close()


def test_a_page_is_sent_what_changed_since_what_it_shows(tmp_path: Path) -> None:
    db = build_capture(tmp_path, "parts")
    capture = LiveCapture(db)
    live = LivePage(db, "/token/events")
    first = live.parts(capture.capture, 0)
    assert not capture.changed()
    assert first.update(first.seen()) is None  # a page rendered from it shows it all
    everything = json.loads(first.update(Seen()) or "")
    assert [key for key, _ in everything["parts"]] == [*FIXED, *first.order]

    shown = first.seen()
    results = import_into(db, [RULES / "return-recipient" / "pass.har"])  # another process writes
    assert not any(r.error for r in results)
    assert capture.changed()  # immutable when opened: opened again
    second = live.parts(capture.capture, 1)
    third = live.parts(capture.capture, 2)  # a page that missed a reading gets the latest
    message = json.loads(third.update(shown) or "")
    sent = [key for key, _ in message["parts"]]
    changed = {key for key, html in third.html.items() if first.html.get(key) != html}
    assert set(sent) == changed and SUMMARY in changed and changed != set(third.html)
    assert message["order"] == (None if third.order == first.order else list(third.order))
    assert third.update(shown) is None and second.update(shown) is None
    capture.close()
