"""The table machine: the checks that span games (mode, deck, status, link, stray frames),
and that no device fact of any kind, in any order, can make the rules raise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules import table
from rules.errors import ConfigError, DecisionError
from rules.events import (
    AlarmAcknowledged,
    AlarmCleared,
    AlarmRaised,
    BadFrameSeen,
    BustBonusResult,
    CardDrawn,
    CoverAllPayouts,
    CoverAllResult,
    CrapsBetSettled,
    DealerDone,
    DeckChecked,
    DeviceConnected,
    DeviceDisconnected,
    DeviceFact,
    DeviceHello,
    DeviceStatus,
    DiceRolled,
    HandDealt,
    ModeReported,
    Outcome,
    RollDecided,
    RollRecorded,
    RoundDealt,
    RoundSettled,
    RoundVoided,
)
from tests.helpers.table_facts import CARD_CODES, ROUND_IDS, SOME_POSITIONS, TABLE_FACTS

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def run(state: table.TableState, *events: DeviceFact) -> tuple[table.TableState, list[Outcome]]:
    """Apply events one second apart; all outcomes in order."""
    out: list[Outcome] = []
    for i, event in enumerate(events):
        state, outcomes = table.apply(state, event, at=T0 + timedelta(seconds=i + 1))
        out.extend(outcomes)
    return state, out


def codes(state: table.TableState) -> set[str]:
    return {a.code for a in table.alarms(state)}


def ready_poker(game: str = "CSP") -> table.TableState:
    state = table.initial_state(game, at=T0)
    state, _ = run(state, DeviceConnected(device="shuffler"), ModeReported(game=game))  # type: ignore[arg-type]
    return state


# The CSP round of shuffler-icd.md's example: spots 1 and 3 and the dealer; P3's flush wins.
ROUND_812 = (
    HandDealt(round_id=812, position="P1", cards=("9c", "9d", "5h", "5s", "2c")),
    HandDealt(round_id=812, position="P3", cards=("Qh", "Jh", "Th", "8h", "7h")),
    HandDealt(round_id=812, position="DL", cards=("Ac", "Kd", "4s", "3h", "3c")),
    RoundDealt(round_id=812, hands=3),
    RoundSettled(round_id=812),
)


def test_a_new_card_table_is_alarmed_until_connected_and_in_the_right_mode() -> None:
    state = table.initial_state("UTH", at=T0)
    assert codes(state) == {"DISCONNECTED", "MODE_MISMATCH"}
    state, out = run(state, DeviceConnected(device="shuffler"))
    assert codes(state) == {"MODE_MISMATCH"}
    assert AlarmCleared(code="DISCONNECTED", device="shuffler") in out
    state, out = run(state, ModeReported(game="UTH"))
    assert codes(state) == set()
    assert state.device("shuffler").mode == "UTH"


def test_a_craps_table_has_no_shuffler_and_no_mode_alarm() -> None:
    state = table.initial_state("CRAPS", at=T0)
    assert codes(state) == {"DISCONNECTED"}
    assert [d for d, _ in state.devices] == ["dice_reader"]


def test_unknown_game_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown table game 'BACCARAT'"):
        table.initial_state("BACCARAT", at=T0)


def test_the_spec_round_pays_the_flush_when_the_mode_is_right() -> None:
    _, out = run(ready_poker("CSP"), *ROUND_812)
    payouts = [o for o in out if isinstance(o, CoverAllPayouts)]
    results = [o for o in out if isinstance(o, CoverAllResult)]
    assert len(payouts) == 1
    assert payouts[0].hands == 3
    # shuffler-icd.md: the CSP column for 3 total hands (Royal Flush 300, Straight Flush 125...)
    assert [(r.hand, r.pays) for r in payouts[0].paytable][:2] == [
        ("Royal Flush", Decimal(300)),
        ("Straight Flush", Decimal(125)),
    ]
    assert len(results) == 1
    assert results[0].outcome == "win"
    assert results[0].highest is not None
    assert results[0].highest.position == "P3"
    assert results[0].highest.hand == "Flush"
    assert results[0].pays == Decimal(20)


def test_wrong_mode_publishes_no_payout_and_flags_the_round_without_cards() -> None:
    state = ready_poker("CSP")
    state, out = run(state, ModeReported(game="TCP"))
    assert "MODE_MISMATCH" in codes(state)
    alarm = next(o for o in out if isinstance(o, AlarmRaised))
    assert "TCP" in alarm.message
    assert "CSP" in alarm.message
    state, out = run(state, *ROUND_812)
    assert not [o for o in out if isinstance(o, CoverAllPayouts)]
    results = [o for o in out if isinstance(o, CoverAllResult)]
    assert [r.outcome for r in results] == ["flagged"]
    assert results[0].highest is None
    assert results[0].pays is None
    assert "TCP" in str(results[0].reason)
    # Back in the right mode, the next round pays again.
    state, out = run(state, ModeReported(game="CSP"))
    assert "MODE_MISMATCH" not in codes(state)
    again = tuple(
        HandDealt(round_id=813, position=f.position, cards=f.cards)
        if isinstance(f, HandDealt)
        else type(f)(round_id=813, **({"hands": 3} if isinstance(f, RoundDealt) else {}))
        for f in ROUND_812
    )
    _, out = run(state, *again)
    assert [o.outcome for o in out if isinstance(o, CoverAllResult)] == ["win"]


def test_mode_changed_mid_round_flags_the_open_round_at_once() -> None:
    state, _ = run(ready_poker("CSP"), *ROUND_812[:2])
    state, out = run(state, ModeReported(game="FCP"))
    flagged = [o for o in out if isinstance(o, CoverAllResult)]
    assert [(r.round_id, r.outcome) for r in flagged] == [(812, "flagged")]
    # The rest of the round pays nothing, even after the mode is put back.
    state, _ = run(state, ModeReported(game="CSP"))
    _, out = run(state, *ROUND_812[2:])
    assert not [o for o in out if isinstance(o, CoverAllPayouts | CoverAllResult)]


def test_a_failed_deck_check_flags_rounds_until_ok() -> None:
    state, out = run(ready_poker("CSP"), DeckChecked(result="DUPLICATE"))
    assert "DECK_FAULT" in codes(state)
    state, out = run(state, *ROUND_812)
    assert [o.outcome for o in out if isinstance(o, CoverAllResult)] == ["flagged"]
    state, out = run(state, DeckChecked(result="OK"))
    assert "DECK_FAULT" not in codes(state)
    assert AlarmCleared(code="DECK_FAULT", device="shuffler") in out


def test_status_tilts_stay_until_ready_which_clears_them_all() -> None:
    state = ready_poker()
    state, _ = run(
        state,
        DeviceStatus(device="shuffler", code="JAM", text="card jam at the gate"),
        DeviceStatus(device="shuffler", code="DOOR_OPEN", text=""),
    )
    assert codes(state) == {"DEVICE_FAULT_JAM", "DEVICE_FAULT_DOOR_OPEN"}
    assert state.device("shuffler").status == "JAM"
    jam = next(a for a in table.alarms(state) if a.code == "DEVICE_FAULT_JAM")
    assert "card jam at the gate" in jam.message
    assert jam.since == T0 + timedelta(seconds=1)
    state, out = run(state, DeviceStatus(device="shuffler", code="READY", text=""))
    assert codes(state) == set()
    assert sum(isinstance(o, AlarmCleared) for o in out) == 2
    assert state.device("shuffler").status == "READY"


def test_disconnect_alarm_names_the_reason() -> None:
    state, out = run(ready_poker(), DeviceDisconnected(device="shuffler", reason="port closed"))
    assert "DISCONNECTED" in codes(state)
    alarm = next(o for o in out if isinstance(o, AlarmRaised))
    assert "port closed" in alarm.message
    assert not state.device("shuffler").connected


def test_a_frame_for_another_game_changes_nothing_but_raises_an_alarm() -> None:
    state = ready_poker()
    # A CARD (blackjack only) from the shuffler of a poker table.
    after, out = run(state, CardDrawn(round_id=9, position="DL", card="As"))
    assert "UNEXPECTED_FRAME" in codes(after)
    assert after.poker == state.poker
    assert not [o for o in out if not isinstance(o, AlarmRaised)]
    after, _ = run(after, DeviceHello(device="shuffler", model="IDEAL", firmware="2", serial="SN1"))
    assert "UNEXPECTED_FRAME" not in codes(after)


def test_a_decision_at_a_card_table_is_refused() -> None:
    with pytest.raises(DecisionError, match="does not play craps"):
        table.apply(
            ready_poker(),
            RollDecided(roll_id=1, valid=True, operator="stick", at=T0),
            at=T0,
        )


# -- alarm_ack (mqtt-api.md 1.3) ------------------------------------------------------------


def test_an_acknowledged_alarm_stays_until_it_clears_and_changes_no_payout() -> None:
    # A shuffler in the wrong mode: MODE_MISMATCH stops payouts; the pit acknowledges it.
    state, _ = run(table.initial_state("CSP", at=T0), DeviceConnected(device="shuffler"))
    state, _ = run(state, ModeReported(game="TCP"))
    at = T0 + timedelta(minutes=5)
    acked, out = table.apply(
        state, AlarmAcknowledged(code="MODE_MISMATCH", operator="pat", at=at), at=at
    )
    assert out == ()
    alarm = next(a for a in table.alarms(acked) if a.code == "MODE_MISMATCH")
    assert (alarm.acknowledged_by, alarm.acknowledged_at) == ("pat", at)
    # Nothing else changed: the same alarm, the same games' states.
    assert [(a.code, a.message, a.since) for a in table.alarms(acked)] == [
        (a.code, a.message, a.since) for a in table.alarms(state)
    ]
    assert (acked.poker, acked.devices) == (state.poker, state.devices)
    # Still no payout while it is active: the round is flagged as without the ack.
    _, unacked_out = run(state, *ROUND_812)
    _, acked_out = run(acked, *ROUND_812)
    assert acked_out == unacked_out
    result = next(o for o in acked_out if isinstance(o, CoverAllResult))
    assert result.outcome == "flagged"
    # The right mode clears it, acknowledged or not.
    cleared, _ = run(acked, ModeReported(game="CSP"))
    assert "MODE_MISMATCH" not in codes(cleared)


def test_an_alarm_acknowledged_keeps_its_acknowledgement_when_its_message_changes() -> None:
    state, _ = run(ready_poker(), DeviceStatus(device="shuffler", code="JAM", text="card jam"))
    at = T0 + timedelta(minutes=1)
    state, _ = table.apply(
        state, AlarmAcknowledged(code="DEVICE_FAULT_JAM", operator="pat", at=at), at=at
    )
    state, _ = run(state, DeviceStatus(device="shuffler", code="JAM", text="card jam, tray 2"))
    alarm = next(a for a in table.alarms(state) if a.code == "DEVICE_FAULT_JAM")
    assert alarm.message.endswith("tray 2")
    assert alarm.acknowledged_by == "pat"
    state, _ = run(state, DeviceStatus(device="shuffler", code="READY", text=""))
    assert not table.alarms(state)
    # Raised again later: a new alarm, not acknowledged.
    state, _ = run(state, DeviceStatus(device="shuffler", code="JAM", text="card jam"))
    assert next(a for a in table.alarms(state)).acknowledged_by is None


def test_acknowledging_an_alarm_that_is_not_active_or_acknowledged_is_refused() -> None:
    state = ready_poker()
    with pytest.raises(DecisionError, match="no alarm MODE_MISMATCH is active"):
        table.apply(state, AlarmAcknowledged(code="MODE_MISMATCH", operator="pat", at=T0), at=T0)
    state, _ = run(state, ModeReported(game="TCP"))
    ack = AlarmAcknowledged(code="MODE_MISMATCH", operator="pat", at=T0)
    state, _ = table.apply(state, ack, at=T0)
    again = AlarmAcknowledged(code="MODE_MISMATCH", operator="sam", at=T0)
    with pytest.raises(DecisionError, match="acknowledged already by pat at 12:00:00 UTC"):
        table.apply(state, again, at=T0)


def test_craps_and_blackjack_are_routed_to_their_machines() -> None:
    craps_state = table.initial_state("CRAPS", at=T0, craps_paytable=2)
    rolls = [DiceRolled(roll_id=i + 1, dice=d) for i, d in enumerate([(1, 1), (1, 2), (2, 2)])]
    rolls += [DiceRolled(roll_id=4, dice=(2, 3)), DiceRolled(roll_id=5, dice=(3, 3))]
    _, out = run(craps_state, DeviceConnected(device="dice_reader"), *rolls)
    wins = [o for o in out if isinstance(o, CrapsBetSettled)]
    # Pay Table 2: All Small pays 30 to 1 (sd-bonus-craps.txt).
    assert [(w.bet, w.outcome, w.pays) for w in wins] == [("all_small", "win", Decimal(30))]

    bj = table.initial_state("BJ", at=T0, decks=6, dealer_hits_soft_17=False)
    bj, _ = run(bj, DeviceConnected(device="shuffler"), ModeReported(game="BJ"))
    cards = [("P1", "Th"), ("DL", "6s"), ("P1", "9h"), ("DL", "Ts"), ("DL", "8s")]
    _, out = run(
        bj,
        *(CardDrawn(round_id=5, position=p, card=c) for p, c in cards),  # type: ignore[arg-type]
        DealerDone(round_id=5),
    )
    result = next(o for o in out if isinstance(o, BustBonusResult))
    # A suited bust with a 6 up pays 3 to 1 (sd-bust-bonus.txt).
    assert (result.outcome, result.up_card, result.suited, result.pays) == (
        "win",
        "6s",
        True,
        Decimal(3),
    )


# ---------------------------------------------------------------------------------------
# Late frames: a published result stands (shuffler-icd.md "What the host must check")

SHUFFLER_HELLO = DeviceHello(device="shuffler", model="IDEAL", firmware="2", serial="SN1")
READER_HELLO = DeviceHello(device="dice_reader", model="DICE", firmware="1", serial="DR1")


def results(out: list[Outcome]) -> list[CoverAllResult | BustBonusResult]:
    return [o for o in out if isinstance(o, CoverAllResult | BustBonusResult)]


def late_alarm(state: table.TableState, device: str) -> table.Alarm:
    [alarm] = [a for a in table.alarms(state) if a.code == "LATE_FRAME"]
    assert alarm.device == device
    return alarm


def round_813() -> tuple[DeviceFact, ...]:
    return tuple(
        HandDealt(round_id=813, position=f.position, cards=f.cards)
        if isinstance(f, HandDealt)
        else type(f)(round_id=813, **({"hands": 3} if isinstance(f, RoundDealt) else {}))
        for f in ROUND_812
    )


@pytest.mark.parametrize(
    "late",
    [
        RoundSettled(round_id=812),
        RoundVoided(round_id=812),
        RoundDealt(round_id=812, hands=3),
        HandDealt(round_id=812, position="P2", cards=("As", "Ks", "Qs", "Js", "Ts")),
    ],
)
def test_a_late_frame_for_a_paid_round_raises_an_alarm_and_publishes_no_second_result(
    late: DeviceFact,
) -> None:
    state, out = run(ready_poker("CSP"), *ROUND_812)
    assert [r.outcome for r in results(out)] == ["win"]
    after, out = run(state, late)
    assert results(out) == []  # the win stands: no "flagged" for round 812
    assert not [o for o in out if isinstance(o, CoverAllPayouts)]
    alarm = late_alarm(after, "shuffler")
    assert "for round 812 arrived after the round was settled" in alarm.message
    assert "its result stands" in alarm.message
    assert alarm.since == T0 + timedelta(seconds=1)
    assert out == [AlarmRaised(code="LATE_FRAME", device="shuffler", message=alarm.message)]
    assert after.poker == state.poker
    # The next round settled in order clears it; the alarm never flagged anything.
    cleared, out = run(after, *round_813())
    assert [r.outcome for r in results(out)] == ["win"]
    assert "LATE_FRAME" not in codes(cleared)
    assert out[-1] == AlarmCleared(code="LATE_FRAME", device="shuffler")


def test_a_late_frame_while_the_mode_is_wrong_still_flags_no_settled_round() -> None:
    state, _ = run(ready_poker("CSP"), *ROUND_812)
    state, _ = run(state, ModeReported(game="TCP"))  # no round is open: nothing to flag
    after, out = run(state, RoundSettled(round_id=812))
    assert results(out) == []
    assert {"MODE_MISMATCH", "LATE_FRAME"} <= codes(after)


def test_a_second_late_frame_updates_the_alarm_and_hello_clears_it_and_the_memory() -> None:
    state, _ = run(ready_poker("CSP"), *ROUND_812)
    state, _ = run(state, RoundSettled(round_id=812))
    first = late_alarm(state, "shuffler")
    state, out = run(state, RoundVoided(round_id=812))
    second = late_alarm(state, "shuffler")
    assert "VOID for round 812" in second.message
    assert second.since == first.since  # one alarm, its message updated
    assert out == [AlarmRaised(code="LATE_FRAME", device="shuffler", message=second.message)]
    state, out = run(state, SHUFFLER_HELLO)
    assert "LATE_FRAME" not in codes(state)
    assert AlarmCleared(code="LATE_FRAME", device="shuffler") in out
    # The shuffler restarted: its round counter may begin again, so 812 is a new round.
    _, out = run(state, *ROUND_812)
    assert [r.outcome for r in results(out)] == ["win"]


def test_a_late_end_for_an_ended_bust_bonus_round_keeps_its_result() -> None:
    bj = table.initial_state("BJ", at=T0, decks=6, dealer_hits_soft_17=False)
    bj, _ = run(bj, DeviceConnected(device="shuffler"), ModeReported(game="BJ"))
    cards = [("DL", "6s"), ("DL", "Ts"), ("DL", "8s")]
    dealt = tuple(CardDrawn(round_id=5, position=p, card=c) for p, c in cards)  # type: ignore[arg-type]
    state, out = run(bj, *dealt, DealerDone(round_id=5))
    assert [r.outcome for r in results(out)] == ["win"]
    for late in (DealerDone(round_id=5), RoundVoided(round_id=5), dealt[0]):
        state, out = run(state, late)
        assert results(out) == []
    assert "CARD at DL for round 5 arrived after the round ended" in (
        late_alarm(state, "shuffler").message
    )
    assert "6s" not in late_alarm(state, "shuffler").message  # no card in an alarm
    next_round = tuple(CardDrawn(round_id=6, position="DL", card=c) for c in ("Ts", "7s"))
    state, out = run(state, *next_round, DealerDone(round_id=6))
    assert [r.outcome for r in results(out)] == ["lose"]
    assert "LATE_FRAME" not in codes(state)


def test_a_late_copy_of_a_settled_roll_pays_nothing_again() -> None:
    craps_state = table.initial_state("CRAPS", at=T0, craps_paytable=1)
    rolls = [DiceRolled(roll_id=i + 1, dice=d) for i, d in enumerate([(1, 1), (1, 2), (2, 2)])]
    rolls += [DiceRolled(roll_id=4, dice=(2, 3)), DiceRolled(roll_id=5, dice=(3, 3))]
    state, out = run(craps_state, DeviceConnected(device="dice_reader"), *rolls)
    assert [o.bet for o in out if isinstance(o, CrapsBetSettled)] == ["all_small"]
    state, _ = run(state, DiceRolled(roll_id=6, dice=(4, 4)))
    after, out = run(state, rolls[-1])  # roll 5, the one that paid, again
    assert out == [
        AlarmRaised(
            code="LATE_FRAME",
            device="dice_reader",
            message=(
                "ROLL for roll 5 arrived again after later rolls: that roll is recorded "
                "already and its results stand; the frame is kept in the journal for review"
            ),
        )
    ]
    assert after.craps == state.craps
    assert "LATE_FRAME" in codes(after)
    cleared, out = run(after, DiceRolled(roll_id=7, dice=(5, 5)))
    assert "LATE_FRAME" not in codes(cleared)
    assert AlarmCleared(code="LATE_FRAME", device="dice_reader") in out
    # After the reader's HELLO (a power-up may restart its counter) the same frame is a roll.
    restarted, _ = run(after, READER_HELLO)
    assert "LATE_FRAME" not in codes(restarted)
    _, out = run(restarted, rolls[-1])
    assert [o.total for o in out if isinstance(o, RollRecorded)] == [6]


# ---------------------------------------------------------------------------------------
# No device fact can crash the table: whatever the devices say, in any order.


@pytest.mark.parametrize("game", ["CSP", "FCP", "LIR", "MSP", "TCP", "UTH", "BJ", "CRAPS"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(facts=st.lists(TABLE_FACTS, max_size=40))
def test_no_sequence_of_device_facts_makes_the_table_raise(
    game: str, facts: list[DeviceFact]
) -> None:
    state = table.initial_state(game, at=T0)
    replayed = state
    state, _ = run(state, *facts)
    # Replaying the same facts at the same times gives the same table: replay is exact.
    replayed, _ = run(replayed, *facts)
    assert replayed == state
    # Card secrecy: a flagged result never carries a card.
    _, out = run(table.initial_state(game, at=T0), *facts)
    for o in out:
        if isinstance(o, CoverAllResult) and o.outcome == "flagged":
            assert o.highest is None
    assert_results_stand(out)


def assert_results_stand(out: list[Outcome]) -> None:
    """Once a round has paid, lost or been voided, nothing else is published for it
    (shuffler-icd.md "What the host must check"; no HELLO here, so no round id restarts)."""
    final: set[int] = set()
    for o in out:
        if isinstance(o, CoverAllResult | BustBonusResult | CoverAllPayouts):
            assert o.round_id not in final, o
            if not isinstance(o, CoverAllPayouts) and o.outcome != "flagged":
                final.add(o.round_id)


_round_facts: st.SearchStrategy[DeviceFact] = st.one_of(
    st.builds(
        HandDealt,
        round_id=ROUND_IDS,
        position=SOME_POSITIONS,
        cards=st.lists(st.sampled_from(CARD_CODES), min_size=2, max_size=5, unique=True).map(tuple),
    ),
    st.builds(RoundDealt, round_id=ROUND_IDS, hands=st.integers(1, 3)),
    st.builds(RoundSettled, round_id=ROUND_IDS),
    st.builds(RoundVoided, round_id=ROUND_IDS),
    st.builds(
        CardDrawn,
        round_id=ROUND_IDS,
        position=st.sampled_from(["P1", "DL"]),
        card=st.sampled_from(CARD_CODES),
    ),
    st.builds(DealerDone, round_id=ROUND_IDS),
    st.builds(DeckChecked, result=st.sampled_from(["OK", "OK", "OK", "SHORT"])),
)


@pytest.mark.heavy
@pytest.mark.parametrize("game", ["CSP", "LIR", "BJ"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(facts=st.lists(_round_facts, max_size=30))
def test_at_a_ready_table_a_published_result_stands_whatever_comes_late(
    game: str, facts: list[DeviceFact]
) -> None:
    _, out = run(ready_poker(game), *facts)
    assert_results_stand(out)


# ---------------------------------------------------------------------------------------
# What an operator reads: each alarm and refusal in full, for the device that caused it


def bj_table() -> table.TableState:
    state = table.initial_state("BJ", at=T0)
    state, _ = run(state, DeviceConnected(device="shuffler"), ModeReported(game="BJ"))
    return state


def test_a_new_table_defaults_to_pay_table_1_six_decks_and_dealer_stands_on_soft_17() -> None:
    craps_state = table.initial_state("CRAPS", at=T0).craps
    assert craps_state is not None
    assert craps_state.paytable == 1
    bust = table.initial_state("BJ", at=T0).bust
    assert bust is not None
    assert (bust.decks, bust.hits_soft_17) == (6, False)


def test_an_unknown_game_is_refused_with_the_games_there_are() -> None:
    with pytest.raises(ConfigError) as refused:
        table.initial_state("BACCARAT", at=T0)
    assert str(refused.value) == (
        "unknown table game 'BACCARAT': expected one of CSP, FCP, LIR, MSP, TCP, UTH, BJ, CRAPS"
    )


def test_the_state_of_a_device_the_table_does_not_use_is_a_key_error_naming_it() -> None:
    with pytest.raises(KeyError) as missing:
        table.initial_state("CRAPS", at=T0).device("shuffler")
    assert missing.value.args == ("shuffler",)


def test_connect_and_disconnect_are_kept_and_alarmed_for_each_device_by_name() -> None:
    state, out = run(ready_poker(), DeviceDisconnected(device="shuffler", reason=""))
    assert out == [
        AlarmRaised(code="DISCONNECTED", device="shuffler", message="the shuffler is not connected")
    ]
    state, out = run(state, DeviceConnected(device="shuffler"))
    assert state.device("shuffler").connected
    assert out == [AlarmCleared(code="DISCONNECTED", device="shuffler")]
    dice = table.initial_state("CRAPS", at=T0)
    [alarm] = table.alarms(dice)
    assert (alarm.code, alarm.device, alarm.message) == (
        "DISCONNECTED",
        "dice_reader",
        "the dice reader is not connected",
    )
    dice, out = run(dice, DeviceConnected(device="dice_reader"))
    assert dice.device("dice_reader").connected
    _, out = run(dice, DeviceDisconnected(device="dice_reader", reason="read error"))
    assert out == [
        AlarmRaised(
            code="DISCONNECTED",
            device="dice_reader",
            message="the dice reader is not connected: read error",
        )
    ]


def test_a_status_message_shows_the_code_and_the_text_only_when_there_is_one() -> None:
    _, out = run(
        ready_poker(),
        DeviceStatus(device="shuffler", code="DOOR_OPEN", text=""),
        DeviceStatus(device="shuffler", code="JAM", text="card jam at the gate"),
    )
    assert out == [
        AlarmRaised(
            code="DEVICE_FAULT_DOOR_OPEN",
            device="shuffler",
            message="the shuffler reports DOOR_OPEN",
        ),
        AlarmRaised(
            code="DEVICE_FAULT_JAM",
            device="shuffler",
            message="the shuffler reports JAM: card jam at the gate",
        ),
    ]


def test_a_status_text_of_160_characters_is_kept_whole_and_a_longer_one_cut_to_160() -> None:
    state = ready_poker()
    _, out = run(state, DeviceStatus(device="shuffler", code="JAM", text="x" * 160))
    assert out == [
        AlarmRaised(
            code="DEVICE_FAULT_JAM",
            device="shuffler",
            message="the shuffler reports JAM: " + "x" * 160,
        )
    ]
    _, out = run(state, DeviceStatus(device="shuffler", code="JAM", text="y" * 161))
    assert out == [
        AlarmRaised(
            code="DEVICE_FAULT_JAM",
            device="shuffler",
            message="the shuffler reports JAM: " + "y" * 157 + "...",
        )
    ]


def test_updating_one_alarm_leaves_the_others_messages_alone() -> None:
    state, _ = run(
        ready_poker(),
        DeviceStatus(device="shuffler", code="JAM", text="first"),
        DeviceStatus(device="shuffler", code="DOOR_OPEN", text="door"),
        DeviceStatus(device="shuffler", code="JAM", text="second"),
    )
    messages = {a.code: a.message for a in table.alarms(state)}
    assert messages == {
        "DEVICE_FAULT_JAM": "the shuffler reports JAM: second",
        "DEVICE_FAULT_DOOR_OPEN": "the shuffler reports DOOR_OPEN: door",
    }


@pytest.mark.parametrize(
    ("game", "event", "message"),
    [
        (
            "BJ",
            HandDealt(round_id=1, position="P1", cards=("As", "Ks", "Qs", "Js", "Ts")),
            "the shuffler sent HandDealt, which a BJ table does not use",
        ),
        (
            "BJ",
            RoundSettled(round_id=1),
            "the shuffler sent RoundSettled, which a BJ table does not use",
        ),
        (
            "CSP",
            CardDrawn(round_id=1, position="DL", card="As"),
            "the shuffler sent CardDrawn, which a CSP table does not use",
        ),
        (
            "CSP",
            DealerDone(round_id=1),
            "the shuffler sent DealerDone, which a CSP table does not use",
        ),
        (
            "CRAPS",
            RoundVoided(round_id=1),
            "the shuffler is not configured for a CRAPS table but sent RoundVoided",
        ),
        (
            "CSP",
            DiceRolled(roll_id=1, dice=(3, 4)),
            "the dice reader is not configured for a CSP table but sent DiceRolled",
        ),
        (
            "CSP",
            BadFrameSeen(device="dice_reader"),
            "the dice reader is not configured for a CSP table but sent a frame",
        ),
        (
            "CRAPS",
            DeviceConnected(device="shuffler"),
            "the shuffler is not configured for a CRAPS table but sent a frame",
        ),
        (
            "CRAPS",
            ModeReported(game="CSP"),
            "the shuffler is not configured for a CRAPS table but sent a frame",
        ),
    ],
)
def test_a_frame_the_table_cannot_use_is_named_in_its_alarm(
    game: str, event: DeviceFact, message: str
) -> None:
    state = table.initial_state(game, at=T0)
    device = "dice_reader" if "dice reader" in message else "shuffler"
    after, out = run(state, event)
    assert out == [AlarmRaised(code="UNEXPECTED_FRAME", device=device, message=message)]  # type: ignore[arg-type]
    assert (after.poker, after.bust, after.craps) == (state.poker, state.bust, state.craps)


def test_a_decision_at_a_card_table_is_refused_naming_its_roll() -> None:
    with pytest.raises(DecisionError) as refused:
        table.apply(
            ready_poker(), RollDecided(roll_id=7, valid=True, operator="stick", at=T0), at=T0
        )
    assert str(refused.value) == "this table does not play craps: no roll to decide"
    assert refused.value.roll_id == 7


def test_a_round_dealt_after_a_deck_check_passed_pays() -> None:
    state, _ = run(ready_poker("CSP"), DeckChecked(result="OK"))
    _, out = run(state, *ROUND_812)
    assert [r.outcome for r in results(out)] == ["win"]
    state, _ = run(ready_poker("CSP"), DeckChecked(result="SHORT"), DeckChecked(result="OK"))
    _, out = run(state, *ROUND_812)
    assert [r.outcome for r in results(out)] == ["win"]


def test_a_round_flagged_for_the_mode_says_which_mode_in_its_reason() -> None:
    state, _ = run(ready_poker("CSP"), *ROUND_812[:2])
    _, out = run(state, ModeReported(game="FCP"))
    [flagged] = results(out)
    assert flagged.reason == (
        "the shuffler is set to FCP but the table plays CSP: no payouts until it is set to CSP"
    )


def test_a_hello_is_kept_as_the_devices_identity() -> None:
    state, _ = run(ready_poker(), SHUFFLER_HELLO)
    assert state.device("shuffler").hello == SHUFFLER_HELLO
    state, _ = run(table.initial_state("CRAPS", at=T0), READER_HELLO)
    assert state.device("dice_reader").hello == READER_HELLO


def test_after_the_shoes_hello_a_bust_bonus_round_id_may_start_again() -> None:
    dealt = tuple(CardDrawn(round_id=5, position="DL", card=c) for c in ("6s", "Ts", "8s"))
    state, out = run(bj_table(), *dealt, DealerDone(round_id=5))
    assert [r.outcome for r in results(out)] == ["win"]
    state, _ = run(state, SHUFFLER_HELLO)
    # The shoe restarted: round 5 is a new round, dealt and paid, not a late frame.
    again = tuple(CardDrawn(round_id=5, position="DL", card=c) for c in ("6h", "Th", "9h"))
    state, out = run(state, *again, DealerDone(round_id=5))
    assert [r.outcome for r in results(out)] == ["win"]
    assert "LATE_FRAME" not in codes(state)
    assert "UNEXPECTED_FRAME" not in codes(state)


def test_a_bust_bonus_late_frame_clears_at_the_next_end_not_at_the_next_card() -> None:
    dealt = tuple(CardDrawn(round_id=5, position="DL", card=c) for c in ("6s", "Ts", "8s"))
    state, _ = run(bj_table(), *dealt, DealerDone(round_id=5), DealerDone(round_id=5))
    assert "LATE_FRAME" in codes(state)
    for card in ("Ts", "7s"):
        state, out = run(state, CardDrawn(round_id=6, position="DL", card=card))
        assert "LATE_FRAME" in codes(state), card
        assert not [o for o in out if isinstance(o, AlarmCleared)]
    state, out = run(state, DealerDone(round_id=6))
    assert AlarmCleared(code="LATE_FRAME", device="shuffler") in out
    assert "LATE_FRAME" not in codes(state)
