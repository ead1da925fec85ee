"""From a table's published results to what the integrity watch counts (pure).

``TableWatch`` holds one table's ``Watch`` and knows which families its messages feed:

* ``cover_all/result``: a ``win`` is a round of ``hands`` hands whose highest hand is the
  row; ``no_qualifier`` a round that paid nothing; ``void`` and ``flagged`` rounds are not
  counted (nothing was settled by the par sheet);
* ``bust_bonus/result``: the paying cell (``paytable_row`` and ``column``) of a win, and
  the dealer's bust or not under the up card; needs the shoe (``info``: decks, H17);
* ``craps/result``: each settlement of a bet, a win or not; a ``craps/reversal`` takes one
  back;
* ``craps/roll``: a counted roll with both dice read (each of the 36 outcomes, its total,
  the two faces); a roll later ``declared_invalid`` is taken back, one ``reinstated``
  counted again.

The gaming day of a message is its ``ts`` in the floor's time zone, shifted by the hour the
gaming day starts (as the daemon files its journal: ``day_starts``, 06:00 by default).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from contract.feed import model_of
from contract.payloads import (
    BustBonusResultMessage,
    CoverAllResultMessage,
    CrapsResultMessage,
    CrapsReversalMessage,
    CrapsRollMessage,
    Envelope,
    InfoMessage,
    validate,
)
from records.integrity import (
    Finding,
    Watch,
    bust_bonus_families,
    cover_all_family,
    craps_families,
)
from records.parsheet import cover_all_columns

_UP_ROWS = {"A": "Ace", "T": "10", "J": "10", "Q": "10", "K": "10"}


def up_card_row(card: str) -> str:
    """The Bust Bonus pay-table row of an up card (``"Kh"`` -> ``"10"``)."""
    return _UP_ROWS.get(card[0], card[0])


@dataclass(frozen=True, slots=True)
class GamingDay:
    """Where a gaming day starts: the hour, in the floor's time zone."""

    starts: time = time(6, 0)
    tz: tzinfo | None = None

    def of(self, ts: str) -> date:
        """The gaming day of a contract timestamp (``2026-12-01T05:59:00.000Z``)."""
        at = datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(self.tz)
        shift = timedelta(hours=self.starts.hour, minutes=self.starts.minute)
        return (at.replace(tzinfo=None) - shift).date()


@dataclass
class TableWatch:
    """One table's integrity watch, fed with its messages."""

    table: str
    day: GamingDay = field(default_factory=GamingDay)
    watch: Watch | None = None
    shoe: tuple[int, bool] | None = None
    game: str | None = None
    last_day: date | None = None
    _rolls: dict[int, tuple[int, int, bool]] = field(default_factory=dict)

    def info(self, message: InfoMessage) -> None:
        """Learn the table's game and shoe from its ``info``."""
        bust = message.paytables.bust_bonus
        if bust is not None:
            self.shoe = (bust.decks, bust.dealer_hits_soft_17)

    def _ensure(self, kind: str, game: str | None = None) -> Watch | None:
        if self.watch is None:
            if kind == "cover_all" and game is not None:
                self.watch = Watch([cover_all_family(game)])
                self.game = game
            elif kind == "bust_bonus" and self.shoe is not None:
                self.watch = Watch(bust_bonus_families(*self.shoe))
            elif kind == "craps":
                self.watch = Watch(craps_families())
        return self.watch

    def replay(self, topic: str, payload: dict[str, Any]) -> list[str]:
        """``feed`` a message as the store keeps it (its JSON object), parsed with the
        contract first. Raises ``PayloadError`` for one the contract refuses."""
        return self.feed(validate(model_of(topic), payload, table=self.table))

    def feed(self, message: Envelope) -> list[str]:
        """Count one message; the families it changed (empty: nothing to evaluate)."""
        day = self.day.of(message.ts)
        self.last_day = day if self.last_day is None else max(self.last_day, day)
        match message:
            case InfoMessage():
                self.info(message)
            case CoverAllResultMessage():
                return self._cover_all(day, message)
            case BustBonusResultMessage():
                return self._bust(day, message)
            case CrapsResultMessage() | CrapsReversalMessage():
                watch = self._ensure("craps")
                if watch is None:
                    return []
                sign = 1 if isinstance(message, CrapsResultMessage) else -1
                won = message.outcome == "win"
                watch.observe(message.bet, day, {None: sign}, {"win": sign} if won else {})
                return [message.bet]
            case CrapsRollMessage():
                return self._roll(day, message)
        return []

    def _cover_all(self, day: date, p: CoverAllResultMessage) -> list[str]:
        if p.outcome not in ("win", "no_qualifier") or p.hands is None:
            return []
        watch = self._ensure("cover_all", p.game)
        if watch is None or self.game != p.game or p.hands not in cover_all_columns(p.game):
            # A column the par sheet has not computed: counted nowhere (docs/auditors/choices.md).
            return []
        hits = {p.highest.hand: 1} if p.outcome == "win" and p.highest is not None else {}
        watch.observe("cover_all", day, {p.hands: 1}, hits)
        return ["cover_all"]

    def _bust(self, day: date, p: BustBonusResultMessage) -> list[str]:
        if p.outcome not in ("win", "lose") or p.up_card is None:
            return []
        watch = self._ensure("bust_bonus")
        if watch is None:
            return []  # no info yet: the shoe (decks, H17) decides the exact odds
        up = up_card_row(p.up_card)
        won = p.outcome == "win"
        cell = {f"{p.paytable_row} {p.column}": 1} if won else {}
        watch.observe("bust_bonus", day, {None: 1}, cell)
        family = f"dealer bust, up card {up}"
        watch.observe(family, day, {None: 1}, {"bust": 1} if won else {})
        return ["bust_bonus", family]

    def _roll(self, day: date, p: CrapsRollMessage) -> list[str]:
        watch = self._ensure("craps")
        if watch is None:
            return []
        d1, d2 = p.dice
        roll_id = p.roll_id
        status = p.status
        if d1 == 0 or d2 == 0:
            return []
        counted = self._rolls.get(roll_id)
        if status in ("counted", "reinstated"):
            if counted is not None and counted[2]:
                return []  # already counted (a redelivery)
            sign = 1
        elif status == "declared_invalid":
            if counted is None or not counted[2]:
                return []
            sign = -1
        else:
            return []
        self._rolls[roll_id] = (d1, d2, sign > 0)
        if len(self._rolls) > 10_000:  # only recent rolls can be declared invalid
            for old in sorted(self._rolls)[:5_000]:
                del self._rolls[old]
        watch.observe("dice", day, {None: sign}, {f"{d1}-{d2}": sign})
        watch.observe("dice totals", day, {None: sign}, {str(d1 + d2): sign})
        faces: dict[str, int] = {}
        for face in (d1, d2):
            faces[str(face)] = faces.get(str(face), 0) + sign
        watch.observe("die faces", day, {None: 2 * sign}, faces)
        return ["dice", "dice totals", "die faces"]

    def evaluate(self, now: str, families: list[str] | None = None) -> list[Finding]:
        """The alarms of the windows ending with the latest gaming day seen."""
        if self.watch is None or self.last_day is None:
            return []
        return self.watch.evaluate(self.last_day, now, families)


def system_zone() -> ZoneInfo:
    """The machine's time zone by its IANA name (``/etc/timezone``, ``/etc/localtime``),
    UTC when it has none: the tables' gaming days use the system's zone too."""
    with contextlib.suppress(OSError, ZoneInfoNotFoundError, ValueError):
        name = Path("/etc/timezone").read_text().strip()
        if name:
            return ZoneInfo(name)
    with contextlib.suppress(OSError, ZoneInfoNotFoundError, ValueError):
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            return ZoneInfo(target.split("zoneinfo/", 1)[1])
    return ZoneInfo("UTC")
