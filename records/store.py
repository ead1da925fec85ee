"""Writing to the store: plain SQL, parameters always bound, idempotent by (table, seq).

``Store.write(received)`` stores one checked message (``records.messages``) in one
transaction: the message row, and the row of its kind (a result, a roll, the alarms it
lists, a decision). A message whose (table, seq) is already stored changes nothing and
returns ``False``, so replaying a feed twice, a resend and a redelivery are harmless.

``availability`` and requests carry no seq: an availability is stored when it differs
from the table's last one, a request as received. ``record_gap`` keeps what a table could
no longer resend, with its reason; ``keep_positions`` where each table's feed stands.

``Store.write_batch(items, positions)`` does all of that for many in **one** transaction
(the service's batches, docs/floor/records.md): the messages, the gaps the feed gave
up on (only their seqs not stored, the batch's own messages included) and the feed's
positions, committed together or not at all. A batch that fails leaves nothing, and
writing it again is harmless (idempotent by (table, seq)). ``StoreUnreachable`` says the
connection was lost (the server restarted, the network): the same batch may be written
again on a new connection; any other ``StoreError`` is a refusal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from contract.payloads import (
    Alarm,
    AlarmsMessage,
    BustBonusResultMessage,
    CoverAllResultMessage,
    CrapsResultMessage,
    CrapsReversalMessage,
    CrapsRollMessage,
)
from contract.requests import ResponseMessage
from contract.topics import response
from records.errors import StoreError, StoreUnreachable
from records.messages import Availability, Message, Received, Request

_INSERT_MESSAGE = """
INSERT INTO message (table_id, seq, topic, ts, payload)
VALUES (%(table)s, %(seq)s, %(topic)s, %(ts)s, %(payload)s)
ON CONFLICT (table_id, seq) DO NOTHING
RETURNING seq
"""

_INSERT_COVER_ALL = """
INSERT INTO cover_all_result
    (table_id, seq, ts, round_id, game, hands, outcome, hand, position, cards, pays, reason)
VALUES (%(table)s, %(seq)s, %(ts)s, %(round_id)s, %(game)s, %(hands)s, %(outcome)s,
        %(hand)s, %(position)s, %(cards)s, %(pays)s, %(reason)s)
"""

_INSERT_ROLL = """
INSERT INTO craps_roll (table_id, seq, ts, roll_id, die1, die2, total, status, reason)
VALUES (%(table)s, %(seq)s, %(ts)s, %(roll_id)s, %(die1)s, %(die2)s, %(total)s,
        %(status)s, %(reason)s)
"""

_INSERT_CRAPS_RESULT = """
INSERT INTO craps_result (table_id, seq, ts, roll_id, bet, outcome, pays)
VALUES (%(table)s, %(seq)s, %(ts)s, %(roll_id)s, %(bet)s, %(outcome)s, %(pays)s)
"""

_INSERT_REVERSAL = """
INSERT INTO craps_reversal (table_id, seq, ts, roll_id, bet, outcome)
VALUES (%(table)s, %(seq)s, %(ts)s, %(roll_id)s, %(bet)s, %(outcome)s)
"""

_INSERT_BUST = """
INSERT INTO bust_bonus_result
    (table_id, seq, ts, round_id, outcome, up_card, dealer_cards, total, suited,
     three_eights, pays, paytable_row, pay_column, reason)
VALUES (%(table)s, %(seq)s, %(ts)s, %(round_id)s, %(outcome)s, %(up_card)s,
        %(dealer_cards)s, %(total)s, %(suited)s, %(three_eights)s, %(pays)s,
        %(paytable_row)s, %(column)s, %(reason)s)
"""

_INSERT_ALARM = """
INSERT INTO alarm_snapshot
    (table_id, seq, ts, code, device, message, since, acknowledged_by, acknowledged_at)
VALUES (%(table)s, %(seq)s, %(ts)s, %(code)s, %(device)s, %(message)s, %(since)s,
        %(acknowledged_by)s, %(acknowledged_at)s)
ON CONFLICT DO NOTHING
"""

_INSERT_DECISION = """
INSERT INTO decision (table_id, seq, ts, name, request_id, status, error)
VALUES (%(table)s, %(seq)s, %(ts)s, %(name)s, %(request_id)s, %(status)s, %(error)s)
"""

_LAST_AVAILABILITY = """
SELECT status FROM availability WHERE table_id = %s ORDER BY id DESC LIMIT 1
"""

_INSERT_AVAILABILITY = "INSERT INTO availability (table_id, status) VALUES (%s, %s)"

_INSERT_REQUEST = """
INSERT INTO request (table_id, name, request_id, operator, payload)
VALUES (%s, %s, %s, %s, %s)
"""

_INSERT_GAP = """
INSERT INTO gap (table_id, from_seq, to_seq, reason) VALUES (%s, %s, %s, %s)
ON CONFLICT (table_id, from_seq) DO UPDATE
    SET to_seq = greatest(gap.to_seq, excluded.to_seq), reason = excluded.reason
"""

_STORED_SEQS = """
SELECT seq FROM message WHERE table_id = %s AND seq BETWEEN %s AND %s ORDER BY seq
"""

_MAX_SEQS = "SELECT table_id, max(seq) FROM message GROUP BY table_id"

_POSITIONS = "SELECT base, seq FROM position"

_POSITION = """
INSERT INTO position (base, seq) VALUES (%s, %s)
ON CONFLICT (base) DO UPDATE SET seq = greatest(position.seq, excluded.seq)
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Missing:
    """Seqs ``from_seq`` to ``to_seq`` of ``table`` that will not come (the feed gave up on
    them), with why: only those not stored are recorded as gaps."""

    table: str
    from_seq: int
    to_seq: int
    reason: str


class Operation:
    """Something else a batch writes in its transaction (``records.backfill``'s jobs)."""

    def apply(self, conn: psycopg.Connection[Any]) -> None:
        """Write it on ``conn``, inside the batch's transaction."""
        raise NotImplementedError


Item = Received | Missing | Operation
"""What a batch holds, in the order it is written."""


def refused(exc: psycopg.Error, what: str) -> StoreError:
    """``exc`` as the store's error: ``StoreUnreachable`` when the connection is gone."""
    if isinstance(exc, psycopg.OperationalError):
        return StoreUnreachable(f"the store cannot be reached ({what}): {exc}")
    return StoreError(f"the store refused {what}: {exc}")


class Store:
    """The store on one connection (not in autocommit: each write is one transaction)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def write(self, received: Received) -> bool:
        """Store one message; whether it was new (``False``: its seq was already stored,
        or an availability equal to the last one)."""
        try:
            with self.conn.transaction():
                return self._write(received)
        except psycopg.Error as exc:
            raise refused(exc, f"a message of {received.table}") from exc

    def write_batch(
        self, items: Sequence[Item], positions: Mapping[str, int] | None = None
    ) -> list[list[tuple[int, int]] | bool]:
        """Store ``items`` in order and keep ``positions``, all in one transaction. For each
        item: a message, whether it was new; a ``Missing``, the (from, to) ranges recorded
        as gaps. Raises ``StoreUnreachable`` (write it again on a new connection) or
        ``StoreError``; either way nothing of the batch is stored."""
        try:
            with self.conn.transaction():
                out: list[list[tuple[int, int]] | bool] = []
                for item in items:
                    if isinstance(item, Missing):
                        out.append(self._missing(item))
                    elif isinstance(item, Operation):
                        item.apply(self.conn)
                        out.append(False)
                    else:
                        out.append(self._write(item))
                if positions:
                    self._keep_positions(positions)
                return out
        except psycopg.Error as exc:
            raise refused(exc, f"a batch of {len(items)}") from exc

    def _write(self, received: Received) -> bool:
        match received:
            case Message():
                return self._message(received)
            case Availability():
                last = self.conn.execute(_LAST_AVAILABILITY, (received.table,)).fetchone()
                if last is not None and last[0] == received.status:
                    return False
                self.conn.execute(_INSERT_AVAILABILITY, (received.table, received.status))
                return True
            case Request():
                self.conn.execute(
                    _INSERT_REQUEST,
                    (
                        received.table,
                        received.name,
                        received.request_id,
                        received.operator,
                        Jsonb(received.payload),
                    ),
                )
                return True

    def _missing(self, gap: Missing) -> list[tuple[int, int]]:
        # Only the seqs not stored: a range given up may hold messages that did arrive
        # (a retained state before the stream started, say).
        have = {
            r[0] for r in self.conn.execute(_STORED_SEQS, (gap.table, gap.from_seq, gap.to_seq))
        }
        ranges: list[tuple[int, int]] = []
        start: int | None = None
        for seq in range(gap.from_seq, gap.to_seq + 2):
            missing = seq <= gap.to_seq and seq not in have
            if missing and start is None:
                start = seq
            elif not missing and start is not None:
                ranges.append((start, seq - 1))
                start = None
        for first, last in ranges:
            self.conn.execute(_INSERT_GAP, (gap.table, first, last, gap.reason))
        return ranges

    def write_many(self, messages: Iterable[Received]) -> int:
        """Store several messages; how many were new."""
        return sum(self.write(m) for m in messages)

    def _message(self, m: Message) -> bool:
        base = {"table": m.table, "seq": m.seq, "ts": m.ts}
        row = self.conn.execute(
            _INSERT_MESSAGE, {**base, "topic": m.topic, "payload": Jsonb(m.payload)}
        ).fetchone()
        if row is None:
            return False  # (table, seq) already stored: nothing else to do
        for sql, row in _kind_rows(m):
            self.conn.execute(sql, {**base, **row})
        return True

    def record_gap(self, table: str, from_seq: int, to_seq: int, reason: str) -> None:
        """Keep a range of seqs the table could not resend, with why."""
        try:
            with self.conn.transaction():
                self.conn.execute(_INSERT_GAP, (table, from_seq, to_seq, reason))
        except psycopg.Error as exc:
            raise refused(exc, f"a gap of {table}") from exc

    def stored_seqs(self, table: str, first: int, last: int) -> list[int]:
        """The seqs of ``table`` stored between ``first`` and ``last`` inclusive."""
        with self.conn.transaction():
            return [r[0] for r in self.conn.execute(_STORED_SEQS, (table, first, last))]

    def positions(self) -> dict[str, int]:
        """Where each table's feed stood (``contract.feed.Feed``'s ``start``), by base topic."""
        with self.conn.transaction():
            return {r[0]: r[1] for r in self.conn.execute(_POSITIONS)}

    def keep_positions(self, positions: Mapping[str, int]) -> None:
        """Keep the feed's positions (never moving one backwards)."""
        try:
            with self.conn.transaction():
                self._keep_positions(positions)
        except psycopg.Error as exc:
            raise refused(exc, "the feed's positions") from exc

    def _keep_positions(self, positions: Mapping[str, int]) -> None:
        for base, seq in positions.items():
            self.conn.execute(_POSITION, (base, seq))

    def last_seqs(self) -> dict[str, int]:
        """Each table's highest stored seq."""
        with self.conn.transaction():
            return {r[0]: r[1] for r in self.conn.execute(_MAX_SEQS)}


def _kind_rows(m: Message) -> list[tuple[str, dict[str, Any]]]:
    """The rows of a message's kind (a result, a roll, the alarms it lists, a decision),
    read from its typed body: ``(statement, parameters)`` each, the envelope's aside."""
    row: dict[str, Any]
    match m.body:
        case CoverAllResultMessage() as p:
            highest = p.highest
            row = {
                "round_id": p.round_id,
                "game": p.game,
                "hands": p.hands,
                "outcome": p.outcome,
                "hand": None if highest is None else highest.hand,
                "position": None if highest is None else highest.position,
                "cards": None if highest is None else highest.cards,
                "pays": p.pays,
                "reason": p.reason,
            }
            return [(_INSERT_COVER_ALL, row)]
        case CrapsRollMessage() as p:
            die1, die2 = p.dice
            row = {
                "roll_id": p.roll_id,
                "die1": die1,
                "die2": die2,
                "total": p.total,
                "status": p.status,
                "reason": p.reason,
            }
            return [(_INSERT_ROLL, row)]
        case CrapsResultMessage() as p:
            row = {"roll_id": p.roll_id, "bet": p.bet, "outcome": p.outcome, "pays": p.pays}
            return [(_INSERT_CRAPS_RESULT, row)]
        case CrapsReversalMessage() as p:
            return [(_INSERT_REVERSAL, {"roll_id": p.roll_id, "bet": p.bet, "outcome": p.outcome})]
        case BustBonusResultMessage() as p:
            return [(_INSERT_BUST, _bust_row(p))]
        case AlarmsMessage() as p:
            return [(_INSERT_ALARM, _alarm_row(alarm)) for alarm in p.alarms]
        case ResponseMessage() as p:
            row = {
                "name": m.topic.removeprefix(response("")),
                "request_id": p.request_id,
                "status": p.status,
                "error": p.error,
            }
            return [(_INSERT_DECISION, row)]
    return []


def _bust_row(p: BustBonusResultMessage) -> dict[str, Any]:
    return {
        "round_id": p.round_id,
        "outcome": p.outcome,
        "up_card": p.up_card,
        "dealer_cards": p.dealer_cards,
        "total": p.total,
        "suited": p.suited,
        "three_eights": p.three_eights,
        "pays": p.pays,
        "paytable_row": p.paytable_row,
        "column": p.column,
        "reason": p.reason,
    }


def _alarm_row(alarm: Alarm) -> dict[str, Any]:
    return {
        "code": alarm.code,
        "device": alarm.device,
        "message": alarm.message,
        "since": alarm.since,
        "acknowledged_by": alarm.acknowledged_by,
        "acknowledged_at": alarm.acknowledged_at,
    }
