"""A capture made by a hostile server and client: every value the page shows (ids, tool names,
roles, recipients, models, user agents, message text) carries markup, quotes, script and
control characters. The page shows them as text, and nothing in them runs, adds an element or
an attribute, or forges a finding."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from convtap.ingest.capture import import_into
from convtap.report.page import SCRIPTS

from tests.report.test_browser import SCRIPTS_THAT_RUN, Chromium, chromium, every_row
from tests.report.test_live import DIRECT, open_live, serving, wait_page
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
    assert parsed.scripts == len(SCRIPTS)
    assert all(link.startswith("#") or link == "data:," for link in parsed.links)
    for n in range(len(CHOSEN)):
        assert hostile(n) in parsed.data_text, n  # in the data as it came: drawn as text
        assert hostile(n) not in page  # in the markup, nowhere
    findings = sorted(rule for (rule,) in rows(capture, "SELECT rule FROM findings"))
    assert sorted(parsed.finding_rules) == findings  # a role styled as a finding is none


INJECTED = """[...document.querySelectorAll('*')].filter((el) => el.matches('img, textarea, iframe')
    || [...el.attributes].some((a) => a.name.startsWith('on'))).length"""


def test_nothing_hostile_runs_in_a_browser(browser: Chromium, capture: Path, report: Path) -> None:
    browser.open(report.as_uri())
    drawn = every_row(browser)
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate(SCRIPTS_THAT_RUN) == len(SCRIPTS)
    assert browser.evaluate(INJECTED) == 0
    findings = rows(capture, "SELECT count(*) FROM findings")[0][0]
    assert sum(len(row["findings"]) for row in drawn.values()) == findings
    for n in range(len(CHOSEN)):  # every hostile value shown as it is, as text
        assert any(hostile(n) in row["text"] for row in drawn.values()), n
    browser.evaluate("window.scrollTo(0, 0)")  # the rows at the top drawn at the next frame
    wait_page(browser, "document.querySelector('.item.msg.role-assistant-finding-sev-error')"
                       " !== null")  # a role with spaces is one class name  # fmt: skip
    assert browser.requests[-1:] == [report.as_uri()]
    width = "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    scrolled, shown = browser.evaluate(width)
    assert scrolled == shown  # no long value widens the page past the window


def conversation_ids(browser: Chromium) -> list[str]:
    return list(
        browser.evaluate("[...document.querySelectorAll('.conv-row')].map((el) => el.dataset.conv)")
    )


@pytest.mark.process
def test_a_conversation_id_the_html_parser_changes_is_updated_in_place(
    browser: Chromium, tmp_path: Path
) -> None:
    """A CR or a NUL in a conversation id would read back from markup changed: the live page
    puts it in as it is, and replaces that conversation as it grows, never adds it again."""
    har = (RULES / "return-recipient" / "fail.har").read_text()
    odd = tmp_path / "odd.har"  # the id as written in a JSON string inside the HAR's JSON
    odd.write_text(har.replace(CHOSEN[0], "a\\\\r\\\\nb\\\\u0000c\\\\rd"))
    db = tmp_path / "capture.db"
    assert not any(r.error for r in import_into(db, [RULES / "return-channel" / "pass.har"]))
    with serving(db) as (_, url):
        open_live(browser, url)
        assert not any(r.error for r in import_into(db, [odd]))
        wait_page(browser, "window.__convtapUpdates >= 1")
        assert convtap("audit", "--db", str(db)).returncode == 1  # the conversation changes
        wait_page(browser, "document.querySelectorAll('#timeline .finding').length > 0")
        time.sleep(1)  # a few more polls: nothing more may come
        ids = conversation_ids(browser)
        assert sorted(ids) == sorted([CHOSEN[0], "a\r\nb\x00c\rd"]), ids


@pytest.mark.process
def test_a_request_naming_another_host_is_refused(tmp_path: Path) -> None:
    """DNS rebinding: a site whose name resolves to 127.0.0.1 gets nothing, token or not."""
    db = hostile_capture(tmp_path)
    with serving(db) as (_, url):
        port = url.split(":")[2].split("/")[0]
        for host, status in ((f"127.0.0.1:{port}", 200), (f"localhost:{port}", 200),
                             (f"evil.example:{port}", 403), ("evil.example", 403)):  # fmt: skip
            for path in ("", "events"):
                asked = urllib.request.Request(url + path, headers={"Host": host})
                try:
                    with DIRECT.open(asked, timeout=10) as answer:
                        assert (answer.status, host) == (status, host)
                except urllib.error.HTTPError as refused:
                    assert (refused.code, host) == (status, host)
                    assert refused.read() == b"%d\n" % status


BIDI = "[\\u202a-\\u202e\\u2066-\\u2069]"


def test_a_bidi_control_is_shown_never_obeyed(browser: Chromium, tmp_path: Path) -> None:
    """A tool named `\\u202eyaw_atifela` would read `alefita_way`: it is shown with its escape,
    in the page and its filters, and filtering by it still finds its call."""
    har = (RULES / "return-recipient" / "fail.har").read_text()
    odd = tmp_path / "odd.har"
    odd.write_text(har.replace("alefita_way", "\\\\u202eyaw_atifela\\\\u2066"))
    db = tmp_path / "capture.db"
    assert not any(r.error for r in import_into(db, [odd]))
    assert convtap("audit", "--db", str(db)).returncode == 1
    ran = convtap("report", "--db", str(db))
    assert ran.returncode == 0, ran.stderr
    browser.open(Path(ran.stdout.strip()).as_uri())
    assert browser.evaluate(f"/{BIDI}/.test(document.documentElement.outerHTML)") is False
    shown = "\\u202eyaw_atifela\\u2066"
    assert shown in browser.evaluate("document.body.innerText")
    tools = browser.evaluate(
        "[...document.querySelectorAll('[name=tool] option')].map(o => o.value)"
    )
    assert shown in tools
    browser.evaluate(f"window.convtapFilter({{tool: {json.dumps(shown)}}})")
    calls = "[...document.querySelectorAll('.call')].filter((el) => el.checkVisibility()).length"
    assert browser.evaluate(calls) == 1


def test_only_the_pages_own_scripts_may_run(browser: Chromium, page: str, tmp_path: Path) -> None:
    """Were markup from a capture ever to get into the page, its script would not run: the
    Content-Security-Policy names each of the page's own scripts by its digest."""
    tampered = tmp_path / "tampered.html"
    injected = "<script>window.__pwned = 1</script><img src=x onerror='window.__pwned = 2'>"
    tampered.write_text(page.replace("</main>", f"{injected}</main>"), encoding="utf-8")
    browser.open(tampered.as_uri())  # waits for the page's own script
    assert browser.evaluate("typeof window.__pwned") == "undefined"


@pytest.mark.process
def test_the_live_pages_scripts_run_and_no_other(browser: Chromium, capture: Path) -> None:
    with serving(capture) as (_, url):
        with DIRECT.open(url, timeout=10) as answer:
            policy = answer.headers["Content-Security-Policy"]
        digests = re.search(r"script-src ((?:'sha256-[^;' ]+' ?)+);", policy)
        assert digests and len(digests[1].split()) == len(SCRIPTS) + 1, policy  # and live.js
        open_live(browser, url)  # both of its scripts ran: filters ready, events connected
        injected = "`<img src=x onerror='window.__pwned = 1'>`"
        browser.evaluate(f"document.body.insertAdjacentHTML('beforeend', {injected})")
        time.sleep(0.3)
        assert browser.evaluate("typeof window.__pwned") == "undefined"
