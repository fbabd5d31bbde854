"""`convtap report`: a capture as one self-contained HTML page, written as it is read.

The capture is opened read-only and streamed: the summary is a few counts and the pictures are
aggregated (`charts`), both rendered by the template; the conversations are data, each step as
JSON (`steps`), packed in gzip blocks written as base64 into the page one after the other, so
that the page stays small and memory stays flat whatever the capture's size. The page's own
script (view.js) draws the rows in view from them. Everything in a capture is untrusted text:
the template escapes all it prints, and the script puts the data's strings in as text only.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, TextIO

import jinja2
import orjson
import sqlite_utils
from markupsafe import Markup

from convtap.contract.formats import convtap_version
from convtap.contract.registry import SEVERITIES, registry
from convtap.export.files import is_part_of, write_output
from convtap.report.charts import charts
from convtap.report.steps import Step, StepKey, all_steps
from convtap.store import report_queries as queries
from convtap.store import timeline_queries
from convtap.store.database import StoreError, open_readonly
from convtap.wire.jsonvalue import loads_or_none

TEMPLATE = resources.files("convtap.report") / "report.html.j2"
ITEMS = resources.files("convtap.report") / "items.js"
LIST = resources.files("convtap.report") / "list.js"
VIEW = resources.files("convtap.report") / "view.js"
DATA = resources.files("convtap.report") / "data.js"
SCRIPTS = (ITEMS, LIST, VIEW, DATA)  # the report's scripts, in the order they run
LISTED = 1000  # decode errors and failures listed at most (the summary counts them all)
FIRST_BLOCK = 40  # steps in the first block: the first screen, drawn before the rest is read
BLOCK = 2000  # steps in every later block
NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_-]")
# The controls that reorder the text after them (embeddings, overrides, isolates): a tool name
# or an id with one in it would read as something else.
BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


class ReportError(Exception):
    """The page cannot be written where it was asked for."""


def report_path(db: Path) -> Path:
    """Where the page of a capture goes by default: beside it, `.html` added to its name."""
    return db.with_name(f"{db.name}.html")


def write_report(db: Path, output: Path) -> Path:
    """Write the page of the capture `db` into `output`, replaced whole (never half-written),
    mode 0600 like the capture it shows."""
    capture = open_readonly(db)
    if is_part_of(output, db):
        capture.conn.close()
        raise ReportError(f"the report would replace the capture {db} itself")
    template = environment().from_string(TEMPLATE.read_text(encoding="utf-8"))

    def write(out: TextIO) -> None:
        with queries.one_reading(capture):
            timeline_queries.shadow_indexes(capture)
            context = {**page(capture, db), **summary_parts(capture),
                       "data": data_blocks(all_steps(capture))}  # fmt: skip
            for piece in template.generate(context):
                out.write(piece)

    try:
        write_output(output, write)  # into what the user named: never a FIFO replaced
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{db} cannot be read: {exc}") from exc
    except OSError as exc:
        raise ReportError(f"cannot write {output}: {exc.strerror or exc}") from exc
    finally:
        capture.conn.close()
    return output


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        autoescape=True,  # a capture is untrusted input
        finalize=visible,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, clock=clock, json=compact, text=text, pretty=pretty,
                       css=css_name, visible=visible)  # fmt: skip
    return env


def page(capture: sqlite_utils.Database, db: Path) -> dict[str, Any]:
    """What the template is given for everything but the summary, the pictures (`summary_parts`)
    and the conversations' data (`data_blocks`)."""
    return {
        "source": str(db),
        "generated_at": time.time(),
        "version": convtap_version(),
        "severities": SEVERITIES,
        "registry": registry(),
        "tools": queries.tools(capture),
        "scripts": [script(s) for s in SCRIPTS],
        "script_src": script_src(*SCRIPTS),
    }


def summary_parts(capture: sqlite_utils.Database) -> dict[str, Any]:
    """What the summary and the pictures are rendered from."""
    return {
        "summary": Summary.of(capture),
        "listed": LISTED,
        "decode_errors": queries.decode_errors(capture, LISTED),
        "failures": queries.failures(capture, LISTED),
        "charts": charts(capture),
    }


def data_blocks(steps: Iterable[tuple[StepKey, Step]]) -> Iterator[Markup]:
    """The steps as the page's data: blocks of JSON arrays, each compressed (gzip) and written
    as base64, one a line; the first is small, so that the first screen is drawn at once."""
    block: list[bytes] = []
    size = FIRST_BLOCK
    for _, step in steps:
        block.append(orjson.dumps(step))
        if len(block) == size:
            yield packed(block)
            block, size = [], BLOCK
    if block:
        yield packed(block)


def packed(steps: list[bytes]) -> Markup:
    """Steps' JSON as one block: a JSON array, gzip, base64 (nothing the HTML parser reads)."""
    text = b"[" + b",".join(steps) + b"]"
    return Markup(base64.b64encode(gzip.compress(text, compresslevel=6, mtime=0)).decode())


def script(source: Traversable) -> Markup:
    return Markup(source.read_text(encoding="utf-8"))


def script_src(*sources: Traversable) -> str:
    """The Content-Security-Policy's `script-src`: the digest of each of the page's scripts,
    so that no other script runs (were markup from a capture ever to get in)."""
    digests = (hashlib.sha256(script(s).encode()).digest() for s in sources)
    return " ".join(f"'sha256-{base64.b64encode(d).decode()}'" for d in digests)


# -- what the template formats with ----------------------------------------------------------


def when(at: float | None) -> str:
    """A time as people read it in a report that travels: UTC, to the millisecond."""
    if at is None:
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))
    return f"{stamp}.{int(at * 1000) % 1000:03d}"


def clock(at: float | None) -> str:
    return when(at)[11:] if at is not None else "-"


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def text(value: Any) -> Markup:
    """Escaped for an element's content, never an attribute: only &, < and > need it there,
    and leaving quotes alone keeps JSON readable and the page smaller."""
    return Markup(str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def visible(value: Any) -> Any:
    """What the page prints, each bidi control in it shown as its escape (`\\u202e`): every
    value printed goes through it (the page's own markup has none)."""
    if not isinstance(value, str) or not BIDI_CONTROLS.search(value):
        return value
    shown = BIDI_CONTROLS.sub(lambda found: f"\\u{ord(found[0]):04x}", value)
    return Markup(shown) if isinstance(value, Markup) else shown


def css_name(value: Any) -> str:
    """A value from a capture as one class name: a role or severity with spaces in it would
    otherwise add classes of its own (`assistant finding` styled as a finding)."""
    return NOT_IN_A_NAME.sub("-", str(value))


def pretty(json_text: str | None) -> str:
    """JSON text indented, or the text as it is when it is not JSON."""
    value = loads_or_none(json_text)
    if value is None:
        return json_text or ""
    return json.dumps(value, ensure_ascii=False, indent=2)


# -- the summary -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """The counts at the top of the page."""

    flows: int
    turns: int
    conversations: int
    calls: int
    responses_calls: int
    returns: int
    answered: int
    accepted: int
    continued: int
    severities: dict[str, int]  # every severity, none left out
    rules: list[tuple[str, str, int]]  # rule id, severity, findings; in registry order
    clients: list[tuple[str, int, int]]  # user agent, flows, turns
    decode_errors: int
    failures: int

    @property
    def findings(self) -> int:
        return sum(self.severities.values())

    @classmethod
    def of(cls, capture: sqlite_utils.Database) -> Summary:
        severities: dict[str, int] = dict.fromkeys(SEVERITIES, 0)
        rules = []
        for rule, severity, n in queries.findings_by_rule(capture):
            severities[severity] = severities.get(severity, 0) + n
            rules.append((rule, severity, n))
        order = {rule_id: n for n, rule_id in enumerate(registry())}
        rules.sort(key=lambda r: (order.get(r[0], len(order)), r[0]))
        return cls(**queries.summary_counts(capture), severities=severities, rules=rules,
                   clients=list(queries.clients(capture)))  # fmt: skip
