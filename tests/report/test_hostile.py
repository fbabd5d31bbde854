"""A capture made by a hostile server and client: every value the page shows (ids, tool names,
roles, recipients, models, user agents, message text) carries markup, quotes, script and
control characters. The page shows them as text, and nothing in them runs, adds an element or
an attribute, or forges a finding."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from convtap.ingest.capture import import_into

from tests.report.test_browser import Chromium, chromium
from tests.report.test_report import RULES, Page, rows
from tests.runner import convtap

# The values in the example sessions that the server or the client chose, each made hostile.
CHOSEN = ("6a1c3b2e-0d4f-4c1a-9a55-2f1b7c9e8d10", "b6d6e3a6-af6f-4a78-a649-8e3935182fcc",
          "alefita_way", "gpt-5-6-thinking", "fixture-client/1.0", "commentary",
          "use o alefita way", "get_weather", "call_Qx7RkP2m", "fc_68a1b2c3", "gpt-5.1",
          "call_S1kq9Wz", "resp_68a1c0ffee")  # fmt: skip


def hostile(n: int) -> str:
    return (f"\"><svg onload=window.__pwned={n}>' onmouseover='window.__pwned={n}' x=\""
            f"</textarea></pre>]]></script><img src=x onerror=window.__pwned={n}>&lt;"
            f"\u2028\u2029javascript:alert({n})")  # fmt: skip


def json_inside(value: str) -> str:
    """`value` as it is written inside a JSON string."""
    return json.dumps(value)[1:-1]


def hostile_capture(folder: Path, role: str = "assistant finding sev-error") -> Path:
    """The example sessions with every chosen value hostile, and the assistant's role `role`;
    audited (its findings stored)."""
    hars = []
    for name in ("return-recipient", "responses-output-call-id"):
        har = json.loads((RULES / name / "fail.har").read_text())
        for entry in har["log"]["entries"]:
            for header in entry["request"]["headers"]:
                header["value"] = header["value"].replace(CHOSEN[4], hostile(4))
            for body in (entry["request"].get("postData") or {}, entry["response"]["content"]):
                text = body.get("text") or ""
                for n, chosen in enumerate(CHOSEN):
                    text = text.replace(chosen, json_inside(hostile(n)))
                body["text"] = text.replace('"role": "assistant"', f'"role": "{role}"')
        hars.append(folder / f"{name}.har")
        hars[-1].write_text(json.dumps(har))
    db = folder / "capture.db"
    assert not any(r.error for r in import_into(db, hars))
    assert convtap("audit", "--db", str(db)).returncode == 1
    return db


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile_capture(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def report(capture: Path) -> Path:
    ran = convtap("report", "--db", str(capture))
    assert ran.returncode == 0, ran.stderr
    return Path(ran.stdout.strip())


@pytest.fixture(scope="module")
def page(report: Path) -> str:
    return report.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    with Chromium(chromium()) as opened:
        yield opened


def test_hostile_values_are_text_and_no_finding_is_forged(capture: Path, page: str) -> None:
    parsed = Page(page)
    assert parsed.scripts == 1
    assert all(link.startswith("#") or link == "data:," for link in parsed.links)
    shown = "".join(parsed.text)
    for n in range(len(CHOSEN)):
        assert hostile(n) in shown, n
    findings = sorted(rule for (rule,) in rows(capture, "SELECT rule FROM findings"))
    assert sorted(parsed.finding_rules) == findings  # a role styled as a finding is none
    assert 'class="item msg role-assistant-finding-sev-error"' in page


INJECTED = """[...document.querySelectorAll('*')].filter((el) => el.matches('img, textarea, iframe')
    || [...el.attributes].some((a) => a.name.startsWith('on'))).length"""


def test_nothing_hostile_runs_in_a_browser(browser: Chromium, capture: Path, report: Path) -> None:
    browser.open(report.as_uri())
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.scripts.length") == 1
    assert browser.evaluate(INJECTED) == 0
    findings = rows(capture, "SELECT count(*) FROM findings")[0][0]
    assert browser.evaluate("document.querySelectorAll('.finding').length") == findings
    assert browser.requests[-1:] == [report.as_uri()]
