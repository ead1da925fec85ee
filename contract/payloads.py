"""The JSON payloads of mqtt-api.md, version 1: one pydantic model per published topic.

The contract is ``shared/spec/mqtt-api.md``; field names and meanings here are the spec's
and must not change without a new version of it ("add topics and fields freely, but never
rename, remove or change the meaning of one listed here").

The contract has three homes: the models here (what each published topic holds),
``daemon.publications`` (the table's state and the rules' outcomes turned into these
bodies), and ``daemon.requests`` (the requests and their responses); ``contract.schemas``
joins them into one registry of every topic and the JSON Schemas in ``docs/schemas/``.

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

from decimal import Decimal
from typing import Annotated, Any, Final, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rules.events import CrapsBet

# ---------------------------------------------------------------------------------------
# Value types

TS_PATTERN: Final = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
ODDS_PATTERN: Final = r"^(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$"
CARD_PATTERN: Final = r"^[2-9TJQKA][cdhs]$"

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
    Field(
        pattern=ODDS_PATTERN,
        description='an exact decimal read "to 1" (mqtt-api.md, Conventions); never a float',
        examples=["34", "1.5"],
    ),
]
CardCode = Annotated[
    str, Field(pattern=CARD_PATTERN, description="a card as in shuffler-icd.md", examples=["As"])
]
Seq = Annotated[
    int,
    Field(ge=1, description="the daemon's event number: strictly increasing, never reused"),
]
TableId = Annotated[str, Field(min_length=1, description="the table id")]
RoundId = Annotated[int, Field(ge=1, le=999999, description="the shuffler's round id")]
RollId = Annotated[int, Field(ge=1, le=999999, description="the dice reader's roll id")]
Die = Annotated[int, Field(ge=0, le=6, description="1-6; 0 where the reader could not read it")]
Total = Annotated[int, Field(ge=2, le=12)]
HandPosition = Literal["P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "DL"]
TableGame = Literal["CSP", "FCP", "LIR", "MSP", "TCP", "UTH", "BJ", "CRAPS"]
CardGame = Literal["CSP", "FCP", "LIR", "MSP", "TCP", "UTH", "BJ"]
PokerGame = Literal["CSP", "FCP", "LIR", "MSP", "TCP", "UTH"]  # Cover All Bonus games
DeviceName = Literal["shuffler", "dice_reader"]
Text = Annotated[str, Field(min_length=1)]


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


class PayloadModel(BaseModel):
    # forbid: a builder that writes a field the spec does not have is a bug caught here.
    # schemas() drops the additionalProperties it produces, since the spec lets us add.
    # strict: JSON true is not the seq 1, and 34.0 is not the odds "34".
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Envelope(PayloadModel):
    """``seq`` and ``ts``, which every JSON payload has (mqtt-api.md, Conventions)."""

    seq: Seq
    ts: Timestamp


class DeviceState(PayloadModel):
    """One device in ``state``: ``connected``, ``status``, and ``mode`` for the shuffler."""

    connected: bool
    status: Text = Field(description="the device's last STATUS code (READY, JAM, ...)")
    mode: CardGame | None = Field(
        default=None, description="shuffler only: the game it reported in MODE (null until then)"
    )


class Alarm(PayloadModel):
    """An active alarm: a check of the specs that failed."""

    code: Text
    device: DeviceName | None
    message: Text
    since: Timestamp
    # Added: whether no payout is published while this alarm is active (a screen shows a
    # "payouts paused" banner without knowing which codes mean that).
    stops_payouts: bool = Field(
        description="true while no payout is published because of this alarm"
    )
    # mqtt-api.md 1.3 (alarm_ack): who acknowledged it and when, null until acknowledged.
    acknowledged_by: Text | None = Field(
        default=None, description="the operator who acknowledged the alarm; null until then"
    )
    acknowledged_at: Timestamp | None = Field(
        default=None, description="when it was acknowledged (UTC); null until then"
    )


class StateBody(PayloadModel):
    """``state`` (retained): the game, the devices and the active alarms."""

    table: TableId
    game: TableGame
    devices: dict[DeviceName, DeviceState]
    alarms: list[Alarm]


class AlarmsBody(PayloadModel):
    """``alarms`` (retained): every active alarm, empty when none."""

    table: TableId
    alarms: list[Alarm]


class PayRowModel(PayloadModel):
    """One pay-table row: hand name as the seed writes it, odds "to 1"."""

    hand: Text
    pays: Odds


class CoverAllRowModel(PayloadModel):
    """One row of a whole Cover All Bonus pay table: its odds per column."""

    hand: Text
    pays: list[Odds] = Field(description="one per column, in the order of columns")


class CoverAllPayoutsBody(PayloadModel):
    """``cover_all/payouts`` (retained): the pay table for this round's number of hands."""

    table: TableId
    round_id: RoundId
    game: PokerGame
    hands: Annotated[int, Field(ge=1, le=9)]
    paytable: list[PayRowModel] = Field(description="highest first")


class HighestModel(PayloadModel):
    """The highest qualifying hand: its name, position and (face-up) cards."""

    hand: Text
    position: HandPosition
    cards: list[CardCode]
    # Added (issue 22; mqtt-api.md allows new fields): the hand as a player reads it, so a
    # screen marks the cards that make it and sets the board apart without knowing a rule.
    best: list[CardCode] | None = Field(
        default=None,
        description="the cards among cards that make the hand (five; FCP four, TCP three), "
        "in the order of cards",
    )
    board: list[CardCode] = Field(
        default_factory=list,
        description="the community cards among cards (UTH 5, MSP 3, LIR 2; empty in the "
        "other games): the others are the position's own",
    )


class CoverAllResultBody(PayloadModel):
    """``cover_all/result`` (retained): the round's outcome; a flagged round has no cards."""

    table: TableId
    round_id: RoundId
    game: PokerGame
    hands: Annotated[int, Field(ge=1, le=9)] | None
    outcome: Literal["win", "no_qualifier", "void", "flagged"]
    highest: HighestModel | None
    pays: Odds | None
    reason: Text | None = Field(description="for flagged: why the round pays nothing automatically")

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
    hit: list[Total] = Field(description="its numbers rolled this series, sorted")
    remaining: list[Total] = Field(description="its numbers still needed, sorted")
    complete: bool
    # Added (mqtt-api.md allows new fields): the exact chance, from this board, that the bet
    # completes before a seven, as a fraction in lowest terms ("5/11"); null once complete.
    chance: str | None = Field(
        default=None,
        pattern=r"^[1-9][0-9]*/[1-9][0-9]*$",
        description="exact chance to complete before a seven, 'n/d'; null once complete",
    )


class PendingRollModel(PayloadModel):
    """A ``CHECK`` roll waiting for the stickperson."""

    roll_id: RollId
    dice: Annotated[list[Die], Field(min_length=2, max_length=2)]
    reason: Text


class LastRollModel(PayloadModel):
    """The latest roll event on the board (added): as ``craps/roll`` reported it."""

    roll_id: RollId
    dice: Annotated[list[Die], Field(min_length=2, max_length=2)]
    total: Total | None = Field(description="null when a die is unknown or for a no roll")
    status: Literal["counted", "noroll", "pending", "declared_invalid"]


class CrapsBoardBody(PayloadModel):
    """``craps/board`` (retained): the lammers, the three bets and a pending roll."""

    table: TableId
    paytable: Literal[1, 2]
    betting_open: bool
    numbers_hit: list[Total] = Field(description="totals rolled this series, sorted")
    all_small: BetProgressModel
    all_tall: BetProgressModel
    make_em_all: BetProgressModel
    pending_roll: PendingRollModel | None
    # Added: craps/roll is not retained, so a screen that connects later learns the last
    # roll here (the board changes with every roll event).
    last_roll: LastRollModel | None = Field(description="the latest roll event; null before")
    # Added (issue 22): the queue behind a pending CHECK, for the stickperson.
    waiting_count: Annotated[int, Field(ge=0)] = Field(
        default=0, description="how many rolls wait behind the pending roll"
    )
    waiting: Annotated[list[RollId], Field(max_length=20)] = Field(
        default_factory=list,
        description="the roll ids waiting behind the pending roll, in order (the first 20)",
    )


class CrapsRollBody(PayloadModel):
    """``craps/roll`` (not retained): every roll event and every decision on a roll."""

    table: TableId
    roll_id: RollId
    dice: Annotated[list[Die], Field(min_length=2, max_length=2)]
    total: Total | None = Field(description="null when a die is unknown")
    status: Literal["counted", "noroll", "pending", "declared_invalid", "reinstated"]
    reason: Text | None


class CrapsResultBody(PayloadModel):
    """``craps/result`` (not retained): a side bet settled."""

    table: TableId
    roll_id: RollId
    bet: CrapsBet
    outcome: Literal["win", "lose"]
    pays: Odds | None = Field(description="for win; null for lose")

    @model_validator(mode="after")
    def _consistent(self) -> CrapsResultBody:
        if (self.outcome == "win") != (self.pays is not None):
            raise ValueError("pays is given for a win, and only for it")
        return self


class CrapsReversalBody(PayloadModel):
    """``craps/reversal`` (not retained; added to the spec): a settlement taken back because
    the roll that settled it was declared invalid; the bet is live again."""

    table: TableId
    roll_id: RollId
    bet: CrapsBet
    outcome: Literal["win", "lose"] = Field(description="the settlement being taken back")


class BustBonusStateBody(PayloadModel):
    """``bust_bonus/state`` (retained): the round, betting, and the face-up dealer cards."""

    table: TableId
    round_id: RoundId | None
    betting_open: bool
    up_card: CardCode | None
    dealer_cards: list[CardCode] = Field(description="face-up cards only (shuffler-icd.md)")
    # Added: the pay-table row of the up card, so a screen highlights it without mapping
    # cards to rows itself.
    paytable_row: Text | None = Field(description="the up card's pay-table row; null before it")


class BustBonusResultBody(PayloadModel):
    """``bust_bonus/result`` (retained): the round's outcome (``void`` and ``reason`` added)."""

    table: TableId
    round_id: RoundId
    outcome: Literal["win", "lose", "flagged", "void"]
    up_card: CardCode | None
    dealer_cards: list[CardCode]
    total: Annotated[int, Field(ge=2)] | None
    suited: bool
    three_eights: bool
    pays: Odds | None = Field(description="for win; null otherwise")
    reason: Text | None = Field(default=None, description="for flagged: why it was not settled")
    # Added: the pay-table cell that applies, so a screen highlights it without mapping cards
    # to rows itself.
    paytable_row: Text | None = Field(
        description="the pay-table row of this hand (three 8s, else the up card's); "
        "null for void and flagged",
    )
    column: Literal["suited", "off_suit"] | None = Field(
        description="the pay-table column that paid; null unless win"
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
    columns: list[Annotated[int, Field(ge=1, le=9)]] = Field(
        description="total hands of each column, as printed (most hands first)"
    )
    rows: list[CoverAllRowModel] = Field(description="highest hand first")


class BonusCrapsPaytableModel(PayloadModel):
    """The Bonus Craps pay table in use (1 or 2) and each bet's odds."""

    paytable: Literal[1, 2]
    pays: dict[CrapsBet, Odds]


class BustRowModel(PayloadModel):
    """One row of the Bust Bonus pay table (SDAR 20:18:15:30.16(12))."""

    row: Text = Field(description="Ace, 2..9, 10, or Bust with three 8s")
    off_suit: Odds
    suited: Odds


class BustBonusPaytableModel(PayloadModel):
    """The Bust Bonus pay table and the shoe's rules the table runs."""

    decks: Annotated[int, Field(ge=1, le=8)]
    dealer_hits_soft_17: bool
    rows: list[BustRowModel]


class PaytablesModel(PayloadModel):
    """The pay tables in use at this table; null for the games it does not play."""

    cover_all: CoverAllPaytableModel | None
    bonus_craps: BonusCrapsPaytableModel | None
    bust_bonus: BustBonusPaytableModel | None


class InfoBody(PayloadModel):
    """``info`` (retained; added topic): what this table runs, for screens and the pit.

    Like zigbee2mqtt's ``bridge/info``: the lammer version, the contract version its
    payloads follow, the game and the whole pay tables in use (a player display shows every
    column). Nothing secret.
    """

    table: TableId
    version: Text = Field(description="the lammer version publishing")
    contract: Text = Field(description="the version of the MQTT contract (docs/mqtt.md)")
    game: TableGame
    paytables: PaytablesModel


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
TOPICS: Final[dict[str, tuple[type[PayloadModel], bool]]] = {
    "state": (StateMessage, True),
    "alarms": (AlarmsMessage, True),
    "cover_all/payouts": (CoverAllPayoutsMessage, True),
    "cover_all/result": (CoverAllResultMessage, True),
    "craps/board": (CrapsBoardMessage, True),
    "craps/roll": (CrapsRollMessage, False),
    "craps/result": (CrapsResultMessage, False),
    "craps/reversal": (CrapsReversalMessage, False),
    "bust_bonus/state": (BustBonusStateMessage, True),
    "bust_bonus/result": (BustBonusResultMessage, True),
    "info": (InfoMessage, True),
}
"""Every topic the daemon publishes from the table's state and the rules' outcomes, with
its model and whether it is retained (``response/<name>`` is ``daemon.requests``')."""


class Publication(NamedTuple):
    """A message to queue (``Journal.append_publish``): the topic relative to the base
    topic, whether it is retained, and the JSON body with ``table`` (``seq`` and ``ts`` are
    the journal's)."""

    topic: str
    retained: bool
    body: dict[str, Any]


CONTRACT_VERSION: Final = "1.2"
"""The MQTT contract the payloads follow: mqtt-api.md version 1 with its 1.1 additions and
lammer's own (``info``, ``stops_payouts``, ``paytable_row``, ``column``,
``craps/board`` ``last_roll``; docs/mqtt.md)."""
