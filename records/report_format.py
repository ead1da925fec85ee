"""A report (``records.reports``) as text for people, JSON for machines, CSV for sheets.

Exact values stay exact: an expected count or hold that is a fraction is written as a
decimal rounded to the places shown *and*, in JSON, as the fraction ``"n/d"``; money
(pays in bet units) is a decimal string. A simulated expectation is a float with its
standard error beside it (``12.34 ± 0.05`` in text, ``"se"`` in JSON and CSV).
"""

from __future__ import annotations

import csv
import io
import json
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from typing import Any

from records.reports import Expected, Report, TableDay


def _decimal(value: Fraction, places: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = len(str(abs(value.numerator))) + len(str(value.denominator)) + places + 10
        exact = Decimal(value.numerator) / Decimal(value.denominator)
        return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN)


def number(value: Expected, places: int = 2) -> str:
    """An exact or estimated value as a decimal with ``places`` places (``-`` for None)."""
    if value is None:
        return "-"
    if isinstance(value, Fraction):
        return f"{_decimal(value, places):f}"
    return f"{value:.{places}f}"


def percent(value: Expected, places: int = 2) -> str:
    """A hold as a percentage."""
    if value is None:
        return "-"
    return f"{number(value * 100, places)} %"


def _exact_json(value: Expected, se: float = 0.0) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, Fraction):
        return {"decimal": number(value, 6), "fraction": f"{value.numerator}/{value.denominator}"}
    return {"estimate": value, "se": se}


def text(report: Report) -> str:
    """The report for a person."""
    lines = [f"Gaming days {report.first} to {report.last}"]
    if not report.days:
        lines.append("No rounds recorded.")
    for day in report.days:
        lines += ["", *_day_text(day)]
    lines += ["", f"Big hits ({report.big_hit} to 1 or more)"]
    lines += [
        f"  {h.ts:%Y-%m-%d %H:%M:%S} {h.table} round {h.round_id} {h.bet} {h.row} "
        f"{h.pays:f} to 1"
        + (f", seat {h.seat}" if h.seat else "")
        + (f", {' '.join(h.cards)}" if h.cards else "")
        for h in report.big_hits
    ] or ["  none"]
    lines += ["", "Decisions"]
    lines += [
        f"  {d.ts:%Y-%m-%d %H:%M:%S} {d.table} {d.name} "
        + " ".join(f"{k}={v}" for k, v in sorted(d.details.items()))
        + f" by {d.operator or 'unknown operator'}: {d.status}"
        + (f" ({d.error})" if d.error else "")
        for d in report.decisions
    ] or ["  none"]
    lines += ["", "Alarms"]
    lines += [
        f"  {a.table} {a.code}: {a.message}; from {a.since:%Y-%m-%d %H:%M:%S} "
        + (f"to {a.ended:%Y-%m-%d %H:%M:%S}" if a.ended else "still active")
        + (
            f"; acknowledged by {a.acknowledged_by} at {a.acknowledged_at:%H:%M:%S}"
            if a.acknowledged_by and a.acknowledged_at
            else "; not acknowledged"
        )
        for a in report.alarms
    ] or ["  none"]
    lines += ["", "Availability (as received)"]
    lines += [
        f"  {a.received:%Y-%m-%d %H:%M:%S} {a.table} {a.status}" for a in report.availability
    ] or ["  no change"]
    if report.gaps:
        lines += ["", "Gaps (seqs a table could not resend)"]
        lines += [f"  {g.table} {g.from_seq}..{g.to_seq}: {g.reason}" for g in report.gaps]
    return "\n".join(lines) + "\n"


def _day_text(day: TableDay) -> list[str]:
    head = f"Table {day.table}, gaming day {day.day}" + (f" ({day.game})" if day.game else "")
    # A craps table has rolls and settlements, not rounds.
    parts = [] if day.rolls and not day.rounds else [f"{day.rounds:,} rounds"]
    if day.not_settled:
        parts.append(f"{day.not_settled:,} void or flagged")
    if day.hands:
        mix = ", ".join(f"{h}: {n:,}" for h, n in day.hands.items())
        parts.append(f"hands per round {number(day.hands_per_round)} ({mix})")
    if day.rolls or day.rolls_declared_invalid:
        parts.append(f"{day.rolls:,} rolls counted, {day.rolls_declared_invalid} declared invalid")
    out = [f"{head}: " + "; ".join(parts)]
    for bet in day.bets:
        unit = "settlements" if day.rolls and not day.rounds else "rounds"
        out.append(f"  {bet.bet}: {bet.rounds:,} {unit}")
        width = max(len(r.row) for r in bet.rows) if bet.rows else 4
        out.append(f"    {'row':<{width}}  {'hits':>6}  {'expected':>16}  {'pays (units)':>12}")
        for r in bet.rows:
            expected = number(r.expected)
            if r.expected_se:
                expected += f" ± {r.expected_se:.2f}"
            out.append(f"    {r.row:<{width}}  {r.hits:>6,}  {expected:>16}  {r.pays_units:>12f}")
        theoretical = percent(bet.theoretical_hold)
        if bet.theoretical_hold_se:
            theoretical += f" ± {bet.theoretical_hold_se * 100:.2f}"
        out.append(f"    hold: theoretical {theoretical}, observed {percent(bet.observed_hold)}")
    return out


def as_json(report: Report) -> str:  # declarative: the report's JSON shape, one key a line
    """The report for machines (no floats but simulated estimates, each with its se)."""
    payload = {
        "first": report.first.isoformat(),
        "last": report.last.isoformat(),
        "big_hit": report.big_hit,
        "days": [
            {
                "table": d.table,
                "day": d.day.isoformat(),
                "game": d.game,
                "rounds": d.rounds,
                "not_settled": d.not_settled,
                "hands": {str(h): n for h, n in d.hands.items()},
                "hands_per_round": _exact_json(d.hands_per_round),
                "rolls": d.rolls,
                "rolls_declared_invalid": d.rolls_declared_invalid,
                "bets": [
                    {
                        "bet": b.bet,
                        "rounds": b.rounds,
                        "rows": [
                            {
                                "row": r.row,
                                "hits": r.hits,
                                "expected": _exact_json(r.expected, r.expected_se),
                                "pays_units": f"{r.pays_units:f}",
                            }
                            for r in b.rows
                        ],
                        "returned_units": f"{b.returned_units:f}",
                        "theoretical_hold": _exact_json(b.theoretical_hold, b.theoretical_hold_se),
                        "observed_hold": _exact_json(b.observed_hold),
                    }
                    for b in d.bets
                ],
            }
            for d in report.days
        ],
        "big_hits": [
            {
                "table": h.table,
                "seq": h.seq,
                "ts": h.ts.isoformat(),
                "round_id": h.round_id,
                "bet": h.bet,
                "row": h.row,
                "pays": f"{h.pays:f}",
                "cards": h.cards,
                "seat": h.seat,
            }
            for h in report.big_hits
        ],
        "decisions": [
            {
                "table": d.table,
                "seq": d.seq,
                "ts": d.ts.isoformat(),
                "name": d.name,
                "status": d.status,
                "error": d.error,
                "operator": d.operator,
                "details": d.details,
            }
            for d in report.decisions
        ],
        "alarms": [
            {
                "table": a.table,
                "code": a.code,
                "device": a.device,
                "message": a.message,
                "since": a.since.isoformat(),
                "ended": a.ended.isoformat() if a.ended else None,
                "acknowledged_by": a.acknowledged_by,
                "acknowledged_at": a.acknowledged_at.isoformat() if a.acknowledged_at else None,
            }
            for a in report.alarms
        ],
        "gaps": [
            {"table": g.table, "from_seq": g.from_seq, "to_seq": g.to_seq, "reason": g.reason}
            for g in report.gaps
        ],
        "availability": [
            {"table": a.table, "status": a.status, "received": a.received.isoformat()}
            for a in report.availability
        ],
    }
    return json.dumps(payload, indent=2) + "\n"


def as_csv(report: Report) -> str:
    """One line per table, gaming day, bet and row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "table",
            "day",
            "game",
            "bet",
            "rounds",
            "row",
            "hits",
            "expected",
            "expected_se",
            "pays_units",
            "theoretical_hold",
            "observed_hold",
        ]
    )
    for d in report.days:
        for b in d.bets:
            for r in b.rows:
                writer.writerow(
                    [
                        d.table,
                        d.day.isoformat(),
                        d.game or "",
                        b.bet,
                        b.rounds,
                        r.row,
                        r.hits,
                        number(r.expected, 6),
                        f"{r.expected_se:.6f}",
                        f"{r.pays_units:f}",
                        number(b.theoretical_hold, 6),
                        number(b.observed_hold, 6),
                    ]
                )
    return out.getvalue()
