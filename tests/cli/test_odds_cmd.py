"""``lammer odds``, run as a real subprocess of the installed entry point."""

from __future__ import annotations

import json
import math
import os
import pty
import select
import struct
import subprocess
import sys
import time
import zlib
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import CLI_BOUND_S

# make check leaves these out (make test runs them): each runs `lammer odds` over an
# enumeration or a simulation.
pytestmark = pytest.mark.heavy

LAMMER = str(Path(sys.executable).with_name("lammer"))


def lammer(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``lammer odds ARGS`` and capture its output."""
    return subprocess.run(
        [LAMMER, "odds", *args], capture_output=True, text=True, timeout=CLI_BOUND_S, check=False
    )


def no_floats(text: str) -> Any:
    """Parse JSON, failing on any float: odds are strings (mqtt-api.md)."""

    def refuse(number: str) -> None:
        raise AssertionError(f"a JSON float in the output: {number}")

    return json.loads(text, parse_float=refuse)


def exact(cell: dict[str, str]) -> Fraction:
    """A ``{"fraction": "n/d", "decimal": "..."}`` cell: lowest terms, decimal agrees."""
    numerator, denominator = (int(part) for part in cell["fraction"].split("/"))
    assert denominator > 0
    assert math.gcd(numerator, denominator) == 1, cell["fraction"]
    value = Fraction(numerator, denominator)
    decimal = Decimal(cell["decimal"])
    assert "E" not in cell["decimal"]
    places = -decimal.as_tuple().exponent  # type: ignore[operator]
    assert abs(Fraction(decimal) - value) <= Fraction(1, 2 * 10**places)
    return value


def test_bust_bonus_json_is_exact_and_reproduces_published_figures() -> None:
    done = lammer("bust-bonus", "--decks", "6", "--h17", "--json")
    assert done.returncode == 0, done.stderr
    data = no_floats(done.stdout)
    assert (data["game"], data["decks"], data["dealer"]) == ("bust_bonus", 6, "H17")
    rows = {row["up_card"]: row for row in data["up_cards"]}
    assert list(rows) == ["Ace", "2", "3", "4", "5", "6", "7", "8", "9", "10"]
    for row in rows.values():
        parts = [
            exact(row[key])
            for key in (
                "suited_bust",
                "off_suit_bust",
                "three_eights_suited",
                "three_eights_off_suit",
                "no_bust",
            )
        ]
        assert sum(parts) == 1
        assert exact(row["bust"]) == 1 - parts[-1]
    assert sum(exact(row["probability"]) for row in rows.values()) == 1
    assert (rows["Ace"]["pays"], rows["10"]["pays"]) == (
        {"off_suit": "3", "suited": "50"},
        {"off_suit": "2", "suited": "20"},
    )
    # Published 6-deck H17 analysis (S. How, 2013): the 8 up, three 8s included.
    eight = rows["8"]
    assert round(exact(eight["suited_bust"]), 6) == Fraction("0.011133")
    assert round(exact(eight["three_eights_off_suit"]), 6) == Fraction("0.005041")
    assert round(exact(eight["ev"]), 6) == Fraction("-0.048772")
    edge = exact(data["house_edge"])
    assert edge == -exact(data["ev"])
    assert edge == -sum(exact(r["probability"]) * exact(r["ev"]) for r in rows.values())


def test_bust_bonus_defaults_to_six_decks_s17_and_s17_costs_more() -> None:
    default = no_floats(lammer("bust-bonus", "--json").stdout)
    h17 = no_floats(lammer("bust-bonus", "--h17", "--json").stdout)
    assert (default["decks"], default["dealer"], default["hits_soft_17"]) == (6, "S17", False)
    assert exact(default["house_edge"]) > exact(h17["house_edge"])  # H17 busts more


def test_bust_bonus_table_prints_every_exact_fraction() -> None:
    data = no_floats(lammer("bust-bonus", "--decks", "2", "--json").stdout)
    done = lammer("bust-bonus", "--decks", "2")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("Bust Bonus, 2 decks, dealer stands on soft 17 (S17)\n")
    for row in data["up_cards"]:
        assert row["suited_bust"]["fraction"] in text
        assert row["no_bust"]["fraction"] in text
        assert row["ev"]["fraction"] in text
    assert data["house_edge"]["fraction"] in text
    percent = round(exact(data["house_edge"]) * 100, 4)
    assert f"House edge       {Decimal(percent.numerator) / Decimal(percent.denominator)}%" in text


def test_bonus_craps_json_has_both_pay_tables_and_the_published_edges() -> None:
    done = lammer("bonus-craps", "--json")
    assert done.returncode == 0, done.stderr
    data = no_floats(done.stdout)
    tables = {t["paytable"]: {b["bet"]: b for b in t["bets"]} for t in data["paytables"]}
    assert sorted(tables) == [1, 2]
    assert [tables[1][b]["pays"] for b in ("all_small", "all_tall", "make_em_all")] == [
        "34",
        "34",
        "175",
    ]
    assert [tables[2][b]["pays"] for b in ("all_small", "all_tall", "make_em_all")] == [
        "30",
        "30",
        "150",
    ]
    # Published house edges of Pay Table 1: about 7.8% (All Small/Tall) and 7.5% (Make 'Em All).
    assert round(exact(tables[1]["all_small"]["house_edge"]), 3) == Fraction("0.078")
    assert round(exact(tables[1]["make_em_all"]["house_edge"]), 3) == Fraction("0.075")
    for bets in tables.values():
        for bet in bets.values():
            p = exact(bet["probability"])
            assert exact(bet["house_edge"]) == 1 - p * (Fraction(bet["pays"]) + 1)


def test_bonus_craps_one_pay_table_readable() -> None:
    done = lammer("bonus-craps", "--paytable", "2")
    assert done.returncode == 0, done.stderr
    assert "Bonus Craps, pay table 2" in done.stdout
    assert "pay table 1" not in done.stdout
    assert "Make 'Em All  150 to 1" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("bust-bonus", "--decks", "0"), "a shoe holds 1 to 8 decks, not 0"),
        (("bust-bonus", "--decks", "9"), "a shoe holds 1 to 8 decks, not 9"),
        (("bust-bonus", "--decks", "six"), "'six' is not a whole number of decks"),
        (("bust-bonus", "--s17", "--h17"), "not allowed with argument --s17"),
        (("bonus-craps", "--paytable", "3"), "invalid choice: 3"),
        (("roulette",), "invalid choice: 'roulette'"),
        ((), "the following arguments are required: GAME"),
    ],
)
def test_bad_arguments_exit_2_with_a_specific_message(args: tuple[str, ...], message: str) -> None:
    done = lammer(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""


# ---------------------------------------------------------------------------------------
# Cover All Bonus (lammer odds cover-all; the numbers are tested in tests/bulk)

COLUMN_KEYS = {"hands", "exact", "rounds", "house_edge", "house_edge_fraction", "std_error"}


def lowest_terms(text: str) -> Fraction:
    numerator, denominator = (int(part) for part in text.split("/"))
    assert math.gcd(numerator, denominator) == 1, text
    return Fraction(numerator, denominator)


def test_cover_all_exact_column_json() -> None:
    done = lammer("cover-all", "--game", "TCP", "--hands", "2", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["game"] == "TCP"
    (column,) = data["columns"]
    assert set(column) >= COLUMN_KEYS
    assert (column["hands"], column["exact"], column["rounds"], column["std_error"]) == (
        2,
        True,
        None,
        None,
    )
    assert [(r["hand"], r["pays"]) for r in column["rows"]] == [
        ("Royal Flush", "100"),
        ("Straight Flush", "60"),
        ("Three of a Kind", "50"),
        ("Straight", "5"),
    ]
    chances = [lowest_terms(r["probability_fraction"]) for r in column["rows"]]
    none = lowest_terms(column["no_qualifier_fraction"])
    assert sum(chances) + none == 1
    back = sum((Fraction(r["pays"]) + 1) * p for r, p in zip(column["rows"], chances, strict=True))
    edge = lowest_terms(column["house_edge_fraction"])
    assert edge == 1 - back
    assert column["house_edge"] == pytest.approx(float(edge), abs=1e-15)
    for row, p in zip(column["rows"], chances, strict=True):
        assert row["probability"] == pytest.approx(float(p), rel=1e-12)


def test_cover_all_simulated_column_is_reproducible() -> None:
    args = ("cover-all", "--game", "CSP", "--hands", "4", "--rounds", "20000", "--seed", "7")
    first, again = lammer(*args, "--json"), lammer(*args, "--json")
    assert first.returncode == 0, first.stderr
    assert first.stdout == again.stdout
    (column,) = json.loads(first.stdout)["columns"]
    assert (column["exact"], column["rounds"], column["seed"]) == (False, 20000, 7)
    assert column["house_edge_fraction"] is None
    assert 0 < column["std_error"] < 0.01
    assert column["half_width_95"] == pytest.approx(1.959964 * column["std_error"], rel=1e-6)
    assert sum(r["probability"] for r in column["rows"]) + column["no_qualifier"] == (
        pytest.approx(1.0, abs=1e-12)
    )
    other = json.loads(lammer(*args[:-1], "8", "--json").stdout)["columns"][0]
    assert other["house_edge"] != column["house_edge"]


def summary_lines(text: str, hands: int) -> list[str]:
    """The summary rows of a par sheet's text for a column of ``hands`` simulated."""
    return [x for x in text.splitlines() if x.split()[:1] == [str(hands)] and "simulated" in x]


def test_cover_all_without_a_remainder_round_prints_a_one_sided_bound() -> None:
    """200 rounds of three Three Card Poker hands deal no three hands at one level (this
    seed): no "± 0.0000 %", which would claim the figure exact, but the bound below it."""
    args = ("cover-all", "--game", "TCP", "--hands", "3", "--rounds", "200")
    (column,) = json.loads(lammer(*args, "--json").stdout)["columns"]
    assert (column["remainder_rounds"], column["std_error"]) == (0, 0.0)
    assert column["half_width_95"] is None
    assert 0 < column["edge_drop_95"] < column["house_edge"]
    done = lammer(*args)
    assert done.returncode == 0, done.stderr
    (line,) = summary_lines(done.stdout, 3)
    assert f"+0/-{column['edge_drop_95'] * 100:.4f} %" in line
    assert "±" not in line
    assert "one-sided" in done.stdout
    assert "rule of three" in done.stdout
    with_remainder = lammer("cover-all", "--game", "TCP", "--hands", "8", "--rounds", "5000")
    (line,) = summary_lines(with_remainder.stdout, 8)
    assert "± " in line
    assert "+0/-" not in line


def test_cover_all_with_no_spread_in_any_board_class_says_so() -> None:
    """Two rounds for each of Mississippi Stud's 1,755 flops: the remainder rounds are the
    trips boards', where every hand makes trips in both rounds, so no class varies and the
    standard error is 0 although the remainder was seen: "n/a", never "± 0.0000 %"."""
    args = ("cover-all", "--game", "MSP", "--hands", "3", "--rounds", "2")
    (column,) = json.loads(lammer(*args, "--json").stdout)["columns"]
    assert (column["rounds"], column["board_classes"]) == (2 * 1755, 1755)
    assert column["remainder_rounds"] > 0
    assert column["std_error"] == 0.0
    assert (column["half_width_95"], column["edge_drop_95"]) == (None, None)
    done = lammer(*args)
    assert done.returncode == 0, done.stderr
    (line,) = summary_lines(done.stdout, 3)
    assert " n/a " in line
    assert "±" not in line
    assert "no spread to measure" in done.stdout


def test_cover_all_one_column_across_games_is_a_list() -> None:
    done = lammer("cover-all", "--hands", "8", "--rounds", "5000", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [d["game"] for d in data] == ["CSP", "TCP"]  # the only tables with 8 hands
    assert all([c["hands"] for c in d["columns"]] == [8] for d in data)


def test_cover_all_readable_table_names_exact_figures() -> None:
    done = lammer("cover-all", "--game", "LIR", "--hands", "1")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("Cover All Bonus, Let It Ride (LIR), players only counted\n")
    assert "exact: 71333/649740" in text  # 1 - return of one five-card hand
    assert "  Royal Flush                 500 to 1  0.00000154  1/649740" in text
    assert done.stderr == ""  # no progress bar off a terminal


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """Every chunk of a PNG, each CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        chunks.append((kind, body))
        at += 12 + length
    return chunks


def test_cover_all_plot_writes_a_png_chart(tmp_path: Path) -> None:
    chart = tmp_path / "edge.png"
    done = lammer("cover-all", "--game", "TCP", "--rounds", "5000", "--plot", str(chart))
    assert done.returncode == 0, done.stderr
    chunks = png_chunks(chart.read_bytes())
    kinds = [kind for kind, _ in chunks]
    assert (kinds[0], kinds[-1]) == (b"IHDR", b"IEND")
    width, height, depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
    assert (width, height, depth, colour) == (1200, 600, 8, 6)  # 10x5 in at 120 dpi, RGBA
    pixels = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    assert len(pixels) == height * (1 + 4 * width)  # a filter byte, then RGBA per row
    text = dict(body.split(b"\0", 1) for kind, body in chunks if kind == b"tEXt")
    assert text[b"Title"] == b"Cover All Bonus: house edge by number of hands"
    description = text[b"Description"].decode()
    # the chart's data: TCP's seven columns, 2 hands exact
    exact = json.loads(lammer("cover-all", "--game", "TCP", "--hands", "2", "--json").stdout)
    edge = exact["columns"][0]["house_edge"] * 100
    assert description.startswith("TCP 2: " + f"{edge:.4f}%, 3: ")
    assert description.count("(sim)") == 6
    # the line is drawn: plenty of pixels in the first line colour (matplotlib's C0)
    from matplotlib.image import imread

    image = imread(chart)
    blue = np.all(np.abs(image[:, :, :3] - np.array([0x1F, 0x77, 0xB4]) / 255) < 0.08, axis=2)
    assert blue.sum() > 500


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("cover-all", "--hands", "0"), "hands must be at least 1, not 0"),
        (("cover-all", "--rounds", "1"), "rounds must be at least 2, not 1"),
        (("cover-all", "--seed", "x"), "'x' is not a whole number of seed"),
        (("cover-all", "--game", "BJ"), "invalid choice: 'BJ'"),
        (("cover-all", "--hands", "9"), "no Cover All Bonus pay table has a column for 9"),
        (("cover-all", "--game", "UTH", "--hands", "1"), "UTH Cover All Bonus has no pay-table"),
        (
            ("cover-all", "--game", "TCP", "--hands", "2", "--plot", "/nonexistent/dir/x.png"),
            "cannot write the chart to '/nonexistent/dir/x.png'",
        ),
    ],
)
def test_cover_all_bad_arguments_exit_2(args: tuple[str, ...], message: str) -> None:
    done = lammer(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stdout == ""


def test_cover_all_shows_a_progress_bar_on_a_terminal() -> None:
    """stderr on a real pty: a long run draws rich's bar there; stdout stays the table."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    args = ["cover-all", "--game", "CSP", "--hands", "5", "--rounds", "3000000", "--json"]
    proc = subprocess.Popen([LAMMER, "odds", *args], stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    assert proc.stdout is not None
    seen, out = bytearray(), bytearray()
    # The terminal and stdout are both read until the child closes them: a child whose
    # terminal is full waits for it to be read (rich's bar drawn under a lock), so a reader
    # that stopped at a deadline and then waited for stdout hung with it for good (a run at
    # load 30 took over 120 s). 6 s quiet; the deadline bounds a hang only.
    streams = {master: seen, proc.stdout.fileno(): out}
    deadline = time.monotonic() + 500
    try:
        while streams and time.monotonic() < deadline:
            ready, _, _ = select.select(list(streams), [], [], 0.2)
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                if chunk:
                    streams[fd] += chunk
                else:
                    del streams[fd]
        assert not streams, f"lammer odds still writing after 500 s; its terminal: {seen[-300:]!r}"
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        os.close(master)
    assert json.loads(out)["columns"][0]["hands"] == 5
    assert b"CSP, 5 hands: simulating" in seen
    assert b"%" in seen  # rich's percentage column


def test_cover_all_plot_without_matplotlib_says_what_to_install(tmp_path: Path) -> None:
    """matplotlib is an optional extra: hide it (a package that fails to import, first on
    the path) and ``--plot`` exits 2 with the install hint; nothing is printed."""
    fake = tmp_path / "matplotlib"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise ImportError("no matplotlib here")\n')
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    args = ["cover-all", "--game", "TCP", "--hands", "2", "--plot", str(tmp_path / "x.png")]
    done = subprocess.run(
        [LAMMER, "odds", *args],
        capture_output=True,
        text=True,
        timeout=CLI_BOUND_S,
        env=env,
        check=False,
    )
    assert done.returncode == 2
    assert "--plot needs matplotlib (pip install 'lammer[plot]'" in done.stderr
    assert done.stdout == ""
    assert not (tmp_path / "x.png").exists()


def test_cover_all_says_why_a_stratified_simulation_dealt_other_than_rounds() -> None:
    # Issue 20: --rounds 20000 simulated 268,918 UTH rounds without saying why: every board
    # class is dealt at least twice. Mississippi Stud's three board cards fall in 1,755
    # classes up to suits (the known count of strategically distinct flops), so 2 rounds
    # asked deal 3,510 (a cheap column: UTH's 134,459 classes take minutes on a busy machine).
    args = ("cover-all", "--game", "MSP", "--hands", "3", "--rounds", "2")
    text = lammer(*args)
    assert text.returncode == 0, text.stderr
    assert (
        "simulated: 3,510 rounds, seed 20261129 (2 asked, shared over 1,755 board "
        "classes by their chance, rounded, at least 2 each)"
    ) in text.stdout
    (column,) = json.loads(lammer(*args, "--json").stdout)["columns"]
    assert (column["rounds"], column["rounds_asked"], column["board_classes"]) == (3510, 2, 1755)


def test_cover_all_without_community_cards_deals_exactly_the_rounds_asked() -> None:
    done = lammer("cover-all", "--game", "CSP", "--hands", "3", "--rounds", "20000")
    assert done.returncode == 0, done.stderr
    assert "simulated: 20,000 rounds, seed 20261129\n" in done.stdout
    assert "asked" not in done.stdout
