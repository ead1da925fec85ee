"""Card tables end to end: a shuffler on a pty, the daemon, the displays' MQTT.

Every expected figure is written out from the regulation (seeds/sd-cover-all-bonus.txt,
seeds/sd-bust-bonus.txt) and the specs' examples, never taken from the code under test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration.conftest import MakeTable
from tests.integration.harness import card_pattern, device_records
from tests.integration.secrecy import assert_no_card_before

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class PokerCase:
    """One scripted Cover All round with its known hands and the regulation's answer."""

    game: str
    round_id: int
    hands: dict[str, str]  # position -> cards as on the wire
    n_hands: int
    paytable: list[tuple[str, str]]  # the seed's column for n_hands, highest first
    outcome: str
    highest: tuple[str, str] | None  # (hand, position)
    pays: str | None

    def script(self) -> str:
        lines = ["DECK,OK"]
        lines += [f"HAND,{self.round_id},{pos},{cards}" for pos, cards in self.hands.items()]
        lines += [f"ROUND,{self.round_id},{self.n_hands}", f"SETTLE,{self.round_id}"]
        return "\n".join(lines) + "\n"

    def cards(self) -> list[str]:
        return [c[i : i + 2] for c in self.hands.values() for i in range(0, len(c), 2)]

    def highest_cards(self) -> set[str]:
        """The highest position's own cards plus the community cards (all face up)."""
        assert self.highest is not None
        own = self.hands[self.highest[1]] + self.hands.get("CM", "")
        return {own[i : i + 2] for i in range(0, len(own), 2)}


CASES = [
    # shuffler-icd.md's example, frame for frame: the flush at P3, 20 to 1 for 3 hands.
    PokerCase(
        "CSP",
        812,
        {"P1": "9c9d5h5s2c", "P3": "QhJhTh8h7h", "DL": "AcKd4s3h3c"},
        3,
        [
            ("Royal Flush", "300"),
            ("Straight Flush", "125"),
            ("Four of a Kind", "40"),
            ("Full House", "30"),
            ("Flush", "20"),
            ("Straight", "17"),
            ("Three of a Kind", "6"),
        ],
        "win",
        ("Flush", "P3"),
        "20",
    ),
    # Four nines beat trips; the dealer's six cards make nothing. FCP, 3 total hands.
    PokerCase(
        "FCP",
        301,
        {"P1": "9c9d9h9s2c", "P2": "7c7d7h3s4d", "DL": "AsKdQh5c3c2d"},
        3,
        [
            ("Four Aces", "200"),
            ("Royal Flush", "100"),
            ("Four of A Kind (Other)", "80"),
            ("Straight Flush", "50"),
            ("Three of a Kind", "6"),
        ],
        "win",
        ("Four of A Kind (Other)", "P1"),
        "80",
    ),
    # A pair of kings is the best hand: below Three of a Kind, so nothing qualifies.
    PokerCase(
        "LIR",
        302,
        {"P1": "2c7d9h", "P2": "KcKs4d", "CM": "Qh3s"},
        2,
        [
            ("Royal Flush", "300"),
            ("Straight Flush", "100"),
            ("Four of a Kind", "80"),
            ("Full House", "40"),
            ("Flush", "30"),
            ("Straight", "15"),
            ("Three of a Kind", "11"),
        ],
        "no_qualifier",
        None,
        None,
    ),
    # P1's fives with the board's nines: a full house.
    PokerCase(
        "MSP",
        303,
        {"P1": "5c5d", "P2": "Kh2s", "CM": "5h9s9d"},
        2,
        [
            ("Royal Flush", "250"),
            ("Straight Flush", "100"),
            ("Four of a Kind", "80"),
            ("Full House", "50"),
            ("Flush", "30"),
            ("Straight", "20"),
            ("Three of a Kind", "10"),
        ],
        "win",
        ("Full House", "P1"),
        "50",
    ),
    # Five hands: a straight (above the flush in three-card poker) pays 1.5 to 1.
    PokerCase(
        "TCP",
        304,
        {"P1": "AcKd2s", "P2": "4c5d6h", "P3": "9c9d2h", "P4": "Jc8c3c", "DL": "QsQh7d"},
        5,
        [
            ("Royal Flush", "70"),
            ("Straight Flush", "25"),
            ("Three of a Kind", "20"),
            ("Straight", "1.5"),
        ],
        "win",
        ("Straight", "P2"),
        "1.5",
    ),
    # Pocket aces with two on the board: four of a kind, best five of seven.
    PokerCase(
        "UTH",
        305,
        {"P1": "AhAd", "DL": "KcQc", "CM": "AsAc7d2s9c"},
        2,
        [
            ("Royal Flush", "200"),
            ("Straight Flush", "100"),
            ("Four of a Kind", "70"),
            ("Full House", "12"),
        ],
        "win",
        ("Four of a Kind", "P1"),
        "70",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.game for c in CASES])
async def test_a_full_cover_all_round(make_table: MakeTable, case: PokerCase) -> None:
    table = make_table(case.game)
    await table.start(case.script())
    rec = table.recorder
    result = await table.wait_topic("cover_all/result", lambda b: b["round_id"] == case.round_id)

    # At ROUND (the green button): the column of the seed's pay table for that many hands.
    payouts = rec.bodies("cover_all/payouts")
    assert len(payouts) == 1
    assert payouts[0]["round_id"] == case.round_id
    assert payouts[0]["game"] == case.game
    assert payouts[0]["hands"] == case.n_hands
    assert [(r["hand"], r["pays"]) for r in payouts[0]["paytable"]] == case.paytable
    assert payouts[0]["seq"] < result["seq"]

    # info (lammer addition): the whole pay table, whose column for n hands is the same.
    info = rec.latest("info")
    assert info is not None
    assert info["game"] == case.game
    whole = info["paytables"]["cover_all"]
    column = whole["columns"].index(case.n_hands)
    assert [(r["hand"], r["pays"][column]) for r in whole["rows"]] == case.paytable

    # At SETTLE: the highest hand, where it is, its cards (face up now) and the odds.
    assert result["outcome"] == case.outcome
    assert result["hands"] == case.n_hands
    assert result["pays"] == case.pays
    if case.highest is None:
        assert result["highest"] is None
    else:
        highest = result["highest"]
        assert (highest["hand"], highest["position"]) == case.highest
        assert set(highest["cards"]) == case.highest_cards()
        if case.game == "CSP":  # shuffler-icd.md's example shows the hand as dealt
            assert highest["cards"] == ["Qh", "Jh", "Th", "8h", "7h"]

    if case.game == "CSP":  # the example's frames on the wire, sequence numbers and CRCs
        raw = [r["raw"] for r in table.journal() if r.get("link_seq", 0) >= 3]
        assert raw == [
            "$DECK,3,OK*EAA6\r\n",
            "$HAND,4,812,P1,9c9d5h5s2c*738E\r\n",
            "$HAND,5,812,P3,QhJhTh8h7h*5ABC\r\n",
            "$HAND,6,812,DL,AcKd4s3h3c*FD6E\r\n",
            "$ROUND,7,812,3*9E2E\r\n",
            "$SETTLE,8,812*3A15\r\n",
        ]

    # Nothing of the round shows a card before SETTLE, in MQTT or in the log.
    assert_no_card_before(table, case.cards(), fact="RoundSettled", round_id=case.round_id)
    assert not list((rec.latest("alarms") or {"alarms": []})["alarms"])
    rec.check_order()


async def test_a_voided_round_pays_nothing(make_table: MakeTable) -> None:
    table = make_table("CSP")
    await table.start("DECK,OK\nHAND,813,P1,AsKsQsJsTs\nHAND,813,DL,2c3d4h5s7c\nVOID,813\n")
    result = await table.wait_topic("cover_all/result")
    assert (result["round_id"], result["outcome"]) == (813, "void")
    assert result["highest"] is None
    assert result["pays"] is None
    assert table.recorder.bodies("cover_all/payouts") == []  # no ROUND: never dealt out
    assert not card_pattern(["As", "Ks", "Qs", "Js", "Ts"]).search(
        b"".join(m.payload for m in table.recorder.messages).decode()
    )


# ---------------------------------------------------------------------------------------
# Blackjack with Bust Bonus

BJ_SCRIPT = """\
CARD,41,P1,Qs
CARD,41,DL,6h
CARD,41,P1,5d
CARD,41,DL,Th
CARD,41,P1,4c
CARD,41,DL,9h
END,41
CARD,42,P1,Ts
CARD,42,DL,8c
CARD,42,P1,9s
CARD,42,DL,8d
CARD,42,DL,8h
END,42
CARD,43,P1,2c
CARD,43,DL,Kc
CARD,43,P1,Jd
CARD,43,DL,7d
END,43
"""


async def test_bust_bonus_rounds_keep_the_hole_card_secret(make_table: MakeTable) -> None:
    table = make_table("BJ")
    await table.start(BJ_SCRIPT)
    rec = table.recorder
    await table.wait_topic("bust_bonus/result", lambda b: b["round_id"] == 43)
    results = {b["round_id"]: b for b in rec.bodies("bust_bonus/result")}
    states = rec.bodies("bust_bonus/state")

    # Round 41 before END: betting open until the up card, then only the up card shown.
    end_41 = results[41]["seq"]
    before = [s for s in states if s["round_id"] == 41 and s["seq"] < end_41]
    assert before, "bust_bonus/state was not published during round 41"
    assert any(s["betting_open"] and s["up_card"] is None for s in before)
    for s in before:
        if s["up_card"] is not None:
            assert (s["up_card"], s["dealer_cards"], s["betting_open"]) == ("6h", ["6h"], False)
    assert_no_card_before(table, ["Qs", "5d", "Th", "4c", "9h"], fact="DealerDone", round_id=41)

    # 6, 10, 9: a suited bust (all hearts) at the up card 6's row: 3 to 1 (rule (12)).
    assert _result(results[41]) == ("win", "6h", ["6h", "Th", "9h"], 25, True, False, "3")
    # Three eights, off-suit: "Bust with three 8s" pays 25 to 1 instead of the 8's row.
    assert _result(results[42]) == ("win", "8c", ["8c", "8d", "8h"], 24, False, True, "25")
    # The dealer stands on 17: every Bust Bonus wager loses (rule (9)).
    assert _result(results[43]) == ("lose", "Kc", ["Kc", "7d"], 17, False, False, None)
    rec.check_order()


def _result(body: dict[str, Any]) -> tuple[Any, ...]:
    return (
        body["outcome"],
        body["up_card"],
        body["dealer_cards"],
        body["total"],
        body["suited"],
        body["three_eights"],
        body.get("pays"),
    )


# ---------------------------------------------------------------------------------------
# The checks of shuffler-icd.md: the mode, and flagged rounds


async def test_mode_mismatch_alarms_withholds_payouts_and_flags_the_round(
    make_table: MakeTable,
) -> None:
    table = make_table("CSP")
    # The shuffler is set to Ultimate Texas Hold'em at a Caribbean Stud table.
    await table.start(
        "DECK,OK\nHAND,5,P1,AsKsQsJsTs\nHAND,5,DL,2c3d4h5s7c\nROUND,5,2\nSETTLE,5\n", mode="UTH"
    )
    rec = table.recorder
    flagged = await table.wait_topic("cover_all/result", lambda b: b["round_id"] == 5)
    alarms = rec.latest("alarms")
    assert alarms is not None
    mismatch = [a for a in alarms["alarms"] if a["code"] == "MODE_MISMATCH"]
    assert len(mismatch) == 1
    assert mismatch[0]["device"] == "shuffler"
    assert "UTH" in mismatch[0]["message"]
    assert "CSP" in mismatch[0]["message"]
    state = rec.latest("state")
    assert state is not None
    assert state["devices"]["shuffler"]["mode"] == "UTH"
    assert [a["code"] for a in state["alarms"]] == ["MODE_MISMATCH"]
    # Cover All Bonus rule (1): no payouts while the i-Deal is set to another game; the
    # round is flagged, without cards, and nothing else of it is published.
    assert rec.bodies("cover_all/payouts") == []
    assert flagged["outcome"] == "flagged"
    assert flagged["highest"] is None
    assert "UTH" in flagged["reason"]
    assert len(rec.bodies("cover_all/result")) == 1

    # The dealer sets the shuffler to CSP: the alarm clears and the next round pays.
    mark = rec.mark()
    await table.start_sim(
        "MODE,CSP\nDECK,OK\nHAND,6,P1,AsKsQsJsTs\nHAND,6,DL,2c3d4h5s7c\nROUND,6,2\nSETTLE,6\n",
        mode="UTH",
    )
    result = await table.wait_topic("cover_all/result", lambda b: b["round_id"] == 6)
    assert (result["outcome"], result["highest"]["hand"], result["pays"]) == (
        "win",
        "Royal Flush",
        "500",
    )
    cleared = [a for a in rec.bodies("alarms", mark) if a["seq"] < result["seq"]]
    assert cleared[-1]["alarms"] == []
    state = rec.latest("state")
    assert state is not None
    assert state["devices"]["shuffler"]["mode"] == "CSP"
    assert [p["round_id"] for p in rec.bodies("cover_all/payouts")] == [6]


FLAGGED_SCRIPT = """\
DECK,OK
HAND,7,P1,AsKsQsJsTs
HAND,7,DL,As2c3d4h5s
ROUND,7,2
SETTLE,7
HAND,8,P1,AsKsQsJsTs
HAND,8,DL,2c3d4h5s7c
ROUND,8,3
SETTLE,8
HAND,9,P1,AsKs
HAND,9,DL,2c3d4h5s7c
ROUND,9,2
SETTLE,9
HAND,10,P1,9c9d5h5s2c
HAND,10,DL,AcKd4s3h3c
ROUND,10,2
SETTLE,10
"""


async def test_flagged_rounds_are_published_at_once_without_cards(make_table: MakeTable) -> None:
    table = make_table("CSP")
    await table.start(FLAGGED_SCRIPT)
    rec = table.recorder
    await table.wait_topic("cover_all/result", lambda b: b["round_id"] == 10)
    results = {b["round_id"]: b for b in rec.bodies("cover_all/result")}
    assert sorted(results) == [7, 8, 9, 10]
    for round_id in (7, 8, 9):
        assert results[round_id]["outcome"] == "flagged"
        assert results[round_id]["highest"] is None
        assert results[round_id]["pays"] is None
    # Flagged as soon as found: the duplicate ace at the dealer's HAND, the hand count at
    # ROUND (2 hands dealt, 3 announced), the two-card hand at its HAND.
    records = table.journal()
    found_at = {7: ("HandDealt", "DL"), 8: ("RoundDealt", None), 9: ("HandDealt", "P1")}
    for round_id, (fact, position) in found_at.items():
        frames = [
            r
            for r in device_records(records, fact)
            if r["event"]["round_id"] == round_id
            and (position is None or r["event"]["position"] == position)
        ]
        publishes = [r for r in records if r["kind"] == "publish" and r["seq"] > frames[0]["seq"]]
        assert publishes[0]["topic"] == "cover_all/result", round_id
        assert publishes[0]["payload"]["round_id"] == round_id
    assert "same card" in results[7]["reason"]
    assert "3 hands" in results[8]["reason"]
    assert "2 were dealt" in results[8]["reason"]
    assert "2 cards" in results[9]["reason"]
    # A flagged round gets no payouts; the next good round is paid as usual.
    assert [p["round_id"] for p in rec.bodies("cover_all/payouts")] == [10]
    assert results[10]["outcome"] == "no_qualifier"
    pattern = card_pattern(["As", "Ks", "Qs", "Js", "Ts"])
    for m in rec.messages:
        assert not pattern.search(m.payload.decode()), m


DEVICE_CHECKS_SCRIPT = """\
STATUS,JAM,card jam at the output
STATUS,READY,
DECK,SHORT
HAND,11,P1,AsKsQsJsTs
HAND,11,DL,2c3d4h5s7c
ROUND,11,2
SETTLE,11
DECK,OK
HAND,12,P1,AsKs
VOID,12
CARD,13,DL,As
"""


async def test_device_checks_raise_and_clear_alarms(make_table: MakeTable) -> None:
    table = make_table("CSP")
    rec = table.recorder
    await table.start(DEVICE_CHECKS_SCRIPT)
    await table.wait_published()
    # link-layer.md "Device status": a tilt until READY; shuffler-icd.md: a deck check
    # other than OK is a tilt until the next OK; a blackjack CARD at a poker table is a
    # frame the table does not use.
    codes = [[a["code"] for a in b["alarms"]] for b in rec.bodies("alarms")]
    assert codes == [
        ["DISCONNECTED", "MODE_MISMATCH"],
        ["MODE_MISMATCH"],
        [],
        ["DEVICE_FAULT_JAM"],
        [],
        ["DECK_FAULT"],
        [],
        ["UNEXPECTED_FRAME"],
    ]
    jam = next(b for b in rec.bodies("alarms") if b["alarms"] and "JAM" in b["alarms"][0]["code"])
    assert "card jam at the output" in jam["alarms"][0]["message"]
    statuses = [b["devices"]["shuffler"]["status"] for b in rec.bodies("state")]
    assert "JAM" in statuses
    assert statuses[-1] == "READY"
    # The round dealt from the short deck is flagged and never paid; a flagged round the
    # dealer then voids is published as void.
    results = [(b["round_id"], b["outcome"]) for b in rec.bodies("cover_all/result")]
    assert results == [(11, "flagged"), (12, "flagged"), (12, "void")]
    assert "SHORT" in rec.bodies("cover_all/result")[0]["reason"]
    assert rec.bodies("cover_all/payouts") == []
    assert [e for e in table.log_events() if e.get("level") == "error"] == []

    # The shuffler says HELLO again (a new session): the stray frame's alarm clears.
    await table.start_sim("DECK,OK\n")
    await table.wait_for(
        lambda: (rec.latest("alarms") or {}).get("alarms") == [], what="alarms cleared"
    )
