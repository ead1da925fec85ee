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
from typing import Final, Literal

from drivers.errors import DriverConfigError
from drivers.rfc2217 import PortRequest
from foundation.backoff import DEFAULT_INITIAL, DEFAULT_MAXIMUM, Backoff
from rules.events import DEVICES, Device

MAX_BAUDRATE: Final = 2**31 - 1  # what termios (a C int) holds; real lines stop near 12 Mbaud
RS485_MAX_DELAY: Final = 0.1  # Linux's serial core caps the RTS delays at 100 ms


@dataclass(frozen=True, slots=True, kw_only=True)
class Rs485:
    """RS-485 half duplex on a serial port of this machine, in the kernel (``TIOCSRS485``):
    the UART's driver raises RTS to turn the transmitter on for each write and drops it
    after, so the host hears the device on the same pair of wires.

    * ``rts_level_for_tx``, ``rts_level_for_rx``: RTS while sending and while receiving
      (``True``: high); most transceivers take high to send.
    * ``delay_before_tx``, ``delay_before_rx``: seconds between RTS and the first bit, and
      after the last bit before RTS drops: whole milliseconds (the kernel counts them), at
      most 0.1 s (the kernel's cap).

    The receiver is off while the host sends (no "loopback"): a host that heard its own
    ACK would take it for a frame and NAK it, and its own NAK again, for ever. pyserial's
    software RS-485 (``serial.rs485.RS485``, RTS switched around each write with sleeps)
    is never used: it would block the event loop.
    """

    rts_level_for_tx: bool = True
    rts_level_for_rx: bool = False
    delay_before_tx: float = 0.0
    delay_before_rx: float = 0.0

    def __post_init__(self) -> None:
        for name in ("delay_before_tx", "delay_before_rx"):
            value = getattr(self, name)
            if not 0 <= value <= RS485_MAX_DELAY:
                raise DriverConfigError(
                    f"rs485 {name} {value:g} s is not in 0..{RS485_MAX_DELAY:g} s (the kernel "
                    "caps it at 100 ms)"
                )
            if abs(value * 1000 - round(value * 1000)) > 1e-9:
                raise DriverConfigError(
                    f"rs485 {name} {value:g} s is not a whole number of milliseconds (the "
                    "kernel counts milliseconds)"
                )


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverSettings:
    """One device's link: which device, where, how the line is set, and the timings.

    * ``url``: a device path, a pty path (or a symlink to one), ``socket://host:port`` (a
      serial device server's raw TCP port) or ``rfc2217://host:port`` (one that speaks RFC
      2217: the line's settings below are set on the server's port), with pyserial's
      options where they make sense (``Endpoint``).
    * ``baudrate``, ``bytesize``, ``parity``, ``stopbits``, ``xonxoff``, ``rtscts``: the line
      (link-layer.md "Physical": 115200 8N1 without flow control by default, and every
      setting configurable per device).
    * ``ack_deadline``: the host ACKs every good frame within this many seconds
      (link-layer.md: 250 ms); a consumer slower than that is logged.
    * ``silence_timeout``: ``None``, or seconds without a byte after which the device counts
      as lost (a ``QUERY`` probes it at half of that).
    * ``reconnect_initial``, ``reconnect_max``: the jittered backoff of reopening
      (``foundation.backoff``; 0.5 s, capped at 5 s, by default).
    * ``rs485``: ``None``, or RS-485 half duplex on a device path (``Rs485``): refused for
      a device server's URL (the server's port has its own setting) and with ``rtscts``
      (RTS switches the transmitter). Whether the port's kernel driver has RS-485 is known
      only when it is opened: a port that refuses it does not open
      (``PortSettingRefused``), with a sentence saying so.
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
    rs485: Rs485 | None = None

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
        _check_delays(self.reconnect_initial, self.reconnect_max)
        endpoint = check_url(self.url)
        if self.rs485 is not None:
            if endpoint is not None:
                raise DriverConfigError(
                    f"rs485 is for a serial port of this machine, not {endpoint.scheme}://: set "
                    "RS-485 on the device server's port (its own configuration)"
                )
            if self.rtscts:
                raise DriverConfigError(
                    "rs485 and rtscts cannot go together: RS-485 switches the transmitter "
                    "with RTS, which RTS/CTS flow control would drive too"
                )
        if endpoint is not None and endpoint.scheme == "rfc2217":
            try:
                self.port_request()
            except ValueError as exc:
                raise DriverConfigError(f"{self.url}: {exc}") from exc

    def port_request(self) -> PortRequest:
        """The line as an RFC 2217 server is asked to set it (``ValueError`` if it cannot)."""
        endpoint = check_url(self.url)
        return PortRequest(
            baudrate=self.baudrate,
            bytesize=self.bytesize,
            parity=self.parity,
            stopbits=self.stopbits,
            xonxoff=self.xonxoff,
            rtscts=self.rtscts,
            await_control=endpoint is None or endpoint.await_control,
        )

    @property
    def backoff(self) -> Backoff:
        """The reopening delays: from ``reconnect_initial``, capped at ``reconnect_max``."""
        return Backoff(self.reconnect_initial, self.reconnect_max)

    @property
    def endpoint(self) -> Endpoint | None:
        """Where a ``socket://`` or ``rfc2217://`` URL leads; ``None`` for a device path."""
        return check_url(self.url)


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """A serial device server: ``scheme`` ``socket`` (raw TCP: the bytes only, the line set
    on the server) or ``rfc2217`` (the line's settings negotiated, ``drivers.rfc2217``).

    pyserial's ``rfc2217://`` options, where they make sense: ``timeout=SECONDS`` (how long
    the server may take to answer the negotiation, 3 s by default as pyserial's) and
    ``ign_set_control`` (do not wait for the answer to the flow control setting: some
    servers never send it). ``logging`` is refused (lammer logs through its own logger:
    ``[logging] level = "debug"`` shows the negotiation) and so is ``poll_modem`` (lammer
    reads no modem line).
    """

    scheme: Literal["socket", "rfc2217"]
    host: str
    port: int
    timeout: float = 3.0
    await_control: bool = True


RFC2217_TIMEOUT_MAX: Final = 60.0


def check_url(url: str) -> Endpoint | None:
    """The ``Endpoint`` of a ``socket://`` or ``rfc2217://`` URL, ``None`` for a device path.

    Raises ``DriverConfigError`` for anything the driver could not open for a reason that
    no retry can fix (an empty path, an unsupported scheme or option, a host name the
    resolver cannot take).
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
    if parts.scheme not in ("socket", "rfc2217"):
        raise DriverConfigError(
            f"URL scheme {parts.scheme!r} is not supported: use a device path, "
            "socket://host:port or rfc2217://host:port"
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise DriverConfigError(f"bad port in {url!r}: {exc}") from exc
    if not parts.hostname or port is None:
        raise DriverConfigError(f"{url!r} is not {parts.scheme}://host:port")
    try:
        # What the resolver does on every connect: a name it cannot encode would end the
        # driver there (UnicodeError) instead of here, with the reason.
        parts.hostname.encode("idna")
    except UnicodeError as exc:
        raise DriverConfigError(f"host name in {url!r} is not valid: {exc}") from exc
    if parts.scheme == "socket":
        return Endpoint(scheme="socket", host=parts.hostname, port=port)
    return _rfc2217(url, parts.hostname, port, parts.query)


def _rfc2217(url: str, host: str, port: int, query: str) -> Endpoint:
    """An ``rfc2217://`` endpoint with pyserial's options (see ``Endpoint``)."""
    timeout, await_control = 3.0, True
    for option, values in urllib.parse.parse_qs(query, keep_blank_values=True).items():
        if option == "timeout":
            try:
                timeout = float(values[-1])
            except ValueError:
                raise DriverConfigError(
                    f"{url!r}: timeout={values[-1]!r} is not a number of seconds"
                ) from None
            if not 0 < timeout <= RFC2217_TIMEOUT_MAX:
                raise DriverConfigError(
                    f"{url!r}: timeout={values[-1]} s is not in 0..{RFC2217_TIMEOUT_MAX:g}"
                )
        elif option == "ign_set_control":
            await_control = False
        elif option == "logging":
            raise DriverConfigError(
                f"{url!r}: logging= is pyserial's own logger; lammer logs the negotiation "
                'itself at debug level ([logging] level = "debug")'
            )
        elif option == "poll_modem":
            raise DriverConfigError(f"{url!r}: poll_modem: lammer reads no modem line")
        else:
            raise DriverConfigError(
                f"{url!r}: unknown option {option!r} (rfc2217:// takes timeout= and "
                "ign_set_control)"
            )
    return Endpoint(
        scheme="rfc2217", host=host, port=port, timeout=timeout, await_control=await_control
    )


def _check_delays(initial: float, maximum: float) -> None:
    """The reconnect delays as ``Backoff`` checks them, refused as a ``DriverConfigError``."""
    try:
        Backoff(initial, maximum)
    except ValueError as exc:
        raise DriverConfigError(str(exc)) from None
