"""Filling a table's gaps with its resend request (mqtt-api.md 1.3, ``resend``), sans-IO.

A table's published seqs have holes by design (its journal numbers every record, and most
records are not publications), so a hole proves nothing. The intake proves completeness
instead: per table it keeps ``confirmed``, the seq up to which the store holds every
message the table published, and asks the table to resend ``confirmed + 1`` to the highest
seq seen (at most ``WINDOW`` apart). The answer says how many messages the table published
in that range (``sent``) and the first seq its journal no longer holds
(``missing_before``); once the store holds ``sent`` messages of the range, it is complete
and ``confirmed`` moves to its end. What the journal no longer holds, and what did not
arrive after ``tries`` asks, becomes a ``GapFound`` with its reason, recorded, never
silent.

A table seen for the first time starts at the first seq received from it (the records
begin there; ``reconcile`` compares with a journal from its start). One ask at a time per
table, ``confirm_after`` seconds after the last confirmation: a table serves a few resends
a second at most (mqtt-api.md), and the floor's traffic grows by one resend of each
message.

This module does no I/O: the service sends ``Ask``s, passes answers to ``answered`` and
asks ``settle`` with a function that counts the stored seqs of a range.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

WINDOW: Final = 1000
"""At most this many seqs per resend (mqtt-api.md 1.3: ``from_seq``, ``to_seq`` at most
1,000 apart)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """A resend to request: ``request/resend`` with these fields."""

    table: str
    from_seq: int
    to_seq: int
    request_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GapFound:
    """Seqs a table could not give again, with why."""

    table: str
    from_seq: int
    to_seq: int
    reason: str


@dataclass(slots=True)
class _Pending:
    ask: Ask
    asked_at: float
    tries: int
    sent: int | None = None
    first_kept: int | None = None  # from the answer's missing_before
    answered_at: float | None = None


class Intake:
    """Per table: what is confirmed complete, the highest seq seen, the ask in flight."""

    def __init__(
        self,
        confirmed: dict[str, int] | None = None,
        *,
        confirm_after: float = 30.0,
        answer_timeout: float = 10.0,
        tries: int = 3,
    ) -> None:
        self.confirmed: dict[str, int] = dict(confirmed or {})
        self.highest: dict[str, int] = dict(self.confirmed)
        self.confirm_after = confirm_after
        self.answer_timeout = answer_timeout
        self.tries = tries
        self._pending: dict[str, _Pending] = {}
        self._last: dict[str, float] = {}
        self._ids = itertools.count(1)

    def received(self, table: str, seq: int, now: float) -> None:
        """A message of ``table`` with ``seq`` arrived (stored or a duplicate)."""
        if table not in self.confirmed:
            self.confirmed[table] = seq - 1
            self._last[table] = now
        self.highest[table] = max(self.highest.get(table, seq), seq)
        self._last.setdefault(table, now)

    def due(self, now: float) -> list[Ask]:
        """The resends to ask now."""
        out: list[Ask] = []
        for table, highest in self.highest.items():
            confirmed = self.confirmed[table]
            if table in self._pending or highest <= confirmed:
                continue
            if now - self._last.get(table, now) < self.confirm_after:
                continue
            ask = Ask(
                table=table,
                from_seq=confirmed + 1,
                to_seq=min(highest, confirmed + WINDOW),
                request_id=f"records-{next(self._ids)}",
            )
            self._pending[table] = _Pending(ask=ask, asked_at=now, tries=1)
            out.append(ask)
        return out

    def answered(
        self,
        table: str,
        request_id: str | None,
        *,
        ok: bool,
        sent: int | None,
        missing_before: int | None,
        now: float,
    ) -> list[GapFound]:
        """The table's answer to a resend; the gaps it reveals (its journal lost them)."""
        pending = self._pending.get(table)
        if pending is None or pending.ask.request_id != request_id:
            return []  # not ours, or an answer to an ask given up on
        if not ok or sent is None:
            del self._pending[table]  # refused (too many resends): ask again later
            self._last[table] = now
            return []
        pending.sent = sent
        pending.answered_at = now
        ask = pending.ask
        if missing_before is None or missing_before <= ask.from_seq:
            return []
        pending.first_kept = missing_before
        last_lost = min(ask.to_seq, missing_before - 1)
        return [
            GapFound(
                table=table,
                from_seq=ask.from_seq,
                to_seq=last_lost,
                reason="the table's journal no longer holds them "
                f"(missing_before {missing_before})",
            )
        ]

    def settle(
        self, now: float, stored: Callable[[str, int, int], int]
    ) -> tuple[list[GapFound], list[Ask]]:
        """Close the asks whose messages have all arrived; ask again those unanswered or
        incomplete after ``answer_timeout`` (the asks to send), and give up after ``tries``
        (the gaps). ``stored(table, first, last)`` counts the stored seqs of a range."""
        gaps: list[GapFound] = []
        again_asks: list[Ask] = []
        for table, pending in list(self._pending.items()):
            ask = pending.ask
            first = max(ask.from_seq, pending.first_kept or ask.from_seq)
            if pending.sent is not None and (
                first > ask.to_seq or stored(table, first, ask.to_seq) >= pending.sent
            ):
                self._close(table, ask.to_seq, now)
                continue
            since = pending.answered_at if pending.answered_at is not None else pending.asked_at
            if now - since < self.answer_timeout:
                continue
            if pending.tries < self.tries:
                again = Ask(
                    table=table,
                    from_seq=ask.from_seq,
                    to_seq=ask.to_seq,
                    request_id=f"records-{next(self._ids)}",
                )
                self._pending[table] = _Pending(ask=again, asked_at=now, tries=pending.tries + 1)
                again_asks.append(again)
                continue
            have = stored(table, first, ask.to_seq) if first <= ask.to_seq else 0
            reason = (
                f"no answer to {pending.tries} resend requests"
                if pending.sent is None
                else f"the table resent {pending.sent} messages, {have} arrived "
                f"after {pending.tries} requests"
            )
            gaps.append(GapFound(table=table, from_seq=first, to_seq=ask.to_seq, reason=reason))
            self._close(table, ask.to_seq, now)
        return gaps, again_asks

    def _close(self, table: str, to_seq: int, now: float) -> None:
        self.confirmed[table] = max(self.confirmed[table], to_seq)
        del self._pending[table]
        self._last[table] = now if self.highest[table] <= to_seq else now - self.confirm_after
