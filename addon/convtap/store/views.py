"""What the store's reads return beside the tables' own row types (`store.rows`): one frozen
type per view or query a command reads, made from the query's row by `read`, given to a JSON
output by `as_json` (the keys in the order the query names its columns)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from convtap.vocab import CallKind, WireProtocol


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One call of the `call_ledger` view: the call, its first return, what became of it."""

    call_id: str
    protocol: WireProtocol
    tool: str | None
    namespace: str | None  # Responses API: the namespace tool of the called function
    kind: CallKind | None
    recipient: str | None
    conversation_id: str | None
    turn_id: str | None
    called_at: float | None
    complete: bool
    return_id: str | None
    returned_at: float | None
    answered: bool
    accepted: bool
    continued: bool
    findings: int  # findings on the call

    @classmethod
    def read(cls, row: Mapping[str, Any]) -> LedgerRow:
        values: dict[str, Any] = {name: row.get(name) for name in _LEDGER}
        for flag in ("complete", "answered", "accepted", "continued"):
            values[flag] = bool(values[flag])
        return cls(**values)

    @property
    def server_run(self) -> bool:
        """A tool the server runs in the stream (f/conversation, not `local`): it owes no
        return."""
        return self.protocol != WireProtocol.RESPONSES and self.kind not in (None, CallKind.LOCAL)

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _LEDGER}


_LEDGER = tuple(f.name for f in dataclasses.fields(LedgerRow))
