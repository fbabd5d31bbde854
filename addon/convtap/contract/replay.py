"""The rule of a replayed capture: `replay-miss`, a request `convtap mock --replay` had no
recorded answer for (docs/commands.md, "convtap mock --replay")."""

from __future__ import annotations

from dataclasses import dataclass

from convtap.contract.registry import Violation, Where, check


@dataclass(frozen=True)
class MissFacts:
    """A replay's miss: its message (the nearest recorded request, the paths that differ)."""

    message: str
    where: Where


@check("replay-miss", MissFacts)
def replay_missed(m: MissFacts) -> Violation:
    return Violation(
        m.message,
        "a request the replayed capture recorded (the client sends what it sent)",
        {"answer": "HTTP 400 replay_miss"},
    )
