"""``lammer journal``: export as JSON lines, read-only, clear errors; run as a subprocess."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from daemon.journal import Journal
from daemon.records import to_record
from daemon.segments import archived
from rules.events import DiceRolled, RollCheck, RollDecided
from tests.conftest import CLI_BOUND_S
from tests.daemon.journals import build, execute, query

# make check leaves these out (make test runs them): each runs `lammer journal`, a new
# Python each time (about a second of CPU).
pytestmark = pytest.mark.heavy

LAMMER = Path(sys.executable).with_name("lammer")
T0 = datetime(2026, 11, 29, 14, 3, 7, 123000, tzinfo=UTC)


def lammer(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LAMMER), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=CLI_BOUND_S,
        check=False,
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
        timeout=CLI_BOUND_S,
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
        timeout=CLI_BOUND_S,
        check=False,
    )
    first, status = result.stdout.splitlines()
    assert json.loads(first)["seq"] == 1
    assert result.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored"
    assert status == "141"  # cut short, as `cat FILE | head -1` shows it: not 0


# -- a journal over several gaming days (segments), written by the table's core ------------


@pytest.fixture(scope="module")
def table_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three gaming days (2026-11-30 to 2026-12-02, from 06:00 UTC), a segment each; only
    read by these tests."""
    return build(tmp_path_factory.mktemp("segments") / "t")


def _lines(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def _stored(live: Path) -> list[tuple[int, str, str]]:
    """Every record of every segment as (seq, ts, kind), read with sqlite3."""
    found: list[tuple[int, str, str]] = []
    for path in [s.path for s in archived(live)] + [live]:
        found += query(path, "SELECT seq, ts, kind FROM records ORDER BY seq")
    return found


def test_the_export_reads_every_segment_in_seq_order(table_journal: Path) -> None:
    stored = _stored(table_journal)
    lines = _lines(lammer("journal", table_journal))
    # Every record but the snapshots, which are left out by default.
    assert [(x["seq"], x["ts"], x["kind"]) for x in lines] == [
        r for r in stored if r[2] != "snapshot"
    ]
    assert {x["kind"] for x in lines} >= {"segment", "seal", "daemon", "device", "publish"}
    with_snapshots = _lines(lammer("journal", table_journal, "--snapshots"))
    assert [x["seq"] for x in with_snapshots] == [r[0] for r in stored]
    only = _lines(lammer("journal", table_journal, "--kind", "snapshot"))
    assert [x["seq"] for x in only] == [r[0] for r in stored if r[2] == "snapshot"]
    assert all("state" in x for x in only)


def test_after_reads_on_across_segments(table_journal: Path) -> None:
    stored = _stored(table_journal)
    oldest = archived(table_journal)[0].path
    [(last_of_oldest,)] = query(oldest, "SELECT max(seq) FROM records")
    lines = _lines(lammer("journal", table_journal, "--after", last_of_oldest - 2))
    assert [x["seq"] for x in lines] == [
        seq for seq, _, kind in stored if seq > last_of_oldest - 2 and kind != "snapshot"
    ]


def test_from_and_to_dates_are_the_gaming_days_the_segments_file(table_journal: Path) -> None:
    oldest, middle = (s.path for s in archived(table_journal))
    in_middle = [
        seq
        for (seq,) in query(middle, "SELECT seq FROM records WHERE kind != 'snapshot' ORDER BY seq")
    ]
    lines = _lines(lammer("journal", table_journal, "--from", "2026-12-01", "--to", "2026-12-01"))
    assert [x["seq"] for x in lines] == in_middle
    assert lines[0]["kind"] == "segment"
    assert lines[0]["gaming_day"] == "2026-12-01"
    assert lines[-1]["kind"] == "seal"
    # Open ended: from the second day on, and up to the first.
    later = _lines(lammer("journal", table_journal, "--from", "2026-12-01"))
    assert later[0]["seq"] == in_middle[0]
    assert later[-1]["seq"] == [r for r in _stored(table_journal) if r[2] != "snapshot"][-1][0]
    earlier = _lines(lammer("journal", table_journal, "--to", "2026-11-30"))
    [(last,)] = query(oldest, "SELECT max(seq) FROM records")
    assert (earlier[0]["seq"], earlier[-1]["seq"]) == (1, last)
    assert _lines(lammer("journal", table_journal, "--from", "2026-12-05")) == []


def test_from_and_to_times_compare_with_each_record_time(table_journal: Path) -> None:
    stored = [r for r in _stored(table_journal) if r[2] != "snapshot"]
    start, end = stored[10], stored[40]
    lines = _lines(lammer("journal", table_journal, "--from", start[1], "--to", end[1]))
    assert [x["seq"] for x in lines] == [r[0] for r in stored if start[1] <= r[1] <= end[1]]
    assert (lines[0]["ts"], lines[-1]["ts"]) == (start[1], end[1])  # inclusive
    # The same instant written with an offset.
    at = datetime.fromisoformat(start[1]).astimezone(timezone(timedelta(hours=2)))
    again = _lines(lammer("journal", table_journal, "--from", at.isoformat(), "--to", end[1]))
    assert again == lines


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2026-12-01T10:00", "has no time zone: add Z (UTC) or an offset"),
        ("2026-13-01", "not a date YYYY-MM-DD"),
        ("yesterday", "not a date (YYYY-MM-DD) or a time (ISO 8601"),
    ],
)
def test_a_bad_from_is_refused(table_journal: Path, value: str, message: str) -> None:
    result = lammer("journal", table_journal, "--from", value)
    assert (result.returncode, result.stdout) == (2, "")
    assert message in result.stderr


def test_the_export_takes_the_journal_from_the_configuration(
    table_journal: Path, tmp_path: Path
) -> None:
    config = tmp_path / "c1.toml"
    config.write_text(
        '[table]\nid = "c1"\ngame = "CRAPS"\n[dice_reader]\nport = "/dev/null"\n'
        f'[journal]\npath = "{table_journal}"\n'
    )
    assert _lines(lammer("journal", "--config", config)) == _lines(lammer("journal", table_journal))
    result = lammer("journal")
    assert result.returncode == 2
    assert "a FILE (the journal's live segment) or --config is required" in result.stderr
    result = lammer("journal", table_journal, "--key-file", config)
    assert result.returncode == 2
    assert "--key-file is for 'lammer journal verify'" in result.stderr


def test_reading_segments_creates_and_changes_nothing(table_journal: Path) -> None:
    folder = table_journal.parent

    def listing() -> dict[str, tuple[int, int]]:
        return {
            str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_mode)
            for p in folder.rglob("*")
        }

    before = listing()
    assert lammer("journal", table_journal, "--snapshots").returncode == 0
    assert lammer("journal", "verify", table_journal).returncode == 0
    assert listing() == before


def test_output_into_the_archive_is_refused(table_journal: Path) -> None:
    segment = archived(table_journal)[0].path
    for out, message in [
        (segment, "is in the journal's archive folder"),
        (segment.parent / "export.jsonl", "is in the journal's archive folder"),
        (table_journal.with_name(table_journal.name + "-shm"), "is the journal itself"),
    ]:
        result = lammer("journal", table_journal, "-o", out)
        assert result.returncode == 2, out
        assert message in result.stderr, result.stderr
    assert not (segment.parent / "export.jsonl").exists()


def test_verify_a_journal_from_before_segments(journal_file: Path) -> None:
    # No segment header and no start record (a journal brought to schema 3 from an older
    # one): the chain runs from genesis; nothing says which table to replay.
    result = lammer("journal", "verify", journal_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "records:   4 (seq 1 to 4)" in result.stdout
    assert "note:      no start record: the table is not replayed" in result.stdout
    execute(journal_file, "UPDATE records SET ts = '2026-11-29T14:03:07.124Z' WHERE seq = 2")
    result = lammer("journal", "verify", journal_file)
    assert result.returncode == 1
    assert result.stdout.startswith(
        f"lammer journal verify: segment {journal_file}, seq 2: hash does not match"
    )
