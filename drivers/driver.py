"""The asyncio driver: the host side of link-layer.md over a serial port or a TCP device server.

``DeviceDriver`` owns only I/O: it opens the port from a URL (``open_port``: a device path,
a device server's raw TCP port ``socket://``, or an RFC 2217 server ``rfc2217://`` with the
line set on it, ``drivers.rfc2217``), answers every frame (ACK, NAK),
suppresses duplicates, reconnects with jittered exponential backoff, and turns frames into
``drivers.events`` values. Framing and messages are the sans-IO codec (``drivers.link``,
``drivers.messages``); the device's rules are the daemon's business.

Use it as an async iterator, closed deterministically on exit::

    driver = DeviceDriver(DriverSettings(device="shuffler", url="/dev/ttyUSB0"))
    async with contextlib.aclosing(driver.events()) as events:
        async for event in events:
            journal(event)  # the ACK goes out when the loop asks for the next event

Policies, each from link-layer.md unless said otherwise:

* ACK contract: a good new frame is ACKed when the consumer asks for the next event,
  so an ACK means the consumer's loop body ran (journaled it). A consumer slower than
  ``ack_deadline`` (link-layer.md: 250 ms) is logged; the device then retransmits, and the
  retransmission is ACKed as a duplicate.
* A repeated sequence number (the ACK was lost) is ACKed again at once and not delivered,
  across reconnects too (the ACK may have died with the port). The same number with other
  content is no retransmission: the device restarted without its ``HELLO`` reaching us (a
  port flushes what arrived before it was opened). It is a new frame, delivered and ACKed
  as any other, with a warning: taking it as a repeat would lose an event the device
  believes delivered. ``HELLO`` resets the expected sequence.
* Bad frames are NAKed at once (``NAK,<seq>`` or ``NAK,0``) and delivered as
  ``BadFrameReceived``: nothing received is lost. Logged at debug only: the consumer
  decides what a flood of them may cost its log. Bytes outside any frame are not answered
  (link-layer.md discards them) but delivered too, as ``NoiseReceived`` after the frames
  of the read that brought them: a line at the wrong baud rate brings nothing else.
* ``QUERY`` is sent after every connect. With ``silence_timeout``, a ``QUERY`` probes a device
  quiet for half of it; no byte by the end of it is a disconnect (``DeviceTimeout``).
* The port's loss (USB unplugged, pty closed, socket dropped, I/O error) gives
  ``Disconnected``; reopening waits ``reconnect_initial * 2**n`` capped at ``reconnect_max``,
  jittered to 50-100 % of that (``foundation.backoff``), and starts again from
  ``reconnect_initial`` once a good frame arrives. Only cancellation (or closing the
  iterator) stops the driver; the port is closed and waited for (pyserial-asyncio closes it
  in a background task: we await it).
* Memory is bounded: the stream reader pauses the port beyond its limit, the decoder holds one
  line, and answers to a device that does not read are dropped beyond a small buffer.
* Logging: structlog bound with device and url; frames in hex at debug only, never a card at
  info (shuffler-icd.md "Card data is secret until it is face up").
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import serial
import serial.rs485
import serial_asyncio_fast
import structlog

from drivers.errors import DeviceTimeout, LinkLost, PortSettingRefused
from drivers.events import (
    BadFrameReceived,
    Connected,
    Disconnected,
    DriverEvent,
    NoiseReceived,
    Received,
)
from drivers.link import BadFrame, next_seq
from drivers.messages import (
    Ack,
    Decoded,
    DeviceMessage,
    MessageDecoder,
    Nak,
    Query,
    encode_message,
)
from drivers.rfc2217 import ComPortClient
from drivers.settings import DriverSettings, Rs485
from rules import events as ev

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

READ_SIZE: Final = 4096
READ_LIMIT: Final = 16 * 1024  # the stream reader pauses the port beyond twice this
WRITE_LIMIT: Final = 4096  # answers queued for a device that does not read: drop beyond
CLOSE_TIMEOUT: Final = 5.0
CONNECT_TIMEOUT: Final = 5.0
_QUERY: Final = encode_message(Query())


class _Port(serial.Serial):
    """A pyserial port whose non-blocking write reports a full output buffer.

    pyserial 3.5's ``write`` with ``write_timeout=0`` retries ``EAGAIN`` in a busy loop, so a
    device that stops reading would freeze the event loop. Raising ``BlockingIOError`` lets
    the transport buffer the rest and wait until the port is writable.
    """

    def write(self, b: ReadableBuffer, /) -> int | None:
        """Write what the port takes now; ``BlockingIOError`` when it takes nothing."""
        if self.fd is None:
            raise serial.PortNotOpenError()
        try:
            return os.write(self.fd, b)
        except BlockingIOError:
            raise
        except OSError as exc:
            raise serial.SerialException(f"write failed: {exc}") from exc


def set_rs485(port: serial.Serial, url: str, rs485: Rs485) -> None:
    """Put ``port`` in the kernel's RS-485 mode (``TIOCSRS485``), or close it and raise
    ``PortSettingRefused`` with a sentence when its driver has none (a pty, most USB
    adapters that switch their transmitter by themselves)."""
    try:
        port.rs485_mode = serial.rs485.RS485Settings(
            rts_level_for_tx=rs485.rts_level_for_tx,
            rts_level_for_rx=rs485.rts_level_for_rx,
            loopback=False,
            delay_before_tx=rs485.delay_before_tx,
            delay_before_rx=rs485.delay_before_rx,
        )
    except (ValueError, OSError, NotImplementedError) as exc:
        port.close()
        why = str(exc).removeprefix("Failed to set RS485 mode: ")
        raise PortSettingRefused(
            f"{url} refuses RS-485 mode ({why}): its kernel driver has none; use an adapter "
            "that switches its transmitter by itself and set rs485 = false"
        ) from exc


class _Transport(serial_asyncio_fast.SerialTransport):
    """pyserial-asyncio-fast 0.16 leaves its writer registered once a buffered write has
    drained; the next "writable" then asserts on the empty buffer, again and again. Stop
    watching for "writable" when there is nothing to write.

    This overrides private parts of 0.16 (``pyproject.toml`` pins ``<0.17`` and names the
    upstream fix to watch; a test in ``tests/drivers/test_driver.py`` checks they exist)."""

    def _write_ready(self) -> None:
        if not self._write_buffer:
            self._remove_writer()
            return
        super()._write_ready()

    def _fatal_error(
        self, exc: BaseException, message: str = "Fatal error on serial transport"
    ) -> None:
        """A port that fails with an OS error (unplugged, pty closed) is a device problem,
        not a bug: abort quietly, as asyncio's own transports do for ``OSError``; the read
        that follows reports it as ``Disconnected``. Anything else still reaches the loop's
        exception handler (an ERROR with a traceback)."""
        if isinstance(exc, OSError):
            structlog.get_logger("lammer.driver").debug(message, error=str(exc))
            self._abort(exc)
            return
        super()._fatal_error(exc, message)


@dataclass(slots=True)
class Port:
    """One open port, whatever it is: the stream pair, and the RFC 2217 session of an
    ``rfc2217://`` server. ``open_port`` opens one; the driver and ``lammer probe`` use it.
    """

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    telnet: ComPortClient | None = None  # an rfc2217:// server's session
    pending: bytes = b""  # the device's bytes that came with the RFC 2217 negotiation

    @property
    def closing(self) -> bool:
        """Closed, or closing after an error."""
        return self.writer.transport.is_closing()

    def buffered(self) -> int:
        """Bytes written and not yet taken by the port."""
        return self.writer.transport.get_write_buffer_size()

    def write(self, data: bytes) -> None:
        """Send the host's bytes (through the RFC 2217 session, which may hold them)."""
        if self.telnet is not None:
            data = self.telnet.encode(data)  # held while the server suspends
        if data and not self.closing:
            self.writer.write(data)

    async def receive(self) -> bytes:
        """The device's next bytes as they came (b"" at the end of the stream): through
        the RFC 2217 session if any, which may bring none (a server's own message)."""
        if self.pending:
            data, self.pending = self.pending, b""
            return data
        while True:
            data = await self.reader.read(READ_SIZE)
            if self.telnet is None or not data:
                return data
            payload = self.telnet.feed(data)
            self.flush_telnet()
            if payload:
                return payload

    def flush_telnet(self) -> None:
        """Send what the RFC 2217 session has to say (answers, held bytes resumed)."""
        out = self.telnet.take_output() if self.telnet is not None else b""
        if out and not self.closing:
            self.writer.write(out)

    async def close(self) -> None:
        """Close the port and wait until it is really closed (pyserial-asyncio closes the
        serial port in a background task after ``close()`` returns: the close race).
        Raises nothing: an error of the closing port is the loss already reported."""
        writer = self.writer
        # Once only: pyserial-asyncio closes again (and fails in a background task) if a
        # transport that is already closing after an I/O error is aborted a second time.
        if not writer.transport.is_closing():
            writer.transport.abort()  # no drain: a device that stopped reading must not block
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await writer.wait_closed()
        except Exception as exc:  # the loss itself, reported again by wait_closed
            structlog.get_logger("lammer.driver").debug("closed", error=str(exc))


async def open_port(settings: DriverSettings) -> Port:
    """Open the port ``settings`` names: a device path (pyserial, exclusively, RS-485 if
    asked), a device server's raw TCP port, or an RFC 2217 server with the line set on it.

    Raises ``OSError``: ``serial.SerialException`` (no such port, permission, busy),
    ``PortSettingRefused`` (RS-485), a connect's error or timeout, ``LinkLost`` (an RFC
    2217 server that refuses, closes or does not finish).
    """
    endpoint = settings.endpoint
    if endpoint is not None:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            reader, writer = await asyncio.open_connection(
                endpoint.host, endpoint.port, limit=READ_LIMIT
            )
        port = Port(reader, writer)
        if endpoint.scheme == "rfc2217":
            try:
                await _negotiate(port, settings, endpoint.timeout)
            except BaseException:
                await port.close()
                raise
        return port
    # Opened here, not in an executor thread: pyserial opens a tty non-blocking, and a
    # cancelled executor open would leave an open port behind.
    ser = _Port(
        settings.url,
        baudrate=settings.baudrate,
        bytesize=settings.bytesize,
        parity=settings.parity,
        stopbits=settings.stopbits,
        xonxoff=settings.xonxoff,
        rtscts=settings.rtscts,
        exclusive=True,  # flock: a second opener fails instead of stealing frames
    )
    if settings.rs485 is not None:
        set_rs485(ser, settings.url, settings.rs485)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    protocol = asyncio.StreamReaderProtocol(reader)
    transport = _Transport(loop, protocol, ser)
    return Port(reader, asyncio.StreamWriter(transport, protocol, reader, loop))


async def _negotiate(port: Port, settings: DriverSettings, within: float) -> None:
    """Set the line on an RFC 2217 server (``drivers.rfc2217``) within ``within`` seconds.
    Raises ``LinkLost`` (an ``OSError``: the open is retried with backoff) if the server
    refuses an option or a setting, closes, or does not finish in time."""
    telnet = ComPortClient(settings.port_request())
    port.telnet = telnet
    port.writer.write(telnet.start())
    pending = bytearray()
    try:
        async with asyncio.timeout(within):
            while not telnet.ready:
                if telnet.failure is not None:
                    raise LinkLost(telnet.failure)
                data = await port.reader.read(READ_SIZE)
                if not data:
                    raise LinkLost("the device server closed the connection (RFC 2217)")
                pending += telnet.feed(data)
                port.flush_telnet()
    except TimeoutError:
        waiting = ", ".join(telnet.waiting_for())
        raise LinkLost(
            f"the device server did not finish RFC 2217 within {within:g} s "
            f"(no answer for: {waiting})"
        ) from None
    port.pending = bytes(pending)
    structlog.get_logger("lammer.driver").debug(
        "rfc2217 port set", url=settings.url, server=telnet.signature
    )


@dataclass(slots=True)
class _Link:
    """One open port and a fresh decoder."""

    port: Port
    decoder: MessageDecoder
    dropped: int = 0  # answers dropped in a row because the device does not read
    # The silence probe's answer expected next (link-layer.md: QUERY -> HELLO, then the
    # configuration message): "hello", then "config" once the HELLO came; None otherwise.
    probing: str | None = None


class DeviceDriver:
    """The host side of one device's link (see the module docstring for every policy).

    ``settings`` says which device, where and how (``DriverSettings`` checked them when it
    was built). ``rng`` jitters the reconnect delays (a seeded one in tests). ``last_frame``
    is the consumer's record of the last frame it took, ``(seq, raw)``, carried across a
    restart of the host: a retransmission of it is ACKed again, not delivered twice.
    """

    def __init__(
        self,
        settings: DriverSettings,
        *,
        rng: random.Random | None = None,
        last_frame: tuple[int, bytes] | None = None,
    ) -> None:
        self.settings = settings
        self.device: ev.Device = settings.device
        self.url = settings.url
        self._backoff = settings.backoff
        self._rng = rng if rng is not None else random.Random()  # noqa: S311  reconnect jitter, not a secret
        self._log = structlog.get_logger("lammer.driver").bind(device=self.device, url=self.url)
        # The last delivered frame (seq, raw). Kept across reconnects: a retransmission of a
        # frame whose ACK died with the port must not be delivered twice (link-layer.md).
        self._last: tuple[int, bytes] | None = last_frame

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before reopening after ``attempt`` failures in a row (0 first)."""
        return self._backoff.delay(attempt, self._rng)

    async def events(self) -> AsyncGenerator[DriverEvent, None]:
        """Run the link until cancelled or closed, yielding every event in order.

        Close it with ``contextlib.aclosing`` (or cancel the task that iterates) to close the
        port deterministically.
        """
        attempt = 0
        while True:
            try:
                link = await self._open()
            except OSError as exc:  # includes serial.SerialException and connect timeouts
                delay = self.backoff(attempt)
                attempt += 1
                self._log.warning("open failed", error=str(exc), retry_in=round(delay, 3))
                await asyncio.sleep(delay)
                continue
            reason = "closed"
            try:
                self._send(link, _QUERY)  # link-layer.md: QUERY -> HELLO, then MODE
                self._log.info("connected")
                yield Connected(device=self.device, url=self.url)
                while True:
                    data = await self._read(link)
                    for item in link.decoder.feed(data):
                        event = self._judge(link, item)
                        if event is None:
                            continue
                        arrived = time.monotonic()
                        yield event
                        if isinstance(event, Received):
                            # The consumer asked for the next event: this one is durable.
                            self._acknowledge(link, event, arrived)
                            attempt = 0  # a device that talks: back off from the start
                    noise = link.decoder.frames.take_noise()
                    if noise is not None:
                        self._log.debug("noise", size=noise.size, raw=noise.raw.hex())
                        yield NoiseReceived(device=self.device, raw=noise.raw, size=noise.size)
            except (LinkLost, DeviceTimeout) as exc:
                reason = str(exc)
            finally:
                await self._close(link)
            self._log.warning("disconnected", reason=reason)
            yield Disconnected(device=self.device, url=self.url, reason=reason)
            delay = self.backoff(attempt)
            attempt += 1
            await asyncio.sleep(delay)

    def _judge(self, link: _Link, item: Decoded | BadFrame) -> DriverEvent | None:
        """Answer at once what is answered at once (NAK, ACK of a repeat) and return the event
        to deliver, if any. A ``Received`` is ACKed later, by ``_acknowledge``."""
        if isinstance(item, BadFrame):
            # link-layer.md: NAK,<seq>, or NAK,0 when the sequence number could not be read.
            seq = item.seq if item.seq is not None else 0
            # At debug: the consumer logs bad frames, within bounds of its own (a line gone
            # bad brings hundreds a second); the table daemon's are in daemon.bad_frames.
            self._log.debug("bad frame NAKed", reason=item.reason, seq=seq)
            self._log.debug("bad frame", raw=item.raw.hex())
            self._send(link, encode_message(Nak(seq=seq)))
            return BadFrameReceived(device=self.device, raw=item.raw, reason=item.reason)
        msg = item.message
        if not isinstance(msg, DeviceMessage):  # the decoder reads with sender="device"
            raise TypeError(f"a {msg.kind} from a device: the decoder refuses host messages")
        hello = isinstance(msg.fact, ev.DeviceHello)  # a HELLO resets the sequence
        if self._last is not None:
            last_seq, last_raw = self._last
            if msg.seq == last_seq and item.raw == last_raw:
                # A retransmission after a lost ACK: ACK again, never process twice.
                self._log.debug("repeat ACKed again", seq=msg.seq)
                self._send(link, encode_message(Ack(seq=msg.seq)))
                return None
            if msg.seq == last_seq and not hello:
                # Not a retransmission (its bytes differ): the device restarted unseen.
                self._log.warning(
                    "sequence number repeated with other content: a new frame", seq=msg.seq
                )
            elif msg.seq != next_seq(last_seq) and not hello:
                self._log.warning("sequence gap", expected=next_seq(last_seq), seq=msg.seq)
        self._log.debug("frame", seq=msg.seq, raw=item.raw.hex())
        return Received(
            device=self.device,
            seq=msg.seq,
            raw=item.raw,
            fact=msg.fact,
            probe=self._probe_reply(link, msg.fact),
        )

    def _probe_reply(self, link: _Link, fact: ev.DeviceFact) -> bool:
        """Whether ``fact`` answers the silence probe's QUERY: the HELLO that follows it,
        then the shuffler's MODE after that HELLO. Any other frame ends the answer."""
        expected, link.probing = link.probing, None
        if expected == "hello" and isinstance(fact, ev.DeviceHello):
            link.probing = "config" if self.device == "shuffler" else None
            return True
        return expected == "config" and isinstance(fact, ev.ModeReported)

    def _acknowledge(self, link: _Link, event: Received, arrived: float) -> None:
        self._send(link, encode_message(Ack(seq=event.seq)))
        self._last = (event.seq, event.raw)
        late = time.monotonic() - arrived
        if late > self.settings.ack_deadline:  # link-layer.md: ACK within 250 ms
            self._log.warning("ACK late: consumer slow", seq=event.seq, seconds=round(late, 3))

    # -----------------------------------------------------------------------------------
    # I/O

    async def _open(self) -> _Link:
        """Open the port (``open_port``). Raises ``OSError``."""
        port = await open_port(self.settings)
        return _Link(port, MessageDecoder(device=self.device, sender="device"))

    async def _read(self, link: _Link) -> bytes:
        """The next bytes from the device. Raises ``LinkLost`` or ``DeviceTimeout``."""
        try:
            silence = self.settings.silence_timeout
            if silence is None:
                data = await link.port.receive()
            else:
                data = await self._read_or_probe(link, silence)
        except DeviceTimeout:
            raise  # a TimeoutError, hence an OSError: not a lost port
        except (OSError, EOFError) as exc:
            raise LinkLost(f"port lost: {exc}") from exc
        if not data:
            raise LinkLost("port lost: end of stream")
        return data

    async def _read_or_probe(self, link: _Link, silence: float) -> bytes:
        for probe in (True, False):
            window = asyncio.timeout(silence / 2)
            try:
                async with window:
                    return await link.port.receive()
            except TimeoutError:
                if not window.expired():
                    raise  # an I/O error that happens to be a TimeoutError: the port is lost
            if probe:
                self._log.debug("quiet: QUERY", seconds=silence / 2)
                link.probing = "hello"
                self._send(link, _QUERY)
        raise DeviceTimeout(f"silent for {silence:g} s (no answer to QUERY)", seconds=silence)

    def _send(self, link: _Link, frame: bytes) -> None:
        port = link.port
        if port.closing:
            return  # the read that follows reports the loss
        if port.buffered() > WRITE_LIMIT:
            # The device is not reading: dropping an answer costs a retransmission, holding
            # every answer would cost unbounded memory.
            if not link.dropped:
                self._log.warning("device not reading: dropping answers")
            link.dropped += 1
            return
        if link.dropped:
            self._log.warning("device reading again", dropped=link.dropped)
            link.dropped = 0
        self._log.debug("send", raw=frame.hex())
        port.write(frame)

    async def _close(self, link: _Link) -> None:
        await link.port.close()
