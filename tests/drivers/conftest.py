"""A scripted device on a real pty (the device side of the same codec), for the driver tests.

The driver opens a symlink to the pty, as it opens the simulators' ``--link PATH``; an
"unplug" closes the pty and a "replug" makes a new pty behind the same symlink.
"""

from __future__ import annotations

import asyncio
import os
import tty
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from drivers.link import BadFrame
from drivers.messages import Decoded, Message, MessageDecoder, encode_message

WAIT = 10.0  # a safety net against a hung test, never an assertion about speed


class PtyDevice:
    """A device playing a script over a pty: ``send`` frames, ``expect`` what the host sent."""

    def __init__(self, link: Path) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)  # no echo, no line discipline: bytes pass as they are
        os.set_blocking(self.master, False)
        self.link = link
        if link.is_symlink():
            link.unlink()
        link.symlink_to(os.ttyname(self.slave))
        self.decoder = MessageDecoder(sender="host")
        self.heard: asyncio.Queue[Decoded | BadFrame] = asyncio.Queue()
        self.raw = bytearray()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.master, self._readable)
        self.open = True

    def _readable(self) -> None:
        try:
            data = os.read(self.master, 4096)
        except OSError:
            return
        self.raw += data
        for item in self.decoder.feed(data):
            self.heard.put_nowait(item)

    def send(self, frame: Message | bytes) -> None:
        """Write a message (encoded) or raw bytes to the host."""
        data = frame if isinstance(frame, bytes) else encode_message(frame)
        os.write(self.master, data)

    async def expect(self) -> Message:
        """The next message the host sent (fails on a bad frame from the host)."""
        async with asyncio.timeout(WAIT):
            item = await self.heard.get()
        assert isinstance(item, Decoded), item
        return item.message

    def quiet(self) -> bool:
        """True when the host sent nothing not yet taken by ``expect``."""
        return self.heard.empty()

    def unplug(self) -> None:
        """Close the pty, as when the USB cable is pulled."""
        if self.open:
            self._loop.remove_reader(self.master)
            os.close(self.master)
            os.close(self.slave)
            self.open = False


@pytest.fixture(autouse=True)
async def _no_loop_errors() -> AsyncIterator[None]:
    """Fail a test whose loop reported an error (a background task that failed, or a port
    error reported as a bug: an unplugged device is a ``Disconnected`` event, not an ERROR
    with a traceback in the logs)."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    yield
    # Closing transports finish in background tasks of this test's loop: wait for them.
    for _ in range(500):
        if not asyncio.all_tasks() - {asyncio.current_task()}:
            break
        await asyncio.sleep(0.01)
    loop.set_exception_handler(None)
    assert not errors, errors


@pytest.fixture
def link_path(tmp_path: Path) -> Path:
    """Where the device's symlink lives (the driver's URL)."""
    return tmp_path / "device"


@pytest.fixture
async def pty_device(link_path: Path) -> AsyncIterator[PtyDevice]:
    """One scripted device behind ``link_path``."""
    device = PtyDevice(link_path)
    yield device
    device.unplug()


@pytest.fixture
async def open_fds() -> set[str]:
    """The process's open file descriptors at the start of the test (its loop running)."""
    return set(os.listdir("/proc/self/fd"))
