"""The asyncio driver over a real pty (and a real TCP socket), the test playing the device.

No assertion here is about time: waits have a safety timeout only, and "not yet ACKed" is
checked after the driver had every chance to send (it is suspended while the consumer holds
an event, so it cannot).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator
from importlib.metadata import version
from pathlib import Path

import pytest
import serial
import serial_asyncio_fast
import structlog

from drivers import messages as m
from drivers.driver import DeviceDriver, _Port, _Transport
from drivers.errors import DriverConfigError
from drivers.events import (
    BadFrameReceived,
    Connected,
    Disconnected,
    DriverEvent,
    NoiseReceived,
    Received,
)
from drivers.link import next_seq
from drivers.settings import DriverSettings, Rs485
from foundation.backoff import Backoff
from rules import events as ev
from tests.drivers.conftest import WAIT, PtyDevice

HELLO = m.DeviceMessage(
    seq=1,
    fact=ev.DeviceHello(device="shuffler", model="IDEAL-SIM", firmware="2.1.0", serial="SN0001"),
)
DICE_HELLO = m.DeviceMessage(
    seq=1,
    fact=ev.DeviceHello(device="dice_reader", model="DICE-SIM", firmware="1.0.0", serial="DR0042"),
)


def fast_driver(device: ev.Device, url: str, **kwargs: float | None) -> DeviceDriver:
    """A driver with small injected delays (no patched constants)."""
    options: dict[str, float | None] = {"reconnect_initial": 0.02, "reconnect_max": 0.1}
    options.update(kwargs)
    settings = DriverSettings(device=device, url=url, **options)  # type: ignore[arg-type]
    return DeviceDriver(settings, rng=random.Random(4))


@contextlib.asynccontextmanager
async def running(driver: DeviceDriver) -> AsyncIterator[AsyncGenerator[DriverEvent, None]]:
    """The driver's event stream, closed on exit (the port with it)."""
    async with contextlib.aclosing(driver.events()) as events:
        yield events


async def pull(events: AsyncGenerator[DriverEvent, None]) -> DriverEvent:
    """The next event (the previous one is then done: its ACK goes out)."""
    async with asyncio.timeout(WAIT):
        return await anext(events)


async def settle() -> None:
    """Let the loop run every ready callback (the driver's writes, the device's reads) and
    the driver's short timers (reopen attempts, ``fast_driver``) fire a few times: a window
    in which something must not happen, so its time is the check."""
    for _ in range(20):
        await asyncio.sleep(0.005)


def is_open(path: Path) -> bool:
    """Whether one of the process's file descriptors is the file ``path`` leads to."""
    target = os.path.realpath(path)
    return any(
        os.path.realpath(f"/proc/self/fd/{fd}") == target for fd in os.listdir("/proc/self/fd")
    )


async def connect(events: AsyncGenerator[DriverEvent, None], device: PtyDevice) -> None:
    assert isinstance(await pull(events), Connected)
    assert await device.expect() == m.Query()


async def test_hello_is_acked_only_when_the_consumer_asks_for_the_next_event(
    pty_device: PtyDevice, link_path: Path
) -> None:
    async with running(fast_driver("shuffler", str(link_path))) as events:
        first = await pull(events)
        assert first == Connected(device="shuffler", url=str(link_path))
        assert await pty_device.expect() == m.Query()  # link-layer.md: QUERY after connecting
        pty_device.send(HELLO)
        pty_device.send(m.DeviceMessage(seq=2, fact=ev.ModeReported(game="CSP")))
        hello = await pull(events)
        assert hello == Received(
            device="shuffler",
            seq=1,
            raw=b"$HELLO,1,IDEAL-SIM,2.1.0,SN0001*F9E4\r\n",
            fact=ev.DeviceHello(
                device="shuffler", model="IDEAL-SIM", firmware="2.1.0", serial="SN0001"
            ),
        )
        await settle()
        assert pty_device.quiet()  # the consumer still holds HELLO: no ACK yet
        mode = await pull(events)
        assert await pty_device.expect() == m.Ack(seq=1)
        assert isinstance(mode, Received)
        assert mode.fact == ev.ModeReported(game="CSP")
        await settle()
        assert pty_device.quiet()
        next_event = asyncio.ensure_future(pull(events))
        assert await pty_device.expect() == m.Ack(seq=2)
        next_event.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await next_event


async def test_repeats_are_acked_again_and_delivered_once(
    pty_device: PtyDevice, link_path: Path
) -> None:
    async with running(fast_driver("shuffler", str(link_path))) as events:
        await connect(events, pty_device)
        hand = m.DeviceMessage(
            seq=2,
            fact=ev.HandDealt(round_id=812, position="P1", cards=("9c", "9d", "5h", "5s", "2c")),
        )
        pty_device.send(HELLO)
        pty_device.send(HELLO)  # the ACK was "lost": the same frame again
        assert isinstance(await pull(events), Received)
        pty_device.send(hand)
        got = await pull(events)
        assert await pty_device.expect() == m.Ack(seq=1)
        assert await pty_device.expect() == m.Ack(seq=1)  # the repeat, ACKed again
        assert isinstance(got, Received)
        assert got.fact == ev.HandDealt(
            round_id=812, position="P1", cards=("9c", "9d", "5h", "5s", "2c")
        )
        pty_device.send(hand)  # retransmitted while the consumer holds it
        pty_device.send(m.DeviceMessage(seq=3, fact=ev.RoundDealt(round_id=812, hands=1)))
        got = await pull(events)
        assert isinstance(got, Received)
        assert got.seq == 3  # seq 2 was not delivered twice
        assert [await pty_device.expect() for _ in range(2)] == [m.Ack(seq=2), m.Ack(seq=2)]


async def test_a_frame_taken_before_a_host_restart_is_acked_not_delivered_again(
    pty_device: PtyDevice, link_path: Path
) -> None:
    # The previous host process journaled HAND seq 2 and died before its ACK went out.
    hand = m.DeviceMessage(
        seq=2, fact=ev.HandDealt(round_id=812, position="P1", cards=("9c", "9d", "5h", "5s", "2c"))
    )
    last = (2, m.encode_message(hand))
    settings = DriverSettings(
        device="shuffler", url=str(link_path), reconnect_initial=0.02, reconnect_max=0.1
    )
    driver = DeviceDriver(settings, rng=random.Random(4), last_frame=last)
    async with running(driver) as events:
        await connect(events, pty_device)
        pty_device.send(hand)  # the device retransmits: no ACK came
        pty_device.send(m.DeviceMessage(seq=3, fact=ev.RoundDealt(round_id=812, hands=1)))
        got = await pull(events)
        assert isinstance(got, Received)
        assert got.seq == 3  # the HAND was not delivered a second time
        assert await pty_device.expect() == m.Ack(seq=2)  # but it was acknowledged


async def test_bad_frames_are_naked_at_once_and_delivered(
    pty_device: PtyDevice, link_path: Path
) -> None:
    async with running(fast_driver("dice_reader", str(link_path))) as events:
        await connect(events, pty_device)
        # dice-reader-icd.md "Example", verbatim.
        pty_device.send(b"$HELLO,1,DICE-SIM,1.0.0,DR0042*3319\r\n")
        assert isinstance(await pull(events), Received)
        pty_device.send(b"$ROLL,2,5001,6,5*84C6\r\n")
        roll = await pull(events)
        assert await pty_device.expect() == m.Ack(seq=1)
        assert isinstance(roll, Received)
        assert roll.fact == ev.DiceRolled(roll_id=5001, dice=(6, 5))
        pty_device.send(b"$ROLL,3,5002,2,2x*AD5C\r\n")
        bad = await pull(events)
        assert await pty_device.expect() == m.Ack(seq=2)
        assert bad == BadFrameReceived(
            device="dice_reader",
            raw=b"$ROLL,3,5002,2,2x*AD5C\r\n",
            reason="ROLL die 2 '2x' is not a decimal number",
        )
        assert await pty_device.expect() == m.Nak(seq=3)  # NAKed before the consumer is done
        pty_device.send(b"$ROLL,3,5002,2,2*A976\r\n")
        roll = await pull(events)
        assert isinstance(roll, Received)
        assert roll.fact == ev.DiceRolled(roll_id=5002, dice=(2, 2))
        # noise, a bad CRC, a ROLL's frame cut short
        pty_device.send(b"\x00\xff noise $CHECK,4,5003,1,6,ON_CHIPS*0000\r\n$ROLL,4,50")
        pty_device.send(b"$CHECK,4,5003,1,6,ON_CHIPS*4DB0\r\n")
        got = [await pull(events) for _ in range(4)]
        # The noise before the first '$' is delivered too (after the frames of its read),
        # and not answered.
        noise = [e for e in got if isinstance(e, NoiseReceived)]
        assert noise == [NoiseReceived(device="dice_reader", raw=b"\x00\xff noise ", size=9)]
        first, second, check = [e for e in got if not isinstance(e, NoiseReceived)]
        assert isinstance(first, BadFrameReceived)
        assert "bad CRC" in first.reason
        assert isinstance(second, BadFrameReceived)
        assert "cut short" in second.reason
        assert isinstance(check, Received)
        assert check.fact == ev.RollCheck(roll_id=5003, dice=(1, 6), reason="ON_CHIPS")
        heard = [await pty_device.expect() for _ in range(3)]
        assert heard == [m.Ack(seq=3), m.Nak(seq=0), m.Nak(seq=0)]


async def test_noise_is_delivered_unanswered_after_the_frames_of_its_read(
    pty_device: PtyDevice, link_path: Path
) -> None:
    async with running(fast_driver("dice_reader", str(link_path))) as events:
        await connect(events, pty_device)
        pty_device.send(b"\x00\xff\x80noise")
        assert await pull(events) == NoiseReceived(
            device="dice_reader", raw=b"\x00\xff\x80noise", size=8
        )
        pty_device.send(DICE_HELLO)
        assert isinstance(await pull(events), Received)
        waiting = asyncio.ensure_future(pull(events))
        assert await pty_device.expect() == m.Ack(seq=1)
        await settle()
        assert pty_device.quiet()  # the noise was not answered: there is no frame to NAK
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting


async def test_wrong_device_and_host_messages_are_bad_frames(
    pty_device: PtyDevice, link_path: Path
) -> None:
    async with running(fast_driver("shuffler", str(link_path))) as events:
        await connect(events, pty_device)
        pty_device.send(m.DeviceMessage(seq=1, fact=ev.DiceRolled(roll_id=1, dice=(1, 2))))
        pty_device.send(m.Ack(seq=1))
        first, second = await pull(events), await pull(events)
        assert first == BadFrameReceived(
            device="shuffler",
            raw=m.encode_message(
                m.DeviceMessage(seq=1, fact=ev.DiceRolled(roll_id=1, dice=(1, 2)))
            ),
            reason="ROLL is not a shuffler message",
        )
        assert isinstance(second, BadFrameReceived)
        assert "sent by the host" in second.reason
        assert [await pty_device.expect() for _ in range(2)] == [m.Nak(seq=1), m.Nak(seq=1)]


async def test_hello_resets_the_sequence_and_a_number_repeated_with_other_content_is_new(
    pty_device: PtyDevice, link_path: Path
) -> None:
    async with running(fast_driver("shuffler", str(link_path))) as events:
        await connect(events, pty_device)
        pty_device.send(HELLO)
        pty_device.send(m.DeviceMessage(seq=2, fact=ev.ModeReported(game="UTH")))
        # Same number, other content: no retransmission but a device that restarted while
        # its HELLO was lost. Dropping it would lose an event the device saw ACKed.
        pty_device.send(m.DeviceMessage(seq=2, fact=ev.ModeReported(game="TCP")))
        pty_device.send(HELLO)  # the device restarted (its bytes equal the first HELLO's)
        # After the reset, the same bytes are new.
        pty_device.send(m.DeviceMessage(seq=2, fact=ev.ModeReported(game="UTH")))
        got = [await pull(events) for _ in range(5)]
        assert all(isinstance(e, Received) for e in got)
        assert [e.fact for e in got if isinstance(e, Received)] == [
            ev.DeviceHello(device="shuffler", model="IDEAL-SIM", firmware="2.1.0", serial="SN0001"),
            ev.ModeReported(game="UTH"),
            ev.ModeReported(game="TCP"),
            ev.DeviceHello(device="shuffler", model="IDEAL-SIM", firmware="2.1.0", serial="SN0001"),
            ev.ModeReported(game="UTH"),
        ]
        heard = [await pty_device.expect() for _ in range(4)]
        assert heard == [m.Ack(seq=1), m.Ack(seq=2), m.Ack(seq=2), m.Ack(seq=1)]


async def test_unplug_reconnects_and_a_frame_whose_ack_died_is_not_delivered_twice(
    link_path: Path,
) -> None:
    device = PtyDevice(link_path)
    try:
        async with running(fast_driver("shuffler", str(link_path))) as events:
            await connect(events, device)
            device.send(HELLO)
            assert isinstance(await pull(events), Received)
            settle_msg = m.DeviceMessage(seq=2, fact=ev.RoundSettled(round_id=812))
            device.send(settle_msg)
            got = await pull(events)
            assert isinstance(got, Received)
            assert got.fact == ev.RoundSettled(round_id=812)
            # the cable is pulled while the consumer journals SETTLE: its ACK cannot go out
            device.unplug()
            lost = await pull(events)
            assert isinstance(lost, Disconnected)
            assert lost.device == "shuffler"
            assert lost.reason.startswith("port lost")
            # replugged: a new pty behind the same path; the driver finds it by itself
            device = PtyDevice(link_path)
            assert isinstance(await pull(events), Connected)
            assert await device.expect() == m.Query()
            device.send(settle_msg)  # the device retransmits: it never saw the ACK
            device.send(m.DeviceMessage(seq=3, fact=ev.RoundVoided(round_id=813)))
            nxt = await pull(events)
            assert isinstance(nxt, Received)
            assert nxt.seq == 3  # SETTLE was journaled once
            assert await device.expect() == m.Ack(seq=2)
            # unplugged again while the driver waits to read
            waiting = asyncio.ensure_future(pull(events))
            assert await device.expect() == m.Ack(seq=3)
            device.unplug()
            lost = await waiting
            assert isinstance(lost, Disconnected)
            assert lost.reason.startswith("port lost")
    finally:
        device.unplug()


async def test_port_absent_at_start_is_retried_until_it_appears(link_path: Path) -> None:
    async with running(fast_driver("dice_reader", str(link_path))) as events:
        first = asyncio.ensure_future(pull(events))
        await settle()
        assert not first.done()  # nothing to open yet, nothing to report
        device = PtyDevice(link_path)
        try:
            assert isinstance(await first, Connected)
            assert await device.expect() == m.Query()
        finally:
            device.unplug()


async def test_rs485_on_a_port_whose_kernel_driver_has_none_is_refused_with_a_sentence(
    pty_device: PtyDevice, link_path: Path, open_fds: set[str]
) -> None:
    # A pty, like most USB adapters, has no RS-485 mode (TIOCSRS485): the port does not
    # open, the log says why, and the driver keeps trying (the adapter may be replaced).
    settings = DriverSettings(
        device="shuffler",
        url=str(link_path),
        reconnect_initial=0.01,
        reconnect_max=0.02,
        rs485=Rs485(delay_before_tx=0.001),
    )
    driver = DeviceDriver(settings, rng=random.Random(4))
    with structlog.testing.capture_logs() as logs:
        async with running(driver) as events:
            first = asyncio.ensure_future(pull(events))
            async with asyncio.timeout(WAIT):
                while sum(e["event"] == "open failed" for e in logs) < 3:  # noqa: ASYNC110
                    await asyncio.sleep(0.005)
            assert not first.done()  # never connected
            first.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await first
    failure = next(e for e in logs if e["event"] == "open failed")
    assert failure["error"] == (
        f"{link_path} refuses RS-485 mode ([Errno 25] Inappropriate ioctl for device): its "
        "kernel driver has none; use an adapter that switches its transmitter by itself and "
        "set rs485 = false"
    )
    assert pty_device.quiet()  # nothing was sent: the port was closed at once
    assert set(os.listdir("/proc/self/fd")) <= open_fds  # each refused open closed its port


async def test_port_is_opened_exclusively(pty_device: PtyDevice, link_path: Path) -> None:
    async with running(fast_driver("shuffler", str(link_path))) as events:
        await connect(events, pty_device)
        with pytest.raises(serial.SerialException, match="exclusively lock"):
            serial.Serial(str(link_path), exclusive=True)


async def test_silence_probes_with_query_then_disconnects(
    pty_device: PtyDevice, link_path: Path
) -> None:
    async with running(fast_driver("shuffler", str(link_path), silence_timeout=0.2)) as events:
        await connect(events, pty_device)
        lost = asyncio.ensure_future(pull(events))
        assert await pty_device.expect() == m.Query()  # the probe
        event = await lost
        assert isinstance(event, Disconnected)
        assert event.reason == "silent for 0.2 s (no answer to QUERY)"
        assert isinstance(await pull(events), Connected)
        assert await pty_device.expect() == m.Query()


async def test_a_device_that_answers_the_silence_probe_keeps_the_link_up(
    pty_device: PtyDevice, link_path: Path
) -> None:
    # 3 s to answer the probe: the answer must not race a loaded machine's scheduler (at
    # 0.2 s it lost once at load 13), while the silence itself is the other test's.
    async with running(fast_driver("shuffler", str(link_path), silence_timeout=3.0)) as events:
        await connect(events, pty_device)
        answered = asyncio.ensure_future(pull(events))
        assert await pty_device.expect() == m.Query()  # the probe, after 3 s of silence
        pty_device.send(HELLO)
        assert isinstance(await answered, Received)


async def test_the_answer_to_the_silence_probe_is_marked(
    pty_device: PtyDevice, link_path: Path
) -> None:
    # link-layer.md: QUERY -> HELLO, then the configuration (MODE). The daemon keeps those
    # as probe replies: the device did not restart, it was asked how it is.
    # 3 s to answer the probe, as above: the answer must not race the scheduler.
    async with running(fast_driver("shuffler", str(link_path), silence_timeout=3.0)) as events:
        await connect(events, pty_device)
        # The answer to the QUERY of the connect: not a probe's.
        pty_device.send(HELLO)
        pty_device.send(m.DeviceMessage(seq=2, fact=ev.ModeReported(game="CSP")))
        for _ in range(2):
            first = await pull(events)
            assert isinstance(first, Received)
            assert not first.probe
        answered = asyncio.ensure_future(pull(events))
        assert await pty_device.expect() == m.Ack(seq=1)
        assert await pty_device.expect() == m.Ack(seq=2)
        assert await pty_device.expect() == m.Query()  # the silence probe
        pty_device.send(m.DeviceMessage(seq=1, fact=HELLO.fact))
        hello = await answered
        assert isinstance(hello, Received)
        assert hello.probe
        pty_device.send(m.DeviceMessage(seq=2, fact=ev.ModeReported(game="CSP")))
        mode = await pull(events)
        assert isinstance(mode, Received)
        assert mode.probe
        pty_device.send(m.DeviceMessage(seq=3, fact=ev.DeckChecked(result="OK")))
        deck = await pull(events)
        assert isinstance(deck, Received)
        assert not deck.probe  # the answer is over


async def test_socket_url_and_dropped_connection(unused_tcp_port: int) -> None:
    connections: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await connections.put((reader, writer))

    server = await asyncio.start_server(accept, "127.0.0.1", unused_tcp_port)
    url = f"socket://127.0.0.1:{unused_tcp_port}"
    writers: list[asyncio.StreamWriter] = []
    try:
        async with running(fast_driver("dice_reader", url)) as events:
            assert await pull(events) == Connected(device="dice_reader", url=url)
            async with asyncio.timeout(WAIT):
                reader, writer = await connections.get()
                writers.append(writer)
                assert await reader.readline() == m.encode_message(m.Query())
            writer.write(m.encode_message(DICE_HELLO))
            assert isinstance(await pull(events), Received)
            writer.close()  # the device server drops the connection
            lost = await pull(events)
            assert isinstance(lost, Disconnected)
            assert await pull(events) == Connected(device="dice_reader", url=url)
            async with asyncio.timeout(WAIT):
                reader, writer = await connections.get()
                writers.append(writer)
                assert await reader.readline() == m.encode_message(m.Query())
    finally:
        for writer in writers:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_cancellation_closes_the_port_and_leaks_nothing(
    pty_device: PtyDevice, link_path: Path, open_fds: set[str]
) -> None:
    driver = fast_driver("shuffler", str(link_path))
    seen: list[DriverEvent] = []

    async def consume() -> None:
        async for event in driver.events():
            seen.append(event)

    before = asyncio.all_tasks()
    task = asyncio.create_task(consume())
    assert await pty_device.expect() == m.Query()
    pty_device.send(HELLO)
    await pty_device.expect()  # ACK,1: the consumer went round its loop
    assert is_open(link_path)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await settle()
    assert asyncio.all_tasks() == before
    pty_device.unplug()
    assert set(os.listdir("/proc/self/fd")) <= open_fds
    assert [type(e) for e in seen] == [Connected, Received]


async def test_closing_the_iterator_while_it_waits_for_a_port(
    link_path: Path, open_fds: set[str]
) -> None:
    before = asyncio.all_tasks()
    async with running(fast_driver("shuffler", str(link_path))) as events:
        pending = asyncio.ensure_future(pull(events))
        await settle()
        pending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pending
    await settle()
    assert asyncio.all_tasks() == before
    assert set(os.listdir("/proc/self/fd")) <= open_fds


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"url": "spy:///dev/ttyUSB0"}, "scheme 'spy' is not supported"),
        ({"url": "rfc2217://host"}, "is not rfc2217://host:port"),
        ({"url": "rfc2217://host:1?logging=debug"}, "lammer logs the negotiation itself"),
        ({"url": "rfc2217://host:1?poll_modem"}, "reads no modem line"),
        ({"url": "rfc2217://host:1?timeout=0"}, r"timeout=0 s is not in 0\.\.60"),
        ({"url": "rfc2217://host:1?timeout=soon"}, "not a number of seconds"),
        ({"url": "rfc2217://host:1?nagle=off"}, "unknown option 'nagle'"),
        ({"url": "rfc2217://host:1", "xonxoff": True, "rtscts": True}, "not both"),
        ({"url": "socket://host:1", "rs485": Rs485()}, "rs485 is for a serial port"),
        ({"rs485": Rs485(), "rtscts": True}, "rs485 and rtscts cannot go together"),
        ({"url": "socket://host"}, "is not socket://host:port"),
        ({"url": "socket://host:99999"}, "bad port"),
        ({"url": ""}, "URL is empty"),
        ({"url": "socket://[::1:5"}, "is not a URL: Invalid IPv6 URL"),
        ({"url": "socket://" + "a" * 70 + ".example:1"}, "host name in .* is not valid"),
        ({"url": "/dev/tty\0USB0"}, "contains a NUL byte"),
        ({"baudrate": 0}, "baud rate 0 is out of range"),
        ({"baudrate": 2**40}, "baud rate 1099511627776 is out of range 1..2147483647"),
        ({"ack_deadline": 0}, "ack_deadline"),
        ({"silence_timeout": -1}, "silence_timeout"),
        ({"reconnect_initial": 5, "reconnect_max": 1}, "reconnect delays"),
        ({"device": "roulette"}, "'roulette'"),
        ({"parity": "X"}, "port settings 8X1"),
        ({"bytesize": 9}, "port settings 9N1"),
        ({"stopbits": 3}, "stop bits 3"),
    ],
)
def test_settings_that_cannot_work_fail_at_once(kwargs: dict[str, object], fragment: str) -> None:
    options: dict[str, object] = {"device": "shuffler", "url": "/dev/ttyUSB0"}
    options.update(kwargs)
    with pytest.raises(DriverConfigError, match=fragment):
        DriverSettings(**options)  # type: ignore[arg-type]


def test_backoff_is_jittered_exponential_and_capped() -> None:
    settings = DriverSettings(
        device="shuffler", url="/dev/null", reconnect_initial=0.5, reconnect_max=30.0
    )
    driver = DeviceDriver(settings, rng=random.Random(1))
    delays = [driver.backoff(n) for n in range(12)]
    for n, delay in enumerate(delays):
        cap = min(30.0, 0.5 * 2**n)
        assert cap / 2 <= delay <= cap
    assert max(delays) <= 30.0
    assert len(set(delays)) == len(delays)  # jittered, not a fixed ladder
    again = DeviceDriver(settings, rng=random.Random(1))
    assert [again.backoff(n) for n in range(12)] == delays  # seedable
    # The driver's delays are the shared policy's (foundation.backoff), draw for draw.
    rng = random.Random(1)
    assert delays == [Backoff(0.5, 30.0).delay(n, rng) for n in range(12)]


def test_sequence_wraps_from_9999_to_1() -> None:
    assert next_seq(1) == 2
    assert next_seq(9999) == 1


async def test_device_that_floods_and_never_reads_cannot_stall_or_bloat_the_driver(
    pty_device: PtyDevice, link_path: Path
) -> None:
    # Every "$X\r\n" is a bad frame answered by a 13-byte NAK: 3000 of them are more than a
    # pty holds when the device never reads. pyserial's non-blocking write would spin on the
    # full buffer forever; the driver must keep going and drop answers beyond a small buffer.
    count = 3000
    async with running(fast_driver("shuffler", str(link_path))) as events:
        await connect(events, pty_device)
        asyncio.get_running_loop().remove_reader(pty_device.master)  # stop reading
        flood = b"$X\r\n" * 100

        async def send_flood() -> None:
            for _ in range(count // 100):
                pty_device.send(flood)
                await asyncio.sleep(0)

        sender = asyncio.ensure_future(send_flood())
        bad = [await pull(events) for _ in range(count)]
        await sender
        assert all(isinstance(e, BadFrameReceived) for e in bad)
        # the device reads again: what it finds is bounded, and the link still works
        pty_device.raw.clear()
        asyncio.get_running_loop().add_reader(pty_device.master, pty_device._readable)
        pty_device.send(HELLO)
        got = await pull(events)
        assert isinstance(got, Received)
        after = asyncio.ensure_future(pull(events))  # asking for the next event sends the ACK
        naks = 0
        while True:
            message = await pty_device.expect()
            if message != m.Nak(seq=0):
                break
            naks += 1
        assert message == m.Ack(seq=1)
        assert naks < count  # answers were dropped rather than held without bound
        after.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await after


def test_port_write_reports_a_full_buffer_instead_of_spinning() -> None:
    # pyserial's own non-blocking write retries EAGAIN forever (the loop would freeze).
    master, slave = os.openpty()
    try:
        port = _Port(os.ttyname(slave), exclusive=True)
        port.write_timeout = 0
        try:
            with pytest.raises(BlockingIOError):  # noqa: PT012 - fills the buffer first
                for _ in range(100_000):
                    port.write(b"$NAK,0*4F60\r\n")
        finally:
            port.close()
    finally:
        os.close(master)
        os.close(slave)


PRIVATE_PARTS = ("_write_ready", "_remove_writer", "_fatal_error", "_abort")


async def test_the_private_parts_of_pyserial_asyncio_fast_the_driver_overrides_are_there() -> None:
    # drivers/driver.py's _Transport works around a bug of pyserial-asyncio-fast 0.16 by
    # overriding private methods and reading a private buffer (pyproject.toml pins <0.17 and
    # names the upstream fix). If a release renames them, the workaround silently stops
    # applying: fail here, loudly, instead.
    base = serial_asyncio_fast.SerialTransport
    missing = [name for name in PRIVATE_PARTS if not callable(getattr(base, name, None))]
    assert not missing, (
        f"pyserial-asyncio-fast {version('pyserial-asyncio-fast')} has no {missing}: "
        "drivers/driver.py's _Transport overrides them; check whether the upstream fix of "
        "the deferred-write bug is released, then drop or port _Transport"
    )
    assert list(inspect.signature(base._fatal_error).parameters) == ["self", "exc", "message"]
    assert list(inspect.signature(base._write_ready).parameters) == ["self"]
    master, slave = os.openpty()
    port = _Port(os.ttyname(slave), exclusive=True)
    try:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport = _Transport(loop, asyncio.StreamReaderProtocol(reader), port)
        assert isinstance(getattr(transport, "_write_buffer", None), list), (
            "SerialTransport._write_buffer is gone: _Transport._write_ready reads it"
        )
        transport.abort()
        # The transport closes the port in a background task.
        async with asyncio.timeout(WAIT):
            while port.is_open:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
    finally:
        port.close()
        os.close(master)
        os.close(slave)
