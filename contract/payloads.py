"""The JSON payloads of mqtt-api.md, version 1: one pydantic model per published topic.

The contract is ``shared/spec/mqtt-api.md``; field names and meanings here are the spec's
and must not change without a new version of it ("add topics and fields freely, but never
rename, remove or change the meaning of one listed here").

One declaration per topic serves every side (``PayloadModel``): the daemon builds its
bodies with it (``publication``: unknown or unset fields are a builder's bug), and every
consumer (the terminal display, ``lammer web``, the pit, the floor's services) parses with
it (``parse``: unknown fields accepted and kept, every value bounded). ``TOPICS`` is the
one topic table; ``contract.requests`` holds the requests and their responses;
``contract.schemas`` and ``contract.docs`` generate ``docs/schemas/``, the tables of
``docs/reference/mqtt.md`` and the browser's ``contract.js`` from these declarations.

Two layers per topic:

* a ``...Body`` model: ``table`` and the topic's own fields, validated when built;
* a ``...Message`` model: the body plus ``seq`` and ``ts``, exactly what goes on the wire.
  The journal inserts ``seq`` and ``ts`` (``Journal.append_publish``), because ``seq`` is
  the journal's and a republished retained state must keep its original pair
  (mqtt-api.md, "Conventions").

Exactness: odds are strings holding a normalised ``Decimal`` (``"34"``, ``"1.5"``; never a
float, never an exponent) read "to 1"; cards are shuffler-icd.md codes (``"As"``).

Added to the spec (allowed: "add topics and fields freely"), each a documented choice:

* ``craps/reversal`` (not retained): a Bonus Craps settlement taken back because the roll
  that settled it was declared invalid (``rules.events.CrapsBetReversed``). ``outcome`` is
  the settlement being taken back, with the same meaning as in ``craps/result``.
* ``bust_bonus/result``: ``outcome`` may also be ``void`` (the spec publishes a result at
  ``VOID``, so it needs a value for it), and a ``reason`` field (for ``flagged``, like
  ``cover_all/result``).
* ``info`` (retained): the lammer version, the contract version, the game and the whole
  pay tables in use, for the screens (as zigbee2mqtt's ``bridge/info``).
* ``last_roll`` of ``craps/board``: the latest roll event, retained with the board;
* ``series`` and ``series_count`` of ``craps/board``: the counted rolls of the current
  series (the newest ``rules.craps.SERIES_SHOWN`` and the whole count), and ``since`` of its
  ``pending_roll``: when that roll arrived (issue 22);
* ``stops_payouts`` of each alarm; ``paytable_row`` of ``bust_bonus/state`` and
  ``bust_bonus/result``, and ``column`` of the result: what a screen highlights, so no
  screen maps codes or cards to rules itself.

Shapes the spec leaves open, decided here: every listed key is always present, ``null``
where it does not apply (``pays`` of a lost bet, ``error`` of an ok response, ``reason``
of a result that is not flagged, ``highest`` of a result that is not a win, ``hands`` of
a round flagged before ``ROUND``, ``round_id``/``up_card`` of ``bust_bonus/state`` before
the first round); ``mode`` appears for the shuffler only and is ``null`` until it reports
one; ``pending_roll`` is ``{roll_id, dice, reason}``; ``alarms[].since`` is written like
``ts``; ``dice`` are ``[d1, d2]`` with 0 for a die the reader could not read.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Final, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from contract.topics import Topic
from foundation import strict_json
from rules.alarms import ALARMS
from rules.cards import parse_card
from rules.craps import SERIES_SHOWN
from rules.errors import CardError
from rules.events import (
    MAX_ID,
    CrapsBet,
    Device,
    Game,
    HandPosition,
    PokerGame,
    TableGame,
)

CONTRACT_VERSION: Final = "1.4"
"""The MQTT contract the payloads follow: mqtt-api.md version 1 with its 1.1 to 1.4
additions (1.4: ``info``'s ``software``, ``request/authenticate``) and lammer's
own (``info``, ``stops_payouts``, ``paytable_row``, ``column``,
``craps/board`` ``last_roll``, ``waiting``, ``series``, ``pending_roll`` ``clause`` and
``since``; docs/reference/mqtt.md)."""


# ---------------------------------------------------------------------------------------
# Value types. Each is bounded, so that what a consumer accepts is bounded too: a hostile
# publisher under a base topic gets nothing odd onto a screen (no megabyte of text, no
# card "<b>", no odds 1e400). The bounds are wider than anything the daemon builds.

TS_PATTERN: Final = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
ODDS_PATTERN: Final = r"^(0|[1-9][0-9]{0,8})(\.[0-9]{0,6}[1-9])?$"
CARD_PATTERN: Final = r"^[2-9TJQKA][cdhs]$"
TABLE_ID_PATTERN: Final = r"^[A-Za-z0-9_-]{1,64}$"
"""Table ids the web pages serve: one topic level without ``.`` or spaces (mqtt-api.md
"Conventions"), restricted to letters, digits, ``_`` and ``-`` so a URL needs no escaping.
(The daemon's configuration allows any printable id of one level; the pages serve these.)"""
MAX_SEQ: Final = 2**53 - 1
"""The largest ``seq`` a consumer takes: exact in a browser's Number."""
MAX_PAYLOAD: Final = 64 * 1024
"""Bytes of a published payload a consumer reads; the largest the daemon builds
(``info``) is a few KiB."""
MAX_ALARMS: Final = 128
"""Active alarms a consumer takes: more than the rules can raise at once (two devices with
``MAX_DEVICE_FAULTS`` codes and an ``OTHER`` each, plus the table's own)."""

MAX_SERIES: Final = 4 * SERIES_SHOWN
"""Rolls of ``craps/board`` ``series`` a consumer takes: wider than the daemon's
``SERIES_SHOWN`` (50), so a later table that names more is still read."""


def _odds_text(value: object) -> object:
    # mqtt-api.md "Conventions": odds are strings holding an exact decimal, never a float.
    if not isinstance(value, str):
        raise ValueError(
            f"odds must be a string holding an exact decimal, not {type(value).__name__} "
            f"{value!r} (mqtt-api.md)"
        )
    return value


def _card_code(value: object) -> object:
    if not isinstance(value, str):
        raise ValueError(f"a card is a 2-character code such as 'As', not {value!r}")
    try:
        return parse_card(value).code
    except CardError as exc:
        raise ValueError(str(exc)) from None


def _card_list(value: object) -> object:
    # A consumer also reads a list written as shuffler-icd.md writes it in a frame, without
    # separators ("AsKsQsJsTs"): mqtt-api.md only says "cards as in" that spec. The daemon
    # always writes a JSON list, and a display passes on the list.
    if isinstance(value, str):
        if len(value) % 2:
            raise ValueError(f"card list {value!r} has an odd number of characters")
        return [value[i : i + 2] for i in range(0, len(value), 2)]
    return value


CHANCE_PATTERN: Final = r"^[1-9][0-9]{0,30}/[1-9][0-9]{0,30}$"


def _chance(value: object) -> object:
    # A chance is extra information beside the bet: one a consumer cannot read is shown as
    # none, rather than the whole board dropped.
    if isinstance(value, str) and not re.fullmatch(CHANCE_PATTERN, value):
        return None
    return value


Timestamp = Annotated[
    str,
    Field(
        pattern=TS_PATTERN,
        description="UTC, ISO 8601 with milliseconds and Z (mqtt-api.md, Conventions)",
        examples=["2026-11-29T14:03:07.123Z"],
    ),
]
Odds = Annotated[
    str,
    BeforeValidator(_odds_text),
    Field(
        pattern=ODDS_PATTERN,
        description='an exact decimal read "to 1" (mqtt-api.md, Conventions); never a float',
        examples=["34", "1.5"],
    ),
]
CardCode = Annotated[
    str,
    BeforeValidator(_card_code),
    Field(pattern=CARD_PATTERN, description="a card as in shuffler-icd.md", examples=["As"]),
]
Cards = Annotated[list[CardCode], BeforeValidator(_card_list), Field(max_length=32)]
Seq = Annotated[
    int,
    Field(
        ge=1, le=MAX_SEQ, description="the daemon's event number: strictly increasing, never reused"
    ),
]
TableId = Annotated[str, Field(min_length=1, max_length=64, description="the table id")]
RoundId = Annotated[int, Field(ge=1, le=MAX_ID, description="the shuffler's round id")]
RollId = Annotated[int, Field(ge=1, le=MAX_ID, description="the dice reader's roll id")]
Die = Annotated[int, Field(ge=0, le=6, description="1-6; 0 where the reader could not read it")]
Dice = Annotated[list[Die], Field(min_length=2, max_length=2)]
Total = Annotated[int, Field(ge=2, le=12)]
Totals = Annotated[list[Total], Field(max_length=11)]
Hands = Annotated[int, Field(ge=1, le=9)]
CardGame = Game
"""What the shuffler reports in ``MODE`` (``rules.events.Game``)."""
DeviceName = Device
Name = Annotated[str, Field(min_length=1, max_length=200)]
"""A code or a name: an alarm code, a device status, a hand or a pay-table row."""
Text = Annotated[str, Field(min_length=1, max_length=500)]
"""A sentence for people: an alarm's message, a reason, an error."""
CrapsPaytableNumber = Annotated[int, Field(ge=1, le=2)]
"""A Bonus Craps pay table of sd-bonus-craps.txt: 1 or 2."""
InvalidRollClause = Annotated[int, Field(ge=1, le=11)]
"""A clause of 68 IAC 10-4-4(c), (1) to (11): the rolls the stickperson declares invalid."""


def format_odds(value: Decimal) -> str:
    """Odds as the exact decimal string of mqtt-api.md: ``Decimal("34.0")`` -> ``"34"``,
    ``Decimal("1.50")`` -> ``"1.5"``, ``Decimal("3.4E+1")`` -> ``"34"``; never an exponent.

    Raises ``ValueError`` for a negative, NaN or infinite value (no pay table has one).
    """
    if not value.is_finite() or value < 0:
        raise ValueError(f"odds must be a finite, non-negative decimal, got {value!r}")
    # normalize() strips trailing zeros but may produce an exponent ("3.4E+2");
    # format "f" writes it back out in plain digits.
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "0") else text


# ---------------------------------------------------------------------------------------
# Models

ADDED: Final = "added"
"""``x-added`` of a field lammer added to mqtt-api.md version 1 (the spec lets it: "add
topics and fields freely"); ``"1.1"`` for the spec's own 1.1 additions."""


def _added(version: str = ADDED) -> dict[str, Any]:
    return {"x-added": version}


class PayloadModel(BaseModel):
    """One declaration of a payload, for both sides of the contract.

    * A consumer parses with it (``parse``): unknown fields are accepted and kept
      (``extra="allow"``), since the spec lets the daemon add fields and an older screen
      must read a newer table; every value is bounded and typed strictly (JSON ``true`` is
      not the seq 1, and ``34.0`` is not the odds ``"34"``). A field added after version 1
      has a default, so a newer screen reads an older table.
    * A producer builds with it (``publication``): every field set by the builder, none
      the declaration lacks (a builder that writes a field the spec does not have is a bug
      caught there, and mypy catches it first: the constructor knows only the fields).
    """

    # The schemas (serialization mode) say what the daemon writes: every key, always.
    model_config = ConfigDict(
        extra="allow", frozen=True, strict=True, json_schema_serialization_defaults_required=True
    )


class Envelope(PayloadModel):
    """``seq`` and ``ts``, which every JSON payload has (mqtt-api.md, Conventions), and
    ``prev_seq`` (a lammer addition): the seq of the message the table published before
    this one, null for its journal's first. The table's seqs number every record of its
    journal, messages or not; ``prev_seq`` is how a subscriber (``contract.feed``) knows a
    lost message from a seq that was never a message."""

    seq: Seq
    prev_seq: Seq | None = Field(
        default=None,
        description="the seq of the message published before this one (null: none)",
        json_schema_extra=_added(),
    )
    ts: Timestamp


class DeviceState(PayloadModel):
    """One device in ``state``: ``connected``, ``status``, and ``mode`` for the shuffler."""

    connected: bool
    status: Name = Field(
        description="`READY`, or the first active fault code the device reported (`JAM`, ...)"
    )
    mode: CardGame | None = Field(
        default=None,
        description="shuffler only: the game it reported in MODE (null until then)",
        json_schema_extra={"x-absent": "for every device but the shuffler"},
    )


class Alarm(PayloadModel):
    """An active alarm: a check of the specs that failed."""

    code: Name = Field(
        description=", ".join(f"`{kind.code}`" for kind in ALARMS)
        + " (docs/reference/alarms.md says when each is raised and cleared)"
    )
    device: DeviceName | None = Field(
        description="`shuffler`, `dice_reader`, or `null` for the table's own ("
        + ", ".join(f"`{kind.code}`" for kind in ALARMS if kind.device is None)
        + ")"
    )
    message: Text = Field(description="a sentence for people")
    since: Timestamp = Field(description="when it was raised, as `ts`")
    # Added: whether no payout is published while this alarm is active (a screen shows a
    # "payouts paused" banner without knowing which codes mean that).
    stops_payouts: bool = Field(
        default=False,
        description="`true` while no payout is published because of it (`MODE_MISMATCH`, "
        '`DECK_FAULT`): show "payouts paused"',
        json_schema_extra=_added(),
    )
    # mqtt-api.md 1.3 (alarm_ack): who acknowledged it and when, null until acknowledged.
    acknowledged_by: Text | None = Field(
        default=None, description="the operator who acknowledged the alarm; null until then"
    )
    acknowledged_at: Timestamp | None = Field(
        default=None, description="when it was acknowledged (UTC); null until then"
    )


Alarms = Annotated[list[Alarm], Field(max_length=MAX_ALARMS)]


class StateBody(PayloadModel):
    """``state`` (retained): the game, the devices and the active alarms."""

    WHEN: ClassVar[str] = "any change of the devices or the alarms"

    table: TableId
    game: TableGame = Field(description="the table's game")
    devices: dict[DeviceName, DeviceState] = Field(
        description="per device (`shuffler`, `dice_reader`): `{connected, status}`, and `mode` for "
        "the shuffler (the game it reported; `null` until then). `status` is `READY` or the first "
        "active fault code the device reported"
    )
    alarms: Alarms = Field(description="as in `alarms`")


class AlarmsBody(PayloadModel):
    """``alarms`` (retained): every active alarm, empty when none."""

    WHEN: ClassVar[str] = "any change of the alarms"

    table: TableId
    alarms: Alarms = Field(
        description="the active alarms, oldest first, `[]` when none: `{code, device, message, "
        "since, stops_payouts}`"
    )


class PayRowModel(PayloadModel):
    """One pay-table row: hand name as the seed writes it, odds "to 1"."""

    hand: Name
    pays: Odds


class CoverAllRowModel(PayloadModel):
    """One row of a whole Cover All Bonus pay table: its odds per column."""

    hand: Name
    pays: Annotated[list[Odds], Field(min_length=1, max_length=9)] = Field(
        description="one per column, in the order of columns"
    )


class CoverAllPayoutsBody(PayloadModel):
    """``cover_all/payouts`` (retained): the pay table for this round's number of hands."""

    WHEN: ClassVar[str] = "`ROUND`: the pay table for this round's number of hands"

    table: TableId
    round_id: RoundId = Field(description=f"the shuffler's round id, 1 to {MAX_ID}")
    game: PokerGame = Field(description="the poker game")
    hands: Hands = Field(
        description="the hands in play (players, plus the dealer where the game counts it)"
    )
    paytable: Annotated[list[PayRowModel], Field(max_length=20)] = Field(
        description="`[{hand, pays}]` for that many hands, highest first"
    )


class HighestModel(PayloadModel):
    """The highest qualifying hand: its name, position and (face-up) cards."""

    hand: Name
    position: HandPosition
    cards: Cards
    # Added (issue 22; mqtt-api.md allows new fields): the hand as a player reads it, so a
    # screen marks the cards that make it and sets the board apart without knowing a rule.
    best: Cards | None = Field(
        default=None,
        description="the cards among `cards` that make the hand (five; FCP four, TCP three), "
        "in the order of `cards`",
        json_schema_extra=_added(),
    )
    board: Cards = Field(
        default_factory=list,
        description="the community cards among `cards` (UTH 5, MSP 3, LIR 2; empty in the "
        "other games): the others are the position's own",
        json_schema_extra=_added(),
    )


class CoverAllResultBody(PayloadModel):
    """``cover_all/result`` (retained): the round's outcome; a flagged round has no cards."""

    WHEN: ClassVar[str] = "`SETTLE` or `VOID`; a flagged round as soon as the fault is found"

    table: TableId
    round_id: RoundId = Field(description="the shuffler's round id")
    game: PokerGame = Field(description="the poker game")
    hands: Hands | None = Field(
        description="the hands in play; `null` for a round flagged before `ROUND`"
    )
    outcome: Literal["win", "no_qualifier", "void", "flagged"]
    highest: HighestModel | None = Field(
        description="for `win`: `{hand, position, cards}`: the pay-table row, `P1`..`P8` or `DL`, "
        "and every card of the winning hand (own cards, then community cards); `null` otherwise"
    )
    pays: Odds | None = Field(description="for `win`: the odds; `null` otherwise")
    reason: Text | None = Field(
        default=None,
        description="for `flagged`: why the round pays nothing automatically (never a card); "
        "`null` otherwise",
    )

    @model_validator(mode="after")
    def _consistent(self) -> CoverAllResultBody:
        if self.outcome == "win":
            if self.highest is None or self.pays is None:
                raise ValueError("a win names its highest hand and its pays")
        elif self.highest is not None or self.pays is not None:
            # shuffler-icd.md "Card data is secret": a flagged round may still be face down.
            raise ValueError(f"a {self.outcome} result has no highest hand and no pays")
        if (self.outcome == "flagged") != (self.reason is not None):
            raise ValueError("a reason is given for a flagged result, and only for it")
        return self


class BetProgressModel(PayloadModel):
    """One Bonus Craps bet on the board: its odds and its lammers."""

    pays: Odds
    hit: Totals = Field(description="its numbers rolled this series, sorted")
    remaining: Totals = Field(description="its numbers still needed, sorted")
    complete: bool
    # Added (mqtt-api.md 1.1): the exact chance, from this board, that the bet completes
    # before a seven, as a fraction in lowest terms ("5/11"); null once complete.
    chance: Annotated[str | None, BeforeValidator(_chance)] = Field(
        default=None,
        pattern=CHANCE_PATTERN,
        description="exact chance to complete before a seven, 'n/d'; null once complete",
        json_schema_extra=_added("1.1"),
    )


class PendingRollModel(PayloadModel):
    """A ``CHECK`` roll waiting for the stickperson."""

    roll_id: RollId
    dice: Dice
    reason: Text
    # Added: the clause of the reader's CHECK reason, so a screen shows the regulation's
    # text without reading the reason's words.
    clause: InvalidRollClause | None = Field(
        default=None,
        description="the clause of 68 IAC 10-4-4(c) the reader's `CHECK` reason stands for",
        json_schema_extra=_added(),
    )
    # Added (issue 22): since when it waits, so the pit and the stickperson see its age
    # without holding the roll's own craps/roll message.
    since: Timestamp | None = Field(
        default=None,
        description="when the roll arrived, by the table's clock, as `ts` (it has waited since; "
        "it is the oldest roll of the queue); `null` where the daemon did not keep it",
        json_schema_extra=_added(),
    )


class SeriesRollModel(PayloadModel):
    """A counted roll of the current series on the board (added): what a player reads."""

    roll_id: RollId
    dice: Dice
    total: Total
    at: Timestamp | None = Field(
        description="when the roll arrived, by the table's clock, as `ts`; `null` where the "
        "daemon did not keep it (a table restored from a snapshot of an older lammer)"
    )
    new_number: bool = Field(
        description="its total had not been rolled before in this series: it lit that number"
    )
    wins: Annotated[list[CrapsBet], Field(max_length=3)] = Field(
        description="the bets it completed, `[]` for none"
    )


class LastRollModel(PayloadModel):
    """The latest roll event on the board (added): as ``craps/roll`` reported it."""

    roll_id: RollId
    dice: Dice
    total: Total | None = Field(description="null when a die is unknown or for a no roll")
    status: Literal["counted", "noroll", "pending", "declared_invalid"]


class CrapsBoardBody(PayloadModel):
    """``craps/board`` (retained): the lammers, the three bets and a pending roll."""

    WHEN: ClassVar[str] = "any change (every roll event, every decision)"

    table: TableId
    paytable: CrapsPaytableNumber = Field(description="1 or 2")
    betting_open: bool = Field(
        description="whether Bonus Craps bets may be placed (a series has no counted roll "
        "and no roll waits)"
    )
    numbers_hit: Totals = Field(description="the totals rolled this series, sorted")
    all_small: BetProgressModel = Field(
        description="`{pays, hit, remaining, complete, chance}`: the odds, the bet's numbers "
        "rolled and still needed (sorted), whether it is complete, and (1.1) `chance`, the exact "
        'chance to complete before a seven as `"n/d"` (`null` once complete)'
    )
    all_tall: BetProgressModel = Field(description="as `all_small`")
    make_em_all: BetProgressModel = Field(description="as `all_small`")
    pending_roll: PendingRollModel | None = Field(
        description="the `CHECK` roll waiting for the stickperson: `{roll_id, dice, reason}`, and "
        "(**added**) `clause`, the clause of 68 IAC 10-4-4(c) its reason stands for (`1` to `11`), "
        "and `since`, when it arrived by the table's clock, as `ts` (it has waited since then: "
        "the oldest roll of the queue; `null` where not kept); `null` when none"
    )
    # Added: craps/roll is not retained, so a screen that connects later learns the last
    # roll here (the board changes with every roll event).
    last_roll: LastRollModel | None = Field(
        default=None,
        description="the latest roll event, retained with the board (`craps/roll` is not): "
        "`{roll_id, dice, total, status}`, `status` `counted`, `noroll`, `pending` or "
        "`declared_invalid`; `null` before the first roll",
        json_schema_extra=_added(),
    )
    # Added (issue 22): the queue behind a pending CHECK, for the stickperson.
    waiting_count: Annotated[int, Field(ge=0)] = Field(
        default=0,
        description="how many rolls wait behind the pending roll",
        json_schema_extra=_added(),
    )
    waiting: Annotated[list[RollId], Field(max_length=20)] = Field(
        default_factory=list,
        description="the roll ids waiting behind the pending roll, in order (the first 20)",
        json_schema_extra=_added(),
    )
    # Added (issue 22): the current shooter's series, so a player display lists its rolls
    # without working out in the page which rolls belong to it (a rule).
    series: Annotated[list[SeriesRollModel], Field(max_length=MAX_SERIES)] = Field(
        default_factory=list,
        description="the counted rolls of the current series, oldest first (the newest "
        f"{SERIES_SHOWN}): `{{roll_id, dice, total, at, new_number, wins}}`; a series begins "
        "at start and after every counted seven, so it is `[]` after a seven; a roll declared "
        "invalid leaves it, a reinstated one joins it again",
        json_schema_extra=_added(),
    )
    series_count: Annotated[int, Field(ge=0)] = Field(
        default=0,
        description="how many rolls have counted in the current series (all of them: more than "
        f"`series` holds past {SERIES_SHOWN})",
        json_schema_extra=_added(),
    )


class CrapsRollBody(PayloadModel):
    """``craps/roll`` (not retained): every roll event and every decision on a roll."""

    WHEN: ClassVar[str] = "every roll event and every decision on a roll"

    table: TableId
    roll_id: RollId = Field(description="the dice reader's roll id")
    dice: Dice = Field(
        description="`[d1, d2]`, 0 for a die the reader could not read; `[0, 0]` for a `NOROLL`"
    )
    total: Total | None = Field(description="the sum; `null` when a die is unknown")
    status: Literal["counted", "noroll", "pending", "declared_invalid", "reinstated"]
    reason: Text | None = Field(
        description="why (the 68 IAC 10-4-4 clause, who decided), or `null`"
    )


class CrapsResultBody(PayloadModel):
    """``craps/result`` (not retained): a side bet settled."""

    WHEN: ClassVar[str] = "a Bonus Craps bet settles"

    table: TableId
    roll_id: RollId = Field(description="the roll that settled it")
    bet: CrapsBet
    outcome: Literal["win", "lose"]
    pays: Odds | None = Field(default=None, description="for `win`; `null` for `lose`")

    @model_validator(mode="after")
    def _consistent(self) -> CrapsResultBody:
        if (self.outcome == "win") != (self.pays is not None):
            raise ValueError("pays is given for a win, and only for it")
        return self


class CrapsReversalBody(PayloadModel):
    """``craps/reversal`` (not retained; added to the spec): a settlement taken back because
    the roll that settled it was declared invalid; the bet is live again."""

    WHEN: ClassVar[str] = "a settlement taken back (its roll declared invalid)"

    table: TableId
    roll_id: RollId = Field(description="the roll that settled it")
    bet: CrapsBet
    outcome: Literal["win", "lose"] = Field(description="the settlement being taken back")


class BustBonusStateBody(PayloadModel):
    """``bust_bonus/state`` (retained): the round, betting, and the face-up dealer cards."""

    WHEN: ClassVar[str] = "any change of the Bust Bonus round"

    table: TableId
    round_id: RoundId | None = Field(description="the round in play, `null` before the first")
    betting_open: bool = Field(
        description="until the dealer's up card is exposed, and again after `END`/`VOID`"
    )
    up_card: CardCode | None = Field(description="the dealer's up card, `null` before it")
    dealer_cards: Cards = Field(
        description="the dealer's face-up cards only: the up card alone until `END`"
    )
    # Added: the pay-table row of the up card, so a screen highlights it without mapping
    # cards to rows itself.
    paytable_row: Name | None = Field(
        default=None,
        description='the pay-table row of the up card (`"Ace"`, `"2"`..`"9"`, `"10"` for a ten, '
        "jack, queen or king); `null` before it",
        json_schema_extra=_added(),
    )


class BustBonusResultBody(PayloadModel):
    """``bust_bonus/result`` (retained): the round's outcome (``void`` and ``reason`` added)."""

    WHEN: ClassVar[str] = "`END` or `VOID`, or a flagged round"

    table: TableId
    round_id: RoundId = Field(description="the round")
    outcome: Literal["win", "lose", "flagged", "void"] = Field(
        description="`win`, `lose`, `flagged`, and (1.1) `void`"
    )
    up_card: CardCode | None = Field(description="the dealer's up card, face up now")
    dealer_cards: Cards = Field(description="every dealer card, face up now")
    total: Annotated[int, Field(ge=2, le=40)] | None = Field(
        description="the dealer's total, `null` for a void or flagged round"
    )
    suited: bool = Field(description="for a busted hand: all one suit")
    three_eights: bool = Field(description="for a busted hand: exactly three eights")
    pays: Odds | None = Field(default=None, description="for `win`: the odds; `null` otherwise")
    reason: Text | None = Field(
        default=None,
        description="for `flagged`: why it was not settled; `null` otherwise",
        json_schema_extra=_added("1.1"),
    )
    # Added: the pay-table cell that applies, so a screen highlights it without mapping cards
    # to rows itself.
    paytable_row: Name | None = Field(
        default=None,
        description="the row of this hand: `Bust with three 8s` for three eights, else the up "
        "card's; `null` for `void` and `flagged`",
        json_schema_extra=_added(),
    )
    column: Literal["suited", "off_suit"] | None = Field(
        default=None,
        description="`suited` or `off_suit`: the column that paid; `null` unless `win`",
        json_schema_extra=_added(),
    )

    @model_validator(mode="after")
    def _consistent(self) -> BustBonusResultBody:
        if (self.outcome == "win") != (self.pays is not None):
            raise ValueError("pays is given for a win, and only for it")
        if (self.outcome == "flagged") != (self.reason is not None):
            raise ValueError("a reason is given for a flagged result, and only for it")
        return self


class CoverAllPaytableModel(PayloadModel):
    """A whole Cover All Bonus pay table, every column, as the regulation prints it."""

    game: PokerGame
    title: Text
    columns: Annotated[list[Hands], Field(max_length=9)] = Field(
        description="total hands of each column, as printed (most hands first)"
    )
    rows: Annotated[list[CoverAllRowModel], Field(max_length=20)] = Field(
        description="highest hand first"
    )


class BonusCrapsPaytableModel(PayloadModel):
    """The Bonus Craps pay table in use (1 or 2) and each bet's odds."""

    paytable: CrapsPaytableNumber
    pays: dict[CrapsBet, Odds]


class BustRowModel(PayloadModel):
    """One row of the Bust Bonus pay table (SDAR 20:18:15:30.16(12))."""

    row: Name = Field(description="Ace, 2..9, 10, or Bust with three 8s")
    off_suit: Odds
    suited: Odds


class BustBonusPaytableModel(PayloadModel):
    """The Bust Bonus pay table and the shoe's rules the table runs."""

    decks: Annotated[int, Field(ge=1, le=8)]
    dealer_hits_soft_17: bool
    rows: Annotated[list[BustRowModel], Field(max_length=20)]


class PaytablesModel(PayloadModel):
    """The pay tables in use at this table; null for the games it does not play."""

    cover_all: CoverAllPaytableModel | None = Field(
        description="`{game, title, columns, rows}`: the whole Cover All Bonus table as the "
        "regulation prints it; `columns` the total hands of each column (most first), `rows` "
        "`[{hand, pays}]` highest first with `pays` one odds string per column, in the order of "
        "`columns`"
    )
    bonus_craps: BonusCrapsPaytableModel | None = Field(
        description="`{paytable, pays}`: the pay table in use (1 or 2) and `pays` `{all_small, "
        "all_tall, make_em_all}`"
    )
    bust_bonus: BustBonusPaytableModel | None = Field(
        description="`{decks, dealer_hits_soft_17, rows}`: the shoe's rules and `rows` `[{row, "
        "off_suit, suited}]`: `Ace`, `2`..`9`, `10`, then `Bust with three 8s`"
    )


HEX_DIGEST_PATTERN: Final = r"^[0-9a-f]{64}$"
HexDigest = Annotated[str, Field(pattern=HEX_DIGEST_PATTERN, description="64 hex digits")]
"""A SHA-256 or HMAC-SHA256, lowercase hex (``contract.software``)."""


class SoftwareModel(PayloadModel):
    """What the table runs (mqtt-api.md 1.4): the lammer version and the SHA-256 over the
    sorted list of its critical components, each hashed with SHA-256
    (``contract.software``, ``lammer verify-install``)."""

    version: Name = Field(description="the lammer version")
    digest: HexDigest = Field(
        description="SHA-256 over the sorted `sha256sum`-style listing of every component"
    )


class InfoBody(PayloadModel):
    """``info`` (retained; added topic): what this table runs, for screens and the pit.

    Like zigbee2mqtt's ``bridge/info``: the lammer version, the contract version its
    payloads follow, the game and the whole pay tables in use (a player display shows every
    column). Nothing secret.
    """

    WHEN: ClassVar[str] = "at start (what the table runs)"

    table: TableId
    version: Name = Field(description="the lammer version publishing")
    contract: Name = Field(description=f'the version of this contract (`"{CONTRACT_VERSION}"`)')
    game: TableGame
    paytables: PaytablesModel = Field(
        description="`{cover_all, bonus_craps, bust_bonus}`, each `null` but the table's own "
        "game's:"
    )
    software: SoftwareModel | None = Field(
        default=None,
        description="`{version, digest}`: the installed software's digest, computed at start "
        "(`null` from a table before 1.4)",
        json_schema_extra=_added("1.4"),
    )


class StateMessage(StateBody, Envelope):
    """``state`` as published."""


class AlarmsMessage(AlarmsBody, Envelope):
    """``alarms`` as published."""


class CoverAllPayoutsMessage(CoverAllPayoutsBody, Envelope):
    """``cover_all/payouts`` as published."""


class CoverAllResultMessage(CoverAllResultBody, Envelope):
    """``cover_all/result`` as published."""


class CrapsBoardMessage(CrapsBoardBody, Envelope):
    """``craps/board`` as published."""


class CrapsRollMessage(CrapsRollBody, Envelope):
    """``craps/roll`` as published."""


class CrapsResultMessage(CrapsResultBody, Envelope):
    """``craps/result`` as published."""


class CrapsReversalMessage(CrapsReversalBody, Envelope):
    """``craps/reversal`` as published (added topic)."""


class BustBonusStateMessage(BustBonusStateBody, Envelope):
    """``bust_bonus/state`` as published."""


class BustBonusResultMessage(BustBonusResultBody, Envelope):
    """``bust_bonus/result`` as published."""


class InfoMessage(InfoBody, Envelope):
    """``info`` as published (added topic)."""


# topic (relative to the base topic) -> (model of the published message, retained)
TOPICS: Final[dict[str, tuple[type[Envelope], bool]]] = {
    Topic.INFO: (InfoMessage, True),
    Topic.STATE: (StateMessage, True),
    Topic.ALARMS: (AlarmsMessage, True),
    Topic.COVER_ALL_PAYOUTS: (CoverAllPayoutsMessage, True),
    Topic.COVER_ALL_RESULT: (CoverAllResultMessage, True),
    Topic.CRAPS_BOARD: (CrapsBoardMessage, True),
    Topic.CRAPS_ROLL: (CrapsRollMessage, False),
    Topic.CRAPS_RESULT: (CrapsResultMessage, False),
    Topic.CRAPS_REVERSAL: (CrapsReversalMessage, False),
    Topic.BUST_BONUS_STATE: (BustBonusStateMessage, True),
    Topic.BUST_BONUS_RESULT: (BustBonusResultMessage, True),
}
"""Every topic the daemon publishes from the table's state and the rules' outcomes, with
its model and whether it is retained: the one topic table of producers and consumers
(``response/<name>`` is ``contract.requests``')."""


class Publication(NamedTuple):
    """A message to queue (``Journal.append_publish``): the topic relative to the base
    topic, whether it is retained, and the JSON body with ``table`` (``seq`` and ``ts`` are
    the journal's)."""

    topic: str
    retained: bool
    body: dict[str, Any]


# ---------------------------------------------------------------------------------------
# The producer's side


def _holds_models(annotation: Any) -> bool:
    """Whether a field of this type may hold a model (itself, in a list or in a dict)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_holds_models(arg) for arg in getattr(annotation, "__args__", ()))


_NESTED: dict[type[BaseModel], tuple[int, tuple[str, ...]]] = {}
"""Per model, how many fields it declares and the fields that may hold models: the only
ones the producer's check visits (it runs for every publication, so it skips what cannot
nest, and reads pydantic's field table once per model)."""


def _shape(cls: type[BaseModel]) -> tuple[int, tuple[str, ...]]:
    shape = _NESTED.get(cls)
    if shape is None:
        fields = cls.model_fields.items()
        nested = tuple(n for n, f in fields if _holds_models(f.annotation))
        shape = _NESTED[cls] = (len(cls.model_fields), nested)
    return shape


def _nested_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    return _shape(cls)[1]


def _complete(model: BaseModel) -> bool:
    """``_unbuilt(model, ...) is None``, without naming anything: the check every
    publication runs (``_unbuilt`` then says where a body that fails it falls short)."""
    count, nested = _shape(type(model))
    if model.__pydantic_extra__ or len(model.__pydantic_fields_set__) != count:
        return False
    for name in nested:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            if not _complete(value):
                return False
        elif type(value) is list or type(value) is dict:
            for item in value.values() if type(value) is dict else value:
                if isinstance(item, BaseModel) and not _complete(item):
                    return False
    return True


def _unbuilt(model: BaseModel, where: str) -> str | None:
    """Where a built model has a field the declaration lacks or one the builder left
    unset, or None: ``every listed key is always present`` (docs/reference/mqtt.md) and no other."""
    cls = type(model)
    if model.model_extra:
        return f"{where}{sorted(model.model_extra)[0]}: not a field of {cls.__name__}"
    if len(model.model_fields_set) != len(cls.model_fields):
        unset = sorted(cls.model_fields.keys() - model.model_fields_set)
        return f"{where}{unset[0]}: not set by the builder of {cls.__name__}"
    for name in _nested_fields(cls):
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            items: Any = ((name, value),)
        elif type(value) is list:
            items = ((f"{name}.{i}", item) for i, item in enumerate(value))
        elif type(value) is dict:
            items = ((f"{name}.{key}", item) for key, item in value.items())
        else:
            continue
        for key, item in items:
            if isinstance(item, BaseModel):
                problem = _unbuilt(item, f"{where}{key}.")
                if problem is not None:
                    return problem
    return None


def built(where: str, body: PayloadModel) -> dict[str, Any]:
    """The JSON of a body a producer built for ``where`` (a topic).

    Raises ``ValueError`` for a builder's bug: a field the declaration lacks, or a field
    the builder left unset (every listed key is always present, docs/reference/mqtt.md).
    """
    if not _complete(body):
        problem = _unbuilt(body, "")
        if problem is not None:
            raise ValueError(f"{where}: {problem}")
    return body.model_dump(mode="json")


def publication(topic: str, body: PayloadModel) -> Publication:
    """The publication of a body built for ``topic``: its topic, retained flag and JSON.

    Raises ``ValueError`` for a builder's bug: a body of another topic's model, or what
    ``built`` refuses.
    """
    model, retained = TOPICS[topic]
    if not issubclass(model, type(body)):
        raise ValueError(f"{topic}: a {type(body).__name__} is not this topic's body")
    return Publication(topic, retained, built(topic, body))


# ---------------------------------------------------------------------------------------
# The consumer's side


class PayloadError(ValueError):
    """A payload that is not what the contract says; ``reason`` is a short category for
    drop counters (``too_large``, ``not_json``, ``invalid``, ``wrong_table``) and
    ``detail`` says what is wrong (naming the field)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def describe(exc: ValidationError, *, most: int = 3) -> str:
    """The first errors of a validation, each naming its field (``dice.1: ...``)."""
    parts = []
    for error in exc.errors()[:most]:
        where = ".".join(str(p) for p in error["loc"]) or "payload"
        text = error["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {text}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def decode(payload: bytes) -> dict[str, Any]:
    """A payload's JSON object (``PayloadError`` when too large or not a JSON object).

    NaN and Infinity are refused: they are not JSON (RFC 8259) and a browser's
    ``JSON.parse`` refuses them."""
    if len(payload) > MAX_PAYLOAD:
        raise PayloadError("too_large", f"{len(payload)} bytes")
    try:
        data = strict_json.loads(payload)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise PayloadError("not_json", f"not UTF-8 JSON ({str(exc)[:200]})") from None
    except RecursionError:
        raise PayloadError("not_json", "nested too deeply") from None
    if not isinstance(data, dict):
        raise PayloadError("not_json", "not a JSON object")
    return data


M = TypeVar("M", bound=Envelope)


def parse_as(model: type[M], payload: bytes, *, table: str) -> M:
    """A payload of ``table`` parsed with ``model`` (``PayloadError`` if it is not one)."""
    data = decode(payload)
    # Another table's payload is refused as such, whatever else is wrong with it.
    if "table" in data and data["table"] != table:
        raise PayloadError("wrong_table", f"names table {str(data['table'])[:80]!r}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise PayloadError("invalid", describe(exc)) from None


def parse(topic: str, payload: bytes, *, table: str) -> Envelope:
    """A payload published on ``topic`` (relative to the base topic) of ``table``, parsed.

    Unknown fields are accepted and kept (``model_extra``). Raises ``KeyError`` for a
    topic that is not in ``TOPICS``, ``PayloadError`` for a payload that is too large, not
    a JSON object, invalid, or names another table.
    """
    model, _ = TOPICS[topic]
    return parse_as(model, payload, table=table)


def relayed(message: PayloadModel) -> dict[str, Any]:
    """What a display passes on of a parsed message: the fields it came with, in the
    contract's form, unknown fields included (an older display relays a newer field)."""
    return message.model_dump(mode="json", exclude_unset=True)
