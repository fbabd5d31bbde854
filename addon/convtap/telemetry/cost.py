"""What a model answer cost, in US dollars, from its `usage` and model, priced by genai-prices
(a maintained database of the providers' published prices, in the installed package: nothing is
fetched).

A price is never guessed. It is "unknown" (`Cost.usd` None, `Cost.pricing` saying why) when the
answer reported no usage, named no model or one genai-prices does not know, has no time, or was
made before the first price genai-prices knows for its model (genai-prices would fall back to
that first price), or ran on a service tier other than the default one (flex and priority are
priced apart, and the bundled database may not have them). Responses API answers are priced at
OpenAI's API prices; f/conversation reports no usage, so its turns are never priced.

genai-prices takes about a second to import (its price data is Python): it is imported the first
time an answer is priced, so a recorder that sees none never pays for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from importlib import metadata
from typing import Any

from convtap.store.rows import UsageRow
from convtap.store.views import AnswerCost
from convtap.wire.responses import ResponseSummary

UNKNOWN = "unknown"
PROVIDER = "openai"  # gen_ai.provider.name of both protocols, and genai-prices' provider id
DEFAULT_TIERS = {None, "default", "auto"}


@dataclass(frozen=True, slots=True)
class Tokens:
    """A Responses API `usage`: input (of which cached) and output (of which reasoning)."""

    input: int = 0
    cached: int = 0
    output: int = 0
    reasoning: int = 0

    @classmethod
    def of(cls, usage: Any) -> Tokens | None:
        """The tokens a `usage` object counts; None when it is not one."""
        if not isinstance(usage, dict):
            return None
        return cls(_count(usage, "input_tokens"),
                   _count(usage.get("input_tokens_details"), "cached_tokens"),
                   _count(usage, "output_tokens"),
                   _count(usage.get("output_tokens_details"), "reasoning_tokens"))  # fmt: skip

    @property
    def cache_hit_ratio(self) -> float | None:
        """The share of input tokens read from the prompt cache (None without input)."""
        return self.cached / self.input if self.input else None


def _count(value: Any, key: str) -> int:
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else 0


@dataclass(frozen=True, slots=True)
class Cost:
    """A price in US dollars, or None with the reason it is unknown (`pricing`)."""

    usd: float | None
    pricing: str  # "genai-prices VERSION: MODEL", or "unknown: why"

    @property
    def value(self) -> float | str:
        """The price as JSON outputs carry it: a number, or "unknown"."""
        return UNKNOWN if self.usd is None else self.usd


def price(
    tokens: Tokens | None, model: str | None, at: float | None, service_tier: str | None = None
) -> Cost:
    """What an answer of `model` that used `tokens` at `at` (Unix seconds) cost."""
    if tokens is None:
        return Cost(None, "unknown: no usage reported")
    if not model:
        return Cost(None, "unknown: no model named")
    if at is None:
        return Cost(None, "unknown: no time recorded")
    if service_tier not in DEFAULT_TIERS:
        return Cost(None, f"unknown: service tier {service_tier} is not priced")
    import genai_prices  # about a second: only once an answer is priced (see above)

    when = datetime.fromtimestamp(at, UTC)
    usage = genai_prices.Usage(input_tokens=tokens.input, cache_read_tokens=tokens.cached,
                               output_tokens=tokens.output)  # fmt: skip
    try:
        result = genai_prices.calc_price(usage, model, provider_id=PROVIDER,
                                         genai_request_timestamp=when)  # fmt: skip
    except LookupError:
        return Cost(None, f"unknown: genai-prices {_version()} does not know the model {model}")
    except ValueError as exc:  # more cached tokens than input tokens, say
        return Cost(None, f"unknown: genai-prices cannot price this usage ({exc})")
    first = _first_price_date(result.model.prices)
    if first is not None and when.date() < first:
        return Cost(None, f"unknown: {model} has no price before {first.isoformat()}")
    return Cost(float(result.total_price), f"genai-prices {_version()}: {result.model.id}")


def _first_price_date(prices: Any) -> date | None:
    """The start of the earliest of a model's dated prices, if its prices are dated."""
    if not isinstance(prices, list) or not prices:
        return None
    start = getattr(prices[0].constraint, "start_date", None)
    return start if isinstance(start, date) else None


def _version() -> str:
    try:
        return metadata.version("genai-prices")
    except metadata.PackageNotFoundError:
        return "(version unknown)"


def total(costs: list[Cost]) -> Cost:
    """The sum of several answers' costs: unknown as soon as one of them is (a partial sum
    would pass for the whole)."""
    if not costs:
        return Cost(None, "unknown: no priced answer")
    unknown = [c for c in costs if c.usd is None]
    if unknown:
        return Cost(None, f"unknown: {len(unknown)} of {len(costs)} answers unpriced")
    return Cost(sum(c.usd for c in costs if c.usd is not None), costs[0].pricing.split(":")[0])


def usage_row(flow_id: str, response: ResponseSummary, at: float) -> UsageRow | None:
    """The `usage` row of an answer that reported its usage, priced; None for one that did
    not (cut short, or an error)."""
    tokens = Tokens.of(response.usage)
    if tokens is None:
        return None
    cost = price(tokens, response.model, at, response.service_tier)
    return UsageRow(
        flow_id=flow_id, response_id=response.response_id, model=response.model,
        service_tier=response.service_tier,
        finish_reason=response.incomplete_reason or response.status,
        input_tokens=tokens.input, cached_tokens=tokens.cached, output_tokens=tokens.output,
        reasoning_tokens=tokens.reasoning, cost_usd=cost.usd, pricing=cost.pricing,
        answered_at=at,
    )  # fmt: skip


def answer_usage(row: AnswerCost | None) -> dict[str, Any]:
    """`convtap calls --format json`'s `answer_usage` of a call: the model, tokens and cost of
    the answer that made it (cost "unknown" where it was not priced, or reported no usage, as
    f/conversation answers never do)."""
    if row is None:
        return {"model": None, "input_tokens": None, "cached_tokens": None,
                "output_tokens": None, "reasoning_tokens": None, "cost_usd": UNKNOWN,
                "pricing": "unknown: no usage reported"}  # fmt: skip
    return {
        "model": row.model,
        "input_tokens": row.input_tokens,
        "cached_tokens": row.cached_tokens,
        "output_tokens": row.output_tokens,
        "reasoning_tokens": row.reasoning_tokens,
        "cost_usd": UNKNOWN if row.cost_usd is None else row.cost_usd,
        "pricing": row.pricing or "unknown: no usage reported",
    }
