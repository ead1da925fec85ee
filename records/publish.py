"""The integrity alarms as the floor's retained topic says (``contract.floor``), pure.

``integrity_payload(table, findings, ts)`` builds the JSON of
``lammer-floor/integrity/<table>``: one alarm per finding, its p-value written with two
significant digits rounded *up* (a p-value shown is never smaller than computed), its
expected count to two decimal places, and a sentence for the pit ("Royal Flush: 9 hits
where 0.62 were expected in 4,210 rounds (all time)").
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

from contract.floor import IntegrityAlarm, IntegrityBody
from records.integrity import ALL_ROWS, Finding

_WINDOWS = {"day": "gaming day", "week": "rolling week", "all": "all time"}


def p_value_text(p: float) -> str:
    """``p`` as ``"d.de-N"`` rounded up (``"1"`` at 1 or more)."""
    if p >= 1 or p != p:  # NaN: say nothing is wrong rather than invent a value
        return "1"
    if p <= 0:
        return "1.0e-999"  # below any double: the smallest the format can say
    exponent = math.floor(math.log10(p))
    mantissa = math.ceil(p / 10.0**exponent * 10 - 1e-9) / 10
    if mantissa >= 10:
        mantissa, exponent = 1.0, exponent + 1
    if exponent >= 0:
        return "1"
    return f"{mantissa:.1f}e-{-exponent}"


def expected_text(finding: Finding) -> str:
    """The expected count to two places (from the exact fraction when there is one)."""
    value = (
        Decimal(finding.expected_exact.numerator) / Decimal(finding.expected_exact.denominator)
        if isinstance(finding.expected_exact, Fraction)
        else Decimal(repr(finding.expected))
    )
    return str(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN).max(Decimal(0)))


def sentence(finding: Finding) -> str:
    """What is off, for a person at the pit."""
    where = _WINDOWS[finding.window]
    if finding.row == ALL_ROWS:
        return (
            f"{finding.bet}: the rows together do not fit the par sheet over "
            f"{finding.trials:,} rounds ({where}, p = {p_value_text(finding.p_value)})"
        )
    hits = "hit" if finding.observed == 1 else "hits"
    return (
        f"{finding.bet}, {finding.row}: {finding.observed:,} {hits} where "
        f"{expected_text(finding)} were expected in {finding.trials:,} rounds ({where})"
    )


def integrity_payload(table: str, findings: list[Finding], ts: str) -> dict[str, Any]:
    """The retained payload for ``table``: its alarms, empty when all is well."""
    body = IntegrityBody(
        table=table,
        ts=ts,
        alarms=[
            IntegrityAlarm(
                bet=f.bet,
                row=f.row,
                window=f.window,
                observed=f.observed,
                expected=expected_text(f),
                p_value=p_value_text(f.p_value),
                since=f.since,
                side=f.side,
                rounds=f.trials,
                message=sentence(f),
            )
            for f in findings
        ],
    )
    return body.model_dump(mode="json")
