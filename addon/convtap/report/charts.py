"""The report's pictures: how long each request took (to its first event, in all), the tokens
each Responses API answer used and what it cost, and the calls and findings over time, as inline
SVG.

Bounded whatever the capture's size: past `MAX_BARS` requests, consecutive requests share a
bar (mean times, summed tokens), and calls and findings are counted per time bucket in SQL.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

import jinja2
import sqlite_utils
from markupsafe import Markup

from convtap.report.svg import Bar, Series, bar_chart, number
from convtap.store import report_queries as queries
from convtap.store import trace_queries
from convtap.store.views import RequestTime
from convtap.wire.jsonvalue import loads_or_none
from convtap.wire.sse import SSEParser

TEMPLATE = resources.files("convtap.report") / "charts.html.j2"
MAX_BARS = 120
STEPS = (0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 21600, 86400)  # bucket widths, s

LATENCY = (Series("first event", "#175cd3"), Series("rest of the answer", "#9ec5fe"))
TOKENS = (Series("cached input", "#067647"), Series("input", "#75e0a7"),
          Series("reasoning", "#b54708"), Series("output", "#fec84b"))  # fmt: skip
ACTIVITY = (Series("calls", "#175cd3"), Series("findings", "#b42318"))
COST = (Series("cost", "#6941c6"),)
T = TypeVar("T")


@dataclass(frozen=True)
class Usage:
    """A Responses API answer's `usage`: input (cached part of it) and output (reasoning part)."""

    input: int = 0
    cached: int = 0
    output: int = 0
    reasoning: int = 0

    @classmethod
    def of(cls, value: Any) -> Usage | None:
        if not isinstance(value, dict):
            return None
        cached = _count(value.get("input_tokens_details"), "cached_tokens")
        reasoning = _count(value.get("output_tokens_details"), "reasoning_tokens")
        return cls(_count(value, "input_tokens"), cached, _count(value, "output_tokens"), reasoning)

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input + other.input, self.cached + other.cached,
                     self.output + other.output, self.reasoning + other.reasoning)  # fmt: skip

    def words(self) -> str:
        return (f"{self.input:,} input tokens ({self.cached:,} cached), "
                f"{self.output:,} output ({self.reasoning:,} reasoning)")  # fmt: skip


def _count(value: Any, key: str) -> int:
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else 0


def event_usage(sse_text: str | None) -> Usage | None:
    """The usage the last of a raw row's Responses events carries (`response.usage` in its
    data), if any: a row holds the events of one chunk."""
    if not sse_text:
        return None
    for event in reversed(SSEParser().feed(sse_text.encode("utf-8", "surrogateescape") + b"\n\n")):
        value = loads_or_none(event.data)
        response = value.get("response") if isinstance(value, dict) else None
        if isinstance(response, dict) and (usage := Usage.of(response.get("usage"))) is not None:
            return usage
    return None


@dataclass(frozen=True)
class Request:
    """One request's times and, for the Responses API, its usage."""

    number: int  # its place in the capture, from 1
    protocol: str
    started_at: float | None
    ended_at: float | None
    first_at: float | None
    usage: Usage | None

    @classmethod
    def of(cls, number: int, row: RequestTime) -> Request:
        usage = Usage.of(loads_or_none(row.usage)) if row.usage else None
        return cls(number, row.protocol, row.started_at, row.ended_at, row.first_at,
                   usage or event_usage(row.usage_event))  # fmt: skip

    @property
    def total_ms(self) -> float | None:
        return _ms(self.started_at, self.ended_at)

    @property
    def first_ms(self) -> float | None:
        return _ms(self.started_at, self.first_at)


def _ms(start: float | None, end: float | None) -> float | None:
    return max(end - start, 0.0) * 1000 if start is not None and end is not None else None


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def groups(requests: Iterable[T], count: int, most: int) -> Iterator[list[T]]:
    """The requests in runs of consecutive ones, so that there are at most `most` runs (each
    of one request when `count` is no more than `most`). Holds one run at a time."""
    size = max(math.ceil(count / most), 1)
    run: list[T] = []
    for request in requests:
        run.append(request)
        if len(run) == size:
            yield run
            run = []
    if run:
        yield run


def _named(run: list[Request]) -> str:
    first, last = run[0], run[-1]
    if len(run) == 1:
        return f"request {first.number} ({first.protocol}, started {_clock(first.started_at)})"
    return (f"requests {first.number}–{last.number} (started {_clock(first.started_at)}–"
            f"{_clock(last.started_at)})")  # fmt: skip


def _tick(run: list[Request]) -> str:
    return str(run[0].number)


def latency_bar(run: list[Request]) -> Bar:
    """A run's time to first event and in all (their means when it is more than one)."""
    first, total = _mean(r.first_ms for r in run), _mean(r.total_ms for r in run)
    mean = "mean " if len(run) > 1 else ""
    said = [f"{mean}first event {_ms_words(first)}", f"{mean}total {_ms_words(total)}"]
    if len(run) > 1:
        said.append(f"longest {_ms_words(max((r.total_ms or 0.0 for r in run), default=0.0))}")
    first_part = min(first or 0.0, total or 0.0)
    return Bar(f"{_named(run)}: {', '.join(said)}",
               (first_part, max((total or 0.0) - first_part, 0.0)), _tick(run))  # fmt: skip


def token_bar(run: list[Request]) -> Bar:
    """A run's tokens, summed: cached input, the rest of the input, reasoning, other output."""
    used = sum((r.usage for r in run if r.usage), Usage())
    values = (used.cached, max(used.input - used.cached, 0), used.reasoning,
              max(used.output - used.reasoning, 0))  # fmt: skip
    return Bar(f"{_named(run)}: {used.words()}", tuple(float(v) for v in values), _tick(run))


def _ms_words(value: float | None) -> str:
    return "unknown" if value is None else f"{number(value)} ms"


def _clock(at: float | None) -> str:
    if at is None:
        return "-"
    whole = math.floor(at)
    stamp = f"{whole % 86400 // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
    return f"{stamp}.{int((at - whole) * 1000):03d}"


def activity_bars(capture: sqlite_utils.Database) -> list[Bar]:
    """Calls made and findings found per time bucket, from the first to the last; a bucket is
    a round number of seconds, as few as keep the buckets at most `MAX_BARS / 2`."""
    start, end = queries.activity_span(capture)
    if start is None or end is None:
        return []
    most = MAX_BARS // 2
    width = next((s for s in STEPS if (end - start) / s < most), (end - start) / most or 1.0)
    start = math.floor(start / width) * width  # buckets start on a round time
    buckets = min(math.floor((end - start) / width) + 1, most)
    counts = {b: (c, f) for b, c, f in queries.activity(capture, start, width, buckets)}
    bars = []
    for n in range(buckets):
        calls, findings = counts.get(n, (0, 0))
        at = start + n * width
        words = f"{_plural(calls, 'call')}, {_plural(findings, 'finding')}"
        tick = _clock(at)[:8] if width >= 1 else _clock(at)[3:]
        bars.append(Bar(f"{_clock(at)} to {_clock(at + width)}: {words}",
                        (float(calls), float(findings)), tick))  # fmt: skip
    return bars


def cost_bars(capture: sqlite_utils.Database) -> list[Bar]:
    """What each Responses API answer cost, in US cents, in the order answered (consecutive
    answers summed past `MAX_BARS`; an unpriced one draws nothing and says so)."""
    count = trace_queries.answer_count(capture)
    bars = []
    for n, run in enumerate(groups(trace_queries.answer_costs(capture), count, MAX_BARS), 1):
        known = [r.cost_usd for r in run if r.cost_usd is not None]
        unknown = len(run) - len(known)
        cents = sum(known) * 100
        said = f"{_usd(sum(known))}" if not unknown else (
            f"unknown ({unknown} of {len(run)} unpriced: {run[-1].pricing})")  # fmt: skip
        models = ", ".join(sorted({r.model or "no model" for r in run}))
        name = "answer" if len(run) == 1 else f"{len(run)} answers"
        bars.append(Bar(f"{name} {n} ({models}, {_clock(run[0].answered_at)}): {said}",
                        (cents,), str(n)))  # fmt: skip
    return bars


def cost_words(capture: sqlite_utils.Database) -> str | None:
    """The capture's cost and prompt cache in one sentence (None without a priced answer)."""
    total = trace_queries.capture_cost(capture)
    if not total.answers:
        return None
    unpriced = total.answers - total.priced
    cost = _usd(total.cost_usd) if not unpriced else (
        f"unknown ({unpriced} of {total.answers} answers unpriced; the others "
        f"{_usd(total.cost_usd)})")  # fmt: skip
    ratio = f"{total.cached_tokens / total.input_tokens:.0%}" if total.input_tokens else "none"
    return (f"{_plural(total.answers, 'answer')} cost {cost} (genai-prices); the prompt "
            f"cache gave {ratio} of {total.input_tokens:,} input tokens")  # fmt: skip


def _usd(value: float) -> str:
    return f"${value:,.6f}".rstrip("0").rstrip(".") if value else "$0"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def charts(capture: sqlite_utils.Database) -> Markup:
    """The section of the page with the three charts (or what says there is nothing to draw)."""
    count = queries.request_count(capture)
    requests = (Request.of(n, row) for n, row in enumerate(queries.request_times(capture), 1))
    latency, tokens = [], []
    for run in groups(requests, count, MAX_BARS):
        latency.append(latency_bar(run))
        if any(r.usage for r in run):
            tokens.append(token_bar(run))
    per = math.ceil(count / MAX_BARS) if count > MAX_BARS else 1
    drawn = {
        "per": per,
        "latency": bar_chart("chart-latency", "Time to first event and in all, per request",
                             "ms", LATENCY, latency) if latency else None,
        "tokens": bar_chart("chart-tokens", "Tokens per Responses API answer", "tokens",
                            TOKENS, tokens) if tokens else None,
        "activity": _activity(capture),
        "cost": _cost(capture),
        "cost_words": cost_words(capture),
    }  # fmt: skip
    template = _environment().from_string(TEMPLATE.read_text(encoding="utf-8"))
    return Markup(template.render(drawn))


def _activity(capture: sqlite_utils.Database) -> Markup | None:
    bars = activity_bars(capture)
    if not bars:
        return None
    return bar_chart("chart-activity", "Calls and findings over time", "", ACTIVITY, bars)


def _cost(capture: sqlite_utils.Database) -> Markup | None:
    bars = cost_bars(capture)
    if not bars:
        return None
    return bar_chart("chart-cost", "Cost per Responses API answer", "US cents", COST, bars)


def _environment() -> jinja2.Environment:
    return jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)  # fmt: skip
