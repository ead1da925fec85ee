"""The reconnect policy every link shares (foundation.backoff): exponential, capped, jittered."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foundation.backoff import Backoff


@given(
    initial=st.floats(0.001, 10),
    factor=st.floats(1, 100),
    attempt=st.integers(0, 10_000),
    seed=st.integers(0, 2**32),
)
def test_a_delay_is_between_half_and_all_of_a_capped_doubling(
    initial: float, factor: float, attempt: int, seed: int
) -> None:
    backoff = Backoff(initial=initial, maximum=initial * factor)
    step = min(backoff.maximum, initial * 2**attempt) if attempt < 1000 else backoff.maximum
    assert backoff.step(attempt) == pytest.approx(step)
    delay = backoff.delay(attempt, random.Random(seed))
    assert step / 2 <= delay <= step <= backoff.maximum


def test_delays_are_jittered_and_reproducible_from_the_seed() -> None:
    backoff = Backoff(initial=0.5, maximum=30.0)
    first = [backoff.delay(n, random.Random(7)) for n in range(12)]
    assert [backoff.delay(n, random.Random(7)) for n in range(12)] == first
    rng = random.Random(7)
    drawn = [backoff.delay(3, rng) for _ in range(50)]
    assert len(set(drawn)) == 50  # not a fixed ladder: tables do not come back in step
    assert all(2.0 <= d <= 4.0 for d in drawn)


@pytest.mark.parametrize(("initial", "maximum"), [(0, 1), (-1, 1), (2, 1)])
def test_delays_that_cannot_work_are_refused(initial: float, maximum: float) -> None:
    with pytest.raises(ValueError, match="initial <= maximum"):
        Backoff(initial=initial, maximum=maximum)
