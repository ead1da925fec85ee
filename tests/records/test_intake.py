"""What the records service decides (``records.intake``), without a database or a broker:
the feed's events into what is stored, the backfills a first-seen table or a long gap
starts, the resend requests, the batches' bounds and acknowledgements, what a written
batch counts, the integrity alarms published once, what a new connection writes again,
the warnings and the status. Fast, so that mutation testing (docs/developers/mutation.md)
runs them against every mutant of the module."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, MutableMapping
from datetime import UTC, datetime, time
from typing import Any, cast, get_args

import pytest
from structlog.testing import capture_logs

from contract.feed import GapReason, Resend
from records import backfill as bf
from records.intake import (
    GAP_REASONS,
    MANY_TABLES,
    RECENT_ITEMS,
    RECENT_SECONDS,
    REFRESH,
    WARN_EVERY,
    WARNED_MAX,
    Ack,
    Batch,
    Intake,
    Settings,
)
from records.integrity import Finding, Side, Window
from records.messages import Availability, Request, parse
from records.messages import Message as Stored
from records.observe import GamingDay, TableWatch
from records.store import Item, Missing
from tests.records.messages import body, craps_roll, ts

NOW = datetime(2026, 12, 1, 14, 0, 0, 123456, tzinfo=UTC)
"""The wall clock of these tests: 14:00:00.123456 UTC."""
STAMP = "2026-12-01T14:00:00.123Z"
"""``NOW`` as the contract writes a time."""
DAY = GamingDay(time(6, 0), UTC)


def settings(**changes: Any) -> Settings:
    base: dict[str, Any] = {
        "mqtt_host": "127.0.0.1",
        "mqtt_port": 1883,
        "mqtt_user": "records",
        "mqtt_password": None,
        "prefixes": ("lammer",),
        "dsn": "",
        "day": DAY,
    }
    return Settings(**{**base, **changes})


class Clock:
    """The service's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make(
    *,
    positions: Mapping[str, int] | None = None,
    jobs: list[bf.Job] | None = None,
    clock: Clock | None = None,
    **changes: Any,
) -> Intake:
    """An intake with the tests' wall clock (and ``clock``, when given)."""
    intake = Intake(settings(**changes), positions=dict(positions or {}), jobs=list(jobs or []))
    intake.wall = lambda: NOW
    if clock is not None:
        intake.clock = clock
    return intake


def roll(table: str, seq: int, prev: int | None, d1: int = 1, d2: int = 2) -> tuple[str, bytes]:
    """A roll of ``table`` as it comes from the broker: (topic, payload)."""
    payload = body({**craps_roll(table, seq, seq, d1, d2), "prev_seq": prev})
    return f"lammer/{table}/craps/roll", payload


def stored(table: str, seq: int, topic: str = "craps/roll") -> Stored:
    """A checked message of ``table`` (a roll, or its state), as a batch holds it."""
    if topic == "craps/roll":
        payload = body({**craps_roll(table, seq, seq, 1, 2), "prev_seq": seq - 1 or None})
    else:
        payload = body(_state(table, seq))
    item = parse(table, topic, payload)
    assert isinstance(item, Stored)
    return item


def _state(table: str, seq: int) -> dict[str, Any]:
    return {"table": table, "seq": seq, "ts": ts(seq), "prev_seq": None, "game": "CRAPS",
            "devices": {}, "alarms": []}  # fmt: skip


def answer(table: str, seq: int, prev: int, request_id: str, **fields: Any) -> tuple[str, bytes]:
    """A table's ``response/resend``."""
    content = {
        "table": table, "seq": seq, "ts": ts(seq), "prev_seq": prev, "request_id": request_id,
        "status": "ok", "error": None, "sent": 0, "missing_before": None, **fields,
    }  # fmt: skip
    return f"lammer/{table}/response/resend", body(content)


def drain(intake: Intake, results: Callable[[Item], object] = lambda _: True) -> list[Batch]:
    """What the writer does: every batch taken, written (each item answered by
    ``results``) and committed."""
    done = []
    while (batch := intake.take()) is not None:
        intake.written(batch, [cast(Any, results(item)) for item in batch.items])
        intake.committed(batch)
        done.append(batch)
    return done


def _acker(acked: list[int], seq: int) -> Callable[[], object]:
    return lambda: acked.append(seq)


def kinds(intake: Intake) -> list[str]:
    return [type(item).__name__ for item in intake.pending]


def seqs(items: Any) -> list[int]:
    return [item.seq for item in items if isinstance(item, Stored)]


# -- settings -----------------------------------------------------------------------------


def test_a_batch_holds_one_message_at_least() -> None:
    with pytest.raises(ValueError, match=r"^a batch holds one message at least$"):
        make(batch=0)
    assert make(batch=1).settings.batch == 1


def test_the_backfill_asks_within_the_records_budget_and_tables_at_once() -> None:
    # The records user's 12,000 copies a minute less two pages of 1,000 for the feed; a
    # service without a login asks as the terminal, 2,000 less two pages: one page.
    assert make().backfill.budget == 10_000
    assert make(mqtt_user=None).backfill.budget == 1_000
    assert make(backfill_tables=3).backfill.max_tables == 3


def test_each_table_is_watched_by_its_gaming_day() -> None:
    day = GamingDay(time(4, 30), UTC)
    intake = make(day=day)
    intake.replayed(intake.replay_rows([("t1", "craps/roll", craps_roll("t1", 1, 1, 1, 2))]))
    assert intake.watches["t1"].day is day


# -- the feed's events into what is stored --------------------------------------------------


def test_released_messages_wait_in_order_each_before_its_acknowledgement() -> None:
    intake = make()
    acked: list[int] = []
    assert not intake.ready.is_set()
    intake.idle.set()  # the writer had nothing to do
    for seq in (1, 2):
        assert intake.handle(*roll("t1", seq, seq - 1 or None), 0.0, ack=_acker(acked, seq)) == []
    intake.handle(*roll("t1", 3, 2), 0.0)  # QoS 0: nothing to acknowledge
    assert kinds(intake) == ["Message", "Ack", "Message", "Ack", "Message"]
    assert seqs(intake.pending) == [1, 2, 3]
    assert [m.table for m in intake.pending if isinstance(m, Stored)] == ["t1"] * 3
    assert intake.ready.is_set()
    assert not intake.idle.is_set()
    assert acked == []  # only once committed


def test_what_is_not_a_tables_is_only_acknowledged() -> None:
    intake = make()
    assert intake.handle("other/t1/craps/roll", roll("t1", 1, None)[1], 0.0, ack=print) == []
    assert kinds(intake) == ["Ack"]
    assert intake.status()["dropped"] == 0


def test_requests_are_kept_for_their_operator_but_not_resend_asks() -> None:
    intake = make()
    request = {"operator": "pit 4", "request_id": "r-1", "roll_id": 7}
    intake.handle("lammer/t1/request/void_roll", body(request), 0.0)
    for resend in ("resend", "resend/records", "resend/display-pit-4"):  # 1.4: at a user's level
        intake.handle(f"lammer/t1/request/{resend}", body({"operator": "x", "from_seq": 1}), 0.0)
    intake.handle("lammer/t1/request/resendx", body({"operator": "y"}), 0.0)
    intake.handle("lammer/t1/availability", b"offline", 0.0)
    assert list(intake.pending) == [
        Request(table="t1", name="void_roll", request_id="r-1", operator="pit 4", payload=request),
        Request(
            table="t1", name="resendx", request_id=None, operator="y", payload={"operator": "y"}
        ),
        Availability(table="t1", status="offline"),
    ]


def test_a_batch_is_bounded_and_takes_the_acknowledgements_that_follow_it() -> None:
    intake = make(batch=2)
    assert intake.take() is None
    acked: list[int] = []
    for seq in range(1, 6):
        intake.handle(*roll("t1", seq, seq - 1 or None), 0.0, ack=_acker(acked, seq))
    batches = []
    while (batch := intake.take()) is not None:
        batches.append(batch)
        assert acked == [s for b in batches[:-1] for s in seqs(b.items)]  # not before
        intake.written(batch, [True] * len(batch.items))
        intake.committed(batch)
    assert [seqs(b.items) for b in batches] == [[1, 2], [3, 4], [5]]
    assert [len(b.acks) for b in batches] == [2, 2, 1]
    # The positions only with the batch that takes everything (before, messages of them
    # were still waiting); committed, they are the store's.
    assert [b.positions for b in batches] == [None, None, {"lammer/t1": 5}]
    assert intake.positions == {"lammer/t1": 5}
    assert acked == [1, 2, 3, 4, 5]
    assert intake.take() is None


def test_an_acknowledgement_is_taken_even_when_the_batch_is_full() -> None:
    intake = make(batch=1)
    intake.handle(*roll("t1", 1, None), 0.0, ack=print)
    intake.handle(*roll("t1", 2, 1), 0.0, ack=print)
    first = intake.take()
    assert first is not None
    assert (seqs(first.items), len(first.acks), first.positions) == ([1], 1, None)


def test_positions_that_moved_make_a_batch_of_their_own() -> None:
    intake = make(positions={"lammer/t1": 1, "lammer/t2": 7})
    intake.handle(*roll("t1", 2, 1), 0.0)
    taken = intake.take()
    assert taken is not None
    assert taken.positions == {"lammer/t1": 2}  # only what moved (t2 did not)
    # Not committed yet (the writer's transaction): the positions are still to be kept.
    again = intake.take()
    assert again is not None
    assert (again.items, again.positions, again.acks) == ([], {"lammer/t1": 2}, [])
    intake.committed(again)
    assert intake.positions == {"lammer/t1": 2, "lammer/t2": 7}
    assert intake.take() is None


def test_committed_positions_stay_when_a_batch_moved_none() -> None:
    intake = make(positions={"lammer/t1": 4})
    intake.committed(Batch([], None, [Ack(lambda: None)]))
    assert intake.positions == {"lammer/t1": 4}


# -- the feed's asks and gaps -----------------------------------------------------------------


def test_the_feed_asks_after_its_wait_and_again_after_its_timeout() -> None:
    intake = make(resend_wait=2.0, resend_timeout=3.0, backfill_days=0)
    intake.handle(*roll("t1", 1, None), 0.0)
    assert intake.handle(*roll("t1", 4, 3), 0.0) == []  # held: 2 and 3 may be on their way
    assert intake.tick(1.99) == []
    first = Resend(table="lammer/t1", from_seq=2, to_seq=3, request_id="feed-records-1")
    assert intake.tick(2.0) == [first]
    assert intake.tick(4.99) == []
    again = Resend(table="lammer/t1", from_seq=2, to_seq=3, request_id="feed-records-2")
    assert intake.tick(5.0) == [again]


def test_a_message_that_shows_a_gap_late_enough_asks_at_once() -> None:
    intake = make(resend_wait=0.0, backfill_days=0, positions={"lammer/t1": 1})
    asks = intake.handle(*roll("t1", 4, 3), 0.0)
    assert asks == [Resend(table="lammer/t1", from_seq=2, to_seq=3, request_id="feed-records-1")]


def _probed_after(resent: bool | None) -> float | None:
    """When the feed probes the tail of t1 after a message (``resent`` as it came; None:
    as ``handle``'s callers that do not say), or None: within 100 s, never."""
    intake = make(positions={"lammer/t1": 1}, backfill_days=0)
    if resent is None:
        intake.handle(*roll("t1", 2, 1), 0.0)
    else:
        intake.handle(*roll("t1", 2, 1), 0.0, resent=resent)
    for now in range(1, 101):
        if asks := intake.tick(float(now)):
            probe = Resend(table="lammer/t1", from_seq=3, to_seq=3, request_id="feed-records-1")
            assert asks == [probe]
            return float(now)
    return None


def test_a_live_message_starts_a_quiet_period_and_a_resent_copy_does_not() -> None:
    # The tail probe (contract.feed): 30 s plus this feed's share of 15 s after the last
    # new message of the table's own; a copy the table resent is no new play.
    probed = _probed_after(None)
    assert probed is not None
    assert 30 <= probed <= 46
    assert _probed_after(False) == probed
    assert _probed_after(True) is None


def test_a_table_resumes_at_the_position_the_store_kept() -> None:
    intake = make(positions={"lammer/t1": 5})
    intake.handle(*roll("t1", 5, 4), 0.0)  # stored before
    intake.handle(*roll("t1", 6, 5), 0.0)
    assert seqs(intake.pending) == [6]  # and no backfill: the table is known
    assert intake.tick(1.0) == []


def test_the_writer_is_woken_when_the_feeds_positions_moved() -> None:
    intake = make()
    intake.handle(*roll("t1", 1, None), 0.0)
    batch = intake.take()
    assert batch is not None
    intake.ready.clear()
    intake.idle.set()
    intake.tick(1.0)  # taken, not committed: the positions differ from the store's
    assert intake.ready.is_set()
    assert not intake.idle.is_set()
    intake.committed(batch)
    intake.ready.clear()
    intake.idle.set()
    intake.tick(2.0)
    assert not intake.ready.is_set()
    assert intake.idle.is_set()


def _given_up(intake: Intake, *, overflow: bool = False) -> None:
    """Table t1 at seq 1, then seq 4: 2 and 3 never come (asked until the feed gives up,
    or too many messages wait behind them)."""
    if overflow:
        intake.feed.max_held = 2
        for seq in (4, 5, 6):
            intake.handle(*roll("t1", seq, seq - 1), 0.0)
        return
    intake.handle(*roll("t1", 4, 3), 0.0)
    now = 0.0
    while now < 300 and not {"Missing", "Save"} & set(kinds(intake)):
        now += 1.0
        intake.tick(now)


@pytest.mark.parametrize(
    ("overflow", "reason"),
    [
        (False, "unanswered: the table did not answer the resend requests in time"),
        (True, "overflow: too many messages waited behind them"),
    ],
)
def test_a_gap_given_up_is_recorded_when_there_is_no_backfill(overflow: bool, reason: str) -> None:
    intake = make(positions={"lammer/t1": 1}, backfill_days=0)
    _given_up(intake, overflow=overflow)
    gaps = [i for i in intake.pending if isinstance(i, Missing)]
    assert gaps == [Missing(table="t1", from_seq=2, to_seq=3, reason=reason)]
    assert intake.backfill.pending() == []


@pytest.mark.parametrize("overflow", [False, True])
def test_a_gap_too_long_for_the_feed_is_asked_from_the_journal(overflow: bool) -> None:
    intake = make(positions={"lammer/t1": 1}, backfill_days=2)
    _given_up(intake, overflow=overflow)
    job = bf.Job(
        base="lammer/t1",
        top=3,
        floor=2,
        next_seq=3,
        since=datetime(2026, 11, 30, 6, 0, tzinfo=UTC),  # two gaming days back
        reason="gap",
    )
    assert [i for i in intake.pending if not isinstance(i, Stored)] == [bf.Save(job)]
    assert intake.backfill.pending() == [job]


def test_every_reason_the_feed_gives_up_for_has_its_sentence() -> None:
    assert set(GAP_REASONS) == set(get_args(GapReason))


def test_what_the_table_no_longer_holds_or_never_published_is_recorded() -> None:
    for fields, reason in [
        ({"missing_before": 4}, "gone: the table's journal no longer holds them"),
        (
            {"sent": 0},
            "not_resent: the table answered the resend and did not send them (never published)",
        ),
    ]:
        intake = make(positions={"lammer/t1": 1})  # with a backfill: not for these
        intake.handle(*roll("t1", 4, 3), 0.0)
        (ask,) = intake.tick(1.0)
        intake.handle(*answer("t1", 5, 4, ask.request_id, **fields), 1.5)
        intake.tick(1.6)
        gaps = [i for i in intake.pending if isinstance(i, Missing)]
        assert gaps == [Missing(table="t1", from_seq=2, to_seq=3, reason=reason)]
        assert intake.backfill.pending() == []


# -- first seen: the backfill -----------------------------------------------------------------


def test_a_table_first_seen_is_asked_for_what_it_published_before() -> None:
    intake = make()
    intake.handle(*roll("t1", 50, 49), 0.0)
    job = bf.Job(
        base="lammer/t1",
        top=49,
        floor=1,
        next_seq=49,
        since=datetime(2026, 12, 1, 6, 0, tzinfo=UTC),  # the gaming day's start
        reason="first seen",
    )
    assert kinds(intake) == ["Save", "Message"]
    assert intake.pending[0] == bf.Save(job)
    assert intake.ready.is_set()
    asks = intake.tick(1.0)  # the backfill asks on the tick, paced
    page = Resend(table="lammer/t1", from_seq=1, to_seq=49, request_id="backfill-records-1")
    assert asks == [page]
    assert kinds(intake) == ["Save", "Message"]
    intake.handle(*roll("t1", 51, 50), 2.0)  # seen now: once
    assert intake.backfill.pending() == [job]


def test_no_backfill_for_a_table_seen_before_or_with_nothing_before() -> None:
    old = bf.Job(base="lammer/t2", top=9, floor=1, next_seq=9, since=None, reason="first seen")
    intake = make(positions={"lammer/t1": 10}, jobs=[old])
    intake.handle(*roll("t1", 12, 11), 0.0)  # a position kept
    intake.handle(*roll("t2", 12, 11), 0.0)  # a job kept (above it: live)
    intake.handle(*roll("t3", 1, None), 0.0)  # the table's first message
    intake.handle(*roll("t3", 3, 2), 0.0)
    assert intake.backfill.pending() == [old]
    assert "Save" not in kinds(intake)


def test_no_backfill_when_it_is_switched_off_nor_for_a_retained_message() -> None:
    intake = make(backfill_days=0)
    intake.handle(*roll("t1", 50, 49), 0.0)
    assert intake.backfill.pending() == []
    intake = make()
    state = {"table": "t1", "seq": 49, "ts": ts(49), "prev_seq": 48, "game": "CRAPS",
             "devices": {}, "alarms": []}  # fmt: skip
    intake.handle("lammer/t1/state", body(state), 0.0, retained=True)
    assert intake.backfill.pending() == []
    # The first live message is the table's first seen (the retained state was not).
    intake.handle(*roll("t1", 50, 49), 0.1)
    assert [(j.top, j.floor) for j in intake.backfill.pending()] == [(49, 1)]


def test_the_backfills_messages_are_stored_not_fed() -> None:
    job = bf.Job(base="lammer/t1", top=9, floor=1, next_seq=9, since=None, reason="first seen")
    intake = make(jobs=[job], positions={"lammer/t1": 10})
    intake.handle(*roll("t1", 5, 4), 0.0, ack=print)  # below the position: the job's
    assert kinds(intake) == ["Message", "Ack"]
    assert seqs(intake.pending) == [5]
    assert intake.feed.positions() == {"lammer/t1": 10}


def test_a_backfill_page_done_is_stored_with_the_next_batch() -> None:
    job = bf.Job(base="lammer/t1", top=2, floor=1, next_seq=2, since=None, reason="first seen")
    intake = make(jobs=[job])
    page = Resend(table="lammer/t1", from_seq=1, to_seq=2, request_id="backfill-records-1")
    assert intake.tick(0.0) == [page]
    for seq in (2, 1):
        intake.handle(*roll("t1", seq, seq - 1 or None), 0.5)
    intake.handle(*answer("t1", 3, 2, page.request_id, sent=2), 0.5)
    intake.pending.clear()
    intake.ready.clear()
    assert intake.tick(1.0) == []
    assert list(intake.pending) == [bf.Drop(job)]  # the table's first message: done
    assert intake.ready.is_set()
    assert intake.backfill.pending() == []


# -- what a written batch counts -----------------------------------------------------------


def test_a_written_batch_counts_what_was_new() -> None:
    intake = make()
    gap = Missing(table="t1", from_seq=3, to_seq=9, reason="gone: test")
    save = bf.Save(bf.Job(base="lammer/t1", top=9, floor=1, next_seq=9, since=None, reason="gap"))
    items: list[Item] = [
        stored("t1", 1), stored("t1", 2), stored("t2", 4), stored("t1", 10),
        Availability(table="t1", status="online"), gap, save, stored("t2", 5),
    ]  # fmt: skip
    results: list[Any] = [True, True, True, False, True, [(3, 4), (6, 9)], False, True]
    with capture_logs() as logs:
        intake.written(Batch(items, None, []), results)
    assert intake.stored == 4  # messages only, new ones only
    assert intake.batches == 1
    # Each table's newest new message, and when it was stored (the wall clock).
    assert intake.stored_ts == {"t1": (ts(2), NOW.timestamp()), "t2": (ts(5), NOW.timestamp())}
    recorded = [e for e in logs if e["event"] == "gap recorded"]
    assert [(e["table"], e["from_seq"], e["to_seq"], e["reason"]) for e in recorded] == [
        ("t1", 3, 4, "gone: test"),
        ("t1", 6, 9, "gone: test"),
    ]
    assert all(e["log_level"] == "warning" for e in recorded)
    before = intake.stored_ts
    intake.written(Batch([stored("t2", 6)], None, []), [True])
    assert intake.stored_ts == {"t1": (ts(2), NOW.timestamp()), "t2": (ts(6), NOW.timestamp())}
    assert before == {"t1": (ts(2), NOW.timestamp()), "t2": (ts(5), NOW.timestamp())}  # whole
    intake.written(Batch([], None, []), [])
    assert (intake.stored, intake.batches) == (5, 3)


def test_a_message_is_counted_only_once_its_time_is_there() -> None:
    # The metrics scrape (the event loop) reads the count, then the times, while the
    # writer's thread runs ``written``: a message counted before its time was recorded was
    # scraped as 2 stored with the first one's lag (a failure seen in CI).
    intake = make()
    intake.written(Batch([stored("t1", 1)], None, []), [True])
    seen: list[int] = []

    def wall() -> datetime:  # read for the times stored (and for integrity's stamps)
        seen.append(intake.stored)  # what a scrape could read now
        return NOW

    intake.wall = wall
    intake.written(Batch([stored("t1", 2), stored("t2", 3)], None, []), [True, True])
    assert len(seen) >= 1
    assert set(seen) == {1}  # nothing of this batch counted yet
    assert intake.stored == 3
    assert intake.stored_ts == {"t1": (ts(2), NOW.timestamp()), "t2": (ts(3), NOW.timestamp())}


def test_a_store_answer_that_does_not_fit_the_batch_is_an_error() -> None:
    with pytest.raises(ValueError, match="zip"):
        make().written(Batch([stored("t1", 1)], None, []), [])


def test_the_watches_count_the_new_messages_of_their_topics() -> None:
    intake = make()
    intake.written(Batch([stored("t1", 1, "state")], None, []), [True])
    assert intake.watches == {}  # a state counts nowhere
    intake.written(Batch([stored("t1", 2)], None, []), [False])
    assert intake.watches == {}  # stored before: counted before
    intake.written(Batch([stored("t1", 3)], None, []), [True])
    watch = intake.watches["t1"]
    assert watch.day is DAY
    assert watch.watch is not None
    # A table's first evaluation is published (its alarms: none), the next ones only
    # when something changed.
    assert intake.outbox == [
        ("t1", {"table": "t1", "ts": STAMP, "alarms": []}),
    ]
    intake.written(Batch([stored("t1", 4)], None, []), [True])
    assert len(intake.outbox) == 1


class FakeWatch:
    """A table's watch whose findings the test sets: what it was fed and asked."""

    def __init__(self, families: list[str]) -> None:
        self.families = families
        self.findings: list[Finding] = []
        self.fed: list[int] = []
        self.evaluated: list[tuple[str, list[str] | None]] = []

    def feed(self, message: Any) -> list[str]:
        self.fed.append(message.seq)
        return list(self.families)

    def evaluate(self, now: str, families: list[str] | None = None) -> list[Finding]:
        self.evaluated.append((now, families))
        return list(self.findings)


def _fake(intake: Intake, table: str, families: list[str]) -> FakeWatch:
    fake = FakeWatch(families)
    intake.watches[table] = cast(TableWatch, fake)
    return fake


def test_the_backfills_messages_are_evaluated_once_a_batch() -> None:
    job = bf.Job(base="lammer/t1", top=9, floor=1, next_seq=9, since=None, reason="first seen")
    intake = make(jobs=[job])
    fake = _fake(intake, "t1", ["b", "a"])
    for seq in (4, 6, 3):  # copies, each page downwards: the newest is not the last
        intake.handle(*roll("t1", seq, seq - 1), 0.0)
    intake.handle(*roll("t1", 10, 9), 0.0)  # live
    drain(intake)
    assert fake.fed == [4, 6, 3, 10]
    assert fake.evaluated == [(ts(10), ["b", "a"]), (ts(6), ["a", "b"])]
    # Once committed they are the backfill's no more: the same seq written again (another
    # copy) is evaluated as it comes.
    fake.evaluated.clear()
    intake.written(Batch([stored("t1", 6)], None, []), [True])
    assert fake.evaluated == [(ts(6), ["b", "a"])]


def test_a_backfilled_message_stored_before_is_not_evaluated() -> None:
    job = bf.Job(base="lammer/t1", top=9, floor=1, next_seq=9, since=None, reason="first seen")
    intake = make(jobs=[job])
    fake = _fake(intake, "t1", ["a"])
    intake.handle(*roll("t1", 4, 3), 0.0)
    drain(intake, lambda _: False)
    assert (fake.fed, fake.evaluated) == ([], [])
    fake.families = []  # counted, and nothing changed: nothing to evaluate
    intake.handle(*roll("t1", 5, 4), 0.0)
    drain(intake)
    assert (fake.fed, fake.evaluated) == ([5], [])


def finding(row: str, observed: int, *, window: Window = "day", side: Side = "high") -> Finding:
    return Finding(
        bet="dice", row=row, window=window, side=side, observed=observed, trials=100,
        expected=2.5, expected_exact=None, p_value=1e-6, since="2026-12-01T06:00:00.000Z",
    )  # fmt: skip


def _result(intake: Intake, seq: int, findings: list[Finding]) -> list[MutableMapping[str, Any]]:
    """A new roll of t1 written, its watch finding ``findings``; the log lines."""
    fake = cast(FakeWatch, intake.watches["t1"])
    fake.findings = findings
    with capture_logs() as logs:
        intake.written(Batch([stored("t1", seq)], None, []), [True])
    return [e for e in logs if e["event"].startswith("integrity")]


def test_an_alarm_is_published_and_said_when_raised_changed_or_cleared_only() -> None:
    clock = Clock()
    intake = make(clock=clock)
    _fake(intake, "t1", ["dice"])
    six = finding("6-6", 9)
    raised = _result(intake, 1, [six])
    assert [(e["event"], e["log_level"], e["table"], e["alarms"]) for e in raised] == [
        ("integrity alarm", "warning", "t1", ["dice 6-6 day high"])
    ]
    (table, payload), *_ = intake.outbox
    assert (table, payload["ts"], len(intake.outbox)) == ("t1", STAMP, 1)
    assert [(a["row"], a["observed"], a["rounds"]) for a in payload["alarms"]] == [("6-6", 9, 100)]
    assert intake.published == {"t1": [("dice", "6-6", "day", "high")]}
    # The same alarm, the same figures: nothing.
    assert _result(intake, 2, [six]) == []
    assert len(intake.outbox) == 1
    # Its figures moved: published again after REFRESH (from the last publication), silently.
    clock.now = REFRESH - 0.01
    assert _result(intake, 3, [finding("6-6", 10)]) == []
    assert len(intake.outbox) == 1
    clock.now = REFRESH
    assert _result(intake, 4, [finding("6-6", 11)]) == []
    assert len(intake.outbox) == 2
    assert intake.outbox[-1][1]["alarms"][0]["observed"] == 11
    clock.now = 2 * REFRESH - 0.01
    assert _result(intake, 5, [finding("6-6", 12)]) == []
    assert len(intake.outbox) == 2
    # Another alarm joins: said at once (whatever the time), the two in a line.
    both = _result(intake, 6, [finding("6-6", 12), finding("1-1", 0, side="low")])
    assert [(e["event"], e["alarms"]) for e in both] == [
        ("integrity alarm", ["dice 6-6 day high", "dice 1-1 day low"])
    ]
    assert len(intake.outbox) == 3
    assert intake.published == {
        "t1": [("dice", "1-1", "day", "low"), ("dice", "6-6", "day", "high")]
    }
    # The same two in another order: the same alarms and figures.
    assert _result(intake, 7, [finding("1-1", 0, side="low"), finding("6-6", 12)]) == []
    assert len(intake.outbox) == 3
    # A window changes: a change.
    week = [finding("1-1", 0, side="low"), finding("6-6", 12, window="week")]
    assert len(_result(intake, 8, week)) == 1
    # Cleared: said (not as an alarm) and published empty, once.
    cleared = _result(intake, 9, [])
    assert [(e["event"], e["log_level"], e["table"]) for e in cleared] == [
        ("integrity alarms cleared", "info", "t1")
    ]
    assert intake.outbox[-1] == ("t1", {"table": "t1", "ts": STAMP, "alarms": []})
    count = len(intake.outbox)
    assert _result(intake, 10, []) == []
    assert len(intake.outbox) == count


# -- the start: the watches rebuilt from the store ------------------------------------------

_REFUSED_DETAIL = (
    "ts: String should match pattern '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$'; "
    "status: Input should be 'counted', 'noroll', 'pending', 'declared_invalid' or "
    "'reinstated'; reason: String should have at most 500 characters"
)


def test_the_start_rebuilds_every_watch_and_publishes_every_table() -> None:
    intake = make()
    loose = {**craps_roll("t2", 3, 3, 1, 2), "ts": "bad", "status": "no", "reason": "r" * 600}
    rows = [
        ("t2", "craps/roll", craps_roll("t2", 1, 1, 3, 4)),
        ("t2", "craps/roll", loose),
        ("t2", "craps/roll", loose),
        ("t1", "craps/roll", {**craps_roll("t2", 2, 2, 1, 1)}),  # another table's
        ("t1", "craps/roll", craps_roll("t1", 1, 1, 5, 5)),
    ]
    refused = intake.replay_rows(rows)
    assert refused == Counter(
        {f"t2 craps/roll: {_REFUSED_DETAIL[:200]}": 2, "t1 craps/roll: names table 't2'": 1}
    )
    with capture_logs() as logs:
        intake.replayed(refused)
    assert [(e["event"], e["log_level"], e["count"], e["first"]) for e in logs] == [
        ("stored messages not replayed", "warning", 3, "t1 craps/roll: names table 't2'")
    ]
    assert sorted(intake.watches) == ["t1", "t2"]
    assert sorted(intake.outbox, key=lambda o: o[0]) == [
        ("t1", {"table": "t1", "ts": STAMP, "alarms": []}),
        ("t2", {"table": "t2", "ts": STAMP, "alarms": []}),
    ]
    # Published whatever was published before.
    with capture_logs() as logs:
        intake.replayed(Counter())
    assert logs == []
    assert len(intake.outbox) == 4


def test_the_start_says_an_alarm_that_stands() -> None:
    intake = make()
    fake = _fake(intake, "t1", ["dice"])
    fake.findings = [finding("6-6", 9)]
    with capture_logs() as logs:
        intake.replayed(Counter())
    assert [e["event"] for e in logs] == ["integrity alarm"]
    assert fake.evaluated == [(STAMP, None)]
    with capture_logs() as logs:
        intake.replayed(Counter())
    assert logs == []  # forced: published again, not said again
    assert len(intake.outbox) == 2


# -- refusals: counted, said once a minute ------------------------------------------------


def test_refusals_are_counted_and_said_once_a_minute_per_table_and_reason() -> None:
    intake = make(positions={"lammer/t1": 1, "lammer/t2": 1})
    junk = "x" * 100
    with capture_logs() as logs:
        intake.handle(f"lammer/t1/{junk}", b'{"seq": 2}', 100.0)
        intake.handle(f"lammer/t1/{junk}", b'{"seq": 3}', 159.99)  # within the minute
        intake.handle("lammer/t1/craps/roll", body(craps_roll("t9", 2, 2, 1, 1)), 101.0)
        intake.handle("lammer/t1/craps/roll", b"[2]", 101.5)  # the same topic, another reason
        intake.handle(f"lammer/t2/{junk}", b'{"seq": 2}', 102.0)  # another table
        intake.handle(f"lammer/t1/{junk}", b'{"seq": 4}', 160.0)  # a minute after the line
    lines = [e for e in logs if e["event"] == "message dropped"]
    shown = "x" * 80
    unknown = f"{shown}: unknown_topic: '{shown}' is not a topic of the contract"
    assert [(e["table"], e["reason"], e["dropped"], e["refused"]) for e in lines] == [
        ("t1", unknown, 1, 1),
        ("t1", "craps/roll: wrong_table: names table 't9'", 3, 3),
        ("t1", "craps/roll: not_json: not a JSON object", 4, 4),
        ("t2", unknown, 5, 5),
        ("t1", unknown, 6, 6),
    ]
    assert all(e["log_level"] == "warning" for e in lines)
    status = intake.status()
    assert (status["dropped"], status["refused_total"]) == (6, 6)
    assert status["refused"] == {"unknown_topic": 4, "wrong_table": 1, "not_json": 1}
    assert intake.pending == type(intake.pending)()  # none of them stored


def test_what_cannot_be_stored_is_dropped_and_said_by_its_kind() -> None:
    job = bf.Job(base="lammer/t1", top=9, floor=1, next_seq=9, since=None, reason="first seen")
    intake = make(jobs=[job])
    with capture_logs() as logs:
        # Copies the backfill claims are checked by the store's parse: two faults of one
        # topic are one kind ("craps/roll"), a minute apart at most once.
        for seq, fault in ((3, {"dice": 5}), (4, {"status": "no"})):
            copy = body({**craps_roll("t1", seq, seq, 1, 2), **fault})
            intake.handle("lammer/t1/craps/roll", copy, 0.0)
        # The kind is the error's, not its sentence: whatever status a bad availability
        # names, one line a minute says it.
        intake.handle("lammer/t1/availability", b"maybe", 0.0)
        intake.handle("lammer/t1/availability", b"maybe", 1.0)
        intake.handle("lammer/t1/availability", b"perhaps", 2.0)
        intake.handle("lammer/t1/availability", b"later", 60.0)
    lines = [(e["table"], e["reason"], e["dropped"], e["refused"]) for e in logs]
    assert lines == [
        ("t1", "craps/roll: dice: Input should be a valid list", 1, 0),
        ("t1", "availability is online or offline, not 'maybe'", 3, 0),
        ("t1", "availability is online or offline, not 'later'", 6, 0),
    ]
    assert intake.status()["dropped"] == 6
    assert list(intake.pending) == []


def test_a_varied_flood_of_junk_writes_a_line_a_minute_per_kind() -> None:
    intake = make()
    with capture_logs() as logs:
        for i in range(1_000):
            intake.handle("lammer/t1/availability", f"status {i}".encode(), i / 100)
            intake.handle("lammer/t1/request/void_roll", b"[" * (i + 1), i / 100)
    lines = [(e["table"], e["reason"].split(" ")[0]) for e in logs]
    assert lines == [("t1", "availability"), ("t1", "the")]  # "the payload is not JSON (...)"
    assert intake.status()["dropped"] == 2_000


def test_the_tables_warned_of_are_bounded() -> None:
    intake = make()
    tables = WARNED_MAX + 500
    with capture_logs() as logs:
        for i in range(WARNED_MAX):
            intake.handle(f"lammer/t{i}/availability", b"maybe", 0.0)
        # Full, but a table already remembered keeps its own minute: not said again yet,
        # nor said for it as one of the others.
        intake.handle("lammer/t0/availability", b"maybe", 1.0)
        for i in range(WARNED_MAX, tables):
            intake.handle(f"lammer/t{i}/availability", b"maybe", 2.0)
    named = [e["table"] for e in logs]
    assert named == [f"t{i}" for i in range(WARNED_MAX)] + [MANY_TABLES]
    assert len(intake._warned) == WARNED_MAX + 1
    with capture_logs() as logs:
        # A minute later the old entries make room: each table is said again.
        intake.handle(f"lammer/t{tables}/availability", b"maybe", WARN_EVERY)
    assert [e["table"] for e in logs] == [f"t{tables}"]
    assert len(intake._warned) <= WARNED_MAX + 1
    with capture_logs() as logs:
        # Full again within the minute of the line for the others (said at 2.0): the
        # room made kept that line's time, so it is not said again before its minute.
        for i in range(tables + 1, tables + WARNED_MAX + 1):
            intake.handle(f"lammer/t{i}/availability", b"maybe", WARN_EVERY + 1.0)
    assert MANY_TABLES not in [e["table"] for e in logs]
    assert len(logs) == WARNED_MAX - 2  # the room there was: 1,024 less the two kept


# -- a new connection: what it writes again ---------------------------------------------------


def test_nothing_is_written_again_on_a_fresh_start() -> None:
    assert make().again() is None
    assert make(positions={"lammer/t1": 4}).again() == ([], {"lammer/t1": 4})


def test_the_last_minute_of_messages_gaps_and_jobs_is_written_again() -> None:
    clock = Clock()
    intake = make(clock=clock)
    gap = Missing(table="t1", from_seq=3, to_seq=4, reason="gone: test")
    save = bf.Save(bf.Job(base="lammer/t1", top=9, floor=1, next_seq=9, since=None, reason="gap"))
    request = Request(table="t1", name="void_roll", request_id="r", operator="pit", payload={})
    first: list[Item] = [stored("t1", 1), Availability(table="t1", status="online"), request]
    intake.written(Batch([*first, gap, save], {"lammer/t1": 1}, []), [True, True, True, [], False])
    intake.written(Batch([Availability(table="t1", status="offline")], None, []), [True])
    assert len(intake.recent) == 1  # nothing of it to write again
    clock.now = RECENT_SECONDS
    intake.written(Batch([stored("t1", 2)], {"lammer/t1": 2}, []), [True])
    assert intake.again() == (
        [first[0], gap, save, stored("t1", 2)],
        None,
    )  # no committed positions
    intake.positions = {"lammer/t1": 2}
    clock.now = RECENT_SECONDS + 0.01  # the first batch is more than a minute old
    intake.written(Batch([stored("t1", 5)], None, []), [True])
    assert intake.again() == ([stored("t1", 2), stored("t1", 5)], {"lammer/t1": 2})


def test_what_is_written_again_is_bounded() -> None:
    intake = make(clock=Clock())
    one = stored("t1", 1)
    intake.written(Batch([one] * (RECENT_ITEMS - 1), None, []), [False] * (RECENT_ITEMS - 1))
    intake.written(Batch([stored("t1", 2)], None, []), [True])
    again = intake.again()
    assert again is not None
    assert len(again[0]) == RECENT_ITEMS  # at the bound: kept
    intake.written(Batch([stored("t1", 3)], None, []), [True])
    again = intake.again()
    assert again is not None
    assert seqs(again[0]) == [2, 3]  # above it: the oldest batch goes


def test_the_count_bound_follows_what_the_time_bound_dropped() -> None:
    clock = Clock()
    intake = make(clock=clock)
    intake.written(Batch([stored("t1", 1)], None, []), [True])
    clock.now = 30.0
    many = [stored("t1", 2)] * (RECENT_ITEMS - 1)
    intake.written(Batch(list(many), None, []), [False] * len(many))
    clock.now = 60.5  # the first batch goes by time: 50,000 kept
    intake.written(Batch([stored("t1", 3)], None, []), [True])
    again = intake.again()
    assert again is not None
    assert len(again[0]) == RECENT_ITEMS
    clock.now = 61.0  # one more: the second goes by count
    intake.written(Batch([stored("t1", 4)], None, []), [True])
    assert intake.again() == ([stored("t1", 3), stored("t1", 4)], None)


def test_what_was_lost_is_counted_when_written_again() -> None:
    intake = make()
    items: list[Item] = [
        stored("t1", 1), stored("t1", 2), Missing(table="t1", from_seq=3, to_seq=4, reason="r"),
        Availability(table="t1", status="online"),
    ]  # fmt: skip
    assert intake.rewrote(items, [True, False, [(3, 4)], True]) == 1  # messages only
    assert intake.rewrote(items[:1], [True]) == 1
    assert intake.rewritten == 2
    with pytest.raises(ValueError, match="zip"):
        intake.rewrote(items, [True])


# -- the status -----------------------------------------------------------------------------


def test_the_status_counts_what_the_service_did() -> None:
    intake = make(positions={"lammer/t0": 3})
    assert intake.status() == {
        "stored": 0, "dropped": 0, "refused": {}, "refused_total": 0, "batches": 0,
        "pending": 0, "tables": 1,
    }  # fmt: skip
    intake.handle(*roll("t1", 1, None), 0.0, ack=print)
    intake.handle(*roll("t1", 2, 1), 0.0)  # QoS 0
    intake.handle("lammer/t1/craps/roll", b"[1]", 0.0)
    assert intake.status() == {
        "stored": 0, "dropped": 1, "refused": {"not_json": 1}, "refused_total": 1,
        "batches": 0, "pending": 2, "tables": 2,
    }  # fmt: skip
    drain(intake)
    assert intake.status() == {
        "stored": 2, "dropped": 1, "refused": {"not_json": 1}, "refused_total": 1,
        "batches": 1, "pending": 0, "tables": 2,
    }  # fmt: skip
    assert json.dumps(intake.status())
