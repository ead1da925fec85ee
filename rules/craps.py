"""Bonus Craps with proper and invalid rolls: one pure state machine.

The side bets are SD 20:18:33:12 (``seeds/sd-bonus-craps.txt``); which rolls count is
68 IAC 10-4-4 (``seeds/in-craps-invalid-rolls.txt``) as the host must apply it
(``spec/dice-reader-icd.md``, "What the host must do"). The bets and pay tables are data
(``rules.paytables``).

Everything goes through ``apply(state, event) -> (state, outcomes)``. The bet state is
never patched: it is derived from the counted rolls (each carries the lammers of its series
after it), so voiding a roll drops it and the board is exactly what it was before the roll
counted, and overturning the void counts it again. Illegal decisions raise
``DecisionError`` and, the state being immutable, change nothing.

**The ledger** is the table's record of every roll, decision and reversal, with who decided
and when (dice-reader-icd.md, "What the host must do"): the daemon's journal, which keeps
every event that came in and every outcome that went out, and replays through ``apply`` to
this state exactly. This module keeps no copy of it. A state holds only what a decision can
still address (the pending roll and those behind it, the latest roll, the last two counted
rolls) and the latest ``RECENT_ROLLS`` roll events (one per roll id), which tell a decision
on a roll the reader never reported ("unknown roll") from one whose window has closed, and
a late copy of a roll event from a new roll.

Choices where the specs are silent (documented in docs/auditors/choices.md):

* **Series.** A series begins at start and after every counted seven, come-out sevens
  included. Betting is open while the current series has no counted roll and no roll is
  pending (a pending ``CHECK`` may yet count as the series' first roll).
* **"Until the next roll arrives"** means: until the reader reports any later roll event,
  ``ROLL``, ``NOROLL`` or ``CHECK``, including one that arrived while the roll was pending.
  So only the latest roll event can be voided (if it counted) or reinstated (if it stands
  declared invalid). Counted rolls therefore always count in the order they arrived.
* **Pending rolls are decided in order.** Only the first pending ``CHECK`` can be decided;
  a ``CHECK`` that arrived behind it waits with the ``ROLL``s and becomes pending in turn.
  However many wait, none is dropped (the spec says they wait); they are kept in a
  ``rules.persistent.PersistentQueue``, so a roll joins the queue without copying it, and
  ``waiting`` tells the table how many wait (``rules.table`` raises ``ROLL_BACKLOG`` beyond
  20).
* **Roll ids.** A roll event equal to the latest one (same type, id and fields) is a repeat
  of it and changes nothing (the journal has it). A roll event equal to an earlier one of
  the latest ``RECENT_ROLLS`` (the latest event with its id) is a late frame: that roll is
  recorded, and counted or settled if it was, already; its results stand and nothing
  changes. The outcome is an ``AlarmRaised`` ``LATE_FRAME`` naming the roll, which the table
  keeps among its alarms (shuffler-icd.md's rule for settled rounds, "What the host must
  check", applied to rolls); the journal keeps the frame for review. Any other event is a
  new roll even if its id was seen before (the reader's counter wraps at 999999 and
  restarts after a power-up, when the reader's ``HELLO`` ends the memory of earlier rolls:
  ``forget_recent``): decisions can only address the first pending roll or the latest
  roll, so an id is never ambiguous. A decision naming an id that none of the latest
  ``RECENT_ROLLS`` roll events carried is an "unknown roll".
* A ``NOROLL`` never counts and never waits: it is recorded at once, with dice ``(0, 0)``.
* **The series on the board** (so that a player display shows "the rolls of the current
  shooter's series"): the counted rolls of the current series, in counting order, each with
  its dice, total, the time it arrived, whether it lit a number and the bets it completed.
  A counted seven ends the series, so the board's series is empty after it; a voided roll
  leaves it, a reinstated one joins it again. Bounded: the newest ``SERIES_SHOWN`` (50)
  rolls and the whole count (a series passes 50 counted rolls about once in 9,000,
  ``(5/6)**50``); the journal has every roll.
* **Times.** The rules read no clock: the table passes the time each roll event arrived
  (``apply(..., at=...)``, the journaled time), kept with it while it waits, so the board
  says since when the pending ``CHECK`` waits and a replay says the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from itertools import chain, islice
from operator import attrgetter
from types import MappingProxyType
from typing import Final, Literal, assert_never

from rules.craps_odds import live_probability
from rules.errors import DecisionError, RollError
from rules.events import (
    LATE_FRAME,
    MAX_ID,
    AlarmRaised,
    CheckReason,
    CrapsBet,
    CrapsBetReversed,
    CrapsBetSettled,
    Decision,
    DiceFact,
    DiceRolled,
    NoRoll,
    NoRollReason,
    Outcome,
    RollCheck,
    RollDecided,
    RollRecorded,
    RollVoided,
    VoidClause,
    VoidOverturned,
)
from rules.paytables import BET_RULES, BONUS_CRAPS, SEVEN, bonus_craps_odds
from rules.persistent import PersistentQueue

NOROLL_CLAUSES: Final[Mapping[NoRollReason, str]] = MappingProxyType(
    {"OFF_TABLE": "68 IAC 10-4-4(b)(1)", "EXTRA_DICE": "68 IAC 10-4-4(b)(2)"}
)
"""The clause each ``NOROLL`` reason stands for (dice-reader-icd.md)."""

CHECK_CLAUSES: Final[Mapping[CheckReason, int]] = MappingProxyType(
    {
        "STACKED": 1,
        "BOWL": 4,
        "RAIL": 5,
        "WRONG_DIRECTION": 7,
        "SLID": 8,
        "ON_CHIPS": 9,
        "SHORT_THROW": 10,
        "UNREADABLE": 11,
    }
)
"""The clause of 68 IAC 10-4-4(c) each ``CHECK`` reason stands for (dice-reader-icd.md)."""

VOID_CLAUSES: Final[Mapping[VoidClause, str]] = MappingProxyType(
    {
        2: "68 IAC 10-4-4(c)(2): a patron other than the shooter threw the dice",
        3: "68 IAC 10-4-4(c)(3): the dice did not leave the shooter's hand simultaneously",
        6: "68 IAC 10-4-4(c)(6): the shooter had not placed a pass or don't pass bet",
    }
)
"""What the stickperson declares through the command interface; the reader cannot see these."""

_OVERTURN_CLAUSE: Final = "68 IAC 10-4-4(c), last sentence"


# ---------------------------------------------------------------------------------------
# State


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrival:
    """A roll event as it arrived. ``n`` numbers arrivals (roll ids may repeat)."""

    n: int
    fact: DiceFact
    at: datetime | None = None
    """When it arrived, by the table's clock (the journaled time); None in a state restored
    from a snapshot written before lammer kept it."""

    @property
    def roll_id(self) -> int:
        """The reader's roll id."""
        return self.fact.roll_id

    @property
    def dice(self) -> tuple[int, int]:
        """The dice as reported; ``(0, 0)`` for a ``NOROLL``, 0 where unreadable."""
        return (0, 0) if isinstance(self.fact, NoRoll) else self.fact.dice


@dataclass(frozen=True, slots=True, kw_only=True)
class CountedRoll:
    """A roll that counts, in counting order, with the lammers of its series after it."""

    n: int
    roll_id: int
    dice: tuple[int, int]
    total: int
    hit: frozenset[int]
    """Numbers hit in the series after this roll; empty after a seven (a new series)."""
    series: tuple[SeriesRoll, ...] = ()
    """The newest ``SERIES_SHOWN`` counted rolls of the series after this roll, this one
    last; empty after a seven (a new series)."""
    series_count: int = 0
    """How many rolls have counted in the series after this roll (0 after a seven)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesRoll:
    """A counted roll of the current series, as the board shows it to players."""

    roll_id: int
    dice: tuple[int, int]
    total: int
    at: datetime | None
    """When the roll arrived (the table's clock); None where a state restored from an
    older snapshot did not keep it."""
    new_number: bool
    """Its total had not been rolled before in the series: it lit that number."""
    wins: tuple[CrapsBet, ...]
    """The bets it completed (each won the moment its last number was rolled)."""


SERIES_SHOWN: Final = 50
"""Counted rolls of the current series a board names, the newest (the count is whole)."""


RECENT_ROLLS: Final = 100
"""How many of the latest roll events (one per roll id) a state keeps: to word a refused
decision, and to know a late copy of a roll event."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CrapsState:
    """Bonus Craps at one table. Immutable; change it only through ``apply``.

    ``counted`` is the latest two counted rolls, in order (the bets are derived from them:
    each carries the lammers after it; two are enough to undo the latest), ``queue`` the
    pending ``CHECK`` (first) and the rolls waiting behind it (a ``PersistentQueue``: a roll
    joins it without copying it, however many wait), ``latest`` the latest roll event,
    ``latest_invalid`` whether it stands declared invalid, ``recent_rolls`` the latest roll
    event of each recent roll id, oldest first (at most ``RECENT_ROLLS``).
    """

    paytable: int
    counted: tuple[CountedRoll, ...] = ()
    queue: PersistentQueue[Arrival] = field(default_factory=PersistentQueue)
    latest: Arrival | None = None
    latest_invalid: bool = False
    recent_rolls: tuple[DiceFact, ...] = ()


def initial_state(paytable: int) -> CrapsState:
    """A table before its first roll: a series begins, betting is open.

    ``ConfigError`` for a pay table the data does not hold (1 and 2).
    """
    bonus_craps_odds(paytable)
    return CrapsState(paytable=paytable)


RollStatus = Literal["noroll", "pending", "counted", "declared_invalid"]


def latest_status(state: CrapsState) -> RollStatus | None:
    """Where the latest roll event stands, or ``None`` before the first roll."""
    latest = state.latest
    if latest is None:
        return None
    if isinstance(latest.fact, NoRoll):
        return "noroll"
    if state.queue and state.queue.last.n == latest.n:
        return "pending"
    return "declared_invalid" if state.latest_invalid else "counted"


def waiting(state: CrapsState) -> tuple[int, int | None]:
    """How many rolls wait behind the pending one, and the pending roll's id (``None`` when
    no roll is pending): what ``ROLL_BACKLOG`` watches (``rules.table``)."""
    if not state.queue:
        return 0, None
    return len(state.queue) - 1, state.queue.first.roll_id


def _series_hit(counted: tuple[CountedRoll, ...]) -> frozenset[int]:
    return counted[-1].hit if counted else frozenset()


def _series_empty(counted: tuple[CountedRoll, ...]) -> bool:
    # A series begins at start and after every seven (20:18:33:12(1)(b)): it is empty when
    # nothing has counted yet or the last counted roll was a seven.
    return not counted or counted[-1].total == SEVEN


# ---------------------------------------------------------------------------------------
# Board


@dataclass(frozen=True, slots=True, kw_only=True)
class BetBoard:
    """One bet on the board: its odds, its numbers hit and still needed, complete or not,
    and its live ``chance``."""

    pays: Decimal
    hit: tuple[int, ...]
    remaining: tuple[int, ...]
    complete: bool
    chance: Fraction | None
    """The exact chance that the bet completes before a seven, from the board as it
    stands (``rules.craps_odds.live_probability``); None once complete."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingRoll:
    """The roll waiting for the stickperson's decision."""

    roll_id: int
    dice: tuple[int, int]
    reason: str
    clause: int
    """The clause of 68 IAC 10-4-4(c) its ``CHECK`` reason stands for (``CHECK_CLAUSES``)."""
    since: datetime | None = None
    """When it arrived (the table's clock): it has waited since then, being the oldest roll
    of the queue. None where a state restored from an older snapshot did not keep it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LastRoll:
    """The latest roll event: its dice, total (None where a die is unknown) and status."""

    roll_id: int
    dice: tuple[int, int]
    total: int | None
    status: RollStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class CrapsBoard:
    """Exactly what ``craps/board`` shows (mqtt-api.md)."""

    paytable: int
    betting_open: bool
    numbers_hit: tuple[int, ...]
    all_small: BetBoard
    all_tall: BetBoard
    make_em_all: BetBoard
    pending_roll: PendingRoll | None
    waiting: tuple[int, ...] = ()
    """The roll ids waiting behind the pending roll, in order (at most ``WAITING_SHOWN``)."""
    waiting_count: int = 0
    """How many rolls wait behind the pending roll (all of them, however many)."""
    series: tuple[SeriesRoll, ...] = ()
    """The counted rolls of the current series, oldest first (the newest ``SERIES_SHOWN``)."""
    series_count: int = 0
    """How many rolls have counted in the current series (all of them)."""

    def bet(self, bet: CrapsBet) -> BetBoard:
        """The board of one bet by its name."""
        match bet:
            case "all_small":
                return self.all_small
            case "all_tall":
                return self.all_tall
            case "make_em_all":
                return self.make_em_all
            case _:
                assert_never(bet)


def _bet_board(bet: CrapsBet, pays: Decimal, hit: frozenset[int]) -> BetBoard:
    numbers = BET_RULES[bet].numbers
    complete = numbers <= hit
    return BetBoard(
        pays=pays,
        hit=tuple(sorted(numbers & hit)),
        remaining=tuple(sorted(numbers - hit)),
        complete=complete,
        chance=None if complete else live_probability(bet, numbers & hit),
    )


WAITING_SHOWN: Final = 20
"""Roll ids of the queue a board names (the count is whole): the stickperson reads the
next ones; the journal has every one."""


def board(state: CrapsState) -> CrapsBoard:
    """The board of the current series: lammers, per bet progress, betting, pending roll."""
    hit = _series_hit(state.counted)
    odds = bonus_craps_odds(state.paytable)
    pending = None
    if state.queue:
        front = state.queue.first
        check = _check_of(front)
        pending = PendingRoll(
            roll_id=front.roll_id,
            dice=front.dice,
            reason=_front_reason(check),
            clause=CHECK_CLAUSES[check.reason],
            since=front.at,
        )
    last = state.counted[-1] if state.counted else None
    return CrapsBoard(
        paytable=state.paytable,
        # 20:18:33:12(1)(d), (2)(e): "at the beginning of the roll only"; a pending roll
        # may yet be the series' first, so betting waits for the decision.
        betting_open=_series_empty(state.counted) and not state.queue,
        numbers_hit=tuple(sorted(hit)),
        all_small=_bet_board("all_small", odds["all_small"], hit),
        all_tall=_bet_board("all_tall", odds["all_tall"], hit),
        make_em_all=_bet_board("make_em_all", odds["make_em_all"], hit),
        pending_roll=pending,
        waiting=tuple(a.roll_id for a in islice(state.queue, 1, 1 + WAITING_SHOWN)),
        waiting_count=max(0, len(state.queue) - 1),
        series=last.series if last is not None else (),
        series_count=last.series_count if last is not None else 0,
    )


def last_roll(state: CrapsState) -> LastRoll | None:
    """The latest roll event and where it stands (what ``craps/roll`` said of it last), or
    None before the first roll."""
    latest, status = state.latest, latest_status(state)
    if latest is None or status is None:
        return None
    dice = latest.dice
    return LastRoll(
        roll_id=latest.roll_id,
        dice=dice,
        total=None if status == "noroll" or 0 in dice else sum(dice),
        status=status,
    )


# ---------------------------------------------------------------------------------------
# Counting a roll


def _settlements(
    odds: Mapping[CrapsBet, Decimal], before: frozenset[int], roll_id: int, total: int
) -> tuple[CrapsBetSettled, ...]:
    """What one counted roll settles, given the lammers before it (pure, so undo is exact)."""
    out: list[CrapsBetSettled] = []
    for rule in BONUS_CRAPS.rules:
        if rule.numbers <= before:
            continue  # won earlier in the series and taken down: 20:18:33:12(1)(c), (1)(f)
        if total == SEVEN:
            # 20:18:33:12(1)(b), (2)(c), (3)(b): a seven loses, come-out sevens included.
            out.append(CrapsBetSettled(roll_id=roll_id, bet=rule.bet, outcome="lose", pays=None))
        elif rule.numbers <= before | {total}:
            # Complete the moment the last number is rolled; the others go on.
            out.append(
                CrapsBetSettled(roll_id=roll_id, bet=rule.bet, outcome="win", pays=odds[rule.bet])
            )
    return tuple(out)


def _count(
    state: CrapsState,
    arrival: Arrival,
    status: Literal["counted", "reinstated"],
    reason: str | None,
) -> tuple[CrapsState, tuple[Outcome, ...]]:
    die1, die2 = arrival.dice
    total = die1 + die2
    before = _series_hit(state.counted)
    settled = _settlements(bonus_craps_odds(state.paytable), before, arrival.roll_id, total)
    if total == SEVEN:
        hit: frozenset[int] = frozenset()
        series: tuple[SeriesRoll, ...] = ()
        count = 0
    else:
        hit = before | {total}
        shown = SeriesRoll(
            roll_id=arrival.roll_id,
            dice=arrival.dice,
            total=total,
            at=arrival.at,
            new_number=total not in before,
            wins=tuple(s.bet for s in settled if s.outcome == "win"),
        )
        previous = state.counted[-1] if state.counted else None
        earlier = previous.series if previous is not None else ()
        series = (*earlier[max(0, len(earlier) - SERIES_SHOWN + 1) :], shown)
        count = (previous.series_count if previous is not None else 0) + 1
    roll = CountedRoll(
        n=arrival.n,
        roll_id=arrival.roll_id,
        dice=arrival.dice,
        total=total,
        hit=hit,
        series=series,
        series_count=count,
    )
    recorded = RollRecorded(
        roll_id=arrival.roll_id, dice=arrival.dice, total=total, status=status, reason=reason
    )
    # Only the latest counted roll can be voided, and undoing it needs only the one before.
    return replace(state, counted=(*state.counted[-1:], roll)), (recorded, *settled)


# ---------------------------------------------------------------------------------------
# Reasons people read


def _check_text(fact: RollCheck) -> str:
    return f"{fact.reason} ({_check_clause(fact.reason)})"


def _check_clause(reason: CheckReason) -> str:
    return f"68 IAC 10-4-4(c)({CHECK_CLAUSES[reason]})"


def _check_of(front: Arrival) -> RollCheck:
    """The ``CHECK`` of the roll heading the queue: only a ``CHECK`` heads it (a roll that
    counts at once never waits)."""
    if not isinstance(front.fact, RollCheck):
        raise TypeError(f"roll {front.roll_id} heads the queue, but it is not a CHECK")
    return front.fact


def _front_reason(check: RollCheck) -> str:
    return f"{_check_text(check)}: waits for the stickperson's decision"


def _waiting_reason(arrival: Arrival, front: Arrival) -> str:
    waits = f"waits for the decision on roll {front.roll_id}"
    if isinstance(arrival.fact, RollCheck):
        return f"{_check_text(arrival.fact)}: {waits}"
    return waits


def _total(dice: tuple[int, int]) -> int | None:
    return None if 0 in dice else dice[0] + dice[1]


def _pending(arrival: Arrival, reason: str) -> RollRecorded:
    return RollRecorded(
        roll_id=arrival.roll_id,
        dice=arrival.dice,
        total=_total(arrival.dice),
        status="pending",
        reason=reason,
    )


# ---------------------------------------------------------------------------------------
# Roll events


def _validate_fact(fact: DiceFact) -> None:
    if type(fact.roll_id) is not int or not 1 <= fact.roll_id <= MAX_ID:
        raise RollError(
            f"roll id {fact.roll_id!r} is out of range 1 to {MAX_ID}", roll_id=fact.roll_id
        )
    match fact:
        case DiceRolled(dice=dice):
            low = 1  # a proper roll has both dice read
        case RollCheck(dice=dice, reason=reason):
            low = 0  # 0 where unreadable
            if reason not in CHECK_CLAUSES:
                raise RollError(
                    f"roll {fact.roll_id}: unknown CHECK reason {reason!r}", roll_id=fact.roll_id
                )
        case NoRoll(reason=reason):
            if reason not in NOROLL_CLAUSES:
                raise RollError(
                    f"roll {fact.roll_id}: unknown NOROLL reason {reason!r}", roll_id=fact.roll_id
                )
            return
        case _:
            assert_never(fact)
    if (
        not isinstance(dice, tuple)
        or len(dice) != 2
        or any(type(d) is not int or not low <= d <= 6 for d in dice)
    ):
        raise RollError(
            f"roll {fact.roll_id}: dice {dice!r} are not two dice of {low} to 6",
            roll_id=fact.roll_id,
        )


def _arrive(
    state: CrapsState, fact: DiceFact, at: datetime | None
) -> tuple[CrapsState, tuple[Outcome, ...]]:
    _validate_fact(fact)
    latest = state.latest
    if latest is not None and latest.fact == fact:
        # The same roll reported twice (same id and fields): it counts once.
        return state, ()
    if _known(state, fact.roll_id) == fact:
        return state, (_late(fact),)
    arrival = Arrival(n=latest.n + 1 if latest is not None else 0, fact=fact, at=at)
    # A new roll closes the void and overturn windows of the one before (module docstring).
    new = replace(
        state,
        latest=arrival,
        latest_invalid=False,
        recent_rolls=_remember(state.recent_rolls, fact),
    )
    outcomes: tuple[Outcome, ...]
    match fact:
        case NoRoll(reason=reason):
            # dice-reader-icd.md: "A NOROLL never counts."
            outcomes = (
                RollRecorded(
                    roll_id=fact.roll_id,
                    dice=(0, 0),
                    total=None,
                    status="noroll",
                    reason=f"{reason} ({NOROLL_CLAUSES[reason]})",
                ),
            )
        case DiceRolled() | RollCheck() if new.queue:
            # "Nothing after a pending roll counts until it is decided": it waits, in order.
            new = replace(new, queue=new.queue.append(arrival))
            outcomes = (_pending(arrival, _waiting_reason(arrival, new.queue.first)),)
        case RollCheck():
            new = replace(new, queue=PersistentQueue((arrival,)))
            outcomes = (_pending(arrival, _front_reason(fact)),)
        case DiceRolled():
            new, outcomes = _count(new, arrival, "counted", None)  # "A ROLL counts at once."
        case _:
            assert_never(fact)
    return new, outcomes


_ROLL_ID: Final = attrgetter("roll_id")


def _remember(recent: tuple[DiceFact, ...], fact: DiceFact) -> tuple[DiceFact, ...]:
    """The recent roll events with ``fact`` the latest, the only one of its roll id, the
    oldest dropped beyond ``RECENT_ROLLS``: a copy of at most that many per roll event."""
    kept = recent
    if fact.roll_id in map(_ROLL_ID, recent):  # else (a new roll id) only the oldest goes
        kept = tuple(f for f in recent if f.roll_id != fact.roll_id)
    return (*kept[max(0, len(kept) - RECENT_ROLLS + 1) :], fact)


def _known(state: CrapsState, roll_id: int) -> DiceFact | None:
    """The latest recent roll event with ``roll_id``, if any."""
    if roll_id not in map(_ROLL_ID, state.recent_rolls):
        return None  # a new roll id, the usual case: looked for without a Python loop
    for fact in reversed(state.recent_rolls):
        if fact.roll_id == roll_id:
            return fact
    return None


_FRAMES: Final[Mapping[type[DiceFact], str]] = MappingProxyType(
    {DiceRolled: "ROLL", NoRoll: "NOROLL", RollCheck: "CHECK"}
)


def _late(fact: DiceFact) -> AlarmRaised:
    return AlarmRaised(
        code=LATE_FRAME,
        device="dice_reader",
        message=(
            f"{_FRAMES[type(fact)]} for roll {fact.roll_id} arrived again after later rolls: "
            "that roll is recorded already and its results stand; the frame is kept in the "
            "journal for review"
        ),
    )


def forget_recent(state: CrapsState) -> CrapsState:
    """The state after the reader's ``HELLO``: earlier roll events are forgotten (its roll
    counter may start again after a power-up), except those a decision can still address
    (the pending roll, those behind it, the latest)."""
    # As _remember over the queue and the latest in order would keep them (the latest
    # event of each roll id, at most RECENT_ROLLS, oldest first), read from the back so a
    # long queue costs only what is kept.
    newest = (state.latest,) if state.latest is not None else ()
    kept: dict[int, DiceFact] = {}
    for arrival in chain(newest, reversed(state.queue)):
        if len(kept) == RECENT_ROLLS:
            break
        kept.setdefault(arrival.roll_id, arrival.fact)
    return replace(state, recent_rolls=tuple(reversed(kept.values())))


def _drain(
    state: CrapsState, decided: Arrival, behind: PersistentQueue[Arrival]
) -> tuple[CrapsState, tuple[Outcome, ...]]:
    """Count the rolls that waited behind a decided ``CHECK``, up to the next ``CHECK``."""
    outcomes: list[Outcome] = []
    for i, arrival in enumerate(behind):
        if isinstance(arrival.fact, RollCheck):
            # A CHECK behind a CHECK becomes pending in turn, with the rest behind it.
            state = replace(state, queue=behind.drop(i))
            outcomes.append(_pending(arrival, _front_reason(arrival.fact)))
            return state, tuple(outcomes)
        waited = f"waited for the decision on roll {decided.roll_id}"
        state, counted = _count(state, arrival, "counted", waited)
        outcomes.extend(counted)
    return replace(state, queue=PersistentQueue()), tuple(outcomes)


# ---------------------------------------------------------------------------------------
# Decisions


def _validate_decision(state: CrapsState, decision: Decision) -> None:
    if not isinstance(decision.operator, str) or not decision.operator.strip():
        raise DecisionError("a decision needs the operator who made it", roll_id=decision.roll_id)
    if decision.at.tzinfo is None:
        raise DecisionError(
            f"decision on roll {decision.roll_id}: the time {decision.at.isoformat()} has no "
            "time zone; the record needs an unambiguous time",
            roll_id=decision.roll_id,
        )


def _refuse(state: CrapsState, roll_id: int, message: str) -> DecisionError:
    """The error for an illegal decision; "unknown roll" first if the reader never sent it."""
    if _known(state, roll_id) is None:
        message = (
            f"unknown roll {roll_id}: the dice reader has reported no such roll"
            f" among its latest {len(state.recent_rolls)} roll events"
        )
    return DecisionError(message, roll_id=roll_id)


def _not_latest(state: CrapsState, roll_id: int, what: str) -> DecisionError:
    latest = "no roll" if state.latest is None else f"roll {state.latest.roll_id}"
    return _refuse(
        state,
        roll_id,
        f"roll {roll_id} cannot be {what}: {latest} has arrived since, and the window "
        "closes when the next roll arrives (68 IAC 10-4-4(c))",
    )


def _decide(state: CrapsState, decision: RollDecided) -> tuple[CrapsState, tuple[Outcome, ...]]:
    roll_id = decision.roll_id
    if not state.queue:
        raise _refuse(
            state, roll_id, f"roll {roll_id} is not pending: no roll waits for a decision"
        )
    front = state.queue.first
    if front.roll_id != roll_id:
        behind = any(a.roll_id == roll_id for a in state.queue)
        where = "waits behind it" if behind else "is not pending"
        raise _refuse(state, roll_id, f"roll {roll_id} {where}: decide roll {front.roll_id} first")
    verdict = "valid" if decision.valid else "invalid"
    reason = f"{_check_text(_check_of(front))}: declared {verdict} by {decision.operator}"
    rest = replace(state, queue=PersistentQueue())
    outcomes: tuple[Outcome, ...]
    if decision.valid:
        if 0 in front.dice:
            raise DecisionError(
                f"roll {roll_id} cannot be declared valid: a die was unreadable "
                f"(dice {front.dice[0]}, {front.dice[1]}); declare it invalid "
                f"({_check_clause('UNREADABLE')})",
                roll_id=roll_id,
            )
        rest, outcomes = _count(rest, front, "counted", reason)
    else:
        outcomes = (
            RollRecorded(
                roll_id=roll_id,
                dice=front.dice,
                total=_total(front.dice),
                status="declared_invalid",
                reason=reason,
            ),
        )
        if state.latest is not None and state.latest.n == front.n:
            rest = replace(rest, latest_invalid=True)
    rest, drained = _drain(rest, front, state.queue.popleft())
    outcomes = (*outcomes, *drained)
    return rest, outcomes


def _void(state: CrapsState, decision: RollVoided) -> tuple[CrapsState, tuple[Outcome, ...]]:
    roll_id = decision.roll_id
    if decision.clause not in VOID_CLAUSES:
        raise DecisionError(
            f"roll {roll_id}: clause {decision.clause!r} is not one the stickperson declares "
            "here; choose 2, 3 or 6 of 68 IAC 10-4-4(c)",
            roll_id=roll_id,
        )
    latest = state.latest
    if latest is None or latest.roll_id != roll_id:
        raise _not_latest(state, roll_id, "declared invalid")
    status = latest_status(state)
    if status != "counted":
        why = {
            "noroll": "it is a no-roll under 68 IAC 10-4-4(b) and never counted",
            "pending": "it has not counted yet: it waits for a decision",
            "declared_invalid": "it is already declared invalid",
            None: "",
        }[status]
        raise DecisionError(f"roll {roll_id} cannot be declared invalid: {why}", roll_id=roll_id)
    voided = state.counted[-1]
    if voided.n != latest.n:  # not reached: the latest roll, having counted, is the last counted
        raise RuntimeError(f"roll {roll_id} counted but is not the last counted roll")
    before = state.counted[:-1]
    # Undo by construction: the lammers are those of the roll before; what the roll settled
    # is recomputed from them and taken back (dice-reader-icd.md: "undone exactly").
    taken_back = _settlements(
        bonus_craps_odds(state.paytable), _series_hit(before), roll_id, voided.total
    )
    outcomes: tuple[Outcome, ...] = (
        RollRecorded(
            roll_id=roll_id,
            dice=voided.dice,
            total=voided.total,
            status="declared_invalid",
            reason=f"{VOID_CLAUSES[decision.clause]}; declared invalid by {decision.operator}",
        ),
        *(CrapsBetReversed(roll_id=roll_id, bet=s.bet, outcome=s.outcome) for s in taken_back),
    )
    return replace(state, counted=before, latest_invalid=True), outcomes


def _overturn(
    state: CrapsState, decision: VoidOverturned
) -> tuple[CrapsState, tuple[Outcome, ...]]:
    roll_id = decision.roll_id
    latest = state.latest
    if latest is None or latest.roll_id != roll_id:
        raise _not_latest(state, roll_id, "reinstated")
    status = latest_status(state)
    if status != "declared_invalid":
        why = {
            "noroll": "a no-roll under 68 IAC 10-4-4(b) is invalid by rule, not by declaration",
            "pending": "it has not been decided yet",
            "counted": "it counts; there is no declaration of invalid to overturn",
            None: "",
        }[status]
        raise DecisionError(f"roll {roll_id} cannot be reinstated: {why}", roll_id=roll_id)
    if 0 in latest.dice:
        raise DecisionError(
            f"roll {roll_id} cannot be reinstated: a die was unreadable "
            f"(dice {latest.dice[0]}, {latest.dice[1]}), so it has nothing to count",
            roll_id=roll_id,
        )
    reason = f"declaration of invalid overturned by {decision.operator} ({_OVERTURN_CLAUSE})"
    new, outcomes = _count(replace(state, latest_invalid=False), latest, "reinstated", reason)
    return new, outcomes


# ---------------------------------------------------------------------------------------
# The transition


def apply(
    state: CrapsState, event: DiceFact | Decision, *, at: datetime | None = None
) -> tuple[CrapsState, tuple[Outcome, ...]]:
    """Apply a roll event or a stickperson decision; return the new state and its outcomes.

    ``at`` is when a roll event arrived, by the table's clock (kept with the roll: the
    board's ``since`` of a pending roll and each series roll's time); a decision carries
    its own time.

    Outcomes, in order: ``RollRecorded`` for the roll the event is about, then what it
    settled (``CrapsBetSettled``) or took back (``CrapsBetReversed``), then the same for
    every roll that waited behind a decided ``CHECK``.

    Raises ``DecisionError`` (with ``roll_id``) for an illegal decision and ``RollError``
    for a dice fact that cannot be; either way nothing changes.
    """
    match event:
        case DiceRolled() | NoRoll() | RollCheck():
            return _arrive(state, event, at)
        case RollDecided():
            _validate_decision(state, event)
            return _decide(state, event)
        case RollVoided():
            _validate_decision(state, event)
            return _void(state, event)
        case VoidOverturned():
            _validate_decision(state, event)
            return _overturn(state, event)
        case _:
            assert_never(event)
