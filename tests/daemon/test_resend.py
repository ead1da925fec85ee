"""``request/resend`` without amplification (issue 28, ``daemon.resend``): per user a rate
and a copy budget, copies shared for a few seconds, refusals past the budget answered once
and counted. The desk alone, then the table's core with a real journal (the broker and
the link are tests/integration/test_resend_flood.py's)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from contract.requests import COPY_BUDGET, copy_budget
from daemon.config import validate_config
from daemon.core import TableCore
from daemon.desk import RequestDesk
from daemon.journal import Journal
from daemon.outbox import OutboxMessage
from daemon.requests import Incoming
from daemon.resend import (
    ANSWER_EVERY,
    OTHERS,
    SHARE_WINDOW,
    CopyBudget,
    Refuse,
    ResendDesk,
    Serve,
    budget_error,
)
from rules.events import DiceRolled

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Clock:
    """Monotonic seconds the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _messages(first: int, count: int) -> list[OutboxMessage]:
    return [
        OutboxMessage(seq=s, topic="craps/roll", payload=b"{}", retained=False)
        for s in range(first, first + count)
    ]


def test_a_copy_budget_holds_in_any_window_not_only_per_calendar_minute() -> None:
    budget = CopyBudget(100, window=60.0)
    assert budget.fits(100, 0.0)
    assert not budget.fits(101, 0.0)
    budget.spend(60, 0.0)
    budget.spend(40, 59.0)
    assert budget.left(59.9) == 0
    # At 60 s the first 60 leave the window, the 40 of 59 s stay until 119 s.
    assert budget.free_in(60, 30.0) == pytest.approx(30.0)
    assert budget.free_in(61, 30.0) == pytest.approx(89.0)
    assert budget.left(60.0) == 60
    assert budget.left(119.0) == 100
    assert budget.free_in(101, 0.0) == 60.0  # never fits: said as the window
    # Whatever the pattern of requests, no 60 s holds more than the budget.
    spent: list[tuple[float, int]] = []
    flood = CopyBudget(100, window=60.0)
    for step in range(2400):  # a request of 7 copies every 0.1 s for 4 minutes
        now = step / 10
        if flood.fits(7, now):
            flood.spend(7, now)
            spent.append((now, 7))
    for start, _ in spent:
        assert sum(n for at, n in spent if start <= at < start + 60.0) <= 100


def test_copies_sent_a_moment_ago_are_shared_not_published_again() -> None:
    clock = Clock()
    desk = ResendDesk(clock=clock)
    asked = _messages(10, 50)
    first = desk.plan("display", asked)
    assert isinstance(first, Serve)
    assert (len(first.publish), first.shared) == (50, 0)
    desk.served("display", first)
    # Three screens ask the same range, or one overlapping it, within the window: only
    # what was not sent goes out, and nothing of it counts against their budget.
    clock.now += SHARE_WINDOW - 0.1
    for user in ("display", "display-pit2", "records"):
        again = desk.plan(user, asked)
        assert isinstance(again, Serve)
        assert (again.publish, again.shared) == ([], 50)
        desk.served(user, again)
    wider = desk.plan("display", _messages(40, 30))
    assert isinstance(wider, Serve)
    assert [m.seq for m in wider.publish] == list(range(60, 70))
    assert wider.shared == 20
    assert desk.left("display") == COPY_BUDGET - 50
    assert desk.left("records") == copy_budget("records")
    # After the window a screen that lost them too gets them again.
    clock.now += 0.2
    late = desk.plan("display-pit2", asked)
    assert isinstance(late, Serve)
    assert len(late.publish) == 50
    assert desk.published == 50
    assert desk.shared == 150


def test_past_the_budget_a_request_is_refused_whole_answered_once_then_counted() -> None:
    clock = Clock()
    desk = ResendDesk(budget=lambda user: 100, clock=clock)
    served = desk.plan("display", _messages(1, 80))
    assert isinstance(served, Serve)
    desk.served("display", served)
    clock.now += 1.0
    refusals = [desk.plan("display", _messages(200 + 30 * i, 30)) for i in range(20)]
    assert all(isinstance(r, Refuse) for r in refusals)
    answered = [r for r in refusals if isinstance(r, Refuse) and r.answer]
    assert len(answered) == 1  # the first; the other 19 only counted
    assert answered[0] is refusals[0]
    assert answered[0].error == (
        "resend budget spent: this table publishes at most 100 copies a minute for display, "
        "and 30 more were asked; ask again in 59 s"
    )
    # A request served only copies sent a moment ago spends nothing: no news, no answer.
    shared = desk.plan("display", _messages(1, 80))
    assert isinstance(shared, Serve)
    assert (shared.publish, shared.shared) == ([], 80)
    desk.served("display", shared)
    still = desk.plan("display", _messages(800, 30))
    assert isinstance(still, Refuse)
    assert not still.answer
    # Another user's budget is its own.
    other = desk.plan("records", _messages(500, 30))
    assert isinstance(other, Serve)
    # What fits is served (20 left), and the next refusal is answered again.
    fits = desk.plan("display", _messages(900, 20))
    assert isinstance(fits, Serve)
    desk.served("display", fits)
    after = desk.plan("display", _messages(950, 1))
    assert isinstance(after, Refuse)
    assert after.answer
    assert isinstance(desk.plan("display", _messages(960, 1)), Refuse)
    # A flood that is never served (here: more than a whole budget a request) is
    # answered once a minute.
    answered_at = clock.now
    for second in range(1, 200):
        clock.now = answered_at + second
        refused = desk.plan("display", _messages(2000, 101))
        assert isinstance(refused, Refuse)
        assert refused.answer == (second % ANSWER_EVERY == 0), second


def test_users_past_the_bound_share_one_account() -> None:
    desk = ResendDesk(max_users=3, budget=lambda user: 10, clock=Clock())
    for user in ("display", "records", "terminal"):
        assert desk.account(user) == user
        served = desk.plan(user, _messages(1, 1))
        assert isinstance(served, Serve)
        desk.served(user, served)
    assert desk.account("forged-1") == desk.account("forged-2") == OTHERS
    first = desk.plan("forged-1", _messages(100, 10))
    assert isinstance(first, Serve)
    desk.served("forged-1", first)
    assert isinstance(desk.plan("forged-2", _messages(200, 1)), Refuse)
    assert desk.account("display") == "display"


# -- the table's request desk: a real journal, a link that only counts -------------------


class Resender:
    """The link's side of a resend: copies counted, always connected, no backlog."""

    def __init__(self) -> None:
        self.copies: list[OutboxMessage] = []
        self.connected = True
        self.resend_backlog = 0

    def resend(self, messages: list[OutboxMessage]) -> None:
        self.copies.extend(messages)


class Shell:
    """The table's requests as the shell serves them (``daemon.app``): each answer's copies
    handed to the link."""

    def __init__(self, core: TableCore, link: Resender, resends: ResendDesk) -> None:
        self.journal = core.journal
        self.desk = RequestDesk(core, resends=resends)
        self.link = link

    def decide(self, incoming: Incoming) -> int:
        answer = self.desk.decide(incoming, self.link)
        self.link.resend(answer.resend)
        return answer.queued

    def flush_drops(self) -> None:
        self.desk.flush_drops()


@pytest.fixture
def table(tmp_path: Path) -> Iterator[tuple[Shell, Resender, Clock]]:
    """A craps core with 100 rolls published (a roll, a board, a state each), a resender,
    a desk with a budget of 30 copies a minute on the test's clock."""
    config = validate_config(
        {
            "table": {"id": "c1", "game": "CRAPS"},
            "dice_reader": {"port": str(tmp_path / "nothing")},
            "journal": {"path": str(tmp_path / "c1.db")},
        }
    )
    clock = Clock()
    wall = lambda: T0 + timedelta(seconds=clock.now)  # noqa: E731  the core's own clock, moved with the desk's
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=wall)
        core.start()
        for roll in range(1, 101):
            core.ingest("dice_reader", DiceRolled(roll_id=roll, dice=(2, 2 + roll % 3)))
        journal.mark_published(*(m.seq for m in journal.pending(10_000)))
        resender = Resender()
        resends = ResendDesk(budget=lambda user: 30, clock=clock)
        yield Shell(core, resender, resends), resender, clock


def _ask(user: str | None, first: int, last: int, rid: str) -> Incoming:
    body = {"operator": "screen", "request_id": rid, "from_seq": first, "to_seq": last}
    return Incoming.receive("resend", json.dumps(body).encode(), user=user)


def _answers(core: Shell) -> dict[str, dict[str, Any]]:
    found = [json.loads(m.payload) for m in core.journal.pending(10_000)]
    return {b["request_id"]: b for b in found if "request_id" in b}


def _records(core: Shell, key: str) -> list[Any]:
    found = core.journal.records(kind="decision")
    return [r.record[key] for r in found if key in r.record]


@pytest.mark.heavy
def test_a_display_flood_gets_its_budget_one_refusal_answer_and_a_count(
    table: tuple[Shell, Resender, Clock],
) -> None:
    core, resender, clock = table
    records_before = core.journal.last_seq
    # 4 a second (the rate), each for the next range of 10 seqs (a few messages), none
    # asked again within the share window, for 30 s: 120 requests.
    span = core.journal.last_seq - core.journal.last_seq % 10
    assert span >= 10 * 4 * (SHARE_WINDOW + 1)
    for i in range(120):
        clock.now += 0.25
        first = 1 + (i * 10) % span
        core.decide(_ask("display", first, first + 9, f"d{i}"))
    assert len(resender.copies) <= 30
    answers = _answers(core)
    served = [a for a in answers.values() if a["status"] == "ok"]
    refused = [a for a in answers.values() if a["status"] == "error"]
    assert served
    assert len(refused) == 1  # the first refusal past the budget; the rest counted
    assert refused[0]["error"].startswith("resend budget spent")
    # The record: each served request and its answer, one refusal and its answer, the
    # count at the first refusal only counted; no record for each of the others.
    grown = core.journal.last_seq - records_before
    assert grown == 2 * len(served) + 2 + 1
    (first,) = _records(core, "resend_refused")
    assert first["count"] == 1
    assert first["first"]["user"] == "display"
    clock.now += 60.0
    core.flush_drops()  # the shell's timer: a minute after the first count
    (_, report) = _records(core, "resend_refused")
    assert report["count"] == 120 - len(served) - 2
    assert report["total"] == 120 - len(served) - 1
    # The terminal (the bare topic) and records have budgets of their own.
    core.decide(_ask(None, 1, 40, "t1"))
    core.decide(_ask("records", 41, 80, "r1"))
    answers = _answers(core)
    assert answers["t1"]["status"] == answers["r1"]["status"] == "ok"
    record = _records(core, "resend")
    assert [r.get("user") for r in record[-2:]] == [None, "records"]


def test_three_screens_asking_the_same_range_at_once_get_it_published_once(
    table: tuple[Shell, Resender, Clock],
) -> None:
    core, resender, clock = table
    for screen in range(3):
        clock.now += 0.01
        core.decide(_ask("display", 1, 12, f"s{screen}"))
    answers = _answers(core)
    sent = {answers[f"s{i}"]["sent"] for i in range(3)}
    assert len(sent) == 1
    assert sent.pop() == len(resender.copies) > 0
    seqs = [m.seq for m in resender.copies]
    assert seqs == sorted(set(seqs))  # each copy once
    shared = [r.get("shared") for r in _records(core, "resend")]
    assert shared == [None, len(seqs), len(seqs)]
    # Past the share window, asked again, published again.
    clock.now += SHARE_WINDOW
    core.decide(_ask("display", 1, 12, "s3"))
    assert len(resender.copies) == 2 * len(seqs)


# -- what mutation testing found untested -------------------------------------------------


def test_the_budget_refusal_says_the_figures_and_at_least_one_second() -> None:
    assert budget_error("records", 12_000, 1_500, 30.4) == (
        "resend budget spent: this table publishes at most 12,000 copies a minute for "
        "records, and 1,500 more were asked; ask again in 30 s"
    )
    assert budget_error("display", 2000, 5, 0.2).endswith("ask again in 1 s")
    assert budget_error("display", 2000, 5, 1.6).endswith("ask again in 2 s")


def test_copies_that_fit_exactly_are_free_now_and_nothing_is_counted_for_none() -> None:
    budget = CopyBudget(100, window=60.0)
    budget.spend(60, 0.0)
    assert budget.free_in(40, 1.0) == 0.0  # exactly what is left
    assert budget.fits(40, 1.0)
    budget.spend(0, 2.0)  # nothing sent: nothing to expire later
    assert budget.left(2.0) == 40
    assert budget.free_in(41, 2.0) == pytest.approx(58.0)  # when the 60 of 0 s leave
    assert budget.left(60.0) == 100


def test_a_copy_published_again_is_shared_for_a_window_from_then() -> None:
    # The share window runs from each copy's latest publication: a copy published again
    # moves behind the others, so the oldest go first.
    clock = Clock()
    desk = ResendDesk(clock=clock)
    first = desk.plan("display", _messages(1, 1))
    assert isinstance(first, Serve)
    desk.served("display", first)  # seq 1 at 1000
    clock.now = 1003.0
    second = desk.plan("display", _messages(2, 1))
    assert isinstance(second, Serve)
    desk.served("display", second)  # seq 2 at 1003
    clock.now = 1005.0  # exactly a window after seq 1: published again
    again = desk.plan("display", _messages(1, 1))
    assert isinstance(again, Serve)
    assert [m.seq for m in again.publish] == [1]
    desk.served("display", again)  # seq 1 at 1005
    clock.now = 1008.5  # seq 2's window is over (1003 + 5), seq 1's is not (1005 + 5)
    late = desk.plan("display", _messages(1, 2))
    assert isinstance(late, Serve)
    assert [m.seq for m in late.publish] == [2]
    assert late.shared == 1


def test_a_copy_served_twice_counts_from_its_latest_publication() -> None:
    # Two requests planned before either is served both publish seq 1; the later one
    # moves it behind seq 2, so seq 2's window ending first lets it go first.
    clock = Clock()
    desk = ResendDesk(clock=clock)
    a, b = desk.plan("display", _messages(1, 1)), desk.plan("records", _messages(1, 1))
    assert isinstance(a, Serve)
    assert isinstance(b, Serve)
    desk.served("display", a)  # seq 1 at 1000
    clock.now = 1003.0
    two = desk.plan("display", _messages(2, 1))
    assert isinstance(two, Serve)
    desk.served("display", two)  # seq 2 at 1003
    clock.now = 1004.0
    desk.served("records", b)  # seq 1 again at 1004
    clock.now = 1008.5  # seq 2's window is over, seq 1's (from 1004) is not
    late = desk.plan("display", _messages(1, 2))
    assert isinstance(late, Serve)
    assert [m.seq for m in late.publish] == [2]
    assert desk.published == 3


def test_a_budget_counts_single_copies_and_says_to_the_fraction_when_one_fits_again() -> None:
    # A range of one message is one copy: three of them spend a budget of three.
    budget = CopyBudget(3, window=60.0)
    for at in (0.0, 1.0, 2.0):
        assert budget.fits(1, at)
        budget.spend(1, at)
    assert not budget.fits(1, 3.0)
    # The first copy leaves the window at 60 s: at 59.5 s the next one fits in 0.5 s (the
    # refusal's "ask again in" is this figure, not rounded up to a second).
    assert budget.free_in(1, 59.5) == 0.5
    assert budget.fits(1, 60.0)
