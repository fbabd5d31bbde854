"""The example turns under captures/examples/sse/ and their golden decodes.

`make goldens` (python -m tests.goldens --write) rewrites the goldens after an intended change.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from convtap.redact.redactor import Redactor
from convtap.wire.turn import decode_turn

EXAMPLES = Path(__file__).resolve().parent.parent / "captures" / "examples" / "sse"
CASES: dict[str, dict[str, Any]] = json.loads((EXAMPLES / "cases.json").read_text())


def inputs(name: str) -> tuple[list[bytes], list[str]]:
    case = CASES[name]
    bodies = [(EXAMPLES / body).read_bytes() for body in case["bodies"]]
    frames = (EXAMPLES / case["ws"]).read_text().splitlines() if "ws" in case else []
    return bodies, frames


def decoded(name: str) -> dict[str, Any]:
    bodies, frames = inputs(name)
    result: dict[str, Any] = Redactor(b"golden").json(decode_turn(bodies, frames).result())
    return result


def golden_path(name: str) -> Path:
    return EXAMPLES / f"{name}.golden.json"


def main() -> None:
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.goldens --write")
    for name in CASES:
        text = json.dumps(decoded(name), ensure_ascii=False, indent=2) + "\n"
        golden_path(name).write_text(text)
        print(f"wrote {golden_path(name)}")


if __name__ == "__main__":
    main()
