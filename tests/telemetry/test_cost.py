"""Pricing an answer: genai-prices' price for what it knows, "unknown" (with why) for what it
does not, never a guess."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import genai_prices
import pytest
from convtap.telemetry.cost import Cost, Tokens, price, total, usage_row
from convtap.wire.responses import ResponseSummary
from genai_prices import data_snapshot, types

NOW = datetime(2026, 11, 2, tzinfo=UTC).timestamp()


def test_a_known_model_is_priced_as_genai_prices_prices_it() -> None:
    cost = price(Tokens(input=10_000, cached=4_000, output=2_000), "gpt-5.1", NOW)
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=10_000, cache_read_tokens=4_000, output_tokens=2_000),
        "gpt-5.1", provider_id="openai", genai_request_timestamp=datetime.fromtimestamp(NOW, UTC),
    )  # fmt: skip
    assert cost.usd == pytest.approx(float(expected.total_price))
    assert cost.usd is not None and cost.usd > 0
    assert cost.pricing.startswith("genai-prices ") and cost.pricing.endswith(": gpt-5.1")


def test_cached_input_costs_less_and_more_tokens_cost_more() -> None:
    cold = price(Tokens(input=10_000, output=1_000), "gpt-5.1", NOW).usd
    warm = price(Tokens(input=10_000, cached=9_000, output=1_000), "gpt-5.1", NOW).usd
    more = price(Tokens(input=20_000, output=1_000), "gpt-5.1", NOW).usd
    assert cold is not None and warm is not None and more is not None
    assert warm < cold < more


@pytest.mark.parametrize(
    ("tokens", "model", "at", "tier", "why"),
    [
        (None, "gpt-5.1", NOW, None, "no usage"),
        (Tokens(1, 0, 1), None, NOW, None, "no model"),
        (Tokens(1, 0, 1), "gpt-5-6-thinking", NOW, None, "does not know the model gpt-5-6"),
        (Tokens(1, 0, 1), "gpt-5.1", None, None, "no time"),
        (Tokens(1, 0, 1), "gpt-5.1", NOW, "flex", "service tier flex"),
        (Tokens(1, 5, 1), "gpt-5.1", NOW, None, "cannot price this usage"),
    ],
)
def test_what_genai_prices_cannot_price_is_unknown(
    tokens: Tokens | None, model: str | None, at: float | None, tier: str | None, why: str
) -> None:
    cost = price(tokens, model, at, tier)
    assert cost.usd is None and cost.value == "unknown"
    assert cost.pricing.startswith("unknown: ") and why in cost.pricing


def test_an_answer_before_the_first_price_known_for_its_model_is_unknown() -> None:
    """genai-prices falls back to a model's first price for an earlier date: a guess."""
    dated = types.ModelInfo(
        id="dated-model", match=types.ClauseEquals(equals="dated-model"),
        prices=[types.ConditionalPrice(
            constraint=types.StartDateConstraint(start_date=date(2026, 6, 1)),
            prices=types.ModelPrice(input_mtok=Decimal(1), output_mtok=Decimal(2)))],
    )  # fmt: skip
    openai = data_snapshot.get_snapshot().find_provider_model("gpt-5.1", None, "openai", None)[0]
    provider = types.Provider(id=openai.id, name=openai.name, api_pattern=openai.api_pattern,
                              models=[dated])  # fmt: skip
    data_snapshot.set_custom_snapshot(data_snapshot.DataSnapshot([provider], False))
    try:
        after = price(Tokens(1_000_000, 0, 0), "dated-model", NOW)
        before = price(Tokens(1_000_000, 0, 0), "dated-model", datetime(2026, 1, 1).timestamp())
    finally:
        data_snapshot.set_custom_snapshot(None)
    assert after.usd == pytest.approx(1.0)
    assert before.usd is None and "no price before 2026-06-01" in before.pricing


def test_a_total_is_unknown_as_soon_as_one_answer_is() -> None:
    known = [Cost(0.25, "genai-prices 1: a"), Cost(0.5, "genai-prices 1: b")]
    assert total(known).usd == pytest.approx(0.75)
    assert total([*known, Cost(None, "unknown: x")]).value == "unknown"
    assert total([]).value == "unknown"


def test_tokens_and_the_cache_hit_ratio_come_from_the_usage_object() -> None:
    usage = {"input_tokens": 200, "input_tokens_details": {"cached_tokens": 150},
             "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 12}}  # fmt: skip
    tokens = Tokens.of(usage)
    assert tokens == Tokens(200, 150, 30, 12)
    assert tokens is not None and tokens.cache_hit_ratio == pytest.approx(0.75)
    assert Tokens.of(None) is None and Tokens(0, 0, 5).cache_hit_ratio is None
    assert Tokens.of({"input_tokens": True, "output_tokens": -3}) == Tokens()


def test_an_answer_without_usage_has_no_usage_row() -> None:
    summary = ResponseSummary("resp_1", "incomplete", [], [], [], "gpt-5.1", None, None, "x")
    assert usage_row("f", summary, NOW) is None
    summary = ResponseSummary("resp_1", "incomplete", [], [], [], "gpt-5.1",
                              {"input_tokens": 5, "output_tokens": 1}, "default",
                              "max_output_tokens")  # fmt: skip
    row = usage_row("f", summary, NOW)
    assert row is not None and row.finish_reason == "max_output_tokens" and row.cost_usd
