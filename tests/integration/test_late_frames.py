"""A paid round stays paid on every screen (shuffler-icd.md, "What the host must check": a
late frame for a settled or void round raises an alarm and is journaled for review, but
publishes no second result for that round).

Each case plays a round to its result, then the same closing frame again under a new
link sequence number (so not a link-level repeat: a device that sent it twice), and checks
what a display connecting afterwards is given, what the alarm says and what the journal
holds. Expected results come from the regulations, as in test_card_games.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import MakeTable
from tests.integration.harness import Table, device_records, retained_snapshot

pytestmark = pytest.mark.integration

CSP_812 = (
    "DECK,OK\n"
    "HAND,812,P1,9c9d5h5s2c\nHAND,812,P3,QhJhTh8h7h\nHAND,812,DL,AcKd4s3h3c\n"
    "ROUND,812,3\nSETTLE,812\n"
)


def _late_alarm(table: Table, device: str) -> dict[str, Any] | None:
    alarms = table.recorder.latest("alarms")
    if alarms is None:
        return None
    return next(
        (a for a in alarms["alarms"] if a["code"] == "LATE_FRAME" and a["device"] == device),
        None,
    )


@pytest.mark.parametrize("reconnect", [False, True], ids=["same session", "after HELLO"])
async def test_a_late_settle_keeps_the_paid_result(make_table: MakeTable, reconnect: bool) -> None:
    table = make_table("CSP")
    # The second SETTLE is a new frame (a new link sequence number): sent again by the
    # device in the same session, or after it restarted (a HELLO ends the memory of closed
    # round ids, shuffler-icd.md, so the round is then simply not open).
    await table.start(CSP_812 if reconnect else CSP_812 + "SETTLE,812\n")
    if reconnect:
        await table.start_sim("SETTLE,812\n")
    paid = await table.wait_topic("cover_all/result", lambda b: b["round_id"] == 812)
    # shuffler-icd.md's example: the flush at P3 pays 20 to 1 for 3 hands.
    assert (paid["outcome"], paid["pays"]) == ("win", "20")
    alarm = await table.wait_for(lambda: _late_alarm(table, "shuffler"), what="LATE_FRAME")
    assert alarm["message"].startswith(
        "SETTLE for round 812, which is not open (no round is open)"
        if reconnect
        else "SETTLE for round 812 arrived after the round was settled"
    )
    assert alarm["stops_payouts"] is False
    await table.wait_published()
    # No second result: a display connecting now still shows the win.
    results = table.recorder.bodies("cover_all/result")
    assert [r["outcome"] for r in results] == ["win"]
    snapshot = await retained_snapshot(table.broker, table.base)
    assert snapshot["cover_all/result"].body == paid
    # The late frame is in the record, for review.
    assert len(device_records(table.journal(), "RoundSettled")) == 2


async def test_a_late_end_keeps_the_bust_bonus_result(make_table: MakeTable) -> None:
    table = make_table("BJ")
    await table.start("CARD,41,P1,Qs\nCARD,41,DL,6h\nCARD,41,DL,Th\nCARD,41,DL,9h\nEND,41\n")
    paid = await table.wait_topic("bust_bonus/result", lambda b: b["round_id"] == 41)
    # sd-bust-bonus.txt (12): 6 up, a suited bust (all hearts): 3 to 1.
    assert (paid["outcome"], paid["pays"]) == ("win", "3")
    await table.start_sim("END,41\nVOID,41\n")
    await table.wait_for(lambda: _late_alarm(table, "shuffler"), what="LATE_FRAME")
    await table.wait_published()
    assert [r["outcome"] for r in table.recorder.bodies("bust_bonus/result")] == ["win"]
    snapshot = await retained_snapshot(table.broker, table.base)
    assert snapshot["bust_bonus/result"].body == paid
    records = table.journal()
    assert len(device_records(records, "DealerDone")) == 2
    assert len(device_records(records, "RoundVoided")) == 1


async def test_a_late_copy_of_a_settled_roll_settles_nothing_again(make_table: MakeTable) -> None:
    table = make_table("CRAPS")
    # Roll 1 is a seven: every bet loses (20:18:33:12); roll 2 opens the next series; then
    # roll 1 comes again (a new frame, same content), after roll 2.
    await table.start("ROLL,1,3,4\nROLL,2,2,2\nROLL,1,3,4\n")
    alarm = await table.wait_for(lambda: _late_alarm(table, "dice_reader"), what="LATE_FRAME")
    assert "roll 1" in alarm["message"]
    await table.wait_published()
    assert len(table.recorder.bodies("craps/result")) == 3  # nothing settled twice
    counted = [b for b in table.recorder.bodies("craps/roll") if b["status"] == "counted"]
    assert [b["roll_id"] for b in counted] == [1, 2]
    board = table.recorder.latest("craps/board")
    assert board is not None
    assert board["numbers_hit"] == [4]  # the series after the seven, unchanged
    assert len(device_records(table.journal(), "DiceRolled")) == 3
