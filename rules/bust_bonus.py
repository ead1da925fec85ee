"""Bust Bonus (SDAR 20:18:15:30.16): the round state machine and its settlement.

The player bets that the dealer busts. The card-reading shoe reports every card as it is
drawn (shuffler-icd.md ``CARD``); the dealer's cards are the ``CARD`` frames at ``DL`` in
draw order, the first being the up card and the second the hole card. ``END`` says the
dealer's hand is complete and face up; ``VOID`` cancels the round.

``apply(state, fact) -> (state, outcomes)`` is the only way the state changes:

* The first ``CARD`` of a new round id opens the round. Betting is open until the up card
  is exposed, i.e. the first ``DL`` card (rule (4): "a wager made after that is ... no
  bet").
* At ``END`` the round settles (``BustBonusResult``): a bust (over 21, soft aces counted
  properly) wins at the up card's row (rule (6): "determined by the dealer's original up
  card"; the ``10`` row for every ten-value card), at the "Suited" odds when every card of
  the busted hand has one suit; a bust with exactly three cards, all eights, pays the
  "Bust with three 8s" row instead. Any other hand, blackjack included, loses (rule (9)).
* A hand that breaks the dealer's rule (a card drawn on a standing total, a hand that
  ends where the rule draws), or a card seen more times than the shoe has decks
  (shuffler-icd.md, "What the host must check"), is not settled: it is ``flagged`` at
  ``END`` with the reasons, and kept in full for review.
* ``VOID`` gives the outcome ``void``: nothing of the round pays.
* Out of order (shuffler-icd.md, "What the host must check"): an ``END``/``VOID`` for a
  round that is not open is flagged at once for that round id and changes nothing else. A
  ``CARD`` of a new round id while another round is open means the shoe moved on: the
  open round is flagged as interrupted (it can never settle) and the new round opens.
* Late frames: anything for a round already closed (a card after ``END``, a second ``END``
  or ``VOID``) finds its result published and standing (shuffler-icd.md: a late frame
  "does not publish a second result for that round"). Nothing changes; the outcome is an
  ``AlarmRaised`` ``LATE_FRAME`` saying what arrived for which round, which the table keeps
  among its alarms, and the journal keeps the frame for review. The shoe's ``HELLO`` ends
  the memory of closed round ids (``forget_closed``).

Card secrecy (shuffler-icd.md, "Card data is secret until it is face up"): before ``END``
only the up card is face up, so ``view`` shows only it, and a result published before or
without ``END`` (void, interrupted, out of order) carries at most the up card and never a
reason that names another card.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Final, Literal, assert_never

from rules.blackjack import dealer_stands, hand_total
from rules.cards import Card, parse_card
from rules.errors import CardError, ConfigError
from rules.events import (
    LATE_FRAME,
    AlarmRaised,
    BustBonusResult,
    BustColumn,
    CardDrawn,
    DealerDone,
    Outcome,
    RoundVoided,
)
from rules.paytables import BUST_BONUS, BustPayRow, BustPaytable

BustFact = CardDrawn | DealerDone | RoundVoided
"""The shoe's frames of a Bust Bonus round."""

EIGHT: Final = 8
THREE_EIGHTS_CARDS: Final = 3
"""Rule (12)'s "Bust with three 8s": exactly three cards, all eights."""


def is_suited(cards: Sequence[Card]) -> bool:
    """Every card has the same suit (the "Bust, Suited" column)."""
    return len({card.suit for card in cards}) == 1


def is_three_eights(cards: Sequence[Card]) -> bool:
    """Exactly three cards, all eights ("Bust with three 8s")."""
    return len(cards) == THREE_EIGHTS_CARDS and all(card.rank == EIGHT for card in cards)


def pay_row(cards: Sequence[Card], paytable: BustPaytable = BUST_BONUS) -> BustPayRow:
    """The pay-table row of the dealer's hand (``cards[0]`` is the up card, at least one
    card): three eights pay their own row instead of the up card's (rule (12)); otherwise
    the up card's row (rule (6)), ``10`` for every ten-value card."""
    return paytable.three_eights if is_three_eights(cards) else paytable.up_card_row(cards[0])


def bust_pays(cards: Sequence[Card], paytable: BustPaytable = BUST_BONUS) -> Decimal | None:
    """What a Bust Bonus wager pays (to 1) on the dealer's complete hand, or None if it loses.

    The up card is ``cards[0]``. A hand that does not bust loses (rule (9)), blackjack
    included; three eights pay their own row instead of the up card's (rule (12)).
    """
    if not cards or not hand_total(cards).bust:
        return None
    return pay_row(cards, paytable).pays(suited=is_suited(cards))


# ---------------------------------------------------------------------------------------
# The round state machine

ClosedAs = Literal["ended", "void", "interrupted"]
Phase = Literal["idle", "open"] | ClosedAs
_CLOSED_AS: dict[ClosedAs, str] = {
    "ended": "ended",
    "void": "was voided",
    "interrupted": "was interrupted",
}

CLOSED_MEMORY = 64
"""How many recently closed round ids are remembered to flag late frames for them.

Round ids are the shoe's own counter (shuffler-icd.md): it wraps after 999999 and a
replaced shoe may start again at 1, so an id closed long ago is taken as a new round.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class BustBonusState:
    """The Bust Bonus table: configuration, and the current (or last) round.

    Cards are kept as the shoe's codes in draw order, including any bad code, so a
    flagged round is kept in full for review. ``problems`` are the reasons found so far
    to flag the round; they may name cards, so they are published only at ``END``.
    """

    decks: int
    hits_soft_17: bool
    round_id: int | None = None
    phase: Phase = "idle"
    dealer_cards: tuple[str, ...] = ()
    round_cards: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    closed: tuple[tuple[int, ClosedAs], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BustBonusView:
    """Exactly what ``bust_bonus/state`` publishes (mqtt-api.md): face-up cards only.

    ``betting_open`` is true until the up card of the current round is exposed, and again
    once the round is over (wagers then are for the next round). ``dealer_cards`` is the
    up card alone before ``END``, every dealer card after it.
    """

    round_id: int | None
    betting_open: bool
    up_card: str | None
    dealer_cards: tuple[str, ...]

    @property
    def paytable_row(self) -> str | None:
        """The up card's pay-table row (rule (6): the ``10`` row for every ten-value card),
        or None before the up card or for a code that is not a card (the round is then
        flagged)."""
        card = None if self.up_card is None else _parse(self.up_card)
        return None if card is None else BUST_BONUS.up_card_row(card).row


def initial_state(decks: int, hits_soft_17: bool) -> BustBonusState:
    """A table before its first round; ``ConfigError`` for fewer than one deck."""
    if isinstance(decks, bool) or not isinstance(decks, int) or decks < 1:
        raise ConfigError(f"a Bust Bonus shoe holds a whole number of decks >= 1, not {decks!r}")
    return BustBonusState(decks=decks, hits_soft_17=hits_soft_17)


def open_round_id(state: BustBonusState) -> int | None:
    """The round in progress (``CARD`` seen, no ``END`` or ``VOID`` yet), or None."""
    return state.round_id if state.phase == "open" else None


def is_closed(state: BustBonusState, round_id: int) -> bool:
    """Whether ``round_id`` is a recently closed round: any frame for it is a late frame."""
    return any(closed_id == round_id for closed_id, _ in state.closed)


def forget_closed(state: BustBonusState) -> BustBonusState:
    """The state after the shoe's ``HELLO``: no closed round id is remembered any more
    (shuffler-icd.md: the round counter may start again after power-up)."""
    return replace(state, closed=())


def view(state: BustBonusState) -> BustBonusView:
    """What the displays may see now (shuffler-icd.md: nothing before it is face up)."""
    up_card = state.dealer_cards[0] if state.dealer_cards else None
    # END: the dealer's hand is complete and face up; before it the hole card and the
    # draws stay secret (shuffler-icd.md).
    face_up = state.dealer_cards if state.phase == "ended" else state.dealer_cards[:1]
    return BustBonusView(
        round_id=state.round_id,
        betting_open=state.phase != "open" or not state.dealer_cards,
        up_card=up_card,
        dealer_cards=face_up,
    )


def apply(state: BustBonusState, fact: BustFact) -> tuple[BustBonusState, tuple[Outcome, ...]]:
    """The state after ``fact`` and what it concluded. Never raises on device input."""
    for closed_id, how in state.closed:
        if closed_id == fact.round_id:
            return state, (_late(fact, how),)
    match fact:
        case CardDrawn():
            return _card(state, fact)
        case DealerDone() | RoundVoided():
            if open_round_id(state) != fact.round_id:
                return state, (_not_open(fact, open_round_id(state)),)
            if isinstance(fact, DealerDone):
                return _close(state, fact.round_id, "ended"), (_settle(state, fact.round_id),)
            return _close(state, fact.round_id, "void"), (_void(state, fact.round_id),)
        case _:
            assert_never(fact)


def _card(state: BustBonusState, fact: CardDrawn) -> tuple[BustBonusState, tuple[Outcome, ...]]:
    outcomes: tuple[Outcome, ...] = ()
    if open_round_id(state) != fact.round_id:
        if state.phase == "open" and state.round_id is not None:
            # The shoe has moved on: the open round can never see its END.
            outcomes = (_interrupted(state, state.round_id, fact.round_id),)
            state = _close(state, state.round_id, "interrupted")
        state = replace(
            state,
            round_id=fact.round_id,
            phase="open",
            dealer_cards=(),
            round_cards=(),
            problems=(),
        )
    problems = list(state.problems)
    card = _parse(fact.card)
    if card is None:
        problems.append(f"CARD at {fact.position}: bad card code {fact.card!r}")
    if fact.position == "CM":
        problems.append("CARD at CM: blackjack has no community cards")
    round_cards = state.round_cards
    if card is not None:
        round_cards += (fact.card,)
        seen = round_cards.count(fact.card)
        if seen == state.decks + 1:
            # shuffler-icd.md: "a card may appear up to that many times in a round".
            problems.append(
                f"{fact.card} appears more than {state.decks} time(s) in the round: "
                f"the shoe holds {_decks(state.decks)}"
            )
    dealer_cards = state.dealer_cards
    if fact.position == "DL":
        hand = _parse_all(dealer_cards)
        if hand is not None and len(hand) >= 2:
            total = hand_total(hand)
            if dealer_stands(total, hits_soft_17=state.hits_soft_17):
                problems.append(
                    f"the dealer drew {fact.card} on {_describe(total.total, total.soft)}, "
                    f"where the rule ({_rule(state)}) stands"
                )
        dealer_cards += (fact.card,)
    new = replace(
        state, dealer_cards=dealer_cards, round_cards=round_cards, problems=tuple(problems)
    )
    return new, outcomes


def _settle(state: BustBonusState, round_id: int) -> BustBonusResult:
    """The result at ``END`` of the open round ``round_id``: every card is face up, so the
    result carries them all."""
    problems = list(state.problems)
    hand = _parse_all(state.dealer_cards)
    if not state.dealer_cards:
        problems.append("END with no dealer card")
    elif hand is not None and not dealer_stands(hand_total(hand), hits_soft_17=state.hits_soft_17):
        end = hand_total(hand)
        problems.append(
            f"the dealer's hand ends on {_describe(end.total, end.soft)}"
            + (" with one card" if len(hand) == 1 else "")
            + f", where the rule ({_rule(state)}) draws"
        )
    total = hand_total(hand).total if hand else None
    bust = hand is not None and hand_total(hand).bust
    suited = bust and hand is not None and is_suited(hand)
    settled = hand is not None and not problems
    pays = bust_pays(hand) if settled and hand is not None else None
    column: BustColumn | None = None
    if pays is not None:
        column = "suited" if suited else "off_suit"
    return BustBonusResult(
        round_id=round_id,
        outcome="flagged" if problems else "win" if pays is not None else "lose",
        up_card=state.dealer_cards[0] if state.dealer_cards else None,
        dealer_cards=state.dealer_cards,
        total=total,
        # Facts about the busted hand, reported for a flagged hand too (for review).
        suited=suited,
        three_eights=bust and hand is not None and is_three_eights(hand),
        pays=pays,
        reason="; ".join(problems) if problems else None,
        # The cell of a settled hand only: a flagged one pays nothing from any row.
        paytable_row=pay_row(hand).row if settled and hand is not None else None,
        column=column,
    )


def _unsettled(
    round_id: int,
    outcome: Literal["void", "flagged"],
    reason: str | None,
    up_card: str | None = None,
) -> BustBonusResult:
    """A result that pays nothing: void or flagged, showing at most the up card."""
    return BustBonusResult(
        round_id=round_id,
        outcome=outcome,
        up_card=up_card,
        dealer_cards=() if up_card is None else (up_card,),
        total=None,
        suited=False,
        three_eights=False,
        pays=None,
        reason=reason,
        paytable_row=None,
        column=None,
    )


def _up_card(state: BustBonusState) -> str | None:
    return state.dealer_cards[0] if state.dealer_cards else None


def _void(state: BustBonusState, round_id: int) -> BustBonusResult:
    return _unsettled(round_id, "void", None, _up_card(state))


def _interrupted(state: BustBonusState, round_id: int, new_round: int) -> BustBonusResult:
    reason = f"round {round_id} never ended: a CARD for round {new_round} arrived first"
    if state.problems:
        # The details may name cards still face down; the journal keeps every frame.
        reason += f" ({len(state.problems)} more problem(s) found; see the journal)"
    return _unsettled(round_id, "flagged", reason, _up_card(state))


def flagged_result(round_id: int, reason: str) -> BustBonusResult:
    """A flagged round's result: the reason, and no card (some may still be face down)."""
    return _unsettled(round_id, "flagged", reason)


def _frame(fact: CardDrawn | DealerDone | RoundVoided) -> str:
    return {CardDrawn: "CARD", DealerDone: "END", RoundVoided: "VOID"}[type(fact)]


def _not_open(fact: DealerDone | RoundVoided, opened: int | None) -> AlarmRaised:
    """``END`` or ``VOID`` for a round that is not open: no result under its id (it would
    replace, on every screen, the result a round of that id already has: shuffler-icd.md),
    an alarm instead; the journal keeps the frame."""
    where = f"round {opened} is open" if opened is not None else "no round is open"
    return AlarmRaised(
        code=LATE_FRAME,
        device="shuffler",
        message=(
            f"{_frame(fact)} for round {fact.round_id}, which is not open ({where}): no result "
            "is published for it; the frame is kept in the journal for review"
        ),
    )


def _late(fact: CardDrawn | DealerDone | RoundVoided, how: ClosedAs) -> AlarmRaised:
    # A CARD's position only: the card may be one nobody has seen (the journal has it).
    what = f"CARD at {fact.position}" if isinstance(fact, CardDrawn) else _frame(fact)
    return AlarmRaised(
        code=LATE_FRAME,
        device="shuffler",
        message=(
            f"{what} for round {fact.round_id} arrived after the round {_CLOSED_AS[how]}: its "
            "result stands; the frame is kept in the journal for review"
        ),
    )


def _close(state: BustBonusState, round_id: int, phase: ClosedAs) -> BustBonusState:
    closed = (*state.closed, (round_id, phase))[-CLOSED_MEMORY:]
    return replace(state, phase=phase, closed=closed)


def _parse(code: str) -> Card | None:
    try:
        return parse_card(code)
    except CardError:
        return None


def _parse_all(codes: Sequence[str]) -> tuple[Card, ...] | None:
    cards = tuple(_parse(code) for code in codes)
    if any(card is None for card in cards):
        return None
    return tuple(card for card in cards if card is not None)


def _describe(total: int, soft: bool) -> str:
    return f"{'soft' if soft else 'hard'} {total}"


def _rule(state: BustBonusState) -> str:
    return "H17" if state.hits_soft_17 else "S17"


def _decks(decks: int) -> str:
    return f"{decks} deck" + ("" if decks == 1 else "s")
