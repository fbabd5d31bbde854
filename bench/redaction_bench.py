"""The long run of the redaction property tests (`tests/redact/test_stream.py`): many more
generated streams than `make test` runs, every secret kind in turn, each through the recorder and
checked (no 8 characters of the secret anywhere in the capture; every message's text, stored and
decoded again, its text with the secret replaced).

    python bench/redaction_bench.py [--examples 400] [--seed 1]

Prints, per form of the wire, the streams checked, the ones that failed (0 is the only right
answer: the run exits 1 otherwise, with the first failure), and the time a stream took against
the time its decoding alone took, the same streams, in one run.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the checkout's `tests` importable
    sys.path.insert(0, str(ROOT))

from convtap.wire.responses import decode_responses  # noqa: E402
from convtap.wire.turn import decode_turn  # noqa: E402

from tests.redact import streams  # noqa: E402
from tests.redact.test_stream import CHECKS, secret_of  # noqa: E402

DECODE_ONLY = {
    "f/conversation": lambda rng, s: decode_turn([streams.delta_stream(rng, s).body]),
    "responses": lambda rng, s: decode_responses([streams.responses_stream(rng, s).body]),
    "responses socket": lambda rng, s: streams.responses_frames(rng, s),
    "user socket": lambda rng, s: streams.handoff_frames(rng, s, "conversation-turn-b"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=400, help="streams per form")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    kinds = sorted(streams.KINDS)
    print(f"{'form':<18} {'streams':>8} {'failed':>7} {'ms/stream':>10} {'decode ms':>10} "
          f"{'ratio':>6}")  # fmt: skip
    failed_any = False
    for form, check in CHECKS.items():
        failures: list[str] = []
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            for n in range(args.examples):
                rng = random.Random(args.seed * 1_000_003 + n)
                kind = kinds[n % len(kinds)]
                try:
                    check(Path(folder), kind, rng)
                except Exception:
                    failures.append(f"{form} example {n} ({kind}):\n{traceback.format_exc()}")
        took = (time.perf_counter() - started) / args.examples
        started = time.perf_counter()
        for n in range(args.examples):
            rng = random.Random(args.seed * 1_000_003 + n)
            secret, _ = secret_of(kinds[n % len(kinds)], rng)
            DECODE_ONLY[form](rng, secret)
        floor = (time.perf_counter() - started) / args.examples
        print(f"{form:<18} {args.examples:>8} {len(failures):>7} {took * 1000:>10.1f} "
              f"{floor * 1000:>10.2f} {took / floor:>6.0f}×")  # fmt: skip
        if failures:
            failed_any = True
            print(failures[0], file=sys.stderr)
    return 1 if failed_any else 0


if __name__ == "__main__":
    sys.exit(main())
