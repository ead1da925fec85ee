"""The intake's gap filling, sans-IO: asks, answers, completeness by the table's count."""

from __future__ import annotations

from collections.abc import Callable

from records.intake import WINDOW, GapFound, Intake


def _stored(seqs: set[int]) -> Callable[[str, int, int], int]:
    def count(table: str, first: int, last: int) -> int:
        return sum(1 for s in seqs if first <= s <= last)

    return count


def test_a_range_is_confirmed_once_the_store_holds_what_the_table_resent() -> None:
    intake = Intake({"t1": 10}, confirm_after=30, answer_timeout=10)
    stored = {12, 15}
    for seq in (12, 15):
        intake.received("t1", seq, now=0)
    assert intake.due(now=5) == []  # not yet: one ask per confirm_after
    (ask,) = intake.due(now=31)
    assert (ask.from_seq, ask.to_seq) == (11, 15)
    assert intake.due(now=32) == []  # one ask in flight per table
    assert intake.answered("t1", ask.request_id, ok=True, sent=3, missing_before=None, now=33) == []
    count = _stored(stored)
    assert intake.settle(34, count) == ([], [])  # 2 of 3 stored: wait for the resent one
    stored.add(13)
    assert intake.settle(35, count) == ([], [])
    assert intake.confirmed["t1"] == 15


def test_what_the_journal_lost_and_what_never_came_are_gaps_with_reasons() -> None:
    intake = Intake({"t1": 0}, confirm_after=0, answer_timeout=10, tries=2)
    intake.received("t1", 2500, now=0)
    (ask,) = intake.due(now=1)
    assert (ask.from_seq, ask.to_seq) == (1, WINDOW)  # at most 1,000 apart
    gaps = intake.answered("t1", ask.request_id, ok=True, sent=5, missing_before=400, now=2)
    assert gaps == [
        GapFound(
            table="t1",
            from_seq=1,
            to_seq=399,
            reason="the table's journal no longer holds them (missing_before 400)",
        )
    ]
    nothing = _stored(set())
    assert intake.settle(5, nothing) == ([], [])
    gaps, again = intake.settle(13, nothing)  # nothing arrived: ask once more
    assert gaps == []
    assert [(a.from_seq, a.to_seq) for a in again] == [(1, WINDOW)]
    assert again[0].request_id != ask.request_id
    gaps, again = intake.settle(30, nothing)  # no answer to the second: give up
    assert again == []
    assert gaps == [
        GapFound(table="t1", from_seq=1, to_seq=WINDOW, reason="no answer to 2 resend requests")
    ]
    assert intake.confirmed["t1"] == WINDOW
    (nxt,) = intake.due(now=31)
    assert (nxt.from_seq, nxt.to_seq) == (WINDOW + 1, 2 * WINDOW)


def test_a_refused_resend_is_asked_again_later_and_strangers_answers_are_ignored() -> None:
    intake = Intake(confirm_after=30)
    intake.received("t2", 7, now=0)  # first seen: the records start here
    intake.received("t2", 9, now=0)
    (ask,) = intake.due(now=30)
    assert (ask.from_seq, ask.to_seq) == (7, 9)
    assert intake.answered("t2", "someone-else", ok=True, sent=0, missing_before=None, now=31) == []
    assert (
        intake.answered("t2", ask.request_id, ok=False, sent=None, missing_before=None, now=31)
        == []
    )
    assert intake.due(now=40) == []
    (again,) = intake.due(now=61)
    assert (again.from_seq, again.to_seq) == (7, 9)
