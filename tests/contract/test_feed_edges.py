"""contract.feed at its edges, through its public API: the exact bytes of a resend request,
the catch-up after a burst of retained states starting the stream at the newest of them,
request ids that never repeat and the bound of requests a round. Each asserts what a
consumer sees (events, positions, requests), so the parse side may change under it."""

from __future__ import annotations

import json

from contract.feed import Event, Feed, Gap, Message, Resend
from tests.helpers.feed_bodies import BODIES, TS

T = "lammer/t1"


def _payload(seq: int, prev: int | None, topic: str = "craps/roll") -> bytes:
    body = {"table": "t1", **BODIES[topic], "ts": TS, "seq": seq, "prev_seq": prev}
    return json.dumps(body).encode()


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
