"""What bad frames may cost the journal and the log: bounded per device and interval.

Every bad frame is answered ``NAK`` by the driver (link-layer.md "Frames") and reaches the
table's core, which tells the rules (``BadFrameSeen``: ``LINK_ERRORS``) and keeps the frame
for review. A line gone bad can bring hundreds a second, each once costing a journal record
of its bytes and two warning lines, so ``BadFrameBudget`` decides, per device:

* the first ``full`` bad frames of an interval (``interval`` from the first of them) are
  journaled with their bytes and reason and logged, one warning line each;
* the rest are counted, with their bytes and reasons (at most ``MAX_REASONS`` reasons by
  name, the others together), and reported once, when the interval is over: one journal
  record and one warning line (``report``), whatever their number.

The rules' own fact is another matter: ``daemon.core`` journals it whenever it changed the
table, so a replay of the journal raises and clears ``LINK_ERRORS`` exactly as it was
(about one record a second during a flood, see ``rules.table.LINK_ERRORS_STEP``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from daemon.clock import format_ts
from rules.events import Device

FULL_PER_INTERVAL: Final = 20
"""Bad frames of a device journaled with their bytes and logged, per interval."""
INTERVAL: Final = timedelta(seconds=60)
MAX_REASONS: Final = 8
"""Distinct reasons a report counts by name; the others are counted together."""
MAX_REASON_CHARS: Final = 120
OTHER_REASONS: Final = "(other reasons)"


@dataclass
class _Interval:
    """One device's interval: its start, what was kept in full, what was only counted."""

    start: datetime
    full: int = 0
    counted: int = 0
    counted_bytes: int = 0
    span: tuple[datetime, datetime] | None = None  # the first and last counted frame's time
    reasons: dict[str, int] = field(default_factory=dict)

    def count(self, reason: str, size: int, at: datetime) -> None:
        self.counted += 1
        self.counted_bytes += size
        self.span = (at, at) if self.span is None else (self.span[0], at)
        reason = reason[:MAX_REASON_CHARS]
        if reason not in self.reasons and len(self.reasons) >= MAX_REASONS:
            reason = OTHER_REASONS
        self.reasons[reason] = self.reasons.get(reason, 0) + 1


class BadFrameBudget:
    """Per device: which bad frames are kept in full, and the counts of the others (see
    the module docstring). The caller passes the time; nothing here reads a clock."""

    def __init__(self, *, full: int = FULL_PER_INTERVAL, interval: timedelta = INTERVAL) -> None:
        self.full = full
        self.interval = interval
        self._open: dict[Device, _Interval] = {}

    def admit(
        self, device: Device, reason: str, size: int, at: datetime
    ) -> tuple[bool, dict[str, object] | None]:
        """One bad frame of ``size`` bytes at ``at``: whether to keep it in full, and the
        report of the device's previous interval if this frame is the first after it."""
        report = None
        current = self._open.get(device)
        if current is not None and self._over(current, at):
            report = self._close(device, current)
            current = None
        if current is None:
            current = self._open[device] = _Interval(start=at)
        if current.full < self.full:
            current.full += 1
            return True, report
        current.count(reason, size, at)
        return False, report

    def due(self, at: datetime) -> list[dict[str, object]]:
        """The reports of every interval that is over at ``at`` (the daemon's timer asks,
        so a flood that stopped is still reported)."""
        reports = []
        for device, current in list(self._open.items()):
            if self._over(current, at):
                report = self._close(device, current)
                if report is not None:
                    reports.append(report)
        return reports

    def _over(self, current: _Interval, at: datetime) -> bool:
        # A wall clock stepped back ends the interval too: better one report early than an
        # interval that lasts until the clock catches up.
        return at >= current.start + self.interval or at < current.start

    def _close(self, device: Device, current: _Interval) -> dict[str, object] | None:
        del self._open[device]
        if current.span is None:  # nothing counted
            return None
        first, last = current.span
        return {
            "device": device,
            "count": current.counted,
            "bytes": current.counted_bytes,
            "reasons": dict(current.reasons),
            "first": format_ts(first),
            "last": format_ts(last),
            "kept_in_full": current.full,
            "interval_s": int(self.interval.total_seconds()),
        }
