"""The pay tables as the tests read them: the regulation's file and Bust Bonus's seed rows."""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

from rules.cards import Card

SEED = Path(__file__).parents[1] / "rules" / "fixtures" / "sd-bust-bonus.txt"


def seed_paytable() -> dict[str, tuple[Decimal, Decimal]]:
    """Rule (12) of the seed: row name -> (off-suit, suited), read from the text itself.

    The seed lays the table out one cell a line, each ending in ``|``, with a lone ``|``
    between rows; the first row is the header.
    """
    lines = SEED.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("(12)"))
    stop = next(i for i, line in enumerate(lines) if line.startswith("(All payouts"))
    rows: list[list[str]] = []
    current: list[str] = []
    for line in lines[start + 1 : stop]:
        cell = line.rstrip().removesuffix("|").strip()
        if cell:
            current.append(cell)
        elif current:
            rows.append(current)
            current = []
    if current:
        rows.append(current)
    header, *body = rows
    assert header == ["Dealer Up Card", "Bust, Off-Suit", "Bust, Suited"]
    assert all(len(row) == 3 for row in body)
    return {name: (Decimal(off), Decimal(suited)) for name, off, suited in body}


SEED_ROWS = seed_paytable()


def seed_pays(cards: Sequence[Card]) -> Decimal | None:
    """An oracle independent of the code under test: what the seed pays on a dealer hand."""
    values = [1 if c.rank == 14 else min(c.rank, 10) for c in cards]
    totals = [sum(values) + 10 * k for k in range(values.count(1) + 1)]
    if min(totals) <= 21:
        return None
    suited = len({c.suit for c in cards}) == 1
    if len(cards) == 3 and all(c.rank == 8 for c in cards):
        row = "Bust with three 8s"
    else:
        row = {14: "Ace", 11: "10", 12: "10", 13: "10"}.get(cards[0].rank, str(cards[0].rank))
    off, suit = SEED_ROWS[row]
    return suit if suited else off


def dealt_hand(cards: Sequence[Card], h17: bool) -> tuple[Card, ...]:
    """The dealer's hand from a run of cards, by the rule written out here independently."""
    hand: list[Card] = []
    for card in cards:
        values = [1 if c.rank == 14 else min(c.rank, 10) for c in hand]
        hard = sum(values)
        soft = 1 in values and hard + 10 <= 21
        total = hard + 10 if soft else hard
        if len(hand) >= 2 and (total > 17 or (total == 17 and not (h17 and soft))):
            break
        hand.append(card)
    return tuple(hand)


FIXTURE = Path(__file__).parents[1] / "rules" / "fixtures" / "sd-cover-all-bonus.txt"


TITLES = {
    "Caribbean Stud Poker": "CSP",
    "Four Card Poker": "FCP",
    "Let It Ride (Dealer's Hand included)": "LIR",
    "Mississippi Stud Poker (Dealer's Hand included)": "MSP",
    "Three Card Poker": "TCP",
    "Ultimate Texas Hold'em": "UTH",
}


Regulation = dict[str, tuple[list[int], list[tuple[str, list[str]]]]]


def parse_regulation(text: str) -> Regulation:
    """game -> (columns as printed, [(row, cells)]) from the seed's one-line tables."""
    tables: Regulation = {}
    for chunk in text.split("Cover All Bonus for use with ")[1:]:
        title, rest = chunk.split(" Highest Hand Rank ", 1)
        body = rest.split(" All pays are TO 1", 1)[0]
        columns = [int(n) for n in re.findall(r"(\d+) Total Hands?\b", body)]
        cells = re.split(r"\d+ Total Hands? ", body)[-1]
        rows = re.findall(r"([A-Z][A-Za-z ()]*?) ((?:\d+(?:\.\d+)? ?)+)", cells)
        tables[TITLES[title]] = (columns, [(name, nums.split()) for name, nums in rows])
    return tables


REGULATION = parse_regulation(FIXTURE.read_text("utf-8"))
