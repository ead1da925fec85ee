"""The messages of both devices, both directions (shuffler-icd.md, dice-reader-icd.md,
link-layer.md), each declared once, and the message decoder the driver and the simulators
share.

A device message is what the device states, a fact of the shared event model
(``rules.events``), with the sequence number the link layer gave it::

    DeviceMessage(seq=4, fact=HandDealt(round_id=812, position="P1", cards=("9c", ...)))

There is no second dataclass per message type: a wire twin of every fact repeated its fields
under a colliding name (``NoRoll`` twice) and needed a mapping kept in step by hand, although
the wire adds nothing to a fact but ``seq``. Instead each device message type is one
``declare(...)`` below, as zigpy-znp declares each command once: its wire ``TYPE``, the fact
it carries, which devices send it, whether it is secret, and the fact's fields in wire order
with the codec of each (``Number``, ``Word``, ``Choice``, ``Cards``, ...). Everything else is
derived from the declarations: ``DEVICE_TYPES``, ``SENT_BY``, ``FIELD_COUNTS``,
``SECRET_TYPES``, parsing, the checks a message passes when it is built, and encoding.
Adding a device message is one declaration here, plus its fact and its rule in ``rules/``.

``HELLO`` and ``STATUS`` facts name the device, which their bytes do not: the port says it.
So reading a device message takes the device (the driver knows which device it reads); a
decoder given no device reads the host's messages only (a simulated device's decoder).

The host's messages state no fact: ``Ack``, ``Nak`` and ``Query`` are three small classes::

    Message = DeviceMessage | HostMessage        HostMessage = Ack | Nak | Query

A message that exists can always be encoded: a ``DeviceMessage`` checks its fact against
the declaration when it is built (``FrameError``). ``encode_message(msg)`` gives the whole
frame; ``parse_body(body, device=..., sender=...)`` parses a body and raises ``FrameError``
with a specific reason; ``MessageDecoder`` turns bytes into ``Decoded`` or ``BadFrame`` values
(never raises on input).

Choices where the specs are silent (documented in docs/auditors/choices.md):

* numbers are canonical decimals (no sign, spaces or leading zeros);
* every field of a message must be present (``STATUS,5,JAM,`` with an empty text, not
  ``STATUS,5,JAM``); only the last field of ``STATUS`` (free text) may contain ``,``;
* HELLO's model, firmware and serial are non-empty and contain no ``,``;
* a HAND has at least one card; ``CARD`` cannot be for ``CM`` (blackjack has no community
  cards); card counts and duplicates are the rules' business, card syntax is ours;
* ``ROUND`` hands is 0..99 (whether it is a column of the pay table is the rules' business);
* ``QUERY`` always has sequence number 0; ``ACK`` 1..9999; ``NAK`` 0..9999 (0: the sequence
  number could not be read); device messages 1..9999.

Reasons never quote a field of a secret message (``HAND``, ``CARD``): a HAND body is secret
until SETTLE (shuffler-icd.md), and reasons are logged.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from types import MappingProxyType
from typing import Any, ClassVar, Final, Literal, TypeAlias, get_args, overload

from drivers.errors import FrameError
from drivers.link import (
    MAX_SEQ,
    NUMBER,
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

MAX_HANDS: Final = 99

WireFact: TypeAlias = ev.DeviceHello | ev.DeviceStatus | ev.ShufflerFact | ev.DiceFact
"""Every fact a device states in a frame (link state, ``DeviceConnected`` and
``DeviceDisconnected``, is the driver's, not a frame's)."""

_CARD = re.compile(f"[{RANKS}][{SUITS}]")
_CODE = re.compile(r"[A-Z_]+")
_WORD_FORBIDDEN = re.compile(r"[^\x20-\x7e]|[$*,]")
_TEXT_FORBIDDEN = re.compile(r"[^\x20-\x7e]|[$*]")


def _check_seq(kind: str, seq: int, low: int, high: int = MAX_SEQ) -> None:
    if not isinstance(seq, int) or not low <= seq <= high:
        raise FrameError(f"{kind} sequence number {seq!r} is out of range {low}..{high}")


# ---------------------------------------------------------------------------------------
# Field codecs: how one field of a fact is read, checked and written


class Field:
    """How one field of a fact travels: ``read`` from ``width`` wire fields (and checked),
    ``check``ed when a message is built, ``write``n back. Errors are ``FrameError`` naming the
    message type and ``what``, with ``seq`` for the NAK.

    The base takes one text field as it is, and checks nothing.
    """

    width: ClassVar[int] = 1
    rest: ClassVar[bool] = False
    """Only a message's last field may be ``rest``: it takes the rest of the body, ``,``
    included."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def read(self, texts: Sequence[str], at: int, spec: MessageType, seq: int) -> Any:
        """The value of this field from the wire fields from ``texts[at]`` on, checked."""
        value = texts[at]
        self.check(value, spec, seq)
        return value

    def check(self, value: Any, spec: MessageType, seq: int) -> None:
        """Raise ``FrameError`` unless ``value`` may be sent."""

    def write(self, value: Any) -> tuple[str, ...]:
        """The wire fields of ``value``."""
        return (value,)


class Number(Field):
    """A canonical decimal number in ``low..high`` (a round id, a roll id, a count)."""

    __slots__ = ("high", "low")

    def __init__(self, what: str, low: int, high: int) -> None:
        super().__init__(what)
        self.low = low
        self.high = high

    def read(self, texts: Sequence[str], at: int, spec: MessageType, seq: int) -> Any:
        """The number (``FrameError`` for one that is not canonical or out of range)."""
        return _number(texts[at], self.what, self.low, self.high, spec, seq)

    def check(self, value: Any, spec: MessageType, seq: int) -> None:
        """An ``int`` in range."""
        if not isinstance(value, int) or not self.low <= value <= self.high:
            raise FrameError(
                f"{spec.kind} {self.what} {value!r} is out of range {self.low}..{self.high}",
                seq=seq,
            )

    def write(self, value: Any) -> tuple[str, ...]:
        """The decimal digits."""
        return (str(value),)


class Word(Field):
    """Non-empty printable ASCII without ``$``, ``*`` or ``,`` (HELLO's model, firmware,
    serial)."""

    __slots__ = ()

    def check(self, value: Any, spec: MessageType, seq: int) -> None:
        """Non-empty, and no byte that framing or field splitting would take."""
        if not value:
            raise FrameError(f"{spec.kind} {self.what} is empty", seq=seq)
        if _WORD_FORBIDDEN.search(value):
            raise FrameError(
                f"{spec.kind} {self.what} may hold printable ASCII only, without '$', '*' or ','",
                seq=seq,
            )


class Text(Field):
    """Free text, possibly empty, that may hold ``,`` (STATUS's last field, link-layer.md
    "Device status"): it takes the rest of the body."""

    rest = True
    __slots__ = ()

    def check(self, value: Any, spec: MessageType, seq: int) -> None:
        """Printable ASCII without the framing bytes."""
        if _TEXT_FORBIDDEN.search(value):
            raise FrameError(
                f"{spec.kind} {self.what} may hold printable ASCII only, without '$' or '*'",
                seq=seq,
            )


class Code(Field):
    """An upper-case code (``READY``, ``JAM``, ``CAMERA_FAULT``)."""

    __slots__ = ()

    def check(self, value: Any, spec: MessageType, seq: int) -> None:
        """Upper-case letters and ``_`` only."""
        if not _CODE.fullmatch(value):
            raise FrameError(
                f"{spec.kind} {self.what} {value[:20]!r} is not upper-case letters and '_'",
                seq=seq,
            )


class Choice(Field):
    """One of a fixed set of spec names (a game, a position, a reason)."""

    __slots__ = ("allowed",)

    def __init__(self, what: str, allowed: Sequence[str]) -> None:
        super().__init__(what)
        self.allowed = frozenset(allowed)

    def check(self, value: Any, spec: MessageType, seq: int) -> None:
        """One of ``allowed``; a misplaced field of a secret message may be a card: never
        quoted there."""
        if value not in self.allowed:
            shown = "" if spec.secret else f" {value[:20]!r}"
            raise FrameError(
                f"{spec.kind} {self.what}{shown} is not one of {', '.join(sorted(self.allowed))}",
                seq=seq,
            )


def _number(text: str, what: str, low: int, high: int, spec: MessageType, seq: int) -> int:
    if NUMBER.fullmatch(text):
        value = int(text)
        if low <= value <= high:
            return value
    # The reason, built only for a bad frame.
    return parse_number(
        text, what=f"{spec.kind} {what}", low=low, high=high, seq=seq, quote=not spec.secret
    )


def _check_card(kind: str, card: object, index: int, seq: int) -> None:
    if not isinstance(card, str) or not _CARD.fullmatch(card):
        # Never quote the text: it may be a secret card with one bad byte (shuffler-icd.md).
        raise FrameError(
            f"{kind} card {index + 1} is not a card code (rank of {RANKS}, suit of {SUITS})",
            seq=seq,
        )


class Cards(Field):
    """At least one 2-character card code, written without separators (``9c9d5h``)."""

    __slots__ = ()

    def read(self, texts: Sequence[str], at: int, spec: MessageType, seq: int) -> Any:
        """The codes, two characters each."""
        text = texts[at]
        if len(text) % 2:
            raise FrameError(
                f"{spec.kind} {self.what} field has {len(text)} characters: every card is 2",
                seq=seq,
            )
        cards = tuple(text[i : i + 2] for i in range(0, len(text), 2))
        self.check(cards, spec, seq)
        return cards

    def check(self, value: Any, spec: MessageType, seq: int) -> None:
        """A non-empty tuple of card codes."""
        if not isinstance(value, tuple) or not value:
            raise FrameError(f"{spec.kind} has no cards", seq=seq)
        for index, card in enumerate(value):
            _check_card(spec.kind, card, index, seq)

    def write(self, value: Any) -> tuple[str, ...]:
        """The codes, joined."""
        return ("".join(value),)


class OneCard(Field):
    """One card code (``CARD``)."""

    __slots__ = ()

    def check(self, value: Any, spec: MessageType, seq: int) -> None:
        """A card code."""
        _check_card(spec.kind, value, 0, seq)


class Dice(Field):
    """Two dice, one wire field each, each ``low..6`` (0 where unreadable: ``CHECK``)."""

    width = 2
    __slots__ = ("low",)

    def __init__(self, low: int) -> None:
        super().__init__("dice")
        self.low = low

    def read(self, texts: Sequence[str], at: int, spec: MessageType, seq: int) -> Any:
        """Both dice."""
        return (
            _number(texts[at], "die 1", self.low, 6, spec, seq),
            _number(texts[at + 1], "die 2", self.low, 6, spec, seq),
        )

    def check(self, value: Any, spec: MessageType, seq: int) -> None:
        """Two ints, each in range."""
        if not isinstance(value, tuple) or len(value) != 2:
            raise FrameError(f"{spec.kind} needs exactly two dice", seq=seq)
        for which, die in enumerate(value, start=1):
            if not isinstance(die, int) or not self.low <= die <= 6:
                raise FrameError(
                    f"{spec.kind} die {which} {die!r} is out of range {self.low}..6", seq=seq
                )

    def write(self, value: Any) -> tuple[str, ...]:
        """One decimal digit per die."""
        return (str(value[0]), str(value[1]))


# ---------------------------------------------------------------------------------------
# The declaration of a device message type


@dataclass(frozen=True, slots=True)
class MessageType:
    """One device message type, as ``declare`` builds it (see the module docstring).

    ``fields`` are the fact's fields in wire order, each with its codec; a fact's ``device``
    field (``HELLO``, ``STATUS``) is not on the wire: ``parse`` takes it from the reader.
    """

    kind: str
    fact: type[WireFact]
    sent_by: frozenset[Device]
    fields: tuple[tuple[str, Field], ...]
    secret: bool
    names_device: bool
    count: int
    """Wire fields after TYPE and SEQ."""
    rest: bool
    """Whether the last field takes the rest of the body (``STATUS`` text may hold ``,``)."""

    def read(self, texts: Sequence[str], seq: int, device: Device) -> DeviceMessage:
        """The message of sequence number ``seq`` from ``count`` wire fields, sent by
        ``device``; ``FrameError`` for the first field that is wrong."""
        _check_seq(self.kind, seq, 1)
        values: dict[str, Any] = {"device": device} if self.names_device else {}
        at = 0
        for name, codec in self.fields:
            values[name] = codec.read(texts, at, self, seq)
            at += codec.width
        # Every field was checked as it was read: no second pass.
        return DeviceMessage._checked(seq, self.fact(**values))

    def check(self, fact: WireFact, seq: int) -> None:
        """Raise ``FrameError`` unless every field of ``fact`` may be sent."""
        for name, codec in self.fields:
            codec.check(getattr(fact, name), self, seq)

    def write(self, fact: WireFact) -> tuple[str, ...]:
        """The wire fields of ``fact``, after TYPE and SEQ."""
        return tuple(chain.from_iterable(codec.write(getattr(fact, n)) for n, codec in self.fields))


def declare(
    kind: str,
    fact: type[WireFact],
    *,
    sent_by: Sequence[Device],
    secret: bool = False,
    **fields: Field,
) -> MessageType:
    """Declare the device message ``kind`` carrying ``fact``, with ``fields`` in wire order.

    Raises ``TypeError`` (at import) unless ``fields`` name exactly the fact's fields, in
    the fact's order, ``device`` apart, and only the last one takes the rest of the body.
    """
    own = [f.name for f in dataclasses.fields(fact)]
    names_device = own[:1] == ["device"]
    if own[names_device:] != list(fields):
        raise TypeError(f"{kind}: fields {list(fields)} are not {fact.__name__}'s {own}")
    if any(codec.rest for codec in list(fields.values())[:-1]):
        raise TypeError(f"{kind}: only the last field may take the rest of the body")
    return MessageType(
        kind=kind,
        fact=fact,
        sent_by=frozenset(sent_by),
        fields=tuple(fields.items()),
        secret=secret,
        names_device=names_device,
        count=sum(codec.width for codec in fields.values()),
        rest=any(codec.rest for codec in fields.values()),
    )


BOTH: Final[tuple[Device, ...]] = ev.DEVICES
SHUFFLER: Final[tuple[Device, ...]] = ("shuffler",)
DICE_READER: Final[tuple[Device, ...]] = ("dice_reader",)
ROUND_ID: Final = Number("round id", 1, ev.MAX_ID)
ROLL_ID: Final = Number("roll id", 1, ev.MAX_ID)
POSITION: Final = Choice("position", ev.POSITIONS)

# Device -> host (shuffler-icd.md and dice-reader-icd.md "Device to host"; link-layer.md
# "Device status"). One ``declare`` per message type: adding a message is one more here.
DECLARED: Final[tuple[MessageType, ...]] = (
    # both devices
    declare(
        "HELLO",
        ev.DeviceHello,
        sent_by=BOTH,
        model=Word("model"),
        firmware=Word("firmware"),
        serial=Word("serial number"),
    ),
    declare("STATUS", ev.DeviceStatus, sent_by=BOTH, code=Code("code"), text=Text("text")),
    # shuffler (and the card-reading shoe)
    declare("MODE", ev.ModeReported, sent_by=SHUFFLER, game=Choice("game", ev.GAMES)),
    declare("DECK", ev.DeckChecked, sent_by=SHUFFLER, result=Choice("result", ev.DECK_RESULTS)),
    declare(
        "HAND",
        ev.HandDealt,
        sent_by=SHUFFLER,
        secret=True,
        round_id=ROUND_ID,
        position=POSITION,
        cards=Cards("cards"),
    ),
    declare(
        "ROUND",
        ev.RoundDealt,
        sent_by=SHUFFLER,
        round_id=ROUND_ID,
        hands=Number("hands", 0, MAX_HANDS),
    ),
    declare("SETTLE", ev.RoundSettled, sent_by=SHUFFLER, round_id=ROUND_ID),
    declare(
        "CARD",
        ev.CardDrawn,
        sent_by=SHUFFLER,
        secret=True,
        round_id=ROUND_ID,
        # shuffler-icd.md: CARD is BJ only, and blackjack has no community cards.
        position=Choice("position", [p for p in ev.POSITIONS if p != "CM"]),
        card=OneCard("card"),
    ),
    declare("END", ev.DealerDone, sent_by=SHUFFLER, round_id=ROUND_ID),
    declare("VOID", ev.RoundVoided, sent_by=SHUFFLER, round_id=ROUND_ID),
    # dice reader
    declare("ROLL", ev.DiceRolled, sent_by=DICE_READER, roll_id=ROLL_ID, dice=Dice(1)),
    declare(
        "NOROLL",
        ev.NoRoll,
        sent_by=DICE_READER,
        roll_id=ROLL_ID,
        reason=Choice("reason", ev.NOROLL_REASONS),
    ),
    declare(
        "CHECK",
        ev.RollCheck,
        sent_by=DICE_READER,
        roll_id=ROLL_ID,
        dice=Dice(0),  # 0 where unreadable (dice-reader-icd.md)
        reason=Choice("reason", ev.CHECK_REASONS),
    ),
)
"""Every device message type."""

DEVICE_TYPES: Final[Mapping[str, MessageType]] = MappingProxyType({t.kind: t for t in DECLARED})
"""Every device message type by its wire TYPE."""
_BY_FACT: Final[dict[type[WireFact], MessageType]] = {t.fact: t for t in DECLARED}
if len(DEVICE_TYPES) != len(DECLARED) or len(_BY_FACT) != len(DECLARED):
    raise TypeError("two declarations share a TYPE or a fact")
if set(_BY_FACT) != set(get_args(WireFact)):
    missing = ", ".join(sorted(f.__name__ for f in set(get_args(WireFact)) - set(_BY_FACT)))
    raise TypeError(f"facts a device sends but no declaration carries: {missing}")

SENT_BY: Final[Mapping[Device, frozenset[str]]] = MappingProxyType(
    {d: frozenset(t.kind for t in DECLARED if d in t.sent_by) for d in ev.DEVICES}
)
"""The message types each device sends (shuffler-icd.md, dice-reader-icd.md "Device to host")."""
SECRET_TYPES: Final = frozenset(t.kind for t in DECLARED if t.secret)
"""Bodies that carry cards, secret until face up (shuffler-icd.md): reasons never quote them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceMessage:
    """A device's frame: its sequence number (1..9999) and the fact it states.

    Built only if the fact may be sent (``FrameError`` otherwise), so it can always be
    encoded.
    """

    seq: int
    fact: WireFact

    def __post_init__(self) -> None:
        spec = _BY_FACT.get(type(self.fact))
        if spec is None:
            raise FrameError(f"{type(self.fact).__name__} is not a fact a device sends in a frame")
        _check_seq(spec.kind, self.seq, 1)
        spec.check(self.fact, self.seq)

    @classmethod
    def _checked(cls, seq: int, fact: WireFact) -> DeviceMessage:
        """A message whose fields the parser has just checked (``__post_init__`` skipped)."""
        message = object.__new__(cls)
        object.__setattr__(message, "seq", seq)
        object.__setattr__(message, "fact", fact)
        return message

    @property
    def message_type(self) -> MessageType:
        """Its declaration."""
        return _BY_FACT[type(self.fact)]

    @property
    def kind(self) -> str:
        """The wire TYPE (``HAND``)."""
        return self.message_type.kind

    @property
    def secret(self) -> bool:
        """Whether it carries cards that may be face down (never logged above debug)."""
        return self.message_type.secret

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire."""
        return self.message_type.write(self.fact)


# ---------------------------------------------------------------------------------------
# Host -> device (link-layer.md "Sequence numbers and acknowledgement")


@dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    """``ACK,<seq>``: the device frame ``seq`` arrived (1..9999)."""

    kind: ClassVar[str] = "ACK"
    seq: int

    def __post_init__(self) -> None:
        _check_seq(self.kind, self.seq, 1)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire: none."""
        return ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Nak:
    """``NAK,<seq>``: a bad frame; ``seq`` 0 when its sequence number could not be read."""

    kind: ClassVar[str] = "NAK"
    seq: int

    def __post_init__(self) -> None:
        _check_seq(self.kind, self.seq, 0)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire: none."""
        return ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Query:
    """``QUERY,0``: the device answers ``HELLO`` then its configuration (``MODE``)."""

    kind: ClassVar[str] = "QUERY"
    seq: int = 0

    def __post_init__(self) -> None:
        _check_seq(self.kind, self.seq, 0, 0)

    def fields(self) -> tuple[str, ...]:
        """The fields after TYPE and SEQ, as on the wire: none."""
        return ()


HostMessage = Ack | Nak | Query
Message = DeviceMessage | HostMessage

HOST_MESSAGES: Final[Mapping[str, type[HostMessage]]] = MappingProxyType(
    {cls.kind: cls for cls in (Ack, Nak, Query)}
)
"""The host's message classes by wire TYPE; none has fields after TYPE and SEQ."""
HOST_TYPES: Final = frozenset(HOST_MESSAGES)

FIELD_COUNTS: Final[Mapping[str, int]] = MappingProxyType(
    {**{t.kind: t.count for t in DECLARED}, **dict.fromkeys(HOST_TYPES, 0)}
)
"""Fields after TYPE,SEQ per message type, both directions."""


# ---------------------------------------------------------------------------------------
# Encoding and parsing


def encode_body(msg: Message) -> str:
    """The body of ``msg``: ``TYPE,SEQ,fields...``."""
    return ",".join((msg.kind, str(msg.seq), *msg.fields()))


def encode_message(msg: Message) -> bytes:
    """The whole frame for ``msg`` (``$...*CRC\\r\\n``). Raises ``FrameError`` if the body would
    be longer than 240 bytes (only possible with very long HELLO or STATUS text)."""
    return encode_frame(encode_body(msg))


@overload
def parse_body(body: str, *, device: Device | None, sender: Literal["device"]) -> DeviceMessage: ...
@overload
def parse_body(body: str, *, device: Device | None, sender: Sender | None = None) -> Message: ...
def parse_body(body: str, *, device: Device | None, sender: Sender | None = None) -> Message:
    """Parse a frame body (between ``$`` and ``*``) into a message.

    ``device`` is the device whose messages are read (``None``: none, a device reading the
    host); ``sender`` limits the direction (``"device"``: what a host receives, a
    ``DeviceMessage``; ``"host"``: what a device receives; ``None``: both). Raises
    ``FrameError`` with a specific reason and, when the sequence number could be read,
    ``seq`` for the NAK.
    """
    kind, seq = read_header(body)
    try:
        return _parse(body, kind, seq, device=device, sender=sender)
    except FrameError as exc:
        if exc.seq is None:
            raise FrameError(exc.reason, seq=seq if seq > 0 else None) from exc
        raise


def _parse(
    body: str, kind: str, seq: int, *, device: Device | None, sender: Sender | None
) -> Message:
    host = HOST_MESSAGES.get(kind)
    if host is not None:
        if sender == "device":
            raise FrameError(f"{kind} is sent by the host, not by a device", seq=seq)
        _fields(body, kind, seq, count=0, rest=False)
        return host(seq=seq)
    spec = DEVICE_TYPES.get(kind)
    if spec is None:
        raise FrameError(f"unknown message type {kind[:12]!r}", seq=seq)
    if sender == "host":
        raise FrameError(f"{kind} is sent by a device, not by the host", seq=seq)
    if device is None:
        raise FrameError(f"{kind} is a device message: this reader takes the host's", seq=seq)
    if device not in spec.sent_by:
        raise FrameError(f"{kind} is not a {device} message", seq=seq)
    return spec.read(_fields(body, kind, seq, count=spec.count, rest=spec.rest), seq, device)


def _fields(body: str, kind: str, seq: int, *, count: int, rest: bool) -> list[str]:
    """The fields after TYPE and SEQ: ``count`` of them (the last taking the rest of the
    body, commas and all, when ``rest``)."""
    parts = body.split(",", count + 1) if rest else body.split(",")
    if len(parts) != count + 2:
        raise FrameError(
            f"{kind} has {len(parts) - 2} fields after the sequence number, expected {count}",
            seq=seq,
        )
    return parts[2:]


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
