"""contract.feed at its edges, through its public API: the exact bytes of a resend request,
the catch-up after a burst of retained states starting the stream at the newest of them,
request ids that never repeat and the bound of requests a round, and what mutation testing
found no test for (docs/developers/mutation.md: deadlines after a gap given up, counters,
bounds, boundaries of time). Each asserts what a consumer sees (events, positions,
requests, counters), so the parse side may change under it."""

from __future__ import annotations

import json

from contract.feed import CATCHUP_AGAIN, MAX_EARLY, Event, Feed, Gap, Message, Refused, Resend
from tests.helpers.feed_bodies import BODIES, TS

T = "lammer/t1"
T2 = "lammer/t2"


def _payload(
    seq: int, prev: int | None, topic: str = "craps/roll", table: str = "t1", **extra: object
) -> bytes:
    body = {"table": table, **BODIES[topic], "ts": TS, "seq": seq, "prev_seq": prev, **extra}
    return json.dumps(body).encode()


def _answer(
    seq: int, prev: int, request_id: str, *, sent: int = 0, missing_before: int | None = None
) -> bytes:
    """A table's ``response/resend``: ``ok``, ``sent`` copies, what is gone."""
    body = {"table": "t1", "ts": TS, "seq": seq, "prev_seq": prev, "request_id": request_id}
    return json.dumps(body | {"status": "ok", "error": None, "sent": sent,
                              "missing_before": missing_before}).encode()  # fmt: skip


def _seqs(events: list[Event]) -> list[int]:
    return [e.seq for e in events if isinstance(e, Message)]


def test_a_resend_request_is_compact_json() -> None:
    ask = Resend(table=T, from_seq=3, to_seq=9, request_id="feed-x-1")
    assert ask.payload("records") == (
        b'{"operator":"records","request_id":"feed-x-1","from_seq":3,"to_seq":9}'
    )


def test_a_table_never_seen_holds_nothing() -> None:
    feed = Feed(ident="x")
    assert feed.held("lammer/never") == 0
    feed.receive(T, "craps/roll", _payload(1, None), now=0.0)
    feed.receive(T, "craps/roll", _payload(5, 4), now=0.0)
    assert feed.held(T) == 1
    assert feed.held("lammer/never") == 0


def _after_catchup(feed: Feed) -> Resend:
    """A burst of one retained state (seq 5), then the catch-up it is due."""
    assert _seqs(feed.receive(T, "state", _payload(5, 4, "state"), now=0.0, retained=True)) == [5]
    asks = feed.tick(0.0)
    assert len(asks) == 1
    ask = asks[0]
    assert isinstance(ask, Resend)
    assert (ask.from_seq, ask.to_seq) == (6, 6)
    return ask


def test_after_a_catchup_the_stream_goes_on_from_the_newest_state() -> None:
    feed = Feed(ident="x", catchup_after=0.0, catchup_spread=0.0)
    _after_catchup(feed)
    assert feed.positions() == {T: 5}
    # The next message, retained (a floor node's hand-over) or live: released at once,
    # and the one after it too, with no gap asked.
    assert _seqs(feed.receive(T, "craps/board", _payload(6, 5, "craps/board"), now=0.1,
                              retained=True)) == [6]  # fmt: skip
    assert _seqs(feed.receive(T, "craps/roll", _payload(7, 6), now=0.2)) == [7]
    assert feed.positions() == {T: 7}
    assert feed.held(T) == 0


def test_after_a_catchup_an_older_retained_state_is_still_the_states() -> None:
    feed = Feed(ident="x", catchup_after=0.0, catchup_spread=0.0)
    _after_catchup(feed)
    # Another topic's retained state, older than the newest: released once, as a state
    # from before the stream, the position unchanged.
    older = _payload(4, 3, "craps/board")
    assert _seqs(feed.receive(T, "craps/board", older, now=0.1, retained=True)) == [4]
    assert feed.receive(T, "craps/board", older, now=0.2, retained=True) == []
    assert feed.positions() == {T: 5}


def test_every_request_has_an_id_of_its_own() -> None:
    feed = Feed(ident="x", catchup_after=0.0, catchup_spread=0.0)
    first = _after_catchup(feed)
    other = "lammer/t2"
    body = {"table": "t2", **BODIES["state"], "ts": TS, "seq": 9, "prev_seq": 8}
    feed.receive(other, "state", json.dumps(body).encode(), now=0.0, retained=True)
    (second,) = feed.tick(0.0)
    assert isinstance(second, Resend)
    assert second.table == other
    # A counter of the feed's requests, whatever asked: a log reader can follow them.
    assert (first.request_id, second.request_id) == ("feed-x-1", "feed-x-2")


def test_a_round_asks_max_chunks_requests_at_most() -> None:
    feed = Feed(ident="x", wait=0.0, max_chunks=2)
    feed.receive(T, "craps/roll", _payload(1, None), now=0.0)
    events = feed.receive(T, "craps/roll", _payload(5000, 4999), now=0.0)
    asks = [e for e in events if isinstance(e, Resend)]
    assert [(a.from_seq, a.to_seq) for a in asks] == [(2, 1001), (1002, 2001)]


def test_the_next_deadline_is_the_gaps_wait_then_the_asks_timeout() -> None:
    feed = Feed(ident="x", wait=1.5, timeout=4.0, catchup_after=None, probe_after=None)
    assert feed.next_deadline() is None
    feed.receive(T, "craps/roll", _payload(1, None), now=10.0)
    assert feed.next_deadline() is None
    assert feed.receive(T, "craps/roll", _payload(4, 3), now=10.0) == []  # held: 2, 3 missing
    assert feed.next_deadline() == 11.5
    assert feed.tick(11.0) == []
    asks = feed.tick(11.5)
    assert [(a.from_seq, a.to_seq, a.request_id) for a in asks if isinstance(a, Resend)] == [
        (2, 3, "feed-x-1")
    ]
    assert feed.next_deadline() == 15.5


def test_a_rounds_requests_are_numbered_on() -> None:
    feed = Feed(ident="x", wait=0.0, max_chunks=3)
    feed.receive(T, "craps/roll", _payload(1, None), now=0.0)
    events = feed.receive(T, "craps/roll", _payload(2500, 2499), now=0.0)
    ids = [e.request_id for e in events if isinstance(e, Resend)]
    assert ids == ["feed-x-1", "feed-x-2", "feed-x-3"]


def test_what_an_answer_showed_complete_is_not_asked_again() -> None:
    # A hole of 2,498 seqs, one request a round: the first asks 2..1001; the table answers
    # it in full with no copy (records only, no message there), so the next round asks on
    # from 1002, not 2 again.
    feed = Feed(ident="x", wait=0.0, max_chunks=1, catchup_after=None, probe_after=None)
    feed.receive(T, "craps/roll", _payload(1, None), now=0.0)
    events = feed.receive(T, "craps/roll", _payload(2500, 2499), now=0.0)
    assert [(e.from_seq, e.to_seq) for e in events if isinstance(e, Resend)] == [(2, 1001)]
    answer = {
        "table": "t1",
        "ts": TS,
        "seq": 2501,
        "prev_seq": 2500,
        "request_id": "feed-x-1",
        "status": "ok",
        "error": None,
        "sent": 0,
        "missing_before": None,
    }
    events = feed.receive(T, "response/resend", json.dumps(answer).encode(), now=0.1)
    assert [(e.from_seq, e.to_seq) for e in events if isinstance(e, Resend)] == [(1002, 2001)]
    assert feed.positions() == {T: 1}


def _asked(events: list[Event]) -> list[tuple[int, int]]:
    return [(e.from_seq, e.to_seq) for e in events if isinstance(e, Resend)]


def test_after_giving_up_the_gap_behind_has_a_deadline_of_its_own() -> None:
    # contract.follow sleeps until next_deadline(): a gap behind the one given up must have
    # one, or on a quiet table (no message to wake it) it is never asked for.
    # Unanswered: seqs 2..3 and 5..7 missing, one round allowed.
    feed = Feed(ident="x", wait=1.5, timeout=4.0, max_asks=1, catchup_after=None,
                probe_after=None)  # fmt: skip
    feed.receive(T, "craps/roll", _payload(1, None), now=10.0)
    feed.receive(T, "craps/roll", _payload(4, 3), now=10.0)
    feed.receive(T, "craps/roll", _payload(8, 7), now=10.0)
    assert _asked(feed.tick(11.5)) == [(2, 3), (5, 7)]
    assert feed.next_deadline() == 15.5
    events = feed.tick(15.5)
    assert [(e.from_seq, e.to_seq, e.reason) for e in events if isinstance(e, Gap)] == [
        (2, 3, "unanswered")
    ]
    assert _seqs(events) == [4]
    assert feed.held(T) == 1
    # The gap behind (5..7) waits its own `wait` from the give-up, then is asked.
    assert feed.next_deadline() == 17.0
    assert _asked(feed.tick(17.0)) == [(5, 7)]
    assert feed.positions() == {T: 4}


def test_after_an_overflow_the_gap_behind_has_a_deadline_of_its_own() -> None:
    feed = Feed(ident="x", wait=1.5, max_held=1, catchup_after=None, probe_after=None)
    feed.receive(T, "craps/roll", _payload(1, None), now=10.0)
    feed.receive(T, "craps/roll", _payload(4, 3), now=10.0)
    events = feed.receive(T, "craps/roll", _payload(8, 7), now=11.0)  # two held: one too many
    assert [(e.from_seq, e.to_seq, e.reason) for e in events if isinstance(e, Gap)] == [
        (2, 3, "overflow")
    ]
    assert _seqs(events) == [4]
    assert feed.next_deadline() == 12.5
    assert _asked(feed.tick(12.5)) == [(5, 7)]


def test_a_stream_started_at_the_newest_state_takes_older_states_and_goes_on_after_it() -> None:
    feed = Feed(ident="x", catchup_after=None, probe_after=None)
    assert _seqs(feed.receive(T, "state", _payload(5, 4, "state"), now=0.0, retained=True)) == [5]
    # The first live message shows 6..8 published since that state: held, the stream
    # starts at the state.
    assert feed.receive(T, "craps/roll", _payload(9, 8), now=0.1) == []
    assert feed.positions() == {T: 5}
    # Another topic's retained state, older (a floor node interleaves them): released as
    # a state from before the stream.
    older = _payload(4, 3, "craps/board")
    assert _seqs(feed.receive(T, "craps/board", older, now=0.2, retained=True)) == [4]
    assert feed.positions() == {T: 5}
    # The seq after the state, retained too: the stream itself, the position moves on.
    after = _payload(6, 5, "craps/board")
    assert _seqs(feed.receive(T, "craps/board", after, now=0.3, retained=True)) == [6]
    assert feed.positions() == {T: 6}
    assert feed.held(T) == 1


def test_the_catchups_answer_does_not_cut_short_the_wait_of_a_gap_seen_before_it() -> None:
    feed = Feed(ident="x", wait=1.0, catchup_after=0.0, catchup_spread=0.0, probe_after=None)
    catchup = _after_catchup(feed)  # the stream starts after the state, at 5
    # A live message shows 6..8 missing: held, its wait runs from 0.25.
    assert feed.receive(T, "craps/roll", _payload(9, 8), now=0.25) == []
    assert feed.next_deadline() == 1.25
    # The catch-up's answer comes: nothing it reveals is still on its way, but the gap
    # before 9 was seen first and may still be on its way: it keeps its wait.
    assert feed.receive(T, "response/resend", _answer(10, 9, catchup.request_id, sent=1),
                        now=0.5) == []  # fmt: skip
    assert feed.next_deadline() == 1.25
    assert _asked(feed.tick(1.25)) == [(6, 8)]


def _two_tables_given_up(feed: Feed) -> list[Event]:
    """Tables t1 and t2 each release seq 1 at 0, then hold a message after a gap: t1 a
    live one, t2 a copy another subscriber asked for; asked at 1, given up at 2."""
    for table, name in ((T, "t1"), (T2, "t2")):
        feed.receive(table, "craps/roll", _payload(1, None, table=name), now=0.0)
    feed.receive(T, "craps/roll", _payload(4, 3), now=0.0)
    feed.receive(T2, "craps/roll", _payload(5, 4, table="t2"), now=0.0, resent=True)
    asks = feed.tick(1.0)
    assert [(a.table, a.from_seq, a.to_seq) for a in asks if isinstance(a, Resend)] == [
        (T, 2, 3),
        (T2, 2, 4),
    ]
    given_up = feed.tick(2.0)
    assert [(e.table, e.seq) for e in given_up if isinstance(e, Message)] == [(T, 4), (T2, 5)]
    return asks + given_up


def test_each_tables_quiet_period_is_its_own_in_one_tick() -> None:
    feed = Feed(ident="x", wait=1.0, timeout=1.0, max_asks=1, probe_after=30.0,
                probe_spread=0.0, catchup_after=None)  # fmt: skip
    _two_tables_given_up(feed)
    # t1 released a new message at 2 (quiet from then); t2 only a copy, old news: its
    # quiet period still runs from 0, and its probe is due first.
    assert feed.next_deadline() == 30.0
    assert [(a.table, a.from_seq) for a in feed.tick(30.0) if isinstance(a, Resend)] == [(T2, 6)]
    assert feed.next_deadline() == 32.0


def test_tail_probes_are_counted_and_numbered_with_the_feeds_other_requests() -> None:
    feed = Feed(ident="x", wait=1.0, timeout=1.0, max_asks=1, probe_after=30.0,
                probe_spread=0.0, catchup_after=None)  # fmt: skip
    asked = [e for e in _two_tables_given_up(feed) if isinstance(e, Resend)]
    asked += [e for e in feed.tick(40.0) if isinstance(e, Resend)]
    assert [(a.table, a.from_seq, a.to_seq) for a in asked[2:]] == [(T, 5, 5), (T2, 6, 6)]
    assert [a.request_id for a in asked] == ["feed-x-1", "feed-x-2", "feed-x-3", "feed-x-4"]
    assert feed.probes == 2


def test_a_copy_released_alone_does_not_start_a_quiet_period() -> None:
    feed = Feed(ident="x", probe_after=30.0, probe_spread=0.0, catchup_after=None)
    feed.receive(T, "craps/roll", _payload(1, None), now=0.0)
    assert feed.next_deadline() == 30.0
    # Copies another subscriber asked for are old news, not new play: marked as such by
    # the MQTT property, or by a `resent` field of the payload (a field the contract lets
    # a table add).
    assert _seqs(feed.receive(T, "craps/roll", _payload(2, 1), now=10.0, resent=True)) == [2]
    assert feed.next_deadline() == 30.0
    copy = _payload(3, 2, resent=True)
    assert _seqs(feed.receive(T, "craps/roll", copy, now=20.0)) == [3]
    assert feed.next_deadline() == 30.0
    # A new message of the table's own starts one.
    assert _seqs(feed.receive(T, "craps/roll", _payload(4, 3), now=25.0)) == [4]
    assert feed.next_deadline() == 55.0


def test_progress_gives_what_is_left_the_asks_again() -> None:
    # Seqs 2 and 4..5 missing, one round allowed: 2 comes (a copy) while the round waits,
    # which is progress, so what is left (4..5) is asked again at the timeout, not given up.
    feed = Feed(ident="x", wait=1.0, timeout=4.0, max_asks=1, catchup_after=None,
                probe_after=None)  # fmt: skip
    feed.receive(T, "craps/roll", _payload(1, None), now=0.0)
    feed.receive(T, "craps/roll", _payload(3, 2), now=0.0)
    feed.receive(T, "craps/roll", _payload(6, 5), now=0.0)
    assert _asked(feed.tick(1.0)) == [(2, 2), (4, 5)]
    assert _seqs(feed.receive(T, "craps/roll", _payload(2, 1), now=2.0, resent=True)) == [2, 3]
    events = feed.tick(5.0)
    assert _asked(events) == [(4, 5)]
    assert not [e for e in events if isinstance(e, Gap)]


def test_a_gap_is_given_up_once_patience_has_passed() -> None:
    feed = Feed(ident="x", wait=0.0, timeout=5.0, max_asks=10, patience=10.0,
                catchup_after=None, probe_after=None)  # fmt: skip
    feed.receive(T, "craps/roll", _payload(1, None), now=0.0)
    assert _asked(feed.receive(T, "craps/roll", _payload(4, 3), now=0.0)) == [(2, 3)]
    assert _asked(feed.tick(5.0)) == [(2, 3)]
    events = feed.tick(10.0)  # patience spent exactly: no third round
    assert [(e.from_seq, e.to_seq, e.reason) for e in events if isinstance(e, Gap)] == [
        (2, 3, "unanswered")
    ]
    assert _asked(events) == []
    assert _seqs(events) == [4]


def _gaps(events: list[Event]) -> list[tuple[int, int, str]]:
    return [(e.from_seq, e.to_seq, e.reason) for e in events if isinstance(e, Gap)]


def test_what_the_table_did_not_resend_is_a_gap_and_what_follows_comes_at_once() -> None:
    # 2..5 asked; the table has 2 and 5 (5 follows 3, which it never published): it
    # answers sent 2, both copies come, and 3 is a gap at once, 5 and 6 released with it.
    feed = Feed(ident="x", wait=0.0, catchup_after=None, probe_after=None)
    feed.receive(T, "craps/roll", _payload(1, None), now=0.0)
    assert _asked(feed.receive(T, "craps/roll", _payload(6, 5), now=0.0)) == [(2, 5)]
    assert _seqs(feed.receive(T, "craps/roll", _payload(2, 1), now=0.1, resent=True)) == [2]
    assert feed.receive(T, "craps/roll", _payload(5, 3), now=0.2, resent=True) == []
    events = feed.receive(T, "response/resend", _answer(7, 6, "feed-x-1", sent=2), now=0.3)
    assert _gaps(events) == [(3, 3, "not_resent")]
    assert _seqs(events) == [5, 6, 7]
    assert isinstance(events[0], Gap)


def test_what_the_journal_no_longer_has_is_a_gap_and_what_follows_comes_at_once() -> None:
    feed = Feed(ident="x", wait=0.0, catchup_after=None, probe_after=None)
    feed.receive(T, "craps/roll", _payload(1, None), now=0.0)
    assert _asked(feed.receive(T, "craps/roll", _payload(5, 4), now=0.0)) == [(2, 4)]
    answer = _answer(6, 5, "feed-x-1", missing_before=5)
    events = feed.receive(T, "response/resend", answer, now=0.1)
    assert _gaps(events) == [(2, 4, "gone")]
    assert _seqs(events) == [5, 6]
    assert isinstance(events[0], Gap)


def test_tables_past_max_tables_are_ignored_and_counted() -> None:
    feed = Feed(ident="x", max_tables=1, catchup_after=None, probe_after=None)
    assert _seqs(feed.receive(T, "craps/roll", _payload(1, None), now=0.0)) == [1]
    for seq in (1, 2):
        assert feed.receive(T2, "craps/roll", _payload(seq, None, table="t2"), now=0.0) == []
    assert feed.ignored == 2
    assert feed.positions() == {T: 1}


def test_retained_states_before_the_stream_are_bounded_and_what_is_dropped_counted() -> None:
    feed = Feed(ident="x", catchup_after=None, probe_after=None)
    released: list[Event] = []
    for seq in range(1, MAX_EARLY + 3):
        payload = _payload(seq, seq - 1 or None, "state")
        released += feed.receive(T, "state", payload, now=0.0, retained=True)
    messages = [e for e in released if isinstance(e, Message)]
    assert [m.seq for m in messages] == list(range(1, MAX_EARLY + 1))
    assert all(m.retained for m in messages)
    assert feed.dropped == 2
    assert feed.positions() == {}


def test_a_retained_state_received_live_later_is_not_released_again() -> None:
    feed = Feed(ident="x", catchup_after=None, probe_after=None)
    assert _seqs(feed.receive(T, "state", _payload(10, 9, "state"), now=0.0, retained=True)) == [10]
    # A floor node handed over the state (10) before the live messages before it.
    assert _seqs(feed.receive(T, "craps/roll", _payload(8, 7), now=0.1)) == [8]
    assert _seqs(feed.receive(T, "craps/roll", _payload(9, 8), now=0.2)) == [9]
    assert feed.receive(T, "craps/roll", _payload(9, 8), now=0.25) == []  # a QoS 1 repeat
    assert feed.dropped == 1
    assert feed.receive(T, "state", _payload(10, 9, "state"), now=0.3) == []
    assert feed.dropped == 2
    # It was released all the same: the stream goes on after it, nothing missing, so the
    # next message comes at once, no gap asked for 10 or made of it.
    assert feed.positions() == {T: 10}
    events = feed.receive(T, "craps/roll", _payload(11, 10), now=0.4)
    assert _seqs(events) == [11]
    assert feed.held(T) == 0
    assert feed.next_deadline() is None
    assert _gaps(feed.tick(100.0)) == []


def test_catchups_of_a_table_are_catchup_again_apart_at_any_clock() -> None:
    feed = Feed(ident="x", catchup_after=0.0, catchup_spread=0.0, probe_after=None)
    start = 100.0
    feed.receive(T, "state", _payload(5, 4, "state"), now=start, retained=True)
    assert _asked(feed.tick(start)) == [(6, 6)]
    # Retained states that trickle in within CATCHUP_AGAIN are the same burst.
    soon = start + CATCHUP_AGAIN / 2
    feed.receive(T, "craps/board", _payload(3, 2, "craps/board"), now=soon, retained=True)
    assert feed.tick(soon) == []
    # From CATCHUP_AGAIN on, a retained state is a new burst (a reconnect): asked again.
    again = start + CATCHUP_AGAIN
    feed.receive(T, "craps/roll", _payload(4, 3), now=again, retained=True)
    assert _asked(feed.tick(again)) == [(6, 6)]
    assert feed.catchups == 2


def test_a_table_under_a_prefix_of_several_levels_is_its_last_level() -> None:
    feed = Feed(ident="x", catchup_after=None, probe_after=None)
    base = "casino/floor2/t1"
    events = feed.receive(base, "craps/roll", _payload(1, None), now=0.0)
    assert [(e.table, e.seq) for e in events if isinstance(e, Message)] == [(base, 1)]


def test_an_unknown_topic_is_quoted_to_80_characters_in_its_refusal() -> None:
    feed = Feed(ident="x")
    topic = "x" * 80 + "Z" * 20
    (refused,) = feed.receive(T, topic, _payload(1, None), now=0.0)
    assert isinstance(refused, Refused)
    assert refused.reason == "unknown_topic"
    assert repr("x" * 80) in refused.detail
    assert "Z" not in refused.detail


def test_an_early_state_the_stream_reaches_frees_its_room_among_the_early_ones() -> None:
    # MAX_EARLY retained states above the first live message (1000): the bound is full.
    feed = Feed(ident="x", catchup_after=None, probe_after=None)
    for seq in range(1001, 1001 + MAX_EARLY):
        feed.receive(T, "state", _payload(seq, seq - 1, "state"), now=0.0, retained=True)
    assert _seqs(feed.receive(T, "craps/roll", _payload(1000, 999), now=0.1)) == [1000]
    # The stream reaches 1001, which was released as a state: one room free again, so
    # an older retained state handed over now is released.
    assert feed.receive(T, "state", _payload(1001, 1000, "state"), now=0.2) == []
    older = _payload(5, 4, "craps/board")
    assert _seqs(feed.receive(T, "craps/board", older, now=0.3, retained=True)) == [5]


def test_a_single_seq_the_journal_no_longer_has_is_gone_not_unsent() -> None:
    feed = Feed(ident="x", wait=0.0, catchup_after=None, probe_after=None)
    feed.receive(T, "craps/roll", _payload(1, None), now=0.0)
    assert _asked(feed.receive(T, "craps/roll", _payload(3, 2), now=0.0)) == [(2, 2)]
    answer = _answer(4, 3, "feed-x-1", missing_before=3)
    events = feed.receive(T, "response/resend", answer, now=0.1)
    assert _gaps(events) == [(2, 2, "gone")]
    assert _seqs(events) == [3, 4]
