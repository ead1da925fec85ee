"""The integrity watch: does a table's outcomes still look like its par sheet?

Pure statistics (no database, no clock, no MQTT): ``Watch`` is fed what a table played
(``observe``: a gaming day, the rounds per par-sheet column, the hits per row) and says
which counts are off (``evaluate``). ``records.service`` feeds it from the store and
publishes what it finds on ``lammer-floor/integrity/<table>``.

What is tested, per table and per *family* (a bet, or a device's raw outcomes), each over
three windows (the gaming day, the rolling week of 7 gaming days ending with it, all
time):

* every row, both ways: too many hits (a shuffler dealing royal flushes) and too few (a
  shuffler starving a bet). The observed count ``X`` is a sum of independent Bernoulli
  trials, one per round, whose probabilities depend on the column played (the number of
  hands): a Poisson-binomial with mean ``mu = sum over columns of n_c * p_c``. Its exact
  tail is bounded by a binomial's: Hoeffding (1956, Theorem 4) shows
  ``P(X >= x) <= P(Bin(n, mu/n) >= x)`` for ``x >= mu + 1`` and
  ``P(X <= x) <= P(Bin(n, mu/n) <= x)`` for ``x <= mu - 1``, so the p-value reported is
  never smaller than the truth (never optimistic); with one column it is exact. Counts
  within 1 of the mean are reported with p-value 1 (nothing to see there).
* where a probability is simulated (Cover All with 3 hands or more), it is taken at
  ``p + Z_SIMULATION * se`` for the "too many" side and ``p - Z_SIMULATION * se`` for the
  "too few" side: the par sheet's own error counts against the alarm, never for it
  (Z = 4: the par sheet itself is off by more with probability 6e-5, once, for good).
* all rows together (with the rounds that paid nothing): Pearson's X² against the
  expected counts, cells under 5 expected pooled, each cell's variance widened by the
  simulation's error; its p-value is the chi-square approximation (asymptotic, not a
  bound: with every cell at 5 or more expected it is close).

The threshold (``ALPHA``): a floor must see fewer than one false alarm a year. By the union
bound the expected number of false alarms is at most (tests a year) x ``ALPHA``:

    tables                    1,000   (the floor's measured capacity, docs/floor/cluster.md)
    evaluations per table     2.19e6  a year: one per result, 250 results an hour, 24 h, 365 d
    tests per evaluation        336   at most: craps' 36 dice outcomes + 11 totals + 6 faces
                                      + 3 all-rows tests = 56 rows, x 3 windows x 2 sides
    ------------------------------------------------------------------------------------
    tests a year             7.4e11   so ALPHA = 1e-12 gives at most 0.74 false alarms a year

An upper bound: the same counts are tested again after every result, so the tests are
strongly dependent and the true rate is far lower; a poker or Bust Bonus table runs fewer
tests per evaluation (at most 22 rows + 10 bust rates).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from fractions import Fraction
from typing import Final, Literal

from records.parsheet import (
    DICE_CELL,
    FACE,
    Chance,
    bust_cell_chances,
    bust_cells,
    bust_rates,
    cover_all_chance,
    cover_all_columns,
    cover_all_rows,
    craps_bet_chance,
)

ALPHA: Final = 1e-12
"""The p-value under which a count raises an alarm (the arithmetic: module docstring)."""

TABLES: Final = 1_000
EVALUATIONS_PER_TABLE_YEAR: Final = 250 * 24 * 365
TESTS_PER_EVALUATION: Final = (36 + 11 + 6 + 3) * 3 * 2
FALSE_ALARMS_A_YEAR_AT_MOST: Final = (
    TABLES * EVALUATIONS_PER_TABLE_YEAR * TESTS_PER_EVALUATION * ALPHA
)

Z_SIMULATION: Final = 4.0
"""Standard errors a simulated probability is moved against the alarm."""

WEEK_DAYS: Final = 7
MIN_CELL_EXPECTED: Final = 5.0
ALL_ROWS: Final = "all rows"
OTHER: Final = "no paying row"

Window = Literal["day", "week", "all"]
WINDOWS: Final[tuple[Window, ...]] = ("day", "week", "all")
Side = Literal["high", "low", "fit"]


# ---------------------------------------------------------------------------------------
# Tails


def _log_binom_pmf(k: int, n: int, p: float) -> float:
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def _kl(t: float, p: float) -> float:
    """Kullback-Leibler divergence of Bernoulli(t) from Bernoulli(p)."""
    out = 0.0
    if t > 0:
        out += t * math.log(t / p)
    if t < 1:
        out += (1 - t) * math.log((1 - t) / (1 - p))
    return out


def binomial_upper(x: int, n: int, p: float, *, floor: float = 0.0) -> float:
    """``P(Bin(n, p) >= x)``, rounded up (never optimistic); 1 when ``x`` is not above the
    mean by 1 or more.

    With ``floor``: when the tail is certainly at least ``floor`` (Ash's lower bound,
    ``P >= exp(-n D(x/n || p)) / sqrt(8 x (1 - x/n))``), returns that bound instead of
    summing (the caller only needs to know it is not below ``floor``).
    """
    if x <= 0 or p >= 1:
        return 1.0
    if x > n or p <= 0:
        return 0.0
    if x < n * p + 1:
        return 1.0
    if x < n and floor > 0:
        t = x / n
        log_lower = -n * _kl(t, p) - 0.5 * math.log(8 * x * (1 - t))
        if log_lower >= math.log(floor):
            return min(1.0, math.exp(log_lower))
    total = 0.0
    for k in range(x, n + 1):
        term = math.exp(_log_binom_pmf(k, n, p))
        total += term
        if term <= total * 1e-17:
            break
    return min(1.0, total * (1 + 1e-9))


def binomial_lower(x: int, n: int, p: float, *, floor: float = 0.0) -> float:
    """``P(Bin(n, p) <= x)``, rounded up; 1 when ``x`` is not below the mean by 1 or more."""
    return binomial_upper(n - x, n, 1 - p, floor=floor)


def _gamma_q(a: float, x: float) -> float:
    """The regularised upper incomplete gamma function Q(a, x) (Numerical Recipes 6.2)."""
    if x <= 0:
        return 1.0
    gln = math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(10_000):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(-x + a * math.log(x) - gln))
    b = x + 1 - a
    c = 1.0 / 1e-300
    d = 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - gln) * h


def chi_square_sf(statistic: float, df: int) -> float:
    """``P(chi2(df) >= statistic)``."""
    return _gamma_q(df / 2, statistic / 2)


# ---------------------------------------------------------------------------------------
# Families


@dataclass(frozen=True, slots=True)
class Family:
    """A bet or a device's outcomes: its rows and each row's chance per column.

    ``chances[column][row]``; a trial hits at most one row. ``exclusive`` is true when the
    rows and ``OTHER`` partition the trials (the all-rows test needs it).
    """

    name: str
    rows: tuple[str, ...]
    chances: Mapping[object, Mapping[str, Chance]]
    exclusive: bool = True


def cover_all_family(game: str) -> Family:
    """A Cover All Bonus table's bet: the highest hand's row, per number of hands."""
    rows = cover_all_rows(game)
    return Family(
        name="cover_all",
        rows=rows,
        chances={
            hands: {row: cover_all_chance(game, hands, row) for row in rows}
            for hands in cover_all_columns(game)
        },
    )


def bust_bonus_families(decks: int, hits_soft_17: bool) -> list[Family]:
    """Bust Bonus: its paying cells per round, and the dealer's bust rate per up card."""
    cells = bust_cell_chances(decks, hits_soft_17)
    out = [
        Family(
            name="bust_bonus",
            rows=tuple(f"{row} {column}" for row, column in bust_cells()),
            chances={None: {f"{r} {c}": Chance.of(cells[(r, c)]) for r, c in bust_cells()}},
        )
    ]
    for up, rate in bust_rates(decks, hits_soft_17).items():
        out.append(
            Family(
                name=f"dealer bust, up card {up}",
                rows=("bust",),
                chances={None: {"bust": Chance.of(rate)}},
            )
        )
    return out


def craps_families() -> list[Family]:
    """Bonus Craps: each bet's wins per settlement; the dice's 36 outcomes, totals, faces."""
    out = [
        Family(name=bet, rows=("win",), chances={None: {"win": Chance.of(craps_bet_chance(bet))}})
        for bet in ("all_small", "all_tall", "make_em_all")
    ]
    cells = tuple(f"{a}-{b}" for a in range(1, 7) for b in range(1, 7))
    out.append(
        Family(name="dice", rows=cells, chances={None: dict.fromkeys(cells, Chance.of(DICE_CELL))})
    )
    totals = {
        str(t): Chance.of(
            Fraction(sum(1 for a in range(1, 7) for b in range(1, 7) if a + b == t), 36)
        )
        for t in range(2, 13)
    }
    out.append(Family(name="dice totals", rows=tuple(totals), chances={None: totals}))
    faces = tuple(str(f) for f in range(1, 7))
    # Each roll is two trials of one die's face (the dice are independent).
    out.append(
        Family(name="die faces", rows=faces, chances={None: dict.fromkeys(faces, Chance.of(FACE))})
    )
    return out


# ---------------------------------------------------------------------------------------
# The watch


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One count against its expectation: an alarm when ``p_value < ALPHA``.

    ``expected`` is the best estimate; ``expected_exact`` the exact fraction when every
    probability it sums is exact. ``side``: ``high`` (too many), ``low`` (too few) or
    ``fit`` (the all-rows test, row ``ALL_ROWS``).
    """

    bet: str
    row: str
    window: Window
    side: Side
    observed: int
    trials: int
    expected: float
    expected_exact: Fraction | None
    p_value: float
    since: str


@dataclass
class _Counts:
    trials: Counter[object] = field(default_factory=Counter)
    hits: Counter[str] = field(default_factory=Counter)

    def add(self, other: _Counts) -> None:
        """Add another day's counts to these."""
        self.trials.update(other.trials)
        self.hits.update(other.hits)


class Watch:
    """One table's watch over its families (see the module docstring).

    ``observe`` adds counts for a gaming day; ``evaluate`` tests the windows ending with a
    gaming day and returns the findings under ``alpha``, each with the time (``now``, the
    caller's) it was first found, kept while it stays under.
    """

    def __init__(
        self, families: Iterable[Family], *, alpha: float = ALPHA, z: float = Z_SIMULATION
    ) -> None:
        self.families = {f.name: f for f in families}
        self.alpha = alpha
        self.z = z
        self._days: dict[str, dict[date, _Counts]] = {name: {} for name in self.families}
        self._total: dict[str, _Counts] = {name: _Counts() for name in self.families}
        self._since: dict[tuple[str, str, Window, Side], str] = {}
        self._alarms: dict[str, list[Finding]] = {}

    def observe(
        self,
        family: str,
        day: date,
        trials: Mapping[object, int],
        hits: Mapping[str, int],
    ) -> None:
        """Add ``trials`` (per column) and ``hits`` (per row) played on gaming day ``day``."""
        fam = self.families[family]
        unknown = [c for c in trials if c not in fam.chances]
        if unknown:
            raise KeyError(f"{family} has no par-sheet column {unknown[0]!r}")
        bad = [r for r in hits if r not in fam.rows]
        if bad:
            raise KeyError(f"{family} has no row {bad[0]!r}")
        add = _Counts(Counter(trials), Counter(hits))
        self._days[family].setdefault(day, _Counts()).add(add)
        self._total[family].add(add)

    def counts(
        self, family: str, window: Window, day: date
    ) -> tuple[Counter[object], Counter[str]]:
        """The trials per column and hits per row of ``family`` in a window ending on ``day``."""
        if window == "all":
            total = self._total[family]
            return total.trials, total.hits
        span = 1 if window == "day" else WEEK_DAYS
        out = _Counts()
        for back in range(span):
            counts = self._days[family].get(day - timedelta(days=back))
            if counts is not None:
                out.add(counts)
        return out.trials, out.hits

    def evaluate(self, day: date, now: str, families: Iterable[str] | None = None) -> list[Finding]:
        """Every alarm of the table: the families named (all by default) tested again for
        the windows ending on ``day``, the others' alarms as they were last found."""
        names = list(self.families) if families is None else list(families)
        for name in names:
            found: list[Finding] = []
            for window in WINDOWS:
                for finding in self._test(self.families[name], window, day, now):
                    if finding.p_value < self.alpha:
                        key = (finding.bet, finding.row, finding.window, finding.side)
                        found.append(replace(finding, since=self._since.get(key, now)))
            self._alarms[name] = found
            keys = {(f.bet, f.row, f.window, f.side): f.since for f in found}
            for key in [k for k in self._since if k[0] == name and k not in keys]:
                del self._since[key]
            self._since.update(keys)
        return [f for name in self.families for f in self._alarms.get(name, [])]

    def active(self) -> dict[tuple[str, str, Window, Side], str]:
        """The alarms raised and not cleared, with the time each was first found."""
        return dict(self._since)

    def findings(self, family: str, window: Window, day: date) -> list[Finding]:
        """Every test of a family and window, alarming or not (for reports)."""
        return self._test(self.families[family], window, day, "")

    def _test(  # one pass: Pearson's cells and the bounds
        self,
        fam: Family,
        window: Window,
        day: date,
        now: str,
    ) -> list[Finding]:
        trials, hits = self.counts(fam.name, window, day)
        n = sum(trials.values())
        if n == 0:
            return []
        out: list[Finding] = []
        cells: list[tuple[float, float, float]] = []  # observed, expected, variance
        rest_obs, rest_exp = n, 0.0
        for row in fam.rows:
            best = high = low = 0.0
            spread = 0.0
            exact: Fraction | None = Fraction(0)
            for column, count in trials.items():
                chance = fam.chances[column][row]
                best += count * chance.estimate
                high += count * min(1.0, chance.estimate + self.z * chance.std_error)
                low += count * max(0.0, chance.estimate - self.z * chance.std_error)
                spread += count * chance.std_error
                exact = (
                    None if exact is None or chance.exact is None else exact + count * chance.exact
                )
            x = hits[row]
            rest_obs -= x
            rest_exp += best
            floor = self.alpha
            base = Finding(
                bet=fam.name,
                row=row,
                window=window,
                side="high",
                observed=x,
                trials=n,
                expected=best,
                expected_exact=exact,
                p_value=binomial_upper(x, n, high / n, floor=floor),
                since=now,
            )
            out.append(base)
            out.append(
                replace(base, side="low", p_value=binomial_lower(x, n, low / n, floor=floor))
            )
            cells.append((x, best, best + spread * spread))
        if fam.exclusive:
            other = n - rest_exp
            cells.append((rest_obs, other, max(other, 1e-300)))
            statistic, df = _pooled_chi_square(cells)
            if df >= 1:
                out.append(
                    Finding(
                        bet=fam.name,
                        row=ALL_ROWS,
                        window=window,
                        side="fit",
                        observed=n - rest_obs,
                        trials=n,
                        expected=rest_exp,
                        expected_exact=None,
                        p_value=chi_square_sf(statistic, df),
                        since=now,
                    )
                )
        return out


def _pooled_chi_square(cells: list[tuple[float, float, float]]) -> tuple[float, int]:
    """Pearson's statistic over cells of 5 or more expected, the others pooled into one."""
    kept = [c for c in cells if c[1] >= MIN_CELL_EXPECTED]
    small = [c for c in cells if c[1] < MIN_CELL_EXPECTED]
    if small:
        pooled = tuple(sum(c[i] for c in small) for i in range(3))
        if pooled[1] >= MIN_CELL_EXPECTED:
            kept.append(pooled)  # type: ignore[arg-type]
        elif kept:
            # Too small even pooled: fold into the smallest kept cell.
            smallest = min(range(len(kept)), key=lambda i: kept[i][1])
            kept[smallest] = tuple(a + b for a, b in zip(kept[smallest], pooled, strict=True))  # type: ignore[assignment]
    if len(kept) < 2:
        return 0.0, 0
    statistic = sum((obs - exp) ** 2 / var for obs, exp, var in kept)
    return statistic, len(kept) - 1
