"""contract.feed: every message once and in seq order, and every loss said, against a
simulated table that numbers records and messages alike and answers ``request/resend``
as mqtt-api.md 1.3 says (the daemon's own answer is tested in tests/integration)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from contract.feed import Event, Feed, Gap, Message, Other, Refused, Resend, admit
from contract.payloads import PayloadError
from tests.helpers.feed_bodies import BODIES, TS
from tests.helpers.forged import forged

T = "lammer/t1"


@dataclass
class SimTable:
    """A table's journal: seqs numbered over records and messages; messages chained by
    ``prev_seq``; ``set_aside`` ones never published; seqs below ``gone_below`` removed."""

    next_seq: int = 1
    last_message: int | None = None
    published: dict[int, bytes] = field(default_factory=dict)
    topics: dict[int, str] = field(default_factory=dict)
    set_aside: set[int] = field(default_factory=set)
    gone_below: int = 1
    served: list[Resend] = field(default_factory=list)

    def record(self, count: int = 1) -> None:
        self.next_seq += count

    def message(self, topic: str = "craps/roll", *, aside: bool = False, **body: object) -> int:
        seq = self.next_seq
        self.next_seq += 1
        stamped = {"table": "t1", **BODIES[topic], **body, "ts": TS}
        payload = json.dumps({**stamped, "seq": seq, "prev_seq": self.last_message})
        self.last_message = seq
        self.topics[seq] = topic
        if aside:
            self.set_aside.add(seq)
        else:
            self.published[seq] = payload.encode()
        return seq

    def answer(self, ask: Resend) -> tuple[list[tuple[int, bytes]], bytes]:
        """The copies of a resend, then its answer (itself a message of the table)."""
        self.served.append(ask)
        assert 1 <= ask.from_seq <= ask.to_seq <= ask.from_seq + 1000
        copies = [
            (s, p)
            for s, p in sorted(self.published.items())
            if ask.from_seq <= s <= ask.to_seq and s >= self.gone_below
        ]
        gone = self.gone_below if ask.from_seq < self.gone_below else None
        seq = self.message(
            "response/resend",
            request_id=ask.request_id,
            status="ok",
            error=None,
            sent=len(copies),
            missing_before=None if gone is None else min(gone, ask.to_seq + 1),
        )
        return copies, self.published[seq]


@dataclass
class Consumer:
    feed: Feed
    released: list[Message] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    asks: list[Resend] = field(default_factory=list)
    other: list[Other] = field(default_factory=list)

    def take(self, events: list[Event]) -> None:
        for event in events:
            match event:
                case Message():
                    self.released.append(event)
                case Gap():
                    self.gaps.append(event)
                case Resend():
                    self.asks.append(event)
                case Other():
                    self.other.append(event)


def _seq_of(payload: bytes) -> int:
    seq = json.loads(payload)["seq"]
    assert isinstance(seq, int)
    return seq


def run(
    table: SimTable,
    consumer: Consumer,
    deliveries: list[bytes],
    *,
    now: float = 0.0,
    lossy_copies: bool = False,
    heartbeat: bool = True,
) -> None:
    """Deliver, then let time pass and the table answer until nothing waits. With
    ``lossy_copies`` the first copy of every seq is lost too (so is its first answer);
    without ``heartbeat`` nothing follows the deliveries but the tail probe's answer."""
    feed = consumer.feed
    lost_once: set[int] = set()
    for payload in deliveries:
        now += 0.001
        consumer.take(feed.receive(T, "craps/roll", payload, now=now))
    # The table goes on publishing (its state changes with every event): a loss at the
    # very end is seen by what follows it.
    if heartbeat:
        beat = table.message("state")
        consumer.take(feed.receive(T, "state", table.published[beat], now=now))
    for _ in range(10_000):
        if consumer.asks:
            ask = consumer.asks.pop(0)
            copies, answer = table.answer(ask)
            for seq, payload in copies:
                if lossy_copies and seq not in lost_once:
                    lost_once.add(seq)
                    continue
                topic = table.topics[seq]
                consumer.take(feed.receive(T, topic, payload, now=now, resent=True))
            consumer.take(feed.receive(T, "response/resend", answer, now=now))
            continue
        if feed.held(T) == 0 and feed.next_deadline() is None:
            return
        now += 0.25
        consumer.take(feed.tick(now))
    raise AssertionError("the feed never settled")


def check(table: SimTable, consumer: Consumer, delivered: set[int], start: int) -> None:
    seqs = [m.seq for m in consumer.released]
    assert seqs == sorted(set(seqs)), "released out of order or twice"
    # Exactly what can be had: published, and (still in the journal or delivered once).
    expected = {
        s for s in table.published if s > start and (s >= table.gone_below or s in delivered)
    }
    assert set(seqs) == expected
    for m in consumer.released:
        assert m.payload == table.published[m.seq]
    # Every message that cannot be had is inside a Gap, and no Gap hides a released one.
    lost = (set(table.published) | table.set_aside) - set(seqs)
    for s in lost:
        if s <= start:
            continue
        assert any(g.from_seq <= s <= g.to_seq for g in consumer.gaps), s
    for g in consumer.gaps:
        assert not any(g.from_seq <= s <= g.to_seq for s in seqs), g
        reason = "gone" if g.to_seq < table.gone_below else "not_resent"
        assert g.reason == reason, (g, table.gone_below)
    # Gaps come in order too, and interleaved with the messages in seq order.
    bounds = [g.from_seq for g in consumer.gaps]
    assert bounds == sorted(bounds)


@st.composite
def histories(draw: st.DrawFn) -> tuple[SimTable, list[bytes], set[int]]:
    table = SimTable()
    count = draw(st.integers(1, 40))
    sent: list[bytes] = []
    for _ in range(count):
        table.record(draw(st.integers(0, 700)))  # records between messages: sparse seqs
        aside = draw(st.booleans()) and draw(st.integers(0, 9)) == 0
        seq = table.message(aside=aside)
        if not aside:
            for _ in range(draw(st.integers(0, 2))):  # 0: lost, 2: duplicated
                sent.append(table.published[seq])
    # The journal may have lost its oldest segments.
    if draw(st.booleans()):
        table.gone_below = draw(st.integers(1, table.next_seq))
    order = draw(st.permutations(sent))
    return table, list(order), {_seq_of(p) for p in sent}


@pytest.mark.heavy
@settings(max_examples=150, deadline=None)
@given(histories(), st.booleans())
def test_any_order_duplicates_and_losses_come_out_once_in_order_or_as_gaps(
    history: tuple[SimTable, list[bytes], set[int]], lossy_copies: bool
) -> None:
    table, deliveries, delivered = history
    consumer = Consumer(Feed(wait=1.0, timeout=3.0, start={T: 0}, ident="x"))
    run(table, consumer, deliveries, lossy_copies=lossy_copies)
    check(table, consumer, delivered, start=0)
    for ask in table.served:
        assert ask.to_seq - ask.from_seq < 1000  # split: 1,000 seqs a request at most


@pytest.mark.heavy
@settings(max_examples=150, deadline=None)
@given(histories(), st.booleans())
def test_with_nothing_after_the_losses_the_tail_probe_finds_them(
    history: tuple[SimTable, list[bytes], set[int]], lossy_copies: bool
) -> None:
    table, deliveries, delivered = history
    assume(deliveries)  # a table never seen live is not probed
    consumer = Consumer(Feed(wait=1.0, timeout=3.0, start={T: 0}, ident="x"))
    run(table, consumer, deliveries, lossy_copies=lossy_copies, heartbeat=False)
    check(table, consumer, delivered, start=0)
    assert consumer.feed.probes <= 1  # none when a gap fill's answer showed the tail


@settings(max_examples=100, deadline=None)
@given(histories(), st.integers(0, 3))
def test_a_subscriber_that_starts_in_the_middle_resumes_from_its_position(
    history: tuple[SimTable, list[bytes], set[int]], skip: int
) -> None:
    table, deliveries, delivered = history
    published = sorted(table.published)
    start = published[min(skip, len(published) - 1)] if skip and published else 0
    consumer = Consumer(Feed(start={T: start}, ident="y"))
    run(table, consumer, deliveries)
    check(table, consumer, delivered, start=start)


def test_a_held_message_waits_then_the_gap_is_asked_and_filled() -> None:
    table = SimTable()
    a, b = table.message(), table.message()
    table.record(5)
    c = table.message()
    feed = Feed(wait=1.0, ident="z")
    got = feed.receive(T, "craps/roll", table.published[a], now=0.0)
    assert [e.seq for e in got if isinstance(e, Message)] == [a]  # the stream starts here
    assert feed.receive(T, "craps/roll", table.published[c], now=0.1) == []  # b is missing
    assert feed.tick(0.9) == []  # still within the wait: a reordering broker gets a chance
    (ask,) = feed.tick(1.2)
    assert isinstance(ask, Resend)
    assert (ask.from_seq, ask.to_seq) == (a + 1, b)
    assert json.loads(ask.payload("pit")) == {
        "operator": "pit",
        "request_id": ask.request_id,
        "from_seq": a + 1,
        "to_seq": b,
    }
    assert ask.topic == f"{T}/request/resend"
    got = feed.receive(T, "craps/roll", table.published[b], now=1.3, resent=True)
    assert [(m.seq, m.resent) for m in got if isinstance(m, Message)] == [(b, True), (c, False)]
    assert feed.positions() == {T: c}
    # A retained republish and a second copy of a seen seq are dropped.
    assert feed.receive(T, "craps/roll", table.published[b], now=2.0, retained=True) == []
    assert feed.dropped == 1


def test_a_retained_state_older_than_the_stream_comes_after_its_first_live_message() -> None:
    # A floor node hands retained states over interleaved with live messages: a table's
    # state (seldom changed, so old) may come after the stream started. It is the table's
    # current state: released once, never taken for a repeat of what the stream had.
    table = SimTable()
    state = table.message("state")
    table.record(40)
    roll = table.message("craps/roll")
    board = table.message("craps/board")
    feed = Feed(ident="r")
    first = feed.receive(T, "craps/roll", table.published[roll], now=0)
    late = feed.receive(T, "state", table.published[state], now=0, retained=True)
    assert [m.seq for m in first + late if isinstance(m, Message)] == [roll, state]
    assert feed.receive(T, "state", table.published[state], now=1, retained=True) == []
    # A retained republish of what the stream released is still a repeat.
    assert feed.receive(T, "craps/roll", table.published[roll], now=1, retained=True) == []
    got = feed.receive(T, "craps/board", table.published[board], now=1, retained=True)
    assert [m.seq for m in got if isinstance(m, Message)] == [board]
    assert feed.positions() == {T: board}
    assert feed.dropped == 2


def test_a_resumed_feed_drops_retained_states_older_than_its_position() -> None:
    # Resumed from a stored position, what is older was seen before: dropped.
    table = SimTable()
    state = table.message("state")
    table.record(40)
    roll = table.message("craps/roll")
    feed = Feed(ident="r", start={T: roll})
    assert feed.receive(T, "state", table.published[state], now=0, retained=True) == []
    assert feed.dropped == 1


def test_retained_states_at_subscription_come_first_then_the_stream() -> None:
    table = SimTable()
    board = table.message("craps/board")
    table.record(3)
    state = table.message("state")
    roll = table.message("craps/roll")
    feed = Feed(ident="r")
    # The broker hands over retained states in its own order, before live messages.
    first = feed.receive(T, "state", table.published[state], now=0, retained=True)
    second = feed.receive(T, "craps/board", table.published[board], now=0, retained=True)
    assert [m.seq for m in first + second if isinstance(m, Message)] == [state, board]
    # The same retained state again (a reconnect) is dropped; the live stream starts.
    assert feed.receive(T, "state", table.published[state], now=0, retained=True) == []
    live = feed.receive(T, "craps/roll", table.published[roll], now=0)
    assert [m.seq for m in live if isinstance(m, Message)] == [roll]
    assert feed.receive(T, "availability", b"online", now=0) == [
        Other(table=T, topic="availability", payload=b"online")
    ]
    assert feed.receive(T, "request/resend", b"{}", now=0) == []  # another client's


def test_a_table_restarted_with_a_reused_id_goes_on_above_its_old_seqs() -> None:
    old = SimTable()
    last = [old.message() for _ in range(3)][-1]
    feed = Feed(start={T: last}, ident="n")
    new = SimTable(next_seq=last + 50)  # a new journal: seq continues above the old one
    first = new.message("state")
    got = feed.receive(T, "state", new.published[first], now=0)
    assert [m.seq for m in got if isinstance(m, Message)] == [first]  # prev_seq null
    assert feed.held(T) == 0
    assert feed.tick(1.0) == []  # nothing asked (a tail probe waits for a quiet table)


def test_a_table_that_never_answers_gives_a_gap_after_bounded_asks() -> None:
    table = SimTable()
    a, _lost, c = table.message(), table.message(), table.message()
    feed = Feed(wait=1.0, timeout=2.0, max_asks=3, ident="q")
    consumer = Consumer(feed)
    consumer.take(feed.receive(T, "craps/roll", table.published[a], now=0))
    consumer.take(feed.receive(T, "craps/roll", table.published[c], now=0))
    now = 0.0
    while not consumer.gaps:
        now += 0.5
        consumer.take(feed.tick(now))
        assert now < 60
    assert len(consumer.asks) == 3
    assert consumer.gaps == [Gap(table=T, from_seq=a + 1, to_seq=c - 1, reason="unanswered")]
    assert [m.seq for m in consumer.released] == [a, c]  # released after the gap, in order


def test_held_messages_are_bounded() -> None:
    table = SimTable()
    first = table.message()
    table.message()  # lost
    rest = [table.message() for _ in range(6)]
    feed = Feed(max_held=4, ident="h")
    consumer = Consumer(feed)
    consumer.take(feed.receive(T, "craps/roll", table.published[first], now=0))
    for seq in rest:
        consumer.take(feed.receive(T, "craps/roll", table.published[seq], now=0))
    assert consumer.gaps == [Gap(table=T, from_seq=first + 1, to_seq=first + 1, reason="overflow")]
    assert [m.seq for m in consumer.released] == [first, *rest]
    assert feed.held(T) == 0


def test_a_long_gap_is_asked_in_parts_of_1000_seqs() -> None:
    table = SimTable()
    first = table.message()
    lost = table.message()
    table.record(2500)
    table.message()  # lost too: prev_seq of `after` names it
    after = table.message()
    feed = Feed(wait=0.0, max_chunks=4, ident="p")
    consumer = Consumer(feed)
    consumer.take(feed.receive(T, "craps/roll", table.published[first], now=0))
    consumer.take(feed.receive(T, "craps/roll", table.published[after], now=0))
    consumer.take(feed.tick(0.0))
    assert [(a.from_seq, a.to_seq) for a in consumer.asks] == [
        (first + 1, first + 1000),
        (first + 1001, first + 2000),
        (first + 2001, after - 1),
    ]  # prev_seq of `after` is after - 1: the gap ends there
    assert lost == first + 1


# -- the tail probe ----------------------------------------------------------------------


def _probes(events: list[Event]) -> list[Resend]:
    return [e for e in events if isinstance(e, Resend) and e.from_seq == e.to_seq]


def _answer_body(
    table: SimTable, ask: Resend, *, error: str | None, missing_before: int | None
) -> bytes:
    """An answer to ``ask`` published by ``table`` as it is (no copies): for answers the
    simulated table would not give (refused, or a journal that began above the range)."""
    seq = table.message(
        "response/resend",
        request_id=ask.request_id,
        status="ok" if error is None else "error",
        error=error,
        sent=0 if error is None else None,
        missing_before=missing_before,
    )
    return table.published[seq]


def test_a_lost_last_message_is_asked_for_by_the_tail_probe() -> None:
    table = SimTable()
    a = table.message()
    table.record(3)  # records between: the lost message is not at a + 1
    lost = table.message("state")
    feed = Feed(wait=1.0, probe_after=30.0, probe_spread=0.0, ident="t")
    consumer = Consumer(feed)
    consumer.take(feed.receive(T, "craps/roll", table.published[a], now=0.0))
    assert feed.next_deadline() == 30.0
    assert feed.tick(29.9) == []
    probe = feed.tick(30.0)
    assert [(e.from_seq, e.to_seq) for e in _probes(probe)] == [(a + 1, a + 1)]
    assert feed.probes == 1
    # The table answers: nothing at a + 1 (a record, not a message), and the answer's
    # prev_seq names the lost message: the ordinary gap fill takes over.
    copies, answer = table.answer(_probes(probe)[0])
    assert copies == []
    assert feed.receive(T, "response/resend", answer, now=30.1) == []  # held
    consumer.take(feed.tick(31.2))
    (ask,) = consumer.asks
    assert (ask.from_seq, ask.to_seq) == (a + 1, lost)
    copies, answer2 = table.answer(ask)
    assert [s for s, _ in copies] == [lost]
    # Unmarked, as on the floor (the 3.1.1 bridges drop the MQTT 5 property).
    consumer.take(feed.receive(T, "state", copies[0][1], now=31.3))
    consumer.take(feed.receive(T, "response/resend", answer2, now=31.3))
    assert [m.seq for m in consumer.released] == [a, lost, _seq_of(answer), _seq_of(answer2)]
    assert consumer.gaps == []
    # The answers and the copy are not new play: no second probe in this quiet period.
    for step in range(1, 3600 * 4):
        assert feed.tick(31.3 + step / 4) == []
    assert feed.next_deadline() is None


def test_the_tail_probe_answer_says_nothing_was_lost_and_no_gap_is_made() -> None:
    table = SimTable()
    a = table.message()
    feed = Feed(probe_after=30.0, probe_spread=0.0, ident="u")
    consumer = Consumer(feed)
    consumer.take(feed.receive(T, "craps/roll", table.published[a], now=0.0))
    (probe,) = _probes(feed.tick(30.0))
    # The range is past the table's last seq; the table answers it ok, sent 0, and here
    # says missing_before (a journal that began above it): no gap for that.
    answer = _answer_body(table, probe, error=None, missing_before=a + 2)
    consumer.take(feed.receive(T, "response/resend", answer, now=30.1))
    assert [m.seq for m in consumer.released] == [a, _seq_of(answer)]
    assert consumer.gaps == []
    assert feed.next_deadline() is None
    assert feed.positions() == {T: _seq_of(answer)}


def test_a_refused_or_unanswered_probe_is_not_asked_again() -> None:
    for answered in (True, False):
        table = SimTable()
        a = table.message()
        feed = Feed(probe_after=30.0, probe_spread=0.0, ident="v")
        consumer = Consumer(feed)
        consumer.take(feed.receive(T, "craps/roll", table.published[a], now=0.0))
        (probe,) = _probes(feed.tick(30.0))
        if answered:  # the table's rate limit (4 a second, all clients together)
            refused = _answer_body(
                table,
                probe,
                error="too many resend requests: ask again in a moment",
                missing_before=None,
            )
            consumer.take(feed.receive(T, "response/resend", refused, now=30.1))
            assert [m.seq for m in consumer.released] == [a, _seq_of(refused)]
        for step in range(1, 3600 * 4):
            consumer.take(feed.tick(30.1 + step / 4))
        assert consumer.asks == []
        assert consumer.gaps == []
        assert feed.probes == 1


def test_no_probe_storm_one_probe_per_quiet_period_among_subscribers() -> None:
    """Three subscribers of one quiet table for an hour of ticks, each seeing every answer:
    one probe in all (the first answer spares the others theirs); a new message of the
    table starts a new quiet period, and one probe again."""
    table = SimTable()
    consumers = [
        Consumer(Feed(probe_after=30.0, probe_spread=15.0, ident=i)) for i in ("a", "b", "c")
    ]

    def deliver(topic: str, payload: bytes, now: float, *, resent: bool = False) -> None:
        for c in consumers:
            c.take(c.feed.receive(T, topic, payload, now=now, resent=resent))

    def hour(start: float) -> list[Resend]:
        asked: list[Resend] = []
        for step in range(1, 3600 * 20):  # every 50 ms
            now = start + step / 20
            for c in consumers:
                c.take(c.feed.tick(now))
                while c.asks:
                    ask = c.asks.pop(0)
                    asked.append(ask)
                    copies, answer = table.answer(ask)
                    for _seq, payload in copies:
                        deliver(table.topics[_seq], payload, now, resent=True)
                    deliver("response/resend", answer, now)
        return asked

    first = table.message()
    deliver("craps/roll", table.published[first], 0.0)
    asked = hour(0.0)
    assert len(asked) == 1
    assert (asked[0].from_seq, asked[0].to_seq) == (first + 1, first + 1)
    # The probe came from the feed whose share of the spread is the smallest.
    assert [c.feed.probes for c in consumers] == [1, 0, 0]
    second = table.message("state")
    deliver("state", table.published[second], 3600.0)
    asked = hour(3600.0)
    assert len(asked) == 1
    assert all(c.gaps == [] for c in consumers)
    released = [[m.seq for m in c.released] for c in consumers]
    assert released[0] == released[1] == released[2] == sorted(table.published)


def test_a_table_never_seen_live_or_offline_is_not_probed() -> None:
    table = SimTable()
    state = table.message("state")
    # Only a start position, or only the retained state handed over at subscription: the
    # tail probe alone (the catch-up after a burst, once, is tested below) never asks.
    for feed in (
        Feed(start={T: state}, ident="w", catchup_after=None),
        Feed(ident="w", catchup_after=None),
    ):
        feed.receive(T, "state", table.published[state], now=0.0, retained=True)
        assert all(feed.tick(step / 4) == [] for step in range(3600 * 4))
        assert feed.next_deadline() is None
    # Offline: no probe while it is; back online in the same quiet period, one probe.
    feed = Feed(probe_after=30.0, probe_spread=0.0, ident="w")
    roll = table.message()
    feed.receive(T, "craps/roll", table.published[roll], now=0.0)
    feed.receive(T, "availability", b"offline", now=10.0)
    assert all(feed.tick(10.0 + step / 4) == [] for step in range(3600 * 4))
    feed.receive(T, "availability", b"online", now=3610.0)
    assert [(p.from_seq, p.to_seq) for p in _probes(feed.tick(3610.0))] == [(roll + 1, roll + 1)]
    assert feed.tick(3700.0) == []


def test_a_resumed_feed_handed_a_newer_retained_state_probes_after_it() -> None:
    table = SimTable()
    saved = table.message()
    state = table.message("state")  # published while the consumer was away
    # The tail probe alone (the catch-up after the burst is tested below).
    feed = Feed(start={T: saved}, probe_after=30.0, probe_spread=0.0, ident="s", catchup_after=None)
    got = feed.receive(T, "state", table.published[state], now=0.0, retained=True)
    assert [m.seq for m in got if isinstance(m, Message)] == [state]
    assert feed.tick(29.0) == []
    assert [(p.from_seq, p.to_seq) for p in _probes(feed.tick(30.0))] == [(state + 1, state + 1)]


def test_no_probe_while_a_gap_is_being_filled() -> None:
    table = SimTable()
    a, _lost, c = table.message(), table.message(), table.message()
    feed = Feed(wait=1.0, timeout=100.0, max_asks=1, patience=1000.0, probe_after=30.0, ident="g")
    consumer = Consumer(feed)
    consumer.take(feed.receive(T, "craps/roll", table.published[a], now=0.0))
    consumer.take(feed.receive(T, "craps/roll", table.published[c], now=0.0))
    for step in range(1, 100 * 4):
        consumer.take(feed.tick(step / 4))
    assert [(r.from_seq, r.to_seq) for r in consumer.asks] == [(a + 1, c - 1)]  # the gap's only
    assert feed.probes == 0


# -- the catch-up after a burst of retained states (issue 28) ----------------------------


def _serve(table: SimTable, ask: Resend, consumers: list[Consumer], now: float) -> None:
    """The table answers ``ask``: its copies, then its answer, to every consumer."""
    copies, answer = table.answer(ask)
    for c in consumers:
        for _seq, payload in copies:
            c.take(c.feed.receive(T, table.topics[_seq], payload, now=now, resent=True))
        c.take(c.feed.receive(T, "response/resend", answer, now=now))


def _stale_table() -> tuple[SimTable, int, int]:
    """A quiet table whose newest ``state`` is ``fresh``; a node that lost what came after
    ``stale`` (the state it still hands over) is behind by a roll, a board and a state."""
    table = SimTable()
    stale = table.message("state")
    table.record(5)
    table.message("craps/roll")
    table.message("craps/board")
    fresh = table.message("state")
    return table, stale, fresh


def test_a_stale_retained_state_is_replaced_by_the_catchup_within_seconds() -> None:
    table, stale, fresh = _stale_table()
    consumer = Consumer(Feed(catchup_after=0.5, catchup_spread=0.0, ident="k"))
    feed = consumer.feed
    consumer.take(feed.receive(T, "state", table.published[stale], now=0.0, retained=True))
    assert [m.seq for m in consumer.released] == [stale]  # the broker's state, at once
    assert feed.next_deadline() == 0.5
    assert feed.tick(0.49) == []
    (catchup,) = feed.tick(0.5)
    assert isinstance(catchup, Resend)
    assert (catchup.from_seq, catchup.to_seq) == (stale + 1, stale + 1)
    assert feed.catchups == 1
    assert feed.probes == 0
    # Its answer shows the table went on; the gap is asked at once (no wait: nothing it
    # reveals is still on its way), and the newest state comes as a copy.
    copies, answer = table.answer(catchup)
    assert copies == []  # stale + 1 is a record
    consumer.take(feed.receive(T, "response/resend", answer, now=0.6))
    (gap_ask,) = consumer.asks
    assert (gap_ask.from_seq, gap_ask.to_seq) == (stale + 1, fresh)  # the answer's prev_seq
    consumer.asks.clear()
    _serve(table, gap_ask, [consumer], now=0.7)
    assert fresh in [m.seq for m in consumer.released]
    seqs = [m.seq for m in consumer.released]
    assert seqs == sorted(set(seqs))
    assert set(seqs) == set(table.published)  # everything from the stale state on
    assert consumer.gaps == []
    # Done: no second catch-up for this burst, and no tail probe (no new play).
    assert all(feed.tick(0.7 + step / 4) == [] for step in range(1, 3600 * 4))
    assert feed.catchups == 1


def test_the_catchup_of_a_current_table_finds_nothing_and_asks_nothing_more() -> None:
    table = SimTable()
    board = table.message("craps/board")
    state = table.message("state")
    consumer = Consumer(Feed(catchup_after=0.5, catchup_spread=0.0, ident="k"))
    feed = consumer.feed
    for seq, topic in ((state, "state"), (board, "craps/board")):
        consumer.take(feed.receive(T, topic, table.published[seq], now=0.0, retained=True))
    (catchup,) = feed.tick(0.5)
    assert isinstance(catchup, Resend)
    assert (catchup.from_seq, catchup.to_seq) == (state + 1, state + 1)  # after the newest
    _serve(table, catchup, [consumer], now=0.6)
    assert consumer.asks == []
    assert consumer.gaps == []
    assert [m.seq for m in consumer.released] == [state, board, state + 1]  # + its answer
    assert feed.next_deadline() is None


def test_one_catchup_per_burst_none_after_a_live_message_and_again_after_a_reconnect() -> None:
    table = SimTable()
    first = table.message("state")
    second = table.message("craps/board")
    feed = Feed(catchup_after=0.5, catchup_spread=0.0, ident="m")
    # A burst that trickles in over 0.4 s: one catch-up, 0.5 s after its first state.
    feed.receive(T, "state", table.published[first], now=0.0, retained=True)
    feed.receive(T, "craps/board", table.published[second], now=0.4, retained=True)
    assert feed.next_deadline() == 0.5
    assert len(feed.tick(0.5)) == 1
    feed.receive(T, "state", table.published[first], now=0.6, retained=True)  # straggler
    assert all(feed.tick(0.6 + step / 4) == [] for step in range(40))
    assert feed.catchups == 1
    # A reconnect's burst later: asked again.
    feed.receive(T, "state", table.published[first], now=60.0, retained=True)
    (again,) = feed.tick(60.5)
    assert isinstance(again, Resend)
    assert feed.catchups == 2
    # A live message of the table before the catch-up is due shows where the table is.
    other = Feed(catchup_after=0.5, catchup_spread=0.0, probe_after=None, ident="m")
    other.receive(T, "state", table.published[first], now=0.0, retained=True)
    other.receive(T, "craps/board", table.published[second], now=0.2)
    assert all(other.tick(step / 4) == [] for step in range(1, 400))
    assert other.catchups == 0
    # An offline table cannot answer: no catch-up while it is.
    off = Feed(catchup_after=0.5, catchup_spread=0.0, ident="m")
    off.receive(T, "availability", b"offline", now=0.0, retained=True)
    off.receive(T, "state", table.published[first], now=0.0, retained=True)
    assert off.next_deadline() is None
    assert all(off.tick(step / 4) == [] for step in range(1, 400))


def test_a_pit_of_many_tables_spreads_its_catchups_and_one_answer_spares_the_others() -> None:
    # 200 tables: the catch-ups spread over catchup_spread, each table once.
    feed = Feed(catchup_after=0.5, catchup_spread=2.0, ident="pit")
    tables = [f"lammer/t{i}" for i in range(200)]
    for i, base in enumerate(tables):
        body = {**BODIES["state"], "table": f"t{i}", "ts": TS, "seq": 10 + i, "prev_seq": None}
        payload = json.dumps(body).encode()
        feed.receive(base, "state", payload, now=0.0, retained=True)
    when: dict[str, float] = {}
    for step in range(1, 300):
        for event in feed.tick(step / 100):
            assert isinstance(event, Resend)
            assert event.table not in when
            when[event.table] = step / 100
    assert set(when) == set(tables)
    assert min(when.values()) >= 0.5
    assert max(when.values()) <= 2.5
    assert sum(1 for t in when.values() if t < 1.5) < 150  # spread, not all at once
    # Three subscribers of one stale table: the first to ask spares the others.
    table, stale, fresh = _stale_table()
    consumers = [
        Consumer(Feed(catchup_after=0.5, catchup_spread=2.0, ident=i)) for i in ("a", "b", "c")
    ]
    for c in consumers:
        c.take(c.feed.receive(T, "state", table.published[stale], now=0.0, retained=True))
    asked: list[Resend] = []
    for step in range(1, 1000):
        now = step / 100
        for c in consumers:
            c.take(c.feed.tick(now))
            while c.asks:
                ask = c.asks.pop(0)
                asked.append(ask)
                _serve(table, ask, consumers, now)
    assert sum(c.feed.catchups for c in consumers) == 1
    assert all(fresh in [m.seq for m in c.released] for c in consumers)
    assert all(c.gaps == [] for c in consumers)
    # The catch-up, then one gap fill per subscriber (the table shares copies, issue 28).
    assert len(asked) <= 1 + len(consumers)


def test_a_first_live_message_after_stale_states_starts_the_stream_at_the_newest() -> None:
    # A busy table: the first live message comes before any catch-up, and its prev_seq
    # shows what the node's retained state lacks: the stream starts at that state.
    table, stale, fresh = _stale_table()
    roll = table.message("craps/roll")
    consumer = Consumer(Feed(wait=1.0, ident="q"))
    feed = consumer.feed
    consumer.take(feed.receive(T, "state", table.published[stale], now=0.0, retained=True))
    consumer.take(feed.receive(T, "craps/roll", table.published[roll], now=0.1))
    assert feed.held(T) == 1
    assert feed.catchups == 0
    consumer.take(feed.tick(1.2))
    (ask,) = consumer.asks
    assert (ask.from_seq, ask.to_seq) == (stale + 1, fresh)
    consumer.asks.clear()
    _serve(table, ask, [consumer], now=1.3)
    assert [m.seq for m in consumer.released][:1] == [stale]
    assert fresh in [m.seq for m in consumer.released]
    assert consumer.gaps == []
    # A live message that follows the newest state is where the stream starts, as before.
    other = Consumer(Feed(ident="q"))
    busy = SimTable()
    board, state = busy.message("craps/board"), busy.message("state")
    other.take(other.feed.receive(T, "craps/board", busy.published[board], now=0.0, retained=True))
    got = other.feed.receive(T, "state", busy.published[state], now=0.0)
    assert [m.seq for m in got if isinstance(m, Message)] == [state]
    assert other.feed.held(T) == 0


def test_resend_topics_at_the_user_level() -> None:
    ask = Resend(table=T, from_seq=3, to_seq=4, request_id="r")
    assert ask.topic_for("display") == f"{T}/request/resend/display"
    assert ask.topic_for("display-pit1") == f"{T}/request/resend/display-pit1"
    assert ask.topic_for(None) == ask.topic == f"{T}/request/resend"
    for bad in ("", "a/b", "+", "#", "x" * 65, "-lead"):
        with pytest.raises(ValueError, match="topic level"):
            ask.topic_for(bad)


@pytest.mark.parametrize("kind", [f.kind for f in forged("t1", 12_440, 1)])
def test_a_message_the_contract_refuses_moves_nothing_and_is_said(kind: str) -> None:
    # Issue 27: a forged message with a seq ahead of the table's, its prev_seq the table's
    # last (released at once if it counted), took the table's position to 12,440 and the
    # genuine messages after it were dropped without a trace.
    table = SimTable()
    consumer = Consumer(Feed(ident="f"))
    first = table.message()
    consumer.take(consumer.feed.receive(T, "craps/roll", table.published[first], now=0.0))
    bad = next(f for f in forged("t1", 12_440, first) if f.kind == kind)
    got = consumer.feed.receive(T, bad.topic, bad.payload, now=0.1)
    assert [type(e) for e in got] == [Refused]
    (refused,) = got
    assert isinstance(refused, Refused)
    assert (refused.table, refused.topic, refused.reason) == (T, bad.topic, bad.reason)
    assert refused.detail
    assert consumer.feed.refused == {bad.reason: 1}
    assert consumer.feed.positions() == {T: first}
    assert consumer.feed.held(T) == 0
    # The genuine messages that follow are released, in order, nothing asked.
    genuine = [table.message() for _ in range(3)]
    for seq in genuine:
        consumer.take(consumer.feed.receive(T, "craps/roll", table.published[seq], now=0.2))
    assert [m.seq for m in consumer.released] == [first, *genuine]
    assert consumer.gaps == []
    assert consumer.asks == []


def test_a_forged_seq_ahead_leaves_the_gap_fill_to_ask_for_the_genuine_message() -> None:
    table = SimTable()
    consumer = Consumer(Feed(wait=1.0, ident="g"))
    first = table.message()
    lost = table.message()  # the genuine message of that seq is lost on the way
    after = table.message()
    consumer.take(consumer.feed.receive(T, "craps/roll", table.published[first], now=0.0))
    for bad in forged("t1", lost, first):  # forged ones at the lost seq and beyond
        consumer.take(consumer.feed.receive(T, bad.topic, bad.payload, now=0.1))
    consumer.take(consumer.feed.receive(T, "craps/roll", table.published[after], now=0.2))
    consumer.take(consumer.feed.tick(1.5))
    (ask,) = consumer.asks
    assert (ask.from_seq, ask.to_seq) == (lost, lost)
    consumer.asks.clear()
    _serve(table, ask, [consumer], now=1.6)
    assert [m.seq for m in consumer.released if m.topic == "craps/roll"] == [first, lost, after]
    assert consumer.gaps == []
    assert sum(consumer.feed.refused.values()) == len(forged("t1", lost, first))


def test_admit_is_the_contracts_parse() -> None:
    table = SimTable()
    roll = table.message()
    answer = table.message("response/resend", request_id="r", status="ok", sent=0)
    assert admit("t1", "craps/roll", table.published[roll]).seq == roll
    assert admit("t1", "response/resend", table.published[answer]).seq == answer
    for topic in ("response/resend/x", "response/", "craps", "state/extra"):
        with pytest.raises(PayloadError) as caught:
            admit("t1", topic, table.published[roll])
        assert caught.value.reason == "unknown_topic"
    with pytest.raises(PayloadError, match="wrong_table"):
        admit("t2", "craps/roll", table.published[roll])
    # Availability and a deleted retained state carry no seq: passed on as they are.
    feed = Feed(ident="a")
    assert [type(e) for e in feed.receive(T, "availability", b"junk", now=0)] == [Other]
    assert [type(e) for e in feed.receive(T, "state", b"", now=0)] == [Other]
    assert feed.refused == {}
    # A JSON availability cannot take a seq either.
    got = feed.receive(T, "availability", table.published[roll], now=0)
    assert [type(e) for e in got] == [Other]
    assert feed.positions() == {}
