"""The daemon's clock, and the one writer and reader of mqtt-api.md times.

Times are UTC with millisecond resolution, written ISO 8601 with ``Z``
(``2026-11-29T14:03:07.123Z``, mqtt-api.md "Conventions"): ``ts`` of every payload,
``since`` of an alarm, and the time of every journal record.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""A source of aware datetimes (injected, so tests and replays control time)."""


def utc_now() -> datetime:
    """The daemon's clock: UTC, millisecond resolution (as ``ts`` is published)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@functools.lru_cache(maxsize=64)
def format_ts(ts: datetime) -> str:
    """UTC, ISO 8601 with milliseconds and ``Z`` (mqtt-api.md): ``2026-11-29T14:03:07.123Z``.

    Raises ``ValueError`` for a naive datetime (its instant is unknown). Remembers the
    last few (a frame's records and messages share one time).
    """
    if ts.tzinfo is None or ts.utcoffset() is None:
        raise ValueError(f"time {ts.isoformat()} has no time zone; pass an aware datetime")
    utc = ts.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_ts(text: str) -> datetime:
    """The datetime of a ``format_ts`` string (aware, UTC)."""
    return datetime.fromisoformat(text)
