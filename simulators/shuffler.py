"""The i-Deal-style shuffler (and card-reading blackjack shoe) simulator: honest play.

One simulator for all seven modes of shuffler-icd.md. ``ShufflerGame`` is the table: it
turns an injected ``random.Random`` into the steps (``simulators.scripts``) of one round
after another; it does no I/O, so a run is reproduced from its seed, and tests check the
deals without a port. ``simulators.serve`` sends the steps through the device link.

Poker (``CSP FCP LIR MSP TCP UTH``), per round (shuffler-icd.md "Games"):

* a fresh shuffle of one 52-card deck, then ``DECK,OK``;
* a random number of players such that the number of hands counted for Cover All is a
  column of the game's pay table (SD Cover All Bonus rule (9)): CSP and TCP 2..8 hands
  including the dealer, FCP and UTH 2..7 including the dealer, LIR 1..7 and MSP 1..6
  players (no dealer hand counted), seated at random spots ``P1``..``Pn``;
* one ``HAND`` per position in random order (the dealer takes hands in any order), ``CM``
  once, each with the game's card count, dealt from the top of the deck in that order;
* ``ROUND`` with the number of hands, then ``SETTLE``. With probability ``void_rate``
  the dealer calls a misdeal instead: ``VOID`` after at least one ``HAND``, at any point
  before ``SETTLE``.

Blackjack (``BJ``): a shoe of ``decks`` decks with a cut card at ``penetration``; the shoe
is reshuffled (then ``DECK,OK``) before the first round and before the round after the
cut card came out. One to seven players; ``CARD`` frames in draw order (each player then
the dealer, twice: the dealer's first card is the up card, the second the hole card),
then each player by ``player_hits`` (no splits or doubles: the shoe reports one hand per
spot), then the dealer by the configured rule (``S17`` stands on soft 17, ``H17`` hits
it), then ``END``. The dealer does not draw when no player hand is left to beat (all bust
or blackjack) or when the dealer has blackjack (the peek). If a shoe runs out within a
round (only possible with very few decks), the discards, not the cards on the table,
are reshuffled into it without a deck check.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

from rules.cards import DECK, Card, format_cards
from rules.cover_all import LAYOUTS
from rules.events import GAMES, MAX_ID, DeckResult, Game, PokerGame, Position
from rules.paytables import cover_all_columns
from simulators.faults import Faults, hit
from simulators.scripts import Send, Sleep, Step

DealerRule = Literal["S17", "H17"]
BAD_DECKS: tuple[DeckResult, ...] = ("SHORT", "EXTRA", "DUPLICATE", "FOREIGN")
SHUFFLER_FAULT_CODES = ("JAM", "DOOR_OPEN", "CAMERA_FAULT")  # shuffler-icd.md "STATUS"
BJ_SEATS: tuple[Position, ...] = ("P1", "P2", "P3", "P4", "P5", "P6", "P7")


def next_id(current: int, maximum: int = MAX_ID) -> int:
    """The device counter after ``current``: 1..maximum, then 1 again."""
    return 1 if current >= maximum else current + 1


def hand_total(cards: list[Card]) -> tuple[int, bool]:
    """Blackjack total and whether it is soft (an ace counted as 11)."""
    total = sum(10 if c.rank in (11, 12, 13) else 1 if c.rank == 14 else c.rank for c in cards)
    if any(c.rank == 14 for c in cards) and total + 10 <= 21:
        return total + 10, True
    return total, False


def is_blackjack(cards: list[Card]) -> bool:
    """Two cards worth 21."""
    return len(cards) == 2 and hand_total(cards)[0] == 21


def player_hits(cards: list[Card], up: Card) -> bool:
    """The simulated players' simple strategy (no splits, no doubles).

    Hit hard 11 or less; hard 12-16 hit against a dealer 7 or better (ten-valued or ace),
    stand against 2-6; hit soft 17 or less; stand otherwise.
    """
    total, soft = hand_total(cards)
    if soft:
        return total <= 17
    if total <= 11:
        return True
    if total <= 16:
        return up.rank >= 7
    return False


def dealer_hits(cards: list[Card], rule: DealerRule) -> bool:
    """The dealer's rule: draw below 17; on soft 17 only under ``H17``."""
    total, soft = hand_total(cards)
    return total < 17 or (total == 17 and soft and rule == "H17")


class ShufflerGame:
    """A table playing one game: the steps of each round, drawn from ``rng``.

    ``faults`` supplies the content faults (``wrong_mode``, ``bad_deck``, ``status``);
    the wire faults are the device link's. ``interval`` is roughly the seconds per round
    (0: no pauses at all).
    """

    def __init__(
        self,
        game: Game,
        rng: random.Random,
        *,
        faults: Faults | None = None,
        void_rate: float = 0.0,
        interval: float = 0.0,
        decks: int = 6,
        dealer_rule: DealerRule = "S17",
        penetration: float = 0.75,
        first_round: int = 1,
    ) -> None:
        if game not in GAMES:
            raise ValueError(f"unknown game {game!r}: expected one of {', '.join(GAMES)}")
        if not 0.0 <= void_rate <= 1.0:
            raise ValueError(f"void rate {void_rate} is not a probability between 0 and 1")
        if not 1 <= decks <= 8:
            raise ValueError(f"a shoe of {decks} decks: expected 1 to 8")
        if not 0.0 < penetration <= 1.0:
            raise ValueError(f"penetration {penetration}: expected a fraction in (0, 1]")
        if not 1 <= first_round <= MAX_ID:
            raise ValueError(f"round id {first_round}: expected 1 to {MAX_ID}")
        if interval < 0:
            raise ValueError(f"interval {interval}: expected seconds >= 0")
        self.game: Game = game
        self.rng = rng
        self.faults = faults or Faults()
        self.void_rate = void_rate
        self.interval = interval
        self.decks = decks
        self.dealer_rule: DealerRule = dealer_rule
        self.penetration = penetration
        self.round_id = first_round
        self._shoe: list[Card] = []
        self._discards: list[Card] = []
        self._cut = 0
        self._drawn = 0

    def mode(self) -> Send:
        """The ``MODE`` frame of the game the shuffler is set to."""
        return Send.of("MODE", self.game)

    def rounds(self, count: int | None = None) -> Iterator[Step]:
        """The steps of ``count`` rounds (forever when None), one round at a time."""
        played = 0
        while count is None or played < count:
            yield from self.next_round()
            played += 1

    def next_round(self) -> list[Step]:
        """The steps of the next round, including any content faults drawn for it."""
        steps: list[Step] = []
        if hit(self.faults.status, self.rng):
            code = self.rng.choice(SHUFFLER_FAULT_CODES)
            steps += [
                Send.of("STATUS", code, code.lower().replace("_", " ")),
                Send.of("STATUS", "READY", ""),
            ]
        wrong = hit(self.faults.wrong_mode, self.rng)
        if wrong:
            other = self.rng.choice([g for g in GAMES if g != self.game])
            steps.append(Send.of("MODE", other))
        if self.game == "BJ":
            steps += self._blackjack_round()
        else:
            steps += self._poker_round(self.game)
        if wrong:
            steps.append(self.mode())
        self.round_id = next_id(self.round_id)
        return steps

    def _pause(self, fraction: float) -> list[Step]:
        return [Sleep(self.interval * fraction)] if self.interval > 0 else []

    def _deck_check(self) -> list[Step]:
        """``DECK`` after a shuffle; a failed check is fixed and reshuffled (then ``OK``)."""
        steps: list[Step] = []
        if hit(self.faults.bad_deck, self.rng):
            steps.append(Send.of("DECK", self.rng.choice(BAD_DECKS)))
        steps.append(Send.of("DECK", "OK"))
        return steps

    def _void_point(self, frames: int) -> int | None:
        """After how many frames of a round the dealer calls a misdeal, if at all."""
        if not hit(self.void_rate, self.rng):
            return None
        return self.rng.randint(1, frames)

    def _poker_round(self, game: PokerGame) -> list[Step]:
        layout = LAYOUTS[game]  # shuffler-icd.md "Games", as the rules read a deal
        columns = cover_all_columns(game)  # SD Cover All Bonus rule (9): total hands
        dealer = 1 if layout.dealer_cards is not None else 0  # counted, rule (4)
        rid = self.round_id
        deck = list(DECK)
        self.rng.shuffle(deck)
        hands = self.rng.randint(min(columns), max(columns))
        seats = self.rng.sample(
            [f"P{n}" for n in range(1, max(columns) - dealer + 1)], hands - dealer
        )
        positions: list[tuple[str, int]] = [(seat, layout.player_cards) for seat in seats]
        if layout.dealer_cards:
            positions.append(("DL", layout.dealer_cards))
        if layout.community_cards:
            positions.append(("CM", layout.community_cards))
        self.rng.shuffle(positions)
        frames: list[Send] = []
        for position, count in positions:
            cards, deck = deck[:count], deck[count:]
            frames.append(Send.of("HAND", rid, position, format_cards(cards)))
        frames.append(Send.of("ROUND", rid, hands))
        void_at = self._void_point(len(frames))
        steps = self._deck_check()
        gap = 0.2 / len(positions)
        for index, frame in enumerate(frames):
            if index == void_at:
                return [*steps, Send.of("VOID", rid), *self._pause(0.5)]
            if frame.kind == "ROUND":
                steps.append(frame)
                steps += self._pause(0.5)
            else:
                steps.append(frame)
                steps += self._pause(gap)
        if void_at == len(frames):
            return [*steps, Send.of("VOID", rid), *self._pause(0.3)]
        return [*steps, Send.of("SETTLE", rid), *self._pause(0.3)]

    # Blackjack --------------------------------------------------------------------

    def _shuffle_shoe(self) -> None:
        self._shoe = list(DECK) * self.decks
        self.rng.shuffle(self._shoe)
        self._discards = []
        self._cut = max(1, int(len(self._shoe) * self.penetration))
        self._drawn = 0

    def _draw(self, table: list[Card]) -> Card:
        if not self._shoe:
            # Out of cards within a round: the discards (never the cards on the table) are
            # shuffled into a new shoe, as a dealer would.
            self._shoe, self._discards = self._discards, []
            self.rng.shuffle(self._shoe)
        card = self._shoe.pop()
        self._drawn += 1
        table.append(card)
        return card

    def _blackjack_round(self) -> list[Step]:
        rid = self.round_id
        steps: list[Step] = []
        if self._cut == 0 or self._drawn >= self._cut:  # first round, or the cut card is out
            self._shuffle_shoe()
            steps += self._deck_check()
        players = self.rng.randint(1, len(BJ_SEATS))
        seats = sorted(self.rng.sample(BJ_SEATS, players))
        expected = 2 * (players + 1) + players + 1
        void_at = self._void_point(expected)
        table: list[Card] = []
        hands: dict[str, list[Card]] = {seat: [] for seat in [*seats, "DL"]}
        cards_sent = 0

        def deal(position: str) -> bool:
            """Draw one card to ``position``; False once the dealer has called a misdeal."""
            nonlocal cards_sent
            if void_at is not None and cards_sent >= void_at:
                return False
            card = self._draw(table)
            hands[position].append(card)
            steps.append(Send.of("CARD", rid, position, card.code))
            steps.extend(self._pause(0.6 / expected))
            cards_sent += 1
            return True

        complete = self._play_blackjack(seats, hands, deal)
        self._discards += table
        if not complete or void_at is not None:
            return [*steps, Send.of("VOID", rid), *self._pause(0.4)]
        return [*steps, Send.of("END", rid), *self._pause(0.4)]

    def _play_blackjack(
        self,
        seats: Sequence[str],
        hands: dict[str, list[Card]],
        deal: Callable[[str], bool],
    ) -> bool:
        """Deal and play one round through ``deal``; False if it was cut short (misdeal)."""
        for _ in range(2):  # each player, then the dealer: up card first, hole card second
            for position in [*seats, "DL"]:
                if not deal(position):
                    return False
        dealer = hands["DL"]
        up = dealer[0]
        if is_blackjack(dealer):  # the peek: nobody acts against a dealer blackjack
            return True
        for seat in seats:
            while not is_blackjack(hands[seat]) and player_hits(hands[seat], up):
                if not deal(seat):
                    return False
                if hand_total(hands[seat])[0] > 21:
                    break
        # Bust Bonus rule (11): with a Bust Bonus wager on the layout the dealer's hand is
        # played out even when no player hand is left; the simulated table always has one,
        # so the dealer always plays out (as lammer checks it).
        while dealer_hits(dealer, self.dealer_rule):
            if not deal("DL"):
                return False
        return True
