"""``lammer display``: the technician's terminal display of one or more tables.

It subscribes to ``<prefix>/<table>/#`` for one or more tables and draws what
``mqtt-api.md`` publishes: availability, game, devices and alarms; the dynamic Cover All
pay table and the last result; the Bonus Craps board, rolls and bet results; the Bust Bonus
round and result. It reads only the published topics, so it shows exactly what a real
display would be given (and never a card before the daemon reveals it).

Three layers, so that everything but the socket is tested without a broker:

* the contract's parse (``contract.payloads.parse``, the models every side shares): each
  topic's JSON validated, with a message that names the field when it is wrong;
* ``Screen``: the tables' ``TableView``s behind one ``contract.feed.Feed`` (the project's
  one seq-order-and-dedup memory): every message goes through the feed, which releases
  each ``seq`` once and in order, asks the table to resend a gap (``request/resend``) and
  says what will not come (a warning line on the table's panel);
* ``TableView``, a pure model of one table, changed only by ``apply(topic, payload)`` with
  what the feed released; a bad payload or an unknown topic becomes a warning line, never
  an exception;
* ``render(views)``, a pure function from views to a rich renderable.

The async shell (``follow``) only subscribes, feeds the ``Screen``, publishes its resend
requests and reconnects (the next node of ``--mqtt-host`` at once, jittered capped backoff
once every node failed); ``run`` puts it under a ``rich.live.Live`` (or prints one frame
with ``--once``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import signal
import socket
import ssl
import sys
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Final, Literal

import aiomqtt
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.style import Style
from rich.table import Table
from rich.text import Text

from contract.feed import Feed, Gap, Message, Other, Refused, Resend
from contract.payloads import (
    TOPICS,
    Alarm,
    AlarmsMessage,
    BetProgressModel,
    BustBonusResultMessage,
    BustBonusStateMessage,
    CoverAllPayoutsMessage,
    CoverAllResultMessage,
    CrapsBoardMessage,
    CrapsResultMessage,
    CrapsReversalMessage,
    CrapsRollMessage,
    Envelope,
    InfoMessage,
    PayloadError,
    PendingRollModel,
    StateMessage,
    parse,
)
from contract.session import UNBOUNDED, bounded, session
from contract.tasks import STOP_DEADLINE_S, cancel_and_wait, exit_after
from contract.topics import Topic, is_exchange
from contract.vocabulary import BET_NAMES, GAME_NAMES
from foundation.backoff import Backoff
from rules.events import POKER_GAMES, CrapsBet, TableGame
from rules.text import plural

# ---------------------------------------------------------------------------------------
# The pure model of one table

MAX_ROLLS = 8
MAX_RESULTS = 8
MAX_WARNINGS = 5
RETAINED_SETTLE_S = 0.5
"""A logged-in display's ``--once``: seconds without a retained message after every table's
state came, taken as the end of the subscriptions' retained burst (``follow``)."""


@dataclass
class CrapsResultLine:
    """A settled bet as shown, and whether the settlement was taken back."""

    roll_id: int
    bet: CrapsBet
    outcome: Literal["win", "lose"] | None
    pays: str | None
    reversed: bool = False


@dataclass
class TableView:
    """What one table's display knows, built only from the messages it was given."""

    table: str
    prefix: str = "lammer"
    availability: str | None = None
    info: InfoMessage | None = None
    state: StateMessage | None = None
    alarms: tuple[Alarm, ...] = ()
    payouts: CoverAllPayoutsMessage | None = None
    cover_all_result: CoverAllResultMessage | None = None
    board: CrapsBoardMessage | None = None
    rolls: dict[int, CrapsRollMessage] = field(default_factory=dict)
    craps_results: deque[CrapsResultLine] = field(default_factory=lambda: deque(maxlen=MAX_RESULTS))
    bust_state: BustBonusStateMessage | None = None
    bust_result: BustBonusResultMessage | None = None
    warnings: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_WARNINGS))
    last_seq: int | None = None
    _topic_seq: dict[str, int] = field(default_factory=dict, repr=False)
    _alarms_seq: int = field(default=-1, repr=False)

    @property
    def base(self) -> str:
        """The table's base topic, ``<prefix>/<table>`` (mqtt-api.md "Conventions")."""
        return f"{self.prefix}/{self.table}"

    @property
    def game(self) -> TableGame | None:
        """The table's game as the daemon last said (``state.game``)."""
        return self.state.game if self.state else None

    def apply(self, topic: str, payload: bytes, *, parsed: Envelope | None = None) -> bool:
        """Take one received message; True when what is drawn may have changed.

        Never raises: a topic outside the table, an unknown topic or a malformed payload
        becomes a warning line. ``Screen`` gives it each ``seq`` once, in order; a retained
        topic is still never drawn back to an older ``seq`` (a state given before the
        table's stream started may be older than one drawn). ``parsed``: the feed's typed
        message of ``payload`` (``contract.feed.Message.parsed``), not parsed again.
        """
        prefix = self.base + "/"
        if not topic.startswith(prefix):
            return self._warn(f"{topic}: not a topic of table {self.table}; ignored")
        sub = topic[len(prefix) :]
        if sub == "availability":
            return self._apply_availability(payload)
        if is_exchange(sub):
            return False  # the pit terminals' conversation with the daemon, not drawn
        known = TOPICS.get(sub)
        if known is None:
            return self._warn(f"{sub}: unknown topic; ignored")
        _, retained = known
        if retained and not payload:
            # A zero-length retained message deletes the retained state (MQTT 3.1.1, 3.3.1.3).
            return self._clear(sub)
        try:
            message = parse(sub, payload, table=self.table) if parsed is None else parsed
        except PayloadError as exc:
            return self.refused(sub, exc.reason, exc.detail)
        if retained and message.seq <= self._topic_seq.get(sub, -1):
            return False  # older than the state already drawn for this topic
        self._remember(sub, message.seq)
        self._update(message)
        return True

    # -- helpers ------------------------------------------------------------------------

    def refused(self, sub: str, reason: str, detail: str) -> bool:
        """A payload the contract refused (``PayloadError``'s reason): a warning line."""
        if reason == "unknown_topic":
            return self._warn(f"{sub}: unknown topic; ignored")
        return self._warn(f"{sub}: {_WHY.get(reason, reason)}{detail}; ignored")

    def _warn(self, text: str) -> bool:
        self.warnings.append(text)
        return True

    def _remember(self, sub: str, seq: int) -> None:
        self._topic_seq[sub] = seq
        self.last_seq = seq if self.last_seq is None else max(self.last_seq, seq)

    def gap(self, gap: Gap) -> bool:
        """Messages that will not come (the feed gave up): a warning line, never silent."""
        return self._warn(
            f"messages lost: seq {gap.from_seq}-{gap.to_seq} will not come ({gap.reason})"
        )

    def _apply_availability(self, payload: bytes) -> bool:
        text = payload.decode("utf-8", errors="replace").strip()
        if text in ("online", "offline"):
            self.availability = text
            return True
        if not text:
            self.availability = None
            return True
        return self._warn(f"availability: {text[:40]!r} is neither 'online' nor 'offline'")

    def _clear(self, sub: str) -> bool:
        match sub:
            case Topic.INFO:
                self.info = None
            case Topic.STATE:
                self.state = None
            case Topic.ALARMS:
                self.alarms = ()
            case Topic.COVER_ALL_PAYOUTS:
                self.payouts = None
            case Topic.COVER_ALL_RESULT:
                self.cover_all_result = None
            case Topic.CRAPS_BOARD:
                self.board = None
            case Topic.BUST_BONUS_STATE:
                self.bust_state = None
            case Topic.BUST_BONUS_RESULT:
                self.bust_result = None
        return True

    def _set_alarms(self, alarms: list[Alarm], seq: int) -> None:
        # Alarms come on ``alarms`` and inside ``state``; the newer of the two wins.
        if seq > self._alarms_seq:
            self._alarms_seq = seq
            self.alarms = tuple(alarms)

    def _update(self, message: Envelope) -> None:  # noqa: C901  one match over the contract's message kinds
        match message:
            case StateMessage():
                self.state = message
                self._set_alarms(message.alarms, message.seq)
            case AlarmsMessage():
                self._set_alarms(message.alarms, message.seq)
            case CoverAllPayoutsMessage():
                self.payouts = message
            case CoverAllResultMessage():
                self.cover_all_result = message
            case CrapsBoardMessage():
                self.board = message
            case CrapsRollMessage():
                # One row per roll, in the order the rolls came, showing its latest status
                # (pending -> counted, counted -> declared_invalid -> reinstated).
                self.rolls[message.roll_id] = message
                while len(self.rolls) > MAX_ROLLS:
                    del self.rolls[next(iter(self.rolls))]
            case CrapsResultMessage():
                self.craps_results.append(
                    CrapsResultLine(
                        roll_id=message.roll_id,
                        bet=message.bet,
                        outcome=message.outcome,
                        pays=message.pays,
                    )
                )
            case CrapsReversalMessage():
                self._reverse(message)
            case BustBonusStateMessage():
                self.bust_state = message
            case BustBonusResultMessage():
                self.bust_result = message
            case InfoMessage():
                self.info = message
            case _:  # pragma: no cover - every model in TOPICS is matched above
                raise AssertionError(f"unhandled payload {type(message).__name__}")

    def _reverse(self, message: CrapsReversalMessage) -> None:
        for line in reversed(self.craps_results):
            if line.roll_id == message.roll_id and line.bet == message.bet:
                line.reversed = True
                return
        self.craps_results.append(
            CrapsResultLine(
                roll_id=message.roll_id,
                bet=message.bet,
                outcome=message.outcome,
                pays=None,
                reversed=True,
            )
        )


_WHY: Final = {
    "not_json": "payload is ",
    "invalid": "malformed payload: ",
    "wrong_table": "payload ",
    "too_large": "payload too large: ",
}
"""How a warning line words each reason of ``PayloadError``."""


@dataclass
class Screen:
    """The tables drawn, behind one ``Feed``: ``receive`` and ``tick`` return whether what
    is drawn may have changed; the resend requests to publish collect in ``resends``."""

    views: Sequence[TableView]
    feed: Feed = field(default_factory=Feed)
    resends: deque[Resend] = field(default_factory=lambda: deque(maxlen=256))

    def receive(self, topic: str, payload: bytes, *, now: float, retained: bool = False) -> bool:
        """One message as received."""
        view = route(self.views, topic)
        if view is None:
            return False
        sub = topic[len(view.base) + 1 :]
        # The feed checks the payload with the contract before it can take a seq
        # (contract.feed.admit): junk comes back as ``Refused``, a warning line.
        return self._handle(self.feed.receive(view.base, sub, payload, now=now, retained=retained))

    def tick(self, now: float) -> bool:
        """Time passed: gaps asked for, or given up."""
        return self._handle(self.feed.tick(now))

    def _handle(self, events: Sequence[Message | Gap | Resend | Other | Refused]) -> bool:
        changed = False
        for event in events:
            view = next((v for v in self.views if v.base == event.table), None)
            match event:
                case Resend():
                    self.resends.append(event)
                case Gap() if view is not None:
                    changed = view.gap(event) or changed
                case Message() if view is not None:
                    topic = f"{event.table}/{event.topic}"
                    changed = view.apply(topic, event.payload, parsed=event.parsed) or changed
                case Other() if view is not None:
                    changed = view.apply(f"{event.table}/{event.topic}", event.payload) or changed
                case Refused() if view is not None:
                    changed = view.refused(event.topic, event.reason, event.detail) or changed
        return changed


def route(views: Sequence[TableView], topic: str) -> TableView | None:
    """The view whose base topic holds ``topic``, if any."""
    for view in views:
        if topic.startswith(view.base + "/"):
            return view
    return None


# ---------------------------------------------------------------------------------------
# Rendering (pure)

LAMMER_NUMBERS = (2, 3, 4, 5, 6, 8, 9, 10, 11, 12)  # 7 is never lammered: it loses the bets

_SUIT_SYMBOLS = {"s": "♠", "h": "♥", "d": "♦", "c": "♣"}
_RED = Style(color="red", bgcolor="white", bold=True)
_BLACK = Style(color="black", bgcolor="white", bold=True)
_ROLL_STYLES = {
    "counted": "green",
    "noroll": "dim",
    "pending": "bold yellow",
    "declared_invalid": "red",
    "reinstated": "cyan",
}
_WIN_ROW = Style(color="black", bgcolor="green", bold=True)


def card_text(code: str) -> Text:
    """One card as a person reads it: ``Qh`` -> ``Q♥`` in red, ``Ts`` -> ``10♠`` in black."""
    rank, suit = code[0], code[1]
    face = ("10" if rank == "T" else rank) + _SUIT_SYMBOLS.get(suit, suit)
    return Text(face, style=_RED if suit in "hd" else _BLACK)


def cards_text(codes: Sequence[str]) -> Text:
    """Cards side by side, one space apart."""
    return Text(" ").join(card_text(code) for code in codes)


def _chance_text(chance: str | None) -> str:
    """An exact "n/d" chance as a player reads it, or "" when there is none: the fraction
    itself while both terms are small ("2 in 5", "5 in 11": under 10 and 100), else "1 in X"
    with X = d/n rounded half up to one decimal, without ".0"; as the player display writes
    it (``static/js/player_text.js`` ``chanceText``)."""
    if not chance or "/" not in chance:
        return ""
    numerator, _, denominator = chance.partition("/")
    try:
        n, d = int(numerator), int(denominator)
    except ValueError:
        return ""
    if n <= 0 or d <= 0:
        return ""
    common = math.gcd(n, d)
    n, d = n // common, d // common
    if n < 10 and d < 100:
        return f"{n} in {d}"
    x = (Decimal(d) / Decimal(n)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    text = f"{x:,}"
    return f"1 in {text.removesuffix('.0')}"


def _odds_text(pays: str | None) -> str:
    return "-" if pays is None else f"{pays} to 1"


def _betting(is_open: bool) -> Text:
    if is_open:
        return Text.assemble(("betting ", "bold"), ("OPEN", "bold green"))
    return Text.assemble(("betting ", "bold"), ("CLOSED", "bold red"))


def _unpaid(outcome: Literal["void", "flagged"], reason: str | None) -> Text:
    # shuffler-icd.md "What the host must check": a wrong round pays nothing automatically.
    if outcome == "void":
        return Text.assemble(("VOID", "bold yellow"), ": the round was cancelled, nothing pays")
    return Text.assemble(
        ("FLAGGED", "bold red"), f" for review, nothing pays automatically: {reason or '?'}"
    )


def _header(view: TableView) -> Text:
    text = Text()
    match view.availability:
        case "online":
            text.append("● online", style="bold green")
        case "offline":
            text.append("● offline", style="bold red")
        case _:
            text.append("○ availability unknown", style="dim")
    game = view.game
    if game is not None:
        text.append(f"   {GAME_NAMES[game]} ({game})", style="bold")
    if view.last_seq is not None:
        text.append(f"   seq {view.last_seq}", style="dim")
    if view.info is not None:
        text.append(f"   lammer {view.info.version}", style="dim")
    return text


def _devices(view: TableView) -> RenderableType:
    if view.state is None or not view.state.devices:
        return Text("devices: no state received yet", style="dim")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in ("Device", "Link", "Status", "Mode"):
        table.add_column(column)
    for name, info in view.state.devices.items():
        link = Text("connected", "green") if info.connected else Text("disconnected", "bold red")
        status = Text(info.status or "-", "green" if info.status == "READY" else "yellow")
        mode = Text(info.mode or "")
        if info.mode and view.game and info.mode != view.game:
            # Cover All Bonus rule (1): the i-Deal must be set to the game being played.
            mode = Text(f"{info.mode} ≠ {view.game}", "bold red")
        table.add_row(name, link, status, mode)
    return table


def _alarms(view: TableView) -> RenderableType:
    if not view.alarms:
        return Text("no alarms", style="dim green")
    lines = []
    for alarm in view.alarms:
        where = f" [{alarm.device}]" if alarm.device else ""
        since = f" since {alarm.since}" if alarm.since else ""
        lines.append(Text(f"⚠ ALARM {alarm.code}{where}: {alarm.message}{since}", "bold red"))
    return Group(*lines)


def _cover_all(view: TableView) -> RenderableType:
    parts: list[RenderableType] = []
    payouts, result = view.payouts, view.cover_all_result
    if payouts is None:
        parts.append(Text("Cover All Bonus: waiting for the green button", style="dim"))
    else:
        won = (
            result.highest.hand
            if result is not None
            and result.round_id == payouts.round_id
            and result.outcome == "win"
            and result.highest is not None
            else None
        )
        parts.append(
            Text(
                f"Cover All Bonus · round {payouts.round_id} · pays for "
                f"{plural(payouts.hands, 'hand')}",
                style="bold",
            )
        )
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        table.add_column("", width=1)
        table.add_column("Highest hand")
        table.add_column("Pays", justify="right")
        for row in payouts.paytable:
            hit = row.hand == won
            table.add_row(
                "▶" if hit else "",
                row.hand,
                _odds_text(row.pays),
                style=_WIN_ROW if hit else None,
            )
        parts.append(table)
    if result is not None:
        parts.append(_cover_all_result(result))
    return Group(*parts)


def _cover_all_result(result: CoverAllResultMessage) -> Text:
    text = Text(f"Round {result.round_id}: ", style="bold")
    match result.outcome:
        case "win":
            text.append("WIN ", style="bold green")
            if result.highest is not None:
                text.append(f"{result.highest.hand} at {result.highest.position}  ")
                text.append_text(cards_text(result.highest.cards))
            text.append(f"  pays {_odds_text(result.pays)}", style="bold green")
        case "no_qualifier":
            text.append("no qualifying hand", style="yellow")
            text.append(": Cover All Bonus wagers lose")
        case "void" | "flagged":
            text.append_text(_unpaid(result.outcome, result.reason))
    return text


def _pending(pending: PendingRollModel | None) -> str:
    if pending is None:
        return "none"
    dice = " ".join(str(d) if d else "?" for d in pending.dice)
    return f"roll {pending.roll_id} {dice} ({pending.reason})"


def _craps(view: TableView) -> RenderableType:
    parts: list[RenderableType] = []
    board = view.board
    if board is None:
        parts.append(Text("Bonus Craps: no board received yet", style="dim"))
    else:
        head = Text(f"Bonus Craps · pay table {board.paytable} · ", style="bold")
        head.append_text(_betting(board.betting_open))
        head.append(f" · pending {_pending(board.pending_roll)}")
        parts.append(head)
        lammers = Table(box=box.SQUARE)
        hit = set(board.numbers_hit)
        for number in LAMMER_NUMBERS:
            lammers.add_column(str(number), justify="center")
        # Bonus Craps rule (1)(e): the dealer marks a rolled number with a lammer.
        lammers.add_row(
            *(Text("●", "bold yellow") if n in hit else Text("·", "dim") for n in LAMMER_NUMBERS)
        )
        parts.append(lammers)
        bets = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for column in ("Bet", "Pays", "Remaining", "Chance", "State"):
            bets.add_column(column)
        for key in ("all_small", "all_tall", "make_em_all"):
            bet: BetProgressModel = getattr(board, key)
            state = Text("COMPLETE", "bold green") if bet.complete else Text("live")
            needs = " ".join(str(n) for n in sorted(bet.remaining)) or "-"
            chance = _chance_text(bet.chance)
            bets.add_row(BET_NAMES[key], _odds_text(bet.pays), needs, chance, state)
        parts.append(bets)
    if view.rolls:
        parts.append(Text("Last rolls", style="bold"))
        rolls = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for column in ("Roll", "Dice", "Total", "Status", "Reason"):
            rolls.add_column(column)
        for roll in reversed(view.rolls.values()):
            dice = " ".join(str(d) if d else "?" for d in roll.dice)
            rolls.add_row(
                str(roll.roll_id),
                dice,
                "?" if roll.total is None else str(roll.total),
                Text(roll.status, _ROLL_STYLES[roll.status]),
                roll.reason or "",
            )
        parts.append(rolls)
    for line in reversed(view.craps_results):
        text = Text(f"roll {line.roll_id}  {BET_NAMES[line.bet]}  ")
        if line.outcome == "win":
            text.append(f"WIN {_odds_text(line.pays)}", style="bold green")
        elif line.outcome == "lose":
            text.append("LOSE", style="red")
        if line.reversed:
            text.stylize("strike")
            text.append("  reversed: the roll was declared invalid", style="bold yellow")
        parts.append(text)
    return Group(*parts)


def _bust_bonus(view: TableView) -> RenderableType:
    parts: list[RenderableType] = []
    state, result = view.bust_state, view.bust_result
    if state is None:
        parts.append(Text("Bust Bonus: no round received yet", style="dim"))
    else:
        head = Text(f"Bust Bonus · round {state.round_id or '-'} · ", style="bold")
        head.append_text(_betting(state.betting_open))
        parts.append(head)
        cards = Text("Up card: ")
        cards.append_text(card_text(state.up_card) if state.up_card else Text("-"))
        cards.append("   Dealer: ")
        cards.append_text(cards_text(state.dealer_cards) if state.dealer_cards else Text("-"))
        parts.append(cards)
    if result is not None:
        total = "?" if result.total is None else result.total
        text = Text(f"Round {result.round_id}: ", style="bold")
        match result.outcome:
            case "win":
                text.append("WIN ", style="bold green")
                text.append(f"dealer busts with {total}")
                # sd-bust-bonus.txt rule (12): the pays depend on suited and three 8s.
                text.append(", suited" if result.suited else ", off-suit")
                if result.three_eights:
                    text.append(", three 8s")
                text.append(f"  pays {_odds_text(result.pays)}", style="bold green")
            case "lose":
                text.append("LOSE ", style="red")
                text.append(f"dealer stands on {total}")
            case "void" | "flagged":
                text.append_text(_unpaid(result.outcome, result.reason))
        parts.append(text)
        if result.dealer_cards:
            cards = Text("  up card ")
            cards.append_text(card_text(result.up_card) if result.up_card else Text("-"))
            cards.append("  dealer ")
            cards.append_text(cards_text(result.dealer_cards))
            parts.append(cards)
    return Group(*parts)


def render_table(view: TableView) -> RenderableType:
    """One table's panel: header, devices, alarms, its game's side bets, warnings."""
    parts: list[RenderableType] = [_header(view), _devices(view), _alarms(view)]
    game = view.game
    # A section shows for the table's game, and for any game it has data of (a display
    # that has not yet received ``state`` still draws what it has).
    if game in POKER_GAMES or view.payouts or view.cover_all_result:
        parts += [Text(""), _cover_all(view)]
    if game == "CRAPS" or view.board or view.rolls or view.craps_results:
        parts += [Text(""), _craps(view)]
    if game == "BJ" or view.bust_state or view.bust_result:
        parts += [Text(""), _bust_bonus(view)]
    if view.warnings:
        parts.append(Text(""))
    parts.extend(Text(f"! {warning}", style="yellow") for warning in view.warnings)
    return Panel(Group(*parts), title=f"[b]Table {view.table}[/b]", border_style="blue")


def render(
    views: Sequence[TableView], *, side_by_side: bool = False, link: str | None = None
) -> RenderableType:
    """Every table, side by side or stacked, with the broker link's state on top."""
    panels = [render_table(view) for view in views]
    body: RenderableType
    if side_by_side and len(panels) > 1:
        grid = Table.grid(expand=True, padding=(0, 1))
        for _ in panels:
            grid.add_column(ratio=1)
        grid.add_row(*panels)
        body = grid
    else:
        body = Group(*panels)
    if link is None:
        return body
    return Group(Text(link, style="dim"), body)


# ---------------------------------------------------------------------------------------
# The async shell


@dataclass
class Link:
    """The display's own connection to the broker, drawn above the tables: ``host`` and
    ``port`` are the node in use; ``nodes`` every node to try in turn (the floor's), the
    login and the TLS context."""

    host: str
    port: int
    connected: bool = False
    ever_connected: bool = False
    error: str | None = None
    nodes: list[tuple[str, int]] = field(default_factory=list)
    user: str | None = None
    password: str | None = None
    tls: ssl.SSLContext | None = None

    def next_node(self) -> bool:
        """Move to the next node; True when a round of every node is complete."""
        nodes = self.nodes or [(self.host, self.port)]
        i = nodes.index((self.host, self.port)) if (self.host, self.port) in nodes else -1
        i = (i + 1) % len(nodes)
        self.host, self.port = nodes[i]
        return i == 0

    def describe(self) -> str:
        """One line for the screen."""
        where = f"broker {self.host}:{self.port}"
        if self.connected:
            return f"{where}: connected"
        if self.error is not None:
            return f"{where}: unreachable ({self.error}); retrying"
        return f"{where}: connecting"


def _payload_bytes(payload: object) -> bytes:
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    if payload is None:
        return b""
    return str(payload).encode()


async def follow(  # noqa: C901  112 lines: the reconnect loop and its two closures (the sync, the resends) share its state
    views: Sequence[TableView],
    link: Link,
    *,
    on_change: Callable[[], None],
    rng: random.Random,
    synced: asyncio.Event | None = None,
    backoff: Backoff | None = None,
) -> None:
    """Subscribe to every table and feed the ``Screen`` until cancelled, reconnecting
    forever (the next node at once, the backoff after a round of every node failing).

    ``synced`` is set once the retained state of every table has been delivered after a
    connect: the display publishes to a topic of its own after subscribing, and the broker
    delivers that message after the retained ones it queued for the subscriptions. A
    logged-in display (broker-config's ``display-NAME``, the floor's ``display``) may not
    publish it: for it, ``synced`` is set once every table's ``availability`` and ``state``
    have come and no topic's first retained message has come for ``RETAINED_SETTLE_S``
    (the broker sends a subscription's retained messages together, at once).
    """
    identifier = f"lammer-display-{os.getpid()}-{rng.getrandbits(32):08x}"
    sync_topic = f"lammer-display/{identifier}/sync"
    delays = backoff or Backoff()
    attempt = 0
    screen = Screen(views)  # one feed across reconnects: what was seen stays seen
    loop = asyncio.get_running_loop()
    last_retained = [loop.time()]  # when a topic's first retained message last came
    retained_topics: set[str] = set()

    def settled() -> bool:
        """A logged-in display's sync: every table's state in, the retained burst over."""
        return (
            link.user is not None
            and all(v.availability is not None and v.state is not None for v in views)
            and loop.time() - last_retained[0] >= RETAINED_SETTLE_S
        )

    async def requests(client: aiomqtt.Client) -> None:
        while screen.resends:
            resend = screen.resends.popleft()
            payload = resend.payload(link.user or "display")
            topic = resend.topic_for(link.user)  # mqtt-api.md 1.4: at the user's own level
            await bounded(client.publish(topic, payload, qos=1))

    async def ticker(client: aiomqtt.Client) -> None:
        while True:
            deadline = screen.feed.next_deadline()
            await asyncio.sleep(0.25 if deadline is None else min(0.25, deadline - loop.time()))
            if screen.tick(loop.time()):
                on_change()
            if synced is not None and not synced.is_set() and settled():
                synced.set()
            # A lost request is asked again after the feed's timeout.
            with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                await requests(client)

    while True:
        try:
            client = aiomqtt.Client(
                link.host,
                link.port,
                identifier=identifier,
                username=link.user,
                password=link.password,
                tls_context=link.tls,
                timeout=UNBOUNDED,  # see contract.session
                # Nagle off, as everywhere in lammer (40 ms stalls otherwise).
                socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
            )
            async with session(client):
                for view in views:
                    await bounded(client.subscribe(f"{view.base}/#", qos=1))
                if link.user is None:
                    # A logged-in display (broker-config's display-NAME, the floor's display)
                    # may publish nothing but request/resend: it syncs by settled() instead.
                    await bounded(client.subscribe(sync_topic, qos=1))
                    await bounded(client.publish(sync_topic, b"sync", qos=1))
                link.connected, link.ever_connected, link.error = True, True, None
                attempt = 0
                on_change()
                tick = asyncio.create_task(ticker(client))
                try:
                    async for message in client.messages:
                        topic = message.topic.value
                        if topic == sync_topic:
                            if synced is not None:
                                synced.set()
                            continue
                        data = _payload_bytes(message.payload)
                        retained = bool(message.retain)
                        if retained and topic not in retained_topics:
                            # A topic's first retained message: the burst goes on. (A floor
                            # node may flag its live messages retained too: not counted.)
                            retained_topics.add(topic)
                            last_retained[0] = loop.time()
                        if screen.receive(topic, data, now=loop.time(), retained=retained):
                            on_change()
                        await requests(client)
                finally:
                    # Not ``cancel(); await tick`` under a suppress: that would swallow our
                    # own cancellation if it came during the wait (contract.tasks).
                    await cancel_and_wait([tick])
        except (aiomqtt.MqttError, OSError) as exc:  # TimeoutError is an OSError
            link.connected, link.error = False, str(exc) or type(exc).__name__
            on_change()
        if link.next_node():
            # A round of every node failed: jittered, capped backoff, so many displays do
            # not reconnect in step.
            await asyncio.sleep(delays.delay(attempt, rng))
            attempt += 1
        else:
            await asyncio.sleep(0.05)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``lammer display``."""
    parser.add_argument("--host", default="127.0.0.1", help="MQTT broker host")
    parser.add_argument("--port", type=int, default=1883, help="MQTT broker port")
    parser.add_argument(
        "--mqtt-host",
        metavar="HOST[:PORT],...",
        help="the broker, or every node of the floor in the order to try "
        "(instead of --host; a node without a port gets --port)",
    )
    parser.add_argument("--mqtt-user", metavar="NAME", help="log in as this user")
    parser.add_argument(
        "--mqtt-password-file",
        type=Path,
        metavar="FILE",
        help="the user's password: the file's first line (broker-config's credentials/NAME)",
    )
    parser.add_argument(
        "--mqtt-ca-file",
        type=Path,
        metavar="FILE",
        help="connect over TLS, verifying the broker with this CA (the floor's ca.crt)",
    )
    parser.add_argument("--prefix", default="lammer", help="topic prefix (mqtt-api.md)")
    parser.add_argument(
        "--table",
        action="append",
        required=True,
        metavar="ID",
        help="a table id to draw; repeat for several tables",
    )
    parser.add_argument(
        "--layout",
        choices=("auto", "columns", "stack"),
        default="auto",
        help="tables side by side (columns), one under the other (stack), or by width",
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="print one frame once the retained state has arrived, then exit",
    )
    parser.add_argument(
        "--exit-after",
        type=float,
        metavar="SECONDS",
        help="exit after this long (with --once: the longest wait for the state; default 5)",
    )


class OptionError(ValueError):
    """An option of ``lammer display`` that cannot be used, said in one sentence."""


def link_of(args: argparse.Namespace) -> Link:
    """The ``Link`` the options describe; ``OptionError`` saying what is wrong."""
    from foundation.endpoints import parse_nodes

    try:
        nodes = parse_nodes(args.mqtt_host, args.port) if args.mqtt_host else []
    except ValueError as exc:
        raise OptionError(f"--mqtt-host: {exc}") from None
    if not nodes:
        nodes = [(args.host, args.port)]
    password: str | None = None
    if args.mqtt_password_file is not None:
        if args.mqtt_user is None:
            raise OptionError("--mqtt-password-file needs --mqtt-user (whose password it is)")
        try:
            lines = args.mqtt_password_file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            raise OptionError(f"--mqtt-password-file {args.mqtt_password_file}: {why}") from None
        password = lines[0] if lines else ""
    tls: ssl.SSLContext | None = None
    if args.mqtt_ca_file is not None:
        try:
            tls = ssl.create_default_context(cafile=str(args.mqtt_ca_file))
        except (OSError, ssl.SSLError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            raise OptionError(f"--mqtt-ca-file {args.mqtt_ca_file}: {why}") from None
        tls.minimum_version = ssl.TLSVersion.TLSv1_2
    host, port = nodes[0]
    return Link(host=host, port=port, nodes=nodes, user=args.mqtt_user, password=password, tls=tls)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``lammer display``; 0, 1 when the broker was never reached, 2 for
    an option that cannot be used."""
    try:
        link = link_of(args)
    except OptionError as exc:
        print(f"lammer display: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_display(args, link))
    except KeyboardInterrupt:
        return 0


def _side_by_side(layout: str, console: Console, tables: int) -> bool:
    if layout == "auto":
        return console.width >= 50 * tables  # narrower panels wrap too much
    return layout == "columns"


async def _display(args: argparse.Namespace, link: Link) -> int:
    views = [TableView(table=table, prefix=args.prefix) for table in dict.fromkeys(args.table)]
    console = Console()
    side_by_side = _side_by_side(args.layout, console, len(views))
    changed, synced, stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
    # SIGTERM (from ``lammer demo`` or a service manager) ends the display like Ctrl-C,
    # leaving Live to restore the terminal's cursor.
    loop = asyncio.get_running_loop()

    def stopping() -> None:
        if not stop.is_set():  # the last resort of a stop that hangs (contract.tasks)
            exit_after(STOP_DEADLINE_S, "lammer display")
        stop.set()

    loop.add_signal_handler(signal.SIGTERM, stopping)
    follower = asyncio.create_task(
        follow(views, link, on_change=changed.set, rng=random.Random(), synced=synced)  # noqa: S311  reconnect jitter, not a secret
    )
    main: asyncio.Task[object]
    if args.once:
        main = asyncio.create_task(synced.wait())
        timeout = args.exit_after if args.exit_after is not None else 5.0
    else:
        main = asyncio.create_task(_paint(views, link, console, changed, side_by_side=side_by_side))
        timeout = args.exit_after
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({main, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if main.done():
            main.result()  # surfaces a failure of the painter instead of hiding it
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        await cancel_and_wait([follower, main, stopper])
    if args.once:
        status = link.describe().removesuffix("; retrying")  # it is not: it exits now
        console.print(render(views, side_by_side=side_by_side, link=status))
    return 0 if link.ever_connected else 1


async def _paint(
    views: Sequence[TableView],
    link: Link,
    console: Console,
    changed: asyncio.Event,
    *,
    side_by_side: bool,
) -> None:
    with Live(
        render(views, side_by_side=side_by_side, link=link.describe()),
        console=console,
        auto_refresh=False,  # refreshed from this task, so no thread reads the views
    ) as live:
        while True:
            await changed.wait()
            changed.clear()
            live.update(
                render(views, side_by_side=side_by_side, link=link.describe()), refresh=True
            )
            await asyncio.sleep(0.1)  # at most ten frames a second under a burst
