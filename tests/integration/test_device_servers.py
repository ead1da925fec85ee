"""A table whose device is behind a serial device server no one here wrote, every part real:
``lammer run``, ``lammer-sim`` on a pty that is a line at 115200 baud (``--baud``), and in
front of that pty Debian's ser2net (raw TCP, ``socket://``; RFC 2217, ``rfc2217://``) or
pyserial's ``PortManager`` (RFC 2217), a process on loopback each; between the table and
the server a relay the test can cut (``tests.device_servers.NetCut``).

Each test goes through four phases with one server:

1. a full game, every message of the device once: each journaled once, in order, and the
   results right;
2. the server killed (SIGKILL) mid-round and started again: the table says its device is
   gone (``DISCONNECTED``, ``state``) and comes back; the round ends as if nothing happened;
3. the network cut with the server up (nothing passes, nothing closes): the table sees the
   loss within its silence timeout (``silent for 3 s``, the driver's own probe, not TCP's
   minutes), and once the network is back every frame arrives once;
4. the server's port set to 9600 baud under it (as a device server's page does) while the
   device stays at 115200: the device's frames arrive as noise, ``LINK_ERRORS`` is raised
   and nothing of the garbled round counts; the port set back, the frame held by the device
   arrives once and the round ends right.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from simulators.line import set_baudrate
from tests.device_servers import DeviceServer, NetCut, PortManagerServer, Ser2net
from tests.integration.conftest import MakeTable
from tests.integration.harness import Table, device_records

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SILENCE = 3.0
CSP_812 = {"P1": "9c9d5h5s2c", "P3": "QhJhTh8h7h", "DL": "AcKd4s3h3c"}  # shuffler-icd.md


@dataclass(frozen=True)
class Plan:
    """A game's scripts for the four phases, and what its records must say."""

    game: str
    full: str
    """Every message the device sends at this game, once (HELLO and MODE come first)."""
    full_facts: list[tuple[str, dict[str, Any]]]
    """The device facts the full game journals, in order, each once (after HELLO)."""
    split: Callable[[int], tuple[str, str, str]]
    """For a round (or roll) number: the first part of a round, the rest, and the
    fact type of the last frame of the first part."""
    check_split: Callable[[Table, int], None]
    """The round (or roll) ``n`` came out right, each frame of it once."""


def _poker_split(n: int) -> tuple[str, str, str]:
    first = f"HAND,{n},P1,{CSP_812['P1']}\nHAND,{n},P3,{CSP_812['P3']}\n"
    rest = f"HAND,{n},DL,{CSP_812['DL']}\nROUND,{n},3\nSETTLE,{n}\n"
    return first, rest, "HandDealt"


def _poker_check(table: Table, n: int) -> None:
    records = table.journal()
    hands = [
        r["event"]["position"]
        for r in device_records(records, "HandDealt")
        if r["event"]["round_id"] == n
    ]
    assert sorted(hands) == ["DL", "P1", "P3"]
    settled = [r for r in device_records(records, "RoundSettled") if r["event"]["round_id"] == n]
    assert len(settled) == 1
    [result] = [b for b in table.recorder.bodies("cover_all/result") if b["round_id"] == n]
    assert (result["outcome"], result["highest"]["position"], result["pays"]) == ("win", "P3", "20")


def _dice_split(n: int) -> tuple[str, str, str]:
    return f"ROLL,{n},2,2\n", f"ROLL,{n + 1},6,5\n", "DiceRolled"


def _dice_check(table: Table, n: int) -> None:
    rolls = [r["event"]["roll_id"] for r in device_records(table.journal(), "DiceRolled")]
    assert rolls.count(n) == 1
    assert rolls.count(n + 1) == 1
    counted = [(b["roll_id"], b["status"]) for b in table.recorder.bodies("craps/roll")]
    assert (n, "counted") in counted
    assert (n + 1, "counted") in counted


POKER = Plan(
    game="CSP",
    full=(
        "STATUS,DOOR_OPEN,door open\nSTATUS,READY,\nDECK,OK\n"
        f"HAND,40,P1,{CSP_812['P1']}\nHAND,40,P3,{CSP_812['P3']}\nHAND,40,DL,{CSP_812['DL']}\n"
        f"ROUND,40,3\nSETTLE,40\nHAND,41,P1,{CSP_812['P1']}\nVOID,41\n"
    ),
    full_facts=[
        ("ModeReported", {"game": "CSP"}),
        ("DeviceStatus", {"code": "DOOR_OPEN"}),
        ("DeviceStatus", {"code": "READY"}),
        ("DeckChecked", {"result": "OK"}),
        ("HandDealt", {"round_id": 40, "position": "P1"}),
        ("HandDealt", {"round_id": 40, "position": "P3"}),
        ("HandDealt", {"round_id": 40, "position": "DL"}),
        ("RoundDealt", {"round_id": 40, "hands": 3}),
        ("RoundSettled", {"round_id": 40}),
        ("HandDealt", {"round_id": 41, "position": "P1"}),
        ("RoundVoided", {"round_id": 41}),
    ],
    split=_poker_split,
    check_split=_poker_check,
)
DICE = Plan(
    game="CRAPS",
    full="STATUS,COVER_OPEN,cover open\nSTATUS,READY,\nROLL,1,3,4\nNOROLL,2,OFF_TABLE\n"
    "CHECK,3,2,5,ON_CHIPS\n",
    full_facts=[
        ("DeviceStatus", {"code": "COVER_OPEN"}),
        ("DeviceStatus", {"code": "READY"}),
        ("DiceRolled", {"roll_id": 1, "dice": [3, 4]}),
        ("NoRoll", {"roll_id": 2, "reason": "OFF_TABLE"}),
        ("RollCheck", {"roll_id": 3, "dice": [2, 5], "reason": "ON_CHIPS"}),
    ],
    split=_dice_split,
    check_split=_dice_check,
)

CASES = {
    "ser2net raw, dice reader": ("ser2net raw", DICE),
    "ser2net rfc2217, shuffler": ("ser2net rfc2217", POKER),
    "pyserial PortManager rfc2217, dice reader": ("PortManager", DICE),
}


def _server(kind: str, table: Table) -> DeviceServer:
    if kind == "PortManager":
        return PortManagerServer(table.workdir, table.link)
    return Ser2net(table.workdir, table.link, "raw" if kind == "ser2net raw" else "rfc2217")


def _logged(table: Table, fact: str, **fields: Any) -> bool:
    """The current daemon has logged (so journaled) a device fact."""
    assert table.daemon is not None
    return any(
        e.get("event") == "device event"
        and e.get("fact") == fact
        and all(e.get(k) == v for k, v in fields.items())
        for e in table.daemon.log_events()
    )


def _connected(table: Table) -> bool | None:
    """The device's ``connected`` in the latest ``state``."""
    state = table.recorder.latest("state")
    return None if state is None else bool(state["devices"][table.device]["connected"])


def _alarm(table: Table, code: str) -> dict[str, Any] | None:
    alarms = table.recorder.latest("alarms")
    found = [a for a in alarms["alarms"] if a["code"] == code] if alarms else []
    return found[0] if found else None


def _set_line(table: Table, baud: int) -> None:
    """Set the server's port (the pty behind the table's link) to ``baud``, underneath the
    server, as a device server's own page would."""
    fd = os.open(table.link, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        set_baudrate(fd, baud)
    finally:
        os.close(fd)


def _first_split_fact(plan: Plan, n: int) -> dict[str, Any]:
    return {"round": n, "position": "P3"} if plan.game == "CSP" else {"roll": n}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_table_behind_a_device_server(make_table: MakeTable, case: str) -> None:
    kind, plan = CASES[case]
    table = make_table(plan.game, device_settings=f"silence_timeout = {SILENCE}\n")
    server = _server(kind, table)
    relay = NetCut(server.port)
    table.device_port = relay.url("socket" if kind == "ser2net raw" else "rfc2217")
    table.config_path.write_text(table.config_text())
    await asyncio.to_thread(server.start)
    await relay.start()
    try:
        await _phases(table, server, relay, plan)
    finally:
        await relay.close()
        server.stop()


async def _phases(table: Table, server: DeviceServer, relay: NetCut, plan: Plan) -> None:
    rec = table.recorder

    # 1. A full game, every message once.
    await table.start(plan.full, baud=115200)
    await table.wait_published()
    link_facts = ("DeviceConnected", "DeviceDisconnected", "DeviceHello")
    facts = [
        (r["event"]["type"], r["event"])
        for r in table.journal("--kind", "device")
        if "event" in r and r["event"]["type"] not in link_facts and not r.get("probe")
    ]
    assert len(facts) == len(plan.full_facts), facts
    for (kind, event), (want_kind, want) in zip(facts, plan.full_facts, strict=True):
        assert kind == want_kind
        assert {k: event[k] for k in want} == want
    if plan.game == "CSP":
        results = {b["round_id"]: b for b in rec.bodies("cover_all/result")}
        assert (results[40]["outcome"], results[40]["pays"]) == ("win", "20")
        assert results[41]["outcome"] == "void"
    else:
        rolls = [(b["roll_id"], b["status"]) for b in rec.bodies("craps/roll")]
        assert rolls == [(1, "counted"), (2, "noroll"), (3, "pending")]
        decision = {"operator": "stick-1", "roll_id": 3, "decision": "valid"}
        assert (await table.request("roll_decision", decision))["status"] == "ok"

    # 2. The server killed mid-round, then started again. Each round's rest waits for a
    # cue (``wait FILE``, simulators/scripts.py), given once the fault is in place: an event,
    # never a time the fault must beat.
    first, rest, fact = plan.split(50)
    cue = table.workdir / "cue-50"
    await table.start_sim(f"{first}wait {cue}\n{rest}", wait=False, baud=115200)
    await table.wait_for(lambda: _logged(table, fact, **_first_split_fact(plan, 50)), what="1st")
    server.kill()
    await table.wait_for(lambda: _connected(table) is False, what="the device gone")
    await table.wait_for(lambda: _alarm(table, "DISCONNECTED"), what="DISCONNECTED")
    await asyncio.to_thread(server.start)
    cue.touch()  # the rest of the round, once the server is back
    await table.wait_sim_done()
    await table.wait_for(lambda: _connected(table) is True, what="the device back")
    await table.wait_for(lambda: _alarm(table, "DISCONNECTED") is None, what="its alarm cleared")
    await table.wait_published()
    plan.check_split(table, 50)
    records = [r for r in table.journal("--kind", "device") if "event" in r]
    kinds = [r["event"]["type"] for r in records]
    last = "RoundSettled" if plan.game == "CSP" else "DiceRolled"
    assert (
        "DeviceDisconnected" in kinds[kinds.index(fact) : len(kinds) - kinds[::-1].index(last)]
    ), "the kill was not mid-round"

    # 3. The network cut with the server up, then back.
    first, rest, fact = plan.split(60)
    cue = table.workdir / "cue-60"
    await table.start_sim(f"{first}wait {cue}\n{rest}", wait=False, baud=115200)
    await table.wait_for(lambda: _logged(table, fact, **_first_split_fact(plan, 60)), what="1st")
    await relay.cut()
    cue.touch()  # the rest of the round, sent into the cut
    await table.wait_for(lambda: _connected(table) is False, what="the loss seen")
    lost = [e for e in table.log_events() if e.get("event") == "device disconnected"][-1]
    assert lost["reason"] == f"silent for {SILENCE:g} s (no answer to QUERY)"
    await relay.restore()
    await table.wait_sim_done()
    await table.wait_for(lambda: _connected(table) is True, what="the device back")
    await table.wait_published()
    plan.check_split(table, 60)

    # 4. The server's port at 9600 under it: noise, LINK_ERRORS, nothing of it counts.
    first, rest, fact = plan.split(70)
    cue = table.workdir / "cue-70"
    await table.start_sim(f"{first}wait {cue}\n{rest}", wait=False, baud=115200)
    await table.wait_for(lambda: _logged(table, fact, **_first_split_fact(plan, 70)), what="1st")
    _set_line(table, 9600)
    cue.touch()  # the rest of the round, garbled on the way
    await table.wait_for(lambda: _alarm(table, "LINK_ERRORS") is not None, what="LINK_ERRORS")
    alarm = _alarm(table, "LINK_ERRORS")
    assert alarm is not None
    assert alarm["device"] == table.device
    assert "bytes outside any frame (noise)" in alarm["message"]
    if plan.game == "CSP":
        assert not [b for b in rec.bodies("cover_all/result") if b["round_id"] == 70]
        assert not _logged(table, "HandDealt", round=70, position="DL")
    else:
        assert not [b for b in rec.bodies("craps/roll") if b["roll_id"] == 71]
    assert _connected(table) is True  # the link is up: it carries garbage
    _set_line(table, 115200)
    await table.wait_sim_done()
    await table.wait_published()
    plan.check_split(table, 70)
    noise = [r for r in table.journal("--kind", "device") if "NoiseSeen" in str(r.get("event"))]
    assert noise, "the garbled frames were journaled as noise"

    rec.check_order()
    rec.raise_violations()
