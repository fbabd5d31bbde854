"""The report as a person sees it: Debian's headless Chromium opens the page from disk, driven
over the Chrome DevTools Protocol, and the test reads what is rendered and what was fetched."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import urllib.request
from collections import Counter
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from convtap.ingest.capture import import_into
from convtap.report.page import SCRIPTS
from tornado.websocket import WebSocketClientConnection, websocket_connect

from tests.report.test_report import RULES, Page, build_capture, fresh_ids, rows
from tests.runner import convtap

pytestmark = pytest.mark.process  # every test drives a headless Chromium (its fixture starts it)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps"]  # fmt: skip
PWNED = "<script>window.__convtapPwned = 1</script>"
SCRIPTS_THAT_RUN = "[...document.scripts].filter((s) => !s.type).length"  # not the data
TIMEOUT = 60.0


class Chromium:
    """Headless Chromium and one page of it, driven over the DevTools protocol (JSON messages
    on a websocket). Every request the page makes is kept in `requests`."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.requests: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._waiting: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}

    def __enter__(self) -> Chromium:
        self._profile = tempfile.TemporaryDirectory(prefix="convtap-chromium-")
        self._process = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self._profile.name}",
             "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            self._run(self._connect())
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        self._stop()

    def open(self, url: str) -> None:
        """Navigate, wait for the load event and for the page's script to be ready."""
        self._run(self._open(url))

    def evaluate(self, expression: str) -> Any:
        return self._run(self._evaluate(expression))

    def evaluate_async(self, expression: str) -> Any:
        """The value of a promise `expression` makes, once it is settled."""
        return self._run(self._evaluate(expression, settled=True))

    def screenshot(self, width: int, height: int) -> bytes:
        self._run(self._send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                             deviceScaleFactor=1, mobile=False))  # fmt: skip
        shot = self._run(self._send("Page.captureScreenshot", format="png"))
        return base64.b64decode(shot["data"])

    # -- the protocol ----------------------------------------------------------------------------

    def _run(self, step: Any) -> Any:
        return self._loop.run_until_complete(asyncio.wait_for(step, TIMEOUT))

    async def _connect(self) -> None:
        port_file = Path(self._profile.name) / "DevToolsActivePort"
        while not port_file.is_file() or not port_file.read_text().strip():
            if self._process.poll() is not None:
                raise RuntimeError(f"chromium exited with status {self._process.returncode}")
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().splitlines()[0])
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
        with direct.open(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            targets = json.loads(answer.read())
        page = next(t for t in targets if t["type"] == "page")
        self._socket: WebSocketClientConnection = await websocket_connect(
            page["webSocketDebuggerUrl"], max_message_size=1 << 30
        )
        self._reader = asyncio.ensure_future(self._read())
        for domain in ("Page", "Network", "Runtime"):
            await self._send(f"{domain}.enable")

    async def _read(self) -> None:
        while (message := await self._socket.read_message()) is not None:
            data = json.loads(message)
            if "id" in data:
                self._replies.pop(data["id"]).set_result(data)
                continue
            if data["method"] == "Network.requestWillBeSent":
                self.requests.append(data["params"]["request"]["url"])
            for waiter in self._waiting.pop(data["method"], []):
                waiter.set_result(data["params"])

    async def _send(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        reply = self._replies[call_id] = self._loop.create_future()
        await self._socket.write_message(json.dumps({"id": call_id, "method": method,
                                                     "params": params}))  # fmt: skip
        answer = await reply
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer["result"]
        return result

    def _event(self, method: str) -> asyncio.Future[dict[str, Any]]:
        waiter = self._loop.create_future()
        self._waiting.setdefault(method, []).append(waiter)
        return waiter

    async def _open(self, url: str) -> None:
        loaded = self._event("Page.loadEventFired")
        navigated = await self._send("Page.navigate", url=url)
        if "errorText" in navigated:
            raise RuntimeError(f"cannot open {url}: {navigated['errorText']}")
        await loaded
        if url.startswith("file:"):
            while not await self._evaluate("window.__convtapReady === true"):
                await asyncio.sleep(0.02)

    async def _evaluate(self, expression: str, *, settled: bool = False) -> Any:
        result = await self._send("Runtime.evaluate", expression=expression, returnByValue=True,
                                  awaitPromise=settled)  # fmt: skip
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def _stop(self) -> None:
        try:
            if hasattr(self, "_socket"):
                self._run(self._send("Browser.close"))
        except Exception:
            pass  # it is stopped below either way
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, signal.SIGKILL)  # the group chromium was started in
            self._process.wait(10)
        if hasattr(self, "_reader"):
            self._reader.cancel()
        self._loop.run_until_complete(asyncio.sleep(0))
        self._loop.close()
        self._profile.cleanup()


def chromium() -> str:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.skip("Debian's chromium is not installed (CI installs it)")
    return binary


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    db = build_capture(tmp_path_factory.mktemp("browser"), PWNED)
    ran = convtap("report", "--db", str(db))
    assert ran.returncode == 0, ran.stderr
    return db, Path(ran.stdout.strip())


@pytest.fixture(scope="module")
def browser() -> Any:
    with Chromium(chromium()) as opened:
        yield opened


def findings_shown(browser: Chromium) -> list[dict[str, Any]]:
    return list(
        browser.evaluate("""[...document.querySelectorAll('.finding')].map((el) => ({
        rule: el.dataset.rule, severity: el.dataset.severity, hidden: el.hidden,
        visible: el.checkVisibility()}))""")
    )


ROWS_DRAWN = """[...document.querySelectorAll('#slice > .row')].map((row) => ({
    key: row.dataset.key, conv: row.dataset.conv ?? null, text: row.innerText,
    calls: [...row.querySelectorAll('.call[id^="call-"]')].map((el) => el.id),
    orphans: row.querySelectorAll('.orphan').length,
    messages: [...row.querySelectorAll('.msg > .head code')].map((el) => el.textContent),
    findings: [...row.querySelectorAll('.finding')].filter((el) => el.checkVisibility())
        .map((el) => el.dataset.rule)}))"""


# The list scrolled through in the page, a step at a time: after each step, what is drawn is read
# after every frame (each read follows a whole rendering update: scroll handlers, frame
# callbacks, layout and resize observers) until a frame changes nothing (measured, placed).
EVERY_ROW = """(async () => {
  const drawn = () => JSON.stringify(ROWS_DRAWN);
  const frame = () => new Promise((ok) => requestAnimationFrame(() => setTimeout(ok, 0)));
  const list = document.getElementById('rows');
  const seen = {};
  let y = list.getBoundingClientRect().top + scrollY;
  for (;;) {
    window.scrollTo(0, y);
    let settled = null;
    for (let n = 0; n < 200; n += 1) {
      await frame();
      const now = drawn();
      if (now === settled) break;
      settled = now;
    }
    for (const row of JSON.parse(settled)) seen[row.key] = row;
    if (list.getBoundingClientRect().bottom <= innerHeight + 1) return seen;
    y = scrollY + innerHeight * 0.8;
  }
})()""".replace("ROWS_DRAWN", ROWS_DRAWN)


def every_row(browser: Chromium) -> dict[str, dict[str, Any]]:
    """Every row the list draws, scrolled through from its top to its end, as a person would:
    only the rows in view are drawn at any time. By the row's key (what it draws)."""
    seen: dict[str, dict[str, Any]] = browser.evaluate_async(EVERY_ROW)
    return seen


def test_what_a_person_sees(browser: Chromium, report: tuple[Path, Path]) -> None:
    db, page = report
    browser.open(page.as_uri())
    drawn = every_row(browser)
    calls = sorted(c for row in drawn.values() for c in row["calls"])
    assert calls == sorted(f"call-{c}" for (c,) in rows(db, "SELECT call_id FROM tool_calls"))
    expected = Counter(rule for (rule,) in rows(db, "SELECT rule FROM findings"))
    assert Counter(r for row in drawn.values() for r in row["findings"]) == expected
    text = "\n".join(row["text"] for row in drawn.values())
    for rule in expected:
        assert rule in text


def test_a_script_in_a_message_is_shown_and_never_runs(
    browser: Chromium, report: tuple[Path, Path]
) -> None:
    browser.open(report[1].as_uri())
    assert PWNED in browser.evaluate("document.body.innerText")
    assert browser.evaluate("typeof window.__convtapPwned") == "undefined"
    assert browser.evaluate(SCRIPTS_THAT_RUN) == len(SCRIPTS)


def test_the_rule_filter_from_the_url_fragment(
    browser: Chromium, report: tuple[Path, Path]
) -> None:
    browser.open("about:blank")
    browser.open(report[1].as_uri() + "#rule=return-recipient")
    shown = findings_shown(browser)
    assert [f for f in shown if f["rule"] == "return-recipient" and f["visible"]]
    others = [f for f in shown if f["rule"] != "return-recipient"]
    assert all(f["hidden"] and not f["visible"] for f in others)
    assert browser.evaluate("document.querySelector('[name=rule]').value") == "return-recipient"
    calls = browser.evaluate(
        "[...document.querySelectorAll('.call')].map((el) => [el.id, el.checkVisibility()])"
    )
    assert [name for name, visible in calls if visible] == [
        "call-b6d6e3a6-af6f-4a78-a649-8e3935182fcc"
    ]
    counter = browser.evaluate("document.getElementById('shown').textContent")
    assert re.fullmatch(r"showing \d+ of \d+ items: 1 call or return, 1 finding", counter), counter
    tools = browser.evaluate(
        "[...document.querySelectorAll('[name=tool] option')].map(o => o.value)"
    )
    assert (
        tools[0] == ""
        and "get_weather" in tools
        and not [t for t in tools if t.endswith("_output")]
    )


def test_rule_and_severity_together_and_the_filter_function(
    browser: Chromium, report: tuple[Path, Path]
) -> None:
    browser.open("about:blank")
    browser.open(report[1].as_uri() + "#rule=return-recipient&severity=warning")
    assert not [f for f in findings_shown(browser) if f["visible"]]
    browser.evaluate("window.convtapFilter({severity: 'warning'})")
    visible = {f["rule"] for f in findings_shown(browser) if f["visible"]}
    assert visible == {"prepare-missing", "responses-call-unanswered"}
    browser.evaluate("window.convtapFilter({tool: 'get_weather'})")
    visible = {f["rule"] for f in findings_shown(browser) if f["visible"]}
    assert visible == {"responses-call-unanswered"}
    browser.evaluate("window.convtapFilter({q: 'CALENDAR tools'})")
    assert "call_S1kq9Wz" in browser.evaluate("document.body.innerText")
    assert "b6d6e3a6-af6f-4a78-a649-8e3935182fcc" not in browser.evaluate(
        "document.getElementById('timeline').innerText"
    )
    browser.evaluate("window.convtapFilter({})")
    assert all(f["visible"] for f in findings_shown(browser))


def test_nothing_but_the_file_itself_is_fetched(
    browser: Chromium, report: tuple[Path, Path]
) -> None:
    browser.requests.clear()
    browser.open("about:blank")
    browser.open(report[1].as_uri())
    browser.evaluate("window.convtapFilter({rule: 'prepare-missing'})")
    fetched = [url for url in browser.requests if url != "about:blank"]
    assert fetched == [report[1].as_uri()]


@pytest.mark.process
def test_the_charts_render_with_their_bars(browser: Chromium, tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    assert convtap("demo", "--db", str(db)).returncode == 0
    page = tmp_path / "demo.html"
    assert convtap("report", "--db", str(db), "--output", str(page)).returncode == 0
    browser.open(page.as_uri())
    drawn = browser.evaluate("""[...document.querySelectorAll('#charts svg')].map((svg) => {
        const box = svg.getBoundingClientRect();
        const bars = [...svg.querySelectorAll('g.bar')].map((g) => {
            const b = g.getBBox(); return b.width * b.height; });
        return {id: svg.id, width: box.width, height: box.height, bars};
    })""")
    assert [c["id"] for c in drawn] == [
        "chart-latency",
        "chart-tokens",
        "chart-cost",
        "chart-activity",
    ]
    for c in drawn:
        assert c["width"] > 300 and c["height"] > 50, c
        assert c["bars"] and any(area > 0 for area in c["bars"]), c
    for c in drawn[:2]:  # every request took time; every Responses answer used tokens
        assert all(area > 0 for area in c["bars"]), c
    assert [len(c["bars"]) for c in drawn][:2] == [8, 4]


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A capture of 60 conversations (the example session again and again, each with ids of its
    own, one in three with a faulty return), and the Responses API's example; audited."""
    folder = tmp_path_factory.mktemp("many")
    entries = []
    for n in range(60):
        name = "return-recipient" if n % 3 == 0 else "prepare-missing"
        entries += json.loads(fresh_ids((RULES / name / "fail.har").read_text()))["log"]["entries"]
    har = folder / "many.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": entries,
                                       "creator": {"name": "t", "version": "1"}}}))  # fmt: skip
    db = folder / "capture.db"
    results = import_into(db, [har, RULES / "responses-output-call-id" / "fail.har"])
    assert not any(r.error for r in results)
    assert convtap("audit", "--db", str(db)).returncode == 1
    ran = convtap("report", "--db", str(db))
    assert ran.returncode == 0, ran.stderr
    return db, Path(ran.stdout.strip())


def test_every_call_return_finding_and_conversation_is_drawn_through_the_list(
    browser: Chromium, many: tuple[Path, Path]
) -> None:
    db, page = many
    browser.open(page.as_uri())
    drawn_at_once = browser.evaluate("document.querySelectorAll('#slice > .row').length")
    drawn = every_row(browser)
    assert drawn_at_once < len(drawn) / 4  # only what is in view is drawn
    convs = sorted({c for (c,) in rows(db, "SELECT conversation_id FROM tool_calls")})
    assert sorted(row["conv"] for row in drawn.values() if row["conv"] is not None) == convs
    calls = sorted(f"call-{c}" for (c,) in rows(db, "SELECT call_id FROM tool_calls"))
    assert sorted(c for row in drawn.values() for c in row["calls"]) == calls
    orphans = rows(db, "SELECT count(*) FROM tool_returns WHERE call_id IS NULL")[0][0]
    assert sum(row["orphans"] for row in drawn.values()) == orphans > 0
    returns = [r for (r,) in rows(db, "SELECT coalesce(message_id, id) FROM tool_returns")]
    text = "\n".join(row["text"] for row in drawn.values())
    assert [r for r in returns if f"return {r}" not in text] == []
    messages = sorted(m for (m,) in rows(db, "SELECT id FROM messages WHERE id NOT IN "
                                            "(SELECT call_id FROM tool_calls)"))  # fmt: skip
    assert sorted(m for row in drawn.values() for m in row["messages"]) == messages
    findings = Counter(rule for (rule,) in rows(db, "SELECT rule FROM findings"))
    assert Counter(r for row in drawn.values() for r in row["findings"]) == findings


def test_a_filter_finds_what_is_not_drawn_yet(browser: Chromium, many: tuple[Path, Path]) -> None:
    db, page = many
    browser.open("about:blank")
    browser.open(page.as_uri())
    (last,) = rows(db, "SELECT call_id FROM tool_calls WHERE protocol = 'f-conversation' "
                       "ORDER BY called_at DESC LIMIT 1")[0]  # fmt: skip
    assert browser.evaluate(f"document.getElementById('call-{last}')") is None  # far below
    browser.evaluate(f"window.convtapFilter({{q: {json.dumps(last)}}})")
    assert browser.evaluate(f"document.getElementById('call-{last}') !== null")
    browser.evaluate("window.convtapFilter({rule: 'return-recipient'})")
    expected = rows(db, "SELECT count(*) FROM findings WHERE rule = 'return-recipient'")[0][0]
    counter = browser.evaluate("document.getElementById('shown').textContent")
    assert counter.endswith(f", {expected} findings"), counter
    drawn = every_row(browser)
    assert Counter(r for row in drawn.values() for r in row["findings"]) == {
        "return-recipient": expected
    }
    browser.evaluate("window.convtapFilter({})")


# What a text search reads in an item (view.js's searchText): these fields, its returns' and
# its findings', lowercased.
SEARCHED = ("id", "role", "name", "to", "ch", "st", "ct", "text", "tool", "proto", "kind", "item",
            "args", "mid", "flow", "bcid", "json", "rule", "sev", "msg", "exp", "act")  # fmt: skip


def searched(item: dict[str, Any]) -> str:
    parts = [item.get(k) for k in SEARCHED]
    returns = item.get("r") or []
    for r in returns:
        parts += [r.get("id"), r.get("mid"), r.get("flow"), r.get("json")]
    found = [*(item.get("f") or []), *(f for r in returns for f in r.get("f") or [])]
    for f in found:
        parts += [f.get("rule"), f.get("sev"), f.get("msg"), f.get("exp"), f.get("act")]
    return "\n".join(str(p) for p in parts if p is not None).lower()


def test_a_search_shows_and_counts_exactly_what_it_finds(
    browser: Chromium, many: tuple[Path, Path]
) -> None:
    db, page = many
    data = Page(page.read_text())
    browser.open("about:blank")
    browser.open(page.as_uri())
    (last,) = rows(db, "SELECT call_id FROM tool_calls ORDER BY called_at DESC LIMIT 1")[0]
    for q in ("alefita", last[-12:], "recipient", "no such text at all"):
        items = [(s, it) for s in data.steps for it in s["i"] if q.lower() in searched(it)]
        browser.evaluate(f"window.convtapFilter({{q: {json.dumps(q)}}})")
        calls = sum(it["t"] in ("c", "r") for _, it in items)
        found = sum(len(f) for f in (Page.findings_of(it) for _, it in items))
        counter = browser.evaluate("document.getElementById('shown').textContent")
        assert counter.startswith(f"showing {len(items)} of {len(data.items)} items: {calls} "), q
        assert counter.endswith(f" {found} finding{'' if found == 1 else 's'}"), (q, counter)
        drawn = every_row(browser)  # the list is virtual: scrolled through to see every row
        assert sum(key.startswith("i") for key in drawn) == len(items), q
        assert sorted(row["conv"] for row in drawn.values() if row["conv"] is not None) == sorted(
            {s["c"] for s, _ in items}
        )  # each conversation with an item found, once, and no other
        heads = [key for key in drawn if key.startswith("s")]
        assert len(heads) == len({(s["c"], s["s"]) for s, _ in items}), q
    assert len([it for it in data.items if "alefita" in searched(it)]) > 60  # many, not a few
    browser.evaluate("window.convtapFilter({})")


SPLIT_LINES = """(async (text) => {
  const bytes = new TextEncoder().encode(text);
  const out = [];
  for (let cut = 0; cut <= bytes.length; cut += 1) {  // one read, or two split at every byte
    const parts = [bytes.slice(0, cut), bytes.slice(cut)].filter((p) => p.length);
    const body = new ReadableStream({
      start(c) { parts.forEach((p) => c.enqueue(p)); c.close(); } });
    const got = [];
    for await (const line of window.convtapLines(new Response(body))) got.push(line);
    out.push(got);
  }
  return JSON.stringify(out);
})"""


def test_the_live_pages_data_is_read_in_whole_lines_however_it_arrives(
    browser: Chromium, report: tuple[Path, Path]
) -> None:
    browser.open(report[1].as_uri())
    text = "QUJD\nZGVm\n\nZ2hp"  # no line break at the end: the last line still counts
    seen = json.loads(browser.evaluate_async(f"{SPLIT_LINES}({json.dumps(text)})"))
    assert seen == [["QUJD", "ZGVm", "Z2hp"]] * (len(text) + 1)


@pytest.mark.parametrize(
    "value",
    [{}, [], {"a": {}, "b": [], "c": [1, {"d": None}], "é": 'ü\n"<'}, [[[]]], "x", 1.5, None,
     {"1": 1, "0": [True, False], "k": "\u202e"}],
)  # fmt: skip
def test_json_is_indented_as_json_dumps_does(
    browser: Chromium, report: tuple[Path, Path], value: Any
) -> None:
    browser.open(report[1].as_uri())
    text = json.dumps(value)
    indented = browser.evaluate(f"window.convtap.pretty({json.dumps(text)})")
    assert indented == json.dumps(value, ensure_ascii=False, indent=2)
    assert browser.evaluate("window.convtap.pretty('not json')") == "not json"


def test_a_server_run_tool_is_drawn_as_run_by_the_server(browser: Chromium, tmp_path: Path) -> None:
    from tests.report.test_server_run import stream

    body = tmp_path / "python.sse"
    body.write_text(stream())
    db = tmp_path / "capture.db"
    assert not any(r.error for r in import_into(db, [body]))
    ran = convtap("report", "--db", str(db))
    assert ran.returncode == 0, ran.stderr
    browser.open(Path(ran.stdout.strip()).as_uri())
    life = browser.evaluate(
        "[...document.querySelectorAll('.call .life')].map((el) => el.innerText)"
    )
    assert life == ["run by the server: no return owed"]
