"""Card codes as in shuffler-icd.md."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rules.cards import DECK, Card, as_cards, format_cards, parse_card, parse_cards
from rules.errors import CardError


def test_deck_has_52_distinct_cards_with_codes_of_the_spec() -> None:
    codes = {card.code for card in DECK}
    assert len(DECK) == 52
    assert len(codes) == 52
    assert {c[0] for c in codes} == set("23456789TJQKA")
    assert {c[1] for c in codes} == set("cdhs")
    assert [card.index for card in DECK] == list(range(52))


def test_list_without_separators_round_trips() -> None:
    cards = parse_cards("AsKsQsJsTs")
    assert [c.rank for c in cards] == [14, 13, 12, 11, 10]
    assert {c.suit for c in cards} == {"s"}
    assert format_cards(cards) == "AsKsQsJsTs"


@pytest.mark.parametrize(
    ("text", "bad", "index"),
    [
        ("AsKx", "Kx", 1),
        ("1s", "1s", 0),
        ("asKs", "as", 0),
        ("AsKsQ", "Q", 2),  # an odd length: the piece left over, and its place
        ("AsK sQs", "K ", 1),  # a stray character: the first pair it spoils
    ],
)
def test_bad_code_names_the_text_and_where(text: str, bad: str, index: int | None) -> None:
    with pytest.raises(CardError) as info:
        parse_cards(text)
    assert info.value.text == bad
    assert info.value.index == index
    assert repr(bad) in str(info.value)


def test_card_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="bad card code"):
        parse_card("ZZ")


def test_as_cards_accepts_codes_lists_and_cards() -> None:
    assert as_cards(["As", "KdQh", Card(2, "c")]) == parse_cards("AsKdQh2c")


@pytest.mark.parametrize(
    ("items", "bad", "index"),
    [
        (["As", "Ks", "T"], "T", 2),
        (["As", "Ks", "Ts "], "Ts ", 2),
        (["As", "10s"], "10s", 1),
        (["AsKs", "Qx"], "Qx", 2),  # places count cards, also inside a list item
        (["As", "KsQsJ"], "KsQsJ", 1),  # neither a code nor a whole list
        (["As", "", "Ks"], "", 1),  # an empty item is no card (was silently dropped)
    ],
)
def test_as_cards_names_the_bad_item_and_its_place(items: list[str], bad: str, index: int) -> None:
    with pytest.raises(CardError) as info:
        as_cards(items)
    assert (info.value.text, info.value.index) == (bad, index)
    assert f"card {index + 1}" in str(info.value)


@pytest.mark.parametrize(
    ("rank", "suit"), [(20, "s"), (15, "h"), (1, "s"), (0, "c"), (14, "x"), (14, "sd")]
)
def test_a_card_out_of_range_is_a_card_error(rank: int, suit: str) -> None:
    with pytest.raises(CardError, match="not a card"):
        Card(rank, suit)


@pytest.mark.parametrize(
    ("parse", "message"),
    [
        (
            lambda: parse_card("Zz"),
            "bad card code 'Zz': expected a rank of 23456789TJQKA then a suit of cdhs",
        ),
        (
            lambda: parse_cards("AsKsQ"),
            "card list 'AsKsQ' has 5 characters (every card is 2): 'Q' at card 3 is not a"
            " whole card",
        ),
    ],
)
def test_a_bad_card_message_reads_in_full(parse: Callable[[], object], message: str) -> None:
    with pytest.raises(CardError) as info:
        parse()
    assert str(info.value) == message
