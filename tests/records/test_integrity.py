"""The integrity watch: its tails against exact arithmetic, and what it catches, and when.

Detection figures (stated in docs/auditors/integrity-statistics.md; each test recomputes its figure
and fails if the statement drifts):

* a shuffler dealing Royal Flushes 10 times as often as chance at an Ultimate Texas
  Hold'em table of 6 hands (the par sheet's simulated column: its error counts against
  the alarm) is flagged within ``ROYAL_ROUNDS`` rounds with 95 % probability;
* dice whose sixes come up 1.5 times as often (each die: 1/4 instead of 1/6) are flagged
  within ``SIXES_ROLLS`` rolls with 95 % probability.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from datetime import date, timedelta
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from records import integrity
from records.integrity import (
    ALL_ROWS,
    ALPHA,
    FALSE_ALARMS_A_YEAR_AT_MOST,
    MIN_CELL_EXPECTED,
    Z_SIMULATION,
    Family,
    Finding,
    Watch,
    _kl,
    _pooled_chi_square,
    binomial_lower,
    binomial_upper,
    bust_bonus_families,
    chi_square_sf,
    cover_all_family,
    craps_families,
)
from records.parsheet import (
    Chance,
    bust_cell_chances,
    bust_cells,
    bust_rates,
    cover_all_chance,
    cover_all_rows,
)

ROOT = Path(__file__).resolve().parents[2]
DAY0 = date(2026, 12, 1)

ROYAL_ROUNDS = 19_000
SIXES_ROLLS = 900


def _exact_binomial_tail(x: int, n: int, p: Fraction) -> Fraction:
    return sum(
        (Fraction(math.comb(n, k)) * p**k * (1 - p) ** (n - k) for k in range(x, n + 1)),
        Fraction(0),
    )


def _poisson_binomial(ps: list[Fraction]) -> list[Fraction]:
    dist = [Fraction(1)]
    for p in ps:
        nxt = [Fraction(0)] * (len(dist) + 1)
        for k, q in enumerate(dist):
            nxt[k] += q * (1 - p)
            nxt[k + 1] += q * p
        dist = nxt
    return dist


@pytest.mark.parametrize(
    ("n", "p"), [(30, Fraction(1, 6)), (40, Fraction(1, 36)), (12, Fraction(2, 3))]
)
def test_binomial_tails_match_exact_sums_and_never_fall_short(n: int, p: Fraction) -> None:
    for x in range(n + 1):
        exact_up = _exact_binomial_tail(x, n, p)
        exact_down = 1 - _exact_binomial_tail(x + 1, n, p)
        up, down = binomial_upper(x, n, float(p)), binomial_lower(x, n, float(p))
        assert up >= float(exact_up) * (1 - 1e-15)
        assert down >= float(exact_down) * (1 - 1e-15)
        if x >= n * p + 1:
            assert up == pytest.approx(float(exact_up), rel=1e-8, abs=1e-300)
        if x <= n * p - 1:
            assert down == pytest.approx(float(exact_down), rel=1e-8, abs=1e-300)


def test_the_binomial_bound_of_a_poisson_binomial_is_never_optimistic() -> None:
    # Rounds of different columns: 1 to 8 hands' chances of one row (Hoeffding 1956).
    ps = [Fraction(k, 97) for k in (1, 1, 2, 3, 5, 8, 13, 21)] * 5
    dist = _poisson_binomial(ps)
    n, mu = len(ps), sum(ps, Fraction(0))
    for x in range(n + 1):
        upper = sum(dist[x:], Fraction(0))
        lower = sum(dist[: x + 1], Fraction(0))
        assert binomial_upper(x, n, float(mu / n)) >= float(upper)
        assert binomial_lower(x, n, float(mu / n)) >= float(lower)


def test_the_ash_shortcut_only_answers_not_below_the_floor() -> None:
    # With a floor the tail may be replaced by a lower bound, but only when that bound is
    # already at or above the floor: the alarm decision is the exact one's.
    for x in range(1, 200):
        fast = binomial_upper(x, 1000, 0.05, floor=1e-12)
        slow = binomial_upper(x, 1000, 0.05)
        assert (fast < 1e-12) == (slow < 1e-12)
        assert fast <= slow * (1 + 1e-9)


def test_chi_square_survival_matches_known_quantiles() -> None:
    assert chi_square_sf(3.841458820694124, 1) == pytest.approx(0.05, rel=1e-9)
    assert chi_square_sf(11.070497693516351, 5) == pytest.approx(0.05, rel=1e-9)
    assert chi_square_sf(23.209251158954356, 10) == pytest.approx(0.01, rel=1e-9)
    assert chi_square_sf(100.0, 10) < 1e-15


def test_the_false_alarm_arithmetic_keeps_the_floor_under_one_a_year() -> None:
    assert FALSE_ALARMS_A_YEAR_AT_MOST < 1
    assert ALPHA == 1e-12


def test_the_packaged_par_sheet_is_the_documented_one() -> None:
    packaged = (ROOT / "records/data/cover-all-par-sheet.json").read_bytes()
    assert packaged == (ROOT / "docs/cover-all-par-sheet.json").read_bytes()


@pytest.mark.heavy
def test_bust_bonus_cells_partition_the_dealers_busts() -> None:
    cells = bust_cell_chances(6, False)
    rates = bust_rates(6, False)
    per_up = {up: Fraction(4 if up == "10" else 1, 13) for up in rates}
    assert sum(cells.values()) == sum(per_up[up] * rates[up] for up in rates)


# ---------------------------------------------------------------------------------------
# Detection: rounds needed, computed, then seen


def _tail(x: int, n: int, p: float) -> float:
    """P(Bin(n, p) >= x) by summing the whole pmf (not the watch's code)."""
    k = np.arange(x, n + 1)
    logs = (
        math.lgamma(n + 1)
        - np.array([math.lgamma(i + 1) for i in k])
        - np.array([math.lgamma(n - i + 1) for i in k])
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )
    return float(np.exp(logs).sum())


def _rounds_for_power(p_test: float, p_true: float, trials_per: int, step: int) -> int:
    """The fewest rounds (a multiple of ``step``) after which a table whose row hits with
    ``p_true`` exceeds the count the watch flags (tested at ``p_test``) with 95 %."""
    n_rounds = step
    while True:
        n = n_rounds * trials_per
        x = math.ceil(n * p_test + 1)
        while _tail(x, n, p_test) >= ALPHA:
            x += 1
        if _tail(x, n, p_true) >= 0.95:
            return n_rounds
        n_rounds += step


def _first_alarm(
    watch: Watch, feed: list[tuple[dict[object, int], dict[str, int]]], family: str, per_day: int
) -> tuple[int, list[Finding]]:
    played = 0
    for trials, hits in feed:
        day = DAY0 + timedelta(days=played // per_day)
        watch.observe(family, day, trials, hits)
        played += sum(trials.values())
        found = watch.evaluate(day, f"round {played}", [family])
        if found:
            return played, found
    return played, []


@pytest.mark.heavy
def test_a_shuffler_dealing_royal_flushes_ten_times_as_often_is_flagged_in_time() -> None:
    royal = cover_all_chance("UTH", 6, "Royal Flush")
    assert royal.exact is None  # a simulated column: its error must be counted
    rounds = _rounds_for_power(
        royal.estimate + Z_SIMULATION * royal.std_error, 10 * royal.estimate, 1, 1000
    )
    assert rounds == ROYAL_ROUNDS
    rows = cover_all_rows("UTH")
    probs = [cover_all_chance("UTH", 6, row).estimate for row in rows]
    probs[0] *= 10
    rng = np.random.default_rng(20261201)
    draws = rng.choice(len(rows) + 1, size=ROYAL_ROUNDS, p=[*probs, 1 - sum(probs)])
    feed: list[tuple[dict[object, int], dict[str, int]]] = []
    for start in range(0, ROYAL_ROUNDS, 100):
        counts = np.bincount(draws[start : start + 100], minlength=len(rows) + 1)
        feed.append(({6: 100}, {row: int(counts[i]) for i, row in enumerate(rows) if counts[i]}))
    watch = Watch([cover_all_family("UTH")])
    played, found = _first_alarm(watch, feed, "cover_all", per_day=1000)
    assert found, f"not flagged in {played} rounds"
    assert {(f.row, f.side, f.window) for f in found} == {("Royal Flush", "high", "all")}
    assert played <= ROYAL_ROUNDS


@pytest.mark.heavy
def test_dice_whose_sixes_come_up_half_as_often_again_are_flagged_in_time() -> None:
    rolls = _rounds_for_power(1 / 6, 1.5 / 6, 2, 50)
    assert rolls == SIXES_ROLLS
    rng = np.random.default_rng(7)
    faces = rng.choice(6, size=(SIXES_ROLLS, 2), p=[0.15] * 5 + [0.25]) + 1
    watch = Watch(craps_families())
    played = 0
    found: list[Finding] = []
    for start in range(0, SIXES_ROLLS, 10):
        batch = faces[start : start + 10]
        cells: dict[str, int] = {}
        totals: dict[str, int] = {}
        for a, b in batch:
            cells[f"{a}-{b}"] = cells.get(f"{a}-{b}", 0) + 1
            totals[str(a + b)] = totals.get(str(a + b), 0) + 1
        face_counts = np.bincount(batch.ravel(), minlength=7)
        watch.observe("dice", DAY0, {None: len(batch)}, cells)
        watch.observe("dice totals", DAY0, {None: len(batch)}, totals)
        watch.observe(
            "die faces",
            DAY0,
            {None: 2 * len(batch)},
            {str(f): int(face_counts[f]) for f in range(1, 7) if face_counts[f]},
        )
        played += len(batch)
        found = watch.evaluate(DAY0, f"roll {played}")
        if found:
            break
    assert found, f"not flagged in {played} rolls"
    assert ("die faces", "6", "high") in {(f.bet, f.row, f.side) for f in found}
    assert played <= SIXES_ROLLS


@pytest.mark.heavy
def test_honest_tables_run_a_million_rounds_without_an_alarm() -> None:
    rng = np.random.default_rng(20261201)
    batch, per_day, total = 2000, 4000, 1_000_000
    # Cover All at Ultimate Texas Hold'em, 2 to 7 hands (exact and simulated columns).
    rows = cover_all_rows("UTH")
    poker = Watch([cover_all_family("UTH")])
    # Bust Bonus, 6 decks, S17: the paying cells and the bust rate per up card.
    bust_families = bust_bonus_families(6, False)
    bust = Watch(bust_families)
    cells = bust_cell_chances(6, False)
    cell_names = list(cells)
    rates = bust_rates(6, False)
    ups = list(rates)
    up_p = [4 / 13 if up == "10" else 1 / 13 for up in ups]
    # The dice.
    dice = Watch(craps_families())
    for start in range(0, total, batch):
        day = DAY0 + timedelta(days=start // per_day)
        hands = int(rng.integers(2, 8))
        probs = [cover_all_chance("UTH", hands, row).estimate for row in rows]
        counts = rng.multinomial(batch, [*probs, 1 - sum(probs)])
        poker.observe(
            "cover_all",
            day,
            {hands: batch},
            {r: int(c) for r, c in zip(rows, counts, strict=False) if c},
        )
        # Bust Bonus: the up card, then bust or not given it, then the paying cell.
        up_counts = rng.multinomial(batch, up_p)
        hits: dict[str, int] = {}
        for up, n_up in zip(ups, up_counts, strict=True):
            busts = int(rng.binomial(n_up, float(rates[up])))
            bust.observe(
                f"dealer bust, up card {up}",
                day,
                {None: int(n_up)},
                {"bust": busts} if busts else {},
            )
            mine = [
                c for c in cell_names if c[0] == up or (up == "8" and c[0] == "Bust with three 8s")
            ]
            weights = [float(cells[c]) for c in mine]
            split = rng.multinomial(busts, [w / sum(weights) for w in weights])
            for c, k in zip(mine, split, strict=True):
                if k:
                    hits[f"{c[0]} {c[1]}"] = hits.get(f"{c[0]} {c[1]}", 0) + int(k)
        bust.observe("bust_bonus", day, {None: batch}, hits)
        faces = rng.integers(1, 7, size=(batch, 2))
        idx = (faces[:, 0] - 1) * 6 + (faces[:, 1] - 1)
        cell_counts = np.bincount(idx, minlength=36)
        total_counts = np.bincount(faces.sum(axis=1), minlength=13)
        face_counts = np.bincount(faces.ravel(), minlength=7)
        dice.observe(
            "dice",
            day,
            {None: batch},
            {f"{i // 6 + 1}-{i % 6 + 1}": int(c) for i, c in enumerate(cell_counts) if c},
        )
        dice.observe(
            "dice totals",
            day,
            {None: batch},
            {str(t): int(total_counts[t]) for t in range(2, 13) if total_counts[t]},
        )
        dice.observe(
            "die faces",
            day,
            {None: 2 * batch},
            {str(f): int(face_counts[f]) for f in range(1, 7) if face_counts[f]},
        )
        for watch in (poker, bust, dice):
            assert watch.evaluate(day, f"round {start + batch}") == []
    trials, _ = poker.counts("cover_all", "all", day)
    assert sum(trials.values()) == total


@pytest.mark.heavy
def test_a_dealer_busting_too_often_under_a_six_is_flagged_and_an_honest_one_is_not() -> None:
    rate = float(bust_rates(6, False)["6"])  # about 0.42
    watch = Watch(bust_bonus_families(6, False))
    rng = np.random.default_rng(3)
    busts = int(rng.binomial(3000, rate))
    watch.observe("dealer bust, up card 6", DAY0, {None: 3000}, {"bust": busts})
    assert watch.evaluate(DAY0, "t0") == []
    # A shoe stacked so that a 6 up busts 55 % of the time: 3,000 more rounds.
    watch.observe("dealer bust, up card 6", DAY0 + timedelta(days=1), {None: 3000}, {"bust": 1650})
    found = watch.evaluate(DAY0 + timedelta(days=1), "t1")
    assert {(f.bet, f.side, f.window) for f in found} >= {
        ("dealer bust, up card 6", "high", "day"),
        ("dealer bust, up card 6", "high", "all"),
    }
    assert all(f.bet == "dealer bust, up card 6" for f in found)


def test_rows_each_a_little_off_are_caught_together_and_not_one_by_one() -> None:
    # UTH with 2 hands (exact column), 10^6 rounds: each row 4.2 standard deviations off,
    # alternately high and low. No row alone is under the threshold (about 1e-5 each);
    # together (X² about 70 with 4 degrees of freedom) they are.
    rounds = 1_000_000
    rows = cover_all_rows("UTH")
    hits = {}
    for i, row in enumerate(rows):
        chance = cover_all_chance("UTH", 2, row)
        assert chance.exact is not None
        mean = rounds * float(chance.exact)
        hits[row] = round(mean + (4.2 if i % 2 == 0 else -4.2) * math.sqrt(mean))
    watch = Watch([cover_all_family("UTH")])
    watch.observe("cover_all", DAY0, {2: rounds}, hits)
    found = watch.evaluate(DAY0, "t")
    assert {(f.row, f.side) for f in found} == {("all rows", "fit")}
    singles = [f for f in watch.findings("cover_all", "all", DAY0) if f.side != "fit"]
    assert min(f.p_value for f in singles) > 1e-7


def test_a_familys_alarm_stays_while_other_families_are_evaluated() -> None:
    watch = Watch(craps_families())
    # 600 rolls, every die a six: the faces and the outcome 6-6 are far off.
    watch.observe("die faces", DAY0, {None: 1200}, {"6": 1200})
    first = watch.evaluate(DAY0, "t1", ["die faces"])
    assert ("die faces", "6", "high") in {(f.bet, f.row, f.side) for f in first}
    # A bet settles: only its family is tested again; the faces' alarm is still there,
    # with the time it was first found.
    watch.observe("all_small", DAY0, {None: 1}, {})
    again = watch.evaluate(DAY0, "t2", ["all_small"])
    assert {(f.bet, f.row, f.side, f.since) for f in again} == {
        (f.bet, f.row, f.side, "t1") for f in first
    }
    # Honest faces again for a long while: the day's alarm goes, once they are tested.
    later = DAY0 + timedelta(days=30)
    watch.observe("die faces", later, {None: 600_000}, {str(f): 100_000 for f in range(1, 7)})
    cleared = watch.evaluate(later, "t3", ["die faces"])
    assert {f.window for f in cleared} <= {"all"}  # the month-old day and week are gone


# ---------------------------------------------------------------------------------------
# What mutation testing found untested (issue 27), each against independent arithmetic


def _exact_lower_tail(x: int, n: int, p: Fraction) -> Fraction:
    return sum(
        (Fraction(math.comb(n, k)) * p**k * (1 - p) ** (n - k) for k in range(x + 1)),
        Fraction(0),
    )


def _two_columns() -> Family:
    """Two rows, two columns, exact chances; the rows and OTHER partition the trials."""
    return Family(
        name="f",
        rows=("a", "b"),
        chances={
            1: {"a": Chance.of(Fraction(1, 10)), "b": Chance.of(Fraction(1, 5))},
            2: {"a": Chance.of(Fraction(1, 4)), "b": Chance.of(Fraction(1, 8))},
        },
    )


def test_each_row_is_tested_both_ways_against_the_exact_sum_of_its_columns() -> None:
    watch = Watch([_two_columns()], alpha=0.0)  # alpha 0: exact tails, no shortcut
    watch.observe("f", DAY0, {1: 30, 2: 40}, {"a": 25, "b": 3})
    found = {(f.row, f.side): f for f in watch.findings("f", "all", DAY0)}
    assert set(found) == {
        ("a", "high"),
        ("a", "low"),
        ("b", "high"),
        ("b", "low"),
        (ALL_ROWS, "fit"),
    }
    # a: 30/10 + 40/4 = 13 expected; b: 30/5 + 40/8 = 11 (sums of each column's share).
    for row, expected, observed in (("a", 13, 25), ("b", 11, 3)):
        for side in ("high", "low"):
            f = found[(row, side)]
            assert f.expected_exact == expected
            assert f.expected == pytest.approx(expected, rel=1e-12)
            assert (f.bet, f.window, f.trials, f.observed) == ("f", "all", 70, observed)
    # One column's worth of trials binomial at the mean chance (Hoeffding), exact tails:
    # 25 is far above 13 (high side small, low side 1); 3 far below 11.
    mean_a, mean_b = Fraction(13, 70), Fraction(11, 70)
    high_a = float(_exact_binomial_tail(25, 70, mean_a))
    assert found[("a", "high")].p_value == pytest.approx(high_a, rel=1e-8)
    assert found[("a", "low")].p_value == 1.0
    low_b = float(_exact_lower_tail(3, 70, mean_b))
    assert found[("b", "low")].p_value == pytest.approx(low_b, rel=1e-8)
    assert found[("b", "high")].p_value == 1.0


def test_the_all_rows_test_is_pearsons_with_the_rounds_that_paid_nothing() -> None:
    watch = Watch([_two_columns()])
    watch.observe("f", DAY0, {1: 30, 2: 40}, {"a": 25, "b": 3})
    [fit] = [f for f in watch.findings("f", "all", DAY0) if f.side == "fit"]
    # Cells (observed, expected): a (25, 13), b (3, 11), nothing paid (42, 46); exact
    # chances, so each variance is its expectation. Two degrees of freedom, whose survival
    # function is exp(-x/2) exactly.
    statistic = Fraction(12**2, 13) + Fraction(8**2, 11) + Fraction(4**2, 46)
    assert (fit.row, fit.observed, fit.trials, fit.expected) == (ALL_ROWS, 28, 70, 24)
    assert fit.expected_exact is None
    assert fit.p_value == pytest.approx(math.exp(-float(statistic) / 2), rel=1e-9)
    # Not exclusive: no all-rows test (its rows need not partition the trials).
    loose = Watch([replace(_two_columns(), exclusive=False)])
    loose.observe("f", DAY0, {1: 30, 2: 40}, {"a": 25, "b": 3})
    assert {f.side for f in loose.findings("f", "all", DAY0)} == {"high", "low"}


def test_a_simulated_chance_counts_against_the_alarm_and_has_no_exact_sum() -> None:
    sim = Chance(estimate=0.1, std_error=0.01, exact=None)
    fam = Family(name="s", rows=("r",), chances={None: {"r": sim}})
    watch = Watch([fam], alpha=0.0, z=3.0)  # alpha 0: exact tails, no shortcut
    watch.observe("s", DAY0, {None: 200}, {"r": 50})
    found = {f.side: f for f in watch.findings("s", "day", DAY0)}
    assert found["high"].expected_exact is None
    assert found["high"].expected == pytest.approx(20.0)
    # Tested at 0.1 + 3 x 0.01 going up and 0.1 - 3 x 0.01 going down.
    high = float(_exact_binomial_tail(50, 200, Fraction(13, 100)))
    assert found["high"].p_value == pytest.approx(high, rel=1e-6)
    # All rows (the row and the rounds that paid nothing, df 1): the row's variance widened
    # by the simulation's error, (200 x 0.01)^2: (50 - 20)^2 / (20 + 4) + 30^2 / 180.
    statistic = 30**2 / 24 + 30**2 / 180
    assert found["fit"].p_value == pytest.approx(math.erfc(math.sqrt(statistic / 2)), rel=1e-9)
    watch.observe("s", DAY0 + timedelta(days=1), {None: 200}, {"r": 2})
    low_found = {f.side: f for f in watch.findings("s", "day", DAY0 + timedelta(days=1))}
    low = float(_exact_lower_tail(2, 200, Fraction(7, 100)))
    assert low_found["low"].p_value == pytest.approx(low, rel=1e-6)
    assert low_found["high"].p_value == 1.0


def test_pooling_small_cells_before_pearsons_statistic() -> None:
    # Cells (observed, expected, variance). Under 5 expected pooled; the pool kept when it
    # reaches 5, else folded into the smallest kept cell.
    cases: list[tuple[list[tuple[float, float, float]], float, int]] = [
        ([(10, 20, 20), (6, 3, 3), (1, 3, 3), (30, 25, 25)], 100 / 20 + 1 / 6 + 25 / 25, 2),
        ([(10, 20, 20), (3, 2, 2), (1, 2, 2), (30, 25, 25)], 100 / 24 + 25 / 25, 1),
        ([(9, 5, 5), (1, 5, 5)], 16 / 5 + 16 / 5, 1),  # 5 expected is kept as it is
        ([(1, 2, 2), (2, 2, 2)], 0.0, 0),  # nothing to compare
        ([(10, 20, 20)], 0.0, 0),
        ([(10, 20, 20), (4, 4.5, 9)], 0.0, 0),  # folded: one cell
    ]
    for cells, statistic, df in cases:
        got, got_df = _pooled_chi_square(cells)
        assert got_df == df, cells
        assert got == pytest.approx(statistic), cells
    assert MIN_CELL_EXPECTED == 5.0


def _chi_square_sf_closed_form(x: float, df: int) -> float:
    """P(chi2(df) >= x) by the closed forms: even df, exp(-x/2) sum (x/2)^k / k!; odd df,
    erfc(sqrt(x/2)) plus exp(-x/2) sum (x/2)^(k+1/2) / Gamma(k+3/2)."""
    h = x / 2
    if df % 2 == 0:
        return math.exp(-h) * math.fsum(math.pow(h, k) / math.factorial(k) for k in range(df // 2))
    tail = math.erfc(math.sqrt(h))
    terms = (math.pow(h, k + 0.5) / math.gamma(k + 1.5) for k in range(df // 2))
    return tail + math.exp(-h) * math.fsum(terms)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 6, 9, 10])
def test_chi_square_survival_matches_the_closed_forms_on_both_sides_of_its_switch(
    df: int,
) -> None:
    # The incomplete gamma function Q(df/2, x/2) by its series under x/2 < df/2 + 1 and by
    # its continued fraction above: both branches against the closed forms.
    for x in (0.01, 0.3, 1.0, 2.5, df * 0.9, df + 1.9, df + 2.1, df + 6, 3 * df + 10, 80.0):
        truth = _chi_square_sf_closed_form(x, df)
        assert chi_square_sf(x, df) == pytest.approx(truth, rel=1e-9, abs=1e-300), (x, df)
    assert chi_square_sf(0.0, df) == 1.0
    assert chi_square_sf(-1.0, df) == 1.0


def test_an_alarm_that_clears_and_comes_back_is_new() -> None:
    # A fair coin: 100 heads in 100 on the first day raise the alarm (day, week, all).
    coin = Family(
        name="coin",
        rows=("heads",),
        chances={None: {"heads": Chance.of(Fraction(1, 2))}},
        exclusive=False,  # its rows alone: no all-rows test
    )
    watch = Watch([coin])
    watch.observe("coin", DAY0, {None: 100}, {"heads": 100})
    first = watch.evaluate(DAY0, "t1")
    assert {(f.window, f.side, f.since) for f in first} == {
        ("day", "high", "t1"),
        ("week", "high", "t1"),
        ("all", "high", "t1"),
    }
    # A month of honest tosses: every window clears, and nothing is remembered.
    later = DAY0 + timedelta(days=30)
    watch.observe("coin", later, {None: 100_000}, {"heads": 49_950})
    assert watch.evaluate(later, "t2") == []
    assert watch.active() == {}
    # The dishonest coin again, a month later: a new alarm, since now, not since t1.
    again = later + timedelta(days=30)
    watch.observe("coin", again, {None: 100}, {"heads": 100})
    found = watch.evaluate(again, "t3")
    assert {(f.window, f.since) for f in found} == {("day", "t3"), ("week", "t3")}
    assert watch.active() == {
        ("coin", "heads", "day", "high"): "t3",
        ("coin", "heads", "week", "high"): "t3",
    }


def test_the_day_and_the_week_are_the_gaming_days_ending_with_the_day() -> None:
    coin = Family(
        name="coin", rows=("heads",), chances={None: {"heads": Chance.of(Fraction(1, 2))}}
    )
    watch = Watch([coin])
    for back, tosses in ((0, 1), (1, 10), (6, 100), (7, 1000), (-1, 10_000)):
        watch.observe("coin", DAY0 - timedelta(days=back), {None: tosses}, {"heads": back + 1})
    assert watch.counts("coin", "day", DAY0) == (Counter({None: 1}), Counter({"heads": 1}))
    week = watch.counts("coin", "week", DAY0)
    assert week == (Counter({None: 111}), Counter({"heads": 1 + 2 + 7}))
    total = watch.counts("coin", "all", DAY0)
    assert total == (Counter({None: 11_111}), Counter({"heads": 1 + 2 + 7 + 8 + 0}))


def test_observing_an_unknown_column_or_row_is_refused_by_name() -> None:
    watch = Watch([_two_columns()])
    with pytest.raises(KeyError, match="f has no par-sheet column 3"):
        watch.observe("f", DAY0, {1: 5, 3: 1}, {})
    with pytest.raises(KeyError, match="f has no row 'c'"):
        watch.observe("f", DAY0, {1: 5}, {"a": 1, "c": 1})
    assert watch.counts("f", "all", DAY0) == (Counter(), Counter())  # nothing half added


def test_binomial_tails_at_their_edges() -> None:
    assert binomial_upper(0, 10, 0.0) == 1.0  # P(X >= 0) is 1 whatever p
    assert binomial_upper(1, 10, 0.0) == 0.0  # never a hit
    assert binomial_upper(5, 10, 1.0) == 1.0
    assert binomial_upper(11, 10, 0.5) == 0.0  # more hits than trials
    assert binomial_upper(10, 10, 0.5) == pytest.approx(0.5**10, rel=1e-8)
    # Every trial a hit, with a floor: the Ash shortcut has no bound there (1 - x/n is 0),
    # so the tail is summed.
    assert binomial_upper(10, 10, 0.5, floor=1e-12) == pytest.approx(0.5**10, rel=1e-8)
    assert binomial_lower(0, 10, 0.5) == pytest.approx(0.5**10, rel=1e-8)
    assert binomial_lower(10, 10, 0.5) == 1.0
    assert binomial_lower(0, 10, 0.5, floor=1e-12) == pytest.approx(0.5**10, rel=1e-8)


def test_kullback_leibler_of_two_coins_by_hand() -> None:
    for t, p in ((0.3, 0.1), (0.9, 0.5), (0.5, 0.5)):
        by_hand = t * math.log(t / p) + (1 - t) * math.log((1 - t) / (1 - p))
        assert _kl(t, p) == pytest.approx(by_hand, rel=1e-12, abs=1e-15)
    assert _kl(0.0, 0.2) == pytest.approx(math.log(1 / 0.8), rel=1e-12)  # 0 log 0 is 0
    assert _kl(1.0, 0.2) == pytest.approx(math.log(1 / 0.2), rel=1e-12)


def test_a_count_far_from_any_alarm_gets_ashs_bound_not_a_sum() -> None:
    # With the floor (the watch's alpha) the tail is not summed when Ash's lower bound is
    # already above it: the p-value reported is that bound, exp(-n D(x/n || p)) / sqrt(8 x
    # (1 - x/n)), never more than the tail itself.
    coin = Family(
        name="coin", rows=("heads",), chances={None: {"heads": Chance.of(Fraction(1, 2))}}
    )
    watch = Watch([coin])
    watch.observe("coin", DAY0, {None: 100}, {"heads": 62})
    found = {f.side: f for f in watch.findings("coin", "all", DAY0)}
    t = 0.62
    d = t * math.log(t / 0.5) + (1 - t) * math.log((1 - t) / 0.5)
    ash = math.exp(-100 * d) / math.sqrt(8 * 62 * (1 - t))
    assert found["high"].p_value == pytest.approx(ash, rel=1e-9)
    assert found["high"].p_value < float(_exact_binomial_tail(62, 100, Fraction(1, 2)))
    watch.observe("coin", DAY0 + timedelta(days=1), {None: 100}, {"heads": 38})
    low = {f.side: f for f in watch.findings("coin", "day", DAY0 + timedelta(days=1))}
    assert low["low"].p_value == pytest.approx(ash, rel=1e-9)  # the mirror image
    assert binomial_lower(38, 100, 0.5, floor=1e-12) == pytest.approx(ash, rel=1e-9)


def test_a_p_value_equal_to_alpha_is_no_alarm() -> None:
    coin = Family(
        name="coin",
        rows=("heads",),
        chances={None: {"heads": Chance.of(Fraction(1, 2))}},
        exclusive=False,
    )
    exact = Watch([coin], alpha=0.0)
    exact.observe("coin", DAY0, {None: 100}, {"heads": 90})
    p = next(f.p_value for f in exact.findings("coin", "all", DAY0) if f.side == "high")
    at = Watch([coin], alpha=p)
    at.observe("coin", DAY0, {None: 100}, {"heads": 90})
    assert at.evaluate(DAY0, "t") == []  # under alpha, not at it
    above = Watch([coin], alpha=p * 1.0001)
    above.observe("coin", DAY0, {None: 100}, {"heads": 90})
    assert len(above.evaluate(DAY0, "t")) == 3  # day, week, all


def _coins(*names: str) -> list[Family]:
    chances: dict[object, dict[str, Chance]] = {None: {"heads": Chance.of(Fraction(1, 2))}}
    return [Family(name=n, rows=("heads",), chances=chances, exclusive=False) for n in names]


def test_an_alarm_keeps_its_since_and_others_are_kept_as_last_found() -> None:
    watch = Watch(_coins("a", "b"))
    watch.observe("a", DAY0, {None: 100}, {"heads": 100})
    assert {f.since for f in watch.evaluate(DAY0, "t1")} == {"t1"}
    assert {f.since for f in watch.evaluate(DAY0, "t2")} == {"t1"}  # still the same alarm
    # A month later b is tested alone: a's alarms stay as they were last found (its day
    # and week would be empty now), with their since.
    later = DAY0 + timedelta(days=30)
    watch.observe("b", later, {None: 10}, {"heads": 5})
    kept = watch.evaluate(later, "t3", ["b"])
    assert {(f.bet, f.window, f.since) for f in kept} == {
        ("a", "day", "t1"),
        ("a", "week", "t1"),
        ("a", "all", "t1"),
    }
    # And when a is tested again, its all-time alarm is the one of t1 still.
    again = watch.evaluate(later, "t4", ["a"])
    assert {(f.bet, f.window, f.since) for f in again} == {("a", "all", "t1")}
    assert watch.active() == {("a", "heads", "all", "high"): "t1"}


def test_findings_for_reports_carry_no_time() -> None:
    watch = Watch(_coins("a"))
    watch.observe("a", DAY0, {None: 100}, {"heads": 100})
    assert {f.since for f in watch.findings("a", "all", DAY0)} == {""}


def test_simulated_columns_widen_each_rows_variance_by_their_summed_errors() -> None:
    # Two simulated columns: the row's standard error in counts is the sum of each
    # column's (fully correlated, the same par sheet): 100 x 0.01 + 300 x 0.02 = 7.
    def sim(p: float, se: float) -> Chance:
        return Chance(estimate=p, std_error=se, exact=None)

    fam = Family(
        name="s", rows=("r",), chances={1: {"r": sim(0.1, 0.01)}, 2: {"r": sim(0.2, 0.02)}}
    )
    watch = Watch([fam], alpha=0.0, z=2.0)
    watch.observe("s", DAY0, {1: 100, 2: 300}, {"r": 100})
    found = {f.side: f for f in watch.findings("s", "all", DAY0)}
    # Expected 10 + 60 = 70; the row's variance 70 + 7^2; the rest 330 expected, 300 seen.
    statistic = 30**2 / (70 + 49) + 30**2 / 330
    assert found["fit"].p_value == pytest.approx(math.erfc(math.sqrt(statistic / 2)), rel=1e-9)
    # Tested going up at (100 x 0.12 + 300 x 0.24) / 400 = 0.21 per round.
    high = float(_exact_binomial_tail(100, 400, Fraction(21, 100)))
    assert found["high"].p_value == pytest.approx(high, rel=1e-6)


def test_a_simulated_chance_moved_past_one_counts_as_one() -> None:
    near = Chance(estimate=0.99, std_error=0.01, exact=None)  # + 4 x 0.01: capped at 1
    fam = Family(
        name="s", rows=("r",), chances={1: {"r": near}, 2: {"r": Chance.of(Fraction(1, 2))}}
    )
    watch = Watch([fam], alpha=0.0)
    watch.observe("s", DAY0, {1: 10, 2: 90}, {"r": 80})
    found = {f.side: f for f in watch.findings("s", "all", DAY0)}
    high = float(_exact_binomial_tail(80, 100, Fraction(10 + 45, 100)))
    assert found["high"].p_value == pytest.approx(high, rel=1e-6)


def test_a_rest_cell_under_one_expected_keeps_its_own_variance() -> None:
    fam = Family(
        name="f",
        rows=("a", "b"),
        chances={None: {"a": Chance.of(Fraction(45, 100)), "b": Chance.of(Fraction(545, 1000))}},
    )
    watch = Watch([fam], alpha=0.0)
    watch.observe("f", DAY0, {None: 100}, {"a": 40, "b": 58})
    [fit] = [f for f in watch.findings("f", "all", DAY0) if f.side == "fit"]
    # The rest: 2 seen, 0.5 expected (variance 0.5), folded into a (45 expected): (42,
    # 45.5, 45.5) and b (58, 54.5, 54.5); one degree of freedom.
    statistic = 3.5**2 / 45.5 + 3.5**2 / 54.5
    assert fit.p_value == pytest.approx(math.erfc(math.sqrt(statistic / 2)), rel=1e-9)


def test_pooling_uses_the_expected_counts_and_folds_into_the_smallest() -> None:
    cases: list[tuple[list[tuple[float, float, float]], float, int]] = [
        # A cell of 4 expected whose variance was widened to 6 is still a small cell.
        ([(10, 20, 20), (1, 4, 6), (30, 25, 25), (8, 6, 6)], 100 / 20 + 25 / 25 + 1 / 12, 2),
        # A pool of exactly 5 expected is a cell of its own.
        ([(10, 20, 20), (3, 2.5, 2.5), (4, 2.5, 2.5), (30, 25, 25)], 5 + 4 / 5 + 1, 2),
        # Folded into the cell of the smallest expected count, not the first nor the one of
        # the smallest variance: (14, 24, 34).
        ([(30, 25, 25), (10, 20, 30), (3, 2, 2), (1, 2, 2)], 1 + 100 / 34, 1),
    ]
    for cells, statistic, df in cases:
        got, got_df = _pooled_chi_square(cells)
        assert got_df == df, cells
        assert got == pytest.approx(statistic), cells


def test_bust_bonus_families_are_the_par_sheets_for_the_rules_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[tuple[int, bool]] = []

    def cells(decks: int, hits_soft_17: bool) -> dict[tuple[str, str], Fraction]:
        asked.append((decks, hits_soft_17))
        return {cell: Fraction(1, 100 + i) for i, cell in enumerate(bust_cells())}

    def rates(decks: int, hits_soft_17: bool) -> dict[str, Fraction]:
        asked.append((decks, hits_soft_17))
        return {"6": Fraction(2, 5), "10": Fraction(1, 4)}

    monkeypatch.setattr(integrity, "bust_cell_chances", cells)
    monkeypatch.setattr(integrity, "bust_rates", rates)
    families = bust_bonus_families(2, True)
    assert asked == [(2, True), (2, True)]
    assert [f.name for f in families] == [
        "bust_bonus",
        "dealer bust, up card 6",
        "dealer bust, up card 10",
    ]
    first = bust_cells()[0]
    assert families[0].chances[None][f"{first[0]} {first[1]}"] == Chance.of(Fraction(1, 100))
    assert families[2].chances[None]["bust"] == Chance.of(Fraction(1, 4))


def test_the_dice_families_are_the_36_outcomes_their_totals_and_faces() -> None:
    families = {f.name: f for f in craps_families()}
    dice = families["dice"]
    assert dice.rows == tuple(f"{a}-{b}" for a in (1, 2, 3, 4, 5, 6) for b in (1, 2, 3, 4, 5, 6))
    assert set(dice.chances[None].values()) == {Chance.of(Fraction(1, 36))}
    totals = families["dice totals"]
    assert totals.rows == tuple(str(t) for t in range(2, 13))
    ways = {2: 1, 3: 2, 4: 3, 5: 4, 6: 5, 7: 6, 8: 5, 9: 4, 10: 3, 11: 2, 12: 1}
    assert {r: c.exact for r, c in totals.chances[None].items()} == {
        str(t): Fraction(w, 36) for t, w in ways.items()
    }
    faces = families["die faces"]
    assert faces.rows == ("1", "2", "3", "4", "5", "6")
    assert set(faces.chances[None].values()) == {Chance.of(Fraction(1, 6))}
    assert [f.name for f in craps_families()[:3]] == ["all_small", "all_tall", "make_em_all"]
