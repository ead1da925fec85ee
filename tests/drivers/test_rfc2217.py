"""The RFC 2217 client's codec (``drivers.rfc2217``), fed what a server sends, byte by byte
as RFC 854 and RFC 2217 spell it out; the real servers (ser2net, pyserial's PortManager)
are in ``test_device_servers.py``."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.rfc2217 import HOLD_LIMIT, ComPortClient, PortRequest

IAC, DONT, DO, WONT, WILL, SB, SE = 255, 254, 253, 252, 251, 250, 240
BINARY, ECHO, SGA, COM_PORT = 0, 1, 3, 44


def sb(*payload: int | bytes) -> bytes:
    """``IAC SB COM-PORT-OPTION <payload> IAC SE``."""
    body = b"".join(bytes([p]) if isinstance(p, int) else p for p in payload)
    return bytes([IAC, SB, COM_PORT]) + body + bytes([IAC, SE])


ACCEPT = bytes([IAC, DO, BINARY, IAC, WILL, BINARY, IAC, DO, COM_PORT])
# The server's answers to 115200 8N1 without flow control: command + 100, the value set.
ANSWERS = sb(101, struct.pack("!I", 115200)) + sb(102, 8) + sb(103, 1) + sb(104, 1) + sb(105, 1)


def test_the_opening_asks_binary_both_ways_and_offers_the_com_port_option() -> None:
    opening = ComPortClient(PortRequest(baudrate=115200)).start()
    commands = [tuple(opening[i : i + 3]) for i in range(0, len(opening), 3)]
    assert (IAC, WILL, BINARY) in commands
    assert (IAC, DO, BINARY) in commands
    assert (IAC, WILL, COM_PORT) in commands


def test_the_settings_go_once_the_server_does_the_com_port_option() -> None:
    client = ComPortClient(PortRequest(baudrate=57600, parity="E", stopbits=2, rtscts=True))
    client.start()
    assert client.feed(bytes([IAC, DO, BINARY, IAC, WILL, BINARY])) == b""
    assert client.take_output() == b""  # nothing before DO COM-PORT-OPTION (RFC 2217)
    client.feed(bytes([IAC, DO, COM_PORT]))
    sent = client.take_output()
    assert sb(1, struct.pack("!I", 57600)) in sent  # SET-BAUDRATE, network order
    assert sb(2, 8) in sent  # SET-DATASIZE
    assert sb(3, 3) in sent  # SET-PARITY: 3 is EVEN
    assert sb(4, 2) in sent  # SET-STOPSIZE: 2 is two stop bits
    assert sb(5, 3) in sent  # SET-CONTROL: 3 is hardware (RTS/CTS) flow control
    assert sb(5, 8) in sent  # DTR on
    assert sb(5, 11) not in sent  # RTS is the flow control's with RTS/CTS
    before = client.ready
    assert not before
    client.feed(
        sb(101, struct.pack("!I", 57600)) + sb(102, 8) + sb(103, 3) + sb(104, 2) + sb(105, 3)
    )
    assert client.ready
    assert client.failure is None


@given(st.lists(st.integers(1, len(ACCEPT + ANSWERS) - 1), max_size=10))
def test_any_chunking_of_the_server_s_bytes_gives_the_same_session(cuts: list[int]) -> None:
    stream = ACCEPT + ANSWERS + b"$HELLO" + bytes([IAC, IAC]) + b"x"
    client = ComPortClient(PortRequest(baudrate=115200))
    client.start()
    payload = b""
    bounds = [0, *sorted(cuts), len(stream)]
    for start, stop in itertools.pairwise(bounds):
        payload += client.feed(stream[start:stop])
    assert client.ready
    assert payload == b"$HELLO\xffx"  # a doubled IAC is one 0xFF of data


def test_a_server_that_sets_another_value_is_a_failure_naming_both() -> None:
    client = ComPortClient(PortRequest(baudrate=115200))
    client.feed(ACCEPT + sb(101, struct.pack("!I", 9600)))
    assert not client.ready
    assert client.failure == "the device server set 9600 baud, not 115200 baud as asked"
    other = ComPortClient(PortRequest(baudrate=115200, parity="E"))
    other.feed(ACCEPT + sb(103, 1))
    assert other.failure == "the device server set parity N, not parity E as asked"


@pytest.mark.parametrize(
    ("refusal", "fragment"),
    [
        (bytes([IAC, DONT, COM_PORT]), "refuses COM-PORT-OPTION"),
        (bytes([IAC, WONT, BINARY]), "refuses binary mode"),
        (bytes([IAC, DONT, BINARY]), "refuses binary mode"),
    ],
)
def test_a_server_without_rfc_2217_or_binary_mode_is_a_failure(
    refusal: bytes, fragment: str
) -> None:
    client = ComPortClient(PortRequest(baudrate=115200))
    client.feed(refusal)
    assert client.failure is not None
    assert fragment in client.failure


def test_the_flow_control_answer_is_not_awaited_with_ign_set_control() -> None:
    client = ComPortClient(PortRequest(baudrate=115200, await_control=False))
    client.feed(ACCEPT + sb(101, struct.pack("!I", 115200)) + sb(102, 8) + sb(103, 1) + sb(104, 1))
    assert client.ready
    waiting = ComPortClient(PortRequest(baudrate=115200))
    waiting.feed(ACCEPT + sb(101, struct.pack("!I", 115200)) + sb(102, 8) + sb(103, 1))
    assert waiting.waiting_for() == ["stop bits", "flow control"]


def test_the_answers_to_dtr_and_rts_are_not_the_flow_control_s() -> None:
    client = ComPortClient(PortRequest(baudrate=115200))
    client.feed(ACCEPT + sb(105, 8) + sb(105, 11))  # DTR on, RTS on
    assert client.failure is None
    assert "flow control" in client.waiting_for()


def test_other_options_are_refused_once_and_never_looped() -> None:
    client = ComPortClient(PortRequest(baudrate=115200))
    client.feed(bytes([IAC, WILL, ECHO, IAC, DO, 24, IAC, WILL, ECHO, IAC, DO, 24]))
    assert client.take_output() == bytes([IAC, DONT, ECHO, IAC, WONT, 24])


def test_the_host_s_0xff_is_doubled_and_held_while_the_server_suspends() -> None:
    client = ComPortClient(PortRequest(baudrate=115200))
    assert client.encode(b"a\xffb") == b"a\xff\xffb"
    client.feed(sb(108))  # FLOWCONTROL-SUSPEND
    assert client.encode(b"$ACK,1*D7D0\r\n") == b""
    assert client.encode(b"x" * HOLD_LIMIT) == b""
    assert client.dropped == 13  # beyond the hold limit: dropped, counted
    client.feed(sb(109))  # FLOWCONTROL-RESUME
    resumed = client.take_output()
    assert resumed == b"$ACK,1*D7D0\r\n" + b"x" * (HOLD_LIMIT - 13)
    assert client.encode(b"y") == b"y"


def test_line_state_errors_are_counted_and_the_signature_kept() -> None:
    client = ComPortClient(PortRequest(baudrate=115200))
    # NOTIFY-LINESTATE: 0x08 framing error, 0x60 only "transmit registers empty".
    client.feed(sb(106, 0x08) + sb(106, 0x60) + sb(106, 0x04) + sb(100, b"ser2net 4.3"))
    assert client.line_errors == 2
    assert client.signature == "ser2net 4.3"
    client.feed(sb(100))  # the server asks for the client's signature
    assert client.take_output() == sb(0, b"lammer")


def test_a_subnegotiation_without_end_is_bounded() -> None:
    client = ComPortClient(PortRequest(baudrate=115200))
    client.feed(bytes([IAC, SB, COM_PORT, 100]) + b"x" * 100_000)
    assert len(client._sub) <= 256
    assert client.feed(bytes([IAC, SE]) + b"data") == b"data"
