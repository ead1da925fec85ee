"""A bad configuration file: ``lammer run`` and ``lammer check-config`` both refuse it with
exit status 2 and a message naming the key (docs/operators/configuration.md)."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest

from daemon.journal import Journal
from tests.conftest import CLI_BOUND_S
from tests.integration.harness import LAMMER

pytestmark = pytest.mark.integration

GOOD = """\
[table]
id = "t9"
game = "{game}"

[{device}]
port = "/dev/ttyUSB0"

[journal]
path = "{journal}"
"""

BAD = [
    # (what is wrong, TOML to add or replace, the line the operator must see)
    ("unknown game", {"game": "POKER"}, "table.game: must be one of"),
    (
        "decks out of range",
        {"extra": "[bust_bonus]\ndecks = 0\n"},
        "bust_bonus.decks: must be between 1 and 8, got 0",
    ),
    (
        "a typo",
        {"extra": '[mqtt]\nhots = "broker"\n'},
        "mqtt.hots: unknown key; did you mean 'host'?",
    ),
    (
        "no dice reader",
        {"game": "CRAPS", "device": "shuffler"},
        "dice_reader: required for a CRAPS table",
    ),
    ("not TOML", {"extra": "[mqtt\n"}, "not valid TOML"),
]


def _write(tmp_path: Path, game: str = "UTH", device: str = "", extra: str = "") -> Path:
    device = device or ("dice_reader" if game == "CRAPS" else "shuffler")
    journal = tmp_path / "journal.db"
    path = tmp_path / "table.toml"
    path.write_text(GOOD.format(game=game, device=device, journal=journal) + extra)
    return path


@pytest.mark.parametrize(("problem", "change", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_config_exits_2_naming_the_key(
    tmp_path: Path, problem: str, change: dict[str, str], message: str
) -> None:
    config = _write(tmp_path, **change)
    for argv in ([LAMMER, "run", "--config", str(config)], [LAMMER, "check-config", str(config)]):
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=CLI_BOUND_S, check=False
        )
        assert done.returncode == 2, (problem, argv, done.stderr)
        assert message in done.stderr, (problem, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stdout == ""
    assert not (tmp_path / "journal.db").exists()  # nothing started


def test_the_good_config_passes_the_check(tmp_path: Path) -> None:
    done = subprocess.run(
        [LAMMER, "check-config", str(_write(tmp_path))],
        capture_output=True,
        text=True,
        timeout=CLI_BOUND_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "table t9: UTH" in done.stdout


@pytest.mark.parametrize("problem", ["not a journal", "in use"])
def test_a_journal_that_cannot_be_opened_is_one_clear_line(tmp_path: Path, problem: str) -> None:
    # "Bad input gets a clear, specific error; nothing crashes": lammer run names the
    # journal and what is wrong, without a traceback, and exits non-zero (systemd retries).
    config = _write(tmp_path)
    journal = tmp_path / "journal.db"
    with contextlib.ExitStack() as stack:
        if problem == "not a journal":
            journal.write_text("minutes of the last meeting\n")
        else:
            stack.enter_context(Journal.open(journal))  # another daemon holds it
        done = subprocess.run(
            [LAMMER, "run", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=CLI_BOUND_S,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("lammer: "), done.stderr
    assert str(journal) in done.stderr
