"""The poker round state machine (rules/poker_round.py): frames in, Cover All outcomes out."""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.cards import DECK
from rules.cover_all import LAYOUTS, NoQualifier, Win, resolve_round
from rules.errors import ConfigError
from rules.events import (
    LATE_FRAME,
    POKER_GAMES,
    POSITIONS,
    AlarmRaised,
    CoverAllPayouts,
    CoverAllResult,
    HandDealt,
    HighestHand,
    Outcome,
    PayRow,
    PokerGame,
    Position,
    RoundDealt,
    RoundSettled,
    RoundVoided,
)
from rules.paytables import cover_all_paytable
from rules.poker_round import (
    CLOSED_MEMORY,
    PokerFact,
    PokerRoundState,
    apply,
    forget_closed,
    initial_state,
    is_closed,
    open_round_id,
)

CARD_CODE = re.compile(r"(?<![A-Za-z])[2-9TJQKA][cdhs](?![a-z])")


def hand(round_id: int, position: Position, text: str) -> HandDealt:
    return HandDealt(
        round_id=round_id,
        position=position,
        cards=tuple(text[i : i + 2] for i in range(0, len(text), 2)),
    )


def run(
    facts: Sequence[PokerFact], state: PokerRoundState | None = None, game: PokerGame = "CSP"
) -> tuple[PokerRoundState, list[Outcome]]:
    state = state or initial_state(game)
    outcomes: list[Outcome] = []
    for fact in facts:
        state, out = apply(state, fact)
        outcomes.extend(out)
    return state, outcomes


def flagged(outcomes: Sequence[Outcome]) -> list[CoverAllResult]:
    return [o for o in outcomes if isinstance(o, CoverAllResult) and o.outcome == "flagged"]


def late_frame(arrived: str) -> list[Outcome]:
    """The outcomes of a late frame: the alarm saying what arrived, and no second result
    (shuffler-icd.md "What the host must check")."""
    message = f"{arrived}: its result stands; the frame is kept in the journal for review"
    return [AlarmRaised(code=LATE_FRAME, device="shuffler", message=message)]


ROUND_812 = [  # shuffler-icd.md, "Example: one Caribbean Stud round"
    hand(812, "P1", "9c9d5h5s2c"),
    hand(812, "P3", "QhJhTh8h7h"),
    hand(812, "DL", "AcKd4s3h3c"),
]


def test_spec_example_round_812() -> None:
    state, outcomes = run(ROUND_812)
    assert outcomes == []  # nothing is shown while the hands are dealt
    assert open_round_id(state) == 812
    state, outcomes = run([RoundDealt(round_id=812, hands=3)], state)
    assert outcomes == [
        CoverAllPayouts(
            round_id=812,
            game="CSP",
            hands=3,
            paytable=(
                PayRow(hand="Royal Flush", pays=Decimal(300)),
                PayRow(hand="Straight Flush", pays=Decimal(125)),
                PayRow(hand="Four of a Kind", pays=Decimal(40)),
                PayRow(hand="Full House", pays=Decimal(30)),
                PayRow(hand="Flush", pays=Decimal(20)),
                PayRow(hand="Straight", pays=Decimal(17)),
                PayRow(hand="Three of a Kind", pays=Decimal(6)),
            ),
        )
    ]
    state, outcomes = run([RoundSettled(round_id=812)], state)
    assert outcomes == [
        CoverAllResult(
            round_id=812,
            game="CSP",
            hands=3,
            outcome="win",
            highest=HighestHand(hand="Flush", position="P3", cards=("Qh", "Jh", "Th", "8h", "7h")),
            pays=Decimal(20),
            reason=None,
        )
    ]
    assert open_round_id(state) is None


def test_no_qualifier_at_settle_names_no_hand() -> None:
    _, outcomes = run(
        [
            hand(5, "P2", "9c9d5h5s2c"),
            hand(5, "DL", "AcKd4s3h7c"),
            RoundDealt(round_id=5, hands=2),
            RoundSettled(round_id=5),
        ]
    )
    result = outcomes[-1]
    assert isinstance(result, CoverAllResult)
    assert (result.outcome, result.pays, result.reason) == ("no_qualifier", None, None)
    assert (result.round_id, result.game, result.hands) == (5, "CSP", 2)
    # Two pair at P2 is the table's best, but it is no row of the pay table: the result
    # names no hand (mqtt-api.md: hand names are the seed's rows).
    assert result.highest is None


@pytest.mark.parametrize("after_round", [False, True])
def test_void_pays_nothing(after_round: bool) -> None:
    facts: list[PokerFact] = [*ROUND_812]
    if after_round:
        facts.append(RoundDealt(round_id=812, hands=3))
    state, outcomes = run([*facts, RoundVoided(round_id=812)])
    assert outcomes[-1] == CoverAllResult(
        round_id=812,
        game="CSP",
        hands=3 if after_round else None,
        outcome="void",
        highest=None,
        pays=None,
        reason=None,
    )
    assert open_round_id(state) is None
    after, late = run([RoundSettled(round_id=812)], state)
    assert late == late_frame("SETTLE for round 812 arrived after the round was voided")
    assert after == state


# ---------------------------------------------------------------------------------------
# Faults are flagged at once, without cards, and the round then pays nothing


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        ([hand(7, "P1", "AsKsQsJs")], "P1 was dealt 4 cards"),
        ([hand(7, "P1", "AsKsQsJsTs"), hand(7, "DL", "As2c3c4c5c")], "DL and P1 hold the same"),
        ([hand(7, "P1", "AsKsQsJsTs"), hand(7, "P1", "2c3c4c5c7d")], "P1 was dealt twice"),
        ([hand(7, "CM", "2c3c")], "CM was dealt, but Caribbean Stud Poker has no community"),
        ([hand(7, "P1", "AsKsQsJsXx")], "not a card code"),
        (
            [
                hand(7, "P1", "AsKsQsJsTs"),
                hand(7, "DL", "2c3c4c5c7d"),
                RoundDealt(round_id=7, hands=3),
            ],
            "the shuffler reports 3 hands but 2 were dealt",
        ),
        (
            [hand(7, "P1", "AsKsQsJsTs"), RoundDealt(round_id=7, hands=1)],
            r"the dealer's hand \(DL\) was not dealt",
        ),
        (
            [
                hand(7, "P1", "AsKsQsJsTs"),
                hand(7, "DL", "2c3c4c5c7d"),
                RoundDealt(round_id=7, hands=2),
                hand(7, "P2", "2d3d4d5d7h"),
            ],
            "HAND for P2 came after ROUND",
        ),
        (
            [
                hand(7, "P1", "AsKsQsJsTs"),
                hand(7, "DL", "2c3c4c5c7d"),
                RoundDealt(round_id=7, hands=2),
                RoundDealt(round_id=7, hands=2),
            ],
            "ROUND came twice",
        ),
        ([hand(7, "P1", "AsKsQsJsTs"), RoundSettled(round_id=7)], "SETTLE came before ROUND"),
    ],
)
def test_a_fault_flags_the_round_at_once_and_it_pays_nothing(
    facts: list[PokerFact], reason: str
) -> None:
    state, outcomes = run(facts)
    [result] = flagged(outcomes)
    assert re.search(reason, result.reason or "")
    assert result.round_id == 7
    assert result.highest is None
    assert result.pays is None
    assert not CARD_CODE.search(result.reason or ""), result.reason
    # the rest of the round: no pay table and no result, whatever comes
    rest: list[PokerFact] = [
        hand(7, "P3", "8h8d8c9s2h"),
        RoundDealt(round_id=7, hands=2),
        RoundSettled(round_id=7),
    ]
    state, later = run(rest, state)
    assert not [o for o in later if isinstance(o, CoverAllPayouts)]
    assert not [o for o in later if isinstance(o, CoverAllResult) and o.outcome != "flagged"]
    assert open_round_id(state) is None
    # and the next round is unaffected
    _, outcomes = run([*[hand(8, o.position, "".join(o.cards)) for o in ROUND_812]], state)
    assert outcomes == []


def test_a_new_round_abandons_the_open_one() -> None:
    state, outcomes = run(
        [*ROUND_812, RoundDealt(round_id=812, hands=3), hand(813, "P1", "2c3d4h6s8c")]
    )
    [result] = flagged(outcomes)
    assert (result.round_id, result.hands) == (812, 3)
    assert result.reason == (
        "round 812 was abandoned: the shuffler began round 813 before round 812 was"
        " settled or voided"
    )
    assert open_round_id(state) == 813
    late = run([RoundSettled(round_id=812)], state)[1]
    assert late == late_frame("SETTLE for round 812 arrived after the round was abandoned")


def not_open(frame: str, round_id: int, where: str) -> AlarmRaised:
    """The alarm of a frame for a round that is not open (no result under its id)."""
    return AlarmRaised(
        code=LATE_FRAME,
        device="shuffler",
        message=(
            f"{frame} for round {round_id}, which is not open ({where}): no result is "
            "published for it; the frame is kept in the journal for review"
        ),
    )


def test_round_for_another_round_id_flags_the_open_round_and_publishes_nothing_for_it() -> None:
    # shuffler-icd.md: a result under round 900's id would replace, on every screen, the
    # result a round 900 may already have (a shuffler whose counter restarted).
    state, outcomes = run([*ROUND_812, RoundDealt(round_id=900, hands=3)])
    [result] = flagged(outcomes)
    assert result.round_id == 812
    assert result.reason == (
        "the shuffler sent ROUND for round 900 while round 812 was open:"
        " the device and the host disagree on the round"
    )
    assert outcomes[-1] == not_open("ROUND", 900, "round 812 is open")
    assert open_round_id(state) is None


@pytest.mark.parametrize(
    ("fact", "frame"),
    [
        (RoundDealt(round_id=4, hands=2), "ROUND"),
        (RoundSettled(round_id=4), "SETTLE"),
        (RoundVoided(round_id=4), "VOID"),
    ],
)
def test_frames_for_a_round_never_dealt_publish_no_result(fact: PokerFact, frame: str) -> None:
    state, outcomes = run([fact])
    assert flagged(outcomes) == []
    assert outcomes == [not_open(frame, 4, "no round is open")]
    assert state == initial_state("CSP")
    # round 4 may still be dealt: its first HAND opens it
    state, _ = run([hand(4, "P1", "AsKsQsJsTs")], state)
    assert open_round_id(state) == 4


def test_late_frames_for_a_settled_round_leave_the_open_round_alone() -> None:
    state, _ = run([*ROUND_812, RoundDealt(round_id=812, hands=3), RoundSettled(round_id=812)])
    state, _ = run([hand(813, "P1", "2c3d4h5s7c")], state)
    before = state
    state, outcomes = run([hand(812, "P2", "AsKsQsJsTs")], state)
    assert state == before
    assert outcomes == late_frame("HAND for P2 for round 812 arrived after the round was settled")


@pytest.mark.parametrize("round_id", [0, 1_000_000, -3])
def test_round_ids_out_of_range_are_flagged(round_id: int) -> None:
    state, outcomes = run([hand(round_id, "P1", "AsKsQsJsTs")])
    assert state == initial_state("CSP")
    [result] = flagged(outcomes)
    assert "round ids run from 1 to 999999" in (result.reason or "")


def test_closed_round_ids_are_remembered_boundedly() -> None:
    state = initial_state("CSP")
    for rid in range(1, CLOSED_MEMORY + 2):
        state, _ = run([hand(rid, "P1", "AsKsQsJsTs"), RoundVoided(round_id=rid)], state)
    assert len(state.closed) == CLOSED_MEMORY
    # round 1 is forgotten: a HAND for it opens a round; round 2 is still remembered
    assert run([hand(2, "P1", "AsKsQsJsTs")], state)[1] == late_frame(
        "HAND for P1 for round 2 arrived after the round was voided"
    )
    opened, outcomes = run([hand(1, "P1", "AsKsQsJsTs")], state)
    assert (open_round_id(opened), outcomes) == (1, [])


def test_state_is_a_plain_value_that_never_shows_a_card() -> None:
    a, _ = run(ROUND_812)
    b, _ = run(ROUND_812)
    assert a == b
    assert hash(a) == hash(b)
    assert "Qh" not in repr(a)
    assert "9c" not in repr(a)
    assert a != run(ROUND_812[:2])[0]


def test_only_poker_games_have_a_poker_round() -> None:
    with pytest.raises(ConfigError, match="no poker round for game 'BJ'"):
        initial_state("BJ")


# ---------------------------------------------------------------------------------------
# Every game, and replay over arbitrary frames


def dealt_round(game: PokerGame, round_id: int, players: int) -> list[HandDealt]:
    layout = LAYOUTS[game]
    deck = iter(DECK[::-1])
    sizes: list[tuple[Position, int]] = [
        (POSITIONS[i], layout.player_cards) for i in range(players)
    ]
    if layout.dealer_cards is not None:
        sizes.append(("DL", layout.dealer_cards))
    if layout.community_cards:
        sizes.append(("CM", layout.community_cards))
    return [
        HandDealt(round_id=round_id, position=p, cards=tuple(next(deck).code for _ in range(n)))
        for p, n in sizes
    ]


@pytest.mark.parametrize("game", POKER_GAMES)
def test_a_good_round_of_every_game(game: PokerGame) -> None:
    hands_dealt = dealt_round(game, 31, 2)
    hands = 2 + (LAYOUTS[game].dealer_cards is not None)
    _, outcomes = run(
        [*hands_dealt, RoundDealt(round_id=31, hands=hands), RoundSettled(round_id=31)],
        game=game,
    )
    payouts, result = outcomes
    assert payouts == CoverAllPayouts(
        round_id=31, game=game, hands=hands, paytable=cover_all_paytable(game, hands)
    )
    expected = resolve_round(game, hands, {h.position: h.cards for h in hands_dealt})
    assert isinstance(expected, Win | NoQualifier)
    assert isinstance(result, CoverAllResult)
    assert result.highest is not None
    assert result.highest.position == expected.position
    assert result.highest.cards == expected.cards
    assert result.pays == (expected.odds if isinstance(expected, Win) else None)


FACTS = st.one_of(
    st.builds(
        HandDealt,
        round_id=st.integers(1, 3),
        position=st.sampled_from(POSITIONS),
        cards=st.lists(st.sampled_from([c.code for c in DECK[:12]]), max_size=7).map(tuple),
    ),
    st.builds(RoundDealt, round_id=st.integers(1, 3), hands=st.integers(0, 9)),
    st.builds(RoundSettled, round_id=st.integers(1, 3)),
    st.builds(RoundVoided, round_id=st.integers(1, 3)),
)


@settings(max_examples=150)
@given(st.sampled_from(POKER_GAMES), st.lists(FACTS, max_size=25))
def test_any_frames_replay_exactly_and_never_leak_a_card(
    game: PokerGame, facts: list[PokerFact]
) -> None:
    first = run(facts, game=game)
    assert run(facts, game=game) == first  # replay rebuilds the same state and outcomes
    for outcome in first[1]:
        if isinstance(outcome, CoverAllResult) and outcome.outcome == "flagged":
            assert outcome.highest is None
            assert outcome.pays is None
            assert not CARD_CODE.search(outcome.reason or ""), outcome.reason
        if isinstance(outcome, CoverAllResult) and outcome.outcome == "win":
            assert outcome.pays is not None
            assert outcome.highest is not None


def test_a_closed_round_is_known_until_the_shuffler_says_hello() -> None:
    state, _ = run([*ROUND_812, RoundDealt(round_id=812, hands=3), RoundSettled(round_id=812)])
    assert is_closed(state, 812)
    assert not is_closed(state, 813)
    state = forget_closed(state)  # shuffler-icd.md: the round counter may start again
    assert not is_closed(state, 812)
    opened, outcomes = run([hand(812, "P1", "AsKsQsJsTs")], state)
    assert (open_round_id(opened), outcomes) == (812, [])


def test_the_shuffler_s_last_round_id_opens_a_round() -> None:
    state, outcomes = run([hand(999_999, "P1", "AsKsQsJsTs")])
    assert (open_round_id(state), outcomes) == (999_999, [])


@pytest.mark.parametrize(
    ("facts", "hands", "reason"),
    [
        (
            [*ROUND_812, RoundDealt(round_id=812, hands=3), RoundDealt(round_id=812, hands=3)],
            3,
            "ROUND came twice for one round",
        ),
        (
            [*ROUND_812, RoundSettled(round_id=812)],
            None,
            "SETTLE came before ROUND: the deal was never completed",
        ),
    ],
)
def test_frames_out_of_order_flag_the_round_with_its_hands(
    facts: list[PokerFact], hands: int | None, reason: str
) -> None:
    _, outcomes = run(facts)
    [result] = flagged(outcomes)
    assert (result.round_id, result.hands, result.reason) == (812, hands, reason)


def test_a_stray_settle_flags_the_open_round_with_the_hands_it_had() -> None:
    _, outcomes = run([*ROUND_812, RoundDealt(round_id=812, hands=3), RoundSettled(round_id=900)])
    [result] = flagged(outcomes)
    assert (result.round_id, result.hands) == (812, 3)
