"""Gaming-day reports: the store's queries, and the par sheet beside what happened.

A report is a query plus a formatter (``records.report_format``): the queries here group
the stored results by table and gaming day in PostgreSQL (a month of a floor is millions
of rows), and the small aggregates are set against the exact par sheets in Python.

Per table and gaming day: the rounds settled (void and flagged apart), the hands dealt per
round (Cover All), and per bet each paying row: the hits, the hits expected from the par
sheet for the columns actually played (exact where the par sheet is; a simulated
expectation carries its standard error), the pays in bet units (one unit per round);
the theoretical hold beside the observed one; big hits (``big_hit`` to 1 or more) with
round, time, cards and seat; every decision with its operator; alarms with start, end and
acknowledgement.

Holds assume one unit wagered per round and bet (the store sees outcomes, not chips):
observed hold = 1 - (sum of (pays + 1) over wins) / rounds; theoretical hold = the par
sheet's expected value of the same, for the columns played.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo
from decimal import Decimal
from fractions import Fraction
from typing import Any, Final, cast

import psycopg

from contract.payloads import TABLE_ID_PATTERN
from records.parsheet import (
    SUITED,
    bust_cell_chances,
    cover_all_chance,
    cover_all_columns,
    cover_all_rows,
    craps_bet_chance,
)
from rules.bust_odds import odds_table as bust_odds_table
from rules.events import CrapsBet
from rules.paytables import BUST_BONUS, cover_all_paytable

BIG_HIT: Final = 100

_DAY = "((ts AT TIME ZONE %(tz)s) - %(shift)s::interval)::date"
_WHERE = (
    "ts >= %(start)s AND ts < %(end)s "
    "AND (%(tables)s::text[] IS NULL OR table_id = ANY(%(tables)s))"
)

_COVER_ALL = f"""
SELECT table_id, {_DAY} AS day, game, hands, outcome, hand, count(*), sum(pays)
FROM cover_all_result WHERE {_WHERE}
GROUP BY 1, 2, 3, 4, 5, 6
"""  # noqa: S608  only the constants _DAY and _WHERE go in; values are parameters

_BUST = f"""
SELECT table_id, {_DAY} AS day, outcome, paytable_row, pay_column, up_card IS NULL,
       count(*), sum(pays)
FROM bust_bonus_result WHERE {_WHERE}
GROUP BY 1, 2, 3, 4, 5, 6
"""  # noqa: S608  only the constants _DAY and _WHERE go in; values are parameters

# A settlement taken back by a later craps/reversal of the same roll, bet and outcome is
# not counted.
_CRAPS = """
SELECT r.table_id, ((r.ts AT TIME ZONE %(tz)s) - %(shift)s::interval)::date AS day,
       r.bet, r.outcome, count(*), sum(r.pays)
FROM craps_result r
WHERE r.ts >= %(start)s AND r.ts < %(end)s
  AND (%(tables)s::text[] IS NULL OR r.table_id = ANY(%(tables)s))
  AND NOT EXISTS (
    SELECT 1 FROM craps_reversal v
    WHERE v.table_id = r.table_id AND v.roll_id = r.roll_id AND v.bet = r.bet
      AND v.outcome = r.outcome AND v.seq > r.seq)
GROUP BY 1, 2, 3, 4
"""

_ROLLS = f"""
SELECT table_id, {_DAY} AS day, count(*) FILTER (WHERE status = 'counted'),
       count(*) FILTER (WHERE status = 'declared_invalid')
FROM craps_roll WHERE {_WHERE}
GROUP BY 1, 2
"""  # noqa: S608  only the constants _DAY and _WHERE go in; values are parameters

_INFO = """
SELECT DISTINCT ON (table_id) table_id, payload FROM message
WHERE topic = 'info' AND (%(tables)s::text[] IS NULL OR table_id = ANY(%(tables)s))
ORDER BY table_id, seq DESC
"""

# The big hits of every bet in one shape: table, seq, time, round (or roll), bet, row,
# pays, cards, seat (``_big_hits`` maps them alike).
_BIG_COVER_ALL = f"""
SELECT table_id, seq, ts, round_id, 'cover_all', hand, pays, cards, position
FROM cover_all_result WHERE {_WHERE} AND outcome = 'win' AND pays >= %(big)s
"""  # noqa: S608  only the constants _DAY and _WHERE go in; values are parameters

_BIG_BUST = f"""
SELECT table_id, seq, ts, round_id, 'bust_bonus', paytable_row || ' ' || pay_column, pays,
       dealer_cards, 'DL'
FROM bust_bonus_result WHERE {_WHERE} AND outcome = 'win' AND pays >= %(big)s
"""  # noqa: S608  only the constants _DAY and _WHERE go in; values are parameters

_BIG_CRAPS = f"""
SELECT table_id, seq, ts, roll_id, bet, 'win', pays, NULL::text[], NULL::text
FROM craps_result WHERE {_WHERE} AND outcome = 'win' AND pays >= %(big)s
"""  # noqa: S608  only the constants _DAY and _WHERE go in; values are parameters

_DECISIONS = """
SELECT d.table_id, d.seq, d.ts, d.name, d.status, d.error, r.operator, r.payload
FROM decision d
LEFT JOIN LATERAL (
    SELECT operator, payload FROM request q
    WHERE q.table_id = d.table_id AND q.request_id = d.request_id AND q.name = d.name
    ORDER BY q.id DESC LIMIT 1) r ON true
WHERE d.ts >= %(start)s AND d.ts < %(end)s
  AND (%(tables)s::text[] IS NULL OR d.table_id = ANY(%(tables)s))
  AND d.name <> 'resend'
ORDER BY d.ts, d.table_id, d.seq
"""

_ALARMS = """
WITH spans AS (
    SELECT table_id, code, since, min(device) AS device, min(message) AS message,
           max(seq) AS last_seq, max(acknowledged_by) AS ack_by,
           max(acknowledged_at) AS ack_at
    FROM alarm_snapshot
    WHERE (%(tables)s::text[] IS NULL OR table_id = ANY(%(tables)s))
    GROUP BY table_id, code, since)
SELECT s.table_id, s.code, s.device, s.message, s.since, e.ts, s.ack_by, s.ack_at
FROM spans s
LEFT JOIN LATERAL (
    SELECT m.ts FROM message m
    WHERE m.table_id = s.table_id AND m.topic = 'alarms' AND m.seq > s.last_seq
    ORDER BY m.seq LIMIT 1) e ON true
WHERE s.since < %(end)s AND (e.ts IS NULL OR e.ts >= %(start)s)
ORDER BY s.since, s.table_id, s.code
"""

_AVAILABILITY = """
SELECT table_id, status, received FROM availability
WHERE received >= %(start)s AND received < %(end)s
  AND (%(tables)s::text[] IS NULL OR table_id = ANY(%(tables)s))
ORDER BY received, id
"""

_GAPS = """
SELECT table_id, from_seq, to_seq, reason, recorded FROM gap
WHERE (%(tables)s::text[] IS NULL OR table_id = ANY(%(tables)s))
ORDER BY table_id, from_seq
"""


Expected = Fraction | float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RowReport:
    """One paying row of a bet over a table's gaming day."""

    row: str
    hits: int
    expected: Expected
    expected_se: float
    pays_units: Decimal


@dataclass(slots=True, kw_only=True)
class BetReport:
    """One bet over a table's gaming day."""

    bet: str
    rounds: int
    rows: list[RowReport] = field(default_factory=list)
    returned_units: Decimal = Decimal(0)
    theoretical_hold: Expected = None
    theoretical_hold_se: float = 0.0

    @property
    def observed_hold(self) -> Fraction | None:
        """1 - units returned per unit wagered (one unit a round)."""
        if self.rounds == 0:
            return None
        return 1 - Fraction(self.returned_units) / self.rounds


@dataclass(slots=True, kw_only=True)
class TableDay:
    """A table's gaming day."""

    table: str
    day: date
    game: str | None = None
    rounds: int = 0
    not_settled: int = 0
    hands: dict[int, int] = field(default_factory=dict)
    rolls: int = 0
    rolls_declared_invalid: int = 0
    bets: list[BetReport] = field(default_factory=list)

    @property
    def hands_per_round(self) -> Fraction | None:
        """The mean number of hands dealt per round (Cover All)."""
        rounds = sum(self.hands.values())
        return Fraction(sum(h * n for h, n in self.hands.items()), rounds) if rounds else None


@dataclass(frozen=True, slots=True, kw_only=True)
class BigHit:
    """A pay of ``big_hit`` to 1 or more."""

    table: str
    seq: int
    ts: datetime
    round_id: int
    bet: str
    row: str
    pays: Decimal
    cards: list[str]
    seat: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """A request a table answered (not a resend), with its operator when it was seen."""

    table: str
    seq: int
    ts: datetime
    name: str
    status: str
    error: str | None
    operator: str | None
    details: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlarmSpan:
    """An alarm from its start to its end (None: still active), with its acknowledgement."""

    table: str
    code: str
    device: str | None
    message: str
    since: datetime
    ended: datetime | None
    acknowledged_by: str | None
    acknowledged_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AvailabilityChange:
    """A table's ``availability`` changed (as the records service received it: no seq)."""

    table: str
    status: str
    received: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Gap:
    """Seqs a table could not resend."""

    table: str
    from_seq: int
    to_seq: int
    reason: str


@dataclass(slots=True, kw_only=True)
class Report:
    """Everything a report prints."""

    first: date
    last: date
    big_hit: int
    days: list[TableDay]
    big_hits: list[BigHit]
    decisions: list[Decision]
    alarms: list[AlarmSpan]
    gaps: list[Gap]
    availability: list[AvailabilityChange] = field(default_factory=list)


FIRST_DAY: Final = date(1970, 1, 1)
"""The first gaming day a report covers (no table's journal is older)."""
LAST_DAY: Final = date(9999, 12, 30)
"""The last gaming day a report covers: the day after it must still be a date (a gaming
day ends at the next day's start), in every time zone."""
MAX_BIG_HIT: Final = 10**9
"""The largest ``big_hit`` (to 1) a report takes: beyond any pay table's odds."""
_TABLE_ID = re.compile(TABLE_ID_PATTERN)


def check_question(
    first: date, last: date, tables: list[str] | None = None, big_hit: int = BIG_HIT
) -> None:
    """A report's parameters, checked before any query: ``ValueError`` with one sentence
    when one is wrong (a day out of range, ``last`` before ``first``, a table id that is
    not one, a big hit out of range), so no parameter ends in a traceback."""
    for day in (first, last):
        if not FIRST_DAY <= day <= LAST_DAY:
            raise ValueError(
                f"{day} is not a gaming day a report covers ({FIRST_DAY} to {LAST_DAY})"
            )
    if last < first:
        raise ValueError(f"the last day {last} is before the first {first}")
    for table in tables or []:
        if not _TABLE_ID.match(table) or "\n" in table:
            raise ValueError(
                f"{table[:64]!r} is not a table id (letters, digits, - and _, 1 to 64)"
            )
    if not 1 <= big_hit <= MAX_BIG_HIT:
        raise ValueError(f"a big hit pays 1 to {MAX_BIG_HIT:,} to 1, not {big_hit}")


def window(first: date, last: date, starts: time, tz: tzinfo) -> tuple[datetime, datetime]:
    """The instants a range of gaming days covers: [first's start, the day after last's)."""
    start = datetime.combine(first, starts, tz)
    end = datetime.combine(last + timedelta(days=1), starts, tz)
    return start, end


def build(  # checks, then a query per figure in order
    conn: psycopg.Connection[Any],
    *,
    first: date,
    last: date,
    starts: time,
    tz: tzinfo,
    tz_name: str,
    tables: list[str] | None = None,
    big_hit: int = BIG_HIT,
) -> Report:
    """The report of gaming days ``first`` to ``last`` for ``tables`` (None: all).
    ``ValueError`` with a sentence for a parameter ``check_question`` refuses."""
    check_question(first, last, tables, big_hit)
    start, end = window(first, last, starts, tz)
    params: dict[str, Any] = {
        "tz": tz_name,
        "shift": timedelta(hours=starts.hour, minutes=starts.minute),
        "start": start,
        "end": end,
        "tables": tables,
        "big": big_hit,
    }
    days: dict[tuple[str, date], TableDay] = {}

    def day_of(table: str, day: date) -> TableDay:
        return days.setdefault((table, day), TableDay(table=table, day=day))

    with conn.transaction():
        infos = dict(conn.execute(_INFO, params))
        cover = conn.execute(_COVER_ALL, params).fetchall()
        bust = conn.execute(_BUST, params).fetchall()
        craps = conn.execute(_CRAPS, params).fetchall()
        rolls = conn.execute(_ROLLS, params).fetchall()
        big = _big_hits(conn, params)
        decisions = [
            Decision(
                table=r[0],
                seq=r[1],
                ts=r[2],
                name=r[3],
                status=r[4],
                error=r[5],
                operator=r[6],
                details={
                    k: v for k, v in (r[7] or {}).items() if k not in ("operator", "request_id")
                },
            )
            for r in conn.execute(_DECISIONS, params)
        ]
        alarms = [
            AlarmSpan(
                table=r[0],
                code=r[1],
                device=r[2],
                message=r[3],
                since=r[4],
                ended=r[5],
                acknowledged_by=r[6],
                acknowledged_at=r[7],
            )
            for r in conn.execute(_ALARMS, params)
        ]
        availability = [
            AvailabilityChange(table=r[0], status=r[1], received=r[2])
            for r in conn.execute(_AVAILABILITY, params)
        ]
        gaps = [
            Gap(table=r[0], from_seq=r[1], to_seq=r[2], reason=r[3])
            for r in conn.execute(_GAPS, params)
        ]

    _cover_all(cover, day_of)
    _bust_bonus(bust, infos, day_of)
    _craps(craps, rolls, infos, day_of)
    return Report(
        first=first,
        last=last,
        big_hit=big_hit,
        days=sorted(days.values(), key=lambda d: (d.table, d.day)),
        big_hits=big,
        decisions=decisions,
        alarms=alarms,
        gaps=gaps,
        availability=availability,
    )


def _big_hits(conn: psycopg.Connection[Any], params: dict[str, Any]) -> list[BigHit]:
    out = [
        BigHit(
            table=table,
            seq=seq,
            ts=ts,
            round_id=round_id,
            bet=bet,
            row=row,
            pays=pays,
            cards=list(cards or []),
            seat=seat,
        )
        for query in (_BIG_COVER_ALL, _BIG_BUST, _BIG_CRAPS)
        for table, seq, ts, round_id, bet, row, pays, cards, seat in conn.execute(query, params)
    ]
    return sorted(out, key=lambda h: (h.ts, h.table, h.seq))


def _cover_all(rows: list[tuple[Any, ...]], day_of: Any) -> None:
    grouped: dict[tuple[str, date], list[tuple[Any, ...]]] = defaultdict(list)
    for r in rows:
        grouped[(r[0], r[1])].append(r)
    for (table, day), items in grouped.items():
        td: TableDay = day_of(table, day)
        game = items[0][2]
        td.game = game
        per_column: dict[int, int] = defaultdict(int)
        hits: dict[str, int] = defaultdict(int)
        pays: dict[str, Decimal] = defaultdict(Decimal)
        for _, _, _, hands, outcome, hand, count, paid in items:
            if outcome not in ("win", "no_qualifier") or hands is None:
                td.not_settled += count
                continue
            per_column[hands] += count
            if outcome == "win":
                hits[hand] += count
                pays[hand] += paid or Decimal(0)
        rounds = sum(per_column.values())
        td.rounds += rounds
        td.hands = dict(sorted(per_column.items()))
        bet = BetReport(bet="cover_all", rounds=rounds)
        known = set(cover_all_columns(game))
        for row in cover_all_rows(game):
            expected: Expected = None
            se = 0.0
            if set(per_column) <= known:
                exact: Fraction | None = Fraction(0)
                approx = 0.0
                for hands, n in per_column.items():
                    chance = cover_all_chance(game, hands, row)
                    approx += n * chance.estimate
                    se += n * chance.std_error
                    exact = (
                        None if exact is None or chance.exact is None else exact + n * chance.exact
                    )
                expected = exact if exact is not None else approx
            bet.rows.append(
                RowReport(
                    row=row, hits=hits[row], expected=expected, expected_se=se, pays_units=pays[row]
                )
            )
        bet.returned_units = sum((pays[r] + hits[r] for r in hits), Decimal(0))
        bet.theoretical_hold, bet.theoretical_hold_se = _cover_all_hold(game, per_column, known)
        td.bets.append(bet)


def _cover_all_hold(
    game: str, per_column: dict[int, int], known: set[int]
) -> tuple[Expected, float]:
    rounds = sum(per_column.values())
    if rounds == 0 or not set(per_column) <= known:
        return None, 0.0
    returned: Fraction | float = Fraction(0)
    se = 0.0
    for hands, n in per_column.items():
        for pay in cover_all_paytable(game, hands):
            chance = cover_all_chance(game, hands, pay.hand)
            factor = Fraction(pay.pays) + 1
            if chance.exact is not None and isinstance(returned, Fraction):
                returned += n * chance.exact * factor
            else:
                returned = float(returned) + n * chance.estimate * float(factor)
            se += n * chance.std_error * float(factor)
    if isinstance(returned, Fraction):
        return 1 - returned / rounds, 0.0
    return 1 - returned / rounds, se / rounds


def _shoe(info: dict[str, Any] | None) -> tuple[int, bool] | None:
    bust = ((info or {}).get("paytables") or {}).get("bust_bonus")
    return None if bust is None else (int(bust["decks"]), bool(bust["dealer_hits_soft_17"]))


def _bust_bonus(rows: list[tuple[Any, ...]], infos: dict[str, Any], day_of: Any) -> None:
    grouped: dict[tuple[str, date], list[tuple[Any, ...]]] = defaultdict(list)
    for r in rows:
        grouped[(r[0], r[1])].append(r)
    for (table, day), items in grouped.items():
        td: TableDay = day_of(table, day)
        td.game = "BJ"
        rounds = 0
        hits: dict[str, int] = defaultdict(int)
        pays: dict[str, Decimal] = defaultdict(Decimal)
        for _, _, outcome, row, column, no_up, count, paid in items:
            if outcome not in ("win", "lose") or no_up:
                td.not_settled += count
                continue
            rounds += count
            if outcome == "win":
                hits[f"{row} {column}"] += count
                pays[f"{row} {column}"] += paid or Decimal(0)
        td.rounds += rounds
        bet = BetReport(bet="bust_bonus", rounds=rounds)
        shoe = _shoe(infos.get(table))
        cells = bust_cell_chances(*shoe) if shoe else None
        for paytable_row in BUST_BONUS.rows:
            for column in (SUITED, "off_suit"):
                name = f"{paytable_row.row} {column}"
                chance = cells.get((paytable_row.row, column)) if cells else None
                bet.rows.append(
                    RowReport(
                        row=name,
                        hits=hits[name],
                        expected=None if chance is None else rounds * chance,
                        expected_se=0.0,
                        pays_units=pays[name],
                    )
                )
        bet.returned_units = sum((pays[r] + hits[r] for r in hits), Decimal(0))
        bet.theoretical_hold = bust_odds_table(*shoe).house_edge if shoe else None
        td.bets.append(bet)


def _craps(
    rows: list[tuple[Any, ...]], rolls: list[tuple[Any, ...]], infos: dict[str, Any], day_of: Any
) -> None:
    for table, day, counted, invalid in rolls:
        td: TableDay = day_of(table, day)
        td.game = "CRAPS"
        td.rolls += counted
        td.rolls_declared_invalid += invalid
    grouped: dict[tuple[str, date, str], list[tuple[Any, ...]]] = defaultdict(list)
    for r in rows:
        grouped[(r[0], r[1], r[2])].append(r)
    for (table, day, bet_name), items in sorted(grouped.items()):
        td = day_of(table, day)
        td.game = "CRAPS"
        settled = sum(r[4] for r in items)
        wins = sum(r[4] for r in items if r[3] == "win")
        paid = sum((r[5] or Decimal(0) for r in items if r[3] == "win"), Decimal(0))
        chance = craps_bet_chance(cast(CrapsBet, bet_name))
        bet = BetReport(bet=bet_name, rounds=settled)
        bet.rows.append(
            RowReport(
                row="win", hits=wins, expected=settled * chance, expected_se=0.0, pays_units=paid
            )
        )
        bet.returned_units = paid + wins
        odds = (((infos.get(table) or {}).get("paytables") or {}).get("bonus_craps") or {}).get(
            "pays"
        )
        if odds and bet_name in odds:
            bet.theoretical_hold = 1 - chance * (Fraction(Decimal(odds[bet_name])) + 1)
        td.bets.append(bet)
