"""What a ``DeviceDriver`` delivers: frozen, slotted, keyword-only dataclasses in one union.

Consumers ``match`` on ``DriverEvent`` and finish with ``typing.assert_never``::

    async with contextlib.aclosing(driver.events()) as events:
        async for event in events:
            match event:
                case Received(): ...        # a good new frame: journal event.fact
                case BadFrameReceived(): ... # already NAKed; journal it (nothing is lost)
                case NoiseReceived(): ...    # bytes outside any frame; journal them too
                case Connected() | Disconnected(): ...
                case _: assert_never(event)

``Received`` is ACKed when the consumer asks for the next event (after its loop body ran),
so "an ACK means the event is durable" when the body journals it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules import events as ev


@dataclass(frozen=True, slots=True, kw_only=True)
class Connected:
    """The port is open (``QUERY`` was sent: ``HELLO`` and the configuration follow)."""

    device: ev.Device
    url: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Disconnected:
    """The port went away or the device fell silent; the driver is reconnecting."""

    device: ev.Device
    url: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BadFrameReceived:
    """A bad frame (link-layer.md): already answered with ``NAK``; kept for the record.

    ``raw`` may hold secret cards (a damaged HAND): journal it, never log it above debug.
    """

    device: ev.Device
    raw: bytes
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NoiseReceived:
    """Bytes that came outside any frame (link-layer.md: "A receiver discards bytes until
    it sees ``$``"), once per read that had them, after the frames of that read: ``size``
    bytes, the first 257 in ``raw``. Nothing is answered (there is no frame to NAK). A few
    are a glitch; noise and no good frame is a line at the wrong baud rate or framing.

    ``raw`` may hold secret cards (the rest of a HAND whose ``$`` was garbled): journal
    it, never log it above debug.
    """

    device: ev.Device
    raw: bytes
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Received:
    """A good, new device frame and its fact (HELLO and STATUS included). ``seq`` is the
    device's sequence number, ``raw`` the frame as received (may hold secret cards).
    ``probe``: the frame answers the driver's silence probe (the ``HELLO`` after its
    ``QUERY``, and the shuffler's ``MODE`` after that): the device did not restart, it
    was asked how it is."""

    device: ev.Device
    seq: int
    raw: bytes
    fact: ev.DeviceFact
    probe: bool = False


DriverEvent = Connected | Disconnected | BadFrameReceived | NoiseReceived | Received
