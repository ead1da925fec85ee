"""The JSON payloads of mqtt-api.md, version 1: one pydantic model per published topic.

The contract is ``shared/spec/mqtt-api.md``; field names and meanings here are the spec's
and must not change without a new version of it ("add topics and fields freely, but never
rename, remove or change the meaning of one listed here").

Two layers per topic:

* a ``...Body`` model: ``table`` and the topic's own fields. The builders below turn the
  rules' outcomes (``rules.events``) and the daemon's plain state values into bodies,
  validated by these models, as ``Publication(topic, retained, body)``;
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

Shapes the spec leaves open, decided here: every listed key is always present, ``null``
where it does not apply (``pays`` of a lost bet, ``error`` of an ok response, ``reason``
of a result that is not flagged, ``highest`` of a result that is not a win, ``hands`` of
a round flagged before ``ROUND``, ``round_id``/``up_card`` of ``bust_bonus/state`` before
the first round); ``mode`` appears for the shuffler only and is ``null`` until it reports
one; ``pending_roll`` is ``{roll_id, dice, reason}``; ``alarms[].since`` is written like
``ts``; ``dice`` are ``[d1, d2]`` with 0 for a die the reader could not read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Final, Literal, NamedTuple, Protocol, assert_never

from pydantic import BaseModel, ConfigDict, Field, model_validator

from daemon.journal import format_ts  # the one writer of mqtt-api.md times
from rules.bust_bonus import PAYTABLE as BUST_PAYTABLE
from rules.cards import parse_card
from rules.craps import paytable_odds
from rules.craps_odds import live_probability
from rules.errors import CardError
from rules.events import (
    AlarmCleared,
    AlarmRaised,
    BustBonusResult,
    CoverAllPayouts,
    CoverAllResult,
    CrapsBet,
    CrapsBetReversed,
    CrapsBetSettled,
    Device,
    Outcome,
    RollRecorded,
)
from rules.paytables import paytable as cover_all_table
from rules.poker import POKER_GAMES
from rules.table import PAYOUT_ALARMS

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


class _Model(BaseModel):
    # forbid: a builder that writes a field the spec does not have is a bug caught here.
    # schemas() drops the additionalProperties it produces, since the spec lets us add.
    # strict: JSON true is not the seq 1, and 34.0 is not the odds "34".
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Envelope(_Model):
    """``seq`` and ``ts``, which every JSON payload has (mqtt-api.md, Conventions)."""

    seq: Seq
    ts: Timestamp


class DeviceState(_Model):
    """One device in ``state``: ``connected``, ``status``, and ``mode`` for the shuffler."""

    connected: bool
    status: Text = Field(description="the device's last STATUS code (READY, JAM, ...)")
    mode: CardGame | None = Field(
        default=None, description="shuffler only: the game it reported in MODE (null until then)"
    )


class Alarm(_Model):
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


class StateBody(_Model):
    """``state`` (retained): the game, the devices and the active alarms."""

    table: TableId
    game: TableGame
    devices: dict[DeviceName, DeviceState]
    alarms: list[Alarm]


class AlarmsBody(_Model):
    """``alarms`` (retained): every active alarm, empty when none."""

    table: TableId
    alarms: list[Alarm]


class PayRowModel(_Model):
    """One pay-table row: hand name as the seed writes it, odds "to 1"."""

    hand: Text
    pays: Odds


class CoverAllRowModel(_Model):
    """One row of a whole Cover All Bonus pay table: its odds per column."""

    hand: Text
    pays: list[Odds] = Field(description="one per column, in the order of columns")


class CoverAllPayoutsBody(_Model):
    """``cover_all/payouts`` (retained): the pay table for this round's number of hands."""

    table: TableId
    round_id: RoundId
    game: PokerGame
    hands: Annotated[int, Field(ge=1, le=9)]
    paytable: list[PayRowModel] = Field(description="highest first")


class HighestModel(_Model):
    """The highest qualifying hand: its name, position and (face-up) cards."""

    hand: Text
    position: HandPosition
    cards: list[CardCode]


class CoverAllResultBody(_Model):
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


class BetProgressModel(_Model):
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


class PendingRollModel(_Model):
    """A ``CHECK`` roll waiting for the stickperson."""

    roll_id: RollId
    dice: Annotated[list[Die], Field(min_length=2, max_length=2)]
    reason: Text


class CrapsBoardBody(_Model):
    """``craps/board`` (retained): the lammers, the three bets and a pending roll."""

    table: TableId
    paytable: Literal[1, 2]
    betting_open: bool
    numbers_hit: list[Total] = Field(description="totals rolled this series, sorted")
    all_small: BetProgressModel
    all_tall: BetProgressModel
    make_em_all: BetProgressModel
    pending_roll: PendingRollModel | None


class CrapsRollBody(_Model):
    """``craps/roll`` (not retained): every roll event and every decision on a roll."""

    table: TableId
    roll_id: RollId
    dice: Annotated[list[Die], Field(min_length=2, max_length=2)]
    total: Total | None = Field(description="null when a die is unknown")
    status: Literal["counted", "noroll", "pending", "declared_invalid", "reinstated"]
    reason: Text | None


class CrapsResultBody(_Model):
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


class CrapsReversalBody(_Model):
    """``craps/reversal`` (not retained; added to the spec): a settlement taken back because
    the roll that settled it was declared invalid; the bet is live again."""

    table: TableId
    roll_id: RollId
    bet: CrapsBet
    outcome: Literal["win", "lose"] = Field(description="the settlement being taken back")


class BustBonusStateBody(_Model):
    """``bust_bonus/state`` (retained): the round, betting, and the face-up dealer cards."""

    table: TableId
    round_id: RoundId | None
    betting_open: bool
    up_card: CardCode | None
    dealer_cards: list[CardCode] = Field(description="face-up cards only (shuffler-icd.md)")
    # Added: the pay-table row of the up card, so a screen highlights it without mapping
    # cards to rows itself.
    paytable_row: Text | None = Field(description="the up card's pay-table row; null before it")


class BustBonusResultBody(_Model):
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


class CoverAllPaytableModel(_Model):
    """A whole Cover All Bonus pay table, every column, as the regulation prints it."""

    game: PokerGame
    title: Text
    columns: list[Annotated[int, Field(ge=1, le=9)]] = Field(
        description="total hands of each column, as printed (most hands first)"
    )
    rows: list[CoverAllRowModel] = Field(description="highest hand first")


class BonusCrapsPaytableModel(_Model):
    """The Bonus Craps pay table in use (1 or 2) and each bet's odds."""

    paytable: Literal[1, 2]
    pays: dict[CrapsBet, Odds]


class BustRowModel(_Model):
    """One row of the Bust Bonus pay table (SDAR 20:18:15:30.16(12))."""

    row: Text = Field(description="Ace, 2..9, 10, or Bust with three 8s")
    off_suit: Odds
    suited: Odds


class BustBonusPaytableModel(_Model):
    """The Bust Bonus pay table and the shoe's rules the table runs."""

    decks: Annotated[int, Field(ge=1, le=8)]
    dealer_hits_soft_17: bool
    rows: list[BustRowModel]


class PaytablesModel(_Model):
    """The pay tables in use at this table; null for the games it does not play."""

    cover_all: CoverAllPaytableModel | None
    bonus_craps: BonusCrapsPaytableModel | None
    bust_bonus: BustBonusPaytableModel | None


class InfoBody(_Model):
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


class ResponseBody(_Model):
    """``response/<name>`` (not retained): the answer to a request."""

    table: TableId
    request_id: str | int | None = Field(description="the request's own, echoed; null if none")
    status: Literal["ok", "error"]
    error: Text | None = Field(description="for error: a sentence a person understands")

    @model_validator(mode="after")
    def _consistent(self) -> ResponseBody:
        if (self.status == "error") != (self.error is not None):
            raise ValueError("an error response says why, and an ok response has no error")
        return self


class StateMessage(StateBody, _Envelope):
    """``state`` as published."""


class AlarmsMessage(AlarmsBody, _Envelope):
    """``alarms`` as published."""


class CoverAllPayoutsMessage(CoverAllPayoutsBody, _Envelope):
    """``cover_all/payouts`` as published."""


class CoverAllResultMessage(CoverAllResultBody, _Envelope):
    """``cover_all/result`` as published."""


class CrapsBoardMessage(CrapsBoardBody, _Envelope):
    """``craps/board`` as published."""


class CrapsRollMessage(CrapsRollBody, _Envelope):
    """``craps/roll`` as published."""


class CrapsResultMessage(CrapsResultBody, _Envelope):
    """``craps/result`` as published."""


class CrapsReversalMessage(CrapsReversalBody, _Envelope):
    """``craps/reversal`` as published (added topic)."""


class BustBonusStateMessage(BustBonusStateBody, _Envelope):
    """``bust_bonus/state`` as published."""


class BustBonusResultMessage(BustBonusResultBody, _Envelope):
    """``bust_bonus/result`` as published."""


class ResponseMessage(ResponseBody, _Envelope):
    """``response/<name>`` as published."""


class InfoMessage(InfoBody, _Envelope):
    """``info`` as published (added topic)."""


REQUEST_NAMES: Final = ("roll_decision", "void_roll", "overturn")

# topic (relative to the base topic) -> (model of the published message, retained)
TOPICS: Final[dict[str, tuple[type[_Model], bool]]] = {
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
    **{f"response/{name}": (ResponseMessage, False) for name in REQUEST_NAMES},
}
"""Every JSON topic the daemon publishes, with its model and whether it is retained."""


def model_for(topic: str) -> tuple[type[_Model], bool]:
    """The message model and the retained flag of a topic relative to the base topic.

    ``response/<name>`` for any name (an unknown request name is answered there too).
    Raises ``KeyError`` naming the topic when it is not one the daemon publishes.
    """
    if topic.startswith("response/") and topic.count("/") == 1 and len(topic) > 9:
        return ResponseMessage, False
    try:
        return TOPICS[topic]
    except KeyError:
        raise KeyError(f"not a topic of mqtt-api.md: {topic!r}") from None


def parse_message(topic: str, payload: bytes) -> _Model:
    """Validate a published payload against its topic's model (for tests and tools).

    Raises ``KeyError`` for an unknown topic, ``pydantic.ValidationError`` for a bad payload.
    """
    model, _ = model_for(topic)
    return model.model_validate_json(payload)


# ---------------------------------------------------------------------------------------
# Builders: outcomes and state values -> (topic, retained, body without seq/ts)
#
# Every builder takes ``table``: given, the body holds it; None (the default), the body
# leaves it out for the caller to add (the daemon adds it to every body it queues). The
# body is validated by its topic's model either way.

_NO_TABLE: Final = "-"


class Publication(NamedTuple):
    """What to hand to ``Journal.append_publish``: the topic relative to the base topic,
    whether it is retained, and the JSON body (``seq`` and ``ts`` are the journal's)."""

    topic: str
    retained: bool
    body: dict[str, Any]


def _publication(topic: str, body: _Model, table: str | None) -> Publication:
    _, retained = model_for(topic)
    dumped = body.model_dump(mode="json")
    if table is None:
        del dumped["table"]
    return Publication(topic, retained, dumped)


def _odds_or_none(value: Decimal | None) -> str | None:
    return None if value is None else format_odds(value)


def build_outcome(outcome: Outcome, *, table: str | None = None) -> Publication | None:
    """The publication for one rules outcome, or ``None`` for the alarm outcomes.

    Alarms are not published one by one: ``AlarmRaised``/``AlarmCleared`` change the
    active set, and the whole set goes out on ``alarms`` and ``state`` (``build_alarms``,
    ``build_state``).
    """
    match outcome:
        case CoverAllPayouts():
            return build_cover_all_payouts(outcome, table=table)
        case CoverAllResult():
            return build_cover_all_result(outcome, table=table)
        case RollRecorded():
            return build_craps_roll(outcome, table=table)
        case CrapsBetSettled():
            return build_craps_result(outcome, table=table)
        case CrapsBetReversed():
            return build_craps_reversal(outcome, table=table)
        case BustBonusResult():
            return build_bust_bonus_result(outcome, table=table)
        case AlarmRaised() | AlarmCleared():
            return None
        case _:
            assert_never(outcome)


def outcome_message(outcome: Outcome) -> Publication:
    """``(topic, retained, body)`` of an outcome, the body without ``table``, ``seq``, ``ts``.

    Raises ``ValueError`` for ``AlarmRaised``/``AlarmCleared``: they are published as the
    whole active set (``alarms_body``, ``state_body``).
    """
    publication = build_outcome(outcome)
    if publication is None:
        raise ValueError(f"{type(outcome).__name__} is published on alarms and state")
    return publication


def build_cover_all_payouts(outcome: CoverAllPayouts, *, table: str | None = None) -> Publication:
    """``cover_all/payouts`` at ``ROUND``: the pay table for that many hands, highest first."""
    body = CoverAllPayoutsBody(
        table=table or _NO_TABLE,
        round_id=outcome.round_id,
        game=outcome.game,  # type: ignore[arg-type]  # validated: never BJ
        hands=outcome.hands,
        paytable=[PayRowModel(hand=r.hand, pays=format_odds(r.pays)) for r in outcome.paytable],
    )
    return _publication("cover_all/payouts", body, table)


def build_cover_all_result(outcome: CoverAllResult, *, table: str | None = None) -> Publication:
    """``cover_all/result`` at ``SETTLE``/``VOID``, or a flagged round (no cards: the model
    refuses a flagged result with a highest hand, shuffler-icd.md "Card data is secret")."""
    highest = outcome.highest
    body = CoverAllResultBody(
        table=table or _NO_TABLE,
        round_id=outcome.round_id,
        game=outcome.game,  # type: ignore[arg-type]  # validated: never BJ
        hands=outcome.hands,
        outcome=outcome.outcome,
        highest=None
        if highest is None
        else HighestModel(
            hand=highest.hand,
            position=highest.position,  # type: ignore[arg-type]  # CM is never a hand
            cards=list(highest.cards),
        ),
        pays=_odds_or_none(outcome.pays),
        reason=outcome.reason,
    )
    return _publication("cover_all/result", body, table)


def build_craps_roll(outcome: RollRecorded, *, table: str | None = None) -> Publication:
    """``craps/roll`` for every roll event and every decision on a roll."""
    body = CrapsRollBody(
        table=table or _NO_TABLE,
        roll_id=outcome.roll_id,
        dice=list(outcome.dice),
        total=outcome.total,
        status=outcome.status,
        reason=outcome.reason,
    )
    return _publication("craps/roll", body, table)


def build_craps_result(outcome: CrapsBetSettled, *, table: str | None = None) -> Publication:
    """``craps/result`` when a side bet settles (``pays`` for a win, null for a loss)."""
    body = CrapsResultBody(
        table=table or _NO_TABLE,
        roll_id=outcome.roll_id,
        bet=outcome.bet,
        outcome=outcome.outcome,
        pays=_odds_or_none(outcome.pays),
    )
    return _publication("craps/result", body, table)


def build_craps_reversal(outcome: CrapsBetReversed, *, table: str | None = None) -> Publication:
    """``craps/reversal`` (added topic): a settlement taken back by a void."""
    body = CrapsReversalBody(
        table=table or _NO_TABLE, roll_id=outcome.roll_id, bet=outcome.bet, outcome=outcome.outcome
    )
    return _publication("craps/reversal", body, table)


def build_bust_bonus_result(outcome: BustBonusResult, *, table: str | None = None) -> Publication:
    """``bust_bonus/result`` at ``END`` or ``VOID`` (or a flagged round, with its reason)."""
    body = BustBonusResultBody(
        table=table or _NO_TABLE,
        round_id=outcome.round_id,
        outcome=outcome.outcome,
        up_card=outcome.up_card,
        dealer_cards=list(outcome.dealer_cards),
        total=outcome.total,
        suited=outcome.suited,
        three_eights=outcome.three_eights,
        pays=_odds_or_none(outcome.pays),
        reason=outcome.reason,
        paytable_row=_bust_result_row(outcome),
        column=None if outcome.outcome != "win" else "suited" if outcome.suited else "off_suit",
    )
    return _publication("bust_bonus/result", body, table)


def _up_card_row(up_card: str | None) -> str | None:
    if up_card is None:
        return None
    try:
        card = parse_card(up_card)
    except CardError:
        return None  # not a card: the round is flagged, and the model refuses the code
    return BUST_PAYTABLE.up_card_row(card).row


def _bust_result_row(outcome: BustBonusResult) -> str | None:
    """The pay-table row of a settled hand: three 8s (a busted hand of exactly three
    eights, rule (12)), else the up card's; null for a void or flagged round."""
    if outcome.outcome in ("void", "flagged"):
        return None
    if outcome.three_eights:
        return BUST_PAYTABLE.three_eights.row
    return _up_card_row(outcome.up_card)


# State topics, from plain values or the rules' views (any object with the attributes)


class DeviceLike(Protocol):
    """One device as ``state`` shows it (``rules.table.DeviceState`` fits)."""

    @property
    def connected(self) -> bool: ...
    @property
    def status(self) -> str: ...
    @property
    def mode(self) -> str | None: ...


class AlarmLike(Protocol):
    """An active alarm (``rules.table.Alarm`` fits): ``since`` is when it was raised."""

    @property
    def code(self) -> str: ...
    @property
    def device(self) -> str | None: ...
    @property
    def message(self) -> str: ...
    @property
    def since(self) -> datetime: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceView:
    """A plain ``DeviceLike``. ``mode`` is published for the shuffler only."""

    connected: bool
    status: str
    mode: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlarmView:
    """A plain ``AlarmLike``."""

    code: str
    device: Device | None
    message: str
    since: datetime


DeviceInput = DeviceLike | Mapping[str, Any]
AlarmInput = AlarmLike | Mapping[str, Any]


def _field(item: Any, name: str, default: Any = None) -> Any:
    if isinstance(item, Mapping):
        return item.get(name, default)
    return getattr(item, name, default)


def _alarm_models(alarms: Iterable[AlarmInput]) -> list[Alarm]:
    models = []
    for a in alarms:
        since = _field(a, "since")
        code = _field(a, "code")
        models.append(
            Alarm(
                code=code,
                device=_field(a, "device"),
                message=_field(a, "message"),
                since=format_ts(since) if isinstance(since, datetime) else since,
                stops_payouts=code in PAYOUT_ALARMS,
            )
        )
    return models


def build_state(
    *,
    game: str,
    devices: Mapping[str, DeviceInput],
    alarms: Iterable[AlarmInput],
    table: str | None = None,
) -> Publication:
    """``state``: the table's game (``CRAPS`` included), each device (``connected``,
    ``status``, and ``mode`` for the shuffler only, as the spec lists it), the active alarms
    (``since`` a datetime, formatted as ``ts`` is)."""
    body = StateBody(
        table=table or _NO_TABLE,
        game=game,  # type: ignore[arg-type]  # validated
        devices={
            name: DeviceState(  # type: ignore[misc]  # names validated: shuffler, dice_reader
                connected=_field(view, "connected"),
                status=_field(view, "status"),
                mode=_field(view, "mode") if name == "shuffler" else None,
            )
            for name, view in devices.items()
        },
        alarms=_alarm_models(alarms),
    )
    publication = _publication("state", body, table)
    for name, device in publication.body["devices"].items():
        if name != "shuffler":
            del device["mode"]  # the spec lists mode "for the shuffler"
    return publication


def build_alarms(*, alarms: Iterable[AlarmInput], table: str | None = None) -> Publication:
    """``alarms``: every active alarm, oldest first; an empty list when none."""
    body = AlarmsBody(table=table or _NO_TABLE, alarms=_alarm_models(alarms))
    return _publication("alarms", body, table)


def state_body(
    *, game: str, devices: Mapping[str, DeviceInput], alarms: Iterable[AlarmInput]
) -> dict[str, Any]:
    """The body of ``state`` without ``table``, ``seq``, ``ts`` (see ``build_state``)."""
    return build_state(game=game, devices=devices, alarms=alarms).body


def alarms_body(alarms: Iterable[AlarmInput]) -> dict[str, Any]:
    """The body of ``alarms`` without ``table``, ``seq``, ``ts`` (see ``build_alarms``)."""
    return build_alarms(alarms=alarms).body


class BetProgress(Protocol):
    """One bet on the board (``rules.craps.BetBoard`` fits)."""

    @property
    def pays(self) -> Decimal: ...
    @property
    def hit(self) -> Sequence[int]: ...
    @property
    def remaining(self) -> Sequence[int]: ...
    @property
    def complete(self) -> bool: ...


class PendingRollLike(Protocol):
    """A pending ``CHECK`` roll (``rules.craps.PendingRoll`` fits)."""

    @property
    def roll_id(self) -> int: ...
    @property
    def dice(self) -> Sequence[int]: ...
    @property
    def reason(self) -> str: ...


class CrapsBoardLike(Protocol):
    """What ``craps/board`` shows (``rules.craps.CrapsBoard`` fits)."""

    @property
    def paytable(self) -> int: ...
    @property
    def betting_open(self) -> bool: ...
    @property
    def numbers_hit(self) -> Sequence[int]: ...
    @property
    def all_small(self) -> BetProgress: ...
    @property
    def all_tall(self) -> BetProgress: ...
    @property
    def make_em_all(self) -> BetProgress: ...
    @property
    def pending_roll(self) -> PendingRollLike | None: ...


class BustBonusViewLike(Protocol):
    """What ``bust_bonus/state`` shows (``rules.bust_bonus.BustBonusView`` fits)."""

    @property
    def round_id(self) -> int | None: ...
    @property
    def betting_open(self) -> bool: ...
    @property
    def up_card(self) -> str | None: ...
    @property
    def dealer_cards(self) -> Sequence[str]: ...


def _bet(bet: CrapsBet, progress: BetProgress) -> BetProgressModel:
    chance = None if progress.complete else live_probability(bet, progress.hit)
    return BetProgressModel(
        pays=format_odds(progress.pays),
        hit=sorted(progress.hit),
        remaining=sorted(progress.remaining),
        complete=progress.complete,
        chance=None if chance is None else f"{chance.numerator}/{chance.denominator}",
    )


def build_craps_board(board: CrapsBoardLike, *, table: str | None = None) -> Publication:
    """``craps/board``: pay table, betting, the lammers (sorted), each bet, a pending roll."""
    pending = board.pending_roll
    body = CrapsBoardBody(
        table=table or _NO_TABLE,
        paytable=board.paytable,  # type: ignore[arg-type]  # validated: 1 or 2
        betting_open=board.betting_open,
        numbers_hit=sorted(board.numbers_hit),
        all_small=_bet("all_small", board.all_small),
        all_tall=_bet("all_tall", board.all_tall),
        make_em_all=_bet("make_em_all", board.make_em_all),
        pending_roll=None
        if pending is None
        else PendingRollModel(
            roll_id=pending.roll_id, dice=list(pending.dice), reason=pending.reason
        ),
    )
    return _publication("craps/board", body, table)


def craps_board_body(board: CrapsBoardLike) -> dict[str, Any]:
    """The body of ``craps/board`` without ``table``, ``seq``, ``ts``."""
    return build_craps_board(board).body


def build_bust_bonus_state(view: BustBonusViewLike, *, table: str | None = None) -> Publication:
    """``bust_bonus/state``: ``dealer_cards`` must hold the face-up cards only (before
    ``END`` just the up card; shuffler-icd.md "Card data is secret until it is face up")."""
    body = BustBonusStateBody(
        table=table or _NO_TABLE,
        round_id=view.round_id,
        betting_open=view.betting_open,
        up_card=view.up_card,
        dealer_cards=list(view.dealer_cards),
        paytable_row=_up_card_row(view.up_card),
    )
    return _publication("bust_bonus/state", body, table)


def bust_bonus_state_body(view: BustBonusViewLike) -> dict[str, Any]:
    """The body of ``bust_bonus/state`` without ``table``, ``seq``, ``ts``."""
    return build_bust_bonus_state(view).body


def build_response(
    name: str, *, request_id: str | int | None, error: str | None, table: str | None = None
) -> Publication:
    """``response/<name>``: ``status`` ok when ``error`` is None, else error with the sentence."""
    body = ResponseBody(
        table=table or _NO_TABLE,
        request_id=request_id,
        status="ok" if error is None else "error",
        error=error,
    )
    dumped = body.model_dump(mode="json")
    if table is None:
        del dumped["table"]
    return Publication(f"response/{name}", False, dumped)


CONTRACT_VERSION: Final = "1.2"
"""The MQTT contract the payloads follow: mqtt-api.md version 1 with its 1.1 additions and
lammer's own (``info``, ``stops_payouts``, ``paytable_row``, ``column``), docs/mqtt.md."""


def build_info(
    *,
    version: str,
    game: str,
    craps_paytable: int,
    decks: int,
    dealer_hits_soft_17: bool,
    table: str | None = None,
) -> Publication:
    """``info`` (added topic): the version, the game and the pay tables in use."""
    cover_all = None
    if game in POKER_GAMES:
        pt = cover_all_table(game)
        cover_all = CoverAllPaytableModel(
            game=pt.game,
            title=pt.title,
            columns=list(pt.columns),
            rows=[
                CoverAllRowModel(hand=hand, pays=[format_odds(p) for p in pays])
                for hand, pays in zip(pt.rows, pt.pays, strict=True)
            ],
        )
    craps = None
    if game == "CRAPS":
        odds = paytable_odds(craps_paytable)
        craps = BonusCrapsPaytableModel(
            paytable=craps_paytable,  # type: ignore[arg-type]  # paytable_odds checked it
            pays={bet: format_odds(odds[bet]) for bet in odds},
        )
    bust = None
    if game == "BJ":
        bust = BustBonusPaytableModel(
            decks=decks,
            dealer_hits_soft_17=dealer_hits_soft_17,
            rows=[
                BustRowModel(
                    row=r.row, off_suit=format_odds(r.off_suit), suited=format_odds(r.suited)
                )
                for r in BUST_PAYTABLE.rows
            ],
        )
    body = InfoBody(
        table=table or _NO_TABLE,
        version=version,
        contract=CONTRACT_VERSION,
        game=game,  # type: ignore[arg-type]  # validated
        paytables=PaytablesModel(cover_all=cover_all, bonus_craps=craps, bust_bonus=bust),
    )
    return _publication("info", body, table)


# ---------------------------------------------------------------------------------------
# JSON Schema for the display teams


def _open_for_additions(node: Any) -> Any:
    # The spec lets the daemon add fields ("add topics and fields freely"), so a display
    # must not reject a payload for an unknown key: drop additionalProperties: false.
    if isinstance(node, dict):
        return {
            k: _open_for_additions(v)
            for k, v in node.items()
            if not (k == "additionalProperties" and v is False)
        }
    if isinstance(node, list):
        return [_open_for_additions(v) for v in node]
    return node


def schemas() -> dict[str, dict[str, Any]]:
    """JSON Schema (draft 2020-12) of every payload, keyed by topic relative to the base
    topic: the published topics (``availability`` included, plain text), and the requests
    (``request/<name>``). Plain JSON, needing nothing of lammer to use."""
    from daemon.requests import REQUEST_MODELS  # requests imports this module

    result: dict[str, dict[str, Any]] = {
        "availability": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "availability",
            "description": "plain text, not JSON: online, or offline (also the will message)",
            "type": "string",
            "enum": ["online", "offline"],
        }
    }
    for topic, (model, retained) in TOPICS.items():
        schema = _open_for_additions(model.model_json_schema(mode="serialization"))
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["title"] = topic
        schema["description"] = f"mqtt-api.md topic <base>/{topic}" + (
            " (retained)" if retained else ""
        )
        schema["x-retained"] = retained
        result[topic] = schema
    for name, request_model in REQUEST_MODELS.items():
        schema = request_model.model_json_schema(mode="validation")
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["title"] = f"request/{name}"
        schema["description"] = f"mqtt-api.md request <base>/request/{name}"
        result[f"request/{name}"] = schema
    return result
