"""Link and driver speed (docs/developers/benchmarks.md "Link and driver"): frame-to-event
latency through a real pty, frames per second sustained, and the codec alone, beside the
wire time of the same frames.

A thread plays the dice reader on the pty's master side, stop-and-wait as link-layer.md
says: it writes a ROLL frame, notes the time, and waits for the ACK before the next one.
The host side is the real ``DeviceDriver`` consuming ``events()``; the latency of a frame is
from the device's write to the consumer holding its ``Received`` event. The wire time is
what a real line would add for the same bytes (8N1: 10 bits per byte).

Run: ``.venv/bin/python bench/bench_link.py [frames]``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import tempfile
import threading
import time
import tty
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine, median_rate, percentile
from drivers.driver import DeviceDriver
from drivers.events import Connected, Received
from drivers.messages import Decoded, DeviceMessage, MessageDecoder, encode_message
from drivers.settings import DriverSettings
from rules.events import DiceRolled

BAUDS = (115200, 9600)


def wire_ms(nbytes: int, baud: int) -> float:
    """Milliseconds a line at ``baud`` takes for ``nbytes`` (8N1: 10 bits a byte)."""
    return nbytes * 10 / baud * 1000


def frames(count: int) -> list[bytes]:
    """``count`` ROLL frames with sequence numbers 1, 2, ... (wrapping after 9999)."""
    return [
        encode_message(
            DeviceMessage(
                seq=1 + i % 9999,
                fact=DiceRolled(roll_id=1 + i, dice=(1 + i % 6, 1 + i * 5 % 6)),
            )
        )
        for i in range(count)
    ]


def play_device(master: int, wire: list[bytes], sent: list[float]) -> None:
    """The device: wait for QUERY, then each frame in turn, stop-and-wait on its ACK."""
    decoder = MessageDecoder(sender="host")

    def next_message() -> object:
        while True:
            items = decoder.feed(os.read(master, 256))
            if items:
                item = items[0]
                assert isinstance(item, Decoded), item
                assert len(items) == 1, items
                return item.message

    next_message()  # QUERY
    for frame in wire:
        sent.append(time.perf_counter())
        os.write(master, frame)
        next_message()  # its ACK


async def measure_pty(count: int) -> tuple[list[float], float]:
    """Latencies (s) of ``count`` frames through a pty, and the frames per second sustained."""
    wire = frames(count)
    master, slave = os.openpty()
    tty.setraw(slave)
    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / "dice"
        link.symlink_to(os.ttyname(slave))
        driver = DeviceDriver(DriverSettings(device="dice_reader", url=str(link)))
        sent: list[float] = []
        got: list[float] = []
        writer = threading.Thread(target=play_device, args=(master, wire, sent))
        async with contextlib.aclosing(driver.events()) as events:
            first = await anext(events)
            assert isinstance(first, Connected), first
            writer.start()
            start = time.perf_counter()
            async for event in events:
                got.append(time.perf_counter())
                assert isinstance(event, Received), event
                if len(got) == count:
                    break
            # the last ACK goes out when the loop asks again: let it, then stop
            pending = asyncio.ensure_future(anext(events))
            await asyncio.to_thread(writer.join)
            elapsed = time.perf_counter() - start
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pending
        os.close(master)
        os.close(slave)
    return [b - a for a, b in zip(sent, got, strict=True)], count / elapsed


def main() -> None:
    """Print the figures."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    wire = frames(count)
    frame_bytes = sum(map(len, wire)) / count
    ack_bytes = len(b"$ACK,1234*XXXX\r\n")

    latencies, fps = asyncio.run(measure_pty(count))
    p50, p99 = percentile(latencies, 0.50) * 1000, percentile(latencies, 0.99) * 1000

    stream = b"".join(wire)

    def decode_all() -> int:
        return len(MessageDecoder(device="dice_reader", sender="device").feed(stream))

    codec_rate = median_rate(decode_all)

    print(f"machine: {machine()}")
    print(
        f"{count} ROLL frames, {frame_bytes:.1f} bytes each on average;"
        f" ACK at most {ack_bytes} bytes"
    )
    print(f"frame-to-event latency through a pty: p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    print(f"sustained, stop-and-wait with ACK round trip: {fps:,.0f} frames/s")
    print(f"codec alone (MessageDecoder.feed): {codec_rate:,.0f} frames/s")
    for baud in BAUDS:
        one = wire_ms(round(frame_bytes), baud)
        trip = wire_ms(round(frame_bytes) + ack_bytes, baud)
        print(
            f"wire at {baud} baud: {one:.3f} ms a frame, {trip:.3f} ms with its ACK"
            f" -> at most {1000 / trip:,.0f} frames/s; host p50 is {p50 / one:.1%} of a frame's"
            " wire time"
        )


if __name__ == "__main__":
    main()
