"""The integrity topic's payload, and the watch fed with messages as tables publish them."""

from __future__ import annotations

from datetime import date, time
from fractions import Fraction

import pytest

from contract.floor import IntegrityBody, integrity_topic
from contract.payloads import PayloadError
from records.integrity import Finding
from records.observe import GamingDay, TableWatch, up_card_row
from records.publish import integrity_payload, p_value_text
from tests.records.messages import cover_all_result, craps_roll


def test_p_values_are_rounded_up_never_down() -> None:
    assert p_value_text(3.01e-13) == "3.1e-13"
    assert p_value_text(3.0e-13) == "3.0e-13"
    assert p_value_text(9.99e-13) == "1.0e-12"
    assert p_value_text(0.5) == "5.0e-1"
    assert p_value_text(1.0) == "1"


def test_the_payload_says_what_is_off_in_a_sentence() -> None:
    finding = Finding(
        bet="cover_all",
        row="Royal Flush",
        window="all",
        side="high",
        observed=9,
        trials=4210,
        expected=0.6,
        expected_exact=Fraction(4210 * 41, 649740),
        p_value=2.04e-13,
        since="2026-12-01T14:00:00.000Z",
    )
    payload = integrity_payload("uth-7", [finding], "2026-12-01T15:00:00.000Z")
    IntegrityBody.model_validate(payload)
    (alarm,) = payload["alarms"]
    assert alarm["expected"] == "0.27"  # 4210 * 41 / 649740 = 0.2657
    assert alarm["p_value"] == "2.1e-13"
    assert alarm["message"] == (
        "cover_all, Royal Flush: 9 hits where 0.27 were expected in 4,210 rounds (all time)"
    )
    assert integrity_topic("uth-7") == "lammer-floor/integrity/uth-7"
    assert integrity_payload("uth-7", [], "2026-12-01T15:00:00.000Z")["alarms"] == []


def test_gaming_days_turn_at_the_configured_hour() -> None:
    day = GamingDay(starts=time(6, 0))
    assert day.of("2026-12-01T05:59:59.999Z") == date(2026, 11, 30)
    assert day.of("2026-12-01T06:00:00.000Z") == date(2026, 12, 1)


def test_up_card_rows() -> None:
    assert [up_card_row(c) for c in ("As", "Kh", "Td", "9c", "2s")] == ["Ace", "10", "10", "9", "2"]


def test_results_feed_the_table_watch_once_and_rolls_can_be_taken_back() -> None:
    poker = TableWatch("uth-1")
    assert poker.replay("cover_all/result", cover_all_result("uth-1", 5, 1, hands=3)) == [
        "cover_all"
    ]
    win = cover_all_result("uth-1", 6, 2, hands=3, hand="Full House", pays="8")
    poker.replay("cover_all/result", win)
    void = cover_all_result("uth-1", 7, 3, hands=3, outcome="void")
    assert poker.replay("cover_all/result", void) == []
    assert poker.watch is not None
    trials, hits = poker.watch.counts("cover_all", "all", date(2026, 12, 1))
    assert (dict(trials), dict(hits)) == ({3: 2}, {"Full House": 1})

    craps = TableWatch("craps-1")
    craps.replay("craps/roll", craps_roll("craps-1", 1, 1, 6, 6))
    craps.replay("craps/roll", craps_roll("craps-1", 1, 1, 6, 6))  # a redelivery
    invalid = {**craps_roll("craps-1", 2, 1, 6, 6), "status": "declared_invalid"}
    craps.replay("craps/roll", invalid)
    craps.replay("craps/roll", craps_roll("craps-1", 3, 2, 3, 4))
    assert craps.watch is not None
    trials, hits = craps.watch.counts("die faces", "all", date(2026, 12, 1))
    assert sum(trials.values()) == 2
    assert {k: v for k, v in hits.items() if v} == {"3": 1, "4": 1}


def test_a_stored_row_the_contract_refuses_is_not_counted() -> None:
    craps = TableWatch("craps-1")
    with pytest.raises(PayloadError, match="dice"):
        craps.replay("craps/roll", {**craps_roll("craps-1", 1, 1, 6, 6), "dice": [6, 9]})
    with pytest.raises(PayloadError) as refused:
        craps.replay("craps/roll", craps_roll("craps-2", 2, 1, 6, 6))
    assert refused.value.reason == "wrong_table"
    assert craps.watch is None
