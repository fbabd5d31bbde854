"""The stacked bar chart: values in, SVG out (`convtap.report.svg`)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from convtap.report.svg import HEIGHT, TICKS, Bar, Series, bar_chart, nice_ceiling, number

SVG = "{http://www.w3.org/2000/svg}"
TWO = (Series("first", "#111111"), Series("second", "#222222"))


def parse(markup: str) -> ET.Element:
    return ET.fromstring(
        str(markup).replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
    )


def bars_of(svg: ET.Element) -> list[ET.Element]:
    return [g for g in svg.iter(f"{SVG}g") if g.get("class") == "bar"]


def test_every_bar_is_a_group_titled_with_its_values() -> None:
    bars = [Bar("one: 3 and 1", (3.0, 1.0), "1"), Bar("two: 8 and 2", (8.0, 2.0), "2")]
    svg = parse(bar_chart("c", "A chart", "ms", TWO, bars))
    assert svg.get("role") == "img"
    assert svg.find(f"{SVG}title").text == "A chart"  # type: ignore[union-attr]
    assert "two: 8 and 2" in svg.find(f"{SVG}desc").text  # type: ignore[union-attr,operator]
    groups = bars_of(svg)
    assert [g.find(f"{SVG}title").text for g in groups] == ["one: 3 and 1", "two: 8 and 2"]  # type: ignore[union-attr]
    # Heights are proportional to the values, on an axis that ends at a round 10.
    heights = [[float(r.get("height", 0)) for r in g.iter(f"{SVG}rect")] for g in groups]
    assert heights[1][0] == pytest.approx(4 * heights[0][1] * 2)
    assert sum(heights[1]) == pytest.approx(HEIGHT - 28 - 22)
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert {"first", "second", "ms", "0", "5", "10"} <= set(texts)


def test_a_zero_part_draws_no_rect_and_nothing_draws_no_bar() -> None:
    svg = parse(bar_chart("c", "t", "", TWO, [Bar("x", (0.0, 2.0))]))
    assert len(list(bars_of(svg)[0].iter(f"{SVG}rect"))) == 1
    empty = parse(bar_chart("c", "t", "", TWO, []))
    assert bars_of(empty) == [] and empty.find(f"{SVG}desc").text == "no bars"  # type: ignore[union-attr]


def test_titles_are_escaped() -> None:
    markup = bar_chart("c", "<b>", "", TWO, [Bar("<script>x</script>", (1.0, 1.0), "&")])
    assert "<script>" not in markup and "&lt;script&gt;" in markup
    assert parse(markup).find(f"{SVG}title").text == "<b>"  # type: ignore[union-attr]


def test_ticks_are_bounded() -> None:
    bars = [Bar(str(n), (1.0, 0.0), str(n)) for n in range(100)]
    svg = parse(bar_chart("c", "t", "", TWO, bars))
    ticks = [t for t in svg.iter(f"{SVG}text") if t.get("text-anchor") == "middle"]
    assert 1 < len(ticks) <= TICKS


@pytest.mark.parametrize(("value", "ceiling"), [
    (0, 0), (-1, 0), (1, 1), (1.2, 2), (2, 2), (3, 5), (7, 10), (10, 10), (11, 20),
    (0.03, 0.05), (145, 200), (12_345, 20_000)])  # fmt: skip
def test_nice_ceiling(value: float, ceiling: float) -> None:
    assert nice_ceiling(value) == pytest.approx(ceiling)


def test_number() -> None:
    assert [number(v) for v in (0, 5, 2.5, 1234.0, 12_345.6, 0.25)] == [
        "0", "5", "2.5", "1,234", "12,346", "0.2"]  # fmt: skip
