"""The round state machine of a poker table: the shuffler's frames in, Cover All outcomes out.

``apply(state, fact) -> (state, outcomes)`` is pure and the state a plain frozen value, so
replaying the journal rebuilds it exactly (equal states compare equal). A poker round is
one ``HAND`` per position, then ``ROUND``, then ``SETTLE``, or ``VOID`` at any point before
``SETTLE`` (shuffler-icd.md, "Device to host"). What comes out:

* at a good ``ROUND``: ``CoverAllPayouts``, the column of the pay table for that many hands
  (Cover All Bonus rule (5): the payouts are shown once the deal is complete);
* at ``SETTLE``: ``CoverAllResult`` ``win`` or ``no_qualifier`` with the highest hand and
  its cards, which are face up now (rule (8): the bonus is reconciled after every player
  bet; shuffler-icd.md: poker hands are revealed at ``SETTLE``);
* at ``VOID``: ``CoverAllResult`` ``void`` (nothing of the round pays);
* as soon as a fault is found: ``CoverAllResult`` ``flagged`` with the reason and never a
  card, since the cards may still be face down. A flagged round pays nothing automatically
  (shuffler-icd.md, "What the host must check"): it gets no payouts at ``ROUND`` and no
  result at ``SETTLE``; the journal keeps every frame of it for review.

Checks here (shuffler-icd.md, "What the host must check", the ones about rounds and
cards; the ``MODE`` check belongs to the table): valid cards, one deck, card counts per
position, unique positions, positions the game deals, hand positions equal to ``hands``
and ``hands`` a column of the pay table (``rules.cover_all.check_hand``/``check_deal``), and
frames out of order:

* a ``HAND`` for a round id other than the open round: the shuffler has moved on, so the
  open round can never be completed; it is flagged as abandoned (unless already flagged)
  and the new round opens with this ``HAND`` (the first ``HAND`` of a new round id opens
  the round). A ``HAND`` after ``ROUND`` in the same round flags it (the deal was complete);
* ``ROUND``, ``SETTLE`` or ``VOID`` for a round id that is not open: no result is published
  for that id (it would replace the result a round of that id already has on every
  screen), a ``LATE_FRAME`` alarm says what came, and the open round, if there is one, is
  flagged (the shuffler and the host disagree about which round is being dealt);
* a second ``HAND`` for a position, a second ``ROUND``, ``SETTLE`` before ``ROUND``;
* anything for a round already closed (settled, void, flagged, abandoned) is a late frame:
  its result is published already and stands (shuffler-icd.md, "What the host must check":
  a screen must never turn a paid round into "flagged"; for a flagged round, the first
  reason stands). Nothing changes and no result is published: the outcome is an
  ``AlarmRaised`` ``LATE_FRAME`` saying what arrived for which round, which the table keeps
  among its alarms; the journal keeps the frame for review. The last ``CLOSED_MEMORY``
  closed round ids are remembered, far more than a stray frame could lag and far fewer than
  the counter's 999999 before it wraps, until the shuffler says ``HELLO``
  (``forget_closed``: its round counter may start again after a power-up).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final, Literal, assert_never

from rules.cover_all import Flagged, NoQualifier, Win, check_deal, check_hand, resolve_round
from rules.errors import ConfigError, HandError
from rules.events import (
    LATE_FRAME,
    MAX_ID,
    AlarmRaised,
    CoverAllPayouts,
    CoverAllResult,
    Game,
    HandDealt,
    HighestHand,
    Outcome,
    PokerGame,
    Position,
    RoundDealt,
    RoundSettled,
    RoundVoided,
)
from rules.paytables import cover_all_paytable
from rules.poker import poker_game

CLOSED_MEMORY: Final = 64
"""How many closed round ids are remembered to recognise late frames."""

Closing = Literal["settled", "void", "flagged", "abandoned"]
PokerFact = HandDealt | RoundDealt | RoundSettled | RoundVoided
"""The shuffler's facts this machine takes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PokerRoundState:
    """The table's poker round: the open one (if any) and the recently closed round ids.

    ``dealt`` holds the open round's hands in arrival order; they are secret until
    ``SETTLE``, so they are left out of ``repr`` (a state printed into a log shows no card).
    """

    game: PokerGame
    round_id: int | None = None
    dealt: tuple[tuple[Position, tuple[str, ...]], ...] = field(default=(), repr=False)
    hands: int | None = None
    flagged: str | None = None
    closed: tuple[tuple[int, Closing], ...] = ()


def initial_state(game: Game) -> PokerRoundState:
    """A poker table before its first round (``ConfigError`` for a game that is not poker)."""
    try:
        return PokerRoundState(game=poker_game(game))
    except HandError as exc:
        raise ConfigError(f"no poker round for game {game!r}: {exc}") from exc


def open_round_id(state: PokerRoundState) -> int | None:
    """The round in progress (a ``HAND`` seen, no ``SETTLE`` or ``VOID`` yet), or None."""
    return state.round_id


def is_closed(state: PokerRoundState, round_id: int) -> bool:
    """Whether ``round_id`` is a recently closed round: any frame for it is a late frame."""
    return any(closed_id == round_id for closed_id, _ in state.closed)


def forget_closed(state: PokerRoundState) -> PokerRoundState:
    """The state after the shuffler's ``HELLO``: no closed round id is remembered any more
    (shuffler-icd.md: a shuffler's round counter may start again after power-up). The open
    round, if any, stays open."""
    return replace(state, closed=())


def apply(state: PokerRoundState, fact: PokerFact) -> tuple[PokerRoundState, tuple[Outcome, ...]]:
    """The state after ``fact`` and what it concluded. Never raises on device input."""
    rid = fact.round_id
    if not 1 <= rid <= MAX_ID:
        reason = f"{_frame(fact)} for round {rid}: round ids run from 1 to {MAX_ID}"
        return state, (_flag(state, rid, None, reason),)
    for closed_id, how in state.closed:
        if closed_id == rid:
            return state, (_late(fact, how),)
    if isinstance(fact, HandDealt):
        return _hand(state, fact)
    if state.round_id != rid:
        return _stray(state, fact)
    match fact:
        case RoundDealt():
            return _round(state, fact)
        case RoundSettled():
            return _settle(state, rid)
        case RoundVoided():
            return _void(state, rid)
        case _:
            assert_never(fact)


def _frame(fact: PokerFact) -> str:
    match fact:
        case HandDealt():
            return f"HAND for {fact.position}"
        case RoundDealt():
            return "ROUND"
        case RoundSettled():
            return "SETTLE"
        case RoundVoided():
            return "VOID"
        case _:
            assert_never(fact)


def _late(fact: PokerFact, how: Closing) -> AlarmRaised:
    return AlarmRaised(
        code=LATE_FRAME,
        device="shuffler",
        message=(
            f"{_frame(fact)} for round {fact.round_id} arrived after the round was "
            f"{'voided' if how == 'void' else how}: its result stands; the frame is kept in "
            "the journal for review"
        ),
    )


def flagged_result(
    game: PokerGame, round_id: int, hands: int | None, reason: str
) -> CoverAllResult:
    """A flagged round's result: the reason, and no card (they may still be face down)."""
    return CoverAllResult(
        round_id=round_id,
        game=game,
        hands=hands,
        outcome="flagged",
        highest=None,
        pays=None,
        reason=reason,
    )


def _flag(state: PokerRoundState, round_id: int, hands: int | None, reason: str) -> CoverAllResult:
    return flagged_result(state.game, round_id, hands, reason)


def _close(state: PokerRoundState, round_id: int, how: Closing) -> PokerRoundState:
    closed = (*state.closed, (round_id, how))[-CLOSED_MEMORY:]
    return PokerRoundState(game=state.game, closed=closed)


def _flag_open(
    state: PokerRoundState, round_id: int, reason: str
) -> tuple[PokerRoundState, tuple[Outcome, ...]]:
    """Flag the open round ``round_id`` (once: the first reason is the one published) and
    keep it open, so its later frames are recognised as its own until ``SETTLE`` or ``VOID``
    closes it."""
    if state.flagged is not None:
        return state, ()
    return replace(state, flagged=reason), (_flag(state, round_id, state.hands, reason),)


def _hand(state: PokerRoundState, fact: HandDealt) -> tuple[PokerRoundState, tuple[Outcome, ...]]:
    outcomes: tuple[Outcome, ...] = ()
    if state.round_id != fact.round_id:
        if state.round_id is not None:
            old = state.round_id
            if state.flagged is None:
                abandoned = (
                    f"round {old} was abandoned: the shuffler began round {fact.round_id}"
                    f" before round {old} was settled or voided"
                )
                outcomes = (_flag(state, old, state.hands, abandoned),)
            state = _close(state, old, "abandoned")
        state = replace(state, round_id=fact.round_id)
    if state.flagged is not None:
        return state, outcomes
    if state.hands is not None:
        late = f"HAND for {fact.position} came after ROUND, when the deal was complete"
        state, flagged = _flag_open(state, fact.round_id, late)
        return state, outcomes + flagged
    reason = check_hand(state.game, fact.position, fact.cards, dict(state.dealt))
    if reason is not None:
        state, flagged = _flag_open(state, fact.round_id, reason)
        return state, outcomes + flagged
    return replace(state, dealt=(*state.dealt, (fact.position, fact.cards))), outcomes


def _stray(
    state: PokerRoundState, fact: RoundDealt | RoundSettled | RoundVoided
) -> tuple[PokerRoundState, tuple[Outcome, ...]]:
    """``ROUND``, ``SETTLE`` or ``VOID`` for a round that is not open.

    No result is published for that round id: it was never dealt here (or not since the
    shuffler's ``HELLO``), and a result under its id would replace, on every screen, the
    result a round of the same id already has (shuffler-icd.md: a screen must never turn a
    paid round into "flagged"). It raises ``LATE_FRAME`` instead, and the journal keeps
    the frame. An open round is flagged: the shuffler and the host disagree about which
    round is being dealt, so it cannot be trusted."""
    rid = fact.round_id
    outcomes: list[Outcome] = []
    if state.round_id is None:
        where = "no round is open"
    else:
        old = state.round_id
        where = f"round {old} is open"
        if state.flagged is None:
            outcomes.append(
                _flag(
                    state,
                    old,
                    state.hands,
                    f"the shuffler sent {_frame(fact)} for round {rid} while round {old}"
                    " was open: the device and the host disagree on the round",
                )
            )
        state = _close(state, old, "flagged")
    outcomes.append(
        AlarmRaised(
            code=LATE_FRAME,
            device="shuffler",
            message=(
                f"{_frame(fact)} for round {rid}, which is not open ({where}): no result is "
                "published for it; the frame is kept in the journal for review"
            ),
        )
    )
    return state, tuple(outcomes)


def _round(state: PokerRoundState, fact: RoundDealt) -> tuple[PokerRoundState, tuple[Outcome, ...]]:
    if state.flagged is not None:
        return replace(state, hands=state.hands or fact.hands), ()
    if state.hands is not None:
        return _flag_open(state, fact.round_id, "ROUND came twice for one round")
    state = replace(state, hands=fact.hands)
    reason = check_deal(state.game, fact.hands, [position for position, _ in state.dealt])
    if reason is not None:
        return _flag_open(state, fact.round_id, reason)
    payouts = CoverAllPayouts(
        round_id=fact.round_id,
        game=state.game,
        hands=fact.hands,
        paytable=cover_all_paytable(state.game, fact.hands),
    )
    return state, (payouts,)


def _settle(state: PokerRoundState, rid: int) -> tuple[PokerRoundState, tuple[Outcome, ...]]:
    """``SETTLE`` for the open round ``rid``."""
    if state.flagged is not None:
        return _close(state, rid, "flagged"), ()
    if state.hands is None:
        reason = "SETTLE came before ROUND: the deal was never completed"
        return _close(state, rid, "flagged"), (_flag(state, rid, None, reason),)
    resolution = resolve_round(state.game, state.hands, dict(state.dealt))
    result: CoverAllResult
    match resolution:
        case Win():
            result = CoverAllResult(
                round_id=rid,
                game=state.game,
                hands=state.hands,
                outcome="win",
                highest=HighestHand(
                    hand=resolution.category, position=resolution.position, cards=resolution.cards
                ),
                pays=resolution.odds,
                reason=None,
            )
        case NoQualifier():
            result = CoverAllResult(
                round_id=rid,
                game=state.game,
                hands=state.hands,
                outcome="no_qualifier",
                # mqtt-api.md: hand names are exactly the seed's pay-table rows, and a hand
                # that qualifies for no row has none; so no highest hand is published.
                highest=None,
                pays=None,
                reason=None,
            )
        case Flagged():  # every check already passed at HAND and ROUND; kept for safety
            return _close(state, rid, "flagged"), (
                _flag(state, rid, state.hands, resolution.reason),
            )
        case _:
            assert_never(resolution)
    return _close(state, rid, "settled"), (result,)


def _void(state: PokerRoundState, rid: int) -> tuple[PokerRoundState, tuple[Outcome, ...]]:
    """``VOID`` for the open round ``rid``."""
    # mqtt-api.md: ``reason`` is for ``flagged``. A round flagged earlier and now voided
    # already published its reason; the void result says only that nothing pays.
    result = CoverAllResult(
        round_id=rid,
        game=state.game,
        hands=state.hands,
        outcome="void",
        highest=None,
        pays=None,
        reason=None,
    )
    return _close(state, rid, "void"), (result,)
