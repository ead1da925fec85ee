"""What ``lammer web`` accepts from the broker: the payloads of the MQTT contract, checked.

The server relays to the browsers only what validates here; anything else is dropped and
counted (``Store.dropped``). The models follow ``docs/mqtt.md`` (mqtt-api.md version 1 with
its additions: ``info``, ``stops_payouts``, ``paytable_row``, ``column``). Unknown keys are
allowed, since the contract lets the daemon add fields, but every string and list is
bounded, and cards, odds and times must have their contract's form: a hostile client that
could publish under a base topic gets nothing odd onto a screen.

A display relays the payload it received (not a re-serialised model), so a field the
daemon adds later reaches the pages unchanged.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

MAX_PAYLOAD: Final = 64 * 1024
"""Bytes; the largest payload the contract produces (``info``) is a few KiB."""

TS_PATTERN: Final = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
ODDS_PATTERN: Final = r"^(0|[1-9][0-9]{0,8})(\.[0-9]{0,6}[1-9])?$"
CARD_PATTERN: Final = r"^[2-9TJQKA][cdhs]$"
TABLE_ID_PATTERN: Final = r"^[A-Za-z0-9_-]{1,64}$"
"""Table ids the web pages serve: one topic level without ``.`` or spaces (mqtt-api.md
"Conventions"), restricted to letters, digits, ``_`` and ``-`` so a URL needs no escaping."""

Short = Annotated[str, Field(min_length=1, max_length=200)]
Message = Annotated[str, Field(min_length=1, max_length=500)]
Timestamp = Annotated[str, Field(pattern=TS_PATTERN)]
Odds = Annotated[str, Field(pattern=ODDS_PATTERN)]
Card = Annotated[str, Field(pattern=CARD_PATTERN)]
Seq = Annotated[StrictInt, Field(ge=1, le=2**53 - 1)]  # exact in a browser's Number
Id = Annotated[StrictInt, Field(ge=1, le=999999)]
Die = Annotated[StrictInt, Field(ge=0, le=6)]
Total = Annotated[StrictInt, Field(ge=2, le=12)]
Cards = Annotated[list[Card], Field(max_length=32)]
Totals = Annotated[list[Total], Field(max_length=11)]
Bet = Literal["all_small", "all_tall", "make_em_all"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)


class Envelope(_Model):
    """What every JSON payload holds (mqtt-api.md "Conventions")."""

    table: Annotated[str, Field(pattern=TABLE_ID_PATTERN)]
    seq: Seq
    ts: Timestamp


class Alarm(_Model):
    """An active alarm; ``stops_payouts`` (contract 1.2) says no payout is published."""

    code: Short
    device: Short | None = None
    message: Message
    since: Timestamp
    stops_payouts: StrictBool = False
    acknowledged_by: Short | None = None
    acknowledged_at: Timestamp | None = None


class Device(_Model):
    """One device in ``state``."""

    connected: StrictBool
    status: Short | None = None
    mode: Short | None = None


class State(Envelope):
    """``state``."""

    game: Short
    devices: Annotated[dict[Short, Device], Field(max_length=8)]
    alarms: Annotated[list[Alarm], Field(max_length=64)]


class Alarms(Envelope):
    """``alarms``."""

    alarms: Annotated[list[Alarm], Field(max_length=64)]


class CoverAllRow(_Model):
    """A row of the Cover All pay table in ``info``: the pays per column."""

    hand: Short
    pays: Annotated[list[Odds], Field(min_length=1, max_length=9)]


class CoverAllTable(_Model):
    """``info.paytables.cover_all``: the game's whole pay table, columns = hands in play."""

    game: Short
    title: Message
    columns: Annotated[list[Annotated[StrictInt, Field(ge=1, le=9)]], Field(max_length=9)]
    rows: Annotated[list[CoverAllRow], Field(max_length=20)]


class BonusCrapsTable(_Model):
    """``info.paytables.bonus_craps``."""

    paytable: StrictInt
    pays: Annotated[dict[Bet, Odds], Field(max_length=3)]


class BustRow(_Model):
    """A row of the Bust Bonus pay table."""

    row: Short
    off_suit: Odds
    suited: Odds


class BustBonusTable(_Model):
    """``info.paytables.bust_bonus``."""

    decks: StrictInt
    dealer_hits_soft_17: StrictBool
    rows: Annotated[list[BustRow], Field(max_length=20)]


class PayTables(_Model):
    """``info.paytables``: the pay tables in use, null for a side bet the table lacks."""

    cover_all: CoverAllTable | None = None
    bonus_craps: BonusCrapsTable | None = None
    bust_bonus: BustBonusTable | None = None


class Info(Envelope):
    """``info`` (contract 1.2, retained): the daemon's version, game and pay tables."""

    version: Short
    contract: Short
    game: Short
    paytables: PayTables


class PayRow(_Model):
    """One row of ``cover_all/payouts``."""

    hand: Short
    pays: Odds


class Payouts(Envelope):
    """``cover_all/payouts``."""

    round_id: Id
    game: Short
    hands: Annotated[StrictInt, Field(ge=1, le=9)]
    paytable: Annotated[list[PayRow], Field(max_length=20)]


class Highest(_Model):
    """``highest`` of a Cover All result."""

    hand: Short
    position: Short
    cards: Cards
    best: Cards | None = None
    board: Cards | None = None


class CoverAllResult(Envelope):
    """``cover_all/result``."""

    round_id: Id
    game: Short
    hands: Annotated[StrictInt, Field(ge=1, le=9)] | None = None
    outcome: Literal["win", "no_qualifier", "void", "flagged"]
    highest: Highest | None = None
    pays: Odds | None = None
    reason: Message | None = None


class BetProgress(_Model):
    """One bet on ``craps/board``."""

    pays: Odds
    hit: Totals
    remaining: Totals
    complete: StrictBool
    chance: Annotated[str, Field(pattern=r"^[1-9][0-9]{0,30}/[1-9][0-9]{0,30}$")] | None = None


class PendingRoll(_Model):
    """``craps/board.pending_roll``."""

    roll_id: Id
    dice: Annotated[list[Die], Field(min_length=2, max_length=2)]
    reason: Short


class LastRoll(_Model):
    """``craps/board.last_roll`` (lammer addition): the latest roll event."""

    roll_id: Id
    dice: Annotated[list[Die], Field(min_length=2, max_length=2)]
    total: Annotated[StrictInt, Field(ge=2, le=12)] | None = None
    status: Literal["counted", "noroll", "pending", "declared_invalid"]


class Board(Envelope):
    """``craps/board``."""

    paytable: StrictInt
    betting_open: StrictBool
    numbers_hit: Totals
    all_small: BetProgress
    all_tall: BetProgress
    make_em_all: BetProgress
    pending_roll: PendingRoll | None = None
    last_roll: LastRoll | None = None
    waiting_count: Annotated[StrictInt, Field(ge=0, le=10**9)] = 0
    waiting: Annotated[list[Id], Field(max_length=20)] = []


class Roll(Envelope):
    """``craps/roll``."""

    roll_id: Id
    dice: Annotated[list[Die], Field(min_length=2, max_length=2)]
    total: Total | None = None
    status: Literal["counted", "noroll", "pending", "declared_invalid", "reinstated"]
    reason: Short | None = None


class CrapsResult(Envelope):
    """``craps/result``."""

    roll_id: Id
    bet: Bet
    outcome: Literal["win", "lose"]
    pays: Odds | None = None


class Reversal(Envelope):
    """``craps/reversal``."""

    roll_id: Id
    bet: Bet
    outcome: Literal["win", "lose"]


class BustState(Envelope):
    """``bust_bonus/state`` (``paytable_row``: the row the up card's column reads)."""

    round_id: Id | None = None
    betting_open: StrictBool
    up_card: Card | None = None
    dealer_cards: Cards
    paytable_row: Short | None = None


class BustResult(Envelope):
    """``bust_bonus/result`` (``paytable_row`` and ``column``: the pay-table cell that pays)."""

    round_id: Id
    outcome: Literal["win", "lose", "void", "flagged"]
    up_card: Card | None = None
    dealer_cards: Cards
    total: Annotated[StrictInt, Field(ge=2, le=40)] | None = None
    suited: StrictBool | None = None
    three_eights: StrictBool | None = None
    pays: Odds | None = None
    reason: Message | None = None
    paytable_row: Short | None = None
    column: Literal["suited", "off_suit"] | None = None


class Response(Envelope):
    """``response/<name>``."""

    request_id: Annotated[str, Field(max_length=100)] | StrictInt | None = None
    status: Literal["ok", "error"]
    error: Message | None = None


TOPICS: Final[dict[str, tuple[type[Envelope], bool]]] = {
    "info": (Info, True),
    "state": (State, True),
    "alarms": (Alarms, True),
    "cover_all/payouts": (Payouts, True),
    "cover_all/result": (CoverAllResult, True),
    "craps/board": (Board, True),
    "craps/roll": (Roll, False),
    "craps/result": (CrapsResult, False),
    "craps/reversal": (Reversal, False),
    "bust_bonus/state": (BustState, True),
    "bust_bonus/result": (BustResult, True),
}
"""Every topic the pages draw (relative to the base topic): its model, and whether retained."""


class PayloadError(ValueError):
    """A payload that is not what the contract says; ``reason`` is a short category for the
    drop counters (``too_large``, ``not_json``, ``invalid``, ``wrong_table``)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def validate(topic: str, table: str, payload: bytes) -> dict[str, Any]:
    """The decoded JSON object of a payload on ``topic`` of ``table``, if it validates.

    Raises ``KeyError`` for a topic the pages do not draw, ``PayloadError`` for a payload
    that is too large, not a JSON object, invalid, or names another table.
    """
    model, _ = TOPICS[topic]
    return _check(model, table, payload)


def validate_response(table: str, payload: bytes) -> dict[str, Any]:
    """A ``response/<name>`` payload of ``table``, checked (``PayloadError`` if bad)."""
    return _check(Response, table, payload)


def _check(model: type[Envelope], table: str, payload: bytes) -> dict[str, Any]:
    if len(payload) > MAX_PAYLOAD:
        raise PayloadError("too_large", f"{len(payload)} bytes")
    try:
        # NaN and Infinity are not JSON (RFC 8259) and a browser's JSON.parse refuses them.
        data = json.loads(payload, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise PayloadError("not_json", str(exc)[:200]) from None
    except RecursionError:
        raise PayloadError("not_json", "nested too deeply") from None
    if not isinstance(data, dict):
        raise PayloadError("not_json", "not a JSON object")
    try:
        message = model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(payload)"
        raise PayloadError("invalid", f"{where}: {first['msg']}") from None
    if message.table != table:
        raise PayloadError("wrong_table", f"names table {message.table!r}")
    return data
