"""The quick loop's share of examples: under `make check` a property tries a quarter of the
examples it asks for, never fewer than CHECK_EXAMPLES, with the rest of its settings kept."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.conftest import CHECK_EXAMPLES, CHECK_SHARE, _fewer_examples


def property_trying(examples: int) -> tuple[object, list[int]]:
    tried: list[int] = []

    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
    @given(st.integers())
    def prop(n: int) -> None:
        tried.append(n)

    return prop, tried


def test_a_property_tries_a_share_of_its_examples_and_keeps_its_settings() -> None:
    prop, tried = property_trying(200)
    _fewer_examples(prop)
    _fewer_examples(prop)  # once only, however many items share the function
    prop()  # type: ignore[operator]
    assert len(tried) == 200 // CHECK_SHARE
    chosen = prop._hypothesis_internal_use_settings  # type: ignore[attr-defined]
    assert chosen.deadline is None and chosen.database is None


def test_a_small_property_keeps_the_fewest_examples() -> None:
    prop, tried = property_trying(12)
    _fewer_examples(prop)
    prop()  # type: ignore[operator]
    assert len(tried) == CHECK_EXAMPLES


def test_what_is_no_property_is_left_alone() -> None:
    def plain() -> None:
        pass

    _fewer_examples(plain)
    assert not hasattr(plain, "_hypothesis_internal_use_settings")
