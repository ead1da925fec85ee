"""Messages of both devices (shuffler-icd.md, dice-reader-icd.md): round trips, validation
with specific reasons, the spec examples, the declarations, and the fact each body states."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drivers import messages as m
from drivers.errors import FrameError
from drivers.link import BadFrame, FrameDecoder, encode_frame
from rules import events as ev
from tests import strategies as s


def reader_of(msg: m.Message) -> ev.Device | None:
    """The device whose messages include ``msg`` (``None`` for the host's)."""
    if not isinstance(msg, m.DeviceMessage):
        return None
    if msg.message_type.names_device:  # HELLO, STATUS: the fact names its device
        device: ev.Device = getattr(msg.fact, "device")  # noqa: B009
        return device
    (device,) = msg.message_type.sent_by
    return device


@given(st.one_of(s.device_messages, st.tuples(st.none(), s.host_messages)))
def test_round_trip_every_message(item: tuple[ev.Device | None, m.Message]) -> None:
    device, msg = item
    raw = m.encode_message(msg)
    body = raw[1 : raw.index(b"*")].decode()
    assert m.parse_body(body, device=device) == msg
    (decoded,) = m.MessageDecoder(device=device).feed(raw)
    assert decoded == m.Decoded(raw=raw, message=msg)


@given(s.shuffler_messages)
def test_round_trip_as_the_shuffler_driver_reads(msg: m.Message) -> None:
    (decoded,) = m.MessageDecoder(device="shuffler", sender="device").feed(m.encode_message(msg))
    assert isinstance(decoded, m.Decoded)
    assert decoded.message == msg


@given(s.dice_messages)
def test_round_trip_as_the_dice_driver_reads(msg: m.Message) -> None:
    (decoded,) = m.MessageDecoder(device="dice_reader", sender="device").feed(m.encode_message(msg))
    assert isinstance(decoded, m.Decoded)
    assert decoded.message == msg


@given(s.host_messages)
def test_round_trip_as_a_simulator_reads(msg: m.Message) -> None:
    (decoded,) = m.MessageDecoder(sender="host").feed(m.encode_message(msg))
    assert isinstance(decoded, m.Decoded)
    assert decoded.message == msg


@pytest.mark.heavy
@given(s.readers.filter(lambda r: 1 <= len(r[1]) <= 8), st.data())
def test_stream_of_messages_in_any_chunks(
    reader: tuple[ev.Device | None, list[m.Message]], data: st.DataObject
) -> None:
    device, msgs = reader
    stream = b"".join(m.encode_message(msg) for msg in msgs)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=20))
    bounds = [0, *sorted(cuts), len(stream)]
    decoder = m.MessageDecoder(device=device)
    got = [item for a, b in itertools.pairwise(bounds) for item in decoder.feed(stream[a:b])]
    assert [item.message for item in got if isinstance(item, m.Decoded)] == msgs
    assert len(got) == len(msgs)


_field = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E).filter(lambda c: c not in "$*"),
    max_size=14,
)


@given(
    st.sampled_from([*m.FIELD_COUNTS, "X", ""]),
    st.lists(st.one_of(_field, st.integers(-1, 10_000_000).map(str)), max_size=7),
    st.sampled_from([None, "shuffler", "dice_reader"]),
    st.sampled_from([None, "device", "host"]),
)
def test_any_body_with_a_good_crc_is_a_message_or_a_bad_frame_never_an_exception(
    kind: str, fields: list[str], device: m.Device | None, sender: m.Sender | None
) -> None:
    raw = encode_frame(",".join([kind, *fields])[:240])
    (item,) = m.MessageDecoder(device=device, sender=sender).feed(raw)
    if isinstance(item, BadFrame):
        assert item.reason
        assert item.raw == raw
    else:
        assert m.encode_message(item.message) == raw  # what parsed, encodes back the same


def test_every_type_has_a_declaration_and_a_field_count() -> None:
    assert set(m.DEVICE_TYPES) | m.HOST_TYPES == set(m.FIELD_COUNTS)
    assert m.SENT_BY["shuffler"] | m.SENT_BY["dice_reader"] | m.HOST_TYPES == set(m.FIELD_COUNTS)
    # Every fact a device states in a frame is carried by exactly one declaration.
    assert sorted(t.fact.__name__ for t in m.DECLARED) == sorted(
        f.__name__ for f in get_args(m.WireFact)
    )
    # shuffler-icd.md, dice-reader-icd.md "Device to host"; link-layer.md
    assert m.SENT_BY["shuffler"] == {
        *("HELLO", "STATUS", "MODE", "DECK", "HAND", "ROUND", "SETTLE", "CARD", "END", "VOID")
    }
    assert m.SENT_BY["dice_reader"] == {"HELLO", "STATUS", "ROLL", "NOROLL", "CHECK"}
    assert {"HAND", "CARD"} == m.SECRET_TYPES
    counts = {"HELLO": 3, "STATUS": 2, "MODE": 1, "DECK": 1, "HAND": 3, "ROUND": 2, "SETTLE": 1}
    counts |= {"CARD": 3, "END": 1, "VOID": 1, "ROLL": 3, "NOROLL": 2, "CHECK": 4}
    counts |= {"ACK": 0, "NAK": 0, "QUERY": 0}
    assert dict(m.FIELD_COUNTS) == counts


def test_a_declaration_must_name_the_facts_fields_in_order() -> None:
    with pytest.raises(TypeError, match=r"SETTLE: fields \['round'\] are not RoundSettled's"):
        m.declare("SETTLE", ev.RoundSettled, sent_by=m.SHUFFLER, round=m.ROUND_ID)
    with pytest.raises(TypeError, match="are not RoundDealt's"):
        m.declare("ROUND", ev.RoundDealt, sent_by=m.SHUFFLER, hands=m.ROUND_ID, round_id=m.ROUND_ID)
    with pytest.raises(TypeError, match="only the last field may take the rest"):
        m.declare(
            "STATUS",
            ev.DeviceStatus,
            sent_by=m.BOTH,
            code=m.Text("code"),
            text=m.Text("text"),
        )


# shuffler-icd.md "Example: one Caribbean Stud round", both directions.
CSP_EXAMPLE = [
    (
        "$HELLO,1,IDEAL-SIM,2.1.0,SN0001*F9E4",
        m.DeviceMessage(
            seq=1,
            fact=ev.DeviceHello(
                device="shuffler", model="IDEAL-SIM", firmware="2.1.0", serial="SN0001"
            ),
        ),
    ),
    ("$ACK,1*D7D0", m.Ack(seq=1)),
    ("$MODE,2,CSP*CA7D", m.DeviceMessage(seq=2, fact=ev.ModeReported(game="CSP"))),
    ("$ACK,2*E7B3", m.Ack(seq=2)),
    ("$DECK,3,OK*EAA6", m.DeviceMessage(seq=3, fact=ev.DeckChecked(result="OK"))),
    ("$ACK,3*F792", m.Ack(seq=3)),
    (
        "$HAND,4,812,P1,9c9d5h5s2c*738E",
        m.DeviceMessage(
            seq=4,
            fact=ev.HandDealt(round_id=812, position="P1", cards=("9c", "9d", "5h", "5s", "2c")),
        ),
    ),
    ("$ACK,4*8775", m.Ack(seq=4)),
    (
        "$HAND,5,812,P3,QhJhTh8h7h*5ABC",
        m.DeviceMessage(
            seq=5,
            fact=ev.HandDealt(round_id=812, position="P3", cards=("Qh", "Jh", "Th", "8h", "7h")),
        ),
    ),
    ("$ACK,5*9754", m.Ack(seq=5)),
    (
        "$HAND,6,812,DL,AcKd4s3h3c*FD6E",
        m.DeviceMessage(
            seq=6,
            fact=ev.HandDealt(round_id=812, position="DL", cards=("Ac", "Kd", "4s", "3h", "3c")),
        ),
    ),
    ("$ACK,6*A737", m.Ack(seq=6)),
    ("$ROUND,7,812,3*9E2E", m.DeviceMessage(seq=7, fact=ev.RoundDealt(round_id=812, hands=3))),
    ("$ACK,7*B716", m.Ack(seq=7)),
    ("$SETTLE,8,812*3A15", m.DeviceMessage(seq=8, fact=ev.RoundSettled(round_id=812))),
    ("$ACK,8*46F9", m.Ack(seq=8)),
]

# dice-reader-icd.md "Example" (the "2x" frame is treated separately below).
DICE_EXAMPLE = [
    (
        "$HELLO,1,DICE-SIM,1.0.0,DR0042*3319",
        m.DeviceMessage(
            seq=1,
            fact=ev.DeviceHello(
                device="dice_reader", model="DICE-SIM", firmware="1.0.0", serial="DR0042"
            ),
        ),
    ),
    (
        "$ROLL,2,5001,6,5*84C6",
        m.DeviceMessage(seq=2, fact=ev.DiceRolled(roll_id=5001, dice=(6, 5))),
    ),
    ("$NAK,3*7F03", m.Nak(seq=3)),
    (
        "$ROLL,3,5002,2,2*A976",
        m.DeviceMessage(seq=3, fact=ev.DiceRolled(roll_id=5002, dice=(2, 2))),
    ),
    ("$ACK,3*F792", m.Ack(seq=3)),
    (
        "$CHECK,4,5003,1,6,ON_CHIPS*4DB0",
        m.DeviceMessage(seq=4, fact=ev.RollCheck(roll_id=5003, dice=(1, 6), reason="ON_CHIPS")),
    ),
    ("$ACK,4*8775", m.Ack(seq=4)),
    # link-layer.md test vectors not in the examples
    (
        "$HAND,7,101,P2,JhTh*E09E",
        m.DeviceMessage(seq=7, fact=ev.HandDealt(round_id=101, position="P2", cards=("Jh", "Th"))),
    ),
    (
        "$ROLL,12,345,3,4*DDC9",
        m.DeviceMessage(seq=12, fact=ev.DiceRolled(roll_id=345, dice=(3, 4))),
    ),
    ("$QUERY,0*8F46", m.Query()),
    ("$NAK,0*4F60", m.Nak(seq=0)),
]


@pytest.mark.parametrize(("line", "msg"), CSP_EXAMPLE + DICE_EXAMPLE)
def test_spec_examples(line: str, msg: m.Message) -> None:
    raw = line.encode() + b"\r\n"
    assert m.encode_message(msg) == raw
    (decoded,) = m.MessageDecoder(device=reader_of(msg)).feed(raw)
    assert decoded == m.Decoded(raw=raw, message=msg)


def test_dice_example_2x_is_a_bad_frame_naked_with_seq_3() -> None:
    # dice-reader-icd.md: good CRC, but a die of "2x" does not parse -> NAK,3.
    raw = b"$ROLL,3,5002,2,2x*AD5C\r\n"
    (bad,) = m.MessageDecoder(device="dice_reader", sender="device").feed(raw)
    assert isinstance(bad, BadFrame)
    assert bad.seq == 3
    assert "die 2" in bad.reason
    assert bad.raw == raw
    assert m.encode_message(m.Nak(seq=bad.seq)) == b"$NAK,3*7F03\r\n"


@pytest.mark.parametrize(
    ("body", "device", "fragment", "seq"),
    [
        ("HELLO,0,A,B,C", "shuffler", "out of range 1..9999", None),
        ("HELLO,1,A,B", "dice_reader", "2 fields after the sequence number, expected 3", 1),
        ("HELLO,1,A,,C", "shuffler", "firmware is empty", 1),
        ("MODE,2,BACCARAT", "shuffler", "game 'BACCARAT' is not one of BJ, CSP", 2),
        ("DECK,3,MISSING", "shuffler", "result 'MISSING'", 3),
        ("HAND,4,0,P1,AsKs", "shuffler", "round id 0 is out of range 1..999999", 4),
        ("HAND,4,1000000,P1,AsKs", "shuffler", "out of range 1..999999", 4),
        ("HAND,4,12,P9,AsKs", "shuffler", "HAND position is not one of CM, DL, P1", 4),
        ("HAND,4,12,P1,", "shuffler", "HAND has no cards", 4),
        ("HAND,4,12,P1,AsK", "shuffler", "3 characters: every card is 2", 4),
        ("HAND,4,12,P1,As1s", "shuffler", "card 2 is not a card code", 4),
        ("HAND,4,12,P1,AsKS", "shuffler", "card 2 is not a card code", 4),
        ("ROUND,5,12,100", "shuffler", "hands 100 is out of range 0..99", 5),
        ("ROUND,5,12,-1", "shuffler", "hands '-1' is not a decimal number", 5),
        ("CARD,6,12,CM,As", "shuffler", "CARD position is not one of DL, P1", 6),
        ("CARD,6,12,DL,Ass", "shuffler", "card 1 is not a card code", 6),
        ("SETTLE,7,812,3", "shuffler", "2 fields after the sequence number, expected 1", 7),
        ("ROLL,8,5,0,3", "dice_reader", "die 1 0 is out of range 1..6", 8),
        ("ROLL,8,5,3,7", "dice_reader", "die 2 7 is out of range 1..6", 8),
        ("ROLL,8,5, 3,4", "dice_reader", "not a decimal number", 8),
        ("NOROLL,9,5,LEANING", "dice_reader", "reason 'LEANING'", 9),
        ("CHECK,9,5,0,7,UNREADABLE", "dice_reader", "die 2 7 is out of range 0..6", 9),
        ("CHECK,9,5,0,0,OFF_TABLE", "dice_reader", "reason 'OFF_TABLE'", 9),
        ("STATUS,9,jam,x", "dice_reader", "not upper-case letters and '_'", 9),
        ("STATUS,9,JAM", "shuffler", "1 fields after the sequence number, expected 2", 9),
        ("ROLL,8,5,3,4", None, "ROLL is a device message: this reader takes the host's", 8),
        ("ROLL,8,5,3,4", "shuffler", "ROLL is not a shuffler message", 8),
        ("HAND,8,5,P1,As", "dice_reader", "HAND is not a dice_reader message", 8),
        ("FOO,8,5", None, "unknown message type 'FOO'", 8),
        ("QUERY,1", None, "out of range 0..0", 1),
        ("ACK,0", None, "out of range 1..9999", None),
        ("ACK,1,2", None, "1 fields after the sequence number, expected 0", 1),
    ],
)
def test_specific_reasons(
    body: str, device: m.Device | None, fragment: str, seq: int | None
) -> None:
    with pytest.raises(FrameError) as info:
        m.parse_body(body, device=device)
    assert fragment in info.value.reason
    assert info.value.seq == seq
    # the same body inside a good frame is a bad frame with that reason and seq
    (bad,) = m.MessageDecoder(device=device).feed(encode_frame(body))
    assert bad == BadFrame(raw=encode_frame(body), reason=info.value.reason, seq=seq)


def test_reasons_never_quote_a_card() -> None:
    # shuffler-icd.md: a hand is secret until SETTLE; a bad-frame reason may be logged.
    for body in (
        "HAND,4,12,P1,AsKsQsJsT",
        "HAND,4,12,P1,AsKsQsJsTx",
        "CARD,4,12,DL,Ax",
        "HAND,4,AsKs,P1,12",  # fields out of place
        "HAND,4,12,AsKs,P1",
        "CARD,4,As,DL,12",
        "CARD,4,12,Js,As",
    ):
        with pytest.raises(FrameError) as info:
            m.parse_body(body, device="shuffler")
        assert info.value.seq == 4
        for card in ("As", "Ks", "Qs", "Js", "Ax"):
            assert card not in info.value.reason


def test_direction_is_checked() -> None:
    with pytest.raises(FrameError, match="sent by the host, not by a device"):
        m.parse_body("ACK,1", device="shuffler", sender="device")
    with pytest.raises(FrameError, match="sent by a device, not by the host"):
        m.parse_body("ROLL,1,1,1,1", device=None, sender="host")
    assert m.parse_body("QUERY,0", device=None, sender="host") == m.Query()


def test_status_text_may_be_empty_or_hold_commas() -> None:
    assert m.parse_body("STATUS,4,READY,", device="shuffler") == m.DeviceMessage(
        seq=4, fact=ev.DeviceStatus(device="shuffler", code="READY", text="")
    )
    msg = m.parse_body("STATUS,4,DOOR_OPEN,door 2, left side", device="dice_reader")
    assert msg == m.DeviceMessage(
        seq=4,
        fact=ev.DeviceStatus(device="dice_reader", code="DOOR_OPEN", text="door 2, left side"),
    )


def test_invalid_messages_cannot_be_built() -> None:
    with pytest.raises(FrameError, match=r"out of range 1\.\.6"):
        m.DeviceMessage(seq=1, fact=ev.DiceRolled(roll_id=1, dice=(0, 3)))
    hello = ev.DeviceHello(device="shuffler", model="A,B", firmware="1", serial="2")
    with pytest.raises(FrameError, match="may hold printable ASCII only"):
        m.DeviceMessage(seq=1, fact=hello)
    status = m.DeviceMessage(
        seq=1, fact=ev.DeviceStatus(device="shuffler", code="X", text="y" * 240)
    )
    with pytest.raises(FrameError, match="more than 240"):
        m.encode_message(status)
    with pytest.raises(FrameError, match="DeviceConnected is not a fact a device sends"):
        m.DeviceMessage(seq=1, fact=ev.DeviceConnected(device="shuffler"))  # type: ignore[arg-type]


SHUFFLER_FACTS: list[tuple[str, ev.DeviceFact | None]] = [
    ("HELLO,1,M,F,S", ev.DeviceHello(device="shuffler", model="M", firmware="F", serial="S")),
    ("STATUS,2,JAM,t", ev.DeviceStatus(device="shuffler", code="JAM", text="t")),
    ("MODE,3,UTH", ev.ModeReported(game="UTH")),
    ("DECK,4,SHORT", ev.DeckChecked(result="SHORT")),
    ("HAND,5,9,CM,2c3d", ev.HandDealt(round_id=9, position="CM", cards=("2c", "3d"))),
    ("ROUND,6,9,4", ev.RoundDealt(round_id=9, hands=4)),
    ("SETTLE,7,9", ev.RoundSettled(round_id=9)),
    ("CARD,8,10,DL,8s", ev.CardDrawn(round_id=10, position="DL", card="8s")),
    ("END,9,10", ev.DealerDone(round_id=10)),
    ("VOID,10,11", ev.RoundVoided(round_id=11)),
    ("ACK,1", None),
    ("NAK,0", None),
    ("QUERY,0", None),
]
DICE_FACTS: list[tuple[str, ev.DeviceFact | None]] = [
    ("HELLO,1,M,F,S", ev.DeviceHello(device="dice_reader", model="M", firmware="F", serial="S")),
    ("STATUS,2,COVER_OPEN,", ev.DeviceStatus(device="dice_reader", code="COVER_OPEN", text="")),
    ("ROLL,3,5,6,5", ev.DiceRolled(roll_id=5, dice=(6, 5))),
    ("NOROLL,4,6,EXTRA_DICE", ev.NoRoll(roll_id=6, reason="EXTRA_DICE")),
    ("CHECK,5,7,0,4,UNREADABLE", ev.RollCheck(roll_id=7, dice=(0, 4), reason="UNREADABLE")),
]


def states(body: str, device: ev.Device) -> ev.DeviceFact | None:
    """What the body states, read as ``device``'s (``None``: a host message states nothing)."""
    msg = m.parse_body(body, device=device)
    assert m.encode_body(msg) == body  # and it writes back as it came
    return msg.fact if isinstance(msg, m.DeviceMessage) else None


@pytest.mark.parametrize(("body", "fact"), SHUFFLER_FACTS)
def test_the_fact_of_each_shuffler_message(body: str, fact: ev.DeviceFact | None) -> None:
    assert states(body, "shuffler") == fact


@pytest.mark.parametrize(("body", "fact"), DICE_FACTS)
def test_the_fact_of_each_dice_reader_message(body: str, fact: ev.DeviceFact | None) -> None:
    assert states(body, "dice_reader") == fact


def test_frame_decoder_underneath_counts_noise() -> None:
    decoder = m.MessageDecoder()
    decoder.feed(b"xyz$ACK,1*D7D0\r\n")
    assert decoder.frames.discarded == 3
    assert isinstance(decoder.frames, FrameDecoder)
