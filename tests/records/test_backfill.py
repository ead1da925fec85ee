"""``records.backfill`` without I/O: the pages it asks, where it stops, how it paces
itself and what it does with a refusal or a silence (the table's side is played here)."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from contract.feed import Resend
from records.backfill import (
    FIRST_SEEN,
    GAP,
    Backfill,
    Drop,
    Job,
    Save,
    budget_for,
    day_start,
)
from records.observe import GamingDay
from records.store import Missing

BASE = "lammer/t1"
DAY = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def ts(minute: int) -> str:
    return (DAY + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class Journal:
    """A table's journal: every other seq a message, chained by prev_seq, one a minute."""

    def __init__(self, last: int, *, first: int = 1, every: int = 2) -> None:
        self.messages: dict[int, dict[str, Any]] = {}
        prev = None
        for seq in range(first, last + 1, every):
            self.messages[seq] = {"table": "t1", "seq": seq, "ts": ts(seq), "prev_seq": prev}
            prev = seq
        self.first = first

    def answer(self, ask: Resend, backfill: Backfill, now: float) -> list[int]:
        """Serve ``ask``: the copies, then the answer; the seqs the backfill claimed."""
        copies = [s for s in self.messages if ask.from_seq <= s <= ask.to_seq]
        claimed = [
            s
            for s in copies
            if backfill.claims(BASE, "craps/roll", json.dumps(self.messages[s]).encode(), now)
        ]
        gone = self.first if self.first > ask.from_seq else None
        body = {"request_id": ask.request_id, "status": "ok", "sent": len(copies)}
        body["missing_before"] = gone
        backfill.claims(BASE, "response/resend", json.dumps(body).encode(), now)
        return claimed


def run_to_end(
    backfill: Backfill, journal: Journal, limit: int = 1000
) -> tuple[list[Resend], list[Any], set[int]]:
    asks: list[Resend] = []
    stored: list[Any] = []
    claimed: set[int] = set()
    now = 0.0
    for _ in range(limit):
        out = backfill.tick(now)
        stored += [o for o in out if not isinstance(o, Resend)]
        for ask in (o for o in out if isinstance(o, Resend)):
            asks.append(ask)
            claimed.update(journal.answer(ask, backfill, now))
        if not backfill.pending():
            break
        now += 1.0
    return asks, stored, claimed


def job(
    top: int, *, floor: int = 1, since: datetime | None = None, reason: str = FIRST_SEEN
) -> Job:
    return Job(base=BASE, top=top, floor=floor, next_seq=top, since=since, reason=reason)


def test_pages_of_1000_downwards_to_the_journals_first_message() -> None:
    journal = Journal(4999)  # messages at 1, 3, ..., 4999
    backfill = Backfill()
    assert backfill.start(job(4999), 0.0) == [Save(job(4999))]
    asks, stored, claimed = run_to_end(backfill, journal)
    assert all(a.to_seq - a.from_seq < 1000 for a in asks)
    assert (asks[0].from_seq, asks[0].to_seq) == (4000, 4999)
    # The next page ends at the oldest copy's prev_seq (4001's is 3999).
    assert asks[1].to_seq == 3999
    assert len(asks) == 5
    assert claimed == set(journal.messages)
    assert isinstance(stored[-1], Drop)
    assert not any(isinstance(s, Missing) for s in stored)


def test_stops_at_the_start_of_the_gaming_day() -> None:
    journal = Journal(4999)
    since = DAY + timedelta(minutes=3000)
    backfill = Backfill()
    backfill.start(job(4999, since=since), 0.0)
    asks, _, claimed = run_to_end(backfill, journal)
    assert min(claimed) < 3000  # the page that crossed the bound is kept whole
    assert min(claimed) >= 3000 - 1000
    assert len(asks) == 3  # 4000-4999, 3000-3999 (all of the day), 2000-2999 (crosses it)


def test_a_gaps_job_records_what_the_journal_no_longer_has() -> None:
    journal = Journal(2999, first=1001)
    backfill = Backfill()
    backfill.start(job(2999, floor=11, reason=GAP), 0.0)
    _, stored, claimed = run_to_end(backfill, journal)
    assert claimed == set(journal.messages)
    gaps = [s for s in stored if isinstance(s, Missing)]
    assert [(g.from_seq, g.to_seq) for g in gaps] == [(11, 1000)]
    assert gaps[0].reason.startswith("gone")


def test_only_messages_within_a_jobs_range_are_claimed() -> None:
    backfill = Backfill()
    backfill.start(job(100, floor=50), 0.0)
    body = {"table": "t1", "seq": 101, "ts": ts(1), "prev_seq": 99}
    assert not backfill.claims(BASE, "state", json.dumps(body).encode(), 0.0)
    assert backfill.claims(BASE, "state", json.dumps({**body, "seq": 50}).encode(), 0.0)
    assert not backfill.claims("lammer/t2", "state", json.dumps({**body, "seq": 50}).encode(), 0.0)
    assert not backfill.claims(BASE, "state", b"not json", 0.0)
    big = json.dumps({**body, "seq": 60, "pad": "x" * 70_000}).encode()
    assert not backfill.claims(BASE, "state", big, 0.0)  # refused by records.messages


def test_a_budget_refusal_is_waited_out_as_the_table_says() -> None:
    backfill = Backfill()
    backfill.start(job(5000), 0.0)
    (ask,) = backfill.tick(0.0)
    assert isinstance(ask, Resend)
    error = "resend budget spent: ... and 1,000 more were asked; ask again in 17 s"
    body = {"request_id": ask.request_id, "status": "error", "error": error}
    backfill.claims(BASE, "response/resend", json.dumps(body).encode(), 1.0)
    assert backfill.tick(2.0) == []
    assert backfill.tick(18.0) == []
    (again,) = backfill.tick(18.6)
    assert isinstance(again, Resend)
    assert (again.from_seq, again.to_seq) == (ask.from_seq, ask.to_seq)
    assert backfill.refused == 1


def test_pages_are_paced_within_the_copy_budget() -> None:
    journal = Journal(4_000, every=1)  # every seq a message: a page is 1,000 copies
    backfill = Backfill(budget=2000)
    backfill.start(job(4_000), 0.0)
    asked_at: list[float] = []
    now = 0.0
    while now < 200:
        for ask in (o for o in backfill.tick(now) if isinstance(o, Resend)):
            asked_at.append(now)
            journal.answer(ask, backfill, now)
        now += 0.5
    # At most 2 pages (2,000 copies) in any 60 s, and on as soon as the budget allows.
    for at in asked_at:
        assert sum(at <= t < at + 60 for t in asked_at) <= 2
    assert len(asked_at) == 4


def test_a_silent_table_is_asked_again_backing_off() -> None:
    backfill = Backfill(timeout=10.0)
    backfill.start(job(5000), 0.0)
    times = []
    now = 0.0
    while now < 200:
        if any(isinstance(o, Resend) for o in backfill.tick(now)):
            times.append(now)
        now += 1.0
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[0] == 10.0
    assert gaps == sorted(gaps)
    assert gaps[-1] > gaps[0]


def test_tables_take_turns() -> None:
    backfill = Backfill(max_tables=2)
    for n in range(3):
        backfill.start(
            Job(base=f"lammer/t{n}", top=10, floor=1, next_seq=10, since=None, reason=FIRST_SEEN),
            0.0,
        )
    asked = {o.table for o in backfill.tick(0.0) if isinstance(o, Resend)}
    assert asked == {"lammer/t0", "lammer/t1"}


def test_the_budget_leaves_room_for_the_feed() -> None:
    assert budget_for("records") == 10_000
    assert budget_for(None) == 1000  # the bare request: the terminal's 2,000, one page


@pytest.mark.parametrize(
    ("now", "days", "expected"),
    [
        (datetime(2026, 12, 2, 13, 0, tzinfo=UTC), 1, datetime(2026, 12, 2, 5, 0, tzinfo=UTC)),
        (datetime(2026, 12, 2, 4, 0, tzinfo=UTC), 1, datetime(2026, 12, 1, 5, 0, tzinfo=UTC)),
        (datetime(2026, 12, 2, 13, 0, tzinfo=UTC), 2, datetime(2026, 12, 1, 5, 0, tzinfo=UTC)),
    ],
)
def test_the_gaming_day_starts_at_06_00_local(now: datetime, days: int, expected: datetime) -> None:
    day = GamingDay(time(6, 0), ZoneInfo("Europe/Paris"))
    assert day_start(day, now, days) == expected
