"""``lammer web``'s actions per user (display.web.throttle), counted by hand."""

from __future__ import annotations

import math
from typing import Any

import pytest

from display.web import throttle
from display.web.throttle import ActionLimit


def test_burst_then_rate_per_user() -> None:
    limit = ActionLimit(rate=2, burst=5)
    assert [limit.retry_after("alice", 10.0) for _ in range(5)] == [0.0] * 5
    assert limit.retry_after("alice", 10.0) == pytest.approx(0.5)
    assert limit.retry_after("bob", 10.0) == 0.0  # another user has a bucket of his own
    assert limit.retry_after("alice", 10.5) == 0.0  # one more token after half a second
    assert limit.retry_after("alice", 10.5) == pytest.approx(0.5)
    assert limit.refused == 2
    # A minute later the bucket is full again: 5 at once.
    assert [limit.retry_after("alice", 70.0) for _ in range(6)][:5] == [0.0] * 5


def test_the_buckets_kept_are_bounded_oldest_dropped_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(throttle, "MAX_USERS", 100)
    limit = ActionLimit(rate=1, burst=1)
    for n in range(1000):
        limit.retry_after(f"user{n}", 0.0)
    assert len(limit._buckets) == 100
    assert limit.retry_after("user999", 0.0) == pytest.approx(1.0)  # kept: still empty
    assert limit.retry_after("user0", 0.0) == 0.0  # forgotten: a full bucket again


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"rate": 0}, ValueError),
        ({"rate": math.nan}, ValueError),
        ({"rate": math.inf}, ValueError),
        ({"rate": "2"}, TypeError),
        ({"burst": 0}, ValueError),
        ({"burst": 0.5}, ValueError),
        ({"burst": -1}, ValueError),
        ({"burst": None}, TypeError),
    ],
)
def test_hostile_settings_are_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        ActionLimit(**kwargs)


@pytest.mark.parametrize("now", [math.nan, math.inf])
def test_a_time_that_is_not_one_is_refused(now: float) -> None:
    with pytest.raises(ValueError, match="not a time"):
        ActionLimit().retry_after("alice", now)
