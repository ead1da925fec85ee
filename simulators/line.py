"""A serial line between two UARTs, bit by bit: what a receiver set otherwise hears.

A pty passes bytes whatever baud rate or framing either side sets; a real line does not. A
receiver at another baud rate, word size, parity or number of stop bits than the sender's
samples the wrong instants of the waveform and hears garbage: a few wrong bytes when it is
slower, several per byte sent when it is faster, rarely a ``$``. ``transfer`` computes it,
so that a simulator on a pty can answer a host (or a device server such as ser2net) that
opened the pty at the wrong settings as a real device would.

The model (a 16550-style receiver, as Linux's serial drivers have):

* The sender puts each byte on the line back to back: a start bit (0), the data bits least
  significant first, the parity bit if any, then the stop bits (1). Before and after the
  burst the line idles at 1.
* The receiver waits for a falling edge, checks the start bit half a bit later (still 0,
  or it was a glitch), samples each data bit and the parity bit in its middle, and the
  stop bit; then it waits for the next falling edge from that instant on.
* Every byte so sampled is delivered as sampled. Linux delivers a byte with a framing or
  parity error so when ``INPCK`` is off, as in the raw mode every serial program (pyserial,
  ser2net) sets; a break arrives as ``0x00``, which is what the sampled bits are then.

Times are integers: a bit of the sender lasts ``2 * heard.baudrate`` units and one of the
receiver ``2 * sent.baudrate``, so half bits and 1.5 stop bits are whole numbers too.

``transfer`` is pure (no I/O, no clock). ``read_baudrate`` and ``set_baudrate`` read and set
a tty's baud rate (``termios2``: any number). A pty keeps only that (and the stop bits) of
what a host sets: Linux's pty driver forces 8 data bits without parity, so a simulator on a
pty can compare baud rates only, and ``transfer`` models the rest for its own tests.
"""

from __future__ import annotations

import array
import bisect
import fcntl
from dataclasses import dataclass
from typing import Final

PARITIES: Final = "NEOMS"

_TCGETS2: Final = 0x802C542A  # Linux: termios2, whose c_ispeed/c_ospeed are plain numbers
_TCSETS2: Final = 0x402C542B
_CBAUD: Final = 0o010017
_BOTHER: Final = 0o010000  # the speed is c_ispeed/c_ospeed's number
_ISPEED: Final = 9  # index of c_ispeed in termios2 read as 32-bit ints (4 flags, line + cc)


@dataclass(frozen=True, slots=True)
class LineSettings:
    """One UART's settings: ``baudrate``, ``bytesize`` (5-8), ``parity`` (``N``, ``E``,
    ``O``, ``M`` or ``S``) and ``stopbits`` (1, 1.5 or 2). Raises ``ValueError`` otherwise."""

    baudrate: int
    bytesize: int = 8
    parity: str = "N"
    stopbits: float = 1

    def __post_init__(self) -> None:
        if self.baudrate <= 0:
            raise ValueError(f"baud rate {self.baudrate} is not positive")
        if self.bytesize not in (5, 6, 7, 8):
            raise ValueError(f"{self.bytesize} data bits: expected 5, 6, 7 or 8")
        if len(self.parity) != 1 or self.parity not in PARITIES:
            raise ValueError(f"parity {self.parity!r}: expected one of N, E, O, M, S")
        if self.stopbits not in (1, 1.5, 2):
            raise ValueError(f"{self.stopbits} stop bits: expected 1, 1.5 or 2")


def read_baudrate(fd: int) -> int:
    """The baud rate the tty ``fd`` is set to (either side of a pty: Linux keeps one
    termios for both). Raises ``OSError`` if ``fd`` is no tty."""
    raw = array.array("i", [0] * 64)
    fcntl.ioctl(fd, _TCGETS2, raw)
    return raw[_ISPEED + 1] or raw[_ISPEED]  # the output speed; an input speed 0 is "same"


def set_baudrate(fd: int, baudrate: int) -> None:
    """Set the tty ``fd`` to ``baudrate`` (any number: ``BOTHER``), its other flags as they
    are. Raises ``OSError``."""
    raw = array.array("i", [0] * 64)
    fcntl.ioctl(fd, _TCGETS2, raw)
    raw[2] = (raw[2] & ~_CBAUD) | _BOTHER
    raw[_ISPEED] = raw[_ISPEED + 1] = baudrate
    fcntl.ioctl(fd, _TCSETS2, raw)


def _parity_bit(value: int, bytesize: int, parity: str) -> int | None:
    ones = bin(value & ((1 << bytesize) - 1)).count("1")
    return {"N": None, "E": ones % 2, "O": 1 - ones % 2, "M": 1, "S": 0}[parity]


def _waveform(data: bytes, line: LineSettings, bit: int) -> tuple[list[int], list[int]]:
    """The line's levels as a step function: ``times[i]`` is when ``levels[i]`` begins
    (one entry per bit; the line is 1 before the first and after the last)."""
    times: list[int] = []
    levels: list[int] = []
    now = 0
    stop = int(bit * line.stopbits)
    for value in data:
        bits = [0] + [(value >> i) & 1 for i in range(line.bytesize)]
        parity = _parity_bit(value, line.bytesize, line.parity)
        if parity is not None:
            bits.append(parity)
        for level in bits:
            times.append(now)
            levels.append(level)
            now += bit
        times.append(now)
        levels.append(1)
        now += stop
    return times, levels


def transfer(data: bytes, *, sent: LineSettings, heard: LineSettings) -> bytes:
    """The bytes a receiver set to ``heard`` makes of ``data`` sent back to back at ``sent``.

    ``data`` unchanged when both sides agree (every setting the same).
    """
    if sent == heard or not data:
        return data
    sent_bit = 2 * heard.baudrate  # units: see the module docstring
    heard_bit = 2 * sent.baudrate
    half = sent.baudrate
    times, levels = _waveform(data, sent, sent_bit)
    end = times[-1] + int(sent_bit * sent.stopbits)

    def level(at: int) -> int:
        index = bisect.bisect_right(times, at) - 1
        return 1 if index < 0 or at >= end else levels[index]

    # Falling edges: where a 0 begins after a 1 (or after the idle line).
    falls = [t for i, t in enumerate(times) if levels[i] == 0 and (i == 0 or levels[i - 1] == 1)]
    bits = heard.bytesize + (heard.parity != "N")
    out = bytearray()
    at = 0
    while True:
        index = bisect.bisect_left(falls, at)
        if index == len(falls):
            return bytes(out)
        start = falls[index]
        if level(start + half) != 0:
            at = start + 1  # a glitch, not a start bit
            continue
        value = 0
        for i in range(heard.bytesize):
            value |= level(start + half + (i + 1) * heard_bit) << i
        out.append(value)
        at = start + half + (bits + 1) * heard_bit  # the stop bit's middle
