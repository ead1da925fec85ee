"""Typed messages of both devices, both directions (shuffler-icd.md, dice-reader-icd.md,
link-layer.md), and the message decoder that the driver and the simulators share.

Every message is a frozen, slotted, keyword-only dataclass with its ``seq``, validated when it
is built, so a message that exists can always be encoded::

    DeviceMessage (device -> host)
        both:         Hello, Status
        shuffler:     Mode, Deck, Hand, Round, Settle, CardMsg, End, Void
        dice reader:  Roll, NoRoll, Check
    HostMessage (host -> device): Ack, Nak, Query

``encode_message(msg)`` gives the whole frame; ``parse_body(body, device=..., sender=...)``
parses a body and raises ``FrameError`` with a specific reason; ``MessageDecoder`` turns bytes
into ``Decoded`` or ``BadFrame`` values (never raises on input); ``to_fact`` maps a device
message to the shared event model (``rules.events``).

Choices where the specs are silent (documented in the README):

* numbers are canonical decimals (no sign, spaces or leading zeros);
* every field of a message must be present (``STATUS,5,JAM,`` with an empty text, not
  ``STATUS,5,JAM``); only the last field of ``STATUS`` (free text) may contain ``,``;
* HELLO's model, firmware and serial are non-empty and contain no ``,``;
* a HAND has at least one card; ``CARD`` cannot be for ``CM`` (blackjack has no community
  cards); card counts and duplicates are the rules' business, card syntax is ours;
* ``ROUND`` hands is 0..99 (whether it is a column of the pay table is the rules' business);
* ``QUERY`` always has sequence number 0; ``ACK`` 1..9999; ``NAK`` 0..9999 (0: the sequence
  number could not be read); device messages 1..9999.

Reasons never quote card codes (a HAND body is secret until SETTLE, shuffler-icd.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Final, Literal, TypeAlias, assert_never, cast, get_args

from drivers.errors import FrameError
from drivers.link import (
    MAX_SEQ,
    BadFrame,
    Frame,
    FrameDecoder,
    encode_frame,
    parse_number,
    read_header,
)
from rules import events as ev
from rules.cards import RANKS, SUITS

Device: TypeAlias = ev.Device
Sender: TypeAlias = Literal["device", "host"]

MAX_ID: Final = 999_999  # round ids and roll ids: "1 to 999999" (both ICDs)
MAX_HANDS: Final = 99

GAMES: Final[frozenset[str]] = frozenset(get_args(ev.Game))
POSITIONS: Final[frozenset[str]] = frozenset(ev.POSITIONS)
DECK_RESULTS: Final[frozenset[str]] = frozenset(get_args(ev.DeckResult))
NOROLL_REASONS: Final[frozenset[str]] = frozenset(get_args(ev.NoRollReason))
CHECK_REASONS: Final[frozenset[str]] = frozenset(get_args(ev.CheckReason))

SECRET_TYPES: Final = frozenset(("HAND", "CARD"))
"""Bodies that carry cards, secret until face up (shuffler-icd.md): reasons never quote them."""

_CARD = re.compile(f"[{RANKS}][{SUITS}]")
_STATUS_CODE = re.compile(r"[A-Z_]+")
_WORD_FORBIDDEN = re.compile(r"[^\x20-\x7e]|[$*,]")
_TEXT_FORBIDDEN = re.compile(r"[^\x20-\x7e]|[$*]")


# ---------------------------------------------------------------------------------------
# Field checks (raise FrameError; ``seq`` travels along for the NAK)


def _check_seq(kind: str, seq: int, low: int, high: int = MAX_SEQ) -> None:
    if not isinstance(seq, int) or not low <= seq <= high:
        raise FrameError(f"{kind} sequence number {seq!r} is out of range {low}..{high}")


def _check_id(kind: str, what: str, value: int, seq: int) -> None:
    if not isinstance(value, int) or not 1 <= value <= MAX_ID:
        raise FrameError(f"{kind} {what} {value!r} is out of range 1..{MAX_ID}", seq=seq)


def _check_choice(kind: str, what: str, value: str, allowed: frozenset[str], seq: int) -> None:
    if value not in allowed:
        # A misplaced field of a HAND or CARD may be a secret card: never quote it there.
        shown = "" if kind in SECRET_TYPES else f" {value[:20]!r}"
        raise FrameError(
            f"{kind} {what}{shown} is not one of {', '.join(sorted(allowed))}", seq=seq
        )


def _check_word(kind: str, what: str, value: str, seq: int) -> None:
    if not value:
        raise FrameError(f"{kind} {what} is empty", seq=seq)
    if _WORD_FORBIDDEN.search(value):
        raise FrameError(
            f"{kind} {what} may hold printable ASCII only, without '$', '*' or ','", seq=seq
        )


def _check_card(kind: str, card: str, index: int, seq: int) -> None:
    if not isinstance(card, str) or not _CARD.fullmatch(card):
        # Never quote the text: it may be a secret card with one bad byte (shuffler-icd.md).
        raise FrameError(
            f"{kind} card {index + 1} is not a card code (rank of {RANKS}, suit of {SUITS})",
            seq=seq,
        )


def _check_die(kind: str, which: int, value: int, low: int, seq: int) -> None:
    if not isinstance(value, int) or not low <= value <= 6:
        raise FrameError(f"{kind} die {which} {value!r} is out of range {low}..6", seq=seq)


# ---------------------------------------------------------------------------------------
# Device -> host, both devices


@dataclass(frozen=True, slots=True, kw_only=True)
class Hello:
    """``HELLO,<seq>,<model>,<firmware>,<serial>``: power-up or reconnect; resets the
    sequence (link-layer.md)."""

    TYPE: ClassVar[str] = "HELLO"
    seq: int
    model: str
    firmware: str
    serial: str

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_word(self.TYPE, "model", self.model, self.seq)
        _check_word(self.TYPE, "firmware", self.firmware, self.seq)
        _check_word(self.TYPE, "serial number", self.serial, self.seq)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (self.model, self.firmware, self.serial)


@dataclass(frozen=True, slots=True, kw_only=True)
class Status:
    """``STATUS,<seq>,<code>,<text>``: ``READY`` clears every fault; any other code is a tilt
    (link-layer.md "Device status"). ``text`` may be empty and may contain ``,``."""

    TYPE: ClassVar[str] = "STATUS"
    seq: int
    code: str
    text: str

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        if not _STATUS_CODE.fullmatch(self.code):
            raise FrameError(
                f"STATUS code {self.code[:20]!r} is not upper-case letters and '_'", seq=self.seq
            )
        if _TEXT_FORBIDDEN.search(self.text):
            raise FrameError(
                "STATUS text may hold printable ASCII only, without '$' or '*'", seq=self.seq
            )

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (self.code, self.text)


# ---------------------------------------------------------------------------------------
# Device -> host, shuffler (and card-reading shoe)


@dataclass(frozen=True, slots=True, kw_only=True)
class Mode:
    """``MODE,<seq>,<game>``: the game the shuffler is set to."""

    TYPE: ClassVar[str] = "MODE"
    seq: int
    game: ev.Game

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_choice(self.TYPE, "game", self.game, GAMES, self.seq)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (self.game,)


@dataclass(frozen=True, slots=True, kw_only=True)
class Deck:
    """``DECK,<seq>,<result>``: the deck check after a shuffle."""

    TYPE: ClassVar[str] = "DECK"
    seq: int
    result: ev.DeckResult

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_choice(self.TYPE, "result", self.result, DECK_RESULTS, self.seq)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (self.result,)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hand:
    """``HAND,<seq>,<round id>,<position>,<cards>``: one position's cards (secret until
    ``SETTLE``); ``cards`` are 2-character codes, written without separators."""

    TYPE: ClassVar[str] = "HAND"
    seq: int
    round_id: int
    position: ev.Position
    cards: tuple[str, ...]

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_id(self.TYPE, "round id", self.round_id, self.seq)
        _check_choice(self.TYPE, "position", self.position, POSITIONS, self.seq)
        if not isinstance(self.cards, tuple) or not self.cards:
            raise FrameError("HAND has no cards", seq=self.seq)
        for index, card in enumerate(self.cards):
            _check_card(self.TYPE, card, index, self.seq)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (str(self.round_id), self.position, "".join(self.cards))


@dataclass(frozen=True, slots=True, kw_only=True)
class Round:
    """``ROUND,<seq>,<round id>,<hands>``: the green button; ``hands`` hands are in play."""

    TYPE: ClassVar[str] = "ROUND"
    seq: int
    round_id: int
    hands: int

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_id(self.TYPE, "round id", self.round_id, self.seq)
        if not isinstance(self.hands, int) or not 0 <= self.hands <= MAX_HANDS:
            raise FrameError(
                f"ROUND hands {self.hands!r} is out of range 0..{MAX_HANDS}", seq=self.seq
            )

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (str(self.round_id), str(self.hands))


@dataclass(frozen=True, slots=True, kw_only=True)
class Settle:
    """``SETTLE,<seq>,<round id>``: every player bet reconciled; the cards are face up."""

    TYPE: ClassVar[str] = "SETTLE"
    seq: int
    round_id: int

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_id(self.TYPE, "round id", self.round_id, self.seq)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (str(self.round_id),)


@dataclass(frozen=True, slots=True, kw_only=True)
class CardMsg:
    """``CARD,<seq>,<round id>,<position>,<card>`` (``BJ`` only): one card in draw order."""

    TYPE: ClassVar[str] = "CARD"
    seq: int
    round_id: int
    position: ev.Position
    card: str

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_id(self.TYPE, "round id", self.round_id, self.seq)
        # shuffler-icd.md: CARD is BJ only, and blackjack has no community cards.
        _check_choice(self.TYPE, "position", self.position, POSITIONS - {"CM"}, self.seq)
        _check_card(self.TYPE, self.card, 0, self.seq)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (str(self.round_id), self.position, self.card)


@dataclass(frozen=True, slots=True, kw_only=True)
class End:
    """``END,<seq>,<round id>`` (``BJ`` only): the dealer's hand is complete and face up."""

    TYPE: ClassVar[str] = "END"
    seq: int
    round_id: int

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_id(self.TYPE, "round id", self.round_id, self.seq)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (str(self.round_id),)


@dataclass(frozen=True, slots=True, kw_only=True)
class Void:
    """``VOID,<seq>,<round id>``: the dealer cancelled the round (misdeal)."""

    TYPE: ClassVar[str] = "VOID"
    seq: int
    round_id: int

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_id(self.TYPE, "round id", self.round_id, self.seq)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (str(self.round_id),)


# ---------------------------------------------------------------------------------------
# Device -> host, dice reader


@dataclass(frozen=True, slots=True, kw_only=True)
class Roll:
    """``ROLL,<seq>,<roll id>,<die 1>,<die 2>``: a proper roll, each die 1-6."""

    TYPE: ClassVar[str] = "ROLL"
    seq: int
    roll_id: int
    dice: tuple[int, int]

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_id(self.TYPE, "roll id", self.roll_id, self.seq)
        _check_dice(self.TYPE, self.dice, 1, self.seq)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (str(self.roll_id), str(self.dice[0]), str(self.dice[1]))


@dataclass(frozen=True, slots=True, kw_only=True)
class NoRoll:
    """``NOROLL,<seq>,<roll id>,<reason>``: invalid under 68 IAC 10-4-4(b); never counts."""

    TYPE: ClassVar[str] = "NOROLL"
    seq: int
    roll_id: int
    reason: ev.NoRollReason

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_id(self.TYPE, "roll id", self.roll_id, self.seq)
        _check_choice(self.TYPE, "reason", self.reason, NOROLL_REASONS, self.seq)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (str(self.roll_id), self.reason)


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """``CHECK,<seq>,<roll id>,<die 1>,<die 2>,<reason>``: 68 IAC 10-4-4(c) condition the
    stickperson decides; a die is 0 where unreadable."""

    TYPE: ClassVar[str] = "CHECK"
    seq: int
    roll_id: int
    dice: tuple[int, int]
    reason: ev.CheckReason

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)
        _check_id(self.TYPE, "roll id", self.roll_id, self.seq)
        _check_dice(self.TYPE, self.dice, 0, self.seq)
        _check_choice(self.TYPE, "reason", self.reason, CHECK_REASONS, self.seq)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return (str(self.roll_id), str(self.dice[0]), str(self.dice[1]), self.reason)


def _check_dice(kind: str, dice: tuple[int, int], low: int, seq: int) -> None:
    if not isinstance(dice, tuple) or len(dice) != 2:
        raise FrameError(f"{kind} needs exactly two dice", seq=seq)
    _check_die(kind, 1, dice[0], low, seq)
    _check_die(kind, 2, dice[1], low, seq)


# ---------------------------------------------------------------------------------------
# Host -> device (link-layer.md "Sequence numbers and acknowledgement")


@dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    """``ACK,<seq>``: the device frame ``seq`` arrived (1..9999)."""

    TYPE: ClassVar[str] = "ACK"
    seq: int

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 1)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Nak:
    """``NAK,<seq>``: a bad frame; ``seq`` 0 when its sequence number could not be read."""

    TYPE: ClassVar[str] = "NAK"
    seq: int

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 0)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Query:
    """``QUERY,0``: the device answers ``HELLO`` then its configuration (``MODE``)."""

    TYPE: ClassVar[str] = "QUERY"
    seq: int = 0

    def __post_init__(self) -> None:
        _check_seq(self.TYPE, self.seq, 0, 0)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return ()


ShufflerMessage = Mode | Deck | Hand | Round | Settle | CardMsg | End | Void
DiceMessage = Roll | NoRoll | Check
DeviceMessage = Hello | Status | ShufflerMessage | DiceMessage
HostMessage = Ack | Nak | Query
Message = DeviceMessage | HostMessage

_COMMON: Final = ("HELLO", "STATUS")
SENT_BY: Final[dict[Device, frozenset[str]]] = {
    "shuffler": frozenset(
        (*_COMMON, "MODE", "DECK", "HAND", "ROUND", "SETTLE", "CARD", "END", "VOID")
    ),
    "dice_reader": frozenset((*_COMMON, "ROLL", "NOROLL", "CHECK")),
}
"""The message types each device sends (shuffler-icd.md, dice-reader-icd.md "Device to host")."""
HOST_TYPES: Final = frozenset(("ACK", "NAK", "QUERY"))


# ---------------------------------------------------------------------------------------
# Encoding and parsing


def encode_body(msg: Message) -> str:
    """The body of ``msg``: ``TYPE,SEQ,fields...``."""
    return ",".join((msg.TYPE, str(msg.seq), *msg.fields()))


def encode_message(msg: Message) -> bytes:
    """The whole frame for ``msg`` (``$...*CRC\\r\\n``). Raises ``FrameError`` if the body would
    be longer than 240 bytes (only possible with very long HELLO or STATUS text)."""
    return encode_frame(encode_body(msg))


def _int(text: str, kind: str, what: str, seq: int, low: int, high: int) -> int:
    return parse_number(
        text, what=f"{kind} {what}", low=low, high=high, seq=seq, quote=kind not in SECRET_TYPES
    )


def _split_cards(text: str, seq: int) -> tuple[str, ...]:
    if len(text) % 2:
        raise FrameError(f"HAND cards field has {len(text)} characters: every card is 2", seq=seq)
    return tuple(text[i : i + 2] for i in range(0, len(text), 2))


def _dice(a: str, b: str, kind: str, seq: int, low: int) -> tuple[int, int]:
    return (_int(a, kind, "die 1", seq, low, 6), _int(b, kind, "die 2", seq, low, 6))


# Fields after TYPE,SEQ per message type (shuffler-icd.md, dice-reader-icd.md, link-layer.md).
FIELD_COUNTS: Final[dict[str, int]] = {
    "HELLO": 3,
    "STATUS": 2,
    "MODE": 1,
    "DECK": 1,
    "HAND": 3,
    "ROUND": 2,
    "SETTLE": 1,
    "CARD": 3,
    "END": 1,
    "VOID": 1,
    "ROLL": 3,
    "NOROLL": 2,
    "CHECK": 4,
    "ACK": 0,
    "NAK": 0,
    "QUERY": 0,
}


def _build(kind: str, seq: int, f: list[str]) -> Message:
    """The message of ``kind`` from its fields. Text fields of a Literal type are cast here and
    checked against their allowed values by the dataclass itself."""
    match kind:
        case "HELLO":
            return Hello(seq=seq, model=f[0], firmware=f[1], serial=f[2])
        case "STATUS":
            return Status(seq=seq, code=f[0], text=f[1])
        case "MODE":
            return Mode(seq=seq, game=cast("ev.Game", f[0]))
        case "DECK":
            return Deck(seq=seq, result=cast("ev.DeckResult", f[0]))
        case "HAND":
            return Hand(
                seq=seq,
                round_id=_int(f[0], kind, "round id", seq, 1, MAX_ID),
                position=cast("ev.Position", f[1]),
                cards=_split_cards(f[2], seq),
            )
        case "ROUND":
            return Round(
                seq=seq,
                round_id=_int(f[0], kind, "round id", seq, 1, MAX_ID),
                hands=_int(f[1], kind, "hands", seq, 0, MAX_HANDS),
            )
        case "SETTLE":
            return Settle(seq=seq, round_id=_int(f[0], kind, "round id", seq, 1, MAX_ID))
        case "CARD":
            return CardMsg(
                seq=seq,
                round_id=_int(f[0], kind, "round id", seq, 1, MAX_ID),
                position=cast("ev.Position", f[1]),
                card=f[2],
            )
        case "END":
            return End(seq=seq, round_id=_int(f[0], kind, "round id", seq, 1, MAX_ID))
        case "VOID":
            return Void(seq=seq, round_id=_int(f[0], kind, "round id", seq, 1, MAX_ID))
        case "ROLL":
            return Roll(
                seq=seq,
                roll_id=_int(f[0], kind, "roll id", seq, 1, MAX_ID),
                dice=_dice(f[1], f[2], kind, seq, 1),
            )
        case "NOROLL":
            return NoRoll(
                seq=seq,
                roll_id=_int(f[0], kind, "roll id", seq, 1, MAX_ID),
                reason=cast("ev.NoRollReason", f[1]),
            )
        case "CHECK":
            return Check(
                seq=seq,
                roll_id=_int(f[0], kind, "roll id", seq, 1, MAX_ID),
                dice=_dice(f[1], f[2], kind, seq, 0),  # 0 where unreadable (dice-reader-icd.md)
                reason=cast("ev.CheckReason", f[3]),
            )
        case "ACK":
            return Ack(seq=seq)
        case "NAK":
            return Nak(seq=seq)
        case _:
            return Query(seq=seq)


def parse_body(body: str, *, device: Device | None, sender: Sender | None = None) -> Message:
    """Parse a frame body (between ``$`` and ``*``) into a message.

    ``device`` limits device-to-host types to those that device sends (``None``: either);
    ``sender`` limits the direction (``"device"``: what a host receives, ``"host"``: what a
    device receives, ``None``: both). Raises ``FrameError`` with a specific reason and, when
    the sequence number could be read, ``seq`` for the NAK.
    """
    kind, seq = read_header(body)
    count = FIELD_COUNTS.get(kind)
    if count is None:
        raise FrameError(f"unknown message type {kind[:12]!r}", seq=seq)
    if kind in HOST_TYPES:
        if sender == "device":
            raise FrameError(f"{kind} is sent by the host, not by a device", seq=seq)
    elif sender == "host":
        raise FrameError(f"{kind} is sent by a device, not by the host", seq=seq)
    elif device is not None and kind not in SENT_BY[device]:
        raise FrameError(f"{kind} is not a {device} message", seq=seq)
    # Only STATUS's last field (free text) may contain ',' (link-layer.md "Device status").
    parts = body.split(",", count + 1) if kind == "STATUS" else body.split(",")
    if len(parts) != count + 2:
        raise FrameError(
            f"{kind} has {len(parts) - 2} fields after the sequence number, expected {count}",
            seq=seq,
        )
    try:
        return _build(kind, seq, parts[2:])
    except FrameError as exc:
        if exc.seq is None:
            raise FrameError(exc.reason, seq=seq if seq > 0 else None) from exc
        raise


def to_fact(msg: Message, device: Device) -> ev.DeviceFact | None:
    """The shared event model's fact for a device message (``None`` for ACK, NAK, QUERY)."""
    match msg:
        case Hello():
            return ev.DeviceHello(
                device=device, model=msg.model, firmware=msg.firmware, serial=msg.serial
            )
        case Status():
            return ev.DeviceStatus(device=device, code=msg.code, text=msg.text)
        case Mode():
            return ev.ModeReported(game=msg.game)
        case Deck():
            return ev.DeckChecked(result=msg.result)
        case Hand():
            return ev.HandDealt(round_id=msg.round_id, position=msg.position, cards=msg.cards)
        case Round():
            return ev.RoundDealt(round_id=msg.round_id, hands=msg.hands)
        case Settle():
            return ev.RoundSettled(round_id=msg.round_id)
        case CardMsg():
            return ev.CardDrawn(round_id=msg.round_id, position=msg.position, card=msg.card)
        case End():
            return ev.DealerDone(round_id=msg.round_id)
        case Void():
            return ev.RoundVoided(round_id=msg.round_id)
        case Roll():
            return ev.DiceRolled(roll_id=msg.roll_id, dice=msg.dice)
        case NoRoll():
            return ev.NoRoll(roll_id=msg.roll_id, reason=msg.reason)
        case Check():
            return ev.RollCheck(roll_id=msg.roll_id, dice=msg.dice, reason=msg.reason)
        case Ack() | Nak() | Query():
            return None
        case _:
            assert_never(msg)


# ---------------------------------------------------------------------------------------
# The decoder both sides share


@dataclass(frozen=True, slots=True, kw_only=True)
class Decoded:
    """A good frame and its message. ``raw`` is the whole line as received."""

    raw: bytes
    message: Message


class MessageDecoder:
    """``FrameDecoder`` plus the message layer: ``feed`` bytes in any chunks, get ``Decoded``
    or ``BadFrame`` values in order. Never raises on input; memory is bounded.

    The host (driver) uses ``MessageDecoder(device="shuffler", sender="device")``; a device
    (simulator) uses ``MessageDecoder(sender="host")`` to read ACK, NAK and QUERY.
    """

    __slots__ = ("device", "frames", "sender")

    def __init__(self, *, device: Device | None = None, sender: Sender | None = None) -> None:
        self.device = device
        self.sender = sender
        self.frames = FrameDecoder()
        """The framing layer underneath (its ``discarded`` counts noise between frames)."""

    def feed(self, data: bytes) -> list[Decoded | BadFrame]:
        """Decode ``data``; return every frame it completed, good or bad, in order."""
        return [self.decode_frame(item) for item in self.frames.feed(data)]

    def decode_frame(self, item: Frame | BadFrame) -> Decoded | BadFrame:
        """The message of one frame from the framing layer (a bad frame passes through)."""
        if isinstance(item, BadFrame):
            return item
        try:
            message = parse_body(item.body, device=self.device, sender=self.sender)
        except FrameError as exc:
            return BadFrame(raw=item.raw, reason=exc.reason, seq=exc.seq)
        return Decoded(raw=item.raw, message=message)


MESSAGE_TYPES: Final[dict[str, type[Message]]] = {
    cls.TYPE: cls
    for cls in (
        *(Hello, Status, Mode, Deck, Hand, Round, Settle, CardMsg, End, Void),
        *(Roll, NoRoll, Check, Ack, Nak, Query),
    )
}
"""Every message class by its wire TYPE."""
