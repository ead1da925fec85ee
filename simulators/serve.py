"""Serving a simulated device: a pty (and optionally a TCP port) and the steps it plays.

``PtyPort`` opens a pseudo-terminal, puts it in raw mode and keeps its own handle on the
slave side, so the host may open and close the path as often as it likes (a real serial
line does not notice either). With ``link`` it keeps a symlink at that path pointing at the
current pty, as udev keeps a stable name: an unplug removes the symlink and closes the
pty (the host's reads fail, as when a USB adapter is pulled), a replug opens a new pty, at
a new ``/dev/pts/N``, and points the symlink at it.

With ``baudrate`` the pty is a line at that baud rate (``simulators.line``): set to it when
plugged in, as a port its last user left so; a host (or a device server such as ser2net)
that sets the pty to another rate hears garbage, and the device hears the host's bytes as
garbage too, as on a real line. Without it the pty passes bytes whatever rate is set.

``TcpPort`` serves the same device on ``127.0.0.1:PORT`` for ``socket://`` URLs, like a
serial device server: one client at a time, a new client replaces the old one. The device
writes to the pty and to the TCP client alike and listens to both; use one host at a time.

``SimulatedDevice`` joins the ports and the ``DeviceLink`` and plays steps: frames go out
stop-and-wait, sleeps pause, a ``Wait`` pauses until its file exists (the link goes on
meanwhile), ``Unplug`` (or the ``disconnect`` fault, drawn after each acknowledged frame)
unplugs the line for ``Faults.unplug_pause`` seconds, drops any TCP client, then plugs it
in again and says ``HELLO`` (and ``MODE``) again.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import random
import struct
import termios
import tty
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from pathlib import Path

import structlog

from drivers.messages import DeviceMessage, encode_body
from foundation.tasks import this_task
from simulators.device_link import DeviceLink, LinkTimings
from simulators.faults import Faults, hit
from simulators.line import LineSettings, read_baudrate, set_baudrate, transfer
from simulators.scripts import (
    DeviceKind,
    DropAck,
    Send,
    SimulatorError,
    Sleep,
    Step,
    Unplug,
    Wait,
)

DataCallback = Callable[[bytes], None]
UNREAD_LIMIT = 2048
"""Unread bytes beyond which a pty is taken as not listened to (stop-and-wait never comes
near it while a host reads: one frame is at most 258 bytes)."""
STALL_LIMIT = 1.0
"""Seconds a write waits for a full pty before the rest of it is dropped."""
WAIT_POLL = 0.01
"""Seconds between two looks for a ``Wait`` step's file."""


class PtyPort:
    """A pseudo-terminal the host opens as its serial port; see the module docstring."""

    def __init__(
        self, *, on_data: DataCallback, link: Path | None = None, baudrate: int | None = None
    ) -> None:
        self.on_data = on_data
        self.link = link
        self.line = None if baudrate is None else LineSettings(baudrate)
        """The device's side of the line (its baud rate), or None: no line model."""
        self.path: str | None = None
        """The slave side's path (``/dev/pts/N``) while plugged in."""
        self.opened = 0
        """How many ptys this port has opened (1 + the replugs)."""
        self.dropped = 0
        """Writes dropped, whole or in part, because nobody read the pty or it was unplugged."""
        self._master: int | None = None
        self._slave: int | None = None
        self._writable: asyncio.Future[None] | None = None
        self._spare: tuple[int, int] | None = None
        self.log = structlog.get_logger("lammer.sim.pty")

    def open(self) -> str:
        """Plug in: a new pty in raw mode, the symlink pointed at it. Returns its path."""
        if self._master is not None:
            raise RuntimeError("pty already open")
        master, slave = self._spare or os.openpty()
        self._spare = None
        # Raw before anyone opens it: a fresh pty echoes and edits lines, and the device's
        # first frames would come straight back to it.
        tty.setraw(slave)
        if self.line is not None:
            set_baudrate(slave, self.line.baudrate)
        os.set_blocking(master, False)
        self._master, self._slave = master, slave
        self.path = os.ttyname(slave)
        self.opened += 1
        if self.link is not None:
            temporary = self.link.with_name(f".{self.link.name}.{os.getpid()}.tmp")
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            temporary.symlink_to(self.path)
            temporary.replace(self.link)  # atomic: the name never points nowhere mid-swap
        asyncio.get_running_loop().add_reader(master, self._readable)
        self.log.info("pty open", path=self.path, link=str(self.link) if self.link else None)
        return self.path

    def unplug(self) -> None:
        """Close the pty, keeping the next one aside: plugged in again, the device gets a
        new ``/dev/pts/N`` (the kernel would otherwise hand out the same number again)."""
        if self._spare is None:
            self._spare = os.openpty()
        self.close(keep_spare=True)

    def close(self, *, keep_spare: bool = False) -> None:
        """Remove the symlink (if it still points at this pty) and close the pty."""
        if not keep_spare and self._spare is not None:
            for fd in self._spare:
                os.close(fd)
            self._spare = None
        master, slave, self._master, self._slave = self._master, self._slave, None, None
        if self.link is not None and self.path is not None:
            with contextlib.suppress(OSError):
                if os.readlink(self.link) == self.path:
                    self.link.unlink()
        if master is not None:
            asyncio.get_running_loop().remove_reader(master)
            asyncio.get_running_loop().remove_writer(master)
            os.close(master)
        if slave is not None:
            os.close(slave)
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        if master is not None:
            self.log.info("pty closed", path=self.path)

    @property
    def is_open(self) -> bool:
        """Plugged in."""
        return self._master is not None

    def _readable(self) -> None:
        if self._master is None:
            return
        try:
            data = os.read(self._master, 4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # EIO: nothing on the other side; wait for it
            self.log.debug("pty read failed", error=str(exc))
            return
        if data:
            self.on_data(self._heard(data, by_device=True))

    def host_baudrate(self) -> int | None:
        """The baud rate the pty is set to now (by its host), or None while unplugged."""
        return None if self._slave is None else read_baudrate(self._slave)

    def _heard(self, data: bytes, *, by_device: bool) -> bytes:
        """``data`` as the other end of the line hears it: unchanged unless the host set the
        pty to another baud rate than the device's (then garbage, ``simulators.line``)."""
        if self.line is None or self._slave is None:
            return data
        host = LineSettings(read_baudrate(self._slave))
        if host == self.line:
            return data
        if by_device:
            return transfer(data, sent=host, heard=self.line)
        return transfer(data, sent=self.line, heard=host)

    def _on_writable(self) -> None:
        if self._master is not None:
            asyncio.get_running_loop().remove_writer(self._master)
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def unread(self) -> int:
        """Bytes written to the pty that nobody has read yet."""
        if self._slave is None:
            return 0
        raw = fcntl.ioctl(self._slave, termios.FIONREAD, b"\0\0\0\0")
        count: int = struct.unpack("i", raw)[0]
        return count

    async def write(self, data: bytes) -> None:
        """Write everything, waiting while the pty's buffer is briefly full.

        Dropped while unplugged, and dropped whole while more than ``UNREAD_LIMIT`` bytes lie
        unread: a serial line sends whether or not anyone listens, and a device must not
        stall on a pty nobody has opened (while its host uses the TCP port, say). The
        kernel's count of unread bytes can lag, so a write that still finds the pty full
        drops its rest after ``STALL_LIMIT`` seconds.
        """
        if self._master is None or self.unread() > UNREAD_LIMIT:
            self.dropped += 1
            return
        view = memoryview(self._heard(data, by_device=False))
        while view and self._master is not None:
            try:
                written = os.write(self._master, view)
            except (BlockingIOError, InterruptedError):
                written = 0
            except OSError as exc:
                self.log.debug("pty write failed", error=str(exc))
                return
            view = view[written:]
            if view and self._master is not None:
                master = self._master
                self._writable = asyncio.get_running_loop().create_future()
                asyncio.get_running_loop().add_writer(master, self._on_writable)
                try:
                    async with asyncio.timeout(STALL_LIMIT):
                        await self._writable
                except TimeoutError:
                    # Nobody reads (the unread count lags behind the tty's own buffers):
                    # the rest goes nowhere, as on a line nobody listens to.
                    if self._master == master:
                        asyncio.get_running_loop().remove_writer(master)
                    self.dropped += 1
                    return


class TcpPort:
    """The device on ``127.0.0.1:port`` for ``socket://`` URLs; one client at a time."""

    def __init__(self, *, on_data: DataCallback, port: int, host: str = "127.0.0.1") -> None:
        self.on_data = on_data
        self.host = host
        self.port = port
        self.clients = 0
        """How many clients have connected."""
        self._server: asyncio.Server | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.log = structlog.get_logger("lammer.sim.tcp")

    async def start(self) -> int:
        """Listen; returns the port (useful with port 0)."""
        self._server = await asyncio.start_server(self._client, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        self.log.info("tcp listening", host=self.host, port=self.port)
        return self.port

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = this_task()
        self._tasks.add(task)
        self.drop()  # a device server serves one host: the newest
        self._writer = writer
        self.clients += 1
        self.log.info("tcp client connected", peer=str(writer.get_extra_info("peername")))
        try:
            while data := await reader.read(4096):
                self.on_data(data)
        except ConnectionError:
            pass
        finally:
            if self._writer is writer:
                self._writer = None
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self._tasks.discard(task)

    def drop(self) -> None:
        """Drop the current client, if any (a simulated network cut)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    async def write(self, data: bytes) -> None:
        """Send to the current client; dropped when none is connected."""
        writer = self._writer
        if writer is None:
            return
        try:
            writer.write(data)
            await writer.drain()
        except ConnectionError as exc:
            self.log.debug("tcp write failed", error=str(exc))

    async def close(self) -> None:
        """Stop listening and drop the client."""
        self.drop()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


class SimulatedDevice:
    """A device on a pty (and optionally TCP): ``async with`` it, then ``play`` steps.

    ``rng`` draws the link's faults (the games draw theirs from their own RNG, so a deal
    does not depend on timing). ``game`` only names the game in the logs. Every frame
    acknowledged is logged, at info level except ``HAND`` and ``CARD`` (debug only: card
    data is secret until it is face up, shuffler-icd.md).
    """

    def __init__(
        self,
        *,
        device: DeviceKind,
        hello: Send,
        config: Sequence[Send] = (),
        faults: Faults | None = None,
        rng: random.Random | None = None,
        timings: LinkTimings | None = None,
        link: Path | None = None,
        tcp_port: int | None = None,
        baudrate: int | None = None,
        on_plug: Callable[[str], None] | None = None,
        game: str | None = None,
    ) -> None:
        self.device: DeviceKind = device
        self.faults = faults or Faults()
        self.rng = rng or random.Random()  # noqa: S311  simulated faults, not a secret
        # The disconnect draws get an RNG of their own, seeded from ``rng``: one draw per
        # frame played, so which frames an unplug follows does not depend on how many
        # retransmissions the timing caused.
        self._unplug_rng = random.Random(self.rng.getrandbits(64))  # noqa: S311  simulated unplugs, seeded from rng
        self.on_plug = on_plug
        self.pty = PtyPort(on_data=self._on_data, link=link, baudrate=baudrate)
        self.tcp = TcpPort(on_data=self._on_data, port=tcp_port) if tcp_port is not None else None
        self.link = DeviceLink(
            device=device,
            hello=hello,
            config=config,
            write=self._write,
            faults=self.faults,
            rng=self.rng,
            timings=timings,
        )
        self.unplugs = 0
        """How many times the line was unplugged and plugged in again."""
        self.log = structlog.get_logger("lammer.sim").bind(device=device, game=game)

    @property
    def path(self) -> str:
        """The current pty's path."""
        if self.pty.path is None:
            raise SimulatorError("device not started: it has no pty yet")
        return self.pty.path

    @property
    def sent(self) -> list[DeviceMessage]:
        """Every frame the host acknowledged, in order, each once."""
        return self.link.sent

    async def __aenter__(self) -> SimulatedDevice:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Plug in, start listening, power up (``HELLO`` and ``MODE`` queued)."""
        path = self.pty.open()
        try:
            if self.tcp is not None:
                await self.tcp.start()
        except BaseException:
            self.pty.close()
            raise
        self.link.start()
        self.link.power_up()
        if self.on_plug is not None:
            self.on_plug(path)

    async def close(self) -> None:
        """Stop the link, close the ports, remove the symlink."""
        await self.link.stop()
        if self.tcp is not None:
            await self.tcp.close()
        self.pty.close()

    def _on_data(self, data: bytes) -> None:
        self.link.feed(data)

    async def _write(self, data: bytes) -> None:
        await self.pty.write(data)
        if self.tcp is not None:
            await self.tcp.write(data)

    async def unplug(self, pause: float | None = None) -> None:
        """Unplug the line (pty closed, TCP client dropped), wait, plug it in, say HELLO.

        Waits for the link to be idle first, so no frame is in doubt across the reset.
        """
        await self.link.wait_idle()
        self.unplugs += 1
        self.log.info("unplugged", unplugs=self.unplugs)
        self.pty.unplug()
        if self.tcp is not None:
            self.tcp.drop()
        await asyncio.sleep(self.faults.unplug_pause if pause is None else pause)
        path = self.pty.open()
        self.link.power_up()
        if self.on_plug is not None:
            self.on_plug(path)

    async def play(self, steps: Iterable[Step] | AsyncIterable[Step]) -> int:
        """Play steps in order; returns how many frames were acknowledged."""
        frames = 0
        if isinstance(steps, AsyncIterable):
            async for step in steps:
                frames += await self._play_one(step)
        else:
            for step in steps:
                frames += await self._play_one(step)
        return frames

    async def _play_one(self, step: Step) -> int:
        match step:
            case Send():
                self._log_sent(await self.link.send(step))
                if hit(self.faults.disconnect, self._unplug_rng):
                    await self.unplug()
                return 1
            case Sleep(seconds):
                await asyncio.sleep(seconds)
            case Wait(path):
                self.log.info("waiting for a file", path=str(path))
                while not path.exists():  # noqa: ASYNC110 - a file from another process
                    await asyncio.sleep(WAIT_POLL)
                self.log.info("file found, going on", path=str(path))
            case Unplug():
                await self.unplug()
            case DropAck():
                self.link.lose_next_ack()
        return 0

    def _log_sent(self, message: DeviceMessage) -> None:
        # shuffler-icd.md "Card data is secret until it is face up": cards at debug only.
        if message.secret:
            self.log.debug("sent", frame=encode_body(message))
        else:
            self.log.info("sent", frame=encode_body(message))

    async def finish(self) -> None:
        """Wait until everything queued (``QUERY`` answers too) is acknowledged."""
        await self.link.wait_idle()
