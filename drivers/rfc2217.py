"""RFC 2217 (Telnet COM Port Control) from the client's side, as a sans-IO codec.

A serial device server on the table's network (ser2net, Moxa NPort, Digi, Lantronix) that
speaks RFC 2217 carries the serial line's settings as well as its bytes: the table's
configuration sets the baud rate, data bits, parity, stop bits and flow control of a port
that may be across the room. ``ComPortClient`` is the protocol and nothing else (no
socket, no clock, no log): ``start()`` and ``feed(data)`` return what the server sent
for the serial line; ``take_output()`` what the client must send the server; ``encode``
wraps the host's own bytes. The driver (``drivers.driver``) runs it on asyncio, over the
same link layer, deadlines and reconnects as a device path (why our own and not pyserial's
client, measured: ``bench/bench_rfc2217.py`` and the README).

Telnet (RFC 854) underneath: a byte 0xFF (IAC) starts a command, so the data's own 0xFF is
sent twice; ``IAC WILL/WONT/DO/DONT <option>`` negotiates an option, ``IAC SB <option>
... IAC SE`` carries an option's subnegotiation.

What the client does, in order:

* It asks BINARY both ways (RFC 856: the data passes as it is, CR included) and offers
  COM-PORT-OPTION (44). A server that refuses either is no RFC 2217 server for this use:
  ``failure`` says so (a raw TCP server is ``socket://``).
* Once the server says ``DO COM-PORT-OPTION``: SET-BAUDRATE, SET-DATASIZE, SET-PARITY,
  SET-STOPSIZE and SET-CONTROL (flow control: none, XON/XOFF or RTS/CTS) with the table's
  settings; the server answers each with the value it set. The port is ``ready`` when
  every answer is the value asked; an answer with another value (a server that keeps its
  port at a fixed rate, or cannot set it) is a ``failure`` naming both. With
  ``await_control`` false (pyserial's URL option ``ign_set_control``) the flow control's
  answer is not awaited: some servers never send it.
* Then, not awaited: DTR on and RTS on (RTS left to the flow control with RTS/CTS), as
  pyserial does when it opens a local port, and a request for the server's SIGNATURE
  (its name, e.g. ``ser2net``), kept in ``signature``. A server whose port has no modem
  lines (ser2net on a pty) does not answer DTR or RTS.

What the server sends unasked:

* NOTIFY-LINESTATE: an overrun, parity, framing error or break on its line is counted in
  ``line_errors`` (a server sends these only if its line-state mask allows).
* NOTIFY-MODEMSTATE: ignored (lammer reads no modem line).
* FLOWCONTROL-SUSPEND: the client holds its bytes until FLOWCONTROL-RESUME, at most
  ``HOLD_LIMIT`` of them; more are dropped and counted in ``dropped`` (an answer lost is a
  retransmission, link-layer.md; memory held without bound is not).
* Any other option: refused once (``DONT``/``WONT``), never a negotiation loop.

Memory is bounded: a subnegotiation longer than ``MAX_SUBNEGOTIATION`` bytes is cut there.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

IAC: Final = 255
DONT: Final = 254
DO: Final = 253
WONT: Final = 252
WILL: Final = 251
SB: Final = 250
SE: Final = 240

BINARY: Final = 0
ECHO: Final = 1
SGA: Final = 3
COM_PORT: Final = 44

# RFC 2217 commands, client to server; the server's answer is the command + 100.
SIGNATURE: Final = 0
SET_BAUDRATE: Final = 1
SET_DATASIZE: Final = 2
SET_PARITY: Final = 3
SET_STOPSIZE: Final = 4
SET_CONTROL: Final = 5
NOTIFY_LINESTATE: Final = 6
NOTIFY_MODEMSTATE: Final = 7
FLOWCONTROL_SUSPEND: Final = 8
FLOWCONTROL_RESUME: Final = 9
SERVER: Final = 100

PARITY_CODES: Final = {"N": 1, "O": 2, "E": 3, "M": 4, "S": 5}
STOPSIZE_CODES: Final = {1: 1, 2: 2, 1.5: 3}
FLOW_NONE: Final = 1
FLOW_XONXOFF: Final = 2
FLOW_RTSCTS: Final = 3
DTR_ON: Final = 8
RTS_ON: Final = 11
LINE_ERRORS: Final = 0x02 | 0x04 | 0x08 | 0x10  # overrun, parity, framing, break

HOLD_LIMIT: Final = 4096
MAX_SUBNEGOTIATION: Final = 256
CLIENT_SIGNATURE: Final = b"lammer"

_DATA, _COMMAND, _OPTION, _SUB, _SUB_IAC = range(5)
_SETTING_NAMES: Final = {
    SET_BAUDRATE: "baud rate",
    SET_DATASIZE: "data bits",
    SET_PARITY: "parity",
    SET_STOPSIZE: "stop bits",
    SET_CONTROL: "flow control",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PortRequest:
    """The serial line the client asks the server to set (the table's ``[device]``)."""

    baudrate: int
    bytesize: int = 8
    parity: str = "N"
    stopbits: float = 1
    xonxoff: bool = False
    rtscts: bool = False
    await_control: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.baudrate < 2**32:
            raise ValueError(f"baud rate {self.baudrate} does not fit RFC 2217's 32 bits")
        if self.parity not in PARITY_CODES or self.stopbits not in STOPSIZE_CODES:
            raise ValueError(f"no RFC 2217 code for {self.bytesize}{self.parity}{self.stopbits}")
        if self.xonxoff and self.rtscts:
            raise ValueError("RFC 2217 sets one flow control: XON/XOFF or RTS/CTS, not both")

    def settings(self) -> dict[int, bytes]:
        """Each SET command and the value asked, as the server answers it."""
        flow = FLOW_RTSCTS if self.rtscts else FLOW_XONXOFF if self.xonxoff else FLOW_NONE
        return {
            SET_BAUDRATE: struct.pack("!I", self.baudrate),
            SET_DATASIZE: bytes([self.bytesize]),
            SET_PARITY: bytes([PARITY_CODES[self.parity]]),
            SET_STOPSIZE: bytes([STOPSIZE_CODES[self.stopbits]]),
            SET_CONTROL: bytes([flow]),
        }


def _describe(command: int, value: bytes) -> str:
    """A setting's value as an operator reads it (``115200``, ``parity E``)."""
    if command == SET_BAUDRATE and len(value) == 4:
        return f"{struct.unpack('!I', value)[0]} baud"
    if not value:
        return f"{_SETTING_NAMES[command]} (no value)"
    code = value[0]
    names = {
        SET_DATASIZE: {n: f"{n} data bits" for n in range(5, 9)},
        SET_PARITY: {v: f"parity {k}" for k, v in PARITY_CODES.items()},
        SET_STOPSIZE: {v: f"{k:g} stop bits" for k, v in STOPSIZE_CODES.items()},
        SET_CONTROL: {
            FLOW_NONE: "no flow control",
            FLOW_XONXOFF: "XON/XOFF flow control",
            FLOW_RTSCTS: "RTS/CTS flow control",
        },
    }
    return names.get(command, {}).get(code, f"{_SETTING_NAMES[command]} code {code}")


def escape(data: bytes) -> bytes:
    """``data`` as Telnet carries it: every 0xFF doubled."""
    return data.replace(b"\xff", b"\xff\xff")


def _subnegotiation(command: int, value: bytes) -> bytes:
    return bytes([IAC, SB, COM_PORT, command]) + escape(value) + bytes([IAC, SE])


class ComPortClient:
    """One RFC 2217 session, the client's side (see the module docstring)."""

    def __init__(self, request: PortRequest) -> None:
        self.request = request
        self.failure: str | None = None
        """Why this server cannot serve the port as asked (refused an option or a setting)."""
        self.signature: str | None = None
        """The server's SIGNATURE text, if it sent one."""
        self.line_errors = 0
        """NOTIFY-LINESTATE reports of an overrun, parity or framing error, or a break."""
        self.suspended = False
        """The server asked for a pause (FLOWCONTROL-SUSPEND) and has not resumed."""
        self.dropped = 0
        """Bytes of the host dropped while suspended, beyond ``HOLD_LIMIT``."""
        self._asked = request.settings()
        if not request.await_control:
            del self._asked[SET_CONTROL]
        self._answers: dict[int, bytes] = {}
        self._out = bytearray()
        self._held = bytearray()
        self._state = _DATA
        self._verb = 0
        self._sub = bytearray()
        self._we: dict[int, bool] = {}  # options we do (our WILL accepted by their DO)
        self._they: dict[int, bool] = {}  # options they do (their WILL accepted by our DO)
        self._refused: set[tuple[int, int]] = set()
        self._settings_sent = False

    # -- what the client sends -----------------------------------------------------------

    def start(self) -> bytes:
        """The opening negotiation: BINARY both ways, COM-PORT-OPTION offered."""
        return bytes(
            [IAC, WILL, BINARY, IAC, DO, BINARY, IAC, WILL, COM_PORT, IAC, DO, SGA, IAC, WILL, SGA]
        )

    def encode(self, data: bytes) -> bytes:
        """The host's bytes as they go to the server now (empty while suspended: held)."""
        if self.suspended:
            room = HOLD_LIMIT - len(self._held)
            self._held += data[: max(room, 0)]
            self.dropped += max(len(data) - max(room, 0), 0)
            return b""
        return escape(data)

    def take_output(self) -> bytes:
        """Protocol bytes to send the server (answers, settings, held data resumed)."""
        out = bytes(self._out)
        self._out.clear()
        return out

    @property
    def ready(self) -> bool:
        """BINARY both ways, COM-PORT-OPTION accepted, every awaited setting set as asked."""
        return (
            self.failure is None
            and self._we.get(BINARY, False)
            and self._they.get(BINARY, False)
            and self._we.get(COM_PORT, False)
            and all(self._answers.get(c) == v for c, v in self._asked.items())
        )

    def waiting_for(self) -> list[str]:
        """What the session still waits for, for a message when it takes too long."""
        missing = [
            what
            for what, done in (
                ("binary mode from the server", self._they.get(BINARY, False)),
                ("binary mode to the server", self._we.get(BINARY, False)),
                ("COM-PORT-OPTION (RFC 2217)", self._we.get(COM_PORT, False)),
            )
            if not done
        ]
        missing += [_SETTING_NAMES[c] for c in self._asked if c not in self._answers]
        return missing

    # -- what the server sends -------------------------------------------------------------

    def feed(self, data: bytes) -> bytes:  # noqa: C901  one state machine over Telnet's five states
        """Take bytes from the server; return the serial line's data among them."""
        payload = bytearray()
        for byte in data:
            state = self._state
            if state == _DATA:
                if byte == IAC:
                    self._state = _COMMAND
                else:
                    payload.append(byte)
            elif state == _COMMAND:
                if byte == IAC:
                    payload.append(IAC)  # a doubled 0xFF is data
                    self._state = _DATA
                elif byte in (WILL, WONT, DO, DONT):
                    self._verb = byte
                    self._state = _OPTION
                elif byte == SB:
                    self._sub.clear()
                    self._state = _SUB
                else:
                    self._state = _DATA  # NOP, GA, ...: nothing for a serial port
            elif state == _OPTION:
                self._negotiate(self._verb, byte)
                self._state = _DATA
            elif state == _SUB:
                if byte == IAC:
                    self._state = _SUB_IAC
                elif len(self._sub) < MAX_SUBNEGOTIATION:
                    self._sub.append(byte)
            elif byte == SE:  # _SUB_IAC
                self._subnegotiated(bytes(self._sub))
                self._state = _DATA
            else:
                if byte == IAC and len(self._sub) < MAX_SUBNEGOTIATION:
                    self._sub.append(IAC)
                self._state = _SUB
        return bytes(payload)

    def _negotiate(self, verb: int, option: int) -> None:
        # start() asked DO BINARY and SGA and offered WILL BINARY, COM-PORT-OPTION and SGA:
        # the server's WILL or DO of those is its answer, and needs none.
        if verb == WILL:
            if option in (BINARY, SGA):
                self._they[option] = True
            else:
                self._refuse(DONT, option)
        elif verb == WONT:
            if option == BINARY:
                self.failure = "the device server refuses binary mode (RFC 856): use socket://"
            self._they[option] = False
        elif verb == DO:
            if option in (BINARY, COM_PORT, SGA):
                self._we[option] = True
                if option == COM_PORT:
                    self._send_settings()
            else:
                self._refuse(WONT, option)
        else:  # DONT
            if option == COM_PORT:
                self.failure = (
                    "the device server refuses COM-PORT-OPTION: it is no RFC 2217 server "
                    "(a raw TCP port is socket://host:port)"
                )
            elif option == BINARY:
                self.failure = "the device server refuses binary mode (RFC 856): use socket://"
            self._we[option] = False

    def _refuse(self, verb: int, option: int) -> None:
        if (verb, option) not in self._refused:  # once: never a negotiation loop
            self._refused.add((verb, option))
            self._send(verb, option)

    def _send(self, verb: int, option: int) -> None:
        self._out += bytes([IAC, verb, option])

    def _send_settings(self) -> None:
        if self._settings_sent:
            return
        self._settings_sent = True
        for command, value in self.request.settings().items():
            self._out += _subnegotiation(command, value)
        self._out += _subnegotiation(SET_CONTROL, bytes([DTR_ON]))
        if not self.request.rtscts:
            self._out += _subnegotiation(SET_CONTROL, bytes([RTS_ON]))
        self._out += _subnegotiation(SIGNATURE, b"")

    def _subnegotiated(self, sub: bytes) -> None:
        if len(sub) < 2 or sub[0] != COM_PORT:
            return
        command, value = sub[1] - SERVER, sub[2:]
        if command in self._asked:
            if command == SET_CONTROL and value[:1] not in (b"\x01", b"\x02", b"\x03"):
                return  # the answer to DTR or RTS, not to the flow control
            self._answers[command] = value
            if value != self._asked[command] and self.failure is None:
                self.failure = (
                    f"the device server set {_describe(command, value)}, not "
                    f"{_describe(command, self._asked[command])} as asked"
                )
        elif command == SIGNATURE:
            if value:
                self.signature = value.decode("ascii", "replace")
            else:  # the server asks for ours
                self._out += _subnegotiation(SIGNATURE, CLIENT_SIGNATURE)
        elif command == NOTIFY_LINESTATE:
            if value and value[0] & LINE_ERRORS:
                self.line_errors += 1
        elif command == FLOWCONTROL_SUSPEND:
            self.suspended = True
        elif command == FLOWCONTROL_RESUME:
            self.suspended = False
            self._out += escape(bytes(self._held))
            self._held.clear()
