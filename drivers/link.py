"""The link layer of ``link-layer.md`` as a pure, sans-IO codec (no I/O, no clock, no logs).

One frame is one ASCII line ``$<BODY>*<CRC>\\r\\n``: BODY is printable ASCII without ``$`` or
``*``, at most 240 bytes, fields separated by ``,`` (type in upper-case letters, then the
sequence number); CRC is CRC-16/CCITT-FALSE of the BODY bytes as 4 upper-case hex digits.

``FrameDecoder`` takes bytes in any chunks and returns, per call, the frames completed so far:
``Frame`` (the framing is good; the body is not yet parsed as a message) or ``BadFrame`` (a
value, never an exception). Recovery policy, as link-layer.md says:

* bytes before a ``$`` are discarded (counted in ``discarded``, not reported as frames);
  ``take_noise`` says what was discarded so since it was last asked (a line at the wrong
  baud rate brings noise and no frame at all: the driver reports it, see
  ``drivers.events.NoiseReceived``);
* a ``$`` inside a frame ends that frame as bad ("cut short") and starts a new one;
* a line longer than 256 bytes is bad, and the rest of it is skipped up to the next LF or
  ``$``, so at most 257 bytes are ever buffered whatever arrives;
* a missing ``*``, a CRC field that is not 4 upper-case hex digits, a bad CRC, a byte that is
  not printable ASCII, a body over 240 bytes, or a header that does not parse is bad.

Reasons are logged, so they never quote a CRC: the CRC of a HAND or CARD body would give
its secret cards away by brute force.

``drivers.messages.MessageDecoder`` adds the message layer on top (both directions).
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass
from typing import Final

from drivers.errors import FrameError

MAX_BODY: Final = 240  # link-layer.md "Frames": BODY at most 240 bytes
MAX_LINE: Final = 256  # link-layer.md "Frames": a line longer than 256 bytes is a bad frame
MAX_SEQ: Final = 9999  # link-layer.md "Sequence numbers": wraps from 9999 back to 1

NUMBER: Final = re.compile(r"0|[1-9][0-9]{0,8}")
"""A canonical decimal number: ASCII digits, no sign, space or leading zero (at most 9)."""
_TYPE = re.compile(r"[A-Z]+")
_CRC = re.compile(rb"[0-9A-F]{4}")
_NOT_PRINTABLE = re.compile(rb"[^\x20-\x7e]")
_DELIMITER = re.compile(rb"[$\n]")

_HUNT, _FRAME, _SKIP = 0, 1, 2  # decoder states: looking for '$', in a frame, skipping a long line


def crc16(body: bytes) -> int:
    """CRC-16/CCITT-FALSE of ``body`` (poly 0x1021, init 0xFFFF, no reflection, no final XOR).

    link-layer.md "Frames": the check value for ``b"123456789"`` is ``0x29B1``.
    """
    return binascii.crc_hqx(body, 0xFFFF)


def next_seq(seq: int) -> int:
    """The sequence number after ``seq``: +1, wrapping from 9999 back to 1 (link-layer.md
    "Sequence numbers": 0 is only ever ``QUERY``'s and ``NAK,0``'s)."""
    return 1 if seq >= MAX_SEQ else seq + 1


def check_body(body: str) -> None:
    """Raise ``FrameError`` unless ``body`` may go in a frame: printable ASCII, no ``$``/``*``,
    at most 240 bytes (link-layer.md "Frames")."""
    for index, char in enumerate(body):
        if not " " <= char <= "~":
            raise FrameError(
                f"character {ord(char):#04x} at {index} is not printable ASCII",
                seq=peek_seq(body),
            )
        if char in "$*":
            raise FrameError(f"{char!r} at {index} is reserved for framing", seq=peek_seq(body))
    if len(body) > MAX_BODY:
        raise FrameError(f"body is {len(body)} bytes, more than {MAX_BODY}", seq=peek_seq(body))


def encode_frame(body: str) -> bytes:
    """The whole frame for ``body``: ``$<BODY>*<CRC>\\r\\n``. Raises ``FrameError`` for a body
    that cannot be framed (see ``check_body``)."""
    check_body(body)
    raw = body.encode("ascii")
    return b"$%s*%04X\r\n" % (raw, crc16(raw))


def parse_number(
    text: str, *, what: str, low: int, high: int, seq: int | None = None, quote: bool = True
) -> int:
    """A canonical decimal number (ASCII digits, no sign, no leading zero) in ``low..high``.

    Raises ``FrameError`` naming ``what`` (and carrying ``seq`` for the NAK); the bad text is
    quoted unless ``quote`` is false (a field of a secret HAND or CARD body).
    """
    if not NUMBER.fullmatch(text):
        shown = f" {text[:12]!r}" if quote else ""
        raise FrameError(f"{what}{shown} is not a decimal number", seq=seq)
    value = int(text)
    if not low <= value <= high:
        raise FrameError(f"{what} {value} is out of range {low}..{high}", seq=seq)
    return value


def read_header(body: str) -> tuple[str, int]:
    """The message type and sequence number of a body (link-layer.md "Frames": the first field
    is the type in upper-case letters, the second the sequence number 0..9999).

    Raises ``FrameError``.
    """
    fields = body.split(",", 2)
    kind = fields[0]
    if not _TYPE.fullmatch(kind):
        raise FrameError(f"message type {kind[:12]!r} is not upper-case letters")
    if len(fields) < 2:
        raise FrameError(f"{kind} has no sequence number")
    seq = parse_number(fields[1], what="sequence number", low=0, high=MAX_SEQ)
    return kind, seq


def peek_seq(body: str) -> int | None:
    """The sequence number of a body if it can be read (for a NAK), else ``None``."""
    try:
        return read_header(body)[1]
    except FrameError:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """A frame whose framing, CRC and header are good. ``raw`` is the whole line as received
    (``$`` through CR LF), ``body`` the text between ``$`` and ``*``."""

    raw: bytes
    body: str
    kind: str
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Noise:
    """Bytes discarded before a ``$`` (link-layer.md: "A receiver discards bytes until it
    sees ``$``"): ``size`` of them, the first ``MAX_LINE + 1`` kept in ``raw``. They may
    hold a secret card (the rest of a HAND whose ``$`` was lost): never logged."""

    raw: bytes
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BadFrame:
    """A bad frame (link-layer.md "Frames"): answer ``NAK,<seq>``, or ``NAK,0`` when ``seq`` is
    ``None``. ``seq`` is only given when the CRC checked, so it can be trusted.

    ``raw`` is what was received (at most 257 bytes: an oversize line is cut there);
    ``reason`` is specific and never contains a card of a HAND or CARD body.
    """

    raw: bytes
    reason: str
    seq: int | None


class FrameDecoder:
    """Incremental decoder: ``feed`` bytes in any chunks, get the completed frames.

    Never raises on input; buffers at most 257 bytes (see the module docstring).
    """

    __slots__ = ("_buf", "_noise", "_noise_size", "_state", "discarded")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._state = _HUNT
        self.discarded = 0
        """Bytes thrown away outside frames (noise between frames, the tail of long lines)."""
        self._noise = bytearray()
        self._noise_size = 0

    def take_noise(self) -> Noise | None:
        """The bytes discarded before a ``$`` since the last call (the first ``MAX_LINE + 1``
        of them, and how many), or None if there were none. The tail of a line too long is
        not noise: its bad frame was reported."""
        if not self._noise_size:
            return None
        noise = Noise(raw=bytes(self._noise), size=self._noise_size)
        self._noise.clear()
        self._noise_size = 0
        return noise

    def _discard(self, data: bytes, start: int, stop: int) -> None:
        self.discarded += stop - start
        self._noise_size += stop - start
        room = MAX_LINE + 1 - len(self._noise)
        if room > 0:
            self._noise += data[start : min(stop, start + room)]

    def feed(self, data: bytes) -> list[Frame | BadFrame]:
        """Decode ``data``; return every frame it completed, good or bad, in order."""
        out: list[Frame | BadFrame] = []
        buf = self._buf
        pos, end = 0, len(data)
        while pos < end:
            if self._state == _HUNT:
                # link-layer.md: "A receiver discards bytes until it sees `$`."
                start = data.find(b"$", pos)
                if start < 0:
                    self._discard(data, pos, end)
                    break
                if start > pos:
                    self._discard(data, pos, start)
                buf[:] = b"$"
                self._state = _FRAME
                pos = start + 1
                continue
            match = _DELIMITER.search(data, pos)
            stop = end if match is None else match.start()
            newline = match is not None and data[stop] == 0x0A
            if self._state == _FRAME:
                if len(buf) + (stop - pos) + newline > MAX_LINE:
                    keep = MAX_LINE + 1 - len(buf)
                    raw = bytes(buf) + data[pos : pos + keep]
                    out.append(
                        BadFrame(raw=raw, reason=f"line longer than {MAX_LINE} bytes", seq=None)
                    )
                    buf.clear()
                    self._state = _SKIP
                    self.discarded += max(0, stop - pos - keep)
                else:
                    buf += data[pos:stop]
            else:
                self.discarded += stop - pos
            if match is None:
                break
            if newline:
                if self._state == _FRAME:
                    buf += b"\n"
                    out.append(_finish(bytes(buf)))
                else:
                    self.discarded += 1
                buf.clear()
                self._state = _HUNT
            else:
                # A '$' cannot be inside a body: the frame before it was cut short.
                if self._state == _FRAME:
                    out.append(
                        BadFrame(raw=bytes(buf), reason="frame cut short by a new '$'", seq=None)
                    )
                buf[:] = b"$"
                self._state = _FRAME
            pos = stop + 1
        return out

    def reset(self) -> None:
        """Forget any partial frame (after the port was reopened)."""
        self._buf.clear()
        self._state = _HUNT


def _finish(line: bytes) -> Frame | BadFrame:
    """Judge one complete line, ``$`` through LF."""
    if not line.endswith(b"\r\n"):
        return BadFrame(raw=line, reason="line ends in LF without CR", seq=None)
    star = line.find(b"*")
    if star < 0:
        return BadFrame(raw=line, reason="missing '*' before the CRC", seq=None)
    crc_field = line[star + 1 : -2]
    if not _CRC.fullmatch(crc_field):
        return BadFrame(
            raw=line,
            # Never quote the field: it may be the intact CRC of a secret HAND body.
            reason=f"CRC field of {len(crc_field)} bytes is not 4 upper-case hex digits",
            seq=None,
        )
    body = line[1:star]
    if int(crc_field, 16) != crc16(body):
        # Neither CRC goes in the reason (it is logged): the CRC of a HAND or CARD body
        # gives its cards away by brute force (shuffler-icd.md "Card data is secret until
        # it is face up"); the raw bytes are kept for the protected record.
        return BadFrame(raw=line, reason="bad CRC: the CRC does not match the body", seq=None)
    bad_byte = _NOT_PRINTABLE.search(body)
    text = body.decode("ascii", errors="replace")
    if bad_byte is not None:
        where = bad_byte.start()
        return BadFrame(
            raw=line,
            reason=f"byte {body[where]:#04x} at {where} is not printable ASCII",
            seq=peek_seq(text),
        )
    if len(body) > MAX_BODY:
        return BadFrame(
            raw=line, reason=f"body is {len(body)} bytes, more than {MAX_BODY}", seq=peek_seq(text)
        )
    try:
        kind, seq = read_header(text)
    except FrameError as exc:
        return BadFrame(raw=line, reason=exc.reason, seq=None)
    return Frame(raw=line, body=text, kind=kind, seq=seq)
