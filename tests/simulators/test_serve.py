"""Serving a simulated device on a real pty and on TCP, against the scripted host."""

from __future__ import annotations

import asyncio
import os
import random
import termios
from pathlib import Path

from drivers.messages import Ack, Decoded, DeviceMessage, MessageDecoder, Query, encode_message
from rules import events as ev
from simulators.device_link import LinkTimings
from simulators.faults import Faults
from simulators.scripts import Send, parse_script
from simulators.serve import PtyPort, SimulatedDevice
from simulators.shuffler import ShufflerGame
from tests.simulators.host import ScriptedHost

FAST = LinkTimings(ack_timeout=0.02)
HELLO = Send.of("HELLO", "IDEAL-SIM", "2.1.0", "SN0001")


def shuffler(tmp_path: Path, *, timings: LinkTimings = FAST, **kwargs: object) -> SimulatedDevice:
    return SimulatedDevice(
        device="shuffler",
        hello=HELLO,
        config=[Send.of("MODE", "CSP")],
        timings=timings,
        link=tmp_path / "shuffler",
        **kwargs,  # type: ignore[arg-type]
    )


SCRIPT = """\
DECK,OK
HAND,812,P1,9c9d5h5s2c
HAND,812,P3,QhJhTh8h7h
unplug
HAND,812,DL,AcKd4s3h3c
ROUND,812,3
SETTLE,812
"""


async def test_script_over_a_pty_follows_the_symlink_across_an_unplug(
    no_leaks: None, tmp_path: Path
) -> None:
    link = tmp_path / "shuffler"
    async with shuffler(tmp_path, faults=Faults(unplug_pause=0.05)) as sim:
        first_pty = sim.path
        assert os.readlink(link) == first_pty
        async with ScriptedHost("shuffler", link) as host:
            await sim.play(parse_script(SCRIPT, device="shuffler"))
            await sim.finish()
            assert sim.pty.opened == 2
            assert sim.path != first_pty, "a replugged device gets a new pty"
            assert os.readlink(link) == sim.path
            assert host.opens >= 2
            # Each frame delivered once and in order, the reconnect's HELLO and MODE included.
            assert host.delivered == sim.sent
            kinds = [m.kind for m in sim.sent]
            assert kinds == [
                "HELLO", "MODE", "DECK", "HAND", "HAND",
                "HELLO", "MODE", "HAND", "ROUND", "SETTLE",
            ]  # fmt: skip
            assert [m.seq for m in sim.sent] == [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]
    assert not link.exists(), "the symlink goes with the device"


async def test_a_wait_step_holds_the_next_frame_until_its_file_exists(
    no_leaks: None, tmp_path: Path
) -> None:
    cue = tmp_path / "cue"
    script = f"DECK,OK\nwait {cue}\nHAND,812,P1,9c9d5h5s2c\n"
    async with (
        shuffler(tmp_path) as sim,
        ScriptedHost("shuffler", tmp_path / "shuffler") as host,
    ):
        player = asyncio.create_task(sim.play(parse_script(script, device="shuffler")))
        try:
            async with asyncio.timeout(30):
                while [m.kind for m in host.delivered] != ["HELLO", "MODE", "DECK"]:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            # Held while the file is missing (0.3 s here): the next frame does not go out.
            await asyncio.sleep(0.3)
            assert not player.done()
            assert [m.kind for m in host.delivered] == ["HELLO", "MODE", "DECK"]
            cue.touch()
            async with asyncio.timeout(30):
                assert await player == 2
                await sim.finish()
        finally:
            player.cancel()
        assert [m.kind for m in host.delivered] == ["HELLO", "MODE", "DECK", "HAND"]


async def test_honest_play_with_every_wire_fault_reaches_the_host_exactly_once(
    no_leaks: None, tmp_path: Path
) -> None:
    faults = Faults(
        crc=0.15, garble=0.15, garbage=0.2, split=0.2, duplicate=0.2, drop_ack=0.2,
        disconnect=0.05, split_delay=0.0002, unplug_pause=0.02,
    )  # fmt: skip
    game = ShufflerGame("UTH", random.Random(21), void_rate=0.2)
    async with (
        shuffler(tmp_path, faults=faults, rng=random.Random(22)) as sim,
        ScriptedHost("shuffler", tmp_path / "shuffler") as host,
    ):
        frames = await sim.play(game.rounds(8))
        await sim.finish()
        assert host.delivered == sim.sent
    expected = [
        str(step)
        for step in ShufflerGame("UTH", random.Random(21), void_rate=0.2).rounds(8)
        if isinstance(step, Send)
    ]
    assert frames == len(expected)
    played = [m for m in sim.sent if m.kind not in ("HELLO", "MODE")]
    assert [",".join((m.kind, *m.fields())) for m in played] == expected
    applied = sim.link.applied
    assert all(applied[name] for name in ("crc", "garble", "garbage", "split", "duplicate"))
    assert sim.link.acks_dropped
    assert sim.unplugs
    # Every corrupted frame the host was given is a bad frame to it. A write the pty dropped
    # (nobody reading it fast enough on a loaded machine, or the line unplugged) never
    # reached the host, corrupted or not.
    assert len(host.bad) >= applied["crc"] + applied["garble"] - sim.pty.dropped


async def test_tcp_serves_the_same_device_and_a_new_client_replaces_the_old(
    no_leaks: None, tmp_path: Path
) -> None:
    # No retransmission by timer here (what is resent is resent on QUERY): with FAST's 20 ms
    # a loaded machine sent MODE again to the old client before the new one connected.
    patient = LinkTimings(ack_timeout=60.0, slow_interval=60.0)
    async with shuffler(tmp_path, tcp_port=0, timings=patient) as sim:
        assert sim.tcp is not None
        port = sim.tcp.port

        async def client() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, MessageDecoder]:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(encode_message(Query()))
            return reader, writer, MessageDecoder(device="shuffler", sender="device")

        async def next_message(reader: asyncio.StreamReader, decoder: MessageDecoder) -> Decoded:
            async with asyncio.timeout(10):
                while True:
                    for item in decoder.feed(await reader.read(4096)):
                        assert isinstance(item, Decoded)
                        return item

        reader, writer, decoder = await client()
        hello = await next_message(reader, decoder)
        assert isinstance(hello.message, DeviceMessage)
        assert isinstance(hello.message.fact, ev.DeviceHello)
        writer.write(encode_message(Ack(seq=1)))
        mode = await next_message(reader, decoder)
        assert mode.message == DeviceMessage(seq=2, fact=ev.ModeReported(game="CSP"))

        reader2, writer2, decoder2 = await client()  # before ACKing MODE
        assert await reader.read() == b"", "the old client was dropped"
        writer.close()
        await writer.wait_closed()
        # The new client's QUERY: MODE (in flight) again at once, then HELLO and MODE.
        seen = []
        for _ in range(3):
            item = await next_message(reader2, decoder2)
            seen.append((item.message.kind, item.message.seq))
            writer2.write(encode_message(Ack(seq=item.message.seq)))
        assert seen == [("MODE", 2), ("HELLO", 1), ("MODE", 2)]
        await sim.finish()
        writer2.close()
        await writer2.wait_closed()


async def test_a_pty_nobody_reads_drops_writes_instead_of_stalling(no_leaks: None) -> None:
    received: list[bytes] = []
    arrived = asyncio.Event()

    def on_data(data: bytes) -> None:
        received.append(data)
        arrived.set()

    port = PtyPort(on_data=on_data)
    path = port.open()
    frame = b"$ROLL,2,5001,6,5*84C6\r\n"
    try:
        async with asyncio.timeout(30):  # would hang if writes waited for a reader
            for _ in range(2000):
                await port.write(frame)
        assert port.dropped > 0
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            termios.tcflush(fd, termios.TCIFLUSH)  # a host opening drops stale input
            await port.write(frame)
            got = b""
            async with asyncio.timeout(10):
                while len(got) < len(frame):
                    try:
                        got += os.read(fd, 4096)
                    except BlockingIOError:
                        await asyncio.sleep(0.001)
            assert got == frame, "raw mode: the bytes as written"
            os.write(fd, b"$QUERY,0*8F46\r\n")
            async with asyncio.timeout(10):
                await arrived.wait()
        finally:
            os.close(fd)
        assert b"".join(received) == b"$QUERY,0*8F46\r\n"
    finally:
        port.close()
