"""What the live page (`convtap serve`) is kept current from: every step of the capture as the
page's data, held in gzip blocks, and which steps each reading of the capture changed.

A reading costs what changed, not what the capture holds. The rows added since the last reading
(past each table's last rowid) and the last `HOT` rows of each table (which the recorder updates
in place: a turn or a flow ending, a return paired with its call) are read; each names the steps
it is shown in (its own, and those of the calls whose lifecycle it is part of), and only those
steps are read again (`steps.build_steps`). A step whose JSON is the same as before is not
counted as changed. A row looked at again that now holds another row, or is gone (the findings
rewritten by `convtap audit`, a `convtap reprocess`), makes the next reading a whole one.

Memory: the blocks (the data gzip-compressed, about a tenth of its size), and per step its key,
its block and a hash of its JSON.
"""

from __future__ import annotations

import base64
import gzip
import sqlite3
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import orjson
import sqlite_utils

from convtap.report.page import packed
from convtap.report.steps import Step, StepKey, all_steps, build_steps
from convtap.store import timeline_queries as queries

BLOCK = 1000  # steps in a block (one changed is packed again: about 10 ms)
RECENT = 4096  # the JSON of the steps changed last, kept at hand for the pages to be sent
HISTORY = 256  # the readings whose changed steps are remembered (a page further behind reloads)


@dataclass
class Block:
    """Steps' JSON in one gzip block (a JSON array), written as base64 as the report writes it."""

    keys: list[StepKey] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    text: str = ""

    def steps(self) -> list[bytes]:
        if not self.keys:
            return []
        raw = gzip.decompress(base64.b64decode(self.text))[1:-1]
        out, at = [], 0
        for size in self.sizes:
            out.append(raw[at : at + size])
            at += size + 1  # the comma
        return out

    def pack(self, steps: list[bytes]) -> None:
        self.sizes = [len(s) for s in steps]
        self.text = str(packed(steps))


@dataclass(frozen=True)
class Reading:
    """What one reading changed: the steps whose JSON is new, those gone."""

    version: int
    changed: frozenset[StepKey]
    gone: frozenset[StepKey]


class Tracker:
    """Which rows each reading adds or changes; says when the capture was rewritten."""

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        self.hot: dict[str, dict[int, sqlite3.Row]] = {}

    def reset(self, capture: sqlite_utils.Database) -> None:
        for table in queries.WATCHED:
            self.last[table] = last = queries.last_rowid(capture, table)
            rows = queries.watched_rows(capture, table, max(last - queries.HOT, 0))
            self.hot[table] = {r[0]: r for r in rows}

    def read(self, capture: sqlite_utils.Database) -> dict[str, list[sqlite3.Row]] | None:
        """The rows added or changed, by table (a changed row as it was, too: what it was shown
        in changes as well); None when rows were replaced or removed."""
        found: dict[str, list[sqlite3.Row]] = {}
        for table in queries.WATCHED:
            before = self.hot[table]
            rows = queries.watched_rows(capture, table, max(self.last[table] - queries.HOT, 0))
            seen = {r[0]: r for r in rows}
            for rowid, was in before.items():
                now = seen.get(rowid)
                if now is None or now[1] != was[1]:  # gone, or another row in its place
                    return None
            found[table] = []
            for row in rows:
                old = before.get(row[0])
                if old is None:
                    found[table].append(row)
                elif tuple(old) != tuple(row):
                    found[table] += [old, row]
            last = rows[-1][0] if rows else self.last[table]
            self.last[table] = last
            self.hot[table] = {r[0]: r for r in rows if r[0] > last - queries.HOT}
        return found


def touched_steps(capture: sqlite_utils.Database, rows: dict[str, list[sqlite3.Row]]) -> set[str]:
    """The steps the rows are shown in: their own, and those of the calls whose lifecycle they
    are part of (a return's request ending, its continuation, the tree showing it)."""
    steps: set[str] = set()
    calls: set[str] = set()
    flows: set[str] = set()
    for row in rows.get("turns", []):
        steps.add(row["id"])
        flows.add(row["id"])
    for row in rows.get("flows", []):
        steps.add(row["id"])
        flows.add(row["id"])
    for row in rows.get("messages", []):
        steps.add(row["turn_id"] or "")
        calls.add(row["id"])
        if row["role"] == "assistant":
            flows.add(row["turn_id"] or "")
    for row in rows.get("tool_calls", []):
        steps.add(row["turn_id"] or "")
        calls.add(row["call_id"])
    for row in rows.get("tool_returns", []):
        steps.add(row["flow_id"] or "")
        calls.update(
            c for c in (row["call_id"], row["parent_message_id"], row["body_call_id"]) if c
        )
    for row in rows.get("findings", []):
        steps.add(row["flow_id"] or "")
        if row["call_id"]:
            calls.add(row["call_id"])
    nodes = {row["message_id"] or row["node_id"] for row in rows.get("conversation_nodes", [])}
    calls |= queries.calls_answered_in(capture, flows) | queries.calls_answered_by(capture, nodes)
    return steps | queries.call_steps(capture, calls)


class LiveModel:
    """Every step of a capture as the page's data, and what each reading changed."""

    def __init__(self) -> None:
        self.version = 0
        self.blocks: list[Block] = []
        self.where: dict[StepKey, tuple[int, int]] = {}  # step → (its block, hash of its JSON)
        self.by_id: dict[str, list[StepKey]] = {}  # a step id → its keys (one per conversation)
        self.recent: OrderedDict[StepKey, bytes] = OrderedDict()
        self.history: deque[Reading] = deque(maxlen=HISTORY)
        self.tracker = Tracker()

    def whole(self, capture: sqlite_utils.Database) -> Reading:
        """Read every step again (the first reading, a rewritten capture), `BLOCK` at a time:
        memory holds the blocks, never every step's values at once."""
        queries.shadow_indexes(capture)
        self.tracker.reset(capture)
        before, seen = set(self.where), set[StepKey]()
        changed: set[StepKey] = set()
        batch: dict[StepKey, Step] = {}
        for key, step in all_steps(capture):
            batch[key] = step
            if len(batch) == BLOCK:
                changed |= self._take(batch)
                seen.update(batch)
                batch = {}
        changed |= self._take(batch)
        seen.update(batch)
        gone = before - seen
        self._store({}, gone)
        return self._record(changed, gone)

    def _take(self, built: dict[StepKey, Step]) -> set[StepKey]:
        """Steps read as of the next reading: those whose JSON is new are stored."""
        version = self.version + 1
        changed: dict[StepKey, bytes] = {}
        for key, step in built.items():
            plain = orjson.dumps(step)
            digest = hash(plain)
            if key not in self.where or self.where[key][1] != digest:
                changed[key] = b'{"v":%d,' % version + plain[1:]  # the reading it is of, first
                self.where[key] = (self.where.get(key, (-1, 0))[0], digest)
        self._store(changed, set())
        return set(changed)

    def _record(self, changed: set[StepKey], gone: set[StepKey]) -> Reading:
        if changed or gone:
            self.version += 1
            self.history.append(Reading(self.version, frozenset(changed), frozenset(gone)))
        return Reading(self.version, frozenset(changed), frozenset(gone))

    def update(self, capture: sqlite_utils.Database, *, reopened: bool = False) -> Reading:
        """Read what changed since the last reading (everything, when the capture was
        rewritten). `reopened`: the connection is new, its shadow indexes are made again."""
        added = dict(self.tracker.last)
        rows = self.tracker.read(capture)
        if rows is None:
            return self.whole(capture)
        if reopened:
            queries.shadow_indexes(capture)
        else:
            queries.extend_shadow_indexes(capture, added)
        if not any(rows.values()):
            return self._apply({}, set())
        steps = touched_steps(capture, rows)
        before = {key for step in steps for key in self.by_id.get(step, [])}
        return self._apply(build_steps(capture, steps), before)

    def _apply(self, built: dict[StepKey, Step], before: set[StepKey]) -> Reading:
        """Take the steps read; those of `before` not among them are gone."""
        changed = self._take(built)
        gone = before - set(built)
        self._store({}, gone)
        return self._record(changed, gone)

    def _store(self, changed: dict[StepKey, bytes], gone: set[StepKey]) -> None:
        by_block: dict[int, dict[StepKey, bytes | None]] = {}
        for key in gone:
            index, _ = self.where.pop(key)
            by_block.setdefault(index, {})[key] = None
            self.recent.pop(key, None)
            keys = self.by_id.get(key[1], [])
            if key in keys:
                keys.remove(key)
        fresh = [key for key in changed if self.where[key][0] < 0]
        for key, text in changed.items():
            if self.where[key][0] >= 0:
                by_block.setdefault(self.where[key][0], {})[key] = text
            self.recent[key] = text
            self.recent.move_to_end(key)
        while len(self.recent) > RECENT:
            self.recent.popitem(last=False)
        for n, updates in by_block.items():
            block = self.blocks[n]
            texts: dict[StepKey, bytes | None] = dict(zip(block.keys, block.steps(), strict=True))
            texts.update(updates)
            block.keys = [k for k in block.keys if texts[k] is not None]
            block.pack([t for k in block.keys if (t := texts[k]) is not None])
        self._append(fresh, changed)

    def _append(self, fresh: list[StepKey], changed: dict[StepKey, bytes]) -> None:
        """New steps go at the end: into the last block, and new blocks past it."""
        at = 0
        while at < len(fresh):
            if not self.blocks or len(self.blocks[-1].keys) >= BLOCK:
                self.blocks.append(Block())
            block = self.blocks[-1]
            room = BLOCK - len(block.keys)
            taken = fresh[at : at + room]
            texts = block.steps() + [changed[k] for k in taken]
            block.keys += taken
            block.pack(texts)
            for key in taken:
                self.where[key] = (len(self.blocks) - 1, self.where[key][1])
                self.by_id.setdefault(key[1], []).append(key)
            at += room

    def step_json(self, key: StepKey) -> bytes | None:
        """A step's JSON as it is now (None when it is gone)."""
        if key in self.recent:
            return self.recent[key]
        if key not in self.where:
            return None
        block = self.blocks[self.where[key][0]]
        return dict(zip(block.keys, block.steps(), strict=True)).get(key)

    def since(self, version: int) -> tuple[set[StepKey], set[StepKey]] | None:
        """The steps changed and gone after reading `version`; None when that is forgotten."""
        if version == self.version:
            return set(), set()
        readings = [r for r in self.history if r.version > version]
        if not readings or readings[0].version != version + 1:
            return None
        changed: set[StepKey] = set()
        gone: set[StepKey] = set()
        for r in readings:
            changed = (changed - r.gone) | r.changed
            gone = (gone - r.changed) | r.gone
        return changed, gone

    def data(self) -> Iterator[str]:
        """The page's data: every block, one a line."""
        for block in self.blocks:
            if block.keys:
                yield block.text + "\n"


def keys_json(keys: Iterable[StepKey]) -> list[list[str]]:
    return [list(key) for key in keys]
