"""Reports against counts computed another way: the test's own tally of the messages it
stored, and the par sheets read from their sources (docs/cover-all-par-sheet.json's exact
fractions, rules.bust_odds), never from the report's code."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import psycopg
from PIL import Image

from records.messages import parse
from records.store import Store
from rules.bust_odds import odds_table
from tests.conftest import CLI_BOUND_S
from tests.helpers.reports import bust_row, info_bj, iso, par_of, poker_row
from tests.records.conftest import StoreDb
from tests.records.messages import alarms, body

LAMMER = str(Path(sys.executable).parent / "lammer")


def _store(store_db: StoreDb, messages: list[tuple[str, str, dict[str, Any] | str]]) -> None:
    with psycopg.connect(store_db.dsn) as conn:
        store = Store(conn)
        for table, topic, payload in messages:
            data = payload.encode() if isinstance(payload, str) else body(payload)
            store.write(parse(table, topic, data))


def _report(store_db: StoreDb, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LAMMER, "records", "report", "--db", store_db.dsn, "--timezone", "UTC", *args],
        capture_output=True, text=True, timeout=CLI_BOUND_S, check=False,
    )  # fmt: skip


def test_a_gaming_days_report_matches_the_tally_and_the_par_sheet(
    store_db: StoreDb, tmp_path: Path
) -> None:
    charts = tmp_path / "charts"
    poker: list[dict[str, Any]] = []
    seq = 0
    # Gaming day 2026-12-01 runs from 06:00 UTC to 06:00 the next day.
    plan = [(1, "Royal Flush", "500"), (2, None, None), (1, "Flush", "70"), (2, "Flush", "30"),
            (2, None, None), (1, None, None), (2, "Straight Flush", "100")]  # fmt: skip
    for i, (hands, hand, pays) in enumerate(plan):
        seq += 1
        poker.append(poker_row("lir-1", seq, iso(1, 8 + i, 0), hands, hand, pays))
    seq += 1
    poker.append(poker_row("lir-1", seq, iso(2, 5, 59), 2, "Flush", "30"))  # still Dec 1's day
    seq += 1
    poker.append(poker_row("lir-1", seq, iso(2, 6, 0), 1, None, None))  # Dec 2's day
    seq += 1
    poker.append({**poker_row("lir-1", seq, iso(1, 9, 30), 2, None, None, "void"), "hands": 2})
    bj = [
        info_bj("bj-1", 1),
        bust_row("bj-1", 2, iso(1, 8, 0), "6h", "suited", "3"),
        bust_row("bj-1", 3, iso(1, 8, 1), "Kd", None, None),
        bust_row("bj-1", 4, iso(1, 8, 2), "6c", "off_suit", "1"),
    ]
    jam = {**alarms("lir-1", 100, "JAM"), "ts": iso(1, 10, 0)}
    jam["alarms"] = [{**jam["alarms"][0], "since": iso(1, 10, 0)}]
    _store(
        store_db,
        [("lir-1", "cover_all/result", p) for p in poker]
        + [("bj-1", "bust_bonus/result" if "outcome" in p else "info", p) for p in bj]
        + [
            ("lir-1", "alarms", jam),
            ("bj-1", "availability", "online"),
            ("bj-1", "availability", "offline"),
            (
                "lir-1",
                "request/void_roll",
                {"operator": "Dana", "request_id": "r-7", "roll_id": 4, "clause": "3"},
            ),
            (
                "lir-1",
                "response/void_roll",
                {
                    "table": "lir-1",
                    "seq": 102,
                    "ts": iso(1, 11, 0),
                    "request_id": "r-7",
                    "status": "ok",
                    "error": None,
                },
            ),
            ("lir-1", "alarms", {**alarms("lir-1", 101), "ts": iso(1, 10, 5)}),
        ],
    )
    done = _report(store_db, "--day", "2026-12-01", "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    days = {(d["table"], d["day"]): d for d in report["days"]}
    assert set(days) == {("lir-1", "2026-12-01"), ("bj-1", "2026-12-01")}

    # The test's own tally of Dec 1's gaming day.
    dec1 = [p for p in poker if p["ts"] < iso(2, 6, 0)]
    settled = [p for p in dec1 if p["outcome"] in ("win", "no_qualifier")]
    per_hands = Counter(p["hands"] for p in settled)
    hits = Counter(p["highest"]["hand"] for p in settled if p["outcome"] == "win")
    lir = days[("lir-1", "2026-12-01")]
    assert lir["rounds"] == len(settled) == 8
    assert lir["not_settled"] == 1
    assert lir["hands"] == {str(h): n for h, n in sorted(per_hands.items())}
    mean = Fraction(sum(h * n for h, n in per_hands.items()), len(settled))
    assert lir["hands_per_round"]["fraction"] == f"{mean.numerator}/{mean.denominator}"
    (bet,) = lir["bets"]
    rows = {r["row"]: r for r in bet["rows"]}
    p1, p2 = par_of("LIR", 1), par_of("LIR", 2)
    for row, r in rows.items():
        assert r["hits"] == hits[row]
        expected = per_hands[1] * p1[row] + per_hands[2] * p2[row]
        assert r["expected"]["fraction"] == f"{expected.numerator}/{expected.denominator}"
    paid = sum(int(p["pays"]) for p in settled if p["outcome"] == "win")
    wins = sum(1 for p in settled if p["outcome"] == "win")
    assert Fraction(bet["observed_hold"]["fraction"]) == 1 - Fraction(paid + wins, len(settled))
    assert sum(Fraction(r["pays_units"]) for r in bet["rows"]) == paid

    blackjack = days[("bj-1", "2026-12-01")]
    (bust,) = blackjack["bets"]
    odds = odds_table(6, False)
    six = next(u for u in odds.up_cards if u.up_card == "6")
    cells = {r["row"]: r for r in bust["rows"]}
    assert cells["6 suited"]["hits"] == 1
    assert cells["6 off_suit"]["hits"] == 1
    assert (
        Fraction(cells["6 suited"]["expected"]["fraction"]) == 3 * six.probability * six.suited_bust
    )
    assert Fraction(bust["theoretical_hold"]["fraction"]) == odds.house_edge
    assert Fraction(bust["observed_hold"]["fraction"]) == 1 - Fraction((3 + 1) + (1 + 1), 3)

    # Big hits: pays of 100 to 1 or more, with round, time, cards and seat.
    assert [(h["table"], h["row"], h["pays"], h["seat"]) for h in report["big_hits"]] == [
        ("lir-1", "Royal Flush", "500", "P3"),
        ("lir-1", "Straight Flush", "100", "P3"),
    ]
    (decision,) = report["decisions"]
    assert (decision["name"], decision["operator"], decision["status"]) == (
        "void_roll",
        "Dana",
        "ok",
    )
    assert decision["details"] == {"roll_id": 4, "clause": "3"}
    (alarm,) = report["alarms"]
    assert (alarm["code"], alarm["ended"]) == ("JAM", "2026-12-01T10:05:00+00:00")

    # The same day as CSV: one line per table, bet and row, the same counts.
    done = _report(store_db, "--day", "2026-12-01", "--format", "csv", "--table", "lir-1")
    assert done.returncode == 0, done.stderr
    lines = list(csv.DictReader(io.StringIO(done.stdout)))
    assert {line["row"]: int(line["hits"]) for line in lines} == {r: hits[r] for r in rows}
    # And as text, for a person, with a chart per table.
    done = _report(store_db, "--from", "2026-12-01", "--to", "2026-12-02", "--plot", str(charts))
    assert done.returncode == 0, done.stderr
    assert "Table lir-1, gaming day 2026-12-02 (LIR): 1 rounds" in done.stdout
    assert "JAM: JAM raised; from 2026-12-01 10:00:00 to 2026-12-01 10:05:00" in done.stdout
    with Image.open(charts / "lir-1.png") as png:
        description = png.info["Description"]
    # Both gaming days: the Dec 2 round (1 hand, no qualifier) adds a round, no hit.
    flushes = sum(1 for p in poker if p["outcome"] == "win" and p["highest"]["hand"] == "Flush")
    assert f"cover_all: Flush: {flushes} hits" in description
    assert (charts / "bj-1.png").exists()
    # An area of lammer web's configuration: its tables only.
    areas = tmp_path / "web.toml"
    areas.write_text('[areas]\n"Pit 1" = ["bj-1"]\n"High limit" = ["lir-1"]\n')
    done = _report(store_db, "--day", "2026-12-01", "--area", "Pit 1", "--areas", str(areas),
                   "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {d["table"] for d in json.loads(done.stdout)["days"]} == {"bj-1"}
    # Availability has no seq or ts: kept as received, so the current gaming day's report
    # holds it. That day began at 06:00 UTC (the report's default start, --timezone UTC),
    # so between midnight and 06:00 it is yesterday's date (the test failed at 00:02 when it
    # asked for today's); and it may roll over between the store and the report, so the
    # day before is asked too.
    current = (datetime.now(UTC) - timedelta(hours=6)).date()
    done = _report(store_db, "--from", (current - timedelta(days=1)).isoformat(),
                   "--to", current.isoformat(), "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    changes = json.loads(done.stdout)["availability"]
    assert [(a["table"], a["status"]) for a in changes] == [("bj-1", "online"), ("bj-1", "offline")]
    done = _report(store_db, "--area", "Pit 9", "--areas", str(areas))
    assert done.returncode == 2
    assert "has no area 'Pit 9' (areas: High limit, Pit 1)" in done.stderr


def test_big_hits_of_every_bet_name_their_row_cards_and_seat(store_db: StoreDb) -> None:
    # Cover All, Bust Bonus and Bonus Craps each pay at a row of their own: a big hit names
    # it, with the cards and the seat where the bet has them (the dealer's cards at Bust
    # Bonus, none at craps), in time order across the tables.
    craps = [
        {"table": "craps-1", "seq": 5, "ts": iso(1, 8, 5), "roll_id": 12,
         "bet": "make_em_all", "outcome": "win", "pays": "175"},
        {"table": "craps-1", "seq": 6, "ts": iso(1, 8, 6), "roll_id": 12,
         "bet": "all_small", "outcome": "win", "pays": "34"},
        {"table": "craps-1", "seq": 7, "ts": iso(1, 8, 7), "roll_id": 13,
         "bet": "all_tall", "outcome": "lose", "pays": None},
    ]  # fmt: skip
    _store(
        store_db,
        [
            (
                "lir-1",
                "cover_all/result",
                poker_row("lir-1", 1, iso(1, 8, 0), 1, "Royal Flush", "500"),
            ),
            ("lir-1", "cover_all/result", poker_row("lir-1", 2, iso(1, 8, 1), 2, "Flush", "2")),
            ("bj-1", "info", info_bj("bj-1", 1)),
            (
                "bj-1",
                "bust_bonus/result",
                bust_row("bj-1", 2, iso(1, 8, 2), "6h", "suited", "3"),
            ),
            (
                "bj-1",
                "bust_bonus/result",
                bust_row("bj-1", 3, iso(1, 8, 3), "6c", "off_suit", "1"),
            ),
            *[("craps-1", "craps/result", c) for c in craps],
        ],
    )

    def big_hits(*args: str) -> list[tuple[Any, ...]]:
        done = _report(store_db, "--day", "2026-12-01", "--format", "json", *args)
        assert done.returncode == 0, done.stderr
        return [
            (h["table"], h["round_id"], h["bet"], h["row"], h["pays"], h["cards"], h["seat"])
            for h in json.loads(done.stdout)["big_hits"]
        ]

    royal = ("lir-1", 1, "cover_all", "Royal Flush", "500", ["Ah", "Kh", "Qh", "Jh", "Th"], "P3")
    make_em_all: tuple[Any, ...] = ("craps-1", 12, "make_em_all", "win", "175", [], None)
    assert big_hits("--big-hit", "3") == [
        royal,
        ("bj-1", 2, "bust_bonus", "6 suited", "3", ["6h", "6s", "Ks"], "DL"),
        make_em_all,
        ("craps-1", 12, "all_small", "win", "34", [], None),
    ]
    assert big_hits() == [royal, make_em_all]  # 100 to 1 by default


def test_operator_mistakes_are_one_sentence_and_status_2(store_db: StoreDb) -> None:
    done = _report(store_db, "--from", "2026-12-02", "--to", "2026-12-01")
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "lammer records: --to 2026-12-01 is before --from 2026-12-02",
    )
    done = _report(store_db, "--area", "Pit 1")
    assert done.returncode == 2
    assert done.stderr.startswith("lammer records: --area needs --areas FILE")
    bad = subprocess.run(
        [LAMMER, "records", "report", "--db", "host=/nonexistent dbname=x"],
        capture_output=True, text=True, timeout=CLI_BOUND_S, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.startswith("lammer records: the store cannot be reached")
    assert "Traceback" not in bad.stderr
