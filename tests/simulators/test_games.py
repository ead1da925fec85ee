"""Honest play of the shuffler (all seven modes) and the dice reader, without any port.

The checks are written from shuffler-icd.md, dice-reader-icd.md and the SD Cover All pay
tables, independently of the simulator's own tables; blackjack totals are recomputed here.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drivers.messages import WireFact
from rules.events import (
    CardDrawn,
    DealerDone,
    DeckChecked,
    DiceRolled,
    HandDealt,
    ModeReported,
    NoRoll,
    RollCheck,
    RoundDealt,
    RoundSettled,
    RoundVoided,
)
from simulators.dice import DiceGame
from simulators.faults import Faults
from simulators.scripts import Send, Sleep, Step
from simulators.shuffler import ShufflerGame

# shuffler-icd.md "Games": cards per position; pay-table columns of SD Cover All rule (9).
POKER = {
    #       player, DL, CM, hands min..max, dealer counted
    "CSP": (5, 5, 0, range(2, 9), True),
    "FCP": (5, 6, 0, range(2, 8), True),
    "LIR": (3, 0, 2, range(1, 8), False),
    "MSP": (2, 0, 3, range(1, 7), False),
    "TCP": (3, 3, 0, range(2, 9), True),
    "UTH": (2, 2, 5, range(2, 8), True),
}
RANKS, SUITS = "23456789TJQKA", "cdhs"


def messages(steps: list[Step]) -> list[WireFact]:
    """What each frame states, as the codec reads it (the codec validates every field)."""
    return [s.message(1, "shuffler").fact for s in steps if isinstance(s, Send)]


def split_rounds(msgs: list[WireFact]) -> list[list[WireFact]]:
    """Group frames by round: each round starts at its DECK check (or bare MODE)."""
    rounds: list[list[WireFact]] = []
    current: list[WireFact] = []
    for msg in msgs:
        current.append(msg)
        if isinstance(msg, RoundSettled | RoundVoided | DealerDone):
            rounds.append(current)
            current = []
    assert not current, "frames after the last round"
    return rounds


@pytest.mark.parametrize("game", sorted(POKER))
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_poker_rounds_are_honest(game: str, seed: int) -> None:
    player_cards, dealer_cards, community_cards, columns, dealer_counts = POKER[game]
    table = ShufflerGame(game, random.Random(seed), void_rate=0.2, first_round=41)  # type: ignore[arg-type]
    for number, frames in enumerate(split_rounds(messages(list(table.rounds(6))))):
        round_id = 41 + number
        # A fresh, checked deck per round (shuffler-icd.md "DECK": after each shuffle).
        assert isinstance(frames[0], DeckChecked)
        assert frames[0].result == "OK"
        body = frames[1:]
        last = body[-1]
        assert isinstance(last, RoundSettled | RoundVoided)
        assert all(getattr(m, "round_id", None) == round_id for m in body)
        hands = [m for m in body if isinstance(m, HandDealt)]
        assert hands, "a round (even a void one) opens with a HAND"
        assert body[: len(hands)] == hands
        positions = [h.position for h in hands]
        assert len(set(positions)) == len(positions)
        cards = [c for h in hands for c in h.cards]
        assert len(set(cards)) == len(cards), "one deck: no card twice in a round"
        for hand in hands:
            expected = {"DL": dealer_cards, "CM": community_cards}.get(hand.position, player_cards)
            assert len(hand.cards) == expected, hand.position
        if isinstance(last, RoundVoided):
            continue
        assert "DL" in positions if dealer_cards else "DL" not in positions
        assert "CM" in positions if community_cards else "CM" not in positions
        (round_msg,) = [m for m in body if isinstance(m, RoundDealt)]
        assert body == [*hands, round_msg, last]
        counted = [p for p in positions if p != "CM" and (p != "DL" or dealer_counts)]
        assert round_msg.hands == len(counted)
        assert round_msg.hands in columns


@pytest.mark.parametrize("game", sorted(POKER))
def test_every_pay_table_column_is_dealt(game: str) -> None:
    columns = POKER[game][3]
    table = ShufflerGame(game, random.Random(7))  # type: ignore[arg-type]
    seen = {m.hands for m in messages(list(table.rounds(300))) if isinstance(m, RoundDealt)}
    assert seen == set(columns)


@pytest.mark.heavy
def test_poker_deals_are_shuffled_decks() -> None:
    """Across many rounds every card turns up in every position slot: the deck is shuffled."""
    table = ShufflerGame("CSP", random.Random(3))
    first_cards = Counter(
        m.cards[0] for m in messages(list(table.rounds(2000))) if isinstance(m, HandDealt)
    )
    assert set(first_cards) == {r + s for r in RANKS for s in SUITS}


def test_same_seed_same_play_other_seed_other_play() -> None:
    def play(seed: int, game: str) -> list[Step]:
        return list(ShufflerGame(game, random.Random(seed), void_rate=0.1).rounds(5))  # type: ignore[arg-type]

    assert play(11, "UTH") == play(11, "UTH")
    assert play(11, "UTH") != play(12, "UTH")
    assert play(11, "BJ") == play(11, "BJ")


def test_interval_paces_rounds_and_zero_means_no_sleeps() -> None:
    paced = list(ShufflerGame("TCP", random.Random(1), interval=2.0).rounds(3))
    sleeps = [s.seconds for s in paced if isinstance(s, Sleep)]
    assert sum(sleeps) == pytest.approx(6.0)
    unpaced = list(ShufflerGame("TCP", random.Random(1), interval=0).rounds(3))
    assert not any(isinstance(s, Sleep) for s in unpaced)


# Blackjack ----------------------------------------------------------------------------


def bj_total(cards: list[str]) -> tuple[int, bool]:
    """Blackjack total and softness, written here from the rules of the game."""
    value = {**{r: int(r) for r in "23456789"}, "T": 10, "J": 10, "Q": 10, "K": 10, "A": 1}
    total = sum(value[c[0]] for c in cards)
    if any(c[0] == "A" for c in cards) and total + 10 <= 21:
        return total + 10, True
    return total, False


def bj_rounds(rule: str, rounds: int, seed: int, decks: int = 6) -> list[list[WireFact]]:
    table = ShufflerGame("BJ", random.Random(seed), decks=decks, dealer_rule=rule)  # type: ignore[arg-type]
    return split_rounds(messages(list(table.rounds(rounds))))


@pytest.mark.parametrize("rule", ["S17", "H17"])
def test_blackjack_dealer_follows_the_rule(rule: str) -> None:
    soft_17_seen = 0
    for frames in bj_rounds(rule, 400, seed=5):
        cards = [m for m in frames if isinstance(m, CardDrawn)]
        assert isinstance(frames[-1], DealerDone)
        seats = sorted({c.position for c in cards if c.position != "DL"})
        # Draw order: each player, then the dealer (up card), twice.
        assert [c.position for c in cards[: 2 * len(seats) + 2]] == [*seats, "DL"] * 2
        hands: dict[str, list[str]] = {}
        for c in cards:
            hands.setdefault(c.position, []).append(c.card)
        dealer = hands.pop("DL")
        dealer_bj = bj_total(dealer[:2])[0] == 21
        if dealer_bj:
            assert len(dealer) == 2, "no draw after the peek"
            continue
        # Bust Bonus rule (11): played out even when every player busted (a wager is up).
        for n in range(2, len(dealer)):
            total, soft = bj_total(dealer[:n])
            assert total < 17 or (rule == "H17" and total == 17 and soft), "drew on a stand"
        total, soft = bj_total(dealer)
        assert total >= 17
        if total == 17 and soft:
            assert rule == "S17", "H17 hits soft 17"
        soft_17_seen += any(bj_total(dealer[:n]) == (17, True) for n in range(2, len(dealer) + 1))
    assert soft_17_seen, "the sample should include a soft 17"


def test_blackjack_shoe_holds_its_decks_and_reshuffles_at_the_cut() -> None:
    decks = 2
    table = ShufflerGame("BJ", random.Random(9), decks=decks, penetration=0.5)
    msgs = messages(list(table.rounds(120)))
    shuffles = [i for i, m in enumerate(msgs) if isinstance(m, DeckChecked)]
    assert shuffles[0] == 0
    assert len(shuffles) > 3
    for start, end in zip(shuffles, [*shuffles[1:], len(msgs)], strict=True):
        drawn = Counter(m.card for m in msgs[start:end] if isinstance(m, CardDrawn))
        assert max(drawn.values()) <= decks, "a shoe holds each card at most `decks` times"
        # The cut card at half the shoe: a shoe is dealt past half, never far past.
        assert decks * 52 // 2 <= sum(drawn.values()) <= decks * 52 or end == len(msgs)


def test_void_rounds_stop_early_and_ids_count_up() -> None:
    table = ShufflerGame("BJ", random.Random(2), void_rate=0.5, first_round=999_998)
    rounds = bj_rounds_from(table, 4)
    assert [r[-1].round_id for r in rounds] == [999_998, 999_999, 1, 2]  # type: ignore[union-attr]
    assert all(isinstance(r[-1], DealerDone | RoundVoided) for r in rounds)
    assert any(isinstance(r[-1], RoundVoided) for r in rounds)


def bj_rounds_from(table: ShufflerGame, count: int) -> list[list[WireFact]]:
    return split_rounds(
        [m for m in messages(list(table.rounds(count))) if not isinstance(m, DeckChecked)]
    )


# Content faults ----------------------------------------------------------------------


def test_wrong_mode_and_bad_deck_faults() -> None:
    faults = Faults(wrong_mode=1.0, bad_deck=1.0)
    table = ShufflerGame("LIR", random.Random(4), faults=faults)
    msgs = messages(table.next_round())
    assert isinstance(msgs[0], ModeReported)
    assert msgs[0].game != "LIR"
    assert isinstance(msgs[1], DeckChecked)
    assert msgs[1].result in {
        "SHORT",
        "EXTRA",
        "DUPLICATE",
        "FOREIGN",
    }
    assert isinstance(msgs[2], DeckChecked)
    assert msgs[2].result == "OK"
    assert isinstance(msgs[-1], ModeReported)
    assert msgs[-1].game == "LIR"


def test_status_fault_is_cleared_by_ready() -> None:
    table = ShufflerGame("CSP", random.Random(4), faults=Faults(status=1.0))
    first, second = [s for s in table.next_round() if isinstance(s, Send)][:2]
    assert first.kind == second.kind == "STATUS"
    assert first.fields[1] in {"JAM", "DOOR_OPEN", "CAMERA_FAULT"}
    assert second.fields[1] == "READY"


# Dice ----------------------------------------------------------------------------------


def dice_messages(game: DiceGame, count: int) -> list[WireFact]:
    return [s.message(1, "dice_reader").fact for s in game.rolls(count) if isinstance(s, Send)]


def test_dice_are_fair_and_roll_ids_wrap() -> None:
    rolls = dice_messages(DiceGame(random.Random(1), first_roll=999_000), 3600)
    assert all(isinstance(m, DiceRolled) for m in rolls)
    ids = [m.roll_id for m in rolls if isinstance(m, DiceRolled)]
    assert ids[999] == 999_999
    assert ids[1000] == 1
    faces = Counter(d for m in rolls if isinstance(m, DiceRolled) for d in m.dice)
    assert set(faces) == set(range(1, 7))
    assert min(faces.values()) > 1000  # 7200 dice, 1200 expected per face


def test_noroll_and_check_rates_and_reasons() -> None:
    norolls = dice_messages(DiceGame(random.Random(2), noroll_rate=1.0), 200)
    assert {m.reason for m in norolls if isinstance(m, NoRoll)} == {"OFF_TABLE", "EXTRA_DICE"}
    checks = list(dice_messages(DiceGame(random.Random(3), check_rate=1.0), 400))
    assert all(isinstance(m, RollCheck) for m in checks)
    reasons = {m.reason for m in checks if isinstance(m, RollCheck)}
    assert reasons == {
        "STACKED",
        "BOWL",
        "RAIL",
        "WRONG_DIRECTION",
        "SLID",
        "ON_CHIPS",
        "SHORT_THROW",
        "UNREADABLE",
    }
    for m in checks:
        assert isinstance(m, RollCheck)
        # 68 IAC 10-4-4(c)(11): only an unreadable throw reports a die of 0.
        assert (0 in m.dice) == (m.reason == "UNREADABLE")
    mixed = dice_messages(DiceGame(random.Random(4), noroll_rate=0.1, check_rate=0.1), 1000)
    kinds = Counter(type(m) for m in mixed)
    assert 50 < kinds[NoRoll] < 150
    assert 50 < kinds[RollCheck] < 150


def test_dice_seed_reproduces() -> None:
    def play(seed: int) -> list[Step]:
        return list(DiceGame(random.Random(seed), noroll_rate=0.2, check_rate=0.2).rolls(50))

    assert play(8) == play(8) != play(9)


def test_bad_settings_are_refused_with_reasons() -> None:
    with pytest.raises(ValueError, match="unknown game"):
        ShufflerGame("BACCARAT", random.Random())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="decks"):
        ShufflerGame("BJ", random.Random(), decks=0)
    with pytest.raises(ValueError, match="probability"):
        DiceGame(random.Random(), check_rate=1.5)
