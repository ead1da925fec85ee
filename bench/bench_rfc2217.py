"""RFC 2217 client: ours on asyncio (``drivers.rfc2217`` in ``DeviceDriver``) beside
pyserial's ``rfc2217://`` client run off the event loop, through the same ser2net to the
same device, with raw TCP (``socket://``, no Telnet) as the floor (bench/README.md "RFC 2217").

A thread plays the dice reader on a pty's master side, stop-and-wait (link-layer.md): it
writes a ROLL frame, notes the time, and waits for the ACK before the next one. ser2net
(Debian's, a real process on loopback) serves the pty as RFC 2217 and, on another port, as
raw TCP. Each client in turn:

* **open**: from the call to the port being usable (the ``Connected`` event; pyserial's
  ``serial_for_url`` returning), median of ``OPENS`` opens;
* **latency**: from the device's write to the consumer holding the frame's event, p50 and
  p99 over the frames, and frames per second sustained with the ACK round trip;
* **CPU**: the process's CPU time per frame over the run (the loop, the threads);
* **threads**: the process's threads while the port is open;
* **close**: from asking the port to close to it being closed, median of ``OPENS``.

pyserial's client, as one would run it under asyncio: ``read(1)`` (blocking, with a 0.1 s
timeout) then ``read(in_waiting)`` in an executor thread, frames decoded with our codec,
ACKs written by ``write`` in an executor thread. It needs ``ign_set_control`` here: ser2net
on a pty never answers DTR, and pyserial waits for that answer (the open fails after its
3 s network timeout). ``Thread.setDaemon`` in its open raises a ``DeprecationWarning``
(an error under the test suite's warnings filter), silenced here.

Run: ``.venv/bin/python bench/bench_rfc2217.py [frames]``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import select
import statistics
import sys
import tempfile
import threading
import time
import tty
import warnings
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import serial
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine, percentile
from drivers.driver import DeviceDriver
from drivers.events import Connected, Received
from drivers.messages import (
    Ack,
    Decoded,
    DeviceMessage,
    MessageDecoder,
    encode_message,
)
from drivers.settings import DriverSettings
from rules.events import DiceRolled
from tests.device_servers import Ser2net

OPENS = 7


def frames(count: int) -> list[bytes]:
    """``count`` ROLL frames with sequence numbers 1, 2, ... (wrapping after 9999)."""
    return [
        encode_message(
            DeviceMessage(
                seq=1 + i % 9999, fact=DiceRolled(roll_id=1 + i, dice=(1 + i % 6, 1 + i * 5 % 6))
            )
        )
        for i in range(count)
    ]


class Device:
    """The dice reader on the pty's master. After ``go`` it sends a first frame until it is
    acknowledged, as a real device resends (link-layer.md): the way through a server may
    open after the host's first bytes (ser2net opens its port when a client connects, and
    what the host sent before is not always delivered). Then each measured frame,
    stop-and-wait."""

    def __init__(self, master: int, wire: list[bytes]) -> None:
        self.master = master
        self.warm_up, *self.wire = wire
        self.sent: list[float] = []
        self.go = threading.Event()
        self.decoder = MessageDecoder(sender="host")
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _acked(self, within: float | None) -> bool:
        """Wait for an ACK (QUERYs and anything else skipped); False after ``within`` s."""
        deadline = None if within is None else time.monotonic() + within
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and (
                left <= 0 or not select.select([self.master], [], [], left)[0]
            ):
                return False
            items = self.decoder.feed(os.read(self.master, 256))
            if any(isinstance(i, Decoded) and isinstance(i.message, Ack) for i in items):
                return True

    def _run(self) -> None:
        self.go.wait()
        os.write(self.master, self.warm_up)
        while not self._acked(0.5):
            os.write(self.master, self.warm_up)
        for frame in self.wire:
            self.sent.append(time.perf_counter())
            os.write(self.master, frame)
            self._acked(None)


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def ours(url: str, device: Device, count: int) -> tuple[list[float], float, float, int]:
    """Latencies, frames/s, CPU s and threads of the driver on ``url``."""
    driver = DeviceDriver(DriverSettings(device="dice_reader", url=url))
    got: list[float] = []
    async with contextlib.aclosing(driver.events()) as events:
        assert isinstance(await anext(events), Connected)
        threads = threading.active_count()
        start, used = time.perf_counter(), cpu()
        device.go.set()
        warm_up = True
        async for event in events:
            if isinstance(event, Received):
                if warm_up:  # the device's first frame, resent until the path is open
                    warm_up = False
                    continue
                got.append(time.perf_counter())
                if len(got) == count:
                    break
        pending = asyncio.ensure_future(anext(events))  # the last ACK goes out
        await asyncio.to_thread(device.thread.join)
        elapsed, used = time.perf_counter() - start, cpu() - used
        pending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pending
    return [b - a for a, b in zip(device.sent, got, strict=True)], count / elapsed, used, threads


def pyserial_open(url: str) -> serial.Serial:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Thread.setDaemon in its open
        port: serial.Serial = serial.serial_for_url(url, baudrate=115200, timeout=0.1)
        return port


async def theirs(url: str, device: Device, count: int) -> tuple[list[float], float, float, int]:
    """The same with pyserial's client off the event loop."""
    port = await asyncio.to_thread(pyserial_open, url)
    decoder = MessageDecoder(device="dice_reader", sender="device")

    def read_some() -> bytes:
        data = port.read(1)
        return data + port.read(port.in_waiting) if data else data

    got: list[float] = []
    try:
        threads = threading.active_count()
        start, used = time.perf_counter(), cpu()
        device.go.set()
        last: tuple[int, bytes] | None = None
        while len(got) < count:
            for item in decoder.feed(await asyncio.to_thread(read_some)):
                assert isinstance(item, Decoded), item
                assert isinstance(item.message, DeviceMessage)
                await asyncio.to_thread(port.write, encode_message(Ack(seq=item.message.seq)))
                if (item.message.seq, item.raw) == last or item.message.seq == 1:
                    continue  # the warm-up frame (seq 1), or a repeat of it
                last = (item.message.seq, item.raw)
                got.append(time.perf_counter())
        await asyncio.to_thread(device.thread.join)
        elapsed, used = time.perf_counter() - start, cpu() - used
        threads = max(threads, threading.active_count())
    finally:
        await asyncio.to_thread(port.close)
    return [b - a for a, b in zip(device.sent, got, strict=True)], count / elapsed, used, threads


async def open_close_ours(url: str) -> tuple[float, float]:
    driver = DeviceDriver(DriverSettings(device="dice_reader", url=url))
    events = driver.events()
    start = time.perf_counter()
    assert isinstance(await anext(events), Connected)
    opened = time.perf_counter() - start
    start = time.perf_counter()
    await events.aclose()
    return opened, time.perf_counter() - start


async def open_close_theirs(url: str) -> tuple[float, float]:
    start = time.perf_counter()
    port = await asyncio.to_thread(pyserial_open, url)
    opened = time.perf_counter() - start
    start = time.perf_counter()
    await asyncio.to_thread(port.close)
    return opened, time.perf_counter() - start


Run = Callable[[str, Device, int], Coroutine[Any, Any, tuple[list[float], float, float, int]]]
Opener = Callable[[str], Coroutine[Any, Any, tuple[float, float]]]


def measure(
    name: str,
    url: str,
    run: Run,
    opener: Opener,
    count: int,
) -> None:
    master, slave = os.openpty()
    tty.setraw(slave)
    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / "dice"
        link.symlink_to(os.ttyname(slave))
        rfc = Ser2net(Path(tmp), link, "rfc2217")
        raw = Ser2net(Path(tmp), link, "raw")
        rfc.start()
        raw.start()
        try:
            target = url.format(rfc=rfc.port, raw=raw.port)
            opens = [asyncio.run(opener(target)) for _ in range(OPENS)]
            device = Device(master, frames(count + 1))
            latencies, fps, used, threads = asyncio.run(run(target, device, count))
        finally:
            rfc.stop()
            raw.stop()
            os.close(master)
            os.close(slave)
    p50, p99 = percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000
    opened = statistics.median(o for o, _ in opens) * 1000
    closed = statistics.median(c for _, c in opens) * 1000
    print(
        f"{name:<34} open {opened:7.1f} ms  latency p50 {p50:6.3f} ms p99 {p99:6.3f} ms  "
        f"{fps:6,.0f} frames/s  CPU {used / count * 1e6:5.0f} us/frame  "
        f"threads {threads}  close {closed:6.1f} ms"
    )


def main() -> None:
    """Print the figures, the three clients side by side."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print(f"machine: {machine()}")
    print(f"{count} ROLL frames through ser2net ({OPENS} opens and closes each), in turn")
    rfc, raw = "rfc2217://127.0.0.1:{rfc}", "socket://127.0.0.1:{raw}"
    measure("ours, asyncio (rfc2217://)", rfc, ours, open_close_ours, count)
    theirs_url = rfc + "?ign_set_control"
    measure("pyserial's, off the loop (rfc2217://)", theirs_url, theirs, open_close_theirs, count)
    measure("floor: raw TCP (socket://)", raw, ours, open_close_ours, count)


if __name__ == "__main__":
    main()
