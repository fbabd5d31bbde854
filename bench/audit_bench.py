"""Audit time against capture size: calls audited per second at 10k, 30k and 100k calls.

    python bench/audit_bench.py [--sizes 10000 30000 100000]

Each capture holds N contract-shaped sessions: the turn declaring `alefita_way` and `handoff`, the
call, a prepare, the return (one in ten with a contract breach), the call and return messages.
The audit replays the whole capture and rewrites its findings; linear time shows as a flat
calls-per-second column.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from convtap.ingest.capture import audit_capture
from convtap.mock.refclient import signatures
from convtap.store.database import connect, insert_sql
from convtap.wire.jsonvalue import dumps

SIGNATURES = signatures()


def session(n: int) -> dict[str, list[dict[str, Any]]]:
    conv, call, ret = f"conv-{n}", f"call-{n}", f"ret-{n}"
    at = 1_787_000_000.0 + n * 10
    user = {"id": f"user-{n}", "author": {"role": "user"}, "content": {"parts": ["hi"]}}
    turn = {
        "action": "next",
        "messages": [user],
        "local_function_signatures": SIGNATURES,
        "app_attest_challenge": f"challenge-{n}-a",
    }
    body = {"call_id": call, "result": {"message": "eco"}, "tool": "alefita_way"}
    tool = {
        "id": ret,
        "author": {"role": "tool", "name": "alefita_way", "metadata": {}},
        "recipient": "alefita_way" if n % 10 == 0 else "all",
        "channel": "commentary",
        "content": {"content_type": "code", "text": json.dumps(body)},
        "status": "finished_successfully",
        "end_turn": None,
        "weight": 1,
        "metadata": {"is_visually_hidden_from_conversation": True},
    }
    back = {
        "action": "next",
        "messages": [tool],
        "conversation_id": conv,
        "parent_message_id": call,
        "local_function_signatures": SIGNATURES,
        "app_attest_challenge": f"challenge-{n}-b",
    }
    return {
        "flows": [
            {"id": f"t{n}", "kind": "conversation", "started_at": at, "request_body": dumps(turn)},
            {
                "id": f"p{n}",
                "kind": "prepare",
                "started_at": at + 3,
                "request_body": dumps({"conversation_id": conv}),
            },
            {
                "id": f"r{n}",
                "kind": "conversation",
                "started_at": at + 4,
                "request_body": dumps(back),
            },
        ],
        "tool_calls": [
            {
                "call_id": call,
                "protocol": "f-conversation",
                "turn_id": f"t{n}",
                "conversation_id": conv,
                "recipient": "local.alefita_way",
                "kind": "local",
                "tool": "alefita_way",
                "arguments": dumps({"message": "eco"}),
                "complete": 1,
                "called_at": at + 2,
            }
        ],
        "messages": [
            {
                "id": call,
                "conversation_id": conv,
                "turn_id": f"t{n}",
                "role": "assistant",
                "first_seen_at": at + 1,
                "updated_at": at + 1,
            },
            {
                "id": ret,
                "conversation_id": conv,
                "turn_id": f"r{n}",
                "role": "tool",
                "first_seen_at": at + 5,
                "updated_at": at + 5,
            },
        ],
    }


def build(path: Path, count: int) -> None:
    db = connect(path)
    tables: dict[str, list[dict[str, Any]]] = {"flows": [], "tool_calls": [], "messages": []}
    for n in range(count):
        for table, rows in session(n).items():
            tables[table] += rows
    with db.conn:
        for table, rows in tables.items():
            db.conn.executemany(
                insert_sql("insert", table, tuple(rows[0])), [tuple(r.values()) for r in rows]
            )
    db.conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    args = parser.parse_args()
    print(
        f"{'calls':>8} {'returns':>8} {'findings':>9} {'seconds':>8} {'calls/s':>9}"
        f" {'vs smallest':>12}"
    )
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = Path(tmp) / f"audit-{size}.db"
            build(path, size)
            start = time.perf_counter()
            result = audit_capture(path)
            seconds = time.perf_counter() - start
            summary = result.summary()
            expected = (size + 9) // 10
            assert summary["findings"]["error"] == expected, summary
            rate = size / seconds
            first = first or rate
            print(
                f"{size:>8,} {summary['returns']:>8,} {len(result.findings):>9,} {seconds:>8.2f}"
                f" {rate:>9,.0f} {rate / first:>11.2f}x"
            )
    print("linear time: calls/s stays flat as the capture grows (the last column near 1.00x)")


if __name__ == "__main__":
    main()
