"""What a ``DeviceDriver`` is told: one frozen value, checked when it is built.

``DriverSettings`` holds one device's link as an operator configures it (the port and its
line settings, the driver's timings); ``DeviceDriver(settings)`` takes it whole, as
zigpy-znp's ``connect(config)`` does. Every check the driver relies on runs here, so a
setting that cannot work is a ``DriverConfigError`` (a ``ValueError``) at once, naming the
setting, and never an exception that ends a running driver: the configuration loader
builds a ``DriverSettings`` to validate a file, and ``lammer check-config`` refuses exactly
what ``lammer run`` would. Building one opens nothing.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Final

from drivers.backoff import DEFAULT_INITIAL, DEFAULT_MAXIMUM, Backoff
from drivers.errors import DriverConfigError
from rules.events import DEVICES, Device

MAX_BAUDRATE: Final = 2**31 - 1  # what termios (a C int) holds; real lines stop near 12 Mbaud


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverSettings:
    """One device's link: which device, where, how the line is set, and the timings.

    * ``url``: a device path, a pty path (or a symlink to one), or ``socket://host:port``.
    * ``baudrate``, ``bytesize``, ``parity``, ``stopbits``, ``xonxoff``, ``rtscts``: the line
      (link-layer.md "Physical": 115200 8N1 without flow control by default, and every
      setting configurable per device).
    * ``ack_deadline``: the host ACKs every good frame within this many seconds
      (link-layer.md: 250 ms); a consumer slower than that is logged.
    * ``silence_timeout``: ``None``, or seconds without a byte after which the device counts
      as lost (a ``QUERY`` probes it at half of that).
    * ``reconnect_initial``, ``reconnect_max``: the jittered backoff of reopening
      (``drivers.backoff``; 0.5 s, capped at 5 s, by default).
    """

    device: Device
    url: str
    baudrate: int = 115200
    bytesize: int = 8
    parity: str = "N"
    stopbits: float = 1
    xonxoff: bool = False
    rtscts: bool = False
    ack_deadline: float = 0.25
    silence_timeout: float | None = None
    reconnect_initial: float = DEFAULT_INITIAL
    reconnect_max: float = DEFAULT_MAXIMUM

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise DriverConfigError(
                f"device {self.device!r} is not one of {', '.join(map(repr, DEVICES))}"
            )
        check_url(self.url)
        if not 0 < self.baudrate <= MAX_BAUDRATE:
            # Beyond a C int, pyserial's termios call raises OverflowError at open time,
            # which would end the driver: refuse it here, with the reason.
            raise DriverConfigError(f"baud rate {self.baudrate} is out of range 1..{MAX_BAUDRATE}")
        if self.bytesize not in (5, 6, 7, 8) or len(self.parity) != 1 or self.parity not in "NEOMS":
            raise DriverConfigError(
                f"port settings {self.bytesize}{self.parity}{self.stopbits} are not valid"
            )
        if self.stopbits not in (1, 1.5, 2):
            raise DriverConfigError(f"stop bits {self.stopbits} is not 1, 1.5 or 2")
        if self.ack_deadline <= 0:
            raise DriverConfigError(f"ack_deadline {self.ack_deadline} s is not positive")
        if self.silence_timeout is not None and self.silence_timeout <= 0:
            raise DriverConfigError(f"silence_timeout {self.silence_timeout} s is not positive")
        Backoff(self.reconnect_initial, self.reconnect_max)  # checks the reconnect delays

    @property
    def backoff(self) -> Backoff:
        """The reopening delays: from ``reconnect_initial``, capped at ``reconnect_max``."""
        return Backoff(self.reconnect_initial, self.reconnect_max)

    @property
    def socket_address(self) -> tuple[str, int] | None:
        """``(host, port)`` for a ``socket://`` URL; ``None`` for a device path."""
        return check_url(self.url)


def check_url(url: str) -> tuple[str, int] | None:
    """``(host, port)`` for ``socket://host:port``, ``None`` for a device path.

    Raises ``DriverConfigError`` for anything the driver could not open for a reason that
    no retry can fix (an empty path, an unsupported scheme, a host name the resolver
    cannot take).
    """
    if "://" not in url:
        if not url:
            raise DriverConfigError("the device URL is empty")
        if "\0" in url:
            raise DriverConfigError(f"device path {url!r} contains a NUL byte")
        return None
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:
        raise DriverConfigError(f"{url!r} is not a URL: {exc}") from exc
    if parts.scheme != "socket":
        raise DriverConfigError(
            f"URL scheme {parts.scheme!r} is not supported: use a device path or socket://host:port"
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise DriverConfigError(f"bad port in {url!r}: {exc}") from exc
    if not parts.hostname or port is None:
        raise DriverConfigError(f"{url!r} is not socket://host:port")
    try:
        # What the resolver does on every connect: a name it cannot encode would end the
        # driver there (UnicodeError) instead of here, with the reason.
        parts.hostname.encode("idna")
    except UnicodeError as exc:
        raise DriverConfigError(f"host name in {url!r} is not valid: {exc}") from exc
    return parts.hostname, port
