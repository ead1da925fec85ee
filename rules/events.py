"""The one event model: device facts, stickperson decisions, and outcomes.

Every value here is a frozen, slotted, keyword-only dataclass. Consumers ``match`` on the
unions at the bottom and finish with ``typing.assert_never`` so a new event type is a type
error wherever it is not handled.

* **Facts** (``DeviceFact``) are what a device said, already validated by the codec, and
  what the host saw of its link (connected, disconnected, a bad frame). Card data is kept
  as the shuffler's codes (``"As"``) so facts serialise to the journal as they came.
* **The timer** (``TimePassed``) tells the table that time has passed, for the alarms
  that clear after a quiet time.
* **Decisions** (``Decision``) are what the stickperson decided through the request
  interface; each carries who decided and when. Rules never read a clock: the caller
  passes ``at``.
* **Outcomes** (``Outcome``) are what the rules concluded; the daemon publishes them.
  Odds are exact ``Decimal`` values, read "to 1".

The daemon wraps every fact, decision and outcome with its ``seq`` and time; nothing here
knows about either.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Final, Literal, get_args

# ---------------------------------------------------------------------------------------
# Vocabulary (spec names): each spelled out here once; every layer imports it from here.

Device = Literal["shuffler", "dice_reader"]
DEVICES: Final[tuple[Device, ...]] = get_args(Device)

PokerGame = Literal["CSP", "FCP", "LIR", "MSP", "TCP", "UTH"]
"""The poker games, which carry the Cover All Bonus (shuffler-icd.md "Games")."""
Game = Literal[PokerGame, "BJ"]
"""What the shuffler's ``MODE`` names: the poker games and the blackjack shoe's ``BJ``."""
TableGame = Literal[Game, "CRAPS"]
"""What a table plays (its configuration): a shuffler's game, or ``CRAPS`` (dice reader)."""
POKER_GAMES: Final[tuple[PokerGame, ...]] = get_args(PokerGame)
GAMES: Final[tuple[Game, ...]] = get_args(Game)
TABLE_GAMES: Final[tuple[TableGame, ...]] = get_args(TableGame)

MAX_ID: Final = 999_999
"""Round ids and roll ids are the device's own counter, 1 to 999999 (shuffler-icd.md,
dice-reader-icd.md): it wraps, and may start again at 1 after a power-up."""

HandPosition = Literal["P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "DL"]
"""A position that holds a hand: a player's or the dealer's."""
Position = Literal[HandPosition, "CM"]
"""Where the shuffler deals: a hand, or ``CM`` (the community cards)."""
DeckResult = Literal["OK", "SHORT", "EXTRA", "DUPLICATE", "FOREIGN"]
NoRollReason = Literal["OFF_TABLE", "EXTRA_DICE"]  # 68 IAC 10-4-4(b)(1), (b)(2)
CheckReason = Literal[  # 68 IAC 10-4-4(c): (1) (4) (5) (7) (8) (9) (10) (11)
    "STACKED", "BOWL", "RAIL", "WRONG_DIRECTION", "SLID", "ON_CHIPS", "SHORT_THROW", "UNREADABLE"
]
VoidClause = Literal[2, 3, 6]  # 68 IAC 10-4-4(c)(2), (3), (6): what the reader cannot see
CrapsBet = Literal["all_small", "all_tall", "make_em_all"]
BustColumn = Literal[
    "suited", "off_suit"
]  # SDAR 20:18:15:30.16(12): "Bust, Suited", "Bust, Off-Suit"

POSITIONS: Final[tuple[Position, ...]] = get_args(Position)
DECK_RESULTS: Final[tuple[DeckResult, ...]] = get_args(DeckResult)
NOROLL_REASONS: Final[tuple[NoRollReason, ...]] = get_args(NoRollReason)
CHECK_REASONS: Final[tuple[CheckReason, ...]] = get_args(CheckReason)

# ---------------------------------------------------------------------------------------
# Device facts: both devices


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceHello:
    """``HELLO``: power-up or reconnect; the device's sequence starts again."""

    device: Device
    model: str
    firmware: str
    serial: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceStatus:
    """``STATUS``: ``READY`` clears every earlier fault of the device; any other code is a tilt."""

    device: Device
    code: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceConnected:
    """The host opened the device's port (reported by the driver, journaled like a frame)."""

    device: Device


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceDisconnected:
    """The device's port went away or fell silent; the driver is reconnecting."""

    device: Device
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BadFrameSeen:
    """The host received a bad frame from the device and answered it ``NAK``
    (link-layer.md "Frames"): reported by the driver, like a connect. It carries no bytes:
    the daemon's journal keeps those, within its bounds; the table counts bad frames for
    ``LINK_ERRORS`` (``rules.table``)."""

    device: Device


@dataclass(frozen=True, slots=True, kw_only=True)
class NoiseSeen:
    """The host received bytes outside any frame from the device: link-layer.md "Frames",
    "a receiver discards bytes until it sees ``$``". Reported by the driver once per read
    that had such bytes. No bad frame (there is nothing to NAK), but a line that carries
    noise and no good frame (a wrong baud rate: the device's frames arrive as garbage, a
    ``$`` seldom among it) is broken: the table counts it for ``LINK_ERRORS``
    (``rules.table``). It carries no bytes: the daemon's journal keeps those, within its
    bounds, as it does a bad frame's."""

    device: Device


# Shuffler (and the card-reading shoe in BJ mode)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeReported:
    """``MODE``: the game the shuffler is set to."""

    game: Game


@dataclass(frozen=True, slots=True, kw_only=True)
class DeckChecked:
    """``DECK``: the deck check after a shuffle; anything but ``OK`` is a tilt until ``OK``."""

    result: DeckResult


@dataclass(frozen=True, slots=True, kw_only=True)
class HandDealt:
    """``HAND``: the cards of one position (secret until ``SETTLE``)."""

    round_id: int
    position: Position
    cards: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundDealt:
    """``ROUND``: the green button; ``hands`` hands are in play."""

    round_id: int
    hands: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundSettled:
    """``SETTLE``: every player bet is reconciled and the cards are face up."""

    round_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CardDrawn:
    """``CARD`` (BJ only): one card in draw order; the dealer's first is the up card."""

    round_id: int
    position: Position
    card: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DealerDone:
    """``END`` (BJ only): the dealer's hand is complete and face up."""

    round_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundVoided:
    """``VOID``: the dealer cancelled the round; nothing of it pays."""

    round_id: int


# Dice reader


@dataclass(frozen=True, slots=True, kw_only=True)
class DiceRolled:
    """``ROLL``: a proper roll; counts at once."""

    roll_id: int
    dice: tuple[int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class NoRoll:
    """``NOROLL``: an invalid roll under 4-4(b); never counts."""

    roll_id: int
    reason: NoRollReason


@dataclass(frozen=True, slots=True, kw_only=True)
class RollCheck:
    """``CHECK``: pending until the stickperson decides; a die is 0 where unreadable."""

    roll_id: int
    dice: tuple[int, int]
    reason: CheckReason


ShufflerFact = (
    ModeReported
    | DeckChecked
    | HandDealt
    | RoundDealt
    | RoundSettled
    | CardDrawn
    | DealerDone
    | RoundVoided
)
DiceFact = DiceRolled | NoRoll | RollCheck
DeviceFact = (
    DeviceHello
    | DeviceStatus
    | DeviceConnected
    | DeviceDisconnected
    | BadFrameSeen
    | NoiseSeen
    | ShufflerFact
    | DiceFact
)

# ---------------------------------------------------------------------------------------
# The host's own clock


@dataclass(frozen=True, slots=True, kw_only=True)
class TimePassed:
    """The host's timer: alarms that clear after a quiet time clear now if it has passed.

    It carries nothing but the ``at`` it is applied with; the rules still read no clock.
    The daemon applies it every second and journals it only when it changed the table, so
    a replay with the recorded times clears the same alarms at the same times.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class ClockJumped:
    """The host's wall clock moved ``milliseconds`` against its steady clock (forward when
    positive): set by hand, by a time server after a long drift, by a failing clock chip.
    The times of the record around it may be wrong; the daemon measures, the rules say so.
    """

    milliseconds: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanStart:
    """The daemon started again after a clean stop: its clock is trusted again."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalRefused:
    """The host's journal refused a write (a full disk, an I/O error): nothing more can be
    recorded, so the host holds every event (a device sends its frame again) until it can.
    The daemon records this fact in the space it keeps in reserve for it."""

    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalWritable:
    """The host's journal writes again (space returned, or a start that wrote its record)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerLoginChecked:
    """The MQTT broker refused the table's login (``refused``), or accepted it again. Only
    a refusal after the table started is a fact: at start-up a refused login stops the
    daemon (``lammer run`` exits with the sentence)."""

    refused: bool
    user: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DiskSpaceChecked:
    """The free space on the journal's disk (``free_bytes``) against what ``hours`` of the
    table's journal, at its measured growth, need (``needed_bytes``). The host measures;
    the rules decide whether it is low."""

    free_bytes: int
    needed_bytes: int
    hours: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SoftwareChecked:
    """The host checked its installed software against the approved release manifests at
    start: ``problem`` is None when it matches one, else a sentence naming the
    first file that differs (or why no manifest could be used)."""

    problem: str | None


# ---------------------------------------------------------------------------------------
# Stickperson decisions (request interface, mqtt-api.md "Requests")


@dataclass(frozen=True, slots=True, kw_only=True)
class RollDecided:
    """``roll_decision``: a pending ``CHECK`` declared valid (counts) or invalid (does not)."""

    roll_id: int
    valid: bool
    operator: str
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class RollVoided:
    """``void_roll``: the latest counted roll declared invalid under 4-4(c)(2), (3) or (6)."""

    roll_id: int
    clause: VoidClause
    operator: str
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class VoidOverturned:
    """``overturn``: a declaration of invalid overturned (4-4(c), last sentence)."""

    roll_id: int
    operator: str
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class AlarmAcknowledged:
    """``alarm_ack`` (mqtt-api.md 1.3): a pit user saw the active alarm ``code``. The alarm
    stays until it clears; acknowledging it changes no payout."""

    code: str
    operator: str
    at: datetime


Decision = RollDecided | RollVoided | VoidOverturned
"""The stickperson's decisions on rolls (the craps machine's)."""

TableDecision = Decision | AlarmAcknowledged
"""Every decision a request asks the table for: a roll's, or an alarm's acknowledgement."""

# ---------------------------------------------------------------------------------------
# Outcomes


@dataclass(frozen=True, slots=True, kw_only=True)
class PayRow:
    """One row of a pay table for a number of hands: hand name as the seed writes it."""

    hand: str
    pays: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class CoverAllPayouts:
    """At ``ROUND``: the Cover All pay table for that many hands (``cover_all/payouts``)."""

    round_id: int
    game: PokerGame
    hands: int
    paytable: tuple[PayRow, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HighestHand:
    """The highest qualifying hand at the table."""

    hand: str
    position: HandPosition
    cards: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CoverAllResult:
    """At ``SETTLE``/``VOID``, or a flagged round as soon as found (``cover_all/result``).

    A flagged result carries no cards (they may still be face down).
    """

    round_id: int
    game: PokerGame
    hands: int | None
    outcome: Literal["win", "no_qualifier", "void", "flagged"]
    highest: HighestHand | None
    pays: Decimal | None
    reason: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RollRecorded:
    """Every roll event and decision on a roll (``craps/roll``)."""

    roll_id: int
    dice: tuple[int, int]
    total: int | None
    status: Literal["counted", "noroll", "pending", "declared_invalid", "reinstated"]
    reason: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CrapsBetSettled:
    """A Bonus Craps bet won or lost (``craps/result``)."""

    roll_id: int
    bet: CrapsBet
    outcome: Literal["win", "lose"]
    pays: Decimal | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CrapsBetReversed:
    """A settlement taken back because the roll that settled it was declared invalid.

    ``outcome`` is the settlement being reversed; the bet is live again.
    """

    roll_id: int
    bet: CrapsBet
    outcome: Literal["win", "lose"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BustBonusResult:
    """At ``END`` or ``VOID`` (``bust_bonus/result``); ``flagged`` carries the reason."""

    round_id: int
    outcome: Literal["win", "lose", "void", "flagged"]
    up_card: str | None
    dealer_cards: tuple[str, ...]
    total: int | None
    suited: bool
    three_eights: bool
    pays: Decimal | None
    reason: str | None
    paytable_row: str | None
    """The pay-table row of the hand, as the seed names it: "Bust with three 8s" for three
    eights (they pay that row instead, rule (12)), else the up card's (``"10"`` for any
    ten-value card); None for a void or flagged round."""
    column: BustColumn | None
    """The column that paid (a win only): every card of the busted hand of one suit, or not."""


LATE_FRAME: Final = "LATE_FRAME"
"""The alarm a game's machine raises for a late frame: one for a round (or roll) whose result
is already published. The result stands (shuffler-icd.md "What the host must check": a
screen must never turn a paid round into "flagged"); the daemon's journal keeps the frame
for review. ``rules.table`` says when it clears."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AlarmRaised:
    """A check of the specs failed; stays active until cleared. A game's machine may return
    one among its outcomes (``LATE_FRAME``): the table keeps it in its list of alarms."""

    code: str
    device: Device | None
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AlarmCleared:
    """An alarm no longer applies."""

    code: str
    device: Device | None


Outcome = (
    CoverAllPayouts
    | CoverAllResult
    | RollRecorded
    | CrapsBetSettled
    | CrapsBetReversed
    | BustBonusResult
    | AlarmRaised
    | AlarmCleared
)
