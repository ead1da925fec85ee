"""``lammer journal``: export as JSON lines, read-only, clear errors; run as a subprocess."""

from __future__ import annotations

import json
import stat
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


def test_output_file_is_created_for_its_owner_only(journal_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "export" / "craps1.jsonl"
    out.parent.mkdir()
    # Under umask 000 a plain open() would make it 0666, readable and writable by anyone.
    result = subprocess.run(
        ["bash", "-c", 'umask 000 && exec "$@"', "-", LAMMER, "journal", journal_file, "-o", out],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr == f"lammer journal: 4 records written to {out}\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert [json.loads(line)["seq"] for line in out.read_text().splitlines()] == [1, 2, 3, 4]
    assert sorted(p.name for p in out.parent.iterdir()) == ["craps1.jsonl"]  # no temporary


def test_an_earlier_output_file_is_replaced_never_written_into(
    journal_file: Path, tmp_path: Path
) -> None:
    # Decided: an existing OUT with a looser mode is replaced by a new 0600 file, not
    # tightened in place, so a reader who already had it open never sees the new cards.
    out = tmp_path / "craps1.jsonl"
    out.write_text("old export\n")
    out.chmod(0o644)
    with out.open() as reader:  # someone who opened the old, readable file
        result = lammer("journal", journal_file, "--output", out)
        assert result.returncode == 0, result.stderr
        assert reader.read() == "old export\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert len(out.read_text().splitlines()) == 4


def test_output_that_is_a_symlink_the_journal_or_nowhere_is_refused(
    journal_file: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "someone-elses.txt"
    elsewhere.write_text("theirs\n")
    link = tmp_path / "export.jsonl"
    link.symlink_to(elsewhere)
    cases = [
        (link, "a symlink; give the path of a regular file"),
        (journal_file, "is the journal itself"),
        (tmp_path / "craps1.db-wal", "is the journal itself"),
        (tmp_path / "missing" / "x.jsonl", "no folder"),
        (Path("/dev/null"), "not a regular file"),
    ]
    for out, message in cases:
        result = lammer("journal", journal_file, "-o", out)
        assert result.returncode == 2, out
        assert message in result.stderr, result.stderr
    assert elsewhere.read_text() == "theirs\n"
    assert link.is_symlink()
    assert lammer("journal", journal_file).stdout.count("\n") == 4  # the journal is intact


@pytest.fixture
def long_journal(tmp_path: Path) -> Path:
    """A journal whose export is far larger than a pipe holds (64 KiB)."""
    path = tmp_path / "long.db"
    with Journal.open(path) as journal, journal.batch():
        for roll_id in range(1, 3001):
            journal.append("device", to_record(DiceRolled(roll_id=roll_id, dice=(6, 5))), ts=T0)
    return path


def test_piped_to_head_ends_quietly(long_journal: Path) -> None:
    result = subprocess.run(
        ["bash", "-c", f'"{LAMMER}" journal "{long_journal}" | head -1; echo "${{PIPESTATUS[0]}}"'],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    first, status = result.stdout.splitlines()
    assert json.loads(first)["seq"] == 1
    assert result.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored"
    assert status == "141"  # cut short, as `cat FILE | head -1` shows it: not 0
