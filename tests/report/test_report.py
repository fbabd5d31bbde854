"""`convtap report`: the page of a capture, as a file (what it holds, what it never does)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import sqlite3
import uuid
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from convtap.ingest.capture import import_into
from convtap.report.page import SCRIPTS
from convtap.store.database import connect

from tests.harness import events_sql
from tests.runner import convtap

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "captures" / "examples" / "rules"
SSE = ROOT / "captures" / "examples" / "sse"
SCRIPT = "<script>alert(1)</script>"
RECIPIENT_CALL = "b6d6e3a6-af6f-4a78-a649-8e3935182fcc"


def build_capture(folder: Path, user_text: str) -> Path:
    """A capture whose user message says `user_text`: the example session with a faulty return
    (return-recipient, an error), no prepare before it (prepare-missing, a warning), and a
    Responses API session answered with the item id (responses-output-call-id, an error;
    responses-call-unanswered, a warning); audited, so that its findings are stored."""
    har = json.loads((RULES / "return-recipient" / "fail.har").read_text())
    del har["log"]["entries"][3]  # the prepare before the return
    text = json.dumps(har).replace("use o alefita way", user_text.replace('"', '\\"'))
    session = folder / "session.har"
    session.write_text(text)
    db = folder / "capture.db"
    results = import_into(db, [session, RULES / "responses-output-call-id" / "fail.har"])
    assert not any(r.error for r in results), results
    assert convtap("audit", "--db", str(db)).returncode == 1
    return db


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def fresh_ids(text: str) -> str:
    """`text` with each id (a UUID) replaced by one of its own, the same throughout: a session
    again, that shares nothing with the first."""
    fresh: dict[str, str] = {}
    return UUID.sub(lambda m: fresh.setdefault(m[0], str(uuid.uuid4())), text)


def rows(db: Path, sql: str) -> list[Any]:
    conn = events_sql(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True))
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


class Page(HTMLParser):
    """What a page holds: its text (the markup's), its scripts (those that run), what it links to,
    and its data: each step of each conversation (`steps`, decoded from the gzip blocks)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.text: list[str] = []
        self.scripts = 0
        self.links: list[str] = []
        self.csp: str | None = None
        self.blocks: list[str] = []
        self._in_data = False
        self.feed(html)
        self.close()
        self.steps: list[dict[str, Any]] = [
            step
            for block in self.blocks
            for step in json.loads(gzip.decompress(base64.b64decode(block)))
        ]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self._in_data = tag == "script" and found.get("id") == "convtap-data"
        self.scripts += tag == "script" and "type" not in found
        self.links += [v or "" for k, v in attrs if k in ("src", "href", "action", "srcset")]
        if tag == "meta" and found.get("http-equiv") == "Content-Security-Policy":
            self.csp = found.get("content")

    def handle_endtag(self, tag: str) -> None:
        self._in_data = False

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.blocks += data.split()
        else:
            self.text.append(data)

    @property
    def items(self) -> list[dict[str, Any]]:
        return [item for step in self.steps for item in step["i"]]

    @property
    def calls(self) -> list[str]:
        return [item["id"] for item in self.items if item["t"] == "c"]

    @staticmethod
    def findings_of(item: dict[str, Any]) -> list[dict[str, Any]]:
        """An item's findings: a call's and its returns', a return's, a request's own."""
        if item["t"] == "f":
            return [item]
        returns = item.get("r") or []
        return [*(item.get("f") or []), *(f for r in returns for f in r["f"])]

    @property
    def finding_rules(self) -> list[str]:
        """Each finding's rule, where it is placed: on a call, a return, or a request."""
        return [f["rule"] for item in self.items for f in self.findings_of(item)]

    @property
    def data_text(self) -> str:
        """Every string the data holds, one a line."""
        out: list[str] = []

        def walk(value: Any) -> None:
            if isinstance(value, dict):
                for v in value.values():
                    walk(v)
            elif isinstance(value, list):
                for v in value:
                    walk(v)
            elif isinstance(value, str):
                out.append(value)

        walk(self.steps)
        return "\n".join(out)


def report_text(page: Path) -> bytes:
    """A page as it is read: its markup without the data's base64 blocks, then their data
    decoded (the JSON of every step), so that what the page holds in gzip and base64 is searched
    as what it says (base64 of gzip says nothing, and may spell any run of letters)."""
    html = page.read_text(encoding="utf-8")
    blocks = Page(html).blocks
    for block in blocks:
        html = html.replace(block, "")
    decoded = b"\n".join(gzip.decompress(base64.b64decode(b)) for b in blocks)
    return html.encode() + b"\n" + decoded


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_capture(tmp_path_factory.mktemp("report"), f"olá {SCRIPT} and more")


@pytest.fixture(scope="module")
def page(capture: Path) -> str:
    ran = convtap("report", "--db", str(capture))
    assert ran.returncode == 0, ran.stderr
    return Path(ran.stdout.strip()).read_text(encoding="utf-8")


def test_a_script_in_a_message_is_text_never_markup(page: str) -> None:
    assert SCRIPT not in page  # the data is base64: nothing in it the HTML parser reads
    parsed = Page(page)
    assert parsed.scripts == len(SCRIPTS)  # the page's own
    assert SCRIPT in parsed.data_text


def test_every_call_and_every_finding_shows(capture: Path, page: str) -> None:
    parsed = Page(page)
    calls = [call_id for (call_id,) in rows(capture, "SELECT call_id FROM tool_calls")]
    assert len(calls) == 3
    assert sorted(parsed.calls) == sorted(calls)
    rules = Counter(rule for (rule,) in rows(capture, "SELECT rule FROM findings"))
    assert {"return-recipient", "prepare-missing", "responses-output-call-id"} <= set(rules)
    assert Counter(parsed.finding_rules) == rules  # each finding once, where it happened


def test_every_rule_fixture_shows_every_finding(tmp_path: Path) -> None:
    """All the failing fixtures in one capture: each finding is placed exactly once, whether
    it sits on a call, a return answering no call, or a request."""
    db = tmp_path / "all.db"
    results = import_into(db, sorted(RULES.glob("*/fail.har")))
    assert not any(r.error for r in results)
    convtap("audit", "--db", str(db))
    output = tmp_path / "all.html"
    assert convtap("report", "--db", str(db), "--output", str(output)).returncode == 0
    parsed = Page(output.read_text(encoding="utf-8"))
    rules = Counter(rule for (rule,) in rows(db, "SELECT rule FROM findings"))
    assert len(rules) >= 25
    assert Counter(parsed.finding_rules) == rules
    calls = [call_id for (call_id,) in rows(db, "SELECT call_id FROM tool_calls")]
    assert sorted(parsed.calls) == sorted(calls)  # each once


def test_the_offending_field_is_named_for_its_return(page: str) -> None:
    marks = {
        rule: path
        for item in Page(page).items
        for r in item.get("r") or ([item] if item["t"] == "r" else [])
        for path, rules in r.get("marks") or []
        for rule in rules
    }
    assert marks["return-recipient"] == ["recipient"]
    assert marks["responses-output-call-id"] == ["call_id"]


def test_both_protocols_show_their_calls_and_returns(page: str) -> None:
    parsed = Page(page)
    shown = ["call_Qx7RkP2m", "fc_68a1b2c3", "call_S1kq9Wz", "function_call_output",
             "tool_search_output", "local.alefita_way"]  # fmt: skip
    assert [item for item in shown if item not in parsed.data_text] == []
    assert any(item["t"] == "r" for item in parsed.items)  # a return answering no call


def test_the_summary_counts(page: str) -> None:
    text = re.sub(r"\s+", " ", "".join(Page(page).text))
    assert "3 calls" in text and "fixture-client/1.0" in text
    assert "2 error" in text and "2 warning" in text


def test_the_page_is_self_contained(page: str) -> None:
    parsed = Page(page)
    assert parsed.csp is not None
    assert re.fullmatch(
        "default-src 'none'; style-src 'unsafe-inline'; script-src"
        + " 'sha256-[A-Za-z0-9+/=]{44}'" * len(SCRIPTS)
        + ";"
        " img-src data:",
        parsed.csp,
    )
    assert parsed.links and all(link.startswith(("#", "data:")) for link in parsed.links)
    assert "@import" not in page and "url(" not in page


def test_the_capture_is_not_changed(capture: Path, tmp_path: Path) -> None:
    before = hashlib.sha256(capture.read_bytes()).hexdigest()
    siblings = sorted(p.name for p in capture.parent.iterdir())
    output = tmp_path / "page.html"
    assert convtap("report", "--db", str(capture), "--output", str(output)).returncode == 0
    assert hashlib.sha256(capture.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in capture.parent.iterdir()) == siblings


def test_the_page_goes_beside_the_database_by_default(capture: Path, tmp_path: Path) -> None:
    db = tmp_path / "copy.db"
    db.write_bytes(capture.read_bytes())
    ran = convtap("report", "--db", str(db))
    assert ran.returncode == 0
    assert ran.stdout == f"{tmp_path / 'copy.db.html'}\n"
    assert (tmp_path / "copy.db.html").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_decode_errors_and_our_own_failures_are_listed(tmp_path: Path) -> None:
    db = tmp_path / "errors.db"
    assert not import_into(db, [SSE / "malformed.sse"])[0].error
    conn = connect(db)
    with conn.conn:
        conn.execute("UPDATE flows SET failure = 'TypeError: <b>boom</b>'")
    conn.conn.close()
    assert convtap("report", "--db", str(db)).returncode == 0
    page = (tmp_path / "errors.db.html").read_text()
    text = re.sub(r"\s+", " ", "".join(Page(page).text))
    assert "malformed-json" in text and "invalid-delta" in text
    assert "TypeError: <b>boom</b>" in text and "<b>boom</b>" not in page


def test_an_empty_capture_is_a_page_saying_so(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    connect(db).conn.close()
    assert convtap("report", "--db", str(db)).returncode == 0
    assert "Nothing recorded yet." in (tmp_path / "empty.db.html").read_text()


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (text TEXT)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("make", "says"),
    [(None, "no database at"), (lambda p: p.write_bytes(b""), "is empty"),
     (lambda p: p.write_bytes(b"\x00" * 4096), "not a SQLite database"),
     (_foreign, "not a convtap capture")],
)  # fmt: skip
def test_what_is_not_a_capture_is_one_line_and_exit_2(tmp_path: Path, make: Any, says: str) -> None:
    db = tmp_path / "x.db"
    if make is not None:
        make(db)
    ran = convtap("report", "--db", str(db))
    assert ran.returncode == 2
    assert ran.stderr.startswith("convtap: ") and says in ran.stderr
    assert ran.stderr.count("\n") == 1
    assert not (tmp_path / "x.db.html").exists()


def test_a_page_that_cannot_be_written_is_one_line(capture: Path, tmp_path: Path) -> None:
    ran = convtap("report", "--db", str(capture), "--output", str(tmp_path / "no" / "p.html"))
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1
    ran = convtap("report", "--db", str(capture), "--output", str(capture))
    assert ran.returncode == 2 and "would replace the capture" in ran.stderr


def exchanges(page_text: str) -> list[str]:
    return ["\n".join(step["x"]) for step in Page(page_text).steps if step.get("x")]


def test_a_responses_exchange_reads_as_a_conversation(tmp_path: Path) -> None:
    """Each Responses request, over HTTP or over a socket: its input in order, then its answer's
    items (the assistant's text, calls with their call_id); markup in it stays text."""
    from tests.record.test_responses_socket import TOOLS, Socket, calls_of

    db = tmp_path / "socket.db"
    socket = Socket(db)
    first = socket.turn({"model": "gpt-5.1", "tools": TOOLS, "input": "<b>weather</b>?",
                         "instructions": "Be brief.\nNever guess."})  # fmt: skip
    (call,) = calls_of(first)
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"}
    socket.turn({"model": "gpt-5.1", "previous_response_id": first["id"], "input": [output]})
    socket.close()
    text = convtap("report", "--db", str(db), "--output", str(tmp_path / "r.html"))
    assert text.returncode == 0, text.stderr
    page_text = (tmp_path / "r.html").read_text()
    assert "<b>weather</b>" not in page_text  # in the data only
    asked, answered = exchanges(page_text)
    assert asked.splitlines()[:3] == [
        "model gpt-5.1 · 1 tool (get_weather)",
        "── instructions: Be brief.",
        "── user: <b>weather</b>?",
    ]
    assert f"── ⚙ function_call get_weather · call_id {call['call_id']}:" in asked
    assert (
        answered.splitlines()[1] == f"── ↩ function_call_output · call_id {call['call_id']}: 21 C"
    )
    assert answered.splitlines()[2].startswith("── assistant: ")
    (card,) = [item for item in Page(page_text).items if item["t"] == "c"]
    assert (card["to"], card["name"]) == ("function_call", "get_weather")  # its card names it
