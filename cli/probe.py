"""``lammer probe PORT``: which device answers at a port, and how clean the line is.

For the installer at the table, before the table runs (stop it first: the probe takes the
port, and a device server gives its port to the newest client)::

    lammer probe /dev/lammer/shuffler [--baudrate 115200] [--parity N] [--rs485] ...
    lammer probe rfc2217://10.0.0.9:4001
    lammer probe --config /etc/lammer/poker1.toml [--device shuffler]

It opens the port with the given settings (a table's file gives its device section's),
sends ``QUERY`` (link-layer.md), and for ``--seconds`` (3) asks again each time the last
answer is in: the device answers ``HELLO`` and, a shuffler, its ``MODE``. The probe ACKs
those, NAKs bad frames, and never acknowledges any other frame (a ``HAND``, a ``ROLL``, a
``STATUS``): the device keeps it for the table. It prints, on stdout::

    port: /dev/lammer/shuffler, 115200 8N1
    answered: shuffler IDEAL-SIM, firmware 2.1.0, serial number SN0001
    mode: CSP
    round trip: 2.1 ms (median of 11 QUERY, 1.8 to 3.5 ms)
    line in 3 s: 0 NAKs, 0 retransmissions, 0 bytes of noise

or ``port: ...`` and one sentence, ``no answer: ...``, saying why nothing answered. The
exit status says the same to a script:

    0  a device answered and the line was clean
    1  a device answered, but with NAKs, retransmissions or noise: check the cable and the
       settings (the lines above say which)
    2  bad usage or settings (as every lammer command)
    3  the port did not open: no such port, permission, busy, a device server that does
       not answer or refuses, a setting the port refuses (RS-485)
    4  the port opened and nothing came back
    5  bytes came back but no good frame: a wrong baud rate (or parity, stop bits) is likely
    6  a device answered, but not the one expected (``--device``, or the table's file)
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from daemon.config import load_config
from daemon.errors import ConfigFileError
from daemon.logs import configure_logging
from drivers.driver import Port, open_port
from drivers.errors import DriverConfigError, FrameError, LinkLost, PortSettingRefused
from drivers.link import BadFrame, Frame, FrameDecoder
from drivers.messages import (
    SENT_BY,
    Ack,
    DeviceMessage,
    Nak,
    Query,
    encode_message,
    parse_body,
)
from drivers.settings import DriverSettings, Rs485
from rules.events import Device, DeviceHello, ModeReported

EXIT_OK: Final = 0
EXIT_LINE_ERRORS: Final = 1
EXIT_USAGE: Final = 2
EXIT_NO_PORT: Final = 3
EXIT_SILENT: Final = 4
EXIT_GARBAGE: Final = 5
EXIT_UNEXPECTED: Final = 6

ANSWER_WAIT: Final = 1.0
"""Seconds to wait for a QUERY's HELLO before asking again."""
PAUSE: Final = 0.2
"""Seconds between an answer and the next QUERY (the shuffler's MODE follows its HELLO)."""
CROSSED: Final = 0.25
"""A frame again sooner than this after its ACK crossed it on the line (the device's own
500 ms timer, link-layer.md, fired as the ACK was on its way): no retransmission. Later,
the ACK was lost or garbled: a retransmission."""
STALE_QUIET: Final = 0.1
STALE_MAX: Final = 1.0
"""Before its first QUERY the probe drops what comes until the port is quiet for
``STALE_QUIET`` s (at most ``STALE_MAX`` s): a device server keeps what a device sent while
nobody listened (a HELLO resent for minutes), which is no answer to the probe."""
COMMON_RATES: Final = (9600, 19200, 38400, 57600, 115200)
LABELS: Final[dict[Device, str]] = {"shuffler": "shuffler", "dice_reader": "dice reader"}
_QUERY: Final = encode_message(Query())
_DICE_ONLY: Final = SENT_BY["dice_reader"] - SENT_BY["shuffler"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``lammer probe``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__[__doc__.index("    0  ") :] if __doc__ else None
    parser.add_argument(
        "port",
        nargs="?",
        metavar="PORT",
        help="a device path, socket://host:port or rfc2217://host:port",
    )
    parser.add_argument(
        "--config", "-c", type=Path, metavar="FILE", help="a table's file: its device's port"
    )
    parser.add_argument(
        "--device",
        choices=("shuffler", "dice_reader"),
        help="the device expected (with --config: which section; default: the table's)",
    )
    parser.add_argument(
        "--baudrate", type=int, default=115200, help="bits a second on the line (default 115200)"
    )
    parser.add_argument(
        "--bytesize", type=int, choices=(5, 6, 7, 8), default=8, help="data bits (default 8)"
    )
    parser.add_argument(
        "--parity",
        choices=tuple("NEOMS"),
        default="N",
        help="none, even, odd, mark or space (default N)",
    )
    parser.add_argument(
        "--stopbits", type=float, choices=(1, 1.5, 2), default=1, help="stop bits (default 1)"
    )
    parser.add_argument("--xonxoff", action="store_true", help="XON/XOFF flow control")
    parser.add_argument("--rtscts", action="store_true", help="RTS/CTS flow control")
    parser.add_argument("--rs485", action="store_true", help="the kernel's RS-485 mode")
    parser.add_argument("--seconds", type=_seconds, default=3.0, help="how long to ask (default 3)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.5 <= value <= 600:
        raise argparse.ArgumentTypeError(f"{value:g} s: expected 0.5 to 600")
    return value


@dataclass
class Report:
    """What the probe saw (``render`` writes it, ``status`` is the exit status)."""

    settings: DriverSettings
    expected: Device | None
    seconds: float
    refused: str | None = None
    """Why the port did not open."""
    server: str | None = None
    """The RFC 2217 server's signature."""
    hello: DeviceHello | None = None
    mode: str | None = None
    round_trips: list[float] = field(default_factory=list)
    queries: int = 0
    naks: int = 0
    retransmissions: int = 0
    noise: int = 0
    bad_frames: int = 0
    line_errors: int = 0
    waiting: str | None = None
    """The first frame the device holds for the table (never acknowledged here)."""
    ended: str | None = None
    """Why the port went away during the probe."""

    @property
    def kind(self) -> Device | None:
        """Who answered: a shuffler says MODE after HELLO, a dice reader nothing."""
        return None if self.hello is None else self._answered()

    def _answered(self) -> Device:
        """Who answered, once a HELLO came."""
        return "shuffler" if self.mode is not None else "dice_reader"

    @property
    def status(self) -> int:
        """The exit status (module docstring)."""
        if self.refused is not None:
            return EXIT_NO_PORT
        if self.hello is None:
            if self.waiting is not None:
                return EXIT_UNEXPECTED
            return EXIT_GARBAGE if self.noise or self.bad_frames else EXIT_SILENT
        if self.expected is not None and self.kind != self.expected:
            return EXIT_UNEXPECTED
        if self.naks or self.retransmissions or self.noise or self.line_errors:
            return EXIT_LINE_ERRORS
        return EXIT_OK

    def render(self) -> list[str]:
        """The lines to print."""
        lines = [f"port: {self.settings.url}, {_line(self.settings, self.server)}"]
        if self.refused is not None:
            return [*lines, f"no answer: {self.refused}"]
        if self.hello is None:
            return [*lines, f"no answer: {self._why_not()}"]
        hello, kind = self.hello, self._answered()
        lines.append(
            f"answered: {LABELS[kind]} {hello.model}, firmware {hello.firmware}, "
            f"serial number {hello.serial}"
        )
        if self.expected is not None and kind != self.expected:
            lines.append(
                f"expected: a {LABELS[self.expected]} at this port"
                + (", which says MODE after HELLO" if self.expected == "shuffler" else "")
            )
        lines.append(f"mode: {self.mode}" if self.mode else "mode: none (a dice reader has none)")
        trips = sorted(t * 1000 for t in self.round_trips)
        lines.append(
            f"round trip: {statistics.median(trips):.1f} ms (median of {len(trips)} QUERY, "
            f"{trips[0]:.1f} to {trips[-1]:.1f} ms)"
            if trips
            else "round trip: not measured (no HELLO answered a QUERY)"
        )
        lines.append(self._line_report())
        if self.waiting is not None:
            lines.append(
                f"waiting: the device holds a {self.waiting} frame for the table; the probe "
                "does not acknowledge it, so the table will receive it"
            )
        if self.ended is not None:
            lines.append(f"ended: {self.ended}")
        return lines

    def _line_report(self) -> str:
        plural = "" if self.naks == 1 else "s"
        report = (
            f"line in {self.seconds:g} s: {self.naks} NAK{plural}, {self.retransmissions} "
            f"retransmission{'' if self.retransmissions == 1 else 's'}, {self.noise} "
            f"byte{'' if self.noise == 1 else 's'} of noise"
        )
        if self.line_errors:
            report += f", {self.line_errors} line errors reported by the device server"
        return report

    def _why_not(self) -> str:
        if self.waiting is not None:
            return (
                f"the device answered with a {self.waiting} frame it holds for the table "
                "and cannot say HELLO before it is acknowledged (link-layer.md: stop-and-"
                "wait); the probe does not acknowledge it: start the table, which will"
            )
        if self.ended is not None:
            return self.ended
        if self.noise or self.bad_frames:
            what = f"{self.noise} byte{'' if self.noise == 1 else 's'}"
            if self.bad_frames:
                what += f" and {self.bad_frames} bad frame{'' if self.bad_frames == 1 else 's'}"
            hint = _rate_hint(self.settings)
            return f"{what} came back in {self.seconds:g} s, no good frame: {hint}"
        return (
            f"nothing came back in {self.seconds:g} s to QUERY: is the device on, its cable "
            "in, and are TX and RX crossed (a null-modem cable)?"
        )


def _rate_hint(settings: DriverSettings) -> str:
    """Garbage: what to try."""
    endpoint = settings.endpoint
    if endpoint is not None and endpoint.scheme == "socket":
        return (
            "the device server's port is likely at another baud rate (or parity, stop bits) "
            "than the device: check the server's configuration"
        )
    others = ", ".join(str(r) for r in COMMON_RATES if r != settings.baudrate)
    return (
        f"a wrong baud rate is likely (this port is at {settings.baudrate} baud; try the "
        f"device's: often {others}), or wrong parity or stop bits"
    )


def _line(settings: DriverSettings, server: str | None) -> str:
    endpoint = settings.endpoint
    if endpoint is not None and endpoint.scheme == "socket":
        return "raw TCP (the line is the device server's own setting)"
    line = f"{settings.baudrate} {settings.bytesize}{settings.parity}{settings.stopbits:g}"
    if endpoint is not None:
        return f"{line} set by RFC 2217" + (f" on {server}" if server else "")
    return f"{line}, RS-485" if settings.rs485 is not None else line


def _refusal(settings: DriverSettings, exc: OSError) -> str:
    """One sentence for a port that did not open."""
    url, endpoint = settings.url, settings.endpoint
    if isinstance(exc, LinkLost | PortSettingRefused):
        return str(exc)  # an RFC 2217 server's refusal, RS-485: already a sentence
    if endpoint is not None:
        where = f"{endpoint.host}:{endpoint.port}"
        if isinstance(exc, ConnectionRefusedError):
            return (
                f"the device server at {where} refuses the connection (is its port enabled, "
                "and is it raw TCP or RFC 2217?)"
            )
        if isinstance(exc, TimeoutError):
            return f"no connection to {where} in 5 s (is the device server on? a firewall?)"
        return f"no connection to the device server at {where}: {exc.strerror or exc}"
    if exc.errno == errno.ENOENT:
        return (
            f"no such port: {url} does not exist (is the adapter plugged in? "
            "ls -l /dev/serial/by-id/ lists those that are)"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (
            f"permission denied on {url}: the user needs the dialout group (the udev rule "
            "gives the port to dialout)"
        )
    if exc.errno in (errno.EAGAIN, errno.EBUSY):
        return (
            f"{url} is in use by another program (the table? stop it first: "
            "systemctl stop lammer@ID)"
        )
    return f"{url} does not open: {exc}"


async def probe(settings: DriverSettings, *, seconds: float, expected: Device | None) -> Report:
    """Open the port, ask, listen for ``seconds``; what was seen."""
    report = Report(settings=settings, expected=expected, seconds=seconds)
    try:
        port = await open_port(settings)
    except OSError as exc:  # pyserial's, a connect's, RFC 2217's, RS-485's
        report.refused = _refusal(settings, exc)
        return report
    if port.telnet is not None:
        report.server = port.telnet.signature
    try:
        await _listen(port, report)
    finally:
        if port.telnet is not None:
            report.line_errors = port.telnet.line_errors
        await port.close()
    return report


async def _drop_stale(port: Port) -> None:
    loop = asyncio.get_running_loop()
    until = loop.time() + STALE_MAX
    while loop.time() < until:
        try:
            async with asyncio.timeout(STALE_QUIET):
                if not await port.receive():
                    return  # the end of the stream: the loop that follows says so
        except TimeoutError:
            return


async def _listen(port: Port, report: Report) -> None:  # noqa: C901  one loop over what a device may say
    await _drop_stale(port)
    decoder = FrameDecoder()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + report.seconds
    asked: float | None = None  # when the QUERY awaiting its HELLO went out
    next_query = loop.time()
    seen: dict[tuple[int, bytes], float] = {}  # frames acknowledged since the last HELLO
    answering = False  # the last frame was a QUERY's HELLO: its MODE follows
    while (now := loop.time()) < deadline:
        if now >= next_query and (asked is None or now - asked >= ANSWER_WAIT):
            port.write(_QUERY)
            asked, report.queries = now, report.queries + 1
        wake = min(deadline, next_query if asked is None else asked + ANSWER_WAIT)
        try:
            async with asyncio.timeout(max(wake - loop.time(), 0.001)):
                data = await port.receive()
        except TimeoutError:
            continue
        except OSError as exc:
            report.ended = f"the port went away: {exc}"
            return
        if not data:
            report.ended = "the port went away (end of stream)"
            return
        arrived = loop.time()
        for item in decoder.feed(data):
            message = _message(item, report)
            if message is None:
                port.write(encode_message(Nak(seq=_nak_seq(item))))
                continue
            key = (message.seq, item.raw)
            fact = message.fact
            # A QUERY's answer (its HELLO, then the MODE) is new even when its bytes are the
            # last answer's; any other frame again is a retransmission unless it crossed
            # its ACK.
            answer = (isinstance(fact, DeviceHello) and asked is not None) or (
                isinstance(fact, ModeReported) and answering
            )
            acked = seen.get(key)
            if not answer and acked is not None and arrived - acked >= CROSSED:
                report.retransmissions += 1
            answering = answer and isinstance(fact, DeviceHello)
            if isinstance(fact, DeviceHello):
                if asked is not None:
                    report.round_trips.append(arrived - asked)
                    asked, next_query = None, arrived + PAUSE
                report.hello = fact
                seen = {key: arrived}
            elif isinstance(fact, ModeReported):
                report.mode = fact.game
                seen[key] = arrived
            else:
                if report.waiting is None:
                    report.waiting = message.kind
                continue  # never acknowledged: the table's
            port.write(encode_message(Ack(seq=message.seq)))
        noise = decoder.take_noise()
        if noise is not None:
            report.noise += noise.size


def _message(item: Frame | BadFrame, report: Report) -> DeviceMessage | None:
    """The device message of a frame, or None for a bad one (counted, to be NAKed)."""
    if isinstance(item, Frame):
        device: Device = "dice_reader" if item.kind in _DICE_ONLY else "shuffler"
        try:
            message = parse_body(item.body, device=device, sender="device")
        except FrameError:
            pass
        else:
            if isinstance(message, DeviceMessage):
                return message
    report.naks += 1
    report.bad_frames += 1
    return None


def _nak_seq(item: Frame | BadFrame) -> int:
    if isinstance(item, BadFrame):
        return item.seq or 0
    return item.seq


def _settings(args: argparse.Namespace) -> tuple[DriverSettings, Device | None]:
    """The port and line to probe, and the device expected. Raises ``ValueError``."""
    if args.config is not None:
        if args.port is not None:
            raise ValueError("give a PORT or --config FILE, not both")
        config = load_config(args.config)
        names: tuple[Device, ...] = (args.device,) if args.device else ("shuffler", "dice_reader")
        sections = [(n, getattr(config, n)) for n in names if getattr(config, n) is not None]
        if args.device is None:
            wanted = "dice_reader" if config.table.game == "CRAPS" else "shuffler"
            sections = [s for s in sections if s[0] == wanted] or sections
        if not sections:
            raise ValueError(f"{args.config} has no [{args.device or 'shuffler'}] section")
        device, section = sections[0]
        return section.driver_settings(device), device
    if args.port is None:
        raise ValueError("a PORT (or --config FILE) is required")
    settings = DriverSettings(
        device=args.device or "shuffler",
        url=args.port,
        baudrate=args.baudrate,
        bytesize=args.bytesize,
        parity=args.parity,
        stopbits=args.stopbits,
        xonxoff=args.xonxoff,
        rtscts=args.rtscts,
        rs485=Rs485() if args.rs485 else None,
    )
    return settings, args.device


def run(args: argparse.Namespace) -> int:
    """Probe the port; the exit status (module docstring)."""
    try:
        settings, expected = _settings(args)
    except (ConfigFileError, ValueError, DriverConfigError) as exc:
        print(f"lammer probe: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # The report is the output; the drivers' own log lines (debug) stay out of it.
    configure_logging(fmt="console", level="warning")
    report = asyncio.run(probe(settings, seconds=args.seconds, expected=expected))
    for line in report.render():
        print(line)
    return report.status
