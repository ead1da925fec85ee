"""Fault injection for the simulators (pymodbus' manipulator, bellows' lossy transports).

``Faults`` holds a rate (a probability, 0 to 1) per fault and a few durations. It is set
from Python or from the command line (``--fault crc=0.1,garbage=0.05,split``; a bare name
means a rate of 1). Every draw comes from an RNG the caller injects, so a faulty run is
reproducible from its seed.

Faults on the wire, drawn for every transmission of a frame (a retransmission draws
again, so a corrupted frame gets through in the end):

* ``crc``: one hex digit of the CRC is wrong (the host NAKs; link-layer.md).
* ``garble``: the body does not parse but the CRC is good, as in dice-reader-icd.md's
  ``ROLL,3,5002,2,2x`` example (the host NAKs with the sequence number it could read).
* ``garbage``: 1 to 16 junk bytes (never ``$``) before the frame (the host discards
  bytes until ``$``).
* ``split``: the frame is written one byte at a time, ``split_delay`` seconds apart.
* ``duplicate``: the frame goes out twice back to back (the host ACKs both, delivers once).

Faults of the link, drawn by the device link:

* ``drop_ack``: an ACK of the frame in flight is ignored, so the device retransmits it
  after the ACK timeout (the host must ACK again and deliver once).
* ``disconnect``: after a frame is acknowledged, the line is unplugged for
  ``unplug_pause`` seconds and plugged in again (a new pty behind the ``--link`` symlink,
  any TCP client dropped); the device then says ``HELLO`` again. Only between frames, so
  no frame is in doubt across the ``HELLO`` that resets the sequence.

Faults of the content, drawn by the game per round (per roll for the dice reader):

* ``wrong_mode``: the shuffler reports a ``MODE`` other than its game before the round
  and its real game after it (SD Cover All Bonus rule (1): the i-Deal must be set to
  the game being played; the host must not publish payouts meanwhile).
* ``bad_deck``: the deck check after a shuffle fails (``SHORT``, ``EXTRA``,
  ``DUPLICATE`` or ``FOREIGN``); the dealer fixes the deck, the shuffler reshuffles and
  reports ``DECK,OK`` before dealing (shuffler-icd.md: a tilt until the next ``OK``).
* ``status``: a device fault (``STATUS`` with a fault code) before the round or roll,
  cleared by ``STATUS,READY`` at once (link-layer.md "Device status").
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass, field

from drivers.errors import FrameError
from drivers.link import encode_frame
from drivers.messages import parse_body
from simulators.scripts import DeviceKind, FaultSpecError

RATES = (
    "crc",
    "garble",
    "garbage",
    "split",
    "duplicate",
    "drop_ack",
    "disconnect",
    "wrong_mode",
    "bad_deck",
    "status",
)
"""Every fault with a rate, in the order of the module docstring."""

DURATIONS = ("split_delay", "unplug_pause")
"""The settings in seconds."""

# A frame is never acknowledged if every transmission of it is corrupted or every ACK is
# ignored: link-layer.md's device then resends every 2 s forever. Refuse such settings.
_BELOW_ONE = frozenset({"crc", "garble", "drop_ack"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Faults:
    """Rates (0 to 1) of each injected fault and the durations they use; all off by default."""

    crc: float = 0.0
    garble: float = 0.0
    garbage: float = 0.0
    split: float = 0.0
    duplicate: float = 0.0
    drop_ack: float = 0.0
    disconnect: float = 0.0
    wrong_mode: float = 0.0
    bad_deck: float = 0.0
    status: float = 0.0
    split_delay: float = 0.001
    unplug_pause: float = 0.2

    def __post_init__(self) -> None:
        for name in RATES:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0 or math.isnan(value):
                raise FaultSpecError(
                    f"fault rate {name}={value} is not a probability between 0 and 1",
                    item=f"{name}={value}",
                )
            if name in _BELOW_ONE and value >= 1.0:
                raise FaultSpecError(
                    f"fault rate {name}={value} would never let a frame through: "
                    "use a rate below 1",
                    item=f"{name}={value}",
                )
        for name in DURATIONS:
            value = getattr(self, name)
            if not 0.0 <= value < math.inf:
                raise FaultSpecError(
                    f"{name}={value} must be a number of seconds >= 0", item=f"{name}={value}"
                )

    @classmethod
    def parse(cls, text: str, *, base: Faults | None = None) -> Faults:
        """Faults from ``crc=0.1,garbage=0.05,split`` (a bare name means 1), over ``base``.

        Raises ``FaultSpecError`` naming the bad item and listing the known names.
        """
        changes: dict[str, float] = {}
        for item in text.split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, value_text = item.partition("=")
            name = name.strip().replace("-", "_")
            if name not in RATES and name not in DURATIONS:
                known = ", ".join((*RATES, *DURATIONS))
                raise FaultSpecError(f"unknown fault {name!r} (known: {known})", item=item)
            if not sep:
                if name in DURATIONS:
                    raise FaultSpecError(f"{name} needs a value in seconds: {name}=0.01", item=item)
                value = 1.0
            else:
                try:
                    value = float(value_text)
                except ValueError:
                    raise FaultSpecError(
                        f"fault {name!r}: {value_text.strip()!r} is not a number", item=item
                    ) from None
            changes[name] = value
        return dataclasses.replace(base if base is not None else cls(), **changes)

    def __str__(self) -> str:
        """The settings that differ from the defaults, in the ``--fault`` syntax."""
        default = Faults()
        items = [
            f"{f.name}={getattr(self, f.name):g}"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        ]
        return ",".join(items) or "none"


def hit(rate: float, rng: random.Random) -> bool:
    """True with probability ``rate``; draws nothing when the rate is 0."""
    return rate > 0.0 and rng.random() < rate


@dataclass(frozen=True, slots=True)
class Transmission:
    """What one transmission of a frame puts on the wire, and which faults shaped it."""

    data: bytes
    split: bool = False
    applied: tuple[str, ...] = field(default=())


def corrupt_crc(frame: bytes, rng: random.Random) -> bytes:
    """The frame with one hex digit of its CRC replaced by another."""
    star = frame.rindex(b"*")
    digit = rng.randrange(4)
    old = frame[star + 1 + digit : star + 2 + digit]
    new = rng.choice([c for c in b"0123456789ABCDEF" if bytes([c]) != old])
    return frame[: star + 1 + digit] + bytes([new]) + frame[star + 2 + digit :]


def garble_body(body: str, device: DeviceKind) -> str:
    """A body that the codec rejects although its sequence number can still be read.

    The last field gains an ``x`` (dice-reader-icd.md's ``2x``); where that still parses
    (free text such as a serial number), the last field is left out; failing that, the
    type is written in lower case (then the sequence number cannot be read either).
    """
    candidates = (body + "x", body.rsplit(",", 1)[0], body.lower())
    for candidate in candidates:
        try:
            parse_body(candidate, device=device)
        except FrameError:
            return candidate
    raise AssertionError(f"no garbled form of {body!r} fails to parse")  # pragma: no cover


def garbage(rng: random.Random) -> bytes:
    """1 to 16 junk bytes, never ``$`` (which would start a frame)."""
    return bytes(b for b in rng.randbytes(rng.randint(1, 16)) if b != ord("$")) or b"\x00"


def plan_transmission(
    body: str, *, device: DeviceKind, faults: Faults, rng: random.Random
) -> Transmission:
    """The bytes of one transmission of ``body``, with the wire faults drawn from ``rng``."""
    applied: list[str] = []
    if hit(faults.garble, rng):
        frame = encode_frame(garble_body(body, device))
        applied.append("garble")
    else:
        frame = encode_frame(body)
    if hit(faults.crc, rng):
        frame = corrupt_crc(frame, rng)
        applied.append("crc")
    if hit(faults.duplicate, rng):
        frame += frame
        applied.append("duplicate")
    if hit(faults.garbage, rng):
        frame = garbage(rng) + frame
        applied.append("garbage")
    split = hit(faults.split, rng)
    if split:
        applied.append("split")
    return Transmission(frame, split, tuple(applied))
