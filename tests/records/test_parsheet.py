"""records.parsheet: a simulated row's standard error is never optimistic."""

from __future__ import annotations

import math

import pytest

from records.parsheet import simulated


def test_a_common_row_has_the_binomial_standard_error() -> None:
    chance = simulated(0.01, 10**7)
    assert chance.std_error == pytest.approx(math.sqrt(0.01 * 0.99 / 10**7), rel=1e-12)


@pytest.mark.parametrize("seen", [0, 1, 2])
def test_a_row_seen_rarely_or_never_is_not_taken_as_impossible(seen: int) -> None:
    # A row never seen in R rounds has, at 95 %, a probability up to about 3/R (the rule of
    # three): its error bar must reach that far, or its first honest hit raises an alarm.
    rounds = 10**7
    chance = simulated(seen / rounds, rounds)
    assert chance.std_error > 0
    assert chance.estimate + 2 * chance.std_error >= 3 / rounds
