"""convtap's Datasette plugin in a real Datasette, 0.65 and 1.0 (alpha), each in its own
virtualenv (`.venv-datasette`, `.venv-datasette1`, which `make test` builds): the canned queries
and the table descriptions on every capture served, whatever its file's name, none on another
SQLite file; the queries right for both protocols; no deprecated hook."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from convtap.store.canned import QUERIES, TABLES

from tests.report.test_report import build_capture, rows
from tests.runner import convtap

ROOT = Path(__file__).resolve().parents[2]
STARTED = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")


# Each Datasette the plugin serves: its virtualenv's variable, and the default place of it.
DATASETTES = {
    "0.65": ("CONVTAP_DATASETTE", ".venv-datasette"),
    "1.0": ("CONVTAP_DATASETTE1", ".venv-datasette1"),
}


def datasette_binary(line: str = "0.65") -> Path:
    variable, folder = DATASETTES[line]
    found = Path(os.environ.get(variable, ROOT / folder / "bin/datasette"))
    if not found.exists():
        pytest.skip(f"Datasette {line}'s virtualenv is missing: `make test` creates {folder}")
    return found


@pytest.fixture(scope="module", params=list(DATASETTES))
def served(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[str, Path, Path]]:
    """A Datasette (0.65, then 1.0) on 127.0.0.1 serving the demo as `sdk.db`, the example
    session as `session.db` and a SQLite file of another application as `other.db`; its base
    URL ends in `#0.65` or `#1.0` (a fragment, never sent) to say which it is."""
    binary = datasette_binary(request.param)
    folder = tmp_path_factory.mktemp("datasette")
    sdk = folder / "sdk.db"
    assert convtap("demo", "--db", str(sdk)).returncode == 0
    session = folder / "session.db"
    shutil.move(build_capture(tmp_path_factory.mktemp("session"), "hello"), session)
    other = folder / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE tool_calls (call_id TEXT)")
    process = subprocess.Popen(
        [binary, "serve", "-h", "127.0.0.1", "-p", "0", sdk, session, other],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{_port(process)}#{request.param}", sdk, session
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def _port(process: subprocess.Popen[bytes]) -> int:
    assert process.stderr is not None
    said = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        said += line
        if found := STARTED.search(line):
            return int(found.group(1))
    raise AssertionError(f"datasette did not start: {said.decode(errors='replace')}")


def get(base: str, path: str) -> Any:
    with urllib.request.urlopen(base.split("#")[0] + path, timeout=30) as answer:
        return json.loads(answer.read())


def query(base: str, db: str, name: str) -> list[dict[str, Any]]:
    answer = get(base, f"/{db}/{name}.json?_shape=objects&_size=max")
    assert answer["ok"], answer
    return list(answer["rows"])


def line(base: str) -> str:
    """Which Datasette serves at `base`: 0.65 or 1.0."""
    return base.split("#")[1]


def descriptions(base: str, db: str) -> dict[str, str]:
    """The tables' descriptions as the Datasette at `base` shows them (1.0 keeps them in its
    internal database, and says them with each table)."""
    if line(base) == "0.65":
        described = get(base, "/-/metadata.json")["databases"][db]["tables"]
        return {name: t["description"] for name, t in described.items()}
    found = {}
    for name in TABLES:
        metadata = get(base, f"/{db}/{name}.json?_size=1&_extra=metadata")["metadata"]
        found[name] = metadata.get("description")
    return found


def test_the_plugin_is_loaded_with_no_deprecated_hook(served: tuple[str, Path, Path]) -> None:
    """0.65 asks for queries and metadata by hooks; 1.0 stores them once it starts (its
    `get_metadata` is deprecated, its `canned_queries` gone)."""
    plugins = get(served[0], "/-/plugins.json")
    hooks = {"0.65": ["canned_queries", "get_metadata", "prepare_connection"],
             "1.0": ["prepare_connection", "startup"]}[line(served[0])]  # fmt: skip
    assert [sorted(p["hooks"]) for p in plugins if p["name"] == "convtap"] == [hooks]


def test_sql_reads_raw_events_and_messages_whole(served: tuple[str, Path, Path]) -> None:
    """`convtap_event` and `convtap_message` in Datasette's SQL read as convtap's accessors."""
    from convtap.store.database import event_text, message_value, open_readonly
    from convtap.store.rows import MessageRow

    base, sdk, _ = served
    db = open_readonly(sdk)
    events = {(r["flow_id"], r["seq"]): event_text(r) for r in db.query("SELECT * FROM events")}
    read = [MessageRow.read(r) for r in db.query("SELECT * FROM messages")]
    messages = {m.id: message_value(m) for m in read}
    db.conn.close()
    assert any(r["data"] is None for r in rows_of(sdk, "SELECT data FROM events"))  # compressed
    sql = "select flow_id, seq, convtap_event(data, raw) as text from events"
    found = get(base, "/sdk.json?" + urlencode({"sql": sql, "_shape": "objects", "_size": "max"}))
    assert {(r["flow_id"], r["seq"]): r["text"] for r in found["rows"]} == events
    sql = "select id, convtap_message(json, text, json_without_text) as json from messages"
    found = get(base, "/sdk.json?" + urlencode({"sql": sql, "_shape": "objects", "_size": "max"}))
    assert {r["id"]: json.loads(r["json"]) for r in found["rows"]} == messages


def rows_of(path: Path, sql: str) -> list[dict[str, Any]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(sql)]


@pytest.mark.parametrize("db", ["sdk", "session"])
def test_every_capture_has_the_queries_and_the_tables_described(
    served: tuple[str, Path, Path], db: str
) -> None:
    listed = get(served[0], f"/{db}.json")
    if line(served[0]) == "0.65":
        assert [q["name"] for q in listed["queries"]] == list(QUERIES)
    else:  # 1.0 lists the first few stored queries, and counts them all
        assert listed["queries_count"] == len(QUERIES)
        assert {q["name"] for q in listed["queries"]} <= set(QUERIES)
    for name in QUERIES:  # each runs
        assert get(served[0], f"/{db}/{name}.json?_size=1&q=x")["ok"]
    assert descriptions(served[0], db) == TABLES


def test_another_sqlite_file_has_none(served: tuple[str, Path, Path]) -> None:
    assert get(served[0], "/other.json")["queries"] == []
    if line(served[0]) == "0.65":
        assert "other" not in get(served[0], "/-/metadata.json").get("databases", {})
    else:
        assert get(served[0], "/other/tool_calls.json?_extra=metadata")["metadata"] == {
            "columns": {}
        }


@pytest.mark.parametrize("db", ["sdk", "session"])
def test_open_calls_of_both_protocols(served: tuple[str, Path, Path], db: str) -> None:
    path = served[1] if db == "sdk" else served[2]
    answered = {
        r for (r,) in rows(path, "SELECT call_id FROM tool_returns WHERE call_id IS NOT NULL")
    }
    expected = sorted(
        (call_id, protocol) for call_id, protocol, kind in
        rows(path, "SELECT call_id, protocol, kind FROM tool_calls")
        if kind in ("local", "client") and call_id not in answered
    )  # fmt: skip
    found = sorted((r["call_id"], r["protocol"]) for r in query(served[0], db, "open_calls"))
    assert found == expected
    assert "responses" in {protocol for _, protocol in found}  # each leaves get_weather open


@pytest.mark.parametrize("db", ["sdk", "session"])
def test_returns_per_client_names_the_client_of_both_protocols(
    served: tuple[str, Path, Path], db: str
) -> None:
    path = served[1] if db == "sdk" else served[2]
    clients = dict(rows(path, "SELECT id, client FROM flows"))
    expected = Counter(
        (clients[flow_id] or "(unknown)", protocol)  # the example session's HAR has no agent
        for flow_id, protocol in rows(path, "SELECT flow_id, protocol FROM tool_returns")
    )
    found = {(r["client"], r["protocol"]): r["returns"]
             for r in query(served[0], db, "returns_per_client")}  # fmt: skip
    assert found == dict(expected)
    assert {protocol for _, protocol in found} == {"f-conversation", "responses"}
    if db == "sdk":  # the demo's reference client sends its user agent with every request
        assert {client.split("/")[0] for client, _ in found} == {"convtap-refclient"}


def test_findings_by_rule_and_the_message_search(served: tuple[str, Path, Path]) -> None:
    base, sdk, _ = served
    expected = Counter(rule for (rule,) in rows(sdk, "SELECT rule FROM findings"))
    assert {r["rule"]: r["findings"] for r in query(base, "sdk", "findings_by_rule")} == expected
    found = get(base, "/session/search_messages.json?_shape=objects&q=hello")["rows"]
    assert found and all("[hello]" in r["match"] for r in found)


def test_the_metadata_for_a_datasette_without_the_plugin() -> None:
    ran = convtap("datasette-metadata", "--name", "demo")
    assert ran.returncode == 0, ran.stderr
    database = json.loads(ran.stdout)["databases"]["demo"]
    assert {name: q["sql"] for name, q in database["queries"].items()} == {
        name: q["sql"] for name, q in QUERIES.items()
    }
    assert set(database["tables"]) == set(TABLES)


def test_what_is_a_capture(tmp_path: Path) -> None:
    from convtap.store.canned import is_capture_file
    from convtap.store.database import connect

    connect(tmp_path / "new.db").close()
    (tmp_path / "text.db").write_text("not SQLite")
    with sqlite3.connect(tmp_path / "other.db") as conn:
        conn.execute("CREATE TABLE flows (id TEXT)")
    before = (tmp_path / "other.db").read_bytes()
    assert is_capture_file(tmp_path / "new.db")
    assert not is_capture_file(tmp_path / "other.db")
    assert not is_capture_file(tmp_path / "text.db")
    assert not is_capture_file(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    assert (tmp_path / "other.db").read_bytes() == before


def refused_output_capture(folder: Path) -> Path:
    """The Responses API example session whose output the server refused (a 400 answers the
    request carrying it): answered, never accepted."""
    from convtap.ingest.capture import import_into

    har = json.loads((ROOT / "captures/examples/rules/responses-output-call-id/pass.har")
                     .read_text())  # fmt: skip
    answer = har["log"]["entries"][1]["response"]
    answer["status"], answer["statusText"] = 400, "Bad Request"
    answer["content"] = {"mimeType": "application/json", "size": 40,
                         "text": '{"error": {"message": "No tool output found"}}'}  # fmt: skip
    (folder / "refused.har").write_text(json.dumps(har))
    db = folder / "refused.db"
    assert not any(r.error for r in import_into(db, [folder / "refused.har"]))
    return db


def canned(db: Path, name: str, **params: str) -> list[dict[str, Any]]:
    """A canned query run as Datasette runs it: its SQL, its named parameters bound."""
    with contextlib.closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as c:
        c.row_factory = sqlite3.Row
        return [dict(r) for r in c.execute(QUERIES[name]["sql"], params)]


def test_unaccepted_returns_lists_the_returns_the_server_refused(tmp_path: Path) -> None:
    db = refused_output_capture(tmp_path)
    answered = rows(db, "SELECT call_id, accepted FROM call_ledger WHERE answered")
    assert answered and all(accepted is None for _, accepted in answered)  # nothing to judge by
    found = {r["call_id"] for r in canned(db, "unaccepted_returns")}
    assert found == {call_id for call_id, _ in answered}


def test_an_empty_search_finds_nothing_and_a_word_finds_its_messages(tmp_path: Path) -> None:
    db = build_capture(tmp_path, "hello")
    for blank in ("", "  "):
        assert canned(db, "search_messages", q=blank) == []
    found = canned(db, "search_messages", q="hello")
    assert found and all("[hello]" in r["match"] for r in found)


def test_datasette_opens_the_search_page_without_a_search(served: tuple[str, Path, Path]) -> None:
    answer = get(served[0], "/session/search_messages.json?_shape=objects")
    assert answer["ok"] and answer["rows"] == [], answer
    base = served[0].split("#")[0]  # (its fragment names the Datasette)
    with urllib.request.urlopen(base + "/session/search_messages", timeout=30) as page:
        assert page.status == 200 and b"Search message text" in page.read()
