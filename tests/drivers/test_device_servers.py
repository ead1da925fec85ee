"""The driver through serial device servers no one here wrote: Debian's ser2net as raw TCP
(``socket://``) and as RFC 2217 (``rfc2217://``), and pyserial's own RFC 2217 server
(``PortManager``), each a real process on loopback serving a simulated device's pty. The
table's whole story through them (a daemon, its alarms, a server killed, the network cut,
the line's rate changed) is ``tests/integration/test_device_servers.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import structlog

from drivers.driver import DeviceDriver
from drivers.events import Connected, DriverEvent, NoiseReceived, Received
from drivers.settings import DriverSettings
from simulators.device_link import LinkTimings
from simulators.scripts import Send
from simulators.serve import SimulatedDevice
from simulators.shuffler import ShufflerGame
from tests.device_servers import DeviceServer, PortManagerServer, Ser2net

# Device servers are processes of their own, as a broker is (make check leaves them out).
pytestmark = pytest.mark.service

SERVERS: dict[str, Callable[[Path, Path], DeviceServer]] = {
    "ser2net raw": lambda work, link: Ser2net(work, link, "raw"),
    "ser2net rfc2217": lambda work, link: Ser2net(work, link, "rfc2217"),
    "pyserial PortManager": lambda work, link: PortManagerServer(work, link),
}
HELLO = Send.of("HELLO", "IDEAL-SIM", "2.1.0", "SN0001")


@contextlib.asynccontextmanager
async def simulated(link: Path, baudrate: int) -> AsyncIterator[SimulatedDevice]:
    """A shuffler (CSP) on a pty behind ``link``, a line at ``baudrate``."""
    async with SimulatedDevice(
        device="shuffler",
        hello=HELLO,
        config=[Send.of("MODE", "CSP")],
        link=link,
        baudrate=baudrate,
        rng=random.Random(2),
        timings=LinkTimings(ack_timeout=0.2),
    ) as sim:
        yield sim


@contextlib.asynccontextmanager
async def serving(server: DeviceServer) -> AsyncIterator[DeviceServer]:
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def reading(url: str, baudrate: int, events: list[DriverEvent]) -> AsyncIterator[None]:
    """A driver on ``url`` whose events go to ``events`` while the block runs."""
    settings = DriverSettings(
        device="shuffler", url=url, baudrate=baudrate, reconnect_initial=0.02, reconnect_max=0.2
    )
    driver = DeviceDriver(settings, rng=random.Random(0))

    async def consume() -> None:
        async with contextlib.aclosing(driver.events()) as stream:
            async for event in stream:
                events.append(event)

    task = asyncio.create_task(consume())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def until(predicate: Callable[[], object], what: str) -> None:
    """Wait (60 s at most: a safety net, never what is tested) until ``predicate()``."""
    try:
        async with asyncio.timeout(60):
            while not predicate():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


@pytest.mark.parametrize("kind", list(SERVERS))
async def test_every_frame_once_and_in_order_through_the_server(
    no_leaks: None, tmp_path: Path, kind: str
) -> None:
    link = tmp_path / "shuffler"
    events: list[DriverEvent] = []
    steps = list(ShufflerGame("CSP", random.Random(kind), void_rate=0.3).rounds(3))
    async with (
        simulated(link, 115200) as sim,
        serving(SERVERS[kind](tmp_path, link)) as server,
        reading(server.url, 115200, events),
    ):
        await until(lambda: any(isinstance(e, Received) for e in events), "the HELLO")
        await sim.finish()
        await sim.play(steps)
        await sim.finish()
        await until(
            lambda: len([e for e in events if isinstance(e, Received)]) >= len(sim.sent),
            "every frame",
        )
    delivered = [e.fact for e in events if isinstance(e, Received)]
    assert delivered == [m.fact for m in sim.sent]
    assert sum(isinstance(e, Connected) for e in events) == 1
    assert not any(isinstance(e, NoiseReceived) for e in events)


@pytest.mark.parametrize("kind", ["ser2net rfc2217", "pyserial PortManager"])
async def test_rfc2217_sets_the_table_s_baud_rate_on_the_server_s_port(
    no_leaks: None, tmp_path: Path, kind: str
) -> None:
    # The server's own setting is 9600 (ser2net's configuration; PortManager opens at
    # 115200); the device and the table's configuration say 57600. Over RFC 2217 the
    # table's setting reaches the port: the device is heard.
    link = tmp_path / "shuffler"
    events: list[DriverEvent] = []
    server = SERVERS[kind](tmp_path, link)
    if isinstance(server, Ser2net):
        server.baud = 9600
    async with (
        simulated(link, 57600) as sim,
        serving(server),
        reading(server.url, 57600, events),
    ):
        await until(lambda: any(isinstance(e, Received) for e in events), "the HELLO")
        await sim.play([Send.of("DECK", "OK")])
        await sim.finish()
        assert sim.pty.host_baudrate() == 57600
    assert not any(isinstance(e, NoiseReceived) for e in events)


async def test_over_raw_tcp_the_line_is_the_server_s_and_a_wrong_one_is_noise(
    no_leaks: None, tmp_path: Path
) -> None:
    # The same device behind ser2net's raw TCP port set to 9600: the table's baud rate
    # cannot reach the port, the device's frames arrive as noise only.
    link = tmp_path / "shuffler"
    events: list[DriverEvent] = []
    server = Ser2net(tmp_path, link, "raw", baud=9600)
    async with (
        simulated(link, 57600) as sim,
        serving(server),
        reading(server.url, 57600, events),
    ):
        await until(lambda: sum(isinstance(e, NoiseReceived) for e in events) >= 3, "noise")
        assert sim.pty.host_baudrate() == 9600
    assert not any(isinstance(e, Received) for e in events)
    assert sim.sent == []  # no ACK understood either


async def test_a_server_that_never_negotiates_is_an_open_failure_with_its_reason(
    no_leaks: None,
) -> None:
    # A TCP port that accepts and says nothing (a raw port given as rfc2217://).
    accepted: list[asyncio.StreamWriter] = []

    async def mute(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    events: list[DriverEvent] = []
    try:
        with structlog.testing.capture_logs() as logs:
            async with reading(f"rfc2217://127.0.0.1:{port}?timeout=0.2", 115200, events):
                await until(lambda: any(e["event"] == "open failed" for e in logs), "a failure")
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()
    failure = next(e for e in logs if e["event"] == "open failed")
    assert failure["error"] == (
        "the device server did not finish RFC 2217 within 0.2 s (no answer for: binary mode "
        "from the server, binary mode to the server, COM-PORT-OPTION (RFC 2217), baud rate, "
        "data bits, parity, stop bits, flow control)"
    )
    assert events == []  # never connected: nothing to report but the log
