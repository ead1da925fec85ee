"""The link-layer codec (link-layer.md "Frames"): CRC, framing, resync, bad frames."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers.errors import FrameError
from drivers.link import (
    MAX_LINE,
    BadFrame,
    Frame,
    FrameDecoder,
    Noise,
    crc16,
    encode_frame,
    next_seq,
    parse_number,
    read_header,
)

# link-layer.md "Frames": the test vectors, each followed by CR LF on the wire.
VECTORS = [
    "$HELLO,1,IDEAL-SIM,2.1.0,SN0001*F9E4",
    "$ACK,1*D7D0",
    "$HAND,7,101,P2,JhTh*E09E",
    "$ROLL,12,345,3,4*DDC9",
    "$QUERY,0*8F46",
    "$NAK,0*4F60",
]


def test_crc_check_value() -> None:
    assert crc16(b"123456789") == 0x29B1


@pytest.mark.parametrize("vector", VECTORS)
def test_spec_vectors_encode(vector: str) -> None:
    body = vector[1 : vector.index("*")]
    assert encode_frame(body) == vector.encode() + b"\r\n"


@pytest.mark.parametrize("vector", VECTORS)
def test_spec_vectors_decode(vector: str) -> None:
    raw = vector.encode() + b"\r\n"
    (frame,) = FrameDecoder().feed(raw)
    assert isinstance(frame, Frame)
    assert frame.raw == raw
    assert frame.body == vector[1 : vector.index("*")]
    assert (frame.kind, frame.seq) == read_header(frame.body)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("ROLL,1,2$", "reserved for framing"),
        ("ROLL,1*", "reserved for framing"),
        ("ROLL,1,\x07", "not printable ASCII"),
        ("ROLL,1,é", "not printable ASCII"),
        ("STATUS,1,X," + "x" * 240, "more than 240"),
    ],
)
def test_encode_frame_refuses_bodies_that_cannot_be_framed(body: str, fragment: str) -> None:
    with pytest.raises(FrameError, match=fragment):
        encode_frame(body)


def test_longest_body_frames_and_decodes() -> None:
    body = "STATUS,1,X," + "x" * (240 - len("STATUS,1,X,"))
    raw = encode_frame(body)
    assert len(raw) == 1 + 240 + 1 + 4 + 2
    (frame,) = FrameDecoder().feed(raw)
    assert isinstance(frame, Frame)
    assert frame.body == body


def _one_bad(raw: bytes) -> BadFrame:
    items = FrameDecoder().feed(raw)
    assert len(items) == 1, items
    item = items[0]
    assert isinstance(item, BadFrame)
    return item


def test_bad_crc_is_a_bad_frame_without_trusted_seq() -> None:
    bad = _one_bad(b"$ACK,1*D7D1\r\n")
    assert "bad CRC" in bad.reason
    assert bad.seq is None
    assert bad.raw == b"$ACK,1*D7D1\r\n"


@pytest.mark.parametrize(
    "raw",
    [
        b"$HAND,4,12,P1,QsJd*1234\r\n",  # a bad CRC: the body (and its CRC) intact
        b"$HAND,4,12,P1,QsJd*%04X \r\n" % crc16(b"HAND,4,12,P1,QsJd"),  # junk after the CRC
    ],
)
def test_bad_crc_reasons_never_quote_a_crc(raw: bytes) -> None:
    # shuffler-icd.md "Card data is secret until it is face up": the reason is logged at
    # warning level, and the CRC of a HAND body gives its cards away (a 2-card hand is one of
    # 1326, a CRC one of 65536: brute force finds it at once).
    bad = _one_bad(raw)
    crc = b"%04X" % crc16(b"HAND,4,12,P1,QsJd")
    assert crc.decode() not in bad.reason
    assert "1234" not in bad.reason
    assert bad.raw == raw


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"$ACK,1D7D0\r\n", "missing '*'"),
        (b"$ACK,1*d7d0\r\n", "not 4 upper-case hex"),
        (b"$ACK,1*D7D\r\n", "not 4 upper-case hex"),
        (b"$ACK,1*D7D0\n", "without CR"),
        (b"$ACK,1*D7D0 \r\n", "not 4 upper-case hex"),
    ],
)
def test_malformed_frames(raw: bytes, fragment: str) -> None:
    bad = _one_bad(raw)
    assert fragment in bad.reason
    assert bad.seq is None


def _with_crc(body: bytes) -> bytes:
    return b"$%s*%04X\r\n" % (body, crc16(body))


@pytest.mark.parametrize(
    ("body", "fragment", "seq"),
    [
        (b"ROLL,5,1\x00,2", "not printable", 5),
        (b"ack,5", "upper-case letters", None),
        (b"ACK", "no sequence number", None),
        (b"ACK,05", "not a decimal number", None),
        (b"ACK,+5", "not a decimal number", None),
        (b"ACK,10000", "out of range 0..9999", None),
        (b"STATUS,7,X," + b"x" * 235, "more than 240", 7),
    ],
)
def test_bodies_that_do_not_parse_keep_a_readable_seq(
    body: bytes, fragment: str, seq: int | None
) -> None:
    bad = _one_bad(_with_crc(body))
    assert fragment in bad.reason
    assert bad.seq == seq


def test_oversize_line_is_one_bad_frame_then_resync() -> None:
    decoder = FrameDecoder()
    items = decoder.feed(b"$" + b"A" * 1000 + b"\r\n" + b"$ACK,1*D7D0\r\n")
    assert len(items) == 2
    bad, good = items
    assert isinstance(bad, BadFrame)
    assert f"longer than {MAX_LINE}" in bad.reason
    assert len(bad.raw) == MAX_LINE + 1
    assert isinstance(good, Frame)
    assert good.body == "ACK,1"


def test_endless_line_keeps_memory_bounded() -> None:
    decoder = FrameDecoder()
    items: list[Frame | BadFrame] = []
    for _ in range(1000):
        items += decoder.feed(b"$" + b"B" * 4096)
        assert len(decoder._buf) <= MAX_LINE + 1
    # each '$' starts a line that is too long: one bad frame per chunk, nothing else kept
    assert len(items) == 1000
    assert all(isinstance(i, BadFrame) and "longer than" in i.reason for i in items)
    assert decoder.feed(b"\r\n$ACK,1*D7D0\r\n")[-1] == Frame(
        raw=b"$ACK,1*D7D0\r\n", body="ACK,1", kind="ACK", seq=1
    )


def test_line_of_exactly_256_bytes_is_not_oversize() -> None:
    # 256 bytes is allowed by the length rule; its body (248 bytes) breaks the 240 rule.
    body = b"STATUS,3,X," + b"y" * (MAX_LINE - 8 - 11)
    raw = _with_crc(body)
    assert len(raw) == MAX_LINE
    bad = _one_bad(raw)
    assert "more than 240" in bad.reason
    assert bad.seq == 3


def test_dollar_inside_a_frame_resyncs() -> None:
    items = FrameDecoder().feed(b"$HAND,7,101$ACK,1*D7D0\r\n")
    assert len(items) == 2
    cut, good = items
    assert isinstance(cut, BadFrame)
    assert cut.raw == b"$HAND,7,101"
    assert "cut short" in cut.reason
    assert isinstance(good, Frame)
    assert good.seq == 1


def test_garbage_outside_frames_is_discarded_and_counted() -> None:
    decoder = FrameDecoder()
    items = decoder.feed(b"\x00\xffnoise\r\n$ACK,1*D7D0\r\nmore\n$QUERY,0*8F46\r\ntail")
    assert [i.body for i in items if isinstance(i, Frame)] == ["ACK,1", "QUERY,0"]
    assert len(items) == 2
    assert decoder.discarded == len(b"\x00\xffnoise\r\n") + len(b"more\n") + len(b"tail")


def test_noise_is_told_as_it_was_discarded_once_each() -> None:
    decoder = FrameDecoder()
    assert decoder.take_noise() is None
    decoder.feed(b"\x00\xffnoise\r\n$ACK,1*D7D0\r\nmo")
    decoder.feed(b"re\n$QUERY,0*8F46\r\n")
    assert decoder.take_noise() == Noise(raw=b"\x00\xffnoise\r\nmore\n", size=14)
    assert decoder.take_noise() is None  # told once
    decoder.feed(b"$ACK,1*D7D0\r\n")
    assert decoder.take_noise() is None  # frames alone are no noise


def test_noise_kept_is_bounded_and_counted_in_full() -> None:
    decoder = FrameDecoder()
    for _ in range(100):
        decoder.feed(bytes(range(1, 36)) * 10)  # no '$' (0x24): noise only
    noise = decoder.take_noise()
    assert noise is not None
    assert noise.size == 35_000 == decoder.discarded
    assert noise.raw == (bytes(range(1, 36)) * 10)[: MAX_LINE + 1]


def test_the_tail_of_an_oversize_line_is_no_noise() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"$" + b"A" * 1000 + b"\r\n$ACK,1*D7D0\r\n")
    assert decoder.discarded > 0
    assert decoder.take_noise() is None  # its bad frame was reported


def test_reset_drops_a_partial_frame() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"$ACK,1*D7") == []
    decoder.reset()
    assert decoder.feed(b"D0\r\n$ACK,1*D7D0\r\n") == [
        Frame(raw=b"$ACK,1*D7D0\r\n", body="ACK,1", kind="ACK", seq=1)
    ]


# A stream of good vectors, bad frames and garbage: whatever the chunking, the decoder
# returns the same items as one feed of the whole stream.
STREAM = (
    b"garbage\x00\r\n"
    + b"".join(v.encode() + b"\r\n" for v in VECTORS)
    + b"$ACK,1*0000\r\n$HAND,1$ROLL,12,345,3,4*DDC9\r\n"
    + b"$"
    + b"Z" * 300
    + b"\r\n"
    + b"$NAK,0*4F60\r\n"
    + b"trailing"
)


@given(st.lists(st.integers(1, len(STREAM)), max_size=40))
def test_any_chunking_gives_the_same_items(cuts: list[int]) -> None:
    expected = FrameDecoder().feed(STREAM)
    decoder = FrameDecoder()
    got: list[Frame | BadFrame] = []
    bounds = [0, *sorted(cuts), len(STREAM)]
    for start, stop in itertools.pairwise(bounds):
        got += decoder.feed(STREAM[start:stop])
    assert got == expected
    assert [i.body for i in got if isinstance(i, Frame)] == [
        *(v[1 : v.index("*")] for v in VECTORS),
        "ROLL,12,345,3,4",
        "NAK,0",
    ]
    assert len([i for i in got if isinstance(i, BadFrame)]) == 3


def test_byte_by_byte() -> None:
    decoder = FrameDecoder()
    got: list[Frame | BadFrame] = []
    for byte in STREAM:
        got += decoder.feed(bytes([byte]))
    assert got == FrameDecoder().feed(STREAM)


@given(st.binary(max_size=2000))
def test_never_raises_and_stays_bounded(data: bytes) -> None:
    decoder = FrameDecoder()
    items = decoder.feed(data)
    assert len(decoder._buf) <= MAX_LINE + 1
    for item in items:
        assert len(item.raw) <= MAX_LINE + 1
    # after any garbage, a CR LF and a good frame decode
    tail = decoder.feed(b"\r\n$ACK,1*D7D0\r\n")
    assert isinstance(tail[-1], Frame)


def test_sequence_numbers_wrap_from_9999_to_1() -> None:
    # link-layer.md "Sequence numbers": +1, wrapping from 9999 back to 1 (0 is QUERY's).
    assert [next_seq(s) for s in (0, 1, 9998, 9999)] == [1, 2, 9999, 1]


def test_printable_ascii_runs_from_space_to_tilde() -> None:
    (frame,) = FrameDecoder().feed(encode_frame("STATUS,1,a b~"))
    assert isinstance(frame, Frame)
    assert frame.body == "STATUS,1,a b~"


@pytest.mark.parametrize("body", ["ROLL,5,2$", "ROLL,5,\x7f", "STATUS,5,X," + "x" * 240])
def test_a_body_that_cannot_be_framed_still_names_its_seq_for_the_nak(body: str) -> None:
    with pytest.raises(FrameError) as info:
        encode_frame(body)
    assert info.value.seq == 5


@pytest.mark.parametrize(
    ("text", "quote", "reason"),
    [
        ("x5", True, "roll id 'x5' is not a decimal number"),
        ("x5", False, "roll id is not a decimal number"),  # a field of a secret HAND body
        ("12345678901234", True, "roll id '123456789012' is not a decimal number"),
        ("10", True, "roll id 10 is out of range 1..9"),
    ],
)
def test_a_number_that_does_not_parse_is_named_and_keeps_the_seq(
    text: str, quote: bool, reason: str
) -> None:
    with pytest.raises(FrameError) as info:
        parse_number(text, what="roll id", low=1, high=9, seq=7, quote=quote)
    assert (info.value.reason, info.value.seq) == (reason, 7)


def test_a_number_at_the_top_of_its_range_parses() -> None:
    assert parse_number("9", what="roll id", low=1, high=9) == 9


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"$HAND,7,101$", "frame cut short by a new '$'"),
        (b"$ACK,1*D7D0\n", "line ends in LF without CR"),
        (b"$ACK,1D7D0\r\n", "missing '*' before the CRC"),
        (b"$ACK,1*D7D1\r\n", "bad CRC: the CRC does not match the body"),
        # The first '*' ends the body (link-layer.md: a BODY holds no '*'), even when
        # what follows a later '*' is the CRC of everything before it.
        (_with_crc(b"HELLO,1,A*B"), "CRC field of 6 bytes is not 4 upper-case hex digits"),
        (_with_crc(b"ack,5"), "message type 'ack' is not upper-case letters"),
        (
            _with_crc(b"abcdefghijklmnop,5"),
            "message type 'abcdefghijkl' is not upper-case letters",
        ),
        (_with_crc(b"ACK,05"), "sequence number '05' is not a decimal number"),
        (_with_crc(b"ROLL,5,\xc3\xa9"), "byte 0xc3 at 7 is not printable ASCII"),
        (b"$" + b"A" * (MAX_LINE - 2) + b"\r\n", f"line longer than {MAX_LINE} bytes"),
    ],
)
def test_a_bad_frame_s_reason_reads_in_full(raw: bytes, reason: str) -> None:
    items = FrameDecoder().feed(raw)
    assert isinstance(items[0], BadFrame)
    assert items[0].reason == reason


def test_a_body_with_a_byte_beyond_ascii_is_a_bad_frame_with_its_seq() -> None:
    bad = _one_bad(_with_crc(b"ROLL,5,\xff\xfe,2"))
    assert bad.seq == 5


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_the_tail_of_an_oversize_line_is_counted_as_discarded(chunk: int) -> None:
    # link-layer.md: the rest of a line over 256 bytes is skipped up to the next LF; what
    # is kept of it is the bad frame's raw (257 bytes).
    line = b"$" + b"A" * 1000 + b"\r\n"
    stream = b"noise" + line + b"$ACK,1*D7D0\r\n"
    decoder = FrameDecoder()
    items: list[Frame | BadFrame] = []
    for start in range(0, len(stream), chunk):
        items += decoder.feed(stream[start : start + chunk])
    assert [type(i) for i in items] == [BadFrame, Frame]
    assert decoder.discarded == len(b"noise") + len(line) - (MAX_LINE + 1)
