"""Stacked bar charts as inline SVG: values in, markup out, nothing else.

A chart is drawn on the server so that the page needs no script and no asset to show it. It
reads without sight and without a mouse too: the chart's <title> and <desc> name it and say
its largest bar, every bar is a group whose <title> says what it is and its values in words
(a tooltip on hover), and the axis and legend are <text>. Colours are presentation attributes,
which the report's Content-Security-Policy allows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

WIDTH, HEIGHT = 720, 200
LEFT, RIGHT, TOP, BOTTOM = 64, 8, 28, 22  # room for the y axis, the legend and the ticks
TICKS = 6  # bars labelled under the axis, at most


@dataclass(frozen=True)
class Series:
    """One part of every bar: its name in the legend and its colour."""

    name: str
    color: str


@dataclass(frozen=True)
class Bar:
    """One column: a value per series (stacked in series order, bottom first), the words its
    <title> says, and the short label written under the axis when it is one of those shown."""

    title: str
    values: tuple[float, ...]
    tick: str = ""

    @property
    def total(self) -> float:
        return sum(self.values)


def bar_chart(
    chart_id: str, title: str, unit: str, series: Sequence[Series], bars: Sequence[Bar]
) -> Markup:
    """A stacked bar chart, `unit` naming what the y axis counts ("ms", "tokens")."""
    top = nice_ceiling(max((bar.total for bar in bars), default=0.0))
    largest = max(bars, key=lambda bar: bar.total) if bars else None
    desc = f"{len(bars)} bars; the largest: {largest.title}" if largest else "no bars"
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(len(bars), 1)
    width = max(step * 0.8, 1.0)
    out = [
        Markup('<svg id="{}" class="chart" role="img" aria-labelledby="{}-title {}-desc" '
               'viewBox="0 0 {} {}" width="100%" preserveAspectRatio="xMinYMin meet" '
               'font-family="system-ui, sans-serif" font-size="11">').format(
            chart_id, chart_id, chart_id, WIDTH, HEIGHT),
        Markup('<title id="{}-title">{}</title><desc id="{}-desc">{}</desc>').format(
            chart_id, title, chart_id, desc),
        *_legend(series),
        *_axis(top, unit, plot_w, plot_h),
    ]  # fmt: skip
    every = math.ceil(len(bars) / TICKS) if bars else 1
    for n, bar in enumerate(bars):
        x = LEFT + n * step + (step - width) / 2
        out.append(Markup('<g class="bar"><title>{}</title>').format(bar.title))
        base = float(TOP + plot_h)
        for value, part in zip(bar.values, series, strict=True):
            height = plot_h * value / top if top else 0.0
            if height > 0:
                base -= height
                out.append(Markup('<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/>').format(
                    _n(x), _n(base), _n(width), _n(height), part.color))  # fmt: skip
        out.append(Markup("</g>"))
        if bar.tick and n % every == 0:
            out.append(Markup('<text x="{}" y="{}" text-anchor="middle" fill="#5d6877">{}</text>')
                       .format(_n(x + width / 2), HEIGHT - 6, bar.tick))  # fmt: skip
    out.append(Markup("</svg>"))
    return Markup("").join(out)


def _legend(series: Sequence[Series]) -> list[Markup]:
    out, x = [], float(LEFT)
    for part in series:
        out.append(Markup('<rect x="{}" y="8" width="10" height="10" fill="{}"/>'
                          '<text x="{}" y="17">{}</text>').format(
            _n(x), part.color, _n(x + 14), part.name))  # fmt: skip
        x += 22 + 6.5 * len(part.name)
    return out


def _axis(top: float, unit: str, plot_w: float, plot_h: float) -> list[Markup]:
    """The baseline, a line at half and at the top, each labelled with its value; the unit
    once, above them."""
    out = [Markup('<text x="{}" y="17" text-anchor="end" fill="#5d6877">{}</text>').format(
        LEFT - 6, unit)] if unit else []  # fmt: skip
    for share in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - share)
        out.append(Markup('<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#dbe0e6"/>'
                          '<text x="{}" y="{}" text-anchor="end" fill="#5d6877">{}</text>')
                   .format(LEFT, _n(LEFT + plot_w), _n(y), _n(y), LEFT - 6, _n(y + 4),
                           number(top * share)))  # fmt: skip
    return out


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above `value` (0 for nothing)."""
    if value <= 0:
        return 0.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value * (1 - 1e-9))


def number(value: float) -> str:
    """A value as a label says it: whole numbers with thousands separated, else one decimal."""
    if abs(value - round(value)) < 1e-9 or abs(value) >= 100:
        return f"{round(value):,}"
    return f"{value:,.1f}"


def _n(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")
