"""What a table survives: a daemon killed and restarted, a broker outage, a device pulled
out and plugged back, corrupt frames, and a clean stop. Nothing received is lost, nothing
counts twice, and ``seq`` only goes up (mqtt-api.md, Conventions; docs/operators/running.md,
"lammer run")."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from daemon.journal import Journal
from tests.conftest import Broker
from tests.integration.conftest import MakeTable
from tests.integration.harness import Sim, Table, device_records, retained_snapshot

pytestmark = pytest.mark.integration

CSP_812 = {"P1": "9c9d5h5s2c", "P3": "QhJhTh8h7h", "DL": "AcKd4s3h3c"}  # shuffler-icd.md


def _logged(table: Table, fact: str, **fields: Any) -> bool:
    """The current daemon has logged (so journaled) a device fact."""
    assert table.daemon is not None
    return any(
        e.get("event") == "device event"
        and e.get("fact") == fact
        and all(e.get(k) == v for k, v in fields.items())
        for e in table.daemon.log_events()
    )


def _assert_journal_intact(records: list[dict[str, Any]]) -> None:
    """Every record once, ``seq`` 1, 2, 3, ... with no gap and no repeat."""
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))


def _retransmits(sim: Sim) -> int:
    """How many times the simulator has sent a frame again (seen with ``debug`` only)."""
    return sum(e.get("event") == "retransmit" for e in sim.log_events())


def _availability(table: Table) -> list[str]:
    return [m.body for m in table.recorder.on("availability")]


async def test_sigkill_mid_round_then_restart_loses_nothing(make_table: MakeTable) -> None:
    table = make_table("CSP")
    # The rest of the round comes once the daemon is down (the script waits for a file the
    # test creates after the kill: an event, not a time): the shuffler gets no ACK and
    # resends (link-layer.md) until the restarted daemon takes it.
    killed = table.workdir / "daemon-killed"
    script = (
        f"DECK,OK\nHAND,20,P1,{CSP_812['P1']}\nHAND,20,P3,{CSP_812['P3']}\nwait {killed}\n"
        f"HAND,20,DL,{CSP_812['DL']}\nROUND,20,3\nSETTLE,20\n"
    )
    await table.recorder.start()
    sim = await table.start_sim(script, wait=False, debug=True)
    table.start_daemon()
    await table.wait_for(lambda: _logged(table, "HandDealt", round=20, position="P3"), what="P3")
    await table.stop_daemon(signal.SIGKILL)
    resent = _retransmits(sim)
    killed.touch()
    await table.wait_for(
        lambda: _retransmits(sim) > resent, what="the dealer's HAND resent, unacknowledged"
    )
    restart = table.recorder.mark()
    table.start_daemon()
    await table.wait_sim_done()
    result = await table.wait_topic("cover_all/result", lambda b: b["round_id"] == 20)
    await table.wait_published()

    # The round settles as if nothing happened: its hands from before the kill were
    # rebuilt from the journal.
    assert result["outcome"] == "win"
    assert (result["highest"]["hand"], result["highest"]["position"]) == ("Flush", "P3")
    assert result["pays"] == "20"
    payouts = table.recorder.bodies("cover_all/payouts")
    assert [(p["round_id"], p["hands"]) for p in payouts] == [(20, 3)]
    # The broker said offline for the killed daemon (its will); the new one is online.
    assert _availability(table)[-2:] == ["offline", "online"]
    assert any(m.topic == "availability" for m in table.recorder.messages[restart:])
    # seq goes on: strictly increasing over everything received, across the restart.
    table.recorder.check_order()

    records = table.journal()
    _assert_journal_intact(records)
    hands = [r["event"]["position"] for r in device_records(records, "HandDealt")]
    assert sorted(hands) == ["DL", "P1", "P3"]  # each once: no frame lost or doubled
    assert len(device_records(records, "RoundSettled")) == 1
    restarted = device_records(records, "DeviceDisconnected")
    assert any("restarted" in r["event"]["reason"] for r in restarted)


async def test_sigkill_mid_series_keeps_lammers_and_the_pending_roll(
    make_table: MakeTable,
) -> None:
    table = make_table("CRAPS")
    # Roll 4 is thrown once the daemon is down: the script waits for a file the test
    # creates after the kill.
    killed = table.workdir / "daemon-killed"
    script = f"ROLL,1,1,1\nROLL,2,2,2\nCHECK,3,3,3,BOWL\nwait {killed}\nROLL,4,5,5\n"
    await table.recorder.start()
    sim = await table.start_sim(script, wait=False, debug=True)
    table.start_daemon()
    await table.wait_for(lambda: _logged(table, "RollCheck", roll=3), what="roll 3 journaled")
    before = await table.wait_topic("craps/board", lambda b: b["pending_roll"] is not None)
    await table.stop_daemon(signal.SIGKILL)
    resent = _retransmits(sim)
    killed.touch()
    await table.wait_for(lambda: _retransmits(sim) > resent, what="roll 4 resent, unacknowledged")
    table.start_daemon()
    await table.wait_sim_done()

    # Roll 4, thrown while the daemon was down, arrives after the restart and waits behind
    # the pending roll 3, as it would have without the crash: the series, its lammers and
    # the pending roll were rebuilt from the journal.
    roll_4 = await table.wait_topic("craps/roll", lambda b: b["roll_id"] == 4)
    assert roll_4["status"] == "pending"
    assert "waits for the decision on roll 3" in roll_4["reason"]
    # Since when roll 3 waits (issue 22) is the time journaled when it arrived, before the
    # kill, and the series the rolls before it: the same after the restart.
    arrived = {
        r["event"]["roll_id"]: r["ts"]
        for r in table.journal("--kind", "device")
        if r.get("event", {}).get("type") in ("DiceRolled", "RollCheck")
    }
    waiting = await table.wait_topic("craps/board", lambda b: b["waiting"] == [4])
    assert waiting["pending_roll"]["since"] == before["pending_roll"]["since"] == arrived[3]
    assert waiting["series"] == before["series"]
    assert [(r["roll_id"], r["at"]) for r in waiting["series"]] == [
        (1, arrived[1]),
        (2, arrived[2]),
    ]
    answer = await table.request(
        "roll_decision", {"operator": "stick-1", "roll_id": 3, "decision": "valid"}
    )
    assert answer["status"] == "ok"
    board = await table.wait_topic("craps/board", lambda b: b["numbers_hit"] == [2, 4, 6, 10])
    assert board["pending_roll"] is None
    assert [(r["roll_id"], r["at"]) for r in board["series"]] == sorted(arrived.items())
    await table.wait_published()
    table.recorder.check_order()

    records = table.journal()
    _assert_journal_intact(records)
    rolls = [
        r["event"]["roll_id"]
        for r in records
        if r["kind"] == "device" and r.get("event", {}).get("type") in ("DiceRolled", "RollCheck")
    ]
    assert rolls == [1, 2, 3, 4]


async def test_broker_outage_every_event_arrives_in_order(
    make_table: MakeTable, mosquitto_private: Broker
) -> None:
    table = make_table("CRAPS", broker=mosquitto_private)
    rec = table.recorder
    await table.start("ROLL,1,1,1\nROLL,2,1,2\n")
    await table.wait_published()

    mosquitto_private.stop()
    await table.wait_for(lambda: not rec.ready.is_set(), what="the subscriber to see the outage")
    # The table keeps working: the dice reader is read and acknowledged, the journal
    # written; the messages wait in it.
    await table.start_sim("ROLL,3,2,2\nCHECK,4,2,3,RAIL\nROLL,5,3,3\nNOROLL,6,EXTRA_DICE\n")
    queued = [r for r in table.journal() if r["kind"] == "publish" and not r["published"]]
    assert {r["topic"] for r in queued} >= {"craps/roll", "craps/board", "state", "alarms"}

    # The broker comes back. The daemon is paused meanwhile so that the subscriber is
    # surely there again before the daemon reconnects (it must see every message).
    assert table.daemon is not None
    pid = table.daemon.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        mosquitto_private.start()
        await table.wait_for(rec.ready.is_set, what="the subscriber back")
    finally:
        os.kill(pid, signal.SIGCONT)
    back = rec.connections
    await table.wait_published()

    # Everything queued arrived after the outage, in seq order, none lost.
    after = [m for m in rec.messages if m.connection == back]
    assert {r["seq"] for r in queued} <= {m.seq for m in after}
    rec.check_order()
    rolls = [(b["roll_id"], b["status"]) for b in rec.bodies("craps/roll")]
    assert rolls == [
        (1, "counted"),
        (2, "counted"),
        (3, "counted"),
        (4, "pending"),
        (5, "pending"),
        (6, "noroll"),
    ]
    assert _availability(table)[-1] == "online"

    # The broker lost its retained messages (no persistence): a display connecting now
    # gets the current state, each topic's latest seq.
    latest: dict[str, int] = {}
    for r in table.journal():
        if r["kind"] == "publish" and r["retained"]:
            latest[r["topic"]] = r["seq"]
    snapshot = await retained_snapshot(mosquitto_private, table.base)
    assert {t: m.seq for t, m in snapshot.items() if m.seq is not None} == latest
    # Republished unchanged, with the original seq and ts (mqtt-api.md, Conventions).
    payloads = {r["seq"]: r["payload"] for r in table.journal() if r["kind"] == "publish"}
    for m in snapshot.values():
        if m.seq is not None:
            assert m.body == payloads[m.seq]
    assert snapshot["availability"].body == "online"
    assert snapshot["craps/board"].body["pending_roll"]["roll_id"] == 4
    assert snapshot["craps/board"].body["numbers_hit"] == [2, 3, 4]

    # One outage, logged once (not once per retry), and play goes on.
    events = [e.get("event", "") for e in table.log_events()]
    assert sum(e.startswith("mqtt connection lost") for e in events) == 1
    assert sum(e == "mqtt broker reachable again" for e in events) == 1
    answer = await table.request(
        "roll_decision", {"operator": "stick-1", "roll_id": 4, "decision": "valid"}
    )
    assert answer["status"] == "ok"
    await table.wait_topic("craps/board", lambda b: b["numbers_hit"] == [2, 3, 4, 5, 6])


async def test_device_unplugged_and_back_mid_round(make_table: MakeTable) -> None:
    table = make_table("CSP")
    rec = table.recorder
    script = (
        f"DECK,OK\nHAND,30,P1,{CSP_812['P1']}\nHAND,30,P3,{CSP_812['P3']}\nunplug\n"
        f"HAND,30,DL,{CSP_812['DL']}\nROUND,30,3\nSETTLE,30\n"
    )
    await table.start(script, fault="unplug_pause=0.3")
    result = await table.wait_topic("cover_all/result", lambda b: b["round_id"] == 30)
    await table.wait_published()
    assert table.sim is not None
    assert len(table.sim.pty_paths()) == 2  # a new /dev/pts/N after the replug

    # The alarm is raised and cleared, and state shows the shuffler gone and back.
    codes = [[a["code"] for a in b["alarms"]] for b in rec.bodies("alarms")]
    raised = [i for i, c in enumerate(codes) if "DISCONNECTED" in c]
    assert raised, codes
    assert codes[-1] == []
    connected = [b["devices"]["shuffler"]["connected"] for b in rec.bodies("state")]
    first_up = connected.index(True)
    assert False in connected[first_up:]
    assert connected[-1] is True
    alarm = next(
        a
        for b in rec.bodies("alarms")
        for a in b["alarms"]
        if a["code"] == "DISCONNECTED" and b["seq"] > rec.bodies("state")[first_up]["seq"]
    )
    assert alarm["device"] == "shuffler"
    # Play went on: the round dealt across the unplug settles correctly.
    assert (result["outcome"], result["highest"]["position"], result["pays"]) == ("win", "P3", "20")
    rec.check_order()


async def test_corrupt_frames_every_event_once_and_in_order(make_table: MakeTable) -> None:
    table = make_table("CRAPS")
    dice = [
        (1, 1),
        (2, 1),
        (2, 2),
        (4, 1),
        (3, 3),
        (6, 2),
        (4, 5),
        (5, 5),
        (6, 5),
        (6, 6),
        (1, 3),
        (2, 4),
        (5, 4),
        (3, 5),
        (6, 4),
        (2, 3),
    ]
    script = "".join(f"ROLL,{i},{a},{b}\n" for i, (a, b) in enumerate(dice, start=1))
    await table.start(
        script, fault="crc=0.3,garble=0.2,garbage=0.3,duplicate=0.3,split=0.2", seed=7
    )
    await table.wait_for(
        lambda: len(table.recorder.bodies("craps/roll")) == len(dice), what="rolls"
    )
    await table.wait_published()
    rolls = [(b["roll_id"], b["dice"], b["status"]) for b in table.recorder.bodies("craps/roll")]
    assert rolls == [(i, [a, b], "counted") for i, (a, b) in enumerate(dice, start=1)]
    table.recorder.check_order()

    records = table.journal()
    assert [r["event"]["roll_id"] for r in device_records(records, "DiceRolled")] == list(
        range(1, len(dice) + 1)
    )
    bad = [r["bad_frame"] for r in records if r["kind"] == "device" and "bad_frame" in r]
    assert bad, "the faults should have produced bad frames"
    assert all(b["device"] == "dice_reader" and b["raw"] and b["reason"] for b in bad)
    assert any("CRC" in b["reason"] or "crc" in b["reason"] for b in bad)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=str)
async def test_a_stop_signal_stops_cleanly_offline_exit_0(
    make_table: MakeTable, sig: signal.Signals
) -> None:
    # SIGHUP too: a closed terminal once ended the daemon with 129, the journal unclosed.
    table = make_table("CRAPS")
    await table.start("ROLL,1,3,3\n")
    await table.wait_published()
    status = await table.stop_daemon(sig)
    assert status == 0
    await table.wait_for(lambda: _availability(table)[-1] == "offline", what="offline")
    offline = table.recorder.on("availability")[-1]
    assert offline.retained  # a display connecting later sees it too
    snapshot = await retained_snapshot(table.broker, table.base)
    assert snapshot["availability"].body == "offline"
    assert table.log_events()[-1]["event"] == "table stopped"
    # The journal holds every card before it is face up: the service's user only.
    assert table.journal_path.stat().st_mode & 0o777 == 0o600
    assert table.journal_path.parent.stat().st_mode & 0o777 == 0o700
    # The journal was closed: another writer can take it now. (The stop's snapshot is its
    # last record; the export leaves snapshots out unless asked.)
    with Journal.open(table.journal_path) as journal:
        assert journal.last_seq == table.journal("--snapshots")[-1]["seq"]


async def test_crash_after_the_journal_before_the_ack_counts_the_frame_once(
    make_table: MakeTable,
) -> None:
    """A frame journaled whose ACK never reached the device (the daemon died between the
    commit and the ACK, or the ACK was lost and the daemon died before the resend) comes
    again after the restart: it must not be processed twice (link-layer.md: "must not
    process it twice")."""
    table = make_table("CSP")
    # The first HAND's ACK is lost on the wire (a scripted drop_ack) and the device waits
    # 2 s before resending: time enough to kill the daemon while a journaled HAND is still
    # unacknowledged for the device.
    script = (
        f"DECK,OK\ndrop_ack\nHAND,22,P1,{CSP_812['P1']}\nHAND,22,P3,{CSP_812['P3']}\n"
        f"HAND,22,DL,{CSP_812['DL']}\nROUND,22,3\nSETTLE,22\n"
    )
    await table.recorder.start()
    sim = await table.start_sim(script, wait=False, debug=True, ack_timeout=2.0)
    table.start_daemon()
    await table.wait_for(lambda: sim.ack_dropped("HAND"), what="a HAND's ACK lost")
    await table.stop_daemon(signal.SIGKILL)
    table.start_daemon()
    await table.wait_sim_done()
    result = await table.wait_topic("cover_all/result", lambda b: b["round_id"] == 22)
    assert result["outcome"] == "win", result
    records = table.journal()
    hands = [r["event"]["position"] for r in device_records(records, "HandDealt")]
    assert sorted(hands) == ["DL", "P1", "P3"]
