"""The token bucket every rate limit of lammer uses (foundation.bucket), counted by hand."""

from __future__ import annotations

import pytest

from foundation.bucket import TokenBucket


def test_a_clock_that_goes_back_gives_no_tokens() -> None:
    bucket = TokenBucket(rate=1, burst=1)
    assert bucket.take(50.0)
    assert not bucket.take(10.0)  # back 40 s: nothing refilled
    assert not bucket.take(50.5)  # still measured from 50.0, the latest time seen
    assert bucket.take(51.0)


def test_retry_after_says_when_the_next_token_comes() -> None:
    bucket = TokenBucket(rate=2, burst=1)
    assert bucket.retry_after(10.0) == 0.0
    assert bucket.retry_after(10.0) == pytest.approx(0.5)
    assert bucket.retry_after(10.25) == pytest.approx(0.25)  # half a token back
    assert bucket.retry_after(10.5) == 0.0
