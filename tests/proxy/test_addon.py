"""convtap.proxy.addon under mitmproxy's own test harness: the tap, decompression, failures."""

from __future__ import annotations

import asyncio
import gzip
import json
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import brotli
import pytest
from convtap.proxy.addon import ConvtapAddon
from convtap.proxy.script import in_process
from convtap.proxy.tap import decompressor
from hypothesis import given, settings
from hypothesis import strategies as st
from mitmproxy import http
from mitmproxy.test import taddons, tflow, tutils

from tests.harness import complete_events
from tests.seeds import CALL_ID, SSE, tool_return, user_turn

BODY = (SSE / "alefita_way_call.sse").read_bytes()


def conversation_flow(body: dict[str, Any], encoding: str | None = None) -> http.HTTPFlow:
    headers = http.Headers(content_type="text/event-stream")
    if encoding:
        headers["content-encoding"] = encoding
    return tflow.tflow(
        req=tutils.treq(method=b"POST", path=b"/backend-api/f/conversation",
                        content=json.dumps(body).encode()),
        resp=tutils.tresp(headers=headers, content=None),
    )  # fmt: skip


def stream(addon: ConvtapAddon, flow: http.HTTPFlow, body: bytes, size: int) -> bytes:
    addon.request(flow)
    addon.responseheaders(flow)
    assert flow.response is not None and callable(flow.response.stream)
    tap = flow.response.stream
    out = b"".join(tap(body[i : i + size]) for i in range(0, len(body), size))  # type: ignore[misc]
    assert tap(b"") == b""
    addon.response(flow)
    return out


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.process
@pytest.mark.parametrize("size", [1, 7, 100, 1 << 16])
def test_tap_returns_every_byte_and_records_the_call(tmp_path: Path, size: int) -> None:
    addon = ConvtapAddon()
    db = tmp_path / "t.db"
    with taddons.context(addon) as tctx:
        tctx.configure(addon, convtap_db=str(db), convtap_echo="off")
        assert stream(addon, conversation_flow(user_turn()), BODY, size) == BODY
        addon.done()
    assert query(db, "SELECT call_id, complete FROM tool_calls") == [(CALL_ID, 1)]
    assert query(db, "SELECT sum(count) FROM events")[0][0] == 25  # [DONE] is kept raw too
    assert query(db, "SELECT done, stream_complete, truncated FROM turns") == [(1, 1, 0)]


@pytest.mark.process
@pytest.mark.parametrize("encoding", ["gzip", "br", "deflate", "zstd", "gzip, br"])
def test_compressed_streams_are_decoded_for_the_recorder_only(
    tmp_path: Path, encoding: str
) -> None:
    body = BODY
    for step in [e.strip() for e in encoding.split(",")]:
        body = compress(step, body)
    addon = ConvtapAddon()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, convtap_db=str(tmp_path / "t.db"), convtap_echo="off")
        assert stream(addon, conversation_flow(user_turn(), encoding), body, 5) == body
        addon.done()
    assert query(tmp_path / "t.db", "SELECT call_id FROM tool_calls") == [(CALL_ID,)]


def compress(encoding: str, data: bytes) -> bytes:
    if encoding == "gzip":
        return gzip.compress(data)
    if encoding == "br":
        return bytes(brotli.compress(data))
    if encoding == "deflate":
        return zlib.compress(data)
    import importlib

    try:  # mitmproxy 12 brings backports.zstd, 11 zstandard
        module: Any = importlib.import_module("backports.zstd")
        return bytes(module.compress(data))
    except ImportError:
        module = importlib.import_module("zstandard")
        return bytes(module.ZstdCompressor().compress(data))


def test_raw_deflate_is_recognised() -> None:
    packer = zlib.compressobj(wbits=-15)
    data = packer.compress(BODY) + packer.flush()
    inflate = decompressor("deflate")
    assert inflate is not None
    assert b"".join(inflate(data[i : i + 3]) for i in range(0, len(data), 3)) == BODY


def half_streamed(
    addon: ConvtapAddon, tctx: taddons.context, db: Path
) -> tuple[http.HTTPFlow, Any]:
    """A conversation flow whose tap has forwarded the first half of BODY: (the flow, its tap)."""
    tctx.configure(addon, convtap_db=str(db), convtap_echo="off")
    flow = conversation_flow(user_turn())
    addon.request(flow)
    addon.responseheaders(flow)
    assert flow.response is not None
    tap = flow.response.stream
    half = len(BODY) // 2
    assert tap(BODY[:half]) == BODY[:half]  # type: ignore[operator]
    return flow, tap


@pytest.mark.process
def test_empty_chunks_mid_stream_and_a_client_abort(tmp_path: Path) -> None:
    addon = ConvtapAddon()
    db = tmp_path / "t.db"
    with taddons.context(addon) as tctx:
        flow, tap = half_streamed(addon, tctx, db)
        assert tap(b"") == b""  # HTTP/2 sends empty DATA frames mid-stream  # type: ignore[operator]
        flow.error = tflow.terr("Client disconnected.")
        addon.error(flow)
        addon.done()
    assert query(db, "SELECT outcome FROM flows") == [("Client disconnected.",)]
    assert query(db, "SELECT truncated, done FROM turns") == [(1, 0)]


@pytest.mark.process
def test_a_failure_in_our_code_never_breaks_the_stream(tmp_path: Path) -> None:
    addon = ConvtapAddon()
    db = tmp_path / "t.db"
    with taddons.context(addon) as tctx:
        tctx.configure(addon, convtap_db=str(db), convtap_echo="off")
        flow = conversation_flow(user_turn(), "gzip")
        addon.request(flow)
        addon.responseheaders(flow)
        tap = flow.response.stream  # type: ignore[union-attr]
        garbage = b"this is not gzip at all"
        assert tap(garbage) == garbage  # type: ignore[operator]
        assert tap(b"more") == b"more"  # type: ignore[operator]
        addon.response(flow)
        addon.done()
    (failure,) = query(db, "SELECT failure FROM flows")[0]
    assert "error" in failure.lower()


@pytest.mark.process
def test_returns_pair_with_calls_and_other_traffic_is_ignored(tmp_path: Path) -> None:
    addon = ConvtapAddon()
    db = tmp_path / "t.db"
    with taddons.context(addon) as tctx:
        tctx.configure(addon, convtap_db=str(db), convtap_echo="off")
        stream(addon, conversation_flow(user_turn()), BODY, 64)
        continuation = (SSE / "alefita_way_continuation.sse").read_bytes()
        stream(addon, conversation_flow(tool_return()), continuation, 64)
        other = tflow.tflow(req=tutils.treq(path=b"/backend-api/me"), resp=True)
        asyncio.run(tctx.cycle(addon, other))
        addon.done()
    assert query(db, "SELECT call_id FROM tool_returns") == [(CALL_ID,)]
    assert query(db, "SELECT answered, accepted, continued FROM call_ledger") == [(1, 1, 1)]
    assert query(db, "SELECT count(*) FROM flows") == [(2,)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=8), st.binary(max_size=300))
def test_garbage_bodies_never_raise(
    tmp_path_factory: Any, chunks: list[bytes], request: bytes
) -> None:
    addon = ConvtapAddon(in_process)
    db = tmp_path_factory.mktemp("g") / "t.db"
    with taddons.context(addon) as tctx:
        tctx.configure(addon, convtap_db=str(db), convtap_echo="off", convtap_worker=False)
        flow = tflow.tflow(
            req=tutils.treq(method=b"POST", path=b"/backend-api/f/conversation", content=request),
            resp=tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=None),
        )  # fmt: skip
        addon.request(flow)
        addon.responseheaders(flow)
        tap = flow.response.stream  # type: ignore[union-attr]
        assert [tap(c) for c in chunks] == chunks  # type: ignore[operator]
        addon.response(flow)
        addon.done()
    assert query(db, "SELECT failure FROM flows") == [(None,)]  # the recorder took it all


@pytest.mark.process
def test_once_stopping_nothing_of_ours_goes_to_a_client_unrecorded(tmp_path: Path) -> None:
    """mitmproxy's connections live on for a moment after `done` (other addons' hooks, the
    loop's end): what streams then could not be journaled, so the client does not get it."""
    addon = ConvtapAddon()
    db = tmp_path / "t.db"
    half = len(BODY) // 2
    with taddons.context(addon) as tctx:
        _, tap = half_streamed(addon, tctx, db)
        tctx.master.should_exit.set()  # mitmproxy shutting down (Ctrl-C, its recorder dead)
        addon.done()
        assert tap(BODY[half:]) == []  # no chunk at all: an empty one ends a chunked body
        late = conversation_flow(user_turn())
        addon.request(late)
        assert late.response is not None and late.response.status_code == 503
        other = tflow.tflow(req=tutils.treq(path=b"/elsewhere"), resp=False)
        addon.request(other)
        assert other.response is None  # not ours: it passes as ever
    # what went to the client before, all of it, and nothing after
    assert query(db, "SELECT sum(count) FROM events") == [(complete_events(BODY[:half]),)]
    assert query(db, "SELECT count(*) FROM flows") == [(1,)]


@pytest.mark.process
def test_a_script_reload_never_cuts_a_stream(tmp_path: Path) -> None:
    """`done` also comes when mitmproxy reloads the script (the proxy goes on): streams under
    way go on to their clients, and a new request passes."""
    addon = ConvtapAddon()
    db = tmp_path / "t.db"
    half = len(BODY) // 2
    with taddons.context(addon) as tctx:
        _, tap = half_streamed(addon, tctx, db)
        addon.done()
        assert tap(BODY[half:]) == BODY[half:]
        late = conversation_flow(user_turn())
        addon.request(late)
        assert late.response is not None and late.response.status_code == 200  # as it was


PROXY_NEVER_LOADS = ("convtap.record", "convtap.redact", "convtap.store", "convtap.contract",
                     "sqlite3", "sqlite_utils", "detect_secrets")  # fmt: skip


@pytest.mark.process
@pytest.mark.parametrize("module", ["convtap.proxy.addon", "convtap.proxy.script"])
def test_the_proxy_loads_no_recorder_redaction_store_or_rules(module: str) -> None:
    """What mitmproxy's process loads for the addon (and the script that assembles it): the
    recorder runs in a process of its own, and is loaded here only for convtap_worker=false."""
    import subprocess
    import sys

    listed = subprocess.run(
        [sys.executable, "-c", f"import sys, {module}; print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    loaded = [n for n in listed if any(n == p or n.startswith(f"{p}.") for p in PROXY_NEVER_LOADS)]
    assert loaded == []
    assert module in listed and "convtap.journal.backend" in listed


def test_without_a_recorder_of_its_own_in_process_recording_is_refused(tmp_path: Path) -> None:
    addon = ConvtapAddon()  # assembled without `in_process`: the journal only
    db = tmp_path / "t.db"
    with taddons.context(addon) as tctx:
        tctx.configure(addon, convtap_db=str(db), convtap_echo="off", convtap_worker=False)
        assert addon.backend is None
        addon.done()
    assert not db.exists()
