"""convtap.vocab: the words the layers share, each written once, stored as their text."""

from __future__ import annotations

import ast
import pickle
import sqlite3
from enum import StrEnum
from pathlib import Path

import convtap.vocab as vocab
from convtap.journal.events import RequestSeen, ResponseEnded
from convtap.store.schema import CALL_LEDGER
from convtap.vocab import (
    CallKind,
    DecodeErrorKind,
    Endpoint,
    Outcome,
    RawKind,
    Severity,
    Source,
    WireProtocol,
    sql,
    stored,
)

PACKAGE = Path(__file__).resolve().parent.parent / "addon" / "convtap"
WORDS: list[type[StrEnum]] = [
    CallKind,
    DecodeErrorKind,
    Endpoint,
    Outcome,
    RawKind,
    Severity,
    Source,
    WireProtocol,
]


def literals(path: Path) -> list[tuple[str, int]]:
    """The string constants of a module (docstrings included: a word quoted in prose is inside
    a longer string, never equal to it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.value, n.lineno) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]  # fmt: skip


def test_each_wire_word_is_written_once_in_the_package() -> None:
    """The words that mean one thing only (the wire's, the raw event kinds, the protocols,
    the decode-error kinds, the endpoints with a dash) appear as a literal in vocab.py alone."""
    once = {vocab.DONE, vocab.RESPONSE_CREATE, vocab.STREAM_HANDOFF, vocab.MESSAGE_STREAM_COMPLETE}
    once |= {RawKind.WS_CLIENT, RawKind.WS_SERVER, WireProtocol.CONVERSATION}
    once |= {Endpoint.CONVERSATION_GET, Endpoint.RESPONSES_SOCKET, *DecodeErrorKind}
    found = [
        f"{path.relative_to(PACKAGE)}:{line} {value!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "vocab.py"
        for value, line in literals(path)
        if value in once
    ]
    assert found == []


def test_the_stored_values_never_change() -> None:
    """Captures and `decode --format json` hold these texts: a member renamed keeps its value."""
    assert {w.__name__: [m.value for m in w] for w in WORDS} == {
        "CallKind": ["local", "functions", "builtin", "client"],
        "DecodeErrorKind": [
            "malformed-json", "invalid-delta", "unknown-encoding", "unexpected-value",
            "ws-frame", "invalid-utf8", "event-too-large", "value-too-large",
            "too-many-messages", "arguments-mismatch", "wrong-type",
        ],
        "Endpoint": ["conversation", "prepare", "resume", "sentinel", "conversation-get",
                     "websocket", "responses", "responses-socket"],
        "Outcome": ["complete", "truncated", "error", "failed", "incomplete",
                    "interrupted: a new response", "interrupted: the socket closed",
                    "unanswered: the socket closed",
                    "interrupted: the proxy stopped before the response ended"],
        "RawKind": ["sse", "ws:client", "ws:server"],
        "Severity": ["error", "warning", "info"],
        "Source": ["live", "import", "reprocess", "socket"],
        "WireProtocol": ["f-conversation", "responses"],
    }  # fmt: skip


def test_sql_writes_members_as_literals_and_the_queries_use_it() -> None:
    assert sql(Endpoint.RESPONSES) == "'responses'"
    assert sql(CallKind.LOCAL, CallKind.CLIENT) == "'local', 'client'"
    assert "r.protocol = 'responses' AND a.status = 200 AND a.outcome = 'complete'" in CALL_LEDGER
    with sqlite3.connect(":memory:") as conn:  # a member is bound as its text
        conn.execute("CREATE TABLE t (v TEXT)")
        conn.execute("INSERT INTO t VALUES (?)", (RawKind.WS_SERVER,))
        row = conn.execute(f"SELECT typeof(v), v = {sql(RawKind.WS_SERVER)} FROM t").fetchone()
        assert row == ("text", 1)


def test_a_value_read_back_is_its_word_or_the_default() -> None:
    assert stored(Source, "import", Source.REPROCESS) is Source.IMPORT
    assert stored(Source, None, Source.REPROCESS) is Source.REPROCESS
    assert stored(Source, "hand-edited", Source.REPROCESS) is Source.REPROCESS
    assert stored(Source, 3, Source.REPROCESS) is Source.REPROCESS


def test_journal_events_carry_their_words_across_the_process_boundary() -> None:
    """The journal pickles events: a word comes back as the same member."""
    seen = RequestSeen("f", "POST", "https://x/", "x", "/", (), None, 1.0, Source.IMPORT)
    ended = ResponseEnded("f", 200, (), None, Outcome.TRUNCATED, 2.0)
    for event in (seen, ended):
        back = pickle.loads(pickle.dumps(event, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == event
    assert pickle.loads(pickle.dumps(seen)).source is Source.IMPORT
    assert RawKind.frame(True) is RawKind.WS_CLIENT and RawKind.frame(False) is RawKind.WS_SERVER
