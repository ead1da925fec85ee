"""A scripted host for the simulator tests: the host side of link-layer.md in a few lines,
on the drivers' codec but not on the driver (so the simulators are tested on their own).

It opens a pty path (following a ``--link`` symlink across unplugs), sends ``QUERY``, ACKs
every good frame, NAKs bad ones, and delivers each sequence number once.
"""

from __future__ import annotations

import asyncio
import os
import termios
from pathlib import Path

from drivers.link import BadFrame
from drivers.messages import Ack, Decoded, DeviceMessage, MessageDecoder, Nak, Query, encode_message
from rules.events import Device


class ScriptedHost:
    """Reads ``path``; ``delivered`` holds each new frame once, ``bad`` every bad frame."""

    def __init__(self, device: Device, path: str | Path, *, ack: bool = True) -> None:
        self.device: Device = device
        self.path = Path(path)
        # Only a stable name (a --link symlink) is followed across unplugs: a /dev/pts/N
        # number is reused by the kernel, and another test's pty must never be opened.
        self.follow = self.path.is_symlink()
        self.ack = ack
        self.delivered: list[DeviceMessage] = []
        self.bad: list[BadFrame] = []
        self.received: list[Decoded] = []
        self.opens = 0
        self._fd: int | None = None
        self._last: tuple[int, bytes] | None = None
        self._decoder = MessageDecoder(device=device, sender="device")
        self._changed = asyncio.Event()
        self._reopen: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ScriptedHost:
        self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def open(self) -> None:
        """Open the port, drop stale input (as pyserial does), send ``QUERY``."""
        fd = os.open(self.path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        termios.tcflush(fd, termios.TCIFLUSH)
        self._fd = fd
        self.opens += 1
        self._decoder = MessageDecoder(device=self.device, sender="device")
        asyncio.get_running_loop().add_reader(fd, self._readable)
        self.send(encode_message(Query()))

    def send(self, data: bytes) -> None:
        """Write to the device (dropped while the port is gone)."""
        if self._fd is not None:
            try:
                os.write(self._fd, data)
            except OSError:
                self._lost()

    def _readable(self) -> None:
        assert self._fd is not None
        try:
            data = os.read(self._fd, 4096)
        except BlockingIOError:
            return
        except OSError:  # EIO: the pty was closed (unplugged)
            data = b""
        if not data:
            self._lost()
            return
        for item in self._decoder.feed(data):
            if isinstance(item, BadFrame):
                self.bad.append(item)
                self.send(encode_message(Nak(seq=item.seq or 0)))
                continue
            self.received.append(item)
            message = item.message
            assert not isinstance(message, Ack | Nak | Query)
            if self._last != (message.seq, item.raw):  # link-layer.md: a repeat is not new
                self.delivered.append(message)
                self._last = (message.seq, item.raw)
            if self.ack:
                self.send(encode_message(Ack(seq=message.seq)))
        self._changed.set()

    def _lost(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        asyncio.get_running_loop().remove_reader(fd)
        os.close(fd)
        if self.follow:
            self._reopen = asyncio.get_running_loop().create_task(self._wait_and_reopen())

    async def _wait_and_reopen(self) -> None:
        while True:
            await asyncio.sleep(0.005)
            try:
                self.open()
            except OSError:
                continue
            return

    async def wait_for(self, count: int) -> list[DeviceMessage]:
        """Wait (10 s at most: a safety net) until ``count`` frames were delivered."""
        async with asyncio.timeout(10):
            while len(self.delivered) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.delivered

    async def close(self) -> None:
        """Close the port and stop following it."""
        if self._reopen is not None:
            self._reopen.cancel()
            await asyncio.gather(self._reopen, return_exceptions=True)
        fd, self._fd = self._fd, None
        if fd is not None:
            asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)
