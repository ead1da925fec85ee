"""One table: the pure state machine the daemon drives, and the checks that span games.

``apply(state, event, at=...) -> (state, outcomes)`` is the only way the table changes.
It routes each fact or decision to the game's own machine (``poker_round``,
``bust_bonus``, ``craps``) and adds the checks that are not any one game's:

* **Mode** (shuffler-icd.md, "What the host must check"; Cover All Bonus rule (1), "the
  i-Deal Shuffler must be set to the appropriate game being played"): while the
  shuffler's ``MODE`` differs from the table's game, or before the shuffler has reported
  one, an alarm ``MODE_MISMATCH`` is active and no payout is published: a round with any
  frame in that time is flagged, without cards.
* **Deck check** (``DECK`` other than ``OK``): alarm ``DECK_FAULT`` until the next
  ``OK``; a round dealt from that deck is flagged.
* **Device status** (link-layer.md, "Device status"): every code but ``READY`` is a tilt,
  alarm ``DEVICE_FAULT_<code>`` (one per device and code) until ``READY``. A tilt alone
  flags no round: the shuffler's own checks (cards, counts, deck) decide that. Bounded, so
  that a device cannot grow the ``alarms`` payload without end: a device keeps at most
  ``MAX_DEVICE_FAULTS`` (32) codes as alarms of their own; further codes (and a code
  ``OTHER``, whose alarm that would be) are counted in one ``DEVICE_FAULT_OTHER`` whose
  message says how many codes it stands for (up to ``MAX_OTHER_FAULTS``, 32, then "at
  least": it stops changing); a code is kept to ``MAX_FAULT_CODE`` (64) characters, a text to
  ``MAX_FAULT_TEXT`` (160). ``READY`` clears them all.
* **Link**: alarm ``DISCONNECTED`` while a configured device's port is down.
* **Bad frames** (link-layer.md "Frames", ``BadFrameSeen``): alarm ``LINK_ERRORS`` when a
  device sends more than ``LINK_ERRORS_MAX`` (20) bad frames within ``LINK_ERRORS_WINDOW``
  (10 s), or noise (``NoiseSeen``: bytes outside any frame) ``LINK_NOISE_MAX`` (6) times
  with no good frame between (a line at the wrong baud rate: no frame arrives at all,
  so no bad frame either); it clears on the host's timer (``TimePassed``) once
  ``LINK_ERRORS_QUIET`` (60 s) has passed without a bad frame or noise
  (``LINK_ERRORS_STEP``, 1 s, later at most). No payout stops: the good frames still
  arrive, each exactly once.
* **Roll backlog** (dice-reader-icd.md, "What the host must do": rolls after a pending
  ``CHECK`` wait behind it, in order, however many): alarm ``ROLL_BACKLOG`` (device
  ``dice_reader``) while more than ``ROLL_BACKLOG_MAX`` (20) rolls wait behind the pending
  one, naming it; it clears when 20 or fewer wait. No payout stops.
* **Frames for another game** (a ``ROLL`` at a poker table, a ``CARD`` outside ``BJ``):
  alarm ``UNEXPECTED_FRAME`` until the device says ``HELLO`` again; the frame changes
  nothing.
* **Late frames** (shuffler-icd.md, "What the host must check": a late frame for a settled
  or void round "raises an alarm and is journaled for review, but does not publish a second
  result for that round"): a game's machine answers a frame for a round it has closed, or a
  copy of a roll it has recorded, with an ``AlarmRaised`` ``LATE_FRAME`` instead of a result;
  the table keeps it among its alarms (one per device: a later late frame updates its
  message) and flags nothing, whatever the shuffler's mode or deck. It clears when the
  device's play goes on in order: for the shuffler, the next ``SETTLE``, ``END`` or ``VOID``
  of the open round; for the dice reader, the next roll event recorded; or when the device
  says ``HELLO``. A ``HELLO`` also ends the game's memory of closed rounds and recent rolls
  (shuffler-icd.md: a round counter may start again after power-up).

The time of each event is passed in (``at``); nothing here reads a clock, so replaying
the journal with its recorded times rebuilds the table exactly, alarms' ``since``
included. A ``BadFrameSeen`` or a ``TimePassed`` that changes nothing returns the state
itself: the daemon journals those only when the state changed (a flood of bad frames then
costs about one record a second), and the replay is still exact.

``warm_up(game)`` builds the tables a first event would otherwise build on first use (the
seven-card table of Ultimate Texas Hold'em: up to half a second); the daemon calls it
before it replays the journal and says it is ready.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final, Generic, TypeVar, assert_never, get_args

from rules import bust_bonus, craps, craps_odds, poker, poker_round
from rules.errors import ConfigError, DecisionError
from rules.events import (
    LATE_FRAME,
    POKER_GAMES,
    TABLE_GAMES,
    AlarmAcknowledged,
    AlarmCleared,
    AlarmRaised,
    BadFrameSeen,
    BrokerLoginChecked,
    CardDrawn,
    CleanStart,
    ClockJumped,
    DealerDone,
    Decision,
    DeckChecked,
    Device,
    DeviceConnected,
    DeviceDisconnected,
    DeviceFact,
    DeviceHello,
    DeviceStatus,
    DiceFact,
    DiceRolled,
    DiskSpaceChecked,
    Game,
    HandDealt,
    JournalRefused,
    JournalWritable,
    ModeReported,
    NoiseSeen,
    NoRoll,
    Outcome,
    RollCheck,
    RollDecided,
    RollRecorded,
    RollVoided,
    RoundDealt,
    RoundSettled,
    RoundVoided,
    ShufflerFact,
    SoftwareChecked,
    TableGame,
    TimePassed,
    VoidOverturned,
)
from rules.paytables import BET_RULES

HostFact = (
    TimePassed
    | ClockJumped
    | CleanStart
    | JournalRefused
    | JournalWritable
    | DiskSpaceChecked
    | BrokerLoginChecked
    | SoftwareChecked
)
"""What the host itself tells the table: its timer, a jump of its clock, a clean start."""

TableEvent = DeviceFact | Decision | AlarmAcknowledged | HostFact
"""Everything ``apply`` takes: a device fact, a stickperson's decision, a host fact."""


MAX_DEVICE_FAULTS: Final = 32
"""Distinct ``STATUS`` fault codes a device keeps as alarms of their own at a time; further
codes are counted in one ``DEVICE_FAULT_OTHER`` alarm (module docstring)."""
MAX_FAULT_CODE: Final = 64
"""Characters of a ``STATUS`` code kept (the specs' codes are a dozen or two)."""
MAX_FAULT_TEXT: Final = 160
"""Characters of a ``STATUS`` text kept (free text for people, link-layer.md)."""
MAX_OTHER_FAULTS: Final = 32
"""Distinct codes beyond ``MAX_DEVICE_FAULTS`` that ``DEVICE_FAULT_OTHER`` counts one by
one; beyond this its message says "at least" and stops changing, so distinct codes change
the alarms at most 64 times between two ``READY``."""
FAULT_OTHER: Final = "DEVICE_FAULT_OTHER"

CLOCK_JUMP: Final = "CLOCK_JUMP"
CLOCK_JUMP_QUIET: Final = timedelta(hours=1)
"""``CLOCK_JUMP`` clears this long after the jump (or at a clean start)."""

JOURNAL_FAULT: Final = "JOURNAL_FAULT"
"""The journal refuses to write: raised by ``JournalRefused``, cleared by ``JournalWritable``."""
JOURNAL_ERROR_TEXT: Final = 160
"""Characters of the journal's error kept in the alarm's message."""

DISK_LOW: Final = "DISK_LOW"
"""Less free space on the journal's disk than the hours configured of its growth need."""
DISK_LOW_MARGIN: Final = 10
"""``DISK_LOW`` clears only once the free space exceeds the need by this many percent, so
a disk hovering at the line does not raise and clear it at every check."""
MB: Final = 1_000_000

MQTT_LOGIN: Final = "MQTT_LOGIN_REFUSED"
"""The broker refuses the table's login after it started (a password changed on the broker
and not in the table's ``password_file``): raised and cleared by ``BrokerLoginChecked``."""

SOFTWARE: Final = "SOFTWARE"
"""The installed software matches no approved release manifest: raised and
cleared by ``SoftwareChecked`` at start; the host keeps the table closed while it is."""
SOFTWARE_TEXT: Final = 300
"""Characters of the check's sentence kept in the alarm's message."""

LINK_ERRORS: Final = "LINK_ERRORS"
LINK_ERRORS_MAX: Final = 20
"""``LINK_ERRORS`` is raised when a device sends more than this many bad frames within
``LINK_ERRORS_WINDOW``."""
LINK_ERRORS_WINDOW: Final = timedelta(seconds=10)
LINK_ERRORS_QUIET: Final = timedelta(seconds=60)
"""``LINK_ERRORS`` clears once this long has passed without a bad frame from the device."""
LINK_ERRORS_STEP: Final = timedelta(seconds=1)
"""While ``LINK_ERRORS`` is active, the time of the latest bad frame is kept to within this
much (a later bad frame inside it changes nothing, so it needs no journal record); the
alarm clears once ``LINK_ERRORS_QUIET`` plus this has passed since the time kept, which is
never less than ``LINK_ERRORS_QUIET`` since the latest bad frame."""
LINK_NOISE_MAX: Final = 6
"""``LINK_ERRORS`` is raised when a device sends noise this many times (reads with bytes
outside any frame) with no good frame between: link-layer.md's device sends a frame once
and, unacknowledged, 5 times more within 500 ms each; noise six times in a row means at
least one frame was lost to every one of them. A bad frame (``BadFrameSeen``) neither ends
such a run nor adds to it: bad frames have the rate rule above."""

ROLL_BACKLOG: Final = "ROLL_BACKLOG"
ROLL_BACKLOG_MAX: Final = 20
"""``ROLL_BACKLOG`` is active while more than this many rolls wait behind a pending one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Alarm:
    """An active alarm, as ``alarms`` publishes it (``since`` is when it was raised)."""

    code: str
    device: Device | None
    message: str
    since: datetime
    # mqtt-api.md 1.3 alarm_ack: who acknowledged it and when (None until then); kept
    # while the alarm stays active, even if its message changes.
    acknowledged_by: str | None = None
    acknowledged_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceState:
    """What the table knows of one device."""

    connected: bool = False
    faults: tuple[tuple[str, str], ...] = ()  # active STATUS codes with their text
    other_faults: tuple[str, ...] = ()  # codes beyond MAX_DEVICE_FAULTS, as counted
    mode: Game | None = None  # shuffler only
    deck: str | None = None  # shuffler only: last DECK result
    hello: DeviceHello | None = None
    # While LINK_ERRORS is not active: the times of its latest bad frames in the window.
    bad_frames: tuple[datetime, ...] = ()
    # While LINK_ERRORS is active: the time of its latest bad frame or noise (to
    # LINK_ERRORS_STEP).
    last_bad_frame: datetime | None = None
    # While LINK_ERRORS is not active: noise seen since its latest good frame or connect.
    noise: int = 0

    @property
    def status(self) -> str:
        """``READY``, or the first active fault code."""
        return self.faults[0][0] if self.faults else "READY"


@dataclass(frozen=True, slots=True, kw_only=True)
class TableState:
    """The whole table: configuration, devices, alarms and the game's own state."""

    game: TableGame
    devices: tuple[tuple[Device, DeviceState], ...]
    alarms: tuple[Alarm, ...] = ()
    poker: poker_round.PokerRoundState | None = None
    bust: bust_bonus.BustBonusState | None = None
    craps: craps.CrapsState | None = None
    # The round (id) the table itself flagged for mode or deck, and whose outcomes from the
    # game's machine are therefore withheld: at most one round is open at a time.
    withheld_round: int | None = None
    # When the host's clock last jumped (CLOCK_JUMP active since), by the clock after it.
    clock_jumped: datetime | None = None

    def device(self, name: Device) -> DeviceState:
        """The state of a configured device (``KeyError`` for one the table does not use)."""
        for key, value in self.devices:
            if key == name:
                return value
        raise KeyError(name)


def devices_for(game: TableGame) -> tuple[Device, ...]:
    """The devices a table of ``game`` uses."""
    return ("dice_reader",) if game == "CRAPS" else ("shuffler",)


def initial_state(
    game: str,
    *,
    at: datetime,
    craps_paytable: int = 1,
    decks: int = 6,
    dealer_hits_soft_17: bool = False,
) -> TableState:
    """A table that has just started: devices not yet connected (alarmed), nothing dealt."""
    if game not in TABLE_GAMES:
        raise ConfigError(f"unknown table game {game!r}: expected one of {', '.join(TABLE_GAMES)}")
    table_game: TableGame = game
    devices = devices_for(table_game)
    state = TableState(
        game=table_game,
        devices=tuple((d, DeviceState()) for d in devices),
        poker=poker_round.initial_state(table_game) if table_game in POKER_GAMES else None,
        bust=bust_bonus.initial_state(decks, dealer_hits_soft_17) if table_game == "BJ" else None,
        craps=craps.initial_state(craps_paytable) if table_game == "CRAPS" else None,
    )
    alarms = [
        Alarm(
            code="DISCONNECTED",
            device=d,
            message=f"{_label(d)} is not connected",
            since=at,
        )
        for d in devices
    ]
    if table_game != "CRAPS":
        alarms.append(_mode_alarm(table_game, None, at))
    return replace(state, alarms=tuple(alarms))


def apply(  # noqa: C901  one match over the table's event kinds, each a call
    state: TableState, event: TableEvent, *, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    """The table after ``event`` at time ``at``, and what it concluded.

    Raises ``rules.errors.DecisionError`` for an illegal decision; the state is then
    unchanged (every state here is immutable). A ``BadFrameSeen`` or a ``TimePassed`` that
    changes nothing returns ``state`` itself and no outcome: the daemon journals those
    only when the state changed, and a replay of what it journaled is exact.
    """
    state = _good_frame(state, event)
    match event:
        case DeviceConnected(device=device):
            return _link(state, device, connected=True, reason="", at=at)
        case DeviceDisconnected(device=device, reason=reason):
            return _link(state, device, connected=False, reason=reason, at=at)
        case DeviceHello():
            return _hello(state, event, at)
        case DeviceStatus():
            return _status(state, event, at)
        case BadFrameSeen(device=device):
            return _bad_frame(state, device, at)
        case NoiseSeen(device=device):
            return _noise(state, device, at)
        case TimePassed():
            return _time_passed(state, at)
        case ClockJumped(milliseconds=ms):
            return _clock_jumped(state, ms, at)
        case CleanStart():
            state = replace(state, clock_jumped=None)
            return _clear(state, CLOCK_JUMP, None)
        case JournalRefused(error=error):
            return _raise(state, JOURNAL_FAULT, None, _journal_fault_message(error), at)
        case JournalWritable():
            return _clear(state, JOURNAL_FAULT, None)
        case DiskSpaceChecked():
            return _disk_space(state, event, at)
        case BrokerLoginChecked(refused=False):
            return _clear(state, MQTT_LOGIN, None)
        case BrokerLoginChecked(user=user):
            who = "without a user" if user is None else f"as {user!r}"
            message = (
                f"the MQTT broker refuses the table's login {who}: no display sees the table "
                "(every event waits in the journal); check username and password_file"
            )
            return _raise(state, MQTT_LOGIN, None, message, at)
        case SoftwareChecked(problem=problem):
            if problem is None:
                return _clear(state, SOFTWARE, None)
            return _raise(state, SOFTWARE, None, problem[:SOFTWARE_TEXT], at)
        case ModeReported(game=mode):
            return _mode(state, mode, at)
        case DeckChecked(result=result):
            return _deck(state, result, at)
        case (
            HandDealt() | RoundDealt() | RoundSettled() | CardDrawn() | DealerDone() | RoundVoided()
        ):
            return _card_frame(state, event, at)
        case DiceRolled() | NoRoll() | RollCheck():
            if state.craps is None:
                return _unexpected(state, "dice_reader", event, at)
            new_craps, outcomes = craps.apply(state.craps, event, at=at)
            state, outcomes = _game_alarms(replace(state, craps=new_craps), outcomes, at)
            if any(isinstance(o, RollRecorded) for o in outcomes):  # recorded in order
                state, cleared = _clear(state, LATE_FRAME, "dice_reader")
                outcomes += cleared
            return _backlog(state, outcomes, at)
        case AlarmAcknowledged():
            return _acknowledge(state, event), ()
        case RollDecided() | RollVoided() | VoidOverturned():
            if state.craps is None:
                raise _not_craps(event.roll_id)
            new_craps, outcomes = craps.apply(state.craps, event)
            return _backlog(replace(state, craps=new_craps), outcomes, at)
        case _:
            assert_never(event)


# ---------------------------------------------------------------------------------------
# Views for the daemon


def alarms(state: TableState) -> tuple[Alarm, ...]:
    """Active alarms, oldest first."""
    return state.alarms


def warm_up(game: str) -> tuple[str, ...]:
    """Build now what the first event of a ``game`` table would otherwise build on first
    use, so that no frame waits for it (link-layer.md: the host ACKs within 250 ms): the
    seven-card table for Ultimate Texas Hold'em (``rules.poker.build_standard7``, up to
    half a second), the Bonus Craps odds of every board for craps. Returns the names of
    what is built (for the log). Idempotent; no I/O, nothing random: only tables that the
    rules would build the same on first use."""
    if game == "UTH":
        poker.build_standard7()
        return ("seven-card hand values",)
    if game == "CRAPS":
        craps_odds.probability_before_seven(BET_RULES["make_em_all"].numbers)
        return ("Bonus Craps odds of every board",)
    return ()


def open_round_id(state: TableState) -> int | None:
    """The card round in progress, for log context."""
    found = _card_game(state)
    return None if found is None else found[0].open_round_id(found[1])


# ---------------------------------------------------------------------------------------
# Devices and alarms


def _label(device: Device) -> str:
    return "the shuffler" if device == "shuffler" else "the dice reader"


def _set_device(state: TableState, device: Device, new: DeviceState) -> TableState:
    return replace(state, devices=tuple((d, new if d == device else s) for d, s in state.devices))


def _raise(
    state: TableState, code: str, device: Device | None, message: str, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    """Raise an alarm, or update the message of the same active one."""
    for alarm in state.alarms:
        if alarm.code == code and alarm.device == device:
            if alarm.message == message:
                return state, ()
            kept = tuple(replace(a, message=message) if a is alarm else a for a in state.alarms)
            return replace(state, alarms=kept), (
                AlarmRaised(code=code, device=device, message=message),
            )
    new = Alarm(code=code, device=device, message=message, since=at)
    return replace(state, alarms=(*state.alarms, new)), (
        AlarmRaised(code=code, device=device, message=message),
    )


def _clear(
    state: TableState, code: str, device: Device | None
) -> tuple[TableState, tuple[Outcome, ...]]:
    kept = tuple(a for a in state.alarms if not (a.code == code and a.device == device))
    if len(kept) == len(state.alarms):
        return state, ()
    return replace(state, alarms=kept), (AlarmCleared(code=code, device=device),)


def _acknowledge(state: TableState, ack: AlarmAcknowledged) -> TableState:
    """``alarm_ack``: every active alarm of that code is marked acknowledged; nothing else
    changes (no payout, no other alarm). ``DecisionError`` when none is active or it was
    acknowledged already (the first acknowledgement stands)."""
    matching = [a for a in state.alarms if a.code == ack.code]
    if not matching:
        raise DecisionError(f"no alarm {ack.code} is active at this table: nothing to acknowledge")
    for done in matching:  # acknowledged_at is set with acknowledged_by, always
        if done.acknowledged_at is not None:
            raise DecisionError(
                f"alarm {ack.code} was acknowledged already by {done.acknowledged_by} at "
                f"{done.acknowledged_at.strftime('%H:%M:%S')} UTC"
            )
    kept = tuple(
        replace(a, acknowledged_by=ack.operator, acknowledged_at=ack.at)
        if a.code == ack.code
        else a
        for a in state.alarms
    )
    return replace(state, alarms=kept)


def _fault_code(code: str) -> str:
    return f"DEVICE_FAULT_{code}"


def _link(
    state: TableState, device: Device, *, connected: bool, reason: str, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    if device not in dict(state.devices):
        return _unexpected(state, device, None, at)
    state = _set_device(state, device, replace(state.device(device), connected=connected))
    if connected:
        return _clear(state, "DISCONNECTED", device)
    why = f": {reason}" if reason else ""
    return _raise(state, "DISCONNECTED", device, f"{_label(device)} is not connected{why}", at)


def _hello(
    state: TableState, hello: DeviceHello, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    if hello.device not in dict(state.devices):
        return _unexpected(state, hello.device, None, at)
    state = _set_device(state, hello.device, replace(state.device(hello.device), hello=hello))
    # A HELLO starts the device afresh: its round or roll counter may start again
    # (shuffler-icd.md "What the host must check"), so earlier round and roll ids are
    # forgotten; a frame for another game, or a late one, was the old session's.
    if hello.device == "shuffler":
        found = _card_game(state)
        if found is not None:
            machine, rounds = found
            state = machine.put(state, machine.forget_closed(rounds))
    elif state.craps is not None:
        state = replace(state, craps=craps.forget_recent(state.craps))
    state, unexpected = _clear(state, "UNEXPECTED_FRAME", hello.device)
    state, late = _clear(state, LATE_FRAME, hello.device)
    return state, unexpected + late


def _status(
    state: TableState, status: DeviceStatus, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    device = status.device
    if device not in dict(state.devices):
        return _unexpected(state, device, None, at)
    current = state.device(device)
    outcomes: list[Outcome] = []
    if status.code == "READY":
        # link-layer.md: READY clears every earlier fault code of that device.
        for code, _text in current.faults:
            state, out = _clear(state, _fault_code(code), device)
            outcomes.extend(out)
        state, out = _clear(state, FAULT_OTHER, device)
        outcomes.extend(out)
        cleared = replace(current, faults=(), other_faults=())
        return _set_device(state, device, cleared), tuple(outcomes)
    code = status.code[:MAX_FAULT_CODE]
    known = any(c == code for c, _ in current.faults)
    if not known and (len(current.faults) >= MAX_DEVICE_FAULTS or _fault_code(code) == FAULT_OTHER):
        return _other_fault(state, device, current, code, at)
    text = status.text
    if len(text) > MAX_FAULT_TEXT:
        text = text[: MAX_FAULT_TEXT - 3] + "..."
    faults = tuple((c, t) for c, t in current.faults if c != code)
    state = _set_device(state, device, replace(current, faults=(*faults, (code, text))))
    cut = f" (code cut to {MAX_FAULT_CODE} characters)" if code != status.code else ""
    message = f"{_label(device)} reports {code}{cut}{f': {text}' if text else ''}"
    return _raise(state, _fault_code(code), device, message, at)


def _other_fault(
    state: TableState, device: Device, current: DeviceState, code: str, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    """A fault code beyond the ``MAX_DEVICE_FAULTS`` kept (or the code ``OTHER`` itself,
    whose alarm code this one is): counted in ``DEVICE_FAULT_OTHER``, whose message changes
    only when the count does, so a device that cycles through codes is not republished
    once per frame."""
    if code in current.other_faults or len(current.other_faults) >= MAX_OTHER_FAULTS:
        return state, ()
    other = (*current.other_faults, code)
    state = _set_device(state, device, replace(current, other_faults=other))
    count = f"at least {len(other)}" if len(other) >= MAX_OTHER_FAULTS else str(len(other))
    message = (
        f"{_label(device)} reports {count} more fault code{'s' if len(other) > 1 else ''} "
        f"than the {MAX_DEVICE_FAULTS} shown one by one; the journal keeps every STATUS, "
        "and READY clears them all"
    )
    return _raise(state, FAULT_OTHER, device, message, at)


def _active(state: TableState, code: str, device: Device | None) -> bool:
    return any(a.code == code and a.device == device for a in state.alarms)


def _link_errors_standing(
    state: TableState, device: Device, current: DeviceState, at: datetime
) -> TableState | None:
    """While ``LINK_ERRORS`` stands for ``device``, a bad frame or noise at ``at`` only keeps
    its time (at most once per ``LINK_ERRORS_STEP``, so a line gone bad does not change
    the state at every frame); None when the alarm is not raised."""
    if not _active(state, LINK_ERRORS, device):
        return None
    last = current.last_bad_frame
    if last is not None and last <= at < last + LINK_ERRORS_STEP:
        return state  # within the step of the time kept: nothing changes
    return _set_device(state, device, replace(current, last_bad_frame=at))


def _bad_frame(
    state: TableState, device: Device, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    """``LINK_ERRORS``: more than ``LINK_ERRORS_MAX`` bad frames within
    ``LINK_ERRORS_WINDOW`` (link-layer.md "Frames": each was answered ``NAK``)."""
    if device not in dict(state.devices):
        return _unexpected(state, device, None, at)
    current = state.device(device)
    standing = _link_errors_standing(state, device, current, at)
    if standing is not None:
        return standing, ()
    recent = (*(t for t in current.bad_frames if at - LINK_ERRORS_WINDOW < t <= at), at)
    if len(recent) <= LINK_ERRORS_MAX:
        return _set_device(state, device, replace(current, bad_frames=recent)), ()
    state = _set_device(state, device, replace(current, bad_frames=(), last_bad_frame=at))
    seconds = int(LINK_ERRORS_WINDOW.total_seconds())
    quiet = int(LINK_ERRORS_QUIET.total_seconds())
    message = (
        f"{_label(device)} sent more than {LINK_ERRORS_MAX} bad frames in {seconds} s, each "
        "answered NAK (link-layer.md): check its cable, port settings and power; clears "
        f"after {quiet} s without a bad frame"
    )
    return _raise(state, LINK_ERRORS, device, message, at)


def _noise(
    state: TableState, device: Device, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    """``LINK_ERRORS``: noise ``LINK_NOISE_MAX`` times with no good frame between."""
    if device not in dict(state.devices):
        return _unexpected(state, device, None, at)
    current = state.device(device)
    standing = _link_errors_standing(state, device, current, at)
    if standing is not None:
        return standing, ()
    if current.noise + 1 < LINK_NOISE_MAX:
        return _set_device(state, device, replace(current, noise=current.noise + 1)), ()
    state = _set_device(state, device, replace(current, noise=0, bad_frames=(), last_bad_frame=at))
    quiet = int(LINK_ERRORS_QUIET.total_seconds())
    message = (
        f"{_label(device)} sent {LINK_NOISE_MAX} times in a row bytes outside any frame "
        "(noise) and no good frame between: check the baud rate and port settings of the "
        "device, of any device server and of the table's configuration, and the cable; "
        f"clears after {quiet} s without noise or a bad frame"
    )
    return _raise(state, LINK_ERRORS, device, message, at)


_GOOD_FRAME_DEVICE: Final[tuple[tuple[type[Any], Device], ...]] = (
    *((fact, "shuffler") for fact in get_args(ShufflerFact)),
    *((fact, "dice_reader") for fact in get_args(DiceFact)),
)


def _good_frame(state: TableState, event: TableEvent) -> TableState:
    """A good frame from a device, or its port opened or lost, ends its run of noise."""
    device: Device | None = None
    if isinstance(event, DeviceHello | DeviceStatus | DeviceConnected | DeviceDisconnected):
        device = event.device
    else:
        device = next((d for fact, d in _GOOD_FRAME_DEVICE if isinstance(event, fact)), None)
    if device is None or device not in dict(state.devices):
        return state
    current = state.device(device)
    return _set_device(state, device, replace(current, noise=0)) if current.noise else state


def _clock_jumped(
    state: TableState, milliseconds: int, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    """``CLOCK_JUMP``: the host's clock moved; cleared ``CLOCK_JUMP_QUIET`` later (by the
    clock after the jump) or by a clean start."""
    direction = "forward" if milliseconds > 0 else "back"
    size = timedelta(milliseconds=abs(milliseconds))
    message = (
        f"the controller's clock jumped {direction} by {_duration(size)}: times in the record "
        "around then may be wrong; check the time server and the clock"
    )
    state = replace(state, clock_jumped=at)
    return _raise(state, CLOCK_JUMP, None, message, at)


def _journal_fault_message(error: str) -> str:
    text = " ".join(error.split())[:JOURNAL_ERROR_TEXT] or "no reason given"
    return (
        f"the journal cannot write ({text}): the table is closed and holds every event until "
        "it can; free space on the journal's disk"
    )


def _disk_space(
    state: TableState, fact: DiskSpaceChecked, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    """``DISK_LOW`` while the free space is under the need; cleared once it is above the
    need by ``DISK_LOW_MARGIN`` percent. Sizes are shown in whole MB (free rounded down,
    the need up), so the message changes at most once a megabyte."""
    free, needed = max(0, fact.free_bytes), max(0, fact.needed_bytes)
    active = _active(state, DISK_LOW, None)
    low = free * 100 < needed * (100 + DISK_LOW_MARGIN) if active else free < needed
    if not low:
        return _clear(state, DISK_LOW, None)
    hours = f"{fact.hours} hour{'' if fact.hours == 1 else 's'}"
    message = (
        f"the journal's disk has {free // MB} MB free, less than {hours} of this table's "
        f"journal need ({-(-needed // MB)} MB): free space, or move the journal to a larger disk"
    )
    return _raise(state, DISK_LOW, None, message, at)


def _duration(size: timedelta) -> str:
    seconds = int(size.total_seconds())
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{days} d"] if days else []
    parts += [f"{hours} h"] if hours else []
    parts += [f"{minutes} min"] if minutes else []
    parts += [f"{seconds} s"] if seconds or not parts else []
    return " ".join(parts)


def _time_passed(state: TableState, at: datetime) -> tuple[TableState, tuple[Outcome, ...]]:
    """The alarms that clear after a quiet time: ``LINK_ERRORS``, ``CLOCK_JUMP``."""
    outcomes: tuple[Outcome, ...] = ()
    jumped = state.clock_jumped
    if jumped is not None:
        if at < jumped:  # the clock went back again: the hour starts again
            state = replace(state, clock_jumped=at)
        elif at >= jumped + CLOCK_JUMP_QUIET:
            state = replace(state, clock_jumped=None)
            state, outcomes = _clear(state, CLOCK_JUMP, None)
    for device, current in state.devices:
        last = current.last_bad_frame
        if last is None or not _active(state, LINK_ERRORS, device):
            continue
        if at < last:
            # The wall clock went back: count the quiet time again from now rather than
            # wait for the clock to catch up with the time kept.
            state = _set_device(state, device, replace(current, last_bad_frame=at))
        elif at >= last + LINK_ERRORS_QUIET + LINK_ERRORS_STEP:
            state = _set_device(state, device, replace(current, last_bad_frame=None))
            state, cleared = _clear(state, LINK_ERRORS, device)
            outcomes += cleared
    return state, outcomes


def _backlog(
    state: TableState, outcomes: tuple[Outcome, ...], at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    """``ROLL_BACKLOG`` while more than ``ROLL_BACKLOG_MAX`` rolls wait behind a pending
    one; its message names the pending roll and does not count, so it is not republished
    with every roll that joins the queue."""
    if state.craps is None:  # not reached: only a craps table has rolls waiting
        return state, outcomes
    count, pending = craps.waiting(state.craps)
    if count <= ROLL_BACKLOG_MAX:
        state, cleared = _clear(state, ROLL_BACKLOG, "dice_reader")
        return state, outcomes + cleared
    message = (
        f"more than {ROLL_BACKLOG_MAX} rolls wait behind roll {pending}, which waits for the "
        "stickperson's decision; none of them counts until it is decided "
        '(dice-reader-icd.md, "What the host must do")'
    )
    state, raised = _raise(state, ROLL_BACKLOG, "dice_reader", message, at)
    return state, outcomes + raised


def _mode_alarm(game: Game, mode: Game | None, at: datetime) -> Alarm:
    return Alarm(
        code="MODE_MISMATCH", device="shuffler", message=_mode_message(game, mode), since=at
    )


def _mode_message(game: TableGame, mode: Game | None) -> str:
    if mode is None:
        return f"the shuffler has not reported its mode; the table plays {game}: no payouts"
    return (
        f"the shuffler is set to {mode} but the table plays {game}: "
        f"no payouts until it is set to {game}"
    )


def _mode(state: TableState, mode: Game, at: datetime) -> tuple[TableState, tuple[Outcome, ...]]:
    if "shuffler" not in dict(state.devices):
        return _unexpected(state, "shuffler", None, at)
    state = _set_device(state, "shuffler", replace(state.device("shuffler"), mode=mode))
    if mode == state.game:
        return _clear(state, "MODE_MISMATCH", "shuffler")
    state, outcomes = _raise(
        state, "MODE_MISMATCH", "shuffler", _mode_message(state.game, mode), at
    )
    state, flagged = _withhold_open_round(state, _mode_message(state.game, mode))
    return state, outcomes + flagged


def _deck(state: TableState, result: str, at: datetime) -> tuple[TableState, tuple[Outcome, ...]]:
    if "shuffler" not in dict(state.devices):
        return _unexpected(state, "shuffler", None, at)
    state = _set_device(state, "shuffler", replace(state.device("shuffler"), deck=result))
    if result == "OK":
        return _clear(state, "DECK_FAULT", "shuffler")
    message = f"the shuffler's deck check failed: {result}; no payouts from this deck"
    state, outcomes = _raise(state, "DECK_FAULT", "shuffler", message, at)
    state, flagged = _withhold_open_round(state, message)
    return state, outcomes + flagged


def _unexpected(
    state: TableState, device: Device, event: TableEvent | None, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    what = type(event).__name__ if event is not None else "a frame"
    message = f"{_label(device)} sent {what}, which a {state.game} table does not use"
    if device not in dict(state.devices):
        message = f"{_label(device)} is not configured for a {state.game} table but sent {what}"
    return _raise(state, "UNEXPECTED_FRAME", device, message, at)


def _not_craps(roll_id: int) -> DecisionError:
    return DecisionError("this table does not play craps: no roll to decide", roll_id=roll_id)


# ---------------------------------------------------------------------------------------
# Card rounds: the game's machine, with mode and deck checks on top


def _shuffler_fault(state: TableState) -> str | None:
    """Why no round may pay right now, or None."""
    shuffler = state.device("shuffler")
    if shuffler.mode != state.game:
        return _mode_message(state.game, shuffler.mode)
    if shuffler.deck is not None and shuffler.deck != "OK":
        return f"the shuffler's deck check failed: {shuffler.deck}; no payouts from this deck"
    return None


def _flag(state: TableState, round_id: int, reason: str) -> Outcome:
    found = _card_game(state)
    if found is None:
        raise TypeError(f"round {round_id} flagged at a table without card rounds")
    machine, rounds = found
    return machine.flagged_result(rounds, round_id, reason)


def _withhold_open_round(state: TableState, reason: str) -> tuple[TableState, tuple[Outcome, ...]]:
    """Flag the round in progress (if any, and not already withheld) for ``reason``."""
    round_id = open_round_id(state)
    if round_id is None or state.withheld_round == round_id:
        return state, ()
    return replace(state, withheld_round=round_id), (_flag(state, round_id, reason),)


def _round_of(outcome: Outcome) -> int | None:
    return getattr(outcome, "round_id", None)


def _filter(
    state: TableState, round_id: int, outcomes: tuple[Outcome, ...]
) -> tuple[TableState, tuple[Outcome, ...]]:
    """Flag ``round_id`` now if the shuffler is at fault, and withhold the game's outcomes
    for the round the table flagged (a pay table or a result would invite payment)."""
    flagged: tuple[Outcome, ...] = ()
    fault = _shuffler_fault(state)
    if fault is not None and state.withheld_round != round_id:
        state = replace(state, withheld_round=round_id)
        flagged = (_flag(state, round_id, fault),)
    withheld = state.withheld_round
    kept = tuple(o for o in outcomes if withheld is None or _round_of(o) != withheld)
    return state, flagged + kept


S = TypeVar("S")
F = TypeVar("F")


@dataclass(frozen=True, slots=True, kw_only=True)
class CardMachine(Generic[S, F]):
    """A card game's round machine (``poker_round``, ``bust_bonus``) as the table drives
    it: every card game's frames are routed, checked (mode, deck, late frames) and flagged
    the same way; only these differ."""

    facts: tuple[type, ...]
    """The shuffler frames its rounds are made of."""
    closes: tuple[type, ...]
    """The frames that close the round they name, when it is the open one."""
    get: Callable[[TableState], S | None]
    """Its state within the table (None at a table of another game)."""
    put: Callable[[TableState, S], TableState]
    apply: Callable[[S, F], tuple[S, tuple[Outcome, ...]]]
    open_round_id: Callable[[S], int | None]
    is_closed: Callable[[S, int], bool]
    forget_closed: Callable[[S], S]
    flagged_result: Callable[[S, int, str], Outcome]
    """The result of a round the table flags (mode, deck): the reason, no card."""


POKER_ROUNDS: Final[CardMachine[poker_round.PokerRoundState, poker_round.PokerFact]] = CardMachine(
    facts=(HandDealt, RoundDealt, RoundSettled, RoundVoided),
    closes=(RoundSettled, RoundVoided),
    get=lambda state: state.poker,
    put=lambda state, rounds: replace(state, poker=rounds),
    apply=poker_round.apply,
    open_round_id=poker_round.open_round_id,
    is_closed=poker_round.is_closed,
    forget_closed=poker_round.forget_closed,
    flagged_result=lambda rounds, round_id, reason: poker_round.flagged_result(
        rounds.game, round_id, None, reason
    ),
)
"""The Cover All Bonus tables' rounds (``HAND``, ``ROUND``, ``SETTLE``, ``VOID``)."""

BUST_ROUNDS: Final[CardMachine[bust_bonus.BustBonusState, bust_bonus.BustFact]] = CardMachine(
    facts=(CardDrawn, DealerDone, RoundVoided),
    closes=(DealerDone, RoundVoided),
    get=lambda state: state.bust,
    put=lambda state, rounds: replace(state, bust=rounds),
    apply=bust_bonus.apply,
    open_round_id=bust_bonus.open_round_id,
    is_closed=bust_bonus.is_closed,
    forget_closed=bust_bonus.forget_closed,
    flagged_result=lambda _rounds, round_id, reason: bust_bonus.flagged_result(round_id, reason),
)
"""The Bust Bonus table's rounds (``CARD``, ``END``, ``VOID``)."""

CARD_MACHINES: Final[tuple[CardMachine[Any, Any], ...]] = (POKER_ROUNDS, BUST_ROUNDS)


def _card_game(state: TableState) -> tuple[CardMachine[Any, Any], Any] | None:
    """The table's card game: its machine and the machine's state (None at craps)."""
    for machine in CARD_MACHINES:
        rounds = machine.get(state)
        if rounds is not None:
            return machine, rounds
    return None


CardFact = HandDealt | RoundDealt | RoundSettled | CardDrawn | DealerDone | RoundVoided


def _card_frame(
    state: TableState, fact: CardFact, at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    """A shuffler frame of a card round, through the table's card game (a frame of another
    game's rounds is unexpected)."""
    found = _card_game(state)
    if found is None or not isinstance(fact, found[0].facts):
        return _unexpected(state, "shuffler", fact, at)
    machine, rounds = found
    late = machine.is_closed(rounds, fact.round_id)
    closes = isinstance(fact, machine.closes) and machine.open_round_id(rounds) == fact.round_id
    new_rounds, outcomes = machine.apply(rounds, fact)
    state = machine.put(state, new_rounds)
    return _round_outcomes(state, fact.round_id, outcomes, late=late, closes=closes, at=at)


def _round_outcomes(
    state: TableState,
    round_id: int,
    outcomes: tuple[Outcome, ...],
    *,
    late: bool,
    closes: bool,
    at: datetime,
) -> tuple[TableState, tuple[Outcome, ...]]:
    """A card game's outcomes for a frame of ``round_id``, with the table's checks on top."""
    state, outcomes = _game_alarms(state, outcomes, at)
    if late:
        # The round's result is published and stands: nothing to flag or withhold.
        return state, outcomes
    state, outcomes = _filter(state, round_id, outcomes)
    if closes:  # the shuffler's play goes on in order
        state, cleared = _clear(state, LATE_FRAME, "shuffler")
        outcomes += cleared
    return state, outcomes


def _game_alarms(
    state: TableState, outcomes: tuple[Outcome, ...], at: datetime
) -> tuple[TableState, tuple[Outcome, ...]]:
    """A game's machine names an alarm among its outcomes (``LATE_FRAME``); the table keeps
    the list of active alarms, so it raises (or updates) it here, with its ``since``."""
    out: list[Outcome] = []
    for outcome in outcomes:
        if isinstance(outcome, AlarmRaised):
            state, raised = _raise(state, outcome.code, outcome.device, outcome.message, at)
            out.extend(raised)
        else:
            out.append(outcome)
    return state, tuple(out)
