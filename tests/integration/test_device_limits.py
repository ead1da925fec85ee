"""What a device that sends too much does to the running table: a line gone bad raises
``LINK_ERRORS`` and costs a bounded journal and log; rolls piling up behind a pending
``CHECK`` raise ``ROLL_BACKLOG``. The real daemon, a real pty, a real Mosquitto."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from drivers.messages import Ack, DeviceMessage, MessageDecoder, Nak
from drivers.messages import encode_message as encode
from rules.events import DeviceHello, DiceRolled
from tests.integration.conftest import MakeTable
from tests.integration.harness import Table

pytestmark = pytest.mark.integration

BAD_CRC = b"$ROLL,2,5001,6,5*0000\r\n"  # link-layer.md: a bad CRC is answered NAK,0


class Line:
    """The device's end of a pty: what the test writes, and the host's answers counted."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.decoder = MessageDecoder(device="dice_reader", sender="host")
        self.naks = 0
        self.acks: list[int] = []
        os.set_blocking(master, False)
        asyncio.get_running_loop().add_reader(master, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self.master, 4096)
        except OSError:  # nobody has the slave open yet, or any more
            return
        for item in self.decoder.feed(data):
            message = getattr(item, "message", None)
            if isinstance(message, Nak):
                self.naks += 1
            elif isinstance(message, Ack):
                self.acks.append(message.seq)

    def write(self, data: bytes) -> None:
        os.set_blocking(self.master, True)
        try:
            os.write(self.master, data)
        finally:
            os.set_blocking(self.master, False)

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.master)


@contextmanager
def pty_line(table: Table) -> Iterator[Line]:
    """A pty at the table's device link, for the test to play the dice reader by hand."""
    master, slave = os.openpty()
    table.link.symlink_to(os.ttyname(slave))
    line = Line(master)
    try:
        yield line
    finally:
        line.close()
        os.close(master)
        os.close(slave)


def _alarm(table: Table, code: str) -> dict[str, object] | None:
    latest = table.recorder.latest("alarms")
    if latest is None:
        return None
    return next((a for a in latest["alarms"] if a["code"] == code), None)


async def test_a_flood_of_bad_frames_raises_link_errors_and_costs_a_bounded_journal_and_log(
    make_table: MakeTable,
) -> None:
    table = make_table("CRAPS")
    with pty_line(table) as line:
        await table.recorder.start()
        table.start_daemon()
        await table.wait_for(
            lambda: (
                (s := table.recorder.latest("state")) and s["devices"]["dice_reader"]["connected"]
            ),
            what="the dice reader connected",
        )
        for _ in range(10):
            line.write(BAD_CRC * 30)
            await asyncio.sleep(0.01)
        await table.wait_for(lambda: line.naks >= 300, what="300 NAKs")
        alarm = await table.wait_for(lambda: _alarm(table, "LINK_ERRORS"), what="LINK_ERRORS")
        assert alarm["device"] == "dice_reader"
        assert alarm["stops_payouts"] is False
        # Good frames still count, once each.
        hello = DeviceHello(device="dice_reader", model="T", firmware="1", serial="S")
        line.write(encode(DeviceMessage(seq=1, fact=hello)))
        await table.wait_for(lambda: 1 in line.acks, what="the HELLO's ACK")
        line.write(encode(DeviceMessage(seq=2, fact=DiceRolled(roll_id=5001, dice=(6, 5)))))
        roll = await table.wait_topic("craps/roll")
        assert (roll["roll_id"], roll["status"]) == (5001, "counted")
        assert line.naks == 300  # nothing NAKed but the bad frames
        await table.wait_published()

        records = table.journal()
        full = [r for r in records if "bad_frame" in r]
        facts = [r for r in records if r.get("event", {}).get("type") == "BadFrameSeen"]
        assert len(full) == 20  # with their bytes; the other 280 are counted
        assert {r["bad_frame"]["raw"] for r in full} == {BAD_CRC.hex()}
        assert len(facts) < 60  # the replay's share: 21, then one a second at most
        log = table.log_events()
        warnings = [e["event"] for e in log if e["level"] == "warning"]
        assert warnings.count("bad frame") == 20
        assert "bad frame NAKed" not in warnings  # the driver's line is at debug now
        assert warnings.count("alarm raised") == 1

        # A restart replays the journal: the alarm is still there, raised when it was.
        assert await table.stop_daemon(signal.SIGTERM) == 0
        mark = table.recorder.mark()
        table.start_daemon()
        await table.wait_for(
            lambda: any(m.topic == "availability" for m in table.recorder.messages[mark:]),
            what="the daemon back",
        )
        await table.wait_published()
        after = _alarm(table, "LINK_ERRORS")
        assert after is not None
        assert after["since"] == alarm["since"]


async def test_rolls_behind_a_pending_check_raise_roll_backlog_until_it_is_decided(
    make_table: MakeTable,
) -> None:
    table = make_table("CRAPS")
    script = "CHECK,1,3,4,ON_CHIPS\n" + "".join(f"ROLL,{i},2,2\n" for i in range(2, 24))
    await table.start(script)
    alarm = await table.wait_for(lambda: _alarm(table, "ROLL_BACKLOG"), what="ROLL_BACKLOG")
    assert alarm["device"] == "dice_reader"
    assert alarm["stops_payouts"] is False
    assert "behind roll 1" in str(alarm["message"])
    answer = await table.request(
        "roll_decision", {"operator": "Ann", "roll_id": 1, "decision": "invalid"}
    )
    assert answer["status"] == "ok"
    await table.wait_for(lambda: _alarm(table, "ROLL_BACKLOG") is None, what="cleared")
    counted = [b for b in table.recorder.bodies("craps/roll") if b["status"] == "counted"]
    assert [b["roll_id"] for b in counted] == list(range(2, 24))
