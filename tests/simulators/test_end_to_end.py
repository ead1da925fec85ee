"""The real ``DeviceDriver`` against the real simulator over a real pty (or TCP), over a clean
link and over each fault (bellows' ``test_ash_end_to_end``).

The driver must deliver every frame the simulator had acknowledged exactly once and in order:
the simulator's own log (``SimulatedDevice.sent``) is the expectation, the facts its messages
carry. Bad frames the faults made must come out as ``BadFrameReceived`` (nothing
received is lost), and each unplug as one ``Disconnected``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from drivers.driver import DeviceDriver
from drivers.events import BadFrameReceived, Connected, Disconnected, DriverEvent, Received
from drivers.settings import DriverSettings
from rules.events import DeckChecked, DeviceFact, DeviceStatus, Game, ModeReported
from simulators.device_link import LinkTimings
from simulators.dice import DiceGame
from simulators.faults import RATES, Faults
from simulators.scripts import DeviceKind, Send, Step
from simulators.serve import SimulatedDevice
from simulators.shuffler import ShufflerGame

SPLIT = {"split_delay": 0.0002}
UNPLUG = {"unplug_pause": 0.02}


@dataclass(frozen=True)
class Case:
    """One end-to-end run: a device (and game), a fault setting, a port."""

    device: DeviceKind
    faults: Faults
    game: Game = "CSP"
    tcp: bool = False


CASES = {
    "clean": Case("shuffler", Faults(), "UTH"),
    "crc": Case("shuffler", Faults(crc=0.25), "CSP"),
    "garble": Case("shuffler", Faults(garble=0.25), "FCP"),
    "garbage": Case("shuffler", Faults(garbage=0.4), "LIR"),
    "split": Case("shuffler", Faults(split=1.0, **SPLIT), "MSP"),
    "duplicate": Case("shuffler", Faults(duplicate=0.4), "TCP"),
    "drop_ack": Case("shuffler", Faults(drop_ack=0.3), "BJ"),
    "disconnect": Case("shuffler", Faults(disconnect=0.1, **UNPLUG), "UTH"),
    "wrong_mode": Case("shuffler", Faults(wrong_mode=0.5), "CSP"),
    "bad_deck": Case("shuffler", Faults(bad_deck=1.0), "BJ"),  # one shoe in 4 rounds: fail it
    "status": Case("shuffler", Faults(status=0.5), "TCP"),
    "everything": Case(
        "shuffler",
        Faults(
            crc=0.1,
            garble=0.1,
            garbage=0.1,
            split=0.1,
            duplicate=0.1,
            drop_ack=0.1,
            disconnect=0.05,
            wrong_mode=0.2,
            bad_deck=0.2,
            status=0.2,
            **SPLIT,
            **UNPLUG,
        ),
        "UTH",
    ),
    "dice clean": Case("dice_reader", Faults()),
    "dice everything": Case(
        "dice_reader",
        Faults(
            crc=0.1,
            garble=0.1,
            garbage=0.1,
            split=0.1,
            duplicate=0.1,
            drop_ack=0.1,
            disconnect=0.05,
            status=0.2,
            **SPLIT,
            **UNPLUG,
        ),
    ),
    "tcp clean": Case("shuffler", Faults(), "LIR", tcp=True),
    "tcp everything": Case(
        "dice_reader",
        Faults(crc=0.1, garble=0.1, garbage=0.1, split=0.1, duplicate=0.1, drop_ack=0.1, **SPLIT),
        tcp=True,
    ),
}


def steps_for(case: Case, rng: random.Random) -> list[Step]:
    if case.device == "dice_reader":
        return list(DiceGame(rng, noroll_rate=0.2, check_rate=0.2, faults=case.faults).rolls(25))
    table = ShufflerGame(case.game, rng, faults=case.faults, void_rate=0.2, decks=2)
    return list(table.rounds(4))


@pytest.mark.parametrize("name", list(CASES))
async def test_driver_delivers_every_frame_once_in_order(
    no_leaks: None, tmp_path: Path, name: str
) -> None:
    case = CASES[name]
    hello = (
        Send.of("HELLO", "IDEAL-SIM", "2.1.0", "SN0001")
        if case.device == "shuffler"
        else Send.of("HELLO", "DICE-SIM", "1.0.0", "DR0042")
    )
    steps = steps_for(case, random.Random(name))
    link = tmp_path / "device"
    events: list[DriverEvent] = []
    async with SimulatedDevice(
        device=case.device,
        hello=hello,
        config=[Send.of("MODE", case.game)] if case.device == "shuffler" else [],
        faults=case.faults,
        rng=random.Random(f"{name} link"),
        timings=LinkTimings(ack_timeout=0.05),
        link=link,
        tcp_port=0 if case.tcp else None,
    ) as sim:
        url = f"socket://127.0.0.1:{sim.tcp.port}" if sim.tcp is not None else str(link)
        settings = DriverSettings(
            device=case.device, url=url, reconnect_initial=0.01, reconnect_max=0.05
        )
        driver = DeviceDriver(settings, rng=random.Random(0))

        async def consume() -> None:
            async with contextlib.aclosing(driver.events()) as stream:
                async for event in stream:
                    events.append(event)  # the driver ACKs once this body has run

        consumer = asyncio.create_task(consume())
        try:
            async with asyncio.timeout(60):  # a safety net, not a timing assertion
                # Power-up: what the device sent before the driver opened the port is gone
                # (a host drops stale input); from here on every transmission reaches it.
                await sim.finish()
                corrupted_before = sim.link.applied["crc"] + sim.link.applied["garble"]
                bad_before = sum(isinstance(e, BadFrameReceived) for e in events)
                frames = await sim.play(steps)
                await sim.finish()
        finally:
            consumer.cancel()
            await asyncio.gather(consumer, return_exceptions=True)

    assert frames == sum(isinstance(s, Send) for s in steps)
    expected: list[DeviceFact] = [m.fact for m in sim.sent]
    delivered = [e.fact for e in events if isinstance(e, Received)]
    assert delivered == expected
    # Every frame the game produced is among them, in order (nothing lost on the way).
    played = [",".join((m.kind, *m.fields())) for m in sim.sent]
    game_frames = [str(s) for s in steps if isinstance(s, Send)]
    assert _in_order(played, game_frames)
    hellos = played.count(str(hello))
    per_hello = 2 if case.device == "shuffler" else 1  # HELLO, then MODE for the shuffler
    assert len(played) == len(game_frames) + hellos * per_hello

    bad = [e for e in events if isinstance(e, BadFrameReceived)]
    applied = sim.link.applied
    if case.faults in (Faults(crc=0.25), Faults(garble=0.25)):
        corrupted = applied["crc"] + applied["garble"] - corrupted_before
        assert len(bad) - bad_before == corrupted > 0, "each bad frame, once"
    elif not (case.faults.crc or case.faults.garble or case.faults.disconnect):
        assert bad == [], "a clean or lossless link makes no bad frame"
    disconnects = [e for e in events if isinstance(e, Disconnected)]
    connects = [e for e in events if isinstance(e, Connected)]
    if not case.tcp:
        assert len(disconnects) == sim.unplugs
        assert len(connects) == sim.unplugs + 1
    if case.faults.disconnect:
        assert sim.unplugs > 0, "the fault should have fired in this run"
    # A case of one fault proves something only if that fault happened. Its draws come from
    # seeded RNGs in a fixed order (one fault: nothing else draws), so this is not luck.
    rates = [name for name in RATES if getattr(case.faults, name)]
    happened = {
        "drop_ack": sim.link.acks_dropped,
        "disconnect": sim.unplugs,
        "wrong_mode": sum(isinstance(f, ModeReported) and f.game != case.game for f in expected),
        "bad_deck": sum(isinstance(f, DeckChecked) and f.result != "OK" for f in expected),
        "status": sum(isinstance(f, DeviceStatus) and f.code != "READY" for f in expected),
    }
    if len(rates) == 1:
        (only,) = rates
        assert happened.get(only, applied[only]) > 0, f"{only} never happened"


def _in_order(haystack: list[str], needles: list[str]) -> bool:
    """``needles`` appear in ``haystack`` in this order (other frames may come between)."""
    position = 0
    for item in haystack:
        if position < len(needles) and item == needles[position]:
            position += 1
    return position == len(needles)
