"""The serial line's model (``simulators.line``) and a simulated device on it: a host at
the wrong baud rate hears garbage, as at a real table (the expected bytes below are worked
out by hand from the waveforms, bit by bit)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.driver import DeviceDriver
from drivers.events import BadFrameReceived, Connected, DriverEvent, NoiseReceived, Received
from drivers.link import encode_frame
from drivers.settings import DriverSettings
from simulators.device_link import LinkTimings
from simulators.line import LineSettings, read_baudrate, set_baudrate, transfer
from simulators.scripts import Send
from simulators.serve import SimulatedDevice

FRAME = encode_frame("HELLO,1,IDEAL-SIM,2.1.0,SN0001")
L115200 = LineSettings(115200)
L9600 = LineSettings(9600)


@given(st.binary(max_size=300), st.sampled_from([300, 9600, 115200, 1_000_000]))
def test_a_receiver_set_as_the_sender_hears_what_was_sent(data: bytes, rate: int) -> None:
    line = LineSettings(rate)
    assert transfer(data, sent=line, heard=line) == data


def test_one_or_two_stop_bits_or_seven_data_bits_of_ascii_still_read() -> None:
    # A receiver checks one stop bit only; ASCII's eighth bit is 0, read as the stop bit.
    two_stops = LineSettings(115200, stopbits=2)
    assert transfer(FRAME, sent=two_stops, heard=L115200) == FRAME
    assert transfer(FRAME, sent=L115200, heard=two_stops) == FRAME
    assert transfer(FRAME, sent=L115200, heard=LineSettings(115200, bytesize=7)) == FRAME


def test_worked_examples() -> None:
    # 0xFF at 115200: a start bit of 1/12 of a bit at 9600; checked half a bit later the
    # line is back at 1: a glitch, no byte.
    assert transfer(b"\xff", sent=L115200, heard=L9600) == b""
    # 0x00 at 9600 is low for 9 bits: at 115200 the first byte reads 0x00, then the line
    # stays low (no new falling edge) until the stop bit.
    assert transfer(b"\x00", sent=L9600, heard=L115200) == b"\x00"
    # "U" (0x55: start 0, then 1 0 1 0 1 0 1 0, stop 1) at 9600 heard at 19200, each bit
    # sampled twice: 0 1 1 0 0 1 1 0 = 0x66, then from the next falling edge (bit 6)
    # 0 1 1 0 0 1 1 1 = 0xE6.
    assert transfer(b"U", sent=L9600, heard=LineSettings(19200)) == b"\x66\xe6"
    # Even parity at the receiver only: the first byte reads, the rest does not.
    heard = transfer(FRAME, sent=L115200, heard=LineSettings(115200, parity="E"))
    assert heard[:1] == b"$"
    assert heard != FRAME


@pytest.mark.parametrize("rate", [9600, 19200, 38400, 57600, 230400])
def test_a_frame_at_another_rate_is_noise_without_a_frame(rate: int) -> None:
    for sent, heard in ((L115200, LineSettings(rate)), (LineSettings(rate), L115200)):
        garbage = transfer(FRAME, sent=sent, heard=heard)
        assert garbage  # something arrives ...
        assert b"$" not in garbage  # ... and none of it starts a frame


def test_a_pty_keeps_the_baud_rate_a_host_sets() -> None:
    master, slave = os.openpty()
    try:
        for rate in (9600, 115200, 250_000):
            set_baudrate(slave, rate)
            assert read_baudrate(master) == rate  # one termios for both sides
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.parametrize(("host", "heard"), [(115200, "frames"), (9600, "noise")])
async def test_a_driver_at_the_device_s_rate_hears_it_at_another_noise_only(
    no_leaks: None, tmp_path: Path, host: int, heard: str
) -> None:
    link = tmp_path / "device"
    events: list[DriverEvent] = []
    async with SimulatedDevice(
        device="dice_reader",
        hello=Send.of("HELLO", "DICE-SIM", "1.0.0", "DR0042"),
        link=link,
        baudrate=115200,
        rng=random.Random(1),
        timings=LinkTimings(ack_timeout=0.05, slow_interval=0.1),
    ) as sim:
        settings = DriverSettings(
            device="dice_reader", url=str(link), baudrate=host, reconnect_initial=0.01
        )
        driver = DeviceDriver(settings, rng=random.Random(0))

        async def consume() -> None:
            async with contextlib.aclosing(driver.events()) as stream:
                async for event in stream:
                    events.append(event)

        consumer = asyncio.create_task(consume())
        try:
            async with asyncio.timeout(60):  # a safety net
                if heard == "frames":
                    await sim.play([Send.of("ROLL", "1", "3", "4")])
                else:
                    while sim.link.transmissions < 8 or len(events) < 8:  # noqa: ASYNC110
                        await asyncio.sleep(0.01)
        finally:
            consumer.cancel()
            await asyncio.gather(consumer, return_exceptions=True)
    assert isinstance(events[0], Connected)
    if heard == "frames":
        assert [type(e) for e in events[1:]] == [Received, Received]
        assert sim.link.acks_dropped == 0
    else:
        # Every transmission (HELLO, again and again: no ACK is understood) is noise.
        assert {type(e) for e in events[1:]} == {NoiseReceived}
        assert not any(isinstance(e, Received | BadFrameReceived) for e in events)
        assert sim.sent == []
