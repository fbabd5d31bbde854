"""The report's pictures of the demo capture: a bar per request with its times, a bar per
Responses answer with its tokens, calls and findings over time; bounded for big captures."""

from __future__ import annotations

import json
import re
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from convtap.report import charts as charts_module
from convtap.report.charts import Request, Usage, event_usage, groups
from convtap.report.svg import number
from convtap.store.database import open_readonly

from tests.report.test_report import rows
from tests.report.test_svg import SVG, bars_of, parse
from tests.runner import convtap


@pytest.fixture
def demo(demo_capture: Path) -> Path:
    return demo_capture


def chart(html: str, chart_id: str) -> ET.Element:
    found = re.search(rf'<svg id="{chart_id}".*?</svg>', html, re.S)
    assert found, f"no {chart_id} in the page"
    return parse(found.group(0))


def titles(svg: ET.Element) -> list[str]:
    return [g.find(f"{SVG}title").text or "" for g in bars_of(svg)]  # type: ignore[union-attr]


def page_of(db: Path) -> str:
    ran = convtap("report", "--db", str(db), "--output", str(db.with_suffix(".html")))
    assert ran.returncode == 0, ran.stderr
    return db.with_suffix(".html").read_text()


def test_latency_a_bar_per_request_with_its_times(demo: Path) -> None:
    expected = rows(
        demo,
        """SELECT started_at, ended_at,
        (SELECT min(at) FROM events WHERE flow_id = r.id) FROM (
        SELECT id, started_at, ended_at FROM turns UNION ALL
        SELECT id, started_at, ended_at FROM flows WHERE kind = 'responses') r
        ORDER BY started_at, id""",
    )
    said = titles(chart(page_of(demo), "chart-latency"))
    assert len(said) == len(expected) == 8
    for title, (start, end, first) in zip(said, expected, strict=True):
        assert f"first event {number((first - start) * 1000)} ms" in title, title
        assert f"total {number((end - start) * 1000)} ms" in title, title
    assert sum("(f/conversation," in t for t in said) == 4
    assert sum("(responses," in t for t in said) == 4


def test_tokens_a_bar_per_responses_answer_with_its_usage(demo: Path) -> None:
    usages = []
    for (data,) in rows(
        demo,
        """SELECT convtap_event(data, raw) AS d FROM events e JOIN flows f ON f.id = e.flow_id
            WHERE f.kind = 'responses' AND d LIKE '%response.completed%'
            ORDER BY f.started_at""",
    ):
        usage = json.loads(data.split("data: ", 1)[1])["response"]["usage"]
        usages.append(usage)
    said = titles(chart(page_of(demo), "chart-tokens"))
    assert len(said) == len(usages) == 4
    for title, usage in zip(said, usages, strict=True):
        cached = usage["input_tokens_details"]["cached_tokens"]
        reasoning = usage["output_tokens_details"]["reasoning_tokens"]
        assert (f"{usage['input_tokens']} input tokens ({cached} cached), "
                f"{usage['output_tokens']} output ({reasoning} reasoning)") in title  # fmt: skip


def test_activity_counts_every_call_and_finding(demo: Path) -> None:
    said = titles(chart(page_of(demo), "chart-activity"))
    counted = [re.search(r"(\d+) calls?, (\d+) findings?", t) for t in said]
    assert all(counted)
    calls = sum(int(m.group(1)) for m in counted if m)
    findings = sum(int(m.group(2)) for m in counted if m)
    assert calls == rows(demo, "SELECT count(*) FROM tool_calls")[0][0] == 6
    assert findings == rows(demo, "SELECT count(*) FROM findings")[0][0] > 0


def test_many_requests_share_bars(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(charts_module, "MAX_BARS", 3)
    capture = open_readonly(demo)
    try:
        html = str(charts_module.charts(capture))
    finally:
        capture.conn.close()
    said = titles(chart(html, "chart-latency"))
    assert [t.split(" (")[0] for t in said] == ["requests 1–3", "requests 4–6", "requests 7–8"]
    assert all("mean first event" in t and "longest" in t for t in said)
    tokens = titles(chart(html, "chart-tokens"))  # requests 5 to 8 answered with a usage
    assert [t.split(" (")[0] for t in tokens] == ["requests 4–6", "requests 7–8"]
    assert "80 input tokens" in tokens[0] and "80 input tokens" in tokens[1]
    assert len(bars_of(chart(html, "chart-activity"))) == 1  # MAX_BARS // 2 buckets at most
    assert "Each bar is 3 consecutive requests" in html


def test_an_empty_capture_says_there_is_nothing_to_draw(tmp_path: Path) -> None:
    from convtap.store.database import connect

    connect(tmp_path / "empty.db").close()
    html = page_of(tmp_path / "empty.db")
    assert "<svg" not in html.split('<section id="charts">')[1].split("</section>")[0]
    assert "No request recorded yet." in html


def test_groups_hold_at_most_the_bound() -> None:
    def made(n: int) -> list[Request]:
        return [Request(i, "responses", 0.0, 1.0, None, None) for i in range(1, n + 1)]

    for count, most in [(0, 5), (3, 5), (5, 5), (6, 5), (1000, 120), (1001, 120)]:
        runs = list(groups(iter(made(count)), count, most))
        assert len(runs) <= most and sum(len(r) for r in runs) == count
        assert [r.number for run in runs for r in run] == list(range(1, count + 1))


def test_usage_from_an_event_and_what_is_no_usage() -> None:
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
             "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 5}}  # fmt: skip
    event = "event: response.completed\ndata: " + json.dumps({"response": {"usage": usage}})
    assert event_usage(event) == Usage(10, 4, 7, 5)
    chunk = f'data: {{"type": "response.output_text.done"}}\n\n{event}\n\ndata: {{"v": 1}}\n\n'
    assert event_usage(chunk) == Usage(10, 4, 7, 5)  # a row holds one chunk's events
    assert event_usage('data: {"response": {"usage": null}}') is None
    assert event_usage("data: not json") is None and event_usage(None) is None
    assert Usage.of({"input_tokens": "10", "output_tokens": True, "output_tokens_details": 3}) == (
        Usage()
    )


def test_cost_a_bar_per_answer_and_the_capture_in_words(demo: Path) -> None:
    """Each Responses answer's cost (US cents) as genai-prices priced it when recorded, and the
    capture's sum and cache-hit ratio in the caption."""
    stored = rows(demo, "SELECT cost_usd, model FROM usage ORDER BY answered_at, flow_id")
    html = page_of(demo)
    bars = bars_of(chart(html, "chart-cost"))
    said = titles(chart(html, "chart-cost"))
    assert len(said) == len(stored) == 4
    for title, (cost, model) in zip(said, stored, strict=True):
        assert cost > 0 and model in title
        assert f"${cost:,.6f}".rstrip("0") in title, title
    assert len(bars) == len(stored)
    total = sum(cost for cost, _ in stored)
    caption = charts_module.cost_words(open_readonly(demo))
    assert caption is not None and f"${total:,.6f}".rstrip("0") in caption
    assert caption in html and "the prompt cache gave 0% of" in caption


def test_an_unpriced_answer_makes_the_sum_unknown(demo: Path, tmp_path: Path) -> None:
    db = tmp_path / "unpriced.db"
    db.write_bytes(demo.read_bytes())
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE usage SET cost_usd = NULL, pricing = 'unknown: test' "
                     "WHERE rowid = (SELECT min(rowid) FROM usage)")  # fmt: skip
    said = titles(chart(page_of(db), "chart-cost"))
    assert sum("unknown (1 of 1 unpriced: unknown: test)" in t for t in said) == 1
    caption = charts_module.cost_words(open_readonly(db))
    assert caption is not None and "cost unknown (1 of 4 answers unpriced" in caption


def test_tokens_of_websocket_mode_turns_come_from_the_recorded_usage(tmp_path: Path) -> None:
    """A WebSocket-mode turn's answer is stored without its usage and its events are frames: its
    bar is the usage the recorder took from it (the `usage` table)."""
    from tests.record.test_responses_socket import TOOLS, Socket, calls_of

    db = tmp_path / "socket.db"
    socket = Socket(db)
    first = socket.turn({"model": "gpt-5.1", "tools": TOOLS, "input": "weather?"})
    (call,) = calls_of(first)
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"}
    second = socket.turn(
        {"model": "gpt-5.1", "previous_response_id": first["id"], "input": [output]}
    )
    socket.close()
    said = titles(chart(page_of(db), "chart-tokens"))
    assert len(said) == 2
    for title, response in zip(said, (first, second), strict=True):
        usage = response["usage"]
        cached = usage["input_tokens_details"]["cached_tokens"]
        reasoning = usage["output_tokens_details"]["reasoning_tokens"]
        assert (f"{usage['input_tokens']} input tokens ({cached} cached), "
                f"{usage['output_tokens']} output ({reasoning} reasoning)") in title  # fmt: skip
