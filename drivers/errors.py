"""Errors of the drivers layer (codec, messages, asyncio driver).

One base for the layer; builtins mixed in where they fit (as python-can does), so callers
may catch either::

    DriverError(Exception)
    ├── FrameError(DriverError, ValueError)          a frame or body that breaks link-layer.md
    │                                                or a device ICD (``reason``, ``seq``)
    ├── DeviceTimeout(DriverError, TimeoutError)     the device stayed silent too long
    ├── LinkLost(DriverError, ConnectionError)       the port went away: unplugged, pty
    │                                                closed, socket dropped, read/write failed
    ├── PortSettingRefused(DriverError, OSError)     the port opened but refuses a setting
    │                                                (RS-485 where its kernel driver has none)
    └── DriverConfigError(DriverError, ValueError)   a driver setting that cannot work
                                                     (URL, baud rate, timings)

The decoders never raise on input: they report bad frames as ``BadFrame`` values. Only
``parse_body``/``encode_*`` called directly raise ``FrameError``. The driver turns
``DeviceTimeout`` and ``LinkLost`` into ``Disconnected`` events and reconnects; it never dies
of a device problem.
"""

from __future__ import annotations


class DriverError(Exception):
    """Base of every error raised by the drivers layer."""


class FrameError(DriverError, ValueError):
    """A frame or message body that does not follow the link layer or the device's ICD.

    ``reason`` is the specific reason (never a card code: a HAND body is secret);
    ``seq`` is the frame's sequence number when it could still be read (for the NAK).
    """

    def __init__(self, reason: str, *, seq: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.seq = seq


class DeviceTimeout(DriverError, TimeoutError):
    """The device sent nothing for ``seconds`` (and did not answer a ``QUERY``)."""

    def __init__(self, message: str, *, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


class LinkLost(DriverError, ConnectionError):
    """The port went away (USB unplugged, pty closed, socket dropped, I/O error)."""


class PortSettingRefused(DriverError, OSError):
    """The port opened but refuses a setting the configuration asks (RS-485 mode on a port
    whose kernel driver has none). An ``OSError``: the driver retries with backoff, as for
    any port that does not open (the adapter may be replaced)."""


class DriverConfigError(DriverError, ValueError):
    """A driver setting that cannot work: an unknown URL scheme, a timing out of range."""
