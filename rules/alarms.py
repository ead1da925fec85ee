"""Every alarm a table raises, declared once: its code, which device it concerns, when it is
raised and when it clears, and whether it stops payouts.

The rules raise them (``rules.table``, and the games' machines through ``AlarmRaised``);
``PAYOUT_ALARMS``, the contract's description of ``alarms[].code`` and the operators'
reference (``docs/reference/alarms.md``, ``python -m cli.reference``) are made from this
list, and ``tests/rules/test_alarms.py`` finds every code the rules can raise in it. A new
alarm is one entry here (with its clearing condition) and its code where the rules raise it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True, kw_only=True)
class AlarmKind:
    """One alarm code as operators read it.

    ``code`` is the code on ``alarms`` (``DEVICE_FAULT_<code>`` stands for a family: one
    alarm per fault code a device reports); ``device`` says which device it names, or
    ``None`` for the table's own; ``raised`` and ``cleared`` are sentences for people.
    """

    code: str
    device: str | None
    raised: str
    cleared: str
    stops_payouts: bool = False


DEVICE_FAULT_PREFIX: Final = "DEVICE_FAULT_"
"""A device's ``STATUS`` fault code ``X`` is the alarm ``DEVICE_FAULT_X``."""

ALARMS: Final[tuple[AlarmKind, ...]] = (
    AlarmKind(
        code="DISCONNECTED",
        device="shuffler or dice_reader",
        raised="a device's port is not open (also at start, until it is)",
        cleared="the port opens",
    ),
    AlarmKind(
        code="MODE_MISMATCH",
        device="shuffler",
        raised="the shuffler's `MODE` is not the table's game, or not yet reported: no pay "
        "table or result is published, and any round in that time is flagged (Cover All "
        "Bonus rule (1))",
        cleared="the right `MODE`",
        stops_payouts=True,
    ),
    AlarmKind(
        code="DECK_FAULT",
        device="shuffler",
        raised="`DECK` other than `OK`: a round dealt from that deck is flagged",
        cleared="`DECK,OK`",
        stops_payouts=True,
    ),
    AlarmKind(
        code=f"{DEVICE_FAULT_PREFIX}<code>",
        device="shuffler or dice_reader",
        raised="a `STATUS` code other than `READY` (a tilt), one alarm per code, for the "
        "first 32 distinct codes of a device; the code is kept to 64 characters, the text "
        "to 160",
        cleared="`READY` (clears them all, link-layer.md)",
    ),
    AlarmKind(
        code="DEVICE_FAULT_OTHER",
        device="shuffler or dice_reader",
        raised="a device's 33rd and further distinct fault codes (and a code named `OTHER`): "
        'one alarm whose message says how many codes it stands for ("at least 32" beyond '
        "32; then it stops changing); the journal has every `STATUS`",
        cleared="`READY`",
    ),
    AlarmKind(
        code="UNEXPECTED_FRAME",
        device="shuffler or dice_reader",
        raised="a frame the table's game does not use (a `CARD` at a poker table); it "
        "changes nothing",
        cleared="the device's next `HELLO`",
    ),
    AlarmKind(
        code="LATE_FRAME",
        device="shuffler or dice_reader",
        raised="a frame for a round that is closed (settled, void, flagged) or not open, or "
        "a copy of a roll already recorded: its result stands and no second result is "
        'published (shuffler-icd.md: "a screen must never turn a paid round into '
        'flagged"); the frame is in the journal for review. The message says what came for '
        "which round",
        cleared="shuffler: the next `SETTLE`, `END` or `VOID` of an open round, or `HELLO`; "
        "dice reader: the next roll recorded, or `HELLO`",
    ),
    AlarmKind(
        code="LINK_ERRORS",
        device="shuffler or dice_reader",
        raised="more than 20 bad frames from a device within 10 s (each answered `NAK`: a "
        "bad cable, wrong port settings, a failing device), or noise from it (bytes outside "
        "any frame) 6 times with no good frame between (a line at another baud rate, parity "
        "or stop bits than the device's carries nothing else); good frames still count, once "
        "each",
        cleared="60 s without a bad frame or noise from that device (checked every second, so "
        "within 62 s)",
    ),
    AlarmKind(
        code="ROLL_BACKLOG",
        device="dice_reader",
        raised="more than 20 rolls wait behind a pending `CHECK` (none counts until it is "
        "decided); the message names the pending roll",
        cleared="20 or fewer wait (the decision counts or releases them)",
    ),
    AlarmKind(
        code="CLOCK_JUMP",
        device=None,
        raised="the wall clock jumped more than 2 s (set by hand, a time server after long "
        "drift); the message gives the size and direction",
        cleared="an hour after the jump, or at the next clean start",
    ),
    AlarmKind(
        code="JOURNAL_FAULT",
        device=None,
        raised="the journal refuses a write (a full disk, an I/O error): recorded in the room "
        "of the journal's reserve, with the error; the table is closed (`availability` "
        "`offline`) and holds every event",
        cleared="the journal writes again (space returned), in the transaction of the "
        "`journal_fault` record; or the next start",
    ),
    AlarmKind(
        code="DISK_LOW",
        device=None,
        raised="less free space on the journal's disk than `[journal] disk_low_hours` "
        "(default 24) of the journal's measured growth need, plus 3 MiB (the reserve and "
        "the WAL's bound); checked at the start and every minute; the message gives both "
        "in MB",
        cleared="the free space exceeds the need by 10 %",
    ),
    AlarmKind(
        code="MQTT_LOGIN_REFUSED",
        device=None,
        raised="the broker refuses the table's login after the table started (a password "
        "changed on the broker and not in the table's `password_file`); every event waits "
        "in the journal. At start-up a refused login is no alarm: `lammer run` exits 2 "
        "with a sentence",
        cleared="the broker takes the login again",
    ),
    AlarmKind(
        code="SOFTWARE",
        device=None,
        raised="at start, the installed software matches none of the approved release "
        "manifests of `[software]` (or one cannot be verified): the message names the first "
        "file that differs; the table stays closed (`availability` `offline`, no device "
        "opened). On the floor's pit also when `lammer authenticate` finds a table not "
        "`approved` (`lammer-floor/software/<table>`)",
        cleared="a start whose software matches an approved manifest",
        stops_payouts=True,
    ),
)
"""Every alarm code, in the order operators read them."""

PAYOUT_ALARMS: Final[frozenset[str]] = frozenset(a.code for a in ALARMS if a.stops_payouts)
"""The alarms under which no payout is published: a round dealt while one is active is
flagged (Cover All Bonus rule (1); shuffler-icd.md, "What the host must check")."""


def alarm_kind(code: str) -> AlarmKind | None:
    """The declaration of ``code`` (a ``DEVICE_FAULT_X`` is the family's), or None."""
    for kind in ALARMS:
        if kind.code == code:
            return kind
    if code.startswith(DEVICE_FAULT_PREFIX):
        return next(k for k in ALARMS if k.code == f"{DEVICE_FAULT_PREFIX}<code>")
    return None
