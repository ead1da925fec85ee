"""Bonus Craps and proper/invalid rolls: worked cases of every rule and every refusal."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.craps import (
    RECENT_ROLLS,
    SERIES_SHOWN,
    CrapsState,
    LastRoll,
    apply,
    board,
    forget_recent,
    initial_state,
    last_roll,
    latest_status,
    waiting,
)
from rules.errors import DecisionError, RollError
from rules.events import (
    LATE_FRAME,
    AlarmRaised,
    CheckReason,
    CrapsBet,
    CrapsBetReversed,
    CrapsBetSettled,
    Decision,
    DiceFact,
    DiceRolled,
    NoRoll,
    Outcome,
    RollCheck,
    RollDecided,
    RollRecorded,
    RollVoided,
    VoidOverturned,
)
from rules.paytables import BET_RULES
from tests.helpers.craps import apply_all, latest_roll_id

AT = datetime(2024, 3, 20, 21, 15, tzinfo=UTC)
# The seed's pay tables, written out here by hand (test_craps_paytable compares the data
# with the seed text itself).
SEED_PAYS: dict[int, dict[CrapsBet, Decimal]] = {
    1: {"all_small": Decimal(34), "all_tall": Decimal(34), "make_em_all": Decimal(175)},
    2: {"all_small": Decimal(30), "all_tall": Decimal(30), "make_em_all": Decimal(150)},
}
SMALL = (2, 3, 4, 5, 6)
TALL = (8, 9, 10, 11, 12)
DICE = {2: (1, 1), 3: (1, 2), 4: (2, 2), 5: (2, 3), 6: (3, 3), 7: (3, 4), 8: (4, 4)}
DICE |= {9: (4, 5), 10: (5, 5), 11: (5, 6), 12: (6, 6)}


class Table:
    """A test driver: numbers roll ids itself and keeps every outcome, and a record of every
    accepted event with its outcomes, as the daemon's journal (the ledger) does."""

    def __init__(self, paytable: int = 1) -> None:
        self.state = initial_state(paytable)
        self.next_id = 5001
        self.outcomes: list[Outcome] = []
        self.record: list[tuple[DiceFact | Decision, tuple[Outcome, ...]]] = []

    def do(self, event: DiceFact | Decision) -> tuple[Outcome, ...]:
        self.state, out = apply(self.state, event)
        self.outcomes.extend(out)
        self.record.append((event, out))
        return out

    def roll(self, *totals: int) -> tuple[Outcome, ...]:
        out: list[Outcome] = []
        for total in totals:
            out.extend(self.do(DiceRolled(roll_id=self.take_id(), dice=DICE[total])))
        return tuple(out)

    def check(self, dice: tuple[int, int], reason: CheckReason = "ON_CHIPS") -> int:
        roll_id = self.take_id()
        self.do(RollCheck(roll_id=roll_id, dice=dice, reason=reason))
        return roll_id

    def noroll(self) -> int:
        roll_id = self.take_id()
        self.do(NoRoll(roll_id=roll_id, reason="OFF_TABLE"))
        return roll_id

    def take_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def refused(self, decision: Decision, match: str) -> None:
        """The decision raises, names the roll, and the state is the same state."""
        before = self.state
        with pytest.raises(DecisionError, match=match) as info:
            apply(self.state, decision)
        assert info.value.roll_id == decision.roll_id
        assert self.state == before

    def refused_with(self, decision: Decision, message: str) -> None:
        """As ``refused``, the message read whole: the stickperson's terminal shows it."""
        self.refused(decision, f"^{re.escape(message)}$")


def ids(state: CrapsState) -> tuple[int, ...]:
    """The roll ids of the recent roll events a state keeps, oldest first."""
    return tuple(fact.roll_id for fact in state.recent_rolls)


def decide(roll_id: int, *, valid: bool, operator: str = "stick-ann") -> RollDecided:
    return RollDecided(roll_id=roll_id, valid=valid, operator=operator, at=AT)


def void(roll_id: int, clause: int = 2, operator: str = "stick-ann") -> RollVoided:
    return RollVoided(roll_id=roll_id, clause=clause, operator=operator, at=AT)  # type: ignore[arg-type]


def overturn(roll_id: int, operator: str = "floor-bob") -> VoidOverturned:
    return VoidOverturned(roll_id=roll_id, operator=operator, at=AT)


def settled(outcomes: Iterable[Outcome]) -> list[tuple[int, str, str, Decimal | None]]:
    return [
        (o.roll_id, o.bet, o.outcome, o.pays) for o in outcomes if isinstance(o, CrapsBetSettled)
    ]


def reversed_(outcomes: Iterable[Outcome]) -> list[tuple[int, str, str]]:
    return [(o.roll_id, o.bet, o.outcome) for o in outcomes if isinstance(o, CrapsBetReversed)]


def statuses(outcomes: Iterable[Outcome]) -> list[tuple[int, str]]:
    return [(o.roll_id, o.status) for o in outcomes if isinstance(o, RollRecorded)]


# ---------------------------------------------------------------------------------------
# The side bets (20:18:33:12)


@pytest.mark.parametrize("paytable", [1, 2])
def test_fresh_table_has_betting_open_and_the_pay_table_odds(paytable: int) -> None:
    view = board(initial_state(paytable))
    assert view.paytable == paytable
    assert view.betting_open
    assert view.numbers_hit == ()
    assert view.pending_roll is None
    assert view.all_small.remaining == SMALL
    assert view.all_tall.remaining == TALL
    assert view.make_em_all.remaining == SMALL + TALL
    for bet, pays in SEED_PAYS[paytable].items():
        assert view.bet(bet).pays == pays
        assert not view.bet(bet).complete
    assert latest_roll_id(initial_state(paytable)) is None


# Every row of both pay tables: rolled in this order (with repeats and off-bet numbers on
# the way), the bet completes on the last roll and wins at the row's odds, exactly once.
ROWS = [
    ("all_small", (6, 5, 5, 11, 4, 3, 8, 2)),
    ("all_tall", (12, 2, 11, 10, 10, 9, 8)),
    ("make_em_all", (8, 2, 9, 3, 10, 4, 11, 5, 12, 6)),
]


@pytest.mark.parametrize("paytable", [1, 2])
@pytest.mark.parametrize(("bet", "totals"), ROWS)
def test_each_bet_wins_at_its_pay_table_odds_on_its_last_number(
    paytable: int, bet: CrapsBet, totals: tuple[int, ...]
) -> None:
    table = Table(paytable)
    table.roll(*totals[:-1])
    assert not board(table.state).bet(bet).complete
    last = table.roll(totals[-1])
    wins = [s for s in settled(last) if s[1] == bet]
    assert wins == [(table.next_id - 1, bet, "win", SEED_PAYS[paytable][bet])]
    assert board(table.state).bet(bet).complete
    assert board(table.state).bet(bet).remaining == ()
    # Taken down (rule (1)(c)): more numbers and then a seven settle it no more.
    after = table.roll(*totals, 7)
    assert bet not in {s[1] for s in settled(after)}
    assert [s for s in settled(table.outcomes) if s[1] == bet] == wins


def test_make_em_all_completes_small_and_tall_on_the_way_each_once() -> None:
    table = Table(1)
    table.roll(2, 3, 4, 5, 6, 8, 9, 10, 11, 12)
    assert settled(table.outcomes) == [
        (5005, "all_small", "win", Decimal(34)),
        (5010, "all_tall", "win", Decimal(34)),
        (5010, "make_em_all", "win", Decimal(175)),
    ]


def test_come_out_seven_loses_every_bet_and_a_new_series_begins() -> None:
    table = Table()
    out = table.roll(7)
    assert settled(out) == [
        (5001, "all_small", "lose", None),
        (5001, "all_tall", "lose", None),
        (5001, "make_em_all", "lose", None),
    ]
    assert board(table.state).betting_open
    assert board(table.state).numbers_hit == ()


def test_seven_loses_only_the_bets_still_up_and_clears_the_lammers() -> None:
    table = Table()
    table.roll(2, 3, 4, 5, 6, 9)
    assert board(table.state).numbers_hit == (2, 3, 4, 5, 6, 9)
    assert board(table.state).all_tall.hit == (9,)
    out = table.roll(7)
    assert settled(out) == [(5007, "all_tall", "lose", None), (5007, "make_em_all", "lose", None)]
    view = board(table.state)
    assert view.numbers_hit == ()
    assert not view.all_small.complete
    assert view.all_small.remaining == SMALL


def test_betting_is_open_only_before_the_first_counted_roll_of_a_series() -> None:
    table = Table()
    table.noroll()  # a no-roll never counts, so the series has not begun
    assert board(table.state).betting_open
    table.roll(11)
    assert not board(table.state).betting_open
    table.roll(7)
    assert board(table.state).betting_open
    roll_id = table.check((2, 2))  # may yet be the first roll: betting waits
    assert not board(table.state).betting_open
    table.do(decide(roll_id, valid=False))
    assert board(table.state).betting_open


# ---------------------------------------------------------------------------------------
# Pending rolls (dice-reader-icd.md, "What the host must do")


def test_rolls_behind_a_pending_check_wait_in_order_and_count_once_it_is_decided() -> None:
    table = Table()
    table.roll(2, 3, 4)
    check = table.check((2, 3), "SLID")
    waiting = table.roll(6)
    assert statuses(waiting) == [(5005, "pending")]
    assert isinstance(waiting[0], RollRecorded)
    assert waiting[0].reason == "waits for the decision on roll 5004"
    pending = board(table.state).pending_roll
    assert pending is not None
    assert (pending.roll_id, pending.dice) == (5004, (2, 3))
    assert "SLID (68 IAC 10-4-4(c)(8))" in pending.reason
    assert board(table.state).numbers_hit == (2, 3, 4)  # nothing behind it counted
    out = table.do(decide(check, valid=True))
    # The CHECK counts with its dice (5), then the waiting six completes All Small.
    assert statuses(out) == [(5004, "counted"), (5005, "counted")]
    assert settled(out) == [(5005, "all_small", "win", Decimal(34))]
    assert board(table.state).pending_roll is None


def test_a_check_declared_invalid_does_not_count_and_the_rolls_behind_it_do() -> None:
    table = Table()
    check = table.check((3, 4), "RAIL")  # a seven on the rail
    table.roll(8)
    out = table.do(decide(check, valid=False))
    assert statuses(out) == [(check, "declared_invalid"), (check + 1, "counted")]
    assert settled(out) == []
    assert board(table.state).numbers_hit == (8,)


def test_a_check_behind_a_check_becomes_pending_in_turn() -> None:
    table = Table()
    first = table.check((1, 1))
    table.roll(3)
    second = table.check((2, 2), "BOWL")
    table.roll(5)
    table.refused(decide(second, valid=True), f"roll {second} waits behind it: decide roll {first}")
    out = table.do(decide(first, valid=True))
    assert statuses(out) == [(first, "counted"), (first + 1, "counted"), (second, "pending")]
    pending = board(table.state).pending_roll
    assert pending is not None
    assert pending.roll_id == second
    assert board(table.state).numbers_hit == (2, 3)
    out = table.do(decide(second, valid=True))
    assert statuses(out) == [(second, "counted"), (second + 1, "counted")]
    assert board(table.state).numbers_hit == (2, 3, 4, 5)


def test_a_check_with_an_unreadable_die_cannot_be_declared_valid() -> None:
    table = Table()
    check = table.check((0, 5), "UNREADABLE")
    table.refused(decide(check, valid=True), r"unreadable \(dice 0, 5\).*10-4-4\(c\)\(11\)")
    out = table.do(decide(check, valid=False))
    assert statuses(out) == [(check, "declared_invalid")]
    assert isinstance(out[0], RollRecorded)
    assert out[0].total is None
    table.refused(overturn(check), "a die was unreadable")


def test_a_no_roll_never_counts_and_does_not_wait() -> None:
    table = Table()
    table.check((1, 1))
    out = table.do(NoRoll(roll_id=table.take_id(), reason="EXTRA_DICE"))
    assert out == (
        RollRecorded(
            roll_id=5002,
            dice=(0, 0),
            total=None,
            status="noroll",
            reason="EXTRA_DICE (68 IAC 10-4-4(b)(2))",
        ),
    )
    assert latest_status(table.state) == "noroll"


# ---------------------------------------------------------------------------------------
# Voids and overturns


def test_voiding_a_seven_restores_lammers_and_bets_and_closes_betting_again() -> None:
    table = Table()
    table.roll(2, 3, 4, 5, 6, 9)
    before = board(table.state)
    table.roll(7)
    out = table.do(void(5007, clause=3))
    assert statuses(out) == [(5007, "declared_invalid")]
    assert reversed_(out) == [(5007, "all_tall", "lose"), (5007, "make_em_all", "lose")]
    assert board(table.state) == before
    assert not board(table.state).betting_open
    # The series goes on as if the seven had not been rolled: 9 is still lammered.
    out = table.roll(8, 10, 11, 12)
    assert settled(out) == [
        (5011, "all_tall", "win", Decimal(34)),
        (5011, "make_em_all", "win", Decimal(175)),
    ]


def test_voiding_the_roll_that_completed_all_small_takes_the_win_back() -> None:
    table = Table(2)
    table.roll(2, 3, 4, 5)
    before = board(table.state)
    table.roll(6)
    out = table.do(void(5005, clause=6))
    assert reversed_(out) == [(5005, "all_small", "win")]
    assert board(table.state) == before
    out = table.do(overturn(5005))
    assert statuses(out) == [(5005, "reinstated")]
    assert settled(out) == [(5005, "all_small", "win", Decimal(30))]
    assert board(table.state).all_small.complete


def test_overturning_a_check_declared_invalid_counts_it_with_its_dice() -> None:
    table = Table()
    check = table.check((3, 3), "STACKED")
    table.do(decide(check, valid=False))
    out = table.do(overturn(check))
    assert statuses(out) == [(check, "reinstated")]
    assert board(table.state).numbers_hit == (6,)
    assert not board(table.state).betting_open


def test_a_void_of_the_first_roll_of_a_series_reopens_betting() -> None:
    table = Table()
    table.roll(7, 4)
    table.do(void(5002))
    assert board(table.state).betting_open


@pytest.mark.parametrize("next_event", ["ROLL", "NOROLL", "CHECK"])
def test_any_later_roll_event_closes_the_void_and_overturn_windows(next_event: str) -> None:
    table = Table()
    table.roll(4)
    table.roll(6)
    table.do(void(5002))
    match next_event:
        case "ROLL":
            table.roll(8)
        case "NOROLL":
            table.noroll()
        case _:
            table.check((4, 4))
    table.refused(overturn(5002), "roll 5002 cannot be reinstated: roll 5003 has arrived since")
    table.refused(void(5001), "roll 5001 cannot be declared invalid: roll 5003 has arrived")


def test_a_roll_waiting_behind_a_check_closes_the_windows_of_that_check() -> None:
    # "Until the next roll arrives": roll 5002 arrived while 5001 was pending.
    table = Table()
    check = table.check((2, 2))
    table.roll(8)
    table.do(decide(check, valid=False))
    table.refused(overturn(check), "roll 5002 has arrived since")
    table.do(void(5002))  # the latest counted roll can still be voided


def test_void_refusals_name_the_reason() -> None:
    table = Table()
    table.refused(void(1), "unknown roll 1: the dice reader has reported no such roll")
    table.noroll()
    table.refused(void(5001), "no-roll under 68 IAC 10-4-4\\(b\\) and never counted")
    table.check((1, 2))
    table.refused(void(5002), "has not counted yet")
    table.do(decide(5002, valid=False))
    table.refused(void(5002), "already declared invalid")
    table.roll(5)
    table.refused(void(5003, clause=5), "clause 5 is not one the stickperson declares")
    table.refused(void(5003, operator=" "), "needs the operator")
    naive = RollVoided(roll_id=5003, clause=2, operator="a", at=datetime(2024, 1, 1))
    table.refused(naive, "has no time zone")


def test_decision_and_overturn_refusals_name_the_reason() -> None:
    table = Table()
    table.refused(decide(5001, valid=True), "unknown roll 5001")
    table.roll(4)
    table.refused(decide(5001, valid=True), "roll 5001 is not pending: no roll waits")
    table.refused(overturn(5001), "it counts; there is no declaration of invalid to overturn")
    table.refused(overturn(77), "unknown roll 77")
    check = table.check((1, 2))
    table.refused(decide(5001, valid=False), f"roll 5001 is not pending: decide roll {check}")
    table.refused(overturn(check), "has not been decided yet")
    table.noroll()
    table.refused(overturn(5003), "invalid by rule, not by declaration")


def records(outcomes: Iterable[Outcome]) -> list[RollRecorded]:
    return [o for o in outcomes if isinstance(o, RollRecorded)]


def test_every_record_carries_the_roll_s_total_and_the_reason_people_read() -> None:
    # craps/roll (mqtt-api.md) shows the total and the reason of every record.
    table = Table()
    check = table.check((1, 4), "BOWL")
    behind = table.do(DiceRolled(roll_id=table.take_id(), dice=(2, 4)))
    second = table.check((1, 2), "SLID")
    assert records(table.outcomes) == [
        RollRecorded(
            roll_id=check,
            dice=(1, 4),
            total=5,
            status="pending",
            reason="BOWL (68 IAC 10-4-4(c)(4)): waits for the stickperson's decision",
        ),
        RollRecorded(
            roll_id=check + 1,
            dice=(2, 4),
            total=6,
            status="pending",
            reason=f"waits for the decision on roll {check}",
        ),
        RollRecorded(
            roll_id=second,
            dice=(1, 2),
            total=3,
            status="pending",
            reason=f"SLID (68 IAC 10-4-4(c)(8)): waits for the decision on roll {check}",
        ),
    ]
    assert len(behind) == 1
    out = table.do(decide(check, valid=True, operator="stick-ann"))
    assert records(out) == [
        RollRecorded(
            roll_id=check,
            dice=(1, 4),
            total=5,
            status="counted",
            reason="BOWL (68 IAC 10-4-4(c)(4)): declared valid by stick-ann",
        ),
        RollRecorded(
            roll_id=check + 1,
            dice=(2, 4),
            total=6,
            status="counted",
            reason=f"waited for the decision on roll {check}",
        ),
        RollRecorded(
            roll_id=second,
            dice=(1, 2),
            total=3,
            status="pending",
            reason="SLID (68 IAC 10-4-4(c)(8)): waits for the stickperson's decision",
        ),
    ]
    out = table.do(decide(second, valid=False, operator="stick-cy"))
    assert records(out) == [
        RollRecorded(
            roll_id=second,
            dice=(1, 2),
            total=3,
            status="declared_invalid",
            reason="SLID (68 IAC 10-4-4(c)(8)): declared invalid by stick-cy",
        )
    ]
    out = table.do(overturn(second, operator="floor-di"))
    assert records(out) == [
        RollRecorded(
            roll_id=second,
            dice=(1, 2),
            total=3,
            status="reinstated",
            reason="declaration of invalid overturned by floor-di"
            " (68 IAC 10-4-4(c), last sentence)",
        )
    ]
    # Reinstated, the roll counts again like any counted roll: it can be voided, and only
    # once more reinstated after that (never counted twice).
    assert latest_status(table.state) == "counted"
    table.refused_with(
        overturn(second),
        f"roll {second} cannot be reinstated: it counts; there is no declaration of invalid"
        " to overturn",
    )
    out = table.do(void(second, clause=3, operator="stick-ann"))
    assert records(out) == [
        RollRecorded(
            roll_id=second,
            dice=(1, 2),
            total=3,
            status="declared_invalid",
            reason="68 IAC 10-4-4(c)(3): the dice did not leave the shooter's hand"
            " simultaneously; declared invalid by stick-ann",
        )
    ]
    assert board(table.state).numbers_hit == (5, 6)


def test_refusals_read_in_full() -> None:
    table = Table()
    table.roll(4)
    table.roll(6)
    table.refused_with(
        void(5001),
        "roll 5001 cannot be declared invalid: roll 5002 has arrived since, and the window"
        " closes when the next roll arrives (68 IAC 10-4-4(c))",
    )
    table.refused_with(
        void(5002, clause=5),
        "roll 5002: clause 5 is not one the stickperson declares here; choose 2, 3 or 6 of"
        " 68 IAC 10-4-4(c)",
    )
    table.refused_with(void(5002, operator=""), "a decision needs the operator who made it")
    noroll = table.noroll()
    table.refused_with(
        void(noroll),
        f"roll {noroll} cannot be declared invalid: it is a no-roll under 68 IAC 10-4-4(b)"
        " and never counted",
    )
    table.refused_with(
        overturn(noroll),
        f"roll {noroll} cannot be reinstated: a no-roll under 68 IAC 10-4-4(b) is invalid by"
        " rule, not by declaration",
    )
    check = table.check((0, 4), "UNREADABLE")
    table.refused_with(
        void(check),
        f"roll {check} cannot be declared invalid: it has not counted yet: it waits for a decision",
    )
    table.refused_with(
        overturn(check), f"roll {check} cannot be reinstated: it has not been decided yet"
    )
    table.do(decide(check, valid=False))
    table.refused_with(
        void(check), f"roll {check} cannot be declared invalid: it is already declared invalid"
    )
    table.refused_with(
        overturn(check),
        f"roll {check} cannot be reinstated: a die was unreadable (dice 0, 4), so it has"
        " nothing to count",
    )


def test_waiting_counts_the_rolls_behind_the_pending_one() -> None:
    # What ROLL_BACKLOG watches (rules.table).
    table = Table()
    assert waiting(table.state) == (0, None)
    table.roll(4)
    assert waiting(table.state) == (0, None)
    check = table.check((2, 2))
    assert waiting(table.state) == (0, check)
    table.roll(5, 6)
    assert waiting(table.state) == (2, check)
    table.do(decide(check, valid=True))
    assert waiting(table.state) == (0, None)


def test_the_board_names_the_queue_behind_a_check_with_its_whole_count() -> None:
    # For the stickperson (issue 22): every roll waiting, counted; the first 20 named.
    table = Table()
    check = table.check((2, 2))
    assert (board(table.state).waiting_count, board(table.state).waiting) == (0, ())
    table.roll(*([6] * 30))
    shown = board(table.state)
    assert shown.waiting_count == 30 == waiting(table.state)[0]
    assert len(shown.waiting) == 20
    assert list(shown.waiting) == list(range(check + 1, check + 21))  # in order
    table.do(decide(check, valid=True))
    assert (board(table.state).waiting_count, board(table.state).waiting) == (0, ())


def test_the_reader_s_last_roll_id_counts() -> None:
    # dice-reader-icd.md: roll ids run 1 to 999999.
    state, out = apply(initial_state(1), DiceRolled(roll_id=999_999, dice=(2, 3)))
    assert statuses(out) == [(999_999, "counted")]
    assert latest_roll_id(state) == 999_999


# ---------------------------------------------------------------------------------------
# Roll ids, bad facts and the record


def test_a_repeat_of_the_latest_roll_is_recorded_and_counted_once() -> None:
    table = Table()
    fact = DiceRolled(roll_id=42, dice=(1, 1))
    table.do(fact)
    counted = table.state
    assert table.do(fact) == ()
    assert board(table.state).numbers_hit == (2,)
    assert table.state == counted  # the journal records the repeat; the table is unchanged
    # The same id with other dice is another roll (the reader's counter restarted).
    table.do(DiceRolled(roll_id=42, dice=(1, 2)))
    assert board(table.state).numbers_hit == (2, 3)
    table.do(void(42))
    assert board(table.state).numbers_hit == (2,)


def late_frame(kind: str, roll_id: int) -> tuple[Outcome, ...]:
    """A late copy's only outcome: the alarm (shuffler-icd.md's rule for settled rounds)."""
    return (
        AlarmRaised(
            code=LATE_FRAME,
            device="dice_reader",
            message=(
                f"{kind} for roll {roll_id} arrived again after later rolls: that roll is "
                "recorded already and its results stand; the frame is kept in the journal "
                "for review"
            ),
        ),
    )


def test_a_late_copy_of_a_roll_that_paid_settles_nothing_again() -> None:
    table = Table()
    out = table.roll(2, 3, 4, 5, 6)
    assert settled(out) == [(5005, "all_small", "win", SEED_PAYS[1]["all_small"])]
    paid = DiceRolled(roll_id=5005, dice=DICE[6])
    table.roll(8)
    before = table.state
    assert table.do(paid) == late_frame("ROLL", 5005)
    assert table.state == before
    # A void window is the latest roll's: the late copy did not reopen roll 5005's.
    table.refused(void(5005), "roll 5005 cannot be declared invalid: roll 5006 has arrived")


@pytest.mark.parametrize("kind", ["NOROLL", "CHECK"])
def test_a_late_copy_of_a_noroll_or_check_changes_nothing(kind: str) -> None:
    table = Table()
    table.roll(2)
    fact: DiceFact = (
        NoRoll(roll_id=5002, reason="OFF_TABLE")
        if kind == "NOROLL"
        else RollCheck(roll_id=5002, dice=(3, 4), reason="BOWL")
    )
    table.do(fact)
    table.take_id()
    if kind == "CHECK":
        table.do(decide(5002, valid=False))
    table.roll(3)
    before = table.state
    assert table.do(fact) == late_frame(kind, 5002)
    assert table.state == before


def test_a_seen_roll_id_with_other_content_is_a_new_roll_and_hello_forgets_recent_rolls() -> None:
    table = Table()
    table.roll(2, 3)
    # Roll 5001 again, other dice: the reader's counter restarted, a new roll (docstring).
    table.do(DiceRolled(roll_id=5001, dice=DICE[4]))
    assert board(table.state).numbers_hit == (2, 3, 4)
    # After the reader's HELLO, even an exact copy of a recent roll is a new roll.
    copy = DiceRolled(roll_id=5002, dice=DICE[3])
    assert table.do(copy) == late_frame("ROLL", 5002)
    table.state = forget_recent(table.state)
    assert ids(table.state) == (5001,)  # the latest roll stays addressable
    assert [o.status for o in table.do(copy) if isinstance(o, RollRecorded)] == ["counted"]
    table.refused(void(5001), "roll 5001 cannot be declared invalid: roll 5002 has arrived")


@pytest.mark.parametrize(
    ("fact", "message"),
    [
        (DiceRolled(roll_id=0, dice=(1, 1)), "roll id 0 is out of range 1 to 999999"),
        (DiceRolled(roll_id=1_000_000, dice=(1, 1)), "out of range"),
        (DiceRolled(roll_id=1, dice=(0, 1)), r"dice \(0, 1\) are not two dice of 1 to 6"),
        (DiceRolled(roll_id=1, dice=(7, 1)), "not two dice of 1 to 6"),
        (DiceRolled(roll_id=1, dice=(1, 2, 3)), "not two dice"),  # type: ignore[arg-type]
        (RollCheck(roll_id=1, dice=(-1, 1), reason="SLID"), "not two dice of 0 to 6"),
        (RollCheck(roll_id=1, dice=(1, 1), reason="LOUD"), "unknown CHECK reason 'LOUD'"),  # type: ignore[arg-type]
        (NoRoll(roll_id=1, reason="LOST"), "unknown NOROLL reason 'LOST'"),  # type: ignore[arg-type]
    ],
)
def test_a_fact_that_cannot_be_is_refused_and_changes_nothing(fact: DiceFact, message: str) -> None:
    state = initial_state(1)
    with pytest.raises(RollError, match=message) as info:
        apply(state, fact)
    assert info.value.roll_id == fact.roll_id
    assert isinstance(info.value, ValueError)


def test_the_record_keeps_every_roll_decision_and_reversal_with_who_and_when() -> None:
    table = Table()
    table.roll(7)
    table.do(void(5001, operator="stick-cy"))
    table.refused(void(5001), "already declared invalid")  # refused: not in the record
    table.do(overturn(5001, operator="floor-di"))
    record = table.record
    assert [type(event).__name__ for event, _ in record] == [
        "DiceRolled",
        "RollVoided",
        "VoidOverturned",
    ]
    voided, reinstated = record[1][0], record[2][0]
    assert isinstance(voided, RollVoided)
    assert isinstance(reinstated, VoidOverturned)
    assert (voided.operator, voided.at, voided.clause) == ("stick-cy", AT, 2)
    assert (reinstated.operator, reinstated.at) == ("floor-di", AT)
    assert len(reversed_(record[1][1])) == 3
    assert len(settled(record[2][1])) == 3
    assert isinstance(record[1][1][0], RollRecorded)
    assert record[1][1][0].reason is not None
    assert "declared invalid by stick-cy" in record[1][1][0].reason
    # The journal is the ledger: replaying its events rebuilds the same state and outcomes.
    replayed, outcomes = apply_all(initial_state(1), [event for event, _ in record])
    assert replayed == table.state
    assert list(outcomes) == table.outcomes


def test_state_is_immutable() -> None:
    state: CrapsState = initial_state(1)
    with pytest.raises(AttributeError):
        state.paytable = 2  # type: ignore[misc]


@pytest.mark.heavy
def test_a_long_day_replays_to_an_equal_state_and_a_diverging_one_to_another() -> None:
    facts = [DiceRolled(roll_id=i, dice=DICE[2 + i % 11]) for i in range(1, 5001)]
    state, _ = apply_all(initial_state(1), facts)
    again, _ = apply_all(initial_state(1), facts)  # built apart: nothing shared
    # Memory is bounded (the journal is the full record): the latest roll ids, in order.
    assert ids(state) == tuple(f.roll_id for f in facts[-RECENT_ROLLS:])
    assert again == state
    assert hash(again) == hash(state)
    longer, _ = apply(state, DiceRolled(roll_id=1, dice=(1, 1)))
    assert longer != state
    assert ids(state) == tuple(f.roll_id for f in facts[-RECENT_ROLLS:])  # intact
    assert ids(longer) == (*ids(state)[1:], 1)
    # A replay that diverged (one roll id misread) shows the same board but is not equal.
    misread = [*facts[:-50], DiceRolled(roll_id=777_777, dice=facts[-50].dice), *facts[-49:]]
    other, _ = apply_all(initial_state(1), misread)
    assert board(other) == board(state)
    assert other != state


@pytest.mark.heavy
def test_the_roll_ids_kept_stay_bounded_however_long_the_table_runs() -> None:
    state = initial_state(1)
    sizes = []
    for i in range(1, 12_000):
        state, _ = apply(state, DiceRolled(roll_id=i % 999_999 + 1, dice=DICE[2 + i % 11]))
        sizes.append(len(ids(state)))
    assert max(sizes) == RECENT_ROLLS
    # A roll id that came again is kept once, as the latest.
    state, _ = apply(state, DiceRolled(roll_id=11_990, dice=(1, 1)))
    assert ids(state).count(11_990) == 1
    assert ids(state)[-1] == 11_990
    # Roll 2 (the first) is long gone from memory: a decision on it is refused as unknown
    # in the window the rules still hold (the journal has it).
    with pytest.raises(DecisionError, match=r"unknown roll 2: .* latest 100 roll events"):
        apply(state, RollVoided(roll_id=2, clause=2, operator="stick", at=AT))


def _forget_recent_by_definition(state: CrapsState) -> tuple[DiceFact, ...]:
    """``forget_recent``'s roll events as its docstring defines them: each of the queue and
    the latest remembered in arrival order, as every roll event is (a second method)."""
    recent: tuple[DiceFact, ...] = ()
    for arrival in (*state.queue, *((state.latest,) if state.latest is not None else ())):
        kept = tuple(f for f in recent if f.roll_id != arrival.roll_id)
        recent = (*kept[max(0, len(kept) - RECENT_ROLLS + 1) :], arrival.fact)
    return recent


@settings(max_examples=100, deadline=None)
@given(
    events=st.lists(
        st.tuples(st.sampled_from(["roll", "check", "noroll", "decide"]), st.integers(1, 150)),
        max_size=300,
    )
)
def test_hello_keeps_what_the_queue_and_the_latest_would_remember(
    events: list[tuple[str, int]],
) -> None:
    state = initial_state(1)
    for kind, roll_id in events:
        if kind == "decide":
            if state.queue:
                front = state.queue.first.roll_id
                state, _ = apply(
                    state, RollDecided(roll_id=front, valid=False, operator="A", at=AT)
                )
            continue
        fact: DiceFact
        if kind == "roll":
            fact = DiceRolled(roll_id=roll_id, dice=(1, 2))
        elif kind == "check":
            fact = RollCheck(roll_id=roll_id, dice=(1, 2), reason="SLID")
        else:
            fact = NoRoll(roll_id=roll_id, reason="OFF_TABLE")
        state, _ = apply(state, fact)
    assert forget_recent(state).recent_rolls == _forget_recent_by_definition(state)


@pytest.mark.heavy
def test_ten_thousand_rolls_behind_a_check_wait_and_count_in_order() -> None:
    table = Table()
    pending = table.check(DICE[8])
    for _ in range(10_000):
        table.roll(4)
    assert board(table.state).pending_roll is not None
    assert len(table.state.queue) == 10_001
    out = table.do(RollDecided(roll_id=pending, valid=False, operator="Ann", at=AT))
    counted = [o.roll_id for o in out if isinstance(o, RollRecorded) and o.status == "counted"]
    assert counted == list(range(pending + 1, pending + 10_001))
    assert not table.state.queue


def test_last_roll_is_what_craps_roll_said_of_the_latest_roll_event() -> None:
    # craps/board carries it for screens that connect later (docs/mqtt.md): the dice, the
    # total (null for a NOROLL, [0, 0], or where a die is unknown), the status.
    table = Table()
    assert last_roll(table.state) is None
    table.roll(8)
    assert last_roll(table.state) == LastRoll(roll_id=5001, dice=(4, 4), total=8, status="counted")
    table.noroll()
    assert last_roll(table.state) == LastRoll(
        roll_id=5002, dice=(0, 0), total=None, status="noroll"
    )
    pending = table.check((2, 3))
    assert last_roll(table.state) == LastRoll(
        roll_id=pending, dice=(2, 3), total=5, status="pending"
    )
    table.do(decide(pending, valid=False))
    assert last_roll(table.state) == LastRoll(
        roll_id=pending, dice=(2, 3), total=5, status="declared_invalid"
    )
    unknown = table.check((0, 3), reason="UNREADABLE")
    assert last_roll(table.state) == LastRoll(
        roll_id=unknown, dice=(0, 3), total=None, status="pending"
    )


# --- The series on the board (issue 22) -------------------------------------------------


def series_of(state: CrapsState) -> list[tuple[int, int]]:
    """The board's series as (roll id, total), oldest first."""
    return [(r.roll_id, r.total) for r in board(state).series]


def test_the_board_names_the_series_and_a_seven_starts_a_new_one() -> None:
    table = Table()
    table.roll(4, 4, 9)
    shown = board(table.state).series
    assert [(r.roll_id, r.dice, r.total) for r in shown] == [
        (5001, (2, 2), 4),
        (5002, (2, 2), 4),
        (5003, (4, 5), 9),
    ]
    # The second 4 lit nothing new; the count is the whole series.
    assert [r.new_number for r in shown] == [True, False, True]
    assert board(table.state).series_count == 3
    table.roll(7)
    assert series_of(table.state) == []
    assert board(table.state).series_count == 0
    table.roll(10)
    assert series_of(table.state) == [(5005, 10)]
    assert board(table.state).series_count == 1


def test_a_series_roll_names_the_bets_it_completed() -> None:
    table = Table()
    table.roll(2, 3, 4, 5, 8, 9, 10, 11, 12, 6)
    shown = board(table.state).series
    assert [r.wins for r in shown[:-2]] == [()] * 8
    assert shown[-2].wins == ("all_tall",)  # the 12: 8 to 12 all rolled
    assert shown[-1].wins == ("all_small", "make_em_all")  # the 6: the last number of both


def test_a_void_leaves_the_series_and_an_overturn_puts_it_back() -> None:
    table = Table()
    table.roll(5, 6)
    before = board(table.state)
    table.roll(7)
    table.do(void(5003))
    # Voiding the seven gives back the series it ended, exactly.
    assert board(table.state).series == before.series
    assert board(table.state).series_count == 2
    table.do(overturn(5003))
    assert series_of(table.state) == []
    table.roll(8)
    table.do(void(5004))
    assert series_of(table.state) == []
    table.do(overturn(5004))
    assert series_of(table.state) == [(5004, 8)]


def test_pending_and_invalid_rolls_are_not_in_the_series_until_they_count() -> None:
    table = Table()
    table.roll(3)
    check = table.check(DICE[9])
    table.roll(10)  # waits behind the CHECK
    table.noroll()
    assert series_of(table.state) == [(5001, 3)]
    table.do(decide(check, valid=False))
    assert series_of(table.state) == [(5001, 3), (5003, 10)]
    check = table.check(DICE[11])
    table.do(decide(check, valid=True))
    assert series_of(table.state) == [(5001, 3), (5003, 10), (check, 11)]


def test_a_long_series_names_its_newest_rolls_and_counts_them_all() -> None:
    table = Table()
    totals = [2 + i % 5 for i in range(SERIES_SHOWN + 30)]  # never a seven
    table.roll(*totals)
    shown = board(table.state)
    assert shown.series_count == len(totals)
    assert len(shown.series) == SERIES_SHOWN
    assert [r.roll_id for r in shown.series] == list(range(5031, 5001 + len(totals)))
    # Voiding the newest gives back the board before it, the oldest named included.
    before = table.state
    table.roll(8)
    table.do(void(table.next_id - 1))
    assert board(table.state).series == board(before).series
    assert board(table.state).series_count == len(totals)


# Each step: a proper roll of a total, a CHECK (dice of a total), a NOROLL, a decision on
# the pending roll, a void of the latest roll, an overturn of it.
SERIES_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("roll"), st.sampled_from(sorted(DICE))),
        st.tuples(st.just("check"), st.sampled_from(sorted(DICE))),
        st.tuples(st.sampled_from(["noroll", "valid", "invalid", "void", "overturn"]), st.just(0)),
    ),
    max_size=120,
)


def play_steps(table: Table, steps: list[tuple[str, int]]) -> None:
    """Play ``SERIES_STEPS`` on a table; a refused decision changes nothing."""
    for kind, total in steps:
        latest = table.state.latest
        try:
            if kind == "roll":
                table.roll(total)
            elif kind == "check":
                table.check(DICE[total])
            elif kind == "noroll":
                table.noroll()
            elif kind in ("valid", "invalid") and table.state.queue:
                table.do(decide(table.state.queue.first.roll_id, valid=kind == "valid"))
            elif kind == "void" and latest is not None:
                table.do(void(latest.roll_id))
            elif kind == "overturn" and latest is not None:
                table.do(overturn(latest.roll_id))
        except DecisionError:
            pass


def series_by_definition(outcomes: Iterable[Outcome]) -> list[tuple[int, int]]:
    """The current series from the published records alone (a second method): every roll
    that counted, minus those declared invalid since, in counting order, after the last
    seven."""
    counted: list[tuple[int, int]] = []
    for outcome in outcomes:
        if not isinstance(outcome, RollRecorded):
            continue
        if outcome.status in ("counted", "reinstated"):
            assert outcome.total is not None
            counted.append((outcome.roll_id, outcome.total))
        elif outcome.status == "declared_invalid" and counted and counted[-1][0] == outcome.roll_id:
            counted.pop()  # a void takes back the latest counted roll (the ids are unique)
    sevens = [i for i, (_, total) in enumerate(counted) if total == 7]
    return counted[sevens[-1] + 1 :] if sevens else counted


@settings(max_examples=200, deadline=None)
@given(steps=SERIES_STEPS)
def test_the_series_is_the_counted_rolls_since_the_last_seven(steps: list[tuple[str, int]]) -> None:
    table = Table()
    play_steps(table, steps)
    expected = series_by_definition(table.outcomes)
    shown = board(table.state)
    assert shown.series_count == len(expected)
    assert series_of(table.state) == expected[-SERIES_SHOWN:]
    # New numbers and wins from the bets' numbers (BET_RULES), not from the settlements.
    totals = [total for _, total in expected]
    for i, roll in enumerate(shown.series, start=len(expected) - len(shown.series)):
        assert roll.new_number == (totals[i] not in totals[:i])
        won = [
            bet
            for bet, rule in BET_RULES.items()
            if rule.numbers <= set(totals[: i + 1]) and not rule.numbers <= set(totals[:i])
        ]
        assert sorted(roll.wins) == sorted(won)
        assert sum(roll.dice) == roll.total


def test_a_pending_roll_waits_since_it_arrived_whatever_came_after() -> None:
    state = initial_state(1)
    at = [AT + timedelta(seconds=s) for s in range(5)]
    state, _ = apply(state, DiceRolled(roll_id=1, dice=(1, 2)), at=at[0])
    state, _ = apply(state, RollCheck(roll_id=2, dice=(2, 2), reason="BOWL"), at=at[1])
    state, _ = apply(state, RollCheck(roll_id=3, dice=(5, 5), reason="RAIL"), at=at[2])
    state, _ = apply(state, DiceRolled(roll_id=4, dice=(3, 3)), at=at[3])
    pending = board(state).pending_roll
    assert pending is not None
    assert (pending.roll_id, pending.since) == (2, at[1])
    assert [r.at for r in board(state).series] == [at[0]]
    # Decided at a later time: the CHECK behind it is pending now, waiting since it came.
    state, _ = apply(state, decide(2, valid=True), at=at[4])
    pending = board(state).pending_roll
    assert pending is not None
    assert (pending.roll_id, pending.since) == (3, at[2])
    assert [(r.roll_id, r.at) for r in board(state).series] == [(1, at[0]), (2, at[1])]
    state, _ = apply(state, decide(3, valid=True))
    assert board(state).pending_roll is None
    # Each counted roll keeps the time it arrived, not the time it was decided.
    assert [(r.roll_id, r.at) for r in board(state).series] == [
        (1, at[0]),
        (2, at[1]),
        (3, at[2]),
        (4, at[3]),
    ]
