"""``lammer journal``: export as JSON lines, read-only, clear errors; run as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.journal import Journal
from daemon.records import to_record
from rules.events import DiceRolled, RollCheck, RollDecided

LAMMER = Path(sys.executable).with_name("lammer")
T0 = datetime(2026, 11, 29, 14, 3, 7, 123000, tzinfo=UTC)


def lammer(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LAMMER), *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def journal_file(tmp_path: Path) -> Path:
    path = tmp_path / "craps1.db"
    with Journal.open(path) as journal:
        journal.append("device", to_record(DiceRolled(roll_id=5001, dice=(6, 5))), ts=T0)
        journal.append(
            "device", to_record(RollCheck(roll_id=5003, dice=(1, 6), reason="ON_CHIPS")), ts=T0
        )
        decided = RollDecided(roll_id=5003, valid=False, operator="stick1", at=T0)
        journal.append("decision", to_record(decided), ts=T0)
        message = journal.append_publish(
            "craps/roll",
            {"table": "craps1", "roll_id": 5003, "status": "declared_invalid"},
            retained=False,
            ts=T0,
        )
        journal.mark_published(message.seq)
    return path


def test_export_all(journal_file: Path) -> None:
    result = lammer("journal", journal_file)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["seq"], line["kind"]) for line in lines] == [
        (1, "device"),
        (2, "device"),
        (3, "decision"),
        (4, "publish"),
    ]
    assert lines[0] == {
        "seq": 1,
        "ts": "2026-11-29T14:03:07.123Z",
        "kind": "device",
        "type": "DiceRolled",
        "roll_id": 5001,
        "dice": [6, 5],
    }
    assert lines[2]["operator"] == "stick1"
    assert lines[3]["topic"] == "craps/roll"
    assert lines[3]["published"] is True
    assert lines[3]["payload"]["seq"] == 4
    assert lines[3]["payload"]["status"] == "declared_invalid"


def test_after_and_kind(journal_file: Path) -> None:
    result = lammer("journal", journal_file, "--after", "1", "--kind", "device")
    assert result.returncode == 0, result.stderr
    (line,) = (json.loads(text) for text in result.stdout.splitlines())
    assert (line["seq"], line["type"]) == (2, "RollCheck")


def test_reading_creates_and_changes_nothing(journal_file: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in journal_file.parent.iterdir()}
    assert lammer("journal", journal_file).returncode == 0
    assert {p.name: p.stat().st_mtime_ns for p in journal_file.parent.iterdir()} == before


def test_while_the_daemon_writes(journal_file: Path) -> None:
    with Journal.open(journal_file) as writer:
        writer.append("alarm", {"code": "MODE_MISMATCH"}, ts=T0)
        result = lammer("journal", journal_file, "--after", "4")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["code"] == "MODE_MISMATCH"


def test_missing_or_not_a_journal(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    result = lammer("journal", missing)
    assert result.returncode == 2
    assert "no such file" in result.stderr
    assert result.stdout == ""
    assert not missing.exists()
    assert list(tmp_path.iterdir()) == []
    text = tmp_path / "t1.toml"
    text.write_text('[table]\nid = "t1"\n' * 200)
    result = lammer("journal", text)
    assert result.returncode == 2
    assert f"{text} is not a lammer journal" in result.stderr
    result = lammer("journal", text, "--after", "-1")
    assert result.returncode == 2
    assert "must be 0 or more" in result.stderr
